/*
 * Specification of in-flight accounting and drains
 * (hw/scsi/scsi-disk-drain.c) and of the backend I/O engine under every
 * command (scsi-disk-io.c).  The engine turns a backend error into sense
 * once (EIO, ENOSPC, a remote device's own sense or status passed on as
 * it came, EAGAIN as BUSY), also in the middle of a command of several
 * requests, which it runs one request at a time when the backend completes
 * later.  A drain, which task management waits with, ends when the
 * commands in flight at its start have completed, never waits for later
 * ones (not even under continuous I/O from several threads), and calls
 * back on the thread it names.  The spy backend of the harness
 * (scsi-disk-fixture.h) defers and fails the requests here.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include <glib.h>

#include "backend.h"
#include "iothread.h"
#include "scsi-cmd.h"
#include "scsi-disk.h"
#include "scsi-disk-fixture.h"

/* ---- backend errors ---------------------------------------------------- */

static void test_backend_errors(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(false, &s);
    uint8_t buf[512] = { 0 }, blk[512];
    struct result r;

    s->fail_op = BACKEND_READ;
    s->fail_ret = -EIO;
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "test:spy: read at byte 512 failed*");
    r = RUN_IN(lun, scsi_cdb_read10(1, 512, BS, 0, 0, 0, 0, 0), buf, 512);
    g_test_assert_expected_messages();
    assert_sense(&r, SCSI_SENSE_MEDIUM_ERROR, SC_ASCQ_UNRECOVERED_READ_ERROR);
    g_assert_cmpuint(r.in_xfer, ==, 0);

    s->fail_op = BACKEND_WRITE;
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*write*failed*");
    r = RUN_OUT(lun, scsi_cdb_write10(1, 512, BS, 0, 0, 0, 0, 0), buf, 512);
    g_test_assert_expected_messages();
    assert_sense(&r, SCSI_SENSE_MEDIUM_ERROR, SC_ASCQ_WRITE_ERROR);

    s->fail_ret = -ENOSPC;
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*write*failed*");
    r = RUN_OUT(lun, scsi_cdb_write10(1, 512, BS, 0, 0, 0, 0, 0), buf, 512);
    g_test_assert_expected_messages();
    assert_sense(&r, SCSI_SENSE_DATA_PROTECTION, SC_ASCQ_SPACE_ALLOCATION_FAILED_WRITE_PROTECT);

    /* A remote device's sense is passed through as it is. */
    s->fail_op = BACKEND_READ;
    s->fail_ret = -EREMOTEIO;
    r = RUN_IN(lun, scsi_cdb_read10(1, 512, BS, 0, 0, 0, 0, 0), buf, 512);
    assert_sense(&r, SCSI_SENSE_MEDIUM_ERROR, REMOTE_ASCQ);

    /*
     * A remote status that is itself the answer: another initiator's
     * reservation is RESERVATION CONFLICT, not a medium error to retry.
     */
    s->fail_op = BACKEND_WRITE;
    s->fail_status = SAM_STAT_RESERVATION_CONFLICT;
    r = RUN_OUT(lun, scsi_cdb_write10(1, 512, BS, 0, 0, 0, 0, 0), buf, 512);
    g_assert_cmphex(r.status, ==, SAM_STAT_RESERVATION_CONFLICT);
    g_assert_cmpuint(r.sense_len, ==, 0);
    s->fail_status = 0;

    /* Transient: BUSY, no sense, nothing logged as an error. */
    s->fail_op = BACKEND_WRITE;
    s->fail_ret = -EAGAIN;
    r = RUN_OUT(lun, scsi_cdb_write10(1, 512, BS, 0, 0, 0, 0, 0), buf, 512);
    g_assert_cmphex(r.status, ==, SAM_STAT_BUSY);
    g_assert_cmpuint(r.sense_len, ==, 0);

    /* An error in the middle of a multi-request command ends it once. */
    s->fail_op = BACKEND_WRITE;
    s->fail_ret = -EIO;
    memset(blk, 1, sizeof(blk));
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*write*failed*");
    r = write_same16(lun, false, false, 0, 4000, blk, 512);
    g_test_assert_expected_messages();
    assert_sense(&r, SCSI_SENSE_MEDIUM_ERROR, SC_ASCQ_WRITE_ERROR);
    g_assert_cmpuint(scsi_lun_inflight(lun), ==, 0);
    scsi_lun_free(lun);
}

