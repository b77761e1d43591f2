/*
 * In-flight accounting and drains of one LUN: commands are counted in two
 * epoch slots of one 64-bit word, so that a command joins and leaves with
 * one atomic operation each and a drain (LOGICAL UNIT RESET, CLEAR TASK
 * SET, scsi_lun_free) waits only for the commands that existed when it
 * came.  The bottom of the disk emulation: it calls nothing above it.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <pthread.h>

#include "scsi-disk-int.h"

/*
 * Drain epochs.  lun->inflight holds two counts of commands in flight, one
 * per epoch slot (31 bits each), which slot is current (EPOCH_CUR) and
 * whether a drain waits for the other one (EPOCH_DRAINING).  A command
 * joins the current slot and leaves the slot it joined.  A drain closes
 * the current epoch with one atomic XOR that makes the other slot current:
 * the closed slot then holds exactly the commands in flight at that
 * instant, and only loses commands, so the command that empties it (it
 * sees DRAINING and its slot not current in the value it replaced) ends
 * the drain.  While a closed slot drains, the current one cannot be closed
 * as well (new commands would join a slot someone waits for): drains that
 * come meanwhile wait in next_drain, and when the closed slot empties they
 * close the current one, which holds every command that was in flight when
 * they came and not in the slot just emptied.  A drain thus waits for at
 * most two epochs of commands that already exist, never for the LUN to go
 * idle.  The current slot and DRAINING change only under lun->lock; the
 * counts change without it.
 */
#define EPOCH_BITS 31
#define EPOCH_SHIFT(s) ((s) * EPOCH_BITS)
#define EPOCH_ONE(s) (1ull << EPOCH_SHIFT(s))
#define EPOCH_COUNT(w, s) (((w) >> EPOCH_SHIFT(s)) & ((1ull << EPOCH_BITS) - 1))
#define EPOCH_DRAINING (1ull << 62)
#define EPOCH_CUR (1ull << 63)
#define EPOCH_SLOT(w) ((unsigned)((w) >> 63))
unsigned sd_inflight_get(struct scsi_lun *lun)
{
    uint64_t w = atomic_load_explicit(&lun->inflight, memory_order_relaxed);
    unsigned s;

    /* Read the slot and count the command in it as one step: a drain may flip it. */
    do {
        s = EPOCH_SLOT(w);
    } while (!atomic_compare_exchange_weak(&lun->inflight, &w, w + EPOCH_ONE(s)));
    return s;
}

static void drain_list_append(struct scsi_drain **list, struct scsi_drain *d)
{
    while (*list) {
        list = &(*list)->next;
    }
    *list = d;
}

static void drain_run(void *opaque)
{
    struct scsi_drain *d = opaque;

    d->done(d);
}

/* Hands finished drains to their owners; lun is not touched (it may be freed meanwhile). */
static void drain_fire(struct scsi_drain *list)
{
    while (list) {
        struct scsi_drain *d = list;

        /* d is its owner's again once posted or done: read the link first. */
        list = d->next;
        if (d->thread) {
            iothread_post(d->thread, drain_run, d);
        } else {
            d->done(d);
        }
    }
}

/*
 * Closes the current epoch (lun->lock held, no closed epoch draining
 * unless draining is set, as when the previous one just emptied); returns
 * the commands in it.  An empty epoch is closed and done at once.
 */
static uint64_t epoch_close(struct scsi_lun *lun, bool draining)
{
    uint64_t old = atomic_fetch_xor(&lun->inflight,
                                    EPOCH_CUR | (draining ? 0 : EPOCH_DRAINING));
    uint64_t n = EPOCH_COUNT(old, EPOCH_SLOT(old));

    if (n == 0) {
        atomic_fetch_and(&lun->inflight, ~EPOCH_DRAINING);
    }
    return n;
}

/* The closed epoch has emptied: end its drains, start the next ones'. */
static void epoch_drained(struct scsi_lun *lun)
{
    struct scsi_drain *done, *next;

    pthread_mutex_lock(&lun->lock);
    done = lun->draining;
    next = lun->next_drain;
    lun->draining = NULL;
    lun->next_drain = NULL;
    if (!next) {
        atomic_fetch_and(&lun->inflight, ~EPOCH_DRAINING);
    } else if (epoch_close(lun, true) > 0) {
        lun->draining = next;
    } else {
        drain_list_append(&done, next);
    }
    pthread_mutex_unlock(&lun->lock);
    drain_fire(done);
}

void sd_inflight_put(struct scsi_lun *lun, unsigned slot)
{
    uint64_t old = atomic_fetch_sub(&lun->inflight, EPOCH_ONE(slot));

    if ((old & EPOCH_DRAINING) && EPOCH_SLOT(old) != slot && EPOCH_COUNT(old, slot) == 1) {
        epoch_drained(lun);
    }
}
unsigned scsi_lun_inflight(struct scsi_lun *lun)
{
    uint64_t w = atomic_load(&lun->inflight);

    return (unsigned)(EPOCH_COUNT(w, 0) + EPOCH_COUNT(w, 1));
}

void scsi_lun_drain_async(struct scsi_lun *lun, struct scsi_drain *d)
{
    d->next = NULL;
    pthread_mutex_lock(&lun->lock);
    if (lun->draining) {
        drain_list_append(&lun->next_drain, d);
        pthread_mutex_unlock(&lun->lock);
        return;
    }
    if (epoch_close(lun, false) > 0) {
        lun->draining = d;
        pthread_mutex_unlock(&lun->lock);
        return;
    }
    pthread_mutex_unlock(&lun->lock);
    drain_fire(d);
}

/* scsi_lun_free's wait: the only drain that blocks its caller. */
struct sync_drain {
    struct scsi_drain d;
    struct scsi_lun *lun;
    bool done;
};

static void sync_drain_done(struct scsi_drain *d)
{
    struct sync_drain *sd = d->opaque;

    /* The waiter cannot return (and free lun) before this unlocks. */
    pthread_mutex_lock(&sd->lun->lock);
    sd->done = true;
    pthread_cond_broadcast(&sd->lun->drain_cond);
    pthread_mutex_unlock(&sd->lun->lock);
}

void sd_drain_sync(struct scsi_lun *lun)
{
    struct sync_drain sd = { .d = { .done = sync_drain_done }, .lun = lun };

    sd.d.opaque = &sd;
    scsi_lun_drain_async(lun, &sd.d);
    pthread_mutex_lock(&lun->lock);
    while (!sd.done) {
        pthread_cond_wait(&lun->drain_cond, &lun->lock);
    }
    pthread_mutex_unlock(&lun->lock);
}
