/*
 * The write range lock of one LUN, which makes COMPARE AND WRITE atomic
 * against every other write to its blocks, from any I/O thread and any
 * front-end.  Every writing command (WRITE, WRITE AND VERIFY, WRITE SAME,
 * UNMAP, and EXTENDED COPY for each chunk it writes to a destination LUN),
 * and READ, takes its LBA range shared; COMPARE AND WRITE (and ORWRITE,
 * the other read-modify-write) takes its range exclusively, from before
 * its read until its write has completed, and WRITE ATOMIC for its write,
 * so that no READ sees part of one.
 * Writes do not exclude each other (SBC leaves overlapping writes in
 * flight unordered), so the lock costs them something only while a
 * COMPARE AND WRITE exists.  The design is that of a per-CPU
 * reader-writer semaphore: while no exclusive holder or waiter exists
 * (excl == 0), a shared taker only counts itself in a counter of its own
 * I/O thread's (no shared cache line is written) and checks excl; an
 * exclusive taker raises excl, so that later writes go the slow way, a
 * mutex-protected list of held ranges and a FIFO of waiters, and waits
 * until the fast-path writes that were already in flight have left and no
 * overlapping range is held.  Counting then checking on one side and
 * raising then summing on the other must be ordered so that one of the
 * two always sees the other (Dekker).  The fence that needs is paid by the
 * rare side: the exclusive taker calls membarrier(2), which makes every
 * running thread of the process execute a full barrier, so a write's
 * count is a plain store (its thread is its counter's only writer, as
 * io-stats.h relies on too) followed by a compiler barrier, the asymmetric
 * fence of liburcu and folly.  Without membarrier, and for the shared
 * counter of commands with no thread, both sides use sequentially
 * consistent read-modify-writes instead.  A waiter never blocks its
 * thread: it is queued and continued (posted to its thread) when the
 * release that frees its range comes.  Waiting is FIFO among overlapping
 * ranges, so a stream of writes cannot starve a COMPARE AND WRITE.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <pthread.h>

#include "asym-fence.h"
#include "scsi-disk-int.h"

enum { RANGE_NONE, RANGE_FAST, RANGE_HELD, RANGE_WAITING };

/* A fast-path counter per I/O thread id (0: no thread or past the last), a cache line each. */
#define RANGE_SLOTS 65u

struct range_slot {
    _Atomic uint64_t n;
    uint8_t pad[56];
};

struct sd_range_lock {
    /* Exclusive takers holding or waiting; read by every write, written rarely. */
    atomic_uint excl;
    bool asym;                  /* membarrier registered: the fast path has no fence */
    uint8_t pad[59];
    struct range_slot fast[RANGE_SLOTS];
    pthread_mutex_t lock;       /* the lists below */
    struct sd_range *held;      /* ranges taken the slow way */
    struct sd_range *wait;      /* oldest first */
};
G_STATIC_ASSERT(sizeof(struct range_slot) == 64);

int sd_range_init(struct scsi_lun *lun)
{
    struct sd_range_lock *rl = g_aligned_alloc0(1, sizeof(*rl), 64);

    atomic_init(&rl->excl, 0);
    for (unsigned i = 0; i < RANGE_SLOTS; i++) {
        atomic_init(&rl->fast[i].n, 0);
    }
    pthread_mutex_init(&rl->lock, NULL);
    /* Per process, idempotent; kernels before 4.14 (or a filter) refuse it. */
    rl->asym = asym_fence_register();
    if (!rl->asym) {
        g_debug("%s: no membarrier(2): writes pay a fence for the range lock", lun->name);
    }
    lun->wlock = rl;
    return 0;
}

void sd_range_free(struct scsi_lun *lun)
{
    struct sd_range_lock *rl = lun->wlock;

    if (!rl) {
        return;
    }
    g_assert(!rl->held && !rl->wait);
    pthread_mutex_destroy(&rl->lock);
    g_aligned_free(rl);
    lun->wlock = NULL;
}

static bool overlap(const struct sd_range *a, const struct sd_range *b)
{
    return a->lba < b->lba + b->n && b->lba < a->lba + a->n;
}

static bool conflict(const struct sd_range *a, const struct sd_range *b)
{
    return (a->excl || b->excl) && overlap(a, b);
}

/* Fast-path writes in flight on any thread (under the mutex, with excl raised). */
static uint64_t fast_sum(struct sd_range_lock *rl)
{
    uint64_t sum = 0;

    for (unsigned i = 0; i < RANGE_SLOTS; i++) {
        sum += atomic_load(&rl->fast[i].n);
    }
    return sum;
}