/* ---- asynchronous completion and drain --------------------------------- */

static void test_async_multi_request_commands(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(false, &s);
    uint8_t blk[512];
    g_autofree uint8_t *rd = g_malloc(4000 * 512);
    struct pending_cmd p;
    unsigned rounds = 0;

    fill_pattern(blk, sizeof(blk), 21);
    s->defer = true;
    start(&p, lun, scsi_cdb_writesame16(0, 0, 0, 0, 0, 4000, BS), blk, sizeof(blk), NULL, 0);
    g_assert_cmpint(p.completions, ==, 0);      /* two bounce chunks */
    g_assert_cmpuint(scsi_lun_inflight(lun), ==, 1);
    while (spy_run_pending(s)) {
        rounds++;
    }
    g_assert_cmpuint(rounds, ==, 2);            /* one request at a time */
    g_assert_cmpint(p.completions, ==, 1);
    g_assert_cmphex(p.cmd.status, ==, SAM_STAT_GOOD);
    g_assert_cmpuint(scsi_lun_inflight(lun), ==, 0);

    s->defer = false;
    read_blocks(lun, 0, 4000, rd);
    for (uint32_t i = 0; i < 4000; i += 333) {
        g_assert_true(memcmp(rd + i * 512, blk, 512) == 0);
    }
    scsi_lun_free(lun);
}

/* ---- drain ------------------------------------------------------------- */

struct drain_probe {
    struct scsi_drain d;
    atomic_int calls;
    struct iothread *expect_thread;   /* done must run there (if set) */
    atomic_bool on_expected_thread;
};

static void probe_done(struct scsi_drain *d)
{
    struct drain_probe *p = d->opaque;

    if (p->expect_thread) {
        atomic_store(&p->on_expected_thread, iothread_is_current(p->expect_thread));
    }
    atomic_fetch_add(&p->calls, 1);
}

static void probe_drain(struct drain_probe *p, struct scsi_lun *lun, struct iothread *t)
{
    memset(p, 0, sizeof(*p));
    p->d.done = probe_done;
    p->d.thread = t;
    p->d.opaque = p;
    p->expect_thread = t;
    scsi_lun_drain_async(lun, &p->d);
}

static void start_read(struct pending_cmd *p, struct scsi_lun *lun, uint32_t lba, uint8_t *buf)
{
    start(p, lun, scsi_cdb_read10(lba, 512, BS, 0, 0, 0, 0, 0), NULL, 0, buf, 512);
}

static void test_drain_idle_lun_completes_at_once(void)
{
    struct scsi_lun *lun = ram_lun();
    struct drain_probe p;

    probe_drain(&p, lun, NULL);
    /* No thread named and nothing in flight: done ran inside the call. */
    g_assert_cmpint(atomic_load(&p.calls), ==, 1);
    scsi_lun_free(lun);
}

static void test_drain_waits_for_inflight(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(false, &s);
    uint8_t buf[512];
    struct pending_cmd x;
    struct drain_probe p;

    s->defer = true;
    start_read(&x, lun, 0, buf);
    probe_drain(&p, lun, NULL);
    g_assert_cmpint(atomic_load(&p.calls), ==, 0);
    g_assert_cmpuint(spy_run_pending(s), ==, 1);
    g_assert_cmpint(x.completions, ==, 1);
    g_assert_cmpint(atomic_load(&p.calls), ==, 1);
    g_assert_cmpuint(scsi_lun_inflight(lun), ==, 0);
    s->defer = false;
    scsi_lun_free(lun);
}

/* Continuous I/O: a drain ends when its own commands are done, whatever came later. */
static void test_drain_does_not_wait_for_later_commands(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(false, &s);
    uint8_t buf[2][512];
    struct pending_cmd x, y;
    struct drain_probe p;

    s->defer = true;
    start_read(&x, lun, 0, buf[0]);
    probe_drain(&p, lun, NULL);
    start_read(&y, lun, 1, buf[1]);
    spy_run_one(s);                             /* x */
    g_assert_cmpint(x.completions, ==, 1);
    g_assert_cmpint(atomic_load(&p.calls), ==, 1);
    g_assert_cmpint(y.completions, ==, 0);      /* still running, not waited for */
    g_assert_cmpuint(scsi_lun_inflight(lun), ==, 1);
    spy_run_one(s);
    g_assert_cmpint(atomic_load(&p.calls), ==, 1);
    s->defer = false;
    scsi_lun_free(lun);
}

