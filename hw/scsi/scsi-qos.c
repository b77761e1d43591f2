/*
 * Per-LUN rate limits (scsi_lun_set_qos): IOPS and bandwidth for READ and
 * WRITE commands, enforced on the I/O threads without a lock per command.
 * Each limit is a token bucket refilled at its rate, holding at most a
 * tenth of a second's worth; an I/O thread takes tokens from it in
 * batches of about a millisecond's worth (one compare-and-swap per batch,
 * not per command) into its own slot for the LUN, and spends them there
 * with plain arithmetic.  A bucket may be overdrawn by one take (a
 * command larger than what is left still runs, and the debt is paid from
 * later refills), so the long-run rate is exact and no command size is
 * refused.  A command that finds no tokens waits in its thread's FIFO for
 * the LUN, in flight (a drain or a TMF waits for it like any other), and
 * that thread's timer runs it when the bucket has refilled; commands
 * behind it wait their turn, so a LUN's commands on one thread stay in
 * order.  With no limit set the data path pays one relaxed load.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <inttypes.h>

#include "scsi-disk-int.h"

#define NS_PER_S 1000000000u
/* Waits between retries: no busier than 1 kHz, no longer than 100 ms. */
#define RETRY_MIN_NS 1000000u
#define RETRY_MAX_NS 100000000u

struct sd_qos_slot {
    struct iothread_timer timer;  /* first: the timer's callback gets its address */
    struct scsi_lun *lun;
    struct iothread *t;
    sd_qos_run_fn *run;
    int64_t io, bytes;            /* tokens taken from the LUN's buckets, unspent */
    struct scsi_cmd *head, *tail; /* waiting, oldest first */
};

static uint64_t mul_div(uint64_t a, uint64_t b, uint64_t c)
{
    return (uint64_t)((unsigned __int128)a * b / c);
}

/* A tenth of a second of the rate, at least one token. */
static int64_t burst(uint64_t rate)
{
    return (int64_t)MAX(rate / 10, 1u);
}

/* About a millisecond's worth: what one take asks for. */
static int64_t batch(uint64_t rate)
{
    return (int64_t)MAX(rate / 1000, 1u);
}

static void bucket_reset(struct sd_bucket *b, uint64_t rate, uint64_t now)
{
    atomic_store(&b->rate, rate);
    atomic_store(&b->last_ns, now);
    atomic_store(&b->tokens, rate ? burst(rate) : 0);
}

/*
 * Adds what the time since the last refill earned.  Whoever wins the
 * timestamp's compare-and-swap adds the tokens; the timestamp advances by
 * exactly the time those tokens stand for, so no fraction is lost at low
 * rates.
 */
static void bucket_refill(struct sd_bucket *b, uint64_t rate, uint64_t now)
{
    uint64_t last = atomic_load_explicit(&b->last_ns, memory_order_acquire);
    uint64_t add, next;
    int64_t old, cap = burst(rate);

    if (now <= last) {
        return;
    }
    /* Past a second the bucket is full anyway (it holds a tenth of one). */
    add = mul_div(MIN(now - last, NS_PER_S), rate, NS_PER_S);
    if (add == 0) {
        return;
    }
    next = now - last > NS_PER_S ? now : last + mul_div(add, NS_PER_S, rate);
    if (!atomic_compare_exchange_strong(&b->last_ns, &last, next)) {
        return;
    }
    old = atomic_load(&b->tokens);
    while (!atomic_compare_exchange_weak(&b->tokens, &old,
                                         MIN(old + (int64_t)MIN(add, (uint64_t)cap), cap))) {
    }
}

/* Takes want tokens if the bucket holds any (it may go negative); else 0. */
static int64_t bucket_take(struct sd_bucket *b, uint64_t rate, int64_t want, uint64_t now)
{
    int64_t old;

    bucket_refill(b, rate, now);
    old = atomic_load(&b->tokens);
    do {
        if (old <= 0) {
            return 0;
        }
    } while (!atomic_compare_exchange_weak(&b->tokens, &old, old - want));
    return want;
}

static uint64_t cmd_bytes(const struct scsi_cmd *cmd)
{
    return sd_data_in_size(cmd) + sd_data_out_size(cmd);
}

/*
 * Spends the slot's tokens on one command of bytes, taking more from the
 * LUN's buckets first if it needs them; false if a bucket is empty.  On
 * false, *wait_ns says how long until it should have refilled enough.
 */
static bool try_spend(struct sd_qos_slot *s, uint64_t bytes, uint64_t now, uint64_t *wait_ns)
{
    struct scsi_lun *lun = s->lun;
    uint64_t iops = atomic_load_explicit(&lun->qos_io.rate, memory_order_relaxed);
    uint64_t bps = atomic_load_explicit(&lun->qos_bytes.rate, memory_order_relaxed);
    uint64_t wait = 0;

    if (iops && s->io < 1) {
        s->io += bucket_take(&lun->qos_io, iops, batch(iops), now);
        if (s->io < 1) {
            wait = MAX(wait, NS_PER_S / iops);
        }
    }
    if (bps && s->bytes < (int64_t)bytes) {
        s->bytes += bucket_take(&lun->qos_bytes, bps,
                                MAX((int64_t)bytes - s->bytes, batch(bps)), now);
        if (s->bytes < (int64_t)bytes) {
            wait = MAX(wait, mul_div((uint64_t)((int64_t)bytes - s->bytes), NS_PER_S, bps));
        }
    }
    if (wait) {
        *wait_ns = CLAMP(wait, RETRY_MIN_NS, RETRY_MAX_NS);
        return false;
    }
    if (iops) {
        s->io--;
    }
    if (bps) {
        s->bytes -= (int64_t)bytes;
    }
    return true;
}

