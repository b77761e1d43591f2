/*
 * A fake SCSI target for unit tests of a transport (virtio-scsi): it
 * defines the functions of scsi-target.h that a transport calls, and the
 * three of scsi-disk.h that its task management calls, so a test links it
 * instead of the SCSI layer.  It records every call, holds every command
 * until the test completes it with the result it chooses, holds every LUN
 * drain until the test ends it, and refuses commands as the test says —
 * so the test sees exactly what the transport hands the target and
 * decides when and how the target answers.
 *
 * Threading: commands arrive on I/O threads; the record is locked and the
 * waits are bounded.  Completions and drain ends run on the thread the
 * transport named (cmd->thread, d->thread), as the real target's do.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef TESTS_UNIT_FAKE_SCSI_TARGET_H
#define TESTS_UNIT_FAKE_SCSI_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scsi-target.h"

/* A command as it reached the fake, copied when it arrived. */
struct fake_cmd {
    struct scsi_nexus *nx;
    unsigned port, lun;
    bool wlun;
    uint8_t cdb[32];
    unsigned cdb_len;
    uint64_t tag;
    size_t out_len, in_len;       /* bytes in data_out / data_in */
    unsigned out_cnt, in_cnt;     /* their iovec counts */
    uint8_t *out;                 /* a copy of the data-out bytes */
    struct scsi_cmd *cmd;         /* until completed */
};

struct scsi_target *fake_target_new(void);
void fake_target_free(struct scsi_target *t);
/* A LUN at (port, lun), named "fakePORT:LUN". */
void fake_target_add_lun(struct scsi_target *t, unsigned port, unsigned lun);
/* scsi_nexus_exec returns err (-ENXIO, -ENODEV) from now on; 0: takes commands. */
void fake_target_refuse(struct scsi_target *t, int err);

/* Waits (bounded) until n commands in all have arrived. */
void fake_wait_cmds(struct scsi_target *t, unsigned n);
unsigned fake_cmd_count(struct scsi_target *t);
const struct fake_cmd *fake_cmd_at(struct scsi_target *t, unsigned i);
/*
 * Completes the i-th command, on its thread: data_in gets in_len bytes of
 * data (data_in_xfer = what fitted), status and sense as given.
 */
void fake_complete(struct scsi_target *t, unsigned i, uint8_t status, const uint8_t *sense,
                   unsigned sense_len, const void *data, size_t len);
/*
 * Completes commands first .. first + n - 1, GOOD and without data, in
 * one turn of their thread (they must share one), as a backend that
 * finishes a batch at once does.
 */
void fake_complete_batch(struct scsi_target *t, unsigned first, unsigned n);
/* Does nothing: run on a thread, its return says the turn before it ended. */
void fake_nothing(void *opaque);

/* Nexuses: created in all, alive, and by creation order. */
unsigned fake_nexus_created(struct scsi_target *t);
unsigned fake_nexus_alive(struct scsi_target *t);
struct scsi_nexus *fake_nexus_at(struct scsi_target *t, unsigned i);
const char *fake_nexus_name(struct scsi_nexus *nx);
/* scsi_nexus_reset calls, and scsi_nexus_loss calls for port. */
unsigned fake_nexus_resets(struct scsi_nexus *nx);
unsigned fake_nexus_losses(struct scsi_nexus *nx, unsigned port);

/*
 * Tells nx's transport of a LUN change through the hooks it registered
 * (scsi_nexus_set_events), as the real target does after a change; call
 * it on the transport's main thread.  A resize reports 2Ah/09h.
 */
enum fake_change { FAKE_LUN_ADDED, FAKE_LUN_REMOVED, FAKE_LUN_RESIZED };
void fake_nexus_announce(struct scsi_nexus *nx, enum fake_change change, unsigned port,
                         unsigned lun);

/* Drains started on the LUN at (port, lun) in all, and not yet ended. */
unsigned fake_drains(struct scsi_target *t, unsigned port, unsigned lun);
unsigned fake_drains_pending(struct scsi_target *t, unsigned port, unsigned lun);
/* Ends the LUN's oldest pending drain (its done() runs on its thread). */
void fake_drain_end(struct scsi_target *t, unsigned port, unsigned lun);
/* scsi_lun_set_ua(lun, ua) calls on the LUN at (port, lun). */
unsigned fake_lun_uas(struct scsi_target *t, unsigned port, unsigned lun, enum scsi_ua ua);

#endif