/* A command started after the drain that completes first does not end it. */
static void test_drain_later_command_completing_first(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(false, &s);
    uint8_t buf[3][512];
    struct pending_cmd x, y, z;
    struct drain_probe p;

    s->defer = true;
    start_read(&x, lun, 0, buf[0]);
    probe_drain(&p, lun, NULL);
    start_read(&y, lun, 1, buf[1]);
    spy_run_newest(s);                          /* y: the LUN's other epoch empties */
    g_assert_cmpint(y.completions, ==, 1);
    g_assert_cmpint(atomic_load(&p.calls), ==, 0);
    start_read(&z, lun, 2, buf[2]);
    spy_run_newest(s);                          /* z */
    g_assert_cmpint(atomic_load(&p.calls), ==, 0);
    spy_run_one(s);                             /* x */
    g_assert_cmpint(atomic_load(&p.calls), ==, 1);
    s->defer = false;
    scsi_lun_free(lun);
}

/*
 * A drain that comes while another one drains waits for everything in
 * flight at its start (the older epoch and the current one), but not for
 * commands started after the first drain ended.
 */
static void test_drain_while_draining(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(false, &s);
    uint8_t buf[4][512];
    struct pending_cmd x, y, z, w;
    struct drain_probe d1, d2, d3;

    s->defer = true;
    start_read(&x, lun, 0, buf[0]);
    probe_drain(&d1, lun, NULL);                /* waits for x */
    start_read(&y, lun, 1, buf[1]);
    probe_drain(&d2, lun, NULL);                /* waits for x and y */
    probe_drain(&d3, lun, NULL);                /* the same */
    start_read(&z, lun, 2, buf[2]);             /* in y's epoch: waited for too */
    spy_run_one(s);                             /* x */
    g_assert_cmpint(atomic_load(&d1.calls), ==, 1);
    g_assert_cmpint(atomic_load(&d2.calls), ==, 0);
    g_assert_cmpint(atomic_load(&d3.calls), ==, 0);
    start_read(&w, lun, 3, buf[3]);             /* after d1 ended: not waited for */
    spy_run_one(s);                             /* y */
    g_assert_cmpint(atomic_load(&d2.calls), ==, 0);
    spy_run_one(s);                             /* z */
    g_assert_cmpint(atomic_load(&d2.calls), ==, 1);
    g_assert_cmpint(atomic_load(&d3.calls), ==, 1);
    g_assert_cmpint(w.completions, ==, 0);
    spy_run_one(s);                             /* w */
    g_assert_cmpint(atomic_load(&d1.calls) + atomic_load(&d2.calls) + atomic_load(&d3.calls),
                    ==, 3);
    s->defer = false;
    scsi_lun_free(lun);
}

/* With a thread named, done is posted there, also when nothing was in flight. */
static void test_drain_done_runs_on_the_thread_named(void)
{
    struct iothread *t = iothread_new("t-drain", 1, 0);
    struct spy *s;
    struct scsi_lun *lun = spy_lun(false, &s);
    uint8_t buf[512];
    struct pending_cmd x;
    struct drain_probe idle, busy;

    g_assert_cmpint(iothread_start(t), ==, 0);
    probe_drain(&idle, lun, t);
    iothread_run_sync(t, nothing, NULL);        /* queued after the post */
    g_assert_cmpint(atomic_load(&idle.calls), ==, 1);
    g_assert_true(atomic_load(&idle.on_expected_thread));

    s->defer = true;
    start_read(&x, lun, 0, buf);
    probe_drain(&busy, lun, t);
    iothread_run_sync(t, nothing, NULL);
    g_assert_cmpint(atomic_load(&busy.calls), ==, 0);
    spy_run_one(s);                             /* completes here, not on t */
    iothread_run_sync(t, nothing, NULL);
    g_assert_cmpint(atomic_load(&busy.calls), ==, 1);
    g_assert_true(atomic_load(&busy.on_expected_thread));
    s->defer = false;
    iothread_free(t);
    scsi_lun_free(lun);
}

