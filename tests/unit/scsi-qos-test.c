/*
 * Specification of per-LUN rate limits (hw/scsi/scsi-qos.c), with
 * commands run on a real I/O thread as the daemon runs them:
 *  - over the limit a command is not refused but waits, and every command
 *    completes exactly once, GOOD, in the order its thread received it;
 *  - no more commands complete by any moment than the burst plus the rate
 *    times the time elapsed allow (an upper bound: a slow machine only
 *    completes fewer), and a bandwidth limit bounds bytes the same way;
 *  - commands other than READ and WRITE are not limited and do not wait
 *    behind limited ones;
 *  - lifting the limit lets waiting commands run at once, and a drain of
 *    the LUN waits for them like for any command in flight.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdatomic.h>
#include <string.h>

#include <glib.h>

#include "backend.h"
#include "io-stats.h"
#include "iothread.h"
#include "scsi-cmd.h"
#include "scsi-disk.h"

#define N_CMDS 60
#define BS 512
#define WAIT_US (20 * G_TIME_SPAN_SECOND)

struct qcmd {
    struct scsi_cmd cmd;
    uint8_t cdb[SC_CDB_MAX];
    struct iovec iov;
    uint8_t *buf;
    struct fx *x;
    unsigned idx;
};

struct fx {
    struct iothread *t;
    struct scsi_lun *lun;
    struct qcmd c[N_CMDS];
    GMutex lock;
    GCond cond;
    unsigned done;
    unsigned order[N_CMDS];
    uint64_t done_ns[N_CMDS];
    uint8_t status[N_CMDS];
    unsigned completions[N_CMDS];
};

static void completed(struct scsi_cmd *cmd)
{
    struct qcmd *q = cmd->opaque;
    struct fx *x = q->x;

    g_mutex_lock(&x->lock);
    x->completions[q->idx]++;
    x->status[q->idx] = cmd->status;
    x->done_ns[q->idx] = io_stats_now_ns();
    x->order[x->done++] = q->idx;
    g_cond_broadcast(&x->cond);
    g_mutex_unlock(&x->lock);
}

static void fx_init(struct fx *x)
{
    struct lun_backend *be = NULL;

    memset(x, 0, sizeof(*x));
    g_mutex_init(&x->lock);
    g_cond_init(&x->cond);
    x->t = iothread_new("t-qos", 1, 0);
    g_assert_cmpint(iothread_start(x->t), ==, 0);
    g_assert_cmpint(backend_null_new(64 << 20, BS, &be, NULL), ==, 0);
    x->lun = scsi_lun_new(be, "qos", NULL, NULL);
    g_assert_nonnull(x->lun);
}

static void nothing(void *opaque)
{
}

static void fx_free(struct fx *x)
{
    /*
     * complete() runs before the command leaves the LUN's in-flight count:
     * let the thread finish what it was doing before the LUN goes.
     */
    iothread_run_sync(x->t, nothing, NULL);
    scsi_lun_free(x->lun);
    iothread_free(x->t);
    for (unsigned i = 0; i < N_CMDS; i++) {
        g_free(x->c[i].buf);
    }
    g_mutex_clear(&x->lock);
    g_cond_clear(&x->cond);
}

/* Commands [from, to) as READ(10) of len bytes (TEST UNIT READY if len is 0). */
struct batch {
    struct fx *x;
    unsigned from, to;
    uint32_t len;
};

static void submit_on_thread(void *opaque)
{
    struct batch *b = opaque;
    struct fx *x = b->x;

    for (unsigned i = b->from; i < b->to; i++) {
        struct qcmd *q = &x->c[i];
        unsigned n;

        q->x = x;
        q->idx = i;
        if (b->len) {
            n = sc_cdb(scsi_cdb_read10(i, b->len, BS, 0, 0, 0, 0, 0), q->cdb);
            q->buf = g_realloc(q->buf, b->len);
            q->iov = (struct iovec){ q->buf, b->len };
        } else {
            n = sc_cdb(scsi_cdb_testunitready(), q->cdb);
        }
        q->cmd = (struct scsi_cmd){ .cdb = q->cdb, .cdb_len = n, .thread = x->t,
                                    .complete = completed, .opaque = q };
        if (b->len) {
            q->cmd.data_in = &q->iov;
            q->cmd.data_in_cnt = 1;
        }
        scsi_lun_exec(x->lun, &q->cmd);
    }
}

static void submit(struct fx *x, unsigned from, unsigned to, uint32_t len)
{
    struct batch b = { x, from, to, len };

    iothread_run_sync(x->t, submit_on_thread, &b);
}

static void wait_done(struct fx *x, unsigned n)
{
    gint64 end = g_get_monotonic_time() + WAIT_US;

    g_mutex_lock(&x->lock);
    while (x->done < n) {
        g_assert_true(g_cond_wait_until(&x->cond, &x->lock, end));
    }
    g_mutex_unlock(&x->lock);
}

/* Consumes the power-on unit attention (TUR is not limited). */
static void make_ready(struct fx *x)
{
    submit(x, 0, 1, 0);
    wait_done(x, 1);
    g_assert_cmpuint(x->status[0], ==, SAM_STAT_CHECK_CONDITION);
    x->done = 0;
    x->completions[0] = 0;
}

