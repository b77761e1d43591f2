/*
 * Persistent reservations of one logical unit (SPC-4 5.14): the
 * registrations of I_T nexuses, the reservation and its type, the
 * PRgeneration, the unit attentions owed to nexuses a reservation change
 * affected, and which commands a nexus may run under a reservation.  A
 * pure state machine over its own lock: the disk emulation
 * (scsi-disk-pr.c) decodes PERSISTENT RESERVE IN/OUT and asks it, and
 * the dispatch asks it before every command while a reservation (or an
 * owed unit attention) exists.  Internal to hw/scsi/.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_SCSI_PR_H
#define VHOST_SCSI_SCSI_PR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <glib.h>

#include "log-limit.h"
#include "scsi-sense.h"

/* Registrations one LUN keeps; one more is INSUFFICIENT REGISTRATION RESOURCES. */
#define SCSI_PR_MAX_REGS 128

/* Reservation types (SPC-4 table 216). */
enum {
    PR_TYPE_WRITE_EXCLUSIVE = 1,
    PR_TYPE_EXCLUSIVE_ACCESS = 3,
    PR_TYPE_WE_REGISTRANTS_ONLY = 5,
    PR_TYPE_EA_REGISTRANTS_ONLY = 6,
    PR_TYPE_WE_ALL_REGISTRANTS = 7,
    PR_TYPE_EA_ALL_REGISTRANTS = 8,
};

/* PERSISTENT RESERVE OUT service actions. */
enum {
    PR_OUT_REGISTER = 0,
    PR_OUT_RESERVE = 1,
    PR_OUT_RELEASE = 2,
    PR_OUT_CLEAR = 3,
    PR_OUT_PREEMPT = 4,
    PR_OUT_PREEMPT_AND_ABORT = 5,
    PR_OUT_REGISTER_AND_IGNORE = 6,
    PR_OUT_REGISTER_AND_MOVE = 7,
    PR_OUT_REPLACE_LOST = 8,
};

/* The SPC-2 reservation commands (obsolete in SPC-4, still sent by older cluster software). */
enum {
    PR_OP_RESERVE_6 = 0x16,
    PR_OP_RELEASE_6 = 0x17,
    PR_OP_RESERVE_10 = 0x56,
    PR_OP_RELEASE_10 = 0x57,
};

/* PERSISTENT RESERVE IN service actions. */
enum {
    PR_IN_READ_KEYS = 0,
    PR_IN_READ_RESERVATION = 1,
    PR_IN_REPORT_CAPABILITIES = 2,
    PR_IN_READ_FULL_STATUS = 3,
};

struct scsi_pr;

struct scsi_pr *scsi_pr_new(const char *lun_name, struct log_limit *log_limit);
void scsi_pr_free(struct scsi_pr *pr);

/*
 * Keeps the LUN's reservations in the state file path while APTPL is on,
 * and restores those saved there (none when there is no file).  naa is
 * the LUN's designator, which the file must name.  0, or -EINVAL for a
 * file refused (corrupt, foreign, another format) or -EIO for one that
 * cannot be read, with *why (g_free it) naming the LUN and the file; the
 * state is then untouched and APTPL stays refused.
 */
int scsi_pr_persist_at(struct scsi_pr *pr, const char *path, uint64_t naa, char **why);

/* Whether APTPL can be set (scsi_pr_persist_at succeeded). */
bool scsi_pr_can_persist(struct scsi_pr *pr);

/* Saves through store (NULL: the file system's, pr_file_write and pr_file_remove). */
void scsi_pr_set_store(struct scsi_pr *pr, const struct scsi_pr_store *store, void *opaque);

/*
 * Whether the next command may be refused or owed a unit attention: one
 * relaxed load on the data path; registrations alone restrict nothing.
 */
bool scsi_pr_restricts(const struct scsi_pr *pr);

enum scsi_pr_verdict {
    SCSI_PR_ALLOW,
    SCSI_PR_CONFLICT,          /* RESERVATION CONFLICT status */
    SCSI_PR_UA,                /* CHECK CONDITION, the unit attention in *ua (consumed) */
};
/*
 * The command cdb from it, under the current reservation: allowed, a
 * conflict (SPC-4 5.14.2 and SBC-3 4.17: what the type lets a non-holder
 * run), or a unit attention this nexus is owed.  Commands that never see
 * unit attentions (INQUIRY, REPORT LUNS, REQUEST SENSE) are not charged
 * one.  PERSISTENT RESERVE IN and OUT are always allowed: they decide
 * their own conflicts.
 */
enum scsi_pr_verdict scsi_pr_check(struct scsi_pr *pr, const struct scsi_it_id *it,
                                   const uint8_t *cdb, unsigned cdb_len, enum scsi_sc *ua);