/* Whether r may be granted: nothing held or queued before it (stop) conflicts. */
static bool grantable(struct sd_range_lock *rl, const struct sd_range *r,
                      const struct sd_range *stop)
{
    for (const struct sd_range *h = rl->held; h; h = h->next) {
        if (conflict(h, r)) {
            return false;
        }
    }
    for (const struct sd_range *w = rl->wait; w != stop; w = w->next) {
        if (conflict(w, r)) {
            return false;
        }
    }
    return !r->excl || fast_sum(rl) == 0;
}

/* Moves the waiters that may now go to the held list and onto *run (under the mutex). */
static void grant_waiters(struct sd_range_lock *rl, struct sd_range **run)
{
    struct sd_range **pp = &rl->wait;

    while (*pp) {
        struct sd_range *r = *pp;

        if (!grantable(rl, r, r)) {
            pp = &r->next;
            continue;
        }
        *pp = r->next;
        r->state = RANGE_HELD;
        r->next = rl->held;
        rl->held = r;
        r->run_next = *run;
        *run = r;
    }
}

static void range_go(void *opaque)
{
    struct sd_range *r = opaque;

    r->go(r->cmd->lun, r->cmd);
}

/* Continues the granted commands, each on its own thread. */
static void run_granted(struct sd_range *run)
{
    while (run) {
        struct sd_range *r = run;

        run = r->run_next;
        if (r->cmd->thread) {
            iothread_post(r->cmd->thread, range_go, r);
        } else {
            range_go(r);
        }
    }
}

/* Adds d to slot's count and returns whether an exclusive taker exists. */
static bool fast_add(struct sd_range_lock *rl, unsigned slot, int64_t d)
{
    return asym_add_then_read(&rl->fast[slot].n, d, slot && rl->asym, &rl->excl) != 0;
}

static void fast_put(struct sd_range_lock *rl, unsigned slot)
{
    if (fast_add(rl, slot, -1)) {
        struct sd_range *run = NULL;

        /* An exclusive waiter may have been waiting for this one. */
        pthread_mutex_lock(&rl->lock);
        grant_waiters(rl, &run);
        pthread_mutex_unlock(&rl->lock);
        run_granted(run);
    }
}

bool sd_range_lock(struct scsi_lun *lun, struct sd_range *r, struct scsi_cmd *cmd,
                   uint64_t lba, uint64_t n, bool excl, sd_range_go_fn *go)
{
    struct sd_range_lock *rl = lun->wlock;
    unsigned slot = cmd->thread ? iothread_id(cmd->thread) : 0;
    bool now;
    int ret;

    g_assert(r->state == RANGE_NONE);
    r->slot = (uint16_t)(slot < RANGE_SLOTS ? slot : 0);
    /* The fast path records only what its release needs. */
    if (!excl) {
        if (!fast_add(rl, r->slot, 1)) {
            r->state = RANGE_FAST;
            return true;
        }
        fast_put(rl, r->slot);   /* an exclusive taker exists: the slow way */
    }
    r->lba = lba;
    r->n = n;
    r->cmd = cmd;
    r->go = go;
    r->excl = excl;
    r->next = NULL;
    pthread_mutex_lock(&rl->lock);
    if (excl && atomic_fetch_add(&rl->excl, 1) == 0 && (ret = asym_fence_heavy(rl->asym)) < 0) {
        /* Registered, so this cannot fail; if it did, the counts could not be trusted. */
        g_error("%s: membarrier: %s", lun->name, g_strerror(-ret));
    }
    now = grantable(rl, r, NULL);
    if (now) {
        r->state = RANGE_HELD;
        r->next = rl->held;
        rl->held = r;
    } else {
        struct sd_range **pp = &rl->wait;

        while (*pp) {
            pp = &(*pp)->next;
        }
        r->state = RANGE_WAITING;
        *pp = r;
    }
    pthread_mutex_unlock(&rl->lock);
    return now;
}

void sd_range_unlock(struct scsi_lun *lun, struct sd_range *r)
{
    struct sd_range_lock *rl = lun->wlock;
    struct sd_range *run = NULL;

    g_assert(r->state == RANGE_FAST || r->state == RANGE_HELD);
    if (r->state == RANGE_FAST) {
        r->state = RANGE_NONE;
        fast_put(rl, r->slot);
        return;
    }
    pthread_mutex_lock(&rl->lock);
    for (struct sd_range **pp = &rl->held; *pp; pp = &(*pp)->next) {
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    }
    r->state = RANGE_NONE;
    if (r->excl) {
        atomic_fetch_sub(&rl->excl, 1);
    }
    grant_waiters(rl, &run);
    pthread_mutex_unlock(&rl->lock);
    run_granted(run);
}