/*
 * Several threads keep commands in flight all the time (each parks up to
 * DEPTH and completes the oldest, in order), so the LUN is never idle,
 * while the test thread drains again and again.  Every drain must end, and
 * when it does, every command whose exec had returned before the drain
 * began must have completed.
 */
#define STRESS_THREADS 3
#define STRESS_DEPTH 8
#define STRESS_DRAINS 300

struct parker {
    struct scsi_lun *lun;
    unsigned id;
    struct iothread *own;      /* named by its commands (a counter of its own), or NULL */
    atomic_uint issued;        /* scsi_lun_exec returned */
    atomic_uint completed;     /* complete() called, in issue order */
    GQueue parked;             /* struct backend_io *, oldest first */
    struct pending_cmd cmds[STRESS_DEPTH];
    uint8_t buf[STRESS_DEPTH][512];
};

static atomic_bool stress_stop;
static __thread struct parker *tls_parker;
static struct lun_backend *stress_ram;

static int parking_submit(struct lun_backend *be, struct backend_io *io)
{
    g_queue_push_tail(&tls_parker->parked, io);
    return 0;
}

static void parking_close(struct lun_backend *be)
{
    backend_close(stress_ram);
    g_free(be->name);
    g_free(be);
}

static const struct backend_ops parking_ops = { .name = "parking", .submit = parking_submit,
                                                .close = parking_close };

static void parked_complete(struct scsi_cmd *cmd)
{
    struct parker *w = tls_parker;

    atomic_fetch_add(&w->completed, 1);
}

static void parker_complete_oldest(struct parker *w)
{
    struct backend_io *io = g_queue_pop_head(&w->parked);

    stress_ram->ops->submit(stress_ram, io);
}

static gpointer parker_thread(gpointer opaque)
{
    struct parker *w = opaque;

    tls_parker = w;
    g_queue_init(&w->parked);
    for (unsigned i = 0; !atomic_load(&stress_stop); i++) {
        struct pending_cmd *p = &w->cmds[i % STRESS_DEPTH];

        if (g_queue_get_length(&w->parked) == STRESS_DEPTH) {
            parker_complete_oldest(w);          /* frees p's slot: it is the oldest */
        }
        memset(p, 0, sizeof(*p));
        p->in.iov_base = w->buf[i % STRESS_DEPTH];
        p->in.iov_len = 512;
        p->cmd.data_in = &p->in;
        p->cmd.data_in_cnt = 1;
        p->cmd.cdb_len = sc_cdb(scsi_cdb_read10(w->id * 64 + i % STRESS_DEPTH, 512, BS,
                                                0, 0, 0, 0, 0), p->cdb);
        p->cmd.cdb = p->cdb;
        p->cmd.thread = w->own;
        p->cmd.complete = parked_complete;
        scsi_lun_exec(w->lun, &p->cmd);
        atomic_fetch_add(&w->issued, 1);
    }
    while (!g_queue_is_empty(&w->parked)) {
        parker_complete_oldest(w);
    }
    return NULL;
}

struct stress_drain {
    struct scsi_drain d;
    struct parker *w;
    unsigned snap[STRESS_THREADS];
    GMutex lock;
    GCond cond;
    bool done;
    bool complete_before;      /* everything in snap had completed at done */
};

static void stress_drain_done(struct scsi_drain *d)
{
    struct stress_drain *sd = d->opaque;
    bool ok = true;

    for (unsigned i = 0; i < STRESS_THREADS; i++) {
        ok = ok && atomic_load(&sd->w[i].completed) >= sd->snap[i];
    }
    g_mutex_lock(&sd->lock);
    sd->complete_before = ok;
    sd->done = true;
    g_cond_broadcast(&sd->cond);
    g_mutex_unlock(&sd->lock);
}

/*
 * own_threads: each parker's commands name an I/O thread of their own (not
 * run: the parker is its only user), so they count in per-thread counters
 * with plain stores, and the drain relies on membarrier; otherwise they
 * name none and share the atomic counter.
 */