/*
 * Whether cdb from it conflicts with the current reservation, as
 * scsi_pr_check decides, without charging a unit attention: for a command
 * a LUN's device server runs on another LUN on the nexus's behalf (the
 * READs and WRITEs of an EXTENDED COPY on its copy targets).
 */
bool scsi_pr_conflicts(struct scsi_pr *pr, const struct scsi_it_id *it, const uint8_t *cdb,
                       unsigned cdb_len);

/* A decoded PERSISTENT RESERVE OUT. */
struct scsi_pr_out {
    uint8_t sa, scope, type;
    uint64_t key;              /* RESERVATION KEY */
    uint64_t sa_key;           /* SERVICE ACTION RESERVATION KEY */
    bool spec_i_pt, all_tg_pt, aptpl;
    /* REGISTER AND MOVE: the nexus it moves to (on the sender's target) and UNREG. */
    const char *dest_initiator;
    uint16_t dest_rtpi;
    bool unreg;
};

/*
 * The initiator port name a TransportID (SPC-4 7.6.4) of len bytes names:
 * iSCSI (protocol 5h, format 00b, or 01b whose ISID is ignored: a nexus is
 * named by its initiator name) or SAS (6h, as "naa." and the address).
 * 0 with *name (g_free it), or -EINVAL with *bad the offset of the field
 * at fault and *bad_bit its bit (-1: the byte).
 */
int scsi_pr_transport_id_parse(const uint8_t *p, size_t len, char **name, size_t *bad,
                               int *bad_bit);

enum scsi_pr_result {
    SCSI_PR_GOOD,
    SCSI_PR_RESULT_CONFLICT,   /* RESERVATION CONFLICT */
    SCSI_PR_CHECK,             /* CHECK CONDITION with *sc */
    SCSI_PR_SAVING,            /* done, GOOD once the state file has it: w->done says */
};

/*
 * A PERSISTENT RESERVE OUT whose change waits for the state file.  done
 * runs once, on the LUN's saver thread, with 0 (the file has the change,
 * or a later state) or -errno (the save failed: the state is back to what
 * the file has, and every command waiting for it is told so); it must not
 * call back into the scsi_pr.  Embed it; the scsi_pr holds it until done.
 */
struct scsi_pr_waiter {
    void (*done)(struct scsi_pr_waiter *w, int ret);
    /* Private to scsi-pr.c. */
    uint64_t change;
    struct scsi_pr_waiter *next;
};

/*
 * Runs o for it.  While APTPL is on (or a save is pending), a change
 * returns SCSI_PR_SAVING and goes to the state file off the caller's
 * thread: the LUN's saver thread writes one snapshot at a time, taken
 * under the lock and written without it, so the PR OUTs that come while
 * one save runs share the next one; w->done then says how it went.  The
 * other commands (and PR IN) see the new state meanwhile.  *preempted is
 * set when PREEMPT AND ABORT removed other nexuses' registrations: the
 * caller completes the command only once the LUN's commands in flight
 * have (backend I/O cannot be recalled).
 */
enum scsi_pr_result scsi_pr_out(struct scsi_pr *pr, const struct scsi_it_id *it,
                                const struct scsi_pr_out *o, enum scsi_sc *sc,
                                bool *preempted, struct scsi_pr_waiter *w);

/*
 * The PERSISTENT RESERVE IN reply of service action sa, whole (the caller
 * truncates it to the allocation length), or NULL for an unknown service
 * action.
 */
GByteArray *scsi_pr_in(struct scsi_pr *pr, uint8_t sa);

/*
 * RESERVE(6)/(10) (reserve) or RELEASE(6)/(10) from it, with the SPC-3
 * 5.6.3 exceptions (CRH 1): under a persistent reservation, or while any
 * registration exists, the holder and (under the RO/AR types) registrants
 * get GOOD with nothing changed and everyone else RESERVATION CONFLICT;
 * otherwise the SPC-2 reservation of the whole LUN by one nexus, which
 * every other nexus's commands conflict with (PERSISTENT RESERVE IN and
 * OUT from anyone, as SPC-2 5.5.1 says).
 */
enum scsi_pr_result scsi_pr_legacy(struct scsi_pr *pr, const struct scsi_it_id *it,
                                   bool reserve);

/* A LOGICAL UNIT RESET: the SPC-2 reservation goes; persistent ones stay. */
void scsi_pr_lun_reset(struct scsi_pr *pr);

/* The current PRgeneration (tests, statistics). */
uint32_t scsi_pr_generation(struct scsi_pr *pr);

#endif
