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
 * Threading: LUNs are added, removed and resized, and nexuses created and
 * freed, on the main thread; commands run on the I/O threads and take no
 * lock: each nexus reads an immutable table that a change replaces whole
 * (freed after a grace period of the I/O threads), and unit attentions
 * are atomics.
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
/*
 * Frees the target, not its LUNs (they are the caller's: one LUN may be
 * mapped by several targets).  Every nexus must have been freed first.
 */
void scsi_target_free(struct scsi_target *t);
/* Frees the target and every LUN it still maps: for an owner that gave each LUN to it alone. */
void scsi_target_free_luns(struct scsi_target *t);

/*
 * The threads that run the target's commands (the transports' request
 * queue threads) and the main thread, where LUN changes are made: a LUN
 * table replaced by a change is freed after a grace period of those
 * threads.  Without this call (tests, fuzzers: one thread), old tables
 * are freed at once.
 */
void scsi_target_set_threads(struct scsi_target *t, struct iothread *main,
                             struct iothread *const *threads, unsigned n);

/*
 * Maps l at (port, lun_id); l stays the caller's and must outlive the
 * mapping (until scsi_target_remove_lun hands it back, or the target is
 * freed).  -EINVAL for an id out of range, -EEXIST for a duplicate.  Live (main
 * thread): every nexus gets the LUN with POWER ON pending, and REPORTED
 * LUNS DATA HAS CHANGED on the port's other LUNs; its transport is told
 * (lun_added).
 */
int scsi_target_add_lun(struct scsi_target *t, unsigned port, unsigned lun_id,
                        struct scsi_lun *l);
/*
 * Unmaps the LUN at (port, lun_id) (main thread): from the next command
 * on, no nexus reaches it (absent-LUN answers), the port's other LUNs get
 * REPORTED LUNS DATA HAS CHANGED and the transports are told
 * (lun_removed).  Commands already running on it complete.  Once no
 * thread can reach it and they have, removed(lun, opaque) runs on the
 * main thread: the caller may free the LUN then (NULL: the caller keeps
 * it alive past the target anyway).
 * -ENOENT if nothing is mapped there, -EINVAL for an id out of range.
 */
typedef void scsi_target_removed_fn(struct scsi_lun *lun, void *opaque);
int scsi_target_remove_lun(struct scsi_target *t, unsigned port, unsigned lun_id,
                           scsi_target_removed_fn *removed, void *opaque);
/*
 * Grows the LUN at (port, lun_id) to size bytes (scsi_lun_resize): every
 * nexus gets CAPACITY DATA HAS CHANGED and the transports are told
 * (lun_changed).  Main thread.  0, or -errno with *err saying why.
 */
int scsi_target_resize_lun(struct scsi_target *t, unsigned port, unsigned lun_id,
                           uint64_t size, GError **err);
/*
 * l changed under every target that maps it (scsi_lun_resize of a shared
 * LUN): tells the transports of this target's nexuses, for each address
 * it maps l at.  The unit attention is the LUN's own, raised once.
 */
void scsi_target_lun_changed(struct scsi_target *t, struct scsi_lun *l);
/* The LUN at (port, lun_id), or NULL. */
struct scsi_lun *scsi_target_lun(const struct scsi_target *t, unsigned port, unsigned lun_id);
/* Whether any LUN is served on port (a transport's "no such target" test). */
bool scsi_target_has_port(const struct scsi_target *t, unsigned port);
unsigned scsi_target_lun_count(const struct scsi_target *t);
/* The i-th LUN in (port, lun) order, i < scsi_target_lun_count(), and its id. */
struct scsi_lun *scsi_target_lun_at(const struct scsi_target *t, unsigned i);
bool scsi_target_lun_id_at(const struct scsi_target *t, unsigned i, unsigned *port,
                           unsigned *lun_id);
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
 * The initiator port name the nexus presents (default: its name), which
 * persistent reservations know it by, together with the target's name
 * and the port: a front-end that reconnects with the same name is the
 * same I_T nexus, and keeps its registrations.  Set it before the nexus
 * runs commands.  Main thread.
 */
void scsi_nexus_set_initiator(struct scsi_nexus *nx, const char *initiator);
const char *scsi_nexus_initiator(const struct scsi_nexus *nx);

/*
 * What a nexus's transport hears of live LUN changes, on the main thread,
 * after the change is visible to its commands: a LUN mapped, unmapped, or
 * whose parameters changed (asc/ascq of the unit attention raised, e.g.
 * 2Ah/09h CAPACITY DATA HAS CHANGED).  Any hook may be NULL.
 */
struct scsi_nexus_events {
    void (*lun_added)(void *opaque, unsigned port, unsigned lun_id);
    void (*lun_removed)(void *opaque, unsigned port, unsigned lun_id);
    void (*lun_changed)(void *opaque, unsigned port, unsigned lun_id, uint8_t asc,
                        uint8_t ascq);
};
void scsi_nexus_set_events(struct scsi_nexus *nx, const struct scsi_nexus_events *ev,
                           void *opaque);

/*
 * What this nexus reaches, as its transport asks before task management:
 * whether any LUN is served on port, and the LUN at (port, lun_id) or NULL.
 * Answered from the nexus's own table, which a live LUN change replaces
 * per nexus.
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