static void drain_under_continuous_io(bool own_threads)
{
    struct lun_backend *be = g_new0(struct lun_backend, 1);
    struct parker w[STRESS_THREADS];
    GThread *t[STRESS_THREADS];
    struct scsi_lun *lun;
    struct stress_drain sd = { .w = w };

    g_assert_cmpint(backend_ram_new(1 * MiB, 512, &stress_ram, NULL), ==, 0);
    *be = *stress_ram;
    be->ops = &parking_ops;
    be->name = g_strdup("parking");
    lun = ready(scsi_lun_new(be, "test:parking", NULL, NULL));
    atomic_store(&stress_stop, false);
    g_mutex_init(&sd.lock);
    g_cond_init(&sd.cond);
    for (unsigned i = 0; i < STRESS_THREADS; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].lun = lun;
        w[i].id = i;
        w[i].own = own_threads ? iothread_new("parker", i + 1, 0) : NULL;
        t[i] = g_thread_new("parker", parker_thread, &w[i]);
    }
    /* Every thread has a full set parked before the first drain. */
    for (unsigned i = 0; i < STRESS_THREADS; i++) {
        gint64 deadline = g_get_monotonic_time() + DRAIN_TIMEOUT_US;

        while (atomic_load(&w[i].issued) <= STRESS_DEPTH) {
            g_assert_cmpint(g_get_monotonic_time(), <, deadline);
            g_thread_yield();
        }
    }
    for (unsigned n = 0; n < STRESS_DRAINS; n++) {
        gint64 deadline = g_get_monotonic_time() + DRAIN_TIMEOUT_US;

        sd.done = false;
        sd.d = (struct scsi_drain){ .done = stress_drain_done, .opaque = &sd };
        for (unsigned i = 0; i < STRESS_THREADS; i++) {
            sd.snap[i] = atomic_load(&w[i].issued);
        }
        scsi_lun_drain_async(lun, &sd.d);
        g_mutex_lock(&sd.lock);
        while (!sd.done) {
            /* The threads never let the LUN go idle: a drain waiting for that fails here. */
            g_assert_true(g_cond_wait_until(&sd.cond, &sd.lock, deadline));
        }
        g_mutex_unlock(&sd.lock);
        g_assert_true(sd.complete_before);
    }
    atomic_store(&stress_stop, true);
    for (unsigned i = 0; i < STRESS_THREADS; i++) {
        g_thread_join(t[i]);
        g_assert_cmpuint(atomic_load(&w[i].completed), ==, atomic_load(&w[i].issued));
        iothread_free(w[i].own);
    }
    g_assert_cmpuint(scsi_lun_inflight(lun), ==, 0);
    g_mutex_clear(&sd.lock);
    g_cond_clear(&sd.cond);
    scsi_lun_free(lun);
}

static void test_drain_under_continuous_io(void)
{
    drain_under_continuous_io(false);
}

static void test_drain_under_continuous_io_per_thread(void)
{
    drain_under_continuous_io(true);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/scsi-disk/backend/errors", test_backend_errors);
    g_test_add_func("/scsi-disk/async/multi-request", test_async_multi_request_commands);
    g_test_add_func("/scsi-disk/drain/idle-lun-completes-at-once",
                    test_drain_idle_lun_completes_at_once);
    g_test_add_func("/scsi-disk/drain/waits-for-inflight", test_drain_waits_for_inflight);
    g_test_add_func("/scsi-disk/drain/does-not-wait-for-later-commands",
                    test_drain_does_not_wait_for_later_commands);
    g_test_add_func("/scsi-disk/drain/later-command-completing-first",
                    test_drain_later_command_completing_first);
    g_test_add_func("/scsi-disk/drain/while-draining", test_drain_while_draining);
    g_test_add_func("/scsi-disk/drain/done-runs-on-the-thread-named",
                    test_drain_done_runs_on_the_thread_named);
    g_test_add_func("/scsi-disk/drain/under-continuous-io", test_drain_under_continuous_io);
    g_test_add_func("/scsi-disk/drain/under-continuous-io-per-thread-counters",
                    test_drain_under_continuous_io_per_thread);

    return g_test_run();
}
