/*
 * Unit attention state of a LUN and of each I_T nexus to it (see
 * scsi-disk.h): LUN-wide conditions are counted on the LUN and folded into
 * a nexus's pending set when one of its commands looks, so the data path
 * checks two words and takes no lock.  Below the command families: the
 * dispatch and REQUEST SENSE take conditions from here.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "scsi-disk-int.h"

void scsi_ua_init(struct scsi_ua_state *s, struct scsi_lun *lun)
{
    atomic_init(&s->pending, 1u << SCSI_UA_POWER_ON);
    atomic_init(&s->seen_events, atomic_load(&lun->ua_events));
    for (unsigned i = 0; i < SCSI_UA_COUNT; i++) {
        atomic_init(&s->seen_gen[i], atomic_load(&lun->ua_gen[i]));
    }
}

void scsi_ua_set(struct scsi_ua_state *s, enum scsi_ua ua)
{
    if ((unsigned)ua < SCSI_UA_COUNT) {
        atomic_fetch_or(&s->pending, 1u << ua);
    }
}

void scsi_lun_set_ua(struct scsi_lun *lun, enum scsi_ua ua)
{
    if ((unsigned)ua >= SCSI_UA_COUNT) {
        return;
    }
    if (ua == SCSI_UA_LUN_RESET) {
        scsi_pr_lun_reset(lun->pr);    /* a LOGICAL UNIT RESET ends SPC-2 reservations */
    }
    /* The count first: a nexus that sees the new event sum finds it. */
    atomic_fetch_add(&lun->ua_gen[ua], 1);
    atomic_fetch_add(&lun->ua_events, 1);
}

static struct scsi_ua_state *ua_state(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    return cmd->ua ? cmd->ua : &lun->own_ua;
}

/* The data path's check: two relaxed loads when nothing is pending. */
bool sd_ua_maybe_pending(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    struct scsi_ua_state *s = ua_state(lun, cmd);

    return atomic_load_explicit(&s->pending, memory_order_relaxed) ||
           atomic_load_explicit(&lun->ua_events, memory_order_relaxed) !=
           atomic_load_explicit(&s->seen_events, memory_order_relaxed);
}

/*
 * Folds the LUN-wide conditions raised since this nexus last looked into
 * its pending set.  Several threads may fold at once: the exchange on each
 * count hands every new event to exactly one of them, and setting a bit
 * twice is harmless.
 */
static void ua_fold(struct scsi_lun *lun, struct scsi_ua_state *s)
{
    unsigned ev = atomic_load(&lun->ua_events);

    if (ev == atomic_load(&s->seen_events)) {
        return;
    }
    for (unsigned i = 0; i < SCSI_UA_COUNT; i++) {
        unsigned g = atomic_load(&lun->ua_gen[i]);

        if (atomic_exchange(&s->seen_gen[i], g) != g) {
            atomic_fetch_or(&s->pending, 1u << i);
        }
    }
    atomic_store(&s->seen_events, ev);
}

/*
 * Takes the highest-priority pending UA (lowest enum value) of the
 * command's nexus, or -1.  A power-on report covers the resets it implies,
 * so those are cleared too.  Lock-free: the data path pays two atomic
 * loads when none is pending.
 */
int sd_take_ua(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    struct scsi_ua_state *s = ua_state(lun, cmd);
    unsigned cur;

    ua_fold(lun, s);
    cur = atomic_load(&s->pending);
    while (cur) {
        int ua = __builtin_ctz(cur);
        unsigned clear = 1u << ua;

        if (ua == SCSI_UA_POWER_ON) {
            clear |= 1u << SCSI_UA_LUN_RESET | 1u << SCSI_UA_NEXUS_LOSS;
        }
        if (atomic_compare_exchange_weak(&s->pending, &cur, cur & ~clear)) {
            return ua;
        }
    }
    return -1;
}
