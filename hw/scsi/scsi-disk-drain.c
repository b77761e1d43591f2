/*
 * In-flight accounting and drains of one LUN: commands are counted in two
 * epochs, in a counter per I/O thread, so that a command joins and leaves
 * with plain stores to its own thread's cache line, and a drain (LOGICAL
 * UNIT RESET, CLEAR TASK SET, scsi_lun_free) waits only for the commands
 * that existed when it came.  The bottom of the disk emulation: it calls
 * nothing above it.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <pthread.h>

#include "asym-fence.h"
#include "scsi-disk-int.h"

/*
 * Drain epochs.  Every command joins the current epoch (state & 1) in its
 * I/O thread's counter and leaves the epoch it joined.  A drain closes the
 * current epoch by making the other one current and marking a drain in
 * progress (one store of state, under lun->lock); the closed epoch then
 * only loses commands, and the drain ends when its counters sum to zero.
 * While a closed epoch drains, the current one cannot be closed as well
 * (new commands would join an epoch someone waits for): drains that come
 * meanwhile wait in next_drain, and when the closed epoch empties they
 * close the current one, which holds every command that was in flight
 * when they came and not in the epoch just emptied.  A drain thus waits
 * for at most two epochs of commands that already exist, never for the
 * LUN to go idle.
 *
 * The counters are those of a per-CPU reader-writer semaphore, as in
 * scsi-disk-range.c, with its fence (asym-fence.h): a command's thread is its counter's only writer, so
 * joining is a plain store followed by a compiler barrier and a re-read
 * of state, and leaving a plain store and a read of state; the drain, the
 * rare side, pays the fence for both with membarrier(2) between its store
 * of state and its sum (Dekker: either the sum sees the command, or the
 * command sees the closed epoch).  A command that sees its epoch closed
 * under it moves to the current one; a command leaving a closed epoch
 * while the drain is on sums the counters again under lun->lock, and the
 * sum that finds zero ends the drain.  The locked read-modify-writes this
 * replaced (two per command) cost a fifth of a polled null LUN's IOPS at
 * QD32, as each waited for the stores before it to reach other cores.
 * Commands with no thread, and every command where membarrier is refused,
 * use slot 0 with sequentially consistent operations on both sides.
 */
#define INFLIGHT_SLOTS 65u
#define STATE_DRAINING 2u

struct inflight_slot {
    _Atomic uint64_t n[2];
    uint8_t pad[48];
};

struct sd_inflight {
    atomic_uint state;          /* current epoch (bit 0), STATE_DRAINING */
    bool asym;                  /* membarrier registered: joining has no fence */
    uint8_t pad[59];
    struct inflight_slot slot[INFLIGHT_SLOTS];
};
G_STATIC_ASSERT(sizeof(struct inflight_slot) == 64);

#define TOKEN(slot, epoch) ((slot) << 1 | (epoch))
#define TOKEN_SLOT(t) ((t) >> 1)
#define TOKEN_EPOCH(t) ((t) & 1u)

int sd_inflight_init(struct scsi_lun *lun)
{
    struct sd_inflight *f = g_aligned_alloc0(1, sizeof(*f), 64);

    atomic_init(&f->state, 0);
    for (unsigned i = 0; i < INFLIGHT_SLOTS; i++) {
        atomic_init(&f->slot[i].n[0], 0);
        atomic_init(&f->slot[i].n[1], 0);
    }
    f->asym = asym_fence_register();
    lun->inflight = f;
    return 0;
}

void sd_inflight_free(struct scsi_lun *lun)
{
    g_aligned_free(lun->inflight);
    lun->inflight = NULL;
}

/* Commands of epoch e on all threads; exact once e is closed and its movers have moved. */
static uint64_t epoch_sum(struct sd_inflight *f, unsigned e)
{
    uint64_t sum = 0;

    for (unsigned i = 0; i < INFLIGHT_SLOTS; i++) {
        sum += atomic_load_explicit(&f->slot[i].n[e], memory_order_relaxed);
    }
    return sum;
}

static void epoch_check(struct scsi_lun *lun);

/* Adds d to epoch e's count in slot s (its thread's own unless 0); returns state after. */
static unsigned count(struct sd_inflight *f, unsigned s, unsigned e, int64_t d)
{
    return asym_add_then_read(&f->slot[s].n[e], d, s != 0, &f->state);
}

/* Leaves epoch e of slot s; sums again if a drain may be waiting for e. */
static void leave(struct scsi_lun *lun, unsigned s, unsigned e)
{
    unsigned st = count(lun->inflight, s, e, -1);

    if ((st & STATE_DRAINING) && (st & 1u) != e) {
        epoch_check(lun);
    }
}

unsigned sd_inflight_get(struct scsi_lun *lun, unsigned thread_id)
{
    struct sd_inflight *f = lun->inflight;
    unsigned s = f->asym && thread_id < INFLIGHT_SLOTS ? thread_id : 0;

    for (;;) {
        unsigned e = atomic_load_explicit(&f->state, memory_order_relaxed) & 1u;

        if ((count(f, s, e, 1) & 1u) == e) {
            return TOKEN(s, e);
        }
        /* Closed as we joined: the drain may or may not have counted us; move. */
        leave(lun, s, e);
    }
}

void sd_inflight_put(struct scsi_lun *lun, unsigned token)
{
    leave(lun, TOKEN_SLOT(token), TOKEN_EPOCH(token));
}

unsigned scsi_lun_inflight(struct scsi_lun *lun)
{
    return (unsigned)(epoch_sum(lun->inflight, 0) + epoch_sum(lun->inflight, 1));
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
static uint64_t epoch_close(struct scsi_lun *lun)
{
    struct sd_inflight *f = lun->inflight;
    unsigned closed = atomic_load(&f->state) & 1u;
    uint64_t n;

    int ret;

    atomic_store(&f->state, (closed ^ 1u) | STATE_DRAINING);
    if ((ret = asym_fence_heavy(f->asym)) < 0) {
        /* Registered, so this cannot fail; if it did, the counts could not be trusted. */
        g_error("%s: membarrier: %s", lun->name, g_strerror(-ret));
    }
    n = epoch_sum(f, closed);
    if (n == 0) {
        atomic_store(&f->state, closed ^ 1u);
    }
    return n;
}

/*
 * A command left the closed epoch while its drain was on: if the epoch is
 * now empty, end its drains and start the next ones'.  Under lun->lock,
 * so that of the commands racing here exactly one finds it empty.
 */
static void epoch_check(struct scsi_lun *lun)
{
    struct sd_inflight *f = lun->inflight;
    struct scsi_drain *done, *next;
    unsigned st;

    pthread_mutex_lock(&lun->lock);
    st = atomic_load(&f->state);
    if (!(st & STATE_DRAINING) || epoch_sum(f, (st & 1u) ^ 1u) != 0) {
        pthread_mutex_unlock(&lun->lock);
        return;
    }
    done = lun->draining;
    next = lun->next_drain;
    lun->draining = NULL;
    lun->next_drain = NULL;
    if (!next) {
        atomic_store(&f->state, st & 1u);
    } else if (epoch_close(lun) > 0) {
        lun->draining = next;
    } else {
        drain_list_append(&done, next);
    }
    pthread_mutex_unlock(&lun->lock);
    drain_fire(done);
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
    if (epoch_close(lun) > 0) {
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