static void test_iops_limit_bounds_completions(void)
{
    struct fx x;
    const uint64_t iops = 200;
    struct scsi_qos q = { .iops = iops };
    uint64_t start;

    fx_init(&x);
    make_ready(&x);
    scsi_lun_set_qos(x.lun, &q);
    start = io_stats_now_ns();
    submit(&x, 0, N_CMDS, 4096);
    wait_done(&x, N_CMDS);
    for (unsigned i = 0; i < N_CMDS; i++) {
        uint64_t elapsed = x.done_ns[x.order[i]] - start;
        /* The burst (a tenth of a second), a batch (a millisecond) and the rate. */
        uint64_t allowed = iops / 10 + 1 + (elapsed * iops + 999999999u) / 1000000000u;

        g_assert_cmpuint(x.completions[i], ==, 1);
        g_assert_cmpuint(x.status[i], ==, SAM_STAT_GOOD);
        /* In the order the thread received them. */
        g_assert_cmpuint(x.order[i], ==, i);
        if (i + 1 > allowed) {
            g_error("command %u completed %" G_GUINT64_FORMAT " us after the start: more "
                    "than %" G_GUINT64_FORMAT " allowed by then", i, elapsed / 1000, allowed);
        }
    }
    /* 60 commands at 200/s with a burst of 20: the last cannot finish before 0.2 s. */
    g_assert_cmpuint(x.done_ns[N_CMDS - 1] - start, >=, (N_CMDS - iops / 10 - 1) *
                     (1000000000u / iops) - 1000000u);
    fx_free(&x);
}

static void test_bandwidth_limit_bounds_bytes(void)
{
    struct fx x;
    const uint64_t bps = 64 * 4096;   /* 64 commands of 4 KiB a second */
    struct scsi_qos q = { .bytes_per_s = bps };
    uint64_t start;

    fx_init(&x);
    make_ready(&x);
    scsi_lun_set_qos(x.lun, &q);
    start = io_stats_now_ns();
    submit(&x, 0, 30, 4096);
    wait_done(&x, 30);
    for (unsigned i = 0; i < 30; i++) {
        uint64_t elapsed = x.done_ns[x.order[i]] - start;
        /* Burst and batch are each at least one command's worth here. */
        uint64_t allowed = bps / 10 + 4096 + 4096 + elapsed * bps / 1000000000u;

        g_assert_cmpuint(x.status[i], ==, SAM_STAT_GOOD);
        g_assert_cmpuint((uint64_t)(i + 1) * 4096, <=, allowed);
    }
    fx_free(&x);
}

static void test_other_commands_are_not_held(void)
{
    struct fx x;
    struct scsi_qos q = { .iops = 1 };

    fx_init(&x);
    make_ready(&x);
    scsi_lun_set_qos(x.lun, &q);
    /* The burst (one command) runs; the next waits a second, the rest longer... */
    submit(&x, 0, 10, 4096);
    /* ...while TEST UNIT READY goes past them. */
    submit(&x, 10, 11, 0);
    wait_done(&x, 2);
    g_assert_cmpuint(x.order[0], ==, 0);
    g_assert_cmpuint(x.order[1], ==, 10);
    g_assert_cmpuint(x.status[10], ==, SAM_STAT_GOOD);
    /* Lifting the limit lets the waiting ones run, in order. */
    q.iops = 0;
    scsi_lun_set_qos(x.lun, &q);
    wait_done(&x, 11);
    for (unsigned i = 2; i < 11; i++) {
        g_assert_cmpuint(x.order[i], ==, i - 1);
        g_assert_cmpuint(x.completions[i - 1], ==, 1);
    }
    fx_free(&x);
}

struct drain_probe {
    struct scsi_drain d;
    struct fx *x;
    unsigned done_when_drained;
    atomic_bool drained;
};

static void drained(struct scsi_drain *d)
{
    struct drain_probe *p = (struct drain_probe *)d;

    g_mutex_lock(&p->x->lock);
    p->done_when_drained = p->x->done;
    atomic_store(&p->drained, true);
    g_cond_broadcast(&p->x->cond);
    g_mutex_unlock(&p->x->lock);
}

static void test_drain_waits_for_waiting_commands(void)
{
    struct fx x;
    struct scsi_qos q = { .iops = 100 };
    struct drain_probe p = { .d.done = drained };
    gint64 end;

    fx_init(&x);
    p.x = &x;
    make_ready(&x);
    scsi_lun_set_qos(x.lun, &q);
    submit(&x, 0, 30, 512);
    scsi_lun_drain_async(x.lun, &p.d);
    end = g_get_monotonic_time() + WAIT_US;
    g_mutex_lock(&x.lock);
    while (!atomic_load(&p.drained)) {
        g_assert_true(g_cond_wait_until(&x.cond, &x.lock, end));
    }
    g_mutex_unlock(&x.lock);
    /* The drain ended once the last waiting command had completed. */
    g_assert_cmpuint(p.done_when_drained, ==, 30);
    fx_free(&x);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/scsi-qos/iops-limit-bounds-completions", test_iops_limit_bounds_completions);
    g_test_add_func("/scsi-qos/bandwidth-limit-bounds-bytes", test_bandwidth_limit_bounds_bytes);
    g_test_add_func("/scsi-qos/other-commands-are-not-held", test_other_commands_are_not_held);
    g_test_add_func("/scsi-qos/drain-waits-for-waiting-commands",
                    test_drain_waits_for_waiting_commands);
    return g_test_run();
}
