/*
 * A SCSI target device (SAM-5 4.6): it owns the logical units it serves,
 * answers the commands that belong to the target rather than to a LUN
 * (REPORT LUNS, and INQUIRY / REQUEST SENSE to a LUN that does not exist),
 * and represents each initiator connection as an I_T nexus that carries
 * that initiator's unit attentions.  LUNs are addressed by a target port
 * (0-255, virtio-scsi's target byte) and a LUN (0-16383).  Transports
 * (virtio-scsi) decode their addressing and hand commands to a nexus; the
 * disk emulation (scsi-disk.h) runs the commands that reach a LUN.
 *
 * Threading: LUNs are added and nexuses created and freed on the main
 * thread; commands run on any thread and take no lock (the LUN table and a
 * nexus's table are immutable once built; unit attentions are atomics).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_SCSI_TARGET_H
#define VHOST_SCSI_SCSI_TARGET_H

#include <stdbool.h>
#include <stdint.h>

#include "scsi-disk.h"

#define SCSI_TARGET_MAX_PORT 255
#define SCSI_TARGET_MAX_LUN 16383

struct scsi_target;
struct scsi_nexus;

/* name is used in log lines. */
struct scsi_target *scsi_target_new(const char *name);
/* Frees every LUN.  Every nexus must have been freed first. */
void scsi_target_free(struct scsi_target *t);

/*
 * Takes ownership of l (freed on failure).  -EINVAL for an id out of
 * range, -EEXIST for a duplicate, -EBUSY once a nexus exists: LUNs are
 * added before initiators connect (adding them live is issue 13: every
 * nexus would get a table with the new LUN and REPORTED LUNS DATA HAS
 * CHANGED).
 */
int scsi_target_add_lun(struct scsi_target *t, unsigned port, unsigned lun_id,
                        struct scsi_lun *l);
/* The LUN at (port, lun_id), or NULL. */
struct scsi_lun *scsi_target_lun(const struct scsi_target *t, unsigned port, unsigned lun_id);
/* Whether any LUN is served on port (a transport's "no such target" test). */
bool scsi_target_has_port(const struct scsi_target *t, unsigned port);
unsigned scsi_target_lun_count(const struct scsi_target *t);
/* The i-th LUN in (port, lun) order, i < scsi_target_lun_count(). */
struct scsi_lun *scsi_target_lun_at(const struct scsi_target *t, unsigned i);
/* Nexuses alive (main thread). */
unsigned scsi_target_nexus_count(const struct scsi_target *t);

/*
 * A new I_T nexus (an initiator connected): every LUN has just powered on
 * for it (POWER ON, RESET unit attention pending), and LUN-wide conditions
 * raised before it existed are not reported to it.  Main thread.
 */
struct scsi_nexus *scsi_target_nexus_new(struct scsi_target *t, const char *name);
/* The nexus's commands must all have completed.  Main thread. */
void scsi_target_nexus_free(struct scsi_nexus *nx);
const char *scsi_nexus_name(const struct scsi_nexus *nx);

/*
 * What this nexus reaches, as its transport asks before task management:
 * whether any LUN is served on port, and the LUN at (port, lun_id) or NULL.
 * Answered from the nexus's own table, which a live LUN change (issue 13)
 * replaces per nexus.
 */
bool scsi_nexus_has_port(const struct scsi_nexus *nx, unsigned port);
struct scsi_lun *scsi_nexus_lun(struct scsi_nexus *nx, unsigned port, unsigned lun_id);

/*
 * Executes cmd from this nexus for (port, lun_id); report_luns_wlun: it is
 * addressed to the REPORT LUNS well-known LUN of port.  Returns 0 when cmd
 * was taken: complete() is called exactly once, possibly before this
 * returns.  REPORT LUNS, to any LUN of the port, lists the port's LUNs; a
 * LUN that does not exist answers INQUIRY (peripheral qualifier 011b) and
 * REQUEST SENSE (LOGICAL UNIT NOT SUPPORTED).  Otherwise nothing is
 * called and the transport answers in its own way: -ENXIO when nothing is
 * served on port, -ENODEV for any other command to an absent LUN.
 */
int scsi_nexus_exec(struct scsi_nexus *nx, unsigned port, unsigned lun_id,
                    bool report_luns_wlun, struct scsi_cmd *cmd);

/* A device or bus reset for this initiator: POWER ON, RESET on every LUN. */
void scsi_nexus_reset(struct scsi_nexus *nx);
/* I_T NEXUS RESET of this nexus to port: I_T NEXUS LOSS on the port's LUNs, for it only. */
void scsi_nexus_loss(struct scsi_nexus *nx, unsigned port);

#endif