static void slot_retry(struct iothread_timer *tm)
{
    struct sd_qos_slot *s = (struct sd_qos_slot *)tm;
    struct scsi_cmd *ready = NULL, **tail = &ready;
    uint64_t now = io_stats_now_ns(), wait = 0;
    sd_qos_run_fn *run = s->run;
    struct scsi_lun *lun = s->lun;

    while (s->head && try_spend(s, cmd_bytes(s->head), now, &wait)) {
        struct scsi_cmd *c = s->head;

        s->head = c->qos_next;
        c->qos_next = NULL;
        *tail = c;
        tail = &c->qos_next;
    }
    if (!s->head) {
        s->tail = NULL;
    } else {
        iothread_timer_arm(s->t, &s->timer, now + wait);
    }
    /*
     * Run them only now: once the last command of a LUN completes the LUN
     * may be freed (its slots with it), so nothing of s is touched after.
     */
    while (ready) {
        struct scsi_cmd *c = ready;

        ready = c->qos_next;
        c->qos_next = NULL;
        run(lun, c);
    }
}

static struct sd_qos_slot *slot_get(struct scsi_lun *lun, struct iothread *t)
{
    unsigned id = iothread_id(t);
    struct sd_qos_slot *s;

    if (id >= SD_QOS_SLOTS) {
        return NULL;
    }
    s = atomic_load_explicit(&lun->qos_slot[id], memory_order_acquire);
    if (!s) {
        /* Only the thread with this id creates its slot: no race. */
        s = g_new0(struct sd_qos_slot, 1);
        s->timer.fn = slot_retry;
        s->lun = lun;
        s->t = t;
        atomic_store_explicit(&lun->qos_slot[id], s, memory_order_release);
    }
    return s;
}

bool sd_qos_admit(struct scsi_lun *lun, struct scsi_cmd *cmd, enum io_class cls,
                  sd_qos_run_fn *run)
{
    struct sd_qos_slot *s;
    uint64_t now, wait = 0;

    if (G_LIKELY(!atomic_load_explicit(&lun->qos_on, memory_order_relaxed)) ||
        cls == IO_OTHER || !cmd->thread || !(s = slot_get(lun, cmd->thread))) {
        return true;
    }
    s->run = run;
    now = io_stats_now_ns();
    if (!s->head && try_spend(s, cmd_bytes(cmd), now, &wait)) {
        return true;
    }
    cmd->qos_next = NULL;
    /*
     * The nexus's table is freed after the grace period that let the
     * command in, which a wait outlasts; a READ or WRITE reaches no other
     * LUN anyway.
     */
    cmd->find_lun = NULL;
    cmd->find_ctx = NULL;
    if (s->tail) {
        s->tail->qos_next = cmd;
    } else {
        s->head = cmd;
        iothread_timer_arm(s->t, &s->timer, now + (wait ? wait : RETRY_MIN_NS));
    }
    s->tail = cmd;
    return false;
}

void sd_qos_init(struct scsi_lun *lun)
{
    uint64_t now = io_stats_now_ns();

    atomic_init(&lun->qos_on, false);
    bucket_reset(&lun->qos_io, 0, now);
    bucket_reset(&lun->qos_bytes, 0, now);
    for (unsigned i = 0; i < SD_QOS_SLOTS; i++) {
        atomic_init(&lun->qos_slot[i], NULL);
    }
}

void sd_qos_free(struct scsi_lun *lun)
{
    /* Nothing waits any more: waiting commands are in flight, and the LUN is drained. */
    for (unsigned i = 0; i < SD_QOS_SLOTS; i++) {
        struct sd_qos_slot *s = atomic_load(&lun->qos_slot[i]);

        if (s) {
            g_assert(!s->head && !s->timer.armed);
            g_free(s);
        }
    }
}

void scsi_lun_set_qos(struct scsi_lun *lun, const struct scsi_qos *q)
{
    uint64_t now = io_stats_now_ns();

    /*
     * Tokens already in threads' slots stay there (a millisecond's worth
     * each at the old rate); waiting commands are retried at their
     * thread's next timer and see the new rates.
     */
    bucket_reset(&lun->qos_io, q->iops, now);
    bucket_reset(&lun->qos_bytes, q->bytes_per_s, now);
    atomic_store(&lun->qos_on, q->iops || q->bytes_per_s);
    if (q->iops || q->bytes_per_s) {
        g_message("%s: limited to %" PRIu64 " IOPS and %" PRIu64 " bytes/s (0: no limit)",
                  lun->name, q->iops, q->bytes_per_s);
    } else {
        g_message("%s: no rate limit", lun->name);
    }
}

void scsi_lun_get_qos(struct scsi_lun *lun, struct scsi_qos *q)
{
    q->iops = atomic_load(&lun->qos_io.rate);
    q->bytes_per_s = atomic_load(&lun->qos_bytes.rate);
}
