/*
 * Specification of the virtio-scsi device model (hw/scsi/virtio-scsi.c):
 *  - LUN addressing (virtio 1.2 5.6.6.1): the single-level structure 01h,
 *    target, 40h|LUN>>8, LUN&FFh, four zero bytes; the REPORT LUNS
 *    well-known LUN C101h; everything else refused (BAD_TARGET);
 *  - task management: each TMF that aborts tasks is answered when, and
 *    only when, the tasks it names that were running when it arrived have
 *    completed (and their used entries are published); it never waits for
 *    later ones or for other front-ends' tasks it does not concern; the
 *    control queue answers other requests meanwhile; TMFs still waiting
 *    when the control queue stops are answered FAILURE at the stop and
 *    their later completion touches nothing.
 * The TMF tests play two front-ends (devices sharing a LUN map, each with
 * its own guest RAM and rings: control, event, two request queues on two
 * I/O threads, the control queue on a "main" thread) and a backend that
 * parks every I/O until the test completes it, through the guest driver
 * of vscsi-driver.h.  What requests and TMFs hand the target is specified
 * against a fake target in virtio-scsi-fake-target-test.c, and request
 * handling end to end by the protocol, qtest and fuzz-virtio-scsi tests.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>
#include <linux/virtio_ring.h>
#include <linux/virtio_scsi.h>

#include "backend.h"
#include "scsi-cmd.h"
#include "guest-mem.h"
#include "iothread.h"
#include "scsi-target.h"
#include "shared-writer.h"
#include "virtio-scsi.h"
#include "virtqueue.h"
#include "vscsi-driver.h"

static void test_single_level_lun(void)
{
    const uint8_t lun5[8] = { 1, 7, 0x40, 5 };
    const uint8_t lun_max[8] = { 1, 255, 0x7f, 0xff };
    const uint8_t lun0_peripheral[8] = { 1, 0, 0, 0 };
    unsigned t = 99, l = 99;

    g_assert_cmpint(vscsi_decode_lun(lun5, &t, &l), ==, 0);
    g_assert_cmpuint(t, ==, 7);
    g_assert_cmpuint(l, ==, 5);
    g_assert_cmpint(vscsi_decode_lun(lun_max, &t, &l), ==, 0);
    g_assert_cmpuint(t, ==, 255);
    g_assert_cmpuint(l, ==, 16383);
    g_assert_cmpint(vscsi_decode_lun(lun0_peripheral, &t, &l), ==, 0);
    g_assert_cmpuint(l, ==, 0);
}

static void test_report_luns_well_known_lun(void)
{
    const uint8_t wlun[8] = { 1, 2, 0xc1, 0x01 };
    unsigned t, l;

    g_assert_cmpint(vscsi_decode_lun(wlun, &t, &l), ==, 1);
    g_assert_cmpuint(t, ==, 2);
}

static void test_other_addresses_refused(void)
{
    static const uint8_t bad[][8] = {
        { 0, 0, 0x40, 0 },                 /* first byte not 1 */
        { 2, 0, 0x40, 0 },
        { 1, 0, 0x40, 0, 0, 0, 0, 1 },     /* second level present */
        { 1, 0, 0x80, 0 },                 /* logical unit addressing */
        { 1, 0, 0xc0, 0 },                 /* extended addressing, not the W-LUN */
        { 1, 0, 0x05, 0 },                 /* peripheral addressing with a bus number */
    };
    unsigned t, l;

    for (unsigned i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_assert_cmpint(vscsi_decode_lun(bad[i], &t, &l), ==, -EINVAL);
    }
}

/* ---- a backend that parks every I/O until the test completes it -------- */

#define BLOCK 512

struct hold {
    struct lun_backend be;
    struct lun_backend *inner;
    GMutex lock;
    GCond cond;
    GQueue parked;          /* struct backend_io *, in submission order */
    unsigned submitted;     /* ever parked */
};

static int hold_submit(struct lun_backend *be, struct backend_io *io)
{
    struct hold *h = (struct hold *)be;

    g_mutex_lock(&h->lock);
    g_queue_push_tail(&h->parked, io);
    h->submitted++;
    g_cond_broadcast(&h->cond);
    g_mutex_unlock(&h->lock);
    return 0;
}

static void hold_close(struct lun_backend *be)
{
    struct hold *h = (struct hold *)be;

    g_assert_true(g_queue_is_empty(&h->parked));
    backend_close(h->inner);
    g_mutex_clear(&h->lock);
    g_cond_clear(&h->cond);
    g_free(h->be.name);
    g_free(h);
}

static const struct backend_ops hold_ops = { .name = "hold", .submit = hold_submit,
                                             .close = hold_close };

static struct hold *hold_new(void)
{
    struct hold *h = g_new0(struct hold, 1);

    g_assert_cmpint(backend_ram_new(1 << 20, BLOCK, &h->inner, NULL), ==, 0);
    h->be = *h->inner;
    h->be.ops = &hold_ops;
    h->be.name = g_strdup("hold");
    g_mutex_init(&h->lock);
    g_cond_init(&h->cond);
    g_queue_init(&h->parked);
    return h;
}

/* Waits (bounded) until n I/Os in all have reached the backend. */
static void hold_wait_submitted(struct hold *h, unsigned n)
{
    gint64 deadline = g_get_monotonic_time() + TIMEOUT_MS * G_TIME_SPAN_MILLISECOND;

    g_mutex_lock(&h->lock);
    while (h->submitted < n) {
        g_assert_true(g_cond_wait_until(&h->cond, &h->lock, deadline));
    }
    g_mutex_unlock(&h->lock);
}

struct hold_release {
    struct hold *h;
    struct backend_io *io;
};

static void hold_complete_on_thread(void *opaque)
{
    struct hold_release *c = opaque;

    c->h->inner->ops->submit(c->h->inner, c->io);
}

/* Completes the parked I/O of block lba, on the thread that submitted it. */
static void hold_release(struct hold *h, uint64_t lba)
{
    struct hold_release c = { .h = h };

    g_mutex_lock(&h->lock);
    for (GList *l = h->parked.head; l; l = l->next) {
        struct backend_io *io = l->data;

        if (io->offset == lba * BLOCK) {
            c.io = io;
            g_queue_delete_link(&h->parked, l);
            break;
        }
    }
    g_mutex_unlock(&h->lock);
    g_assert_nonnull(c.io);
    iothread_run_sync(c.io->thread, hold_complete_on_thread, &c);
}

/* ---- two front-ends playing the driver --------------------------------- */

#define NLUNS 3                 /* 0:0 and 0:1 parked, 1:0 parked */

struct fx {
    struct fe_threads th;
    struct scsi_target *target;
    struct hold *hold[NLUNS];
    struct fe a, b;
};

/* A one-block READ(10) of lba on request queue rq (0 or 1). */
static struct cmd fe_read(struct fe *f, unsigned rq, unsigned target, unsigned lun,
                          uint64_t lba, uint64_t tag)
{
    uint8_t cdb[SC_CDB_MAX];
    unsigned cdb_len = sc_cdb(scsi_cdb_read10((uint32_t)lba, BLOCK, BLOCK, 0, 0, 0, 0, 0), cdb);

    return fe_cmd(f, VSCSI_FIRST_REQ_QUEUE + rq, target, lun, tag, cdb, cdb_len, BLOCK);
}

/* Consumes the power-on unit attention of every LUN. */
static void fe_ready(struct fe *f)
{
    static const unsigned ids[NLUNS][2] = { { 0, 0 }, { 0, 1 }, { 1, 0 } };

    for (unsigned i = 0; i < NLUNS; i++) {
        g_assert_cmpuint(fe_tur(f, ids[i][0], ids[i][1], NULL), ==, 2);
        g_assert_cmpuint(fe_tur(f, ids[i][0], ids[i][1], NULL), ==, 0);
    }
}

static void nothing(void *opaque)
{
}

static void fx_setup(struct fx *x)
{
    static const unsigned ids[NLUNS][2] = { { 0, 0 }, { 0, 1 }, { 1, 0 } };

    memset(x, 0, sizeof(*x));
    fe_threads_start(&x->th);
    x->target = scsi_target_new("t");
    for (unsigned i = 0; i < NLUNS; i++) {
        g_autofree char *name = g_strdup_printf("hold%u:%u", ids[i][0], ids[i][1]);

        x->hold[i] = hold_new();
        g_assert_cmpint(scsi_target_add_lun(x->target, ids[i][0], ids[i][1],
                                    scsi_lun_new(&x->hold[i]->be, name, NULL, NULL)), ==, 0);
    }
    fe_open(&x->a, "A", x->target, x->th.main, x->th.io);
    fe_open(&x->b, "B", x->target, x->th.main, x->th.io);
    fe_ready(&x->a);
    fe_ready(&x->b);
}

static void fx_teardown(struct fx *x)
{
    fe_close(&x->a);
    fe_close(&x->b);
    fe_threads_stop(&x->th);
    scsi_target_free_luns(x->target);
}

/* ---- control requests the guest rewrites while they are read ---------- */

/*
 * The request flips between a TMF and an AN query, with TMFs that are
 * answered at once (an abort or a query of a tag nobody uses) on either
 * target.
 */
/*
 * A field of the shared request as the aligned word it is, for the
 * writer's atomic stores: struct virtio_scsi_ctrl_tmf_req is packed, so
 * &req->type may be unaligned as far as the compiler knows, but each of its
 * fields sits at its natural alignment and fe_alloc's buffers are 64-byte
 * aligned.
 */
#define TMF_REQ_FIELD(shared, field)                                                   \
    ((__typeof__(((struct virtio_scsi_ctrl_tmf_req *)0)->field) *)aligned_field(        \
        (shared), offsetof(struct virtio_scsi_ctrl_tmf_req, field),                      \
        sizeof(((struct virtio_scsi_ctrl_tmf_req *)0)->field)))

static void *aligned_field(void *shared, size_t offset, size_t size)
{
    char *p = (char *)shared + offset;

    g_assert_cmpuint((uintptr_t)p % size, ==, 0);
    return p;
}

static void scramble_ctrl_request(void *shared, GRand *rand)
{
    struct virtio_scsi_ctrl_tmf_req *req = shared;
    uint32_t type = g_rand_boolean(rand) ? VIRTIO_SCSI_T_TMF : VIRTIO_SCSI_T_AN_QUERY;
    uint32_t subtype = g_rand_boolean(rand) ? ABORT_TASK : QUERY_TASK;

    __atomic_store_n(TMF_REQ_FIELD(shared, type), htole32(type), __ATOMIC_RELAXED);
    __atomic_store_n(TMF_REQ_FIELD(shared, subtype), htole32(subtype), __ATOMIC_RELAXED);
    __atomic_store_n(&req->lun[1], (uint8_t)g_rand_int_range(rand, 0, 2), __ATOMIC_RELAXED);
    __atomic_store_n(TMF_REQ_FIELD(shared, tag), (uint64_t)0x7a00 + g_rand_int_range(rand, 0, 4),
                     __ATOMIC_RELAXED);
}

/*
 * The control queue copies a request once and decides from the copy: each
 * one is answered as the TMF or the AN query it was when read, never
 * refused as short because its type changed between two reads.
 */
static void test_ctrl_request_rewritten_while_read(void)
{
    struct fx x;
    uint64_t req_gpa, resp_gpa;
    struct virtio_scsi_ctrl_tmf_req *req;
    struct shared_writer *w;
    unsigned tmfs = 0, queries = 0;

    fx_setup(&x);
    req_gpa = fe_alloc(&x.a, sizeof(*req));
    resp_gpa = fe_alloc(&x.a, sizeof(struct virtio_scsi_ctrl_an_resp));
    req = fe_gpa_host(&x.a, req_gpa);
    memset(req, 0, sizeof(*req));
    req->lun[0] = 1;
    w = shared_writer_start(scramble_ctrl_request, req);
    for (unsigned round = 0; round < 100; round++) {
        struct seg segs[2] = {
            { req_gpa, sizeof(*req), false },
            { resp_gpa, sizeof(struct virtio_scsi_ctrl_an_resp), true },
        };
        uint16_t head = tq_post(&x.a, VSCSI_CTRL_QUEUE, segs, 2);
        uint32_t len;

        tq_wait(&x.a, VSCSI_CTRL_QUEUE, head);
        len = tq_used_len(&x.a, VSCSI_CTRL_QUEUE, head);
        g_assert_true(len == sizeof(struct virtio_scsi_ctrl_tmf_resp) ||
                      len == sizeof(struct virtio_scsi_ctrl_an_resp));
        tmfs += len == sizeof(struct virtio_scsi_ctrl_tmf_resp);
        queries += len == sizeof(struct virtio_scsi_ctrl_an_resp);
    }
    g_test_message("%" G_GUINT64_FORMAT " passes of the writer; %u TMFs and %u AN queries "
                   "answered", shared_writer_stop(w), tmfs, queries);
    fx_teardown(&x);
}

/* ---- task management --------------------------------------------------- */


/* hold[] index of each LUN */
#define H00 0
#define H01 1
#define H10 2

/* ---- quiescing a request queue (what a queue stop waits on) ----------- */

struct quiesce_call {
    struct fe *f;
    unsigned idx;
    int ret;
    gint reports;
};

static void quiesce_report_cb(void *arg)
{
    struct quiesce_call *c = arg;

    g_atomic_int_inc(&c->reports);
}

static void quiesce_on_main(void *opaque)
{
    struct quiesce_call *c = opaque;

    c->ret = vscsi_queue_quiesce(c->f->dev, c->idx, quiesce_report_cb, c);
}

static void resume_on_main(void *opaque)
{
    struct quiesce_call *c = opaque;

    vscsi_queue_resume(c->f->dev, c->idx);
}

static void fe_quiesce(struct quiesce_call *c)
{
    fe_on_main(c->f, quiesce_on_main, c);
}

/* Returns once what the I/O threads posted to the main thread so far has run. */
static void main_barrier(struct fx *x)
{
    iothread_run_sync(x->th.main, nothing, NULL);
}

/*
 * The response (virtio 1.2 5.6.6.1): a GOOD command's sense_len, resid,
 * status and response are written and its sense field is not touched (the
 * driver reads sense_len bytes of it); a CHECK CONDITION writes exactly its
 * sense_len bytes of sense.  The used length covers the whole response
 * either way, as data-in would follow it.
 */
static void test_response_writes_the_sense_it_reports(void)
{
    struct fx x;
    struct cmd c;
    uint8_t cdb[SC_CDB_MAX] = { 0x02 };     /* no such opcode */
    unsigned n;

    fx_setup(&x);
    g_assert_cmpuint(fe_tur(&x.a, 0, 0, &c), ==, SAM_STAT_GOOD);
    g_assert_cmpuint(le32toh(c.resp->sense_len), ==, 0);
    g_assert_cmpuint(le32toh(c.resp->resid), ==, 0);
    for (unsigned i = 0; i < sizeof(c.resp->sense); i++) {
        g_assert_cmphex(c.resp->sense[i], ==, 0xee);
    }
    g_assert_cmpuint(tq_used_len(&x.a, c.qi, c.head), ==, sizeof(*c.resp));

    c = fe_cmd(&x.a, VSCSI_FIRST_REQ_QUEUE, 0, 0, 1, cdb, 6, 0);
    cmd_wait(&x.a, &c);
    g_assert_cmpuint(c.resp->response, ==, VIRTIO_SCSI_S_OK);
    g_assert_cmpuint(c.resp->status, ==, SAM_STAT_CHECK_CONDITION);
    n = le32toh(c.resp->sense_len);
    g_assert_cmpuint(n, >=, 8);
    g_assert_cmpuint(n, <, sizeof(c.resp->sense));
    g_assert_cmpuint(sense_code(&c), ==, SCSI_SENSE_ASCQ_INVALID_OPERATION_CODE);
    for (unsigned i = n; i < sizeof(c.resp->sense); i++) {
        g_assert_cmphex(c.resp->sense[i], ==, 0xee);
    }
    g_assert_cmpuint(tq_used_len(&x.a, c.qi, c.head), ==, sizeof(*c.resp));
    fx_teardown(&x);
}

static void test_quiesce_idle_queue_needs_no_wait(void)
{
    struct fx x;
    struct quiesce_call rq, cq;

    fx_setup(&x);
    rq = (struct quiesce_call){ .f = &x.a, .idx = VSCSI_FIRST_REQ_QUEUE };
    cq = (struct quiesce_call){ .f = &x.a, .idx = VSCSI_CTRL_QUEUE };
    fe_quiesce(&rq);
    fe_quiesce(&cq);
    g_assert_cmpint(rq.ret, ==, 0);
    g_assert_cmpint(cq.ret, ==, 0);     /* the control queue stops without waiting for I/O */
    fe_stop_queue(&x.a, VSCSI_FIRST_REQ_QUEUE);
    main_barrier(&x);
    g_assert_cmpint(g_atomic_int_get(&rq.reports), ==, 0);
    fx_teardown(&x);
}

/*
 * A quiesced queue pops nothing more, reports once, on the main thread,
 * when its last request in flight has completed, and then stops without
 * waiting; the request posted after the quiesce is left on the ring for
 * the next start (the ring base counts only what was popped).
 */
static void test_quiesce_reports_after_the_last_completion(void)
{
    struct fx x;
    struct quiesce_call c;
    struct cmd r, later;
    uint16_t popped;

    fx_setup(&x);
    r = fe_read(&x.a, 0, 0, 0, 10, 0x61);
    hold_wait_submitted(x.hold[H00], 1);
    c = (struct quiesce_call){ .f = &x.a, .idx = VSCSI_FIRST_REQ_QUEUE };
    fe_quiesce(&c);
    g_assert_cmpint(c.ret, ==, 1);
    popped = x.a.q[c.idx].vq.last_avail_idx;
    later = fe_read(&x.a, 0, 0, 0, 11, 0x62);
    main_barrier(&x);
    g_assert_cmpint(g_atomic_int_get(&c.reports), ==, 0);

    hold_release(x.hold[H00], 10);
    main_barrier(&x);
    g_assert_cmpint(g_atomic_int_get(&c.reports), ==, 1);
    fe_stop_queue(&x.a, c.idx);
    g_assert_true(cmd_done(&x.a, &r));
    g_assert_cmpuint(r.resp->status, ==, 0);
    g_assert_false(cmd_done(&x.a, &later));
    g_assert_cmpuint(x.a.q[c.idx].vq.last_avail_idx, ==, popped);
    g_assert_cmpuint(x.hold[H00]->submitted, ==, 1);
    fx_teardown(&x);
}

/* Resumed before its I/O completed: it takes requests again and never reports. */
static void test_quiesce_then_resume(void)
{
    struct fx x;
    struct quiesce_call c;
    struct cmd r, later;

    fx_setup(&x);
    r = fe_read(&x.a, 0, 0, 0, 10, 0x71);
    hold_wait_submitted(x.hold[H00], 1);
    c = (struct quiesce_call){ .f = &x.a, .idx = VSCSI_FIRST_REQ_QUEUE };
    fe_quiesce(&c);
    g_assert_cmpint(c.ret, ==, 1);
    later = fe_read(&x.a, 0, 0, 0, 11, 0x72);
    iothread_run_sync(x.th.main, resume_on_main, &c);
    hold_wait_submitted(x.hold[H00], 2);   /* popped once resumed */
    hold_release(x.hold[H00], 10);
    hold_release(x.hold[H00], 11);
    cmd_wait(&x.a, &r);
    cmd_wait(&x.a, &later);
    main_barrier(&x);
    g_assert_cmpint(g_atomic_int_get(&c.reports), ==, 0);
    fx_teardown(&x);
}

static void test_abort_task_not_found(void)
{
    struct fx x;
    struct cmd r;
    struct tmf t;

    fx_setup(&x);
    r = fe_read(&x.a, 0, 0, 0, 10, 0x51);
    hold_wait_submitted(x.hold[H00], 1);
    /* Another tag, and the same tag on another LUN: neither is running. */
    t = fe_tmf(&x.a, ABORT_TASK, 0, 0, 0x52);
    g_assert_cmpuint(tmf_wait(&x.a, &t), ==, FUNCTION_COMPLETE);
    t = fe_tmf(&x.a, ABORT_TASK, 0, 1, 0x51);
    g_assert_cmpuint(tmf_wait(&x.a, &t), ==, FUNCTION_COMPLETE);
    /* Another front-end's task of that tag is not this nexus's. */
    t = fe_tmf(&x.b, ABORT_TASK, 0, 0, 0x51);
    g_assert_cmpuint(tmf_wait(&x.b, &t), ==, FUNCTION_COMPLETE);
    g_assert_false(cmd_done(&x.a, &r));
    hold_release(x.hold[H00], 10);
    cmd_wait(&x.a, &r);
    fx_teardown(&x);
}

static void test_abort_task_after_its_task_completed(void)
{
    struct fx x;
    struct cmd r;
    struct tmf t;

    fx_setup(&x);
    r = fe_read(&x.a, 0, 0, 0, 10, 0x51);
    hold_wait_submitted(x.hold[H00], 1);
    hold_release(x.hold[H00], 10);
    cmd_wait(&x.a, &r);
    g_assert_cmpuint(r.resp->status, ==, 0);
    t = fe_tmf(&x.a, ABORT_TASK, 0, 0, 0x51);
    g_assert_cmpuint(tmf_wait(&x.a, &t), ==, FUNCTION_COMPLETE);
    fx_teardown(&x);
}

static void test_abort_task_waits_for_its_running_task(void)
{
    struct fx x;
    struct cmd r, other;
    struct tmf t;

    fx_setup(&x);
    r = fe_read(&x.a, 1, 0, 0, 10, 0x51);
    other = fe_read(&x.a, 0, 0, 0, 11, 0x52);
    hold_wait_submitted(x.hold[H00], 2);
    t = fe_tmf(&x.a, ABORT_TASK, 0, 0, 0x51);
    fe_ctrl_barrier(&x.a);
    g_assert_false(tmf_answered(&x.a, &t));
    hold_release(x.hold[H00], 10);
    g_assert_cmpuint(tmf_wait(&x.a, &t), ==, FUNCTION_COMPLETE);
    /* The aborted task's completion is on the used ring before the answer. */
    g_assert_true(cmd_done(&x.a, &r));
    g_assert_false(cmd_done(&x.a, &other));
    hold_release(x.hold[H00], 11);
    cmd_wait(&x.a, &other);
    fx_teardown(&x);
}

/*
 * The TMF and the completion of its task race (the TMF is looked at on the
 * main thread while the task completes on its I/O thread): whichever
 * wins, the TMF is answered once, FUNCTION COMPLETE, with the task's
 * completion published first.
 */
static void test_abort_task_racing_its_completion(void)
{
    struct fx x;

    fx_setup(&x);
    for (unsigned i = 0; i < 40; i++) {
        struct cmd r = fe_read(&x.a, i % 2, 0, 0, 100 + i, 0x100 + i);
        struct tmf t;

        hold_wait_submitted(x.hold[H00], i + 1);
        t = fe_tmf(&x.a, ABORT_TASK, 0, 0, 0x100 + i);
        hold_release(x.hold[H00], 100 + i);
        g_assert_cmpuint(tmf_wait(&x.a, &t), ==, FUNCTION_COMPLETE);
        g_assert_true(cmd_done(&x.a, &r));
        g_assert_cmpuint(r.resp->status, ==, 0);
    }
    fe_ctrl_barrier(&x.a);
    /* 40 TMFs and one barrier: nothing answered twice. */
    g_assert_cmpuint(tq_used_count(&x.a, VSCSI_CTRL_QUEUE), ==, 41);
    fx_teardown(&x);
}

/*
 * ABORT TASK SET waits for this nexus's tasks on that LUN that were
 * running when it came: not another front-end's, not another LUN's, not
 * those submitted after it.
 */
static void test_abort_task_set_waits_for_this_nexus_only(void)
{
    struct fx x;
    struct cmd a1, a2, a_other_lun, b1, a_later;
    struct tmf t;

    fx_setup(&x);
    a1 = fe_read(&x.a, 0, 0, 0, 1, 1);
    a2 = fe_read(&x.a, 1, 0, 0, 2, 2);
    a_other_lun = fe_read(&x.a, 0, 0, 1, 3, 3);
    b1 = fe_read(&x.b, 0, 0, 0, 4, 1);
    hold_wait_submitted(x.hold[H00], 3);
    hold_wait_submitted(x.hold[H01], 1);
    t = fe_tmf(&x.a, ABORT_TASK_SET, 0, 0, 0);
    fe_ctrl_barrier(&x.a);
    a_later = fe_read(&x.a, 0, 0, 0, 5, 5);
    hold_wait_submitted(x.hold[H00], 4);
    hold_release(x.hold[H00], 1);
    fe_ctrl_barrier(&x.a);
    g_assert_false(tmf_answered(&x.a, &t));
    hold_release(x.hold[H00], 2);
    g_assert_cmpuint(tmf_wait(&x.a, &t), ==, FUNCTION_COMPLETE);
    g_assert_true(cmd_done(&x.a, &a1) && cmd_done(&x.a, &a2));
    g_assert_false(cmd_done(&x.a, &a_other_lun));
    g_assert_false(cmd_done(&x.b, &b1));
    g_assert_false(cmd_done(&x.a, &a_later));
    hold_release(x.hold[H01], 3);
    hold_release(x.hold[H00], 4);
    hold_release(x.hold[H00], 5);
    cmd_wait(&x.a, &a_other_lun);
    cmd_wait(&x.b, &b1);
    cmd_wait(&x.a, &a_later);
    fx_teardown(&x);
}

/*
 * LOGICAL UNIT RESET (and CLEAR TASK SET) concern every initiator's tasks
 * on the LUN that were running when it came, not those started later
 * (continuous I/O); the reset is then reported to each nexus (29h/03h).
 */
static void lun_wide_tmf(uint32_t subtype)
{
    struct fx x;
    struct cmd a1, b1, b_later, tur;
    struct tmf t;

    fx_setup(&x);
    a1 = fe_read(&x.a, 0, 0, 0, 1, 1);
    b1 = fe_read(&x.b, 1, 0, 0, 2, 1);
    hold_wait_submitted(x.hold[H00], 2);
    t = fe_tmf(&x.a, subtype, 0, 0, 0);
    fe_ctrl_barrier(&x.a);
    b_later = fe_read(&x.b, 0, 0, 0, 3, 2);
    hold_wait_submitted(x.hold[H00], 3);
    hold_release(x.hold[H00], 1);
    cmd_wait(&x.a, &a1);
    fe_ctrl_barrier(&x.a);
    g_assert_false(tmf_answered(&x.a, &t));       /* b1 is still running */
    hold_release(x.hold[H00], 2);
    g_assert_cmpuint(tmf_wait(&x.a, &t), ==, FUNCTION_COMPLETE);
    cmd_wait(&x.b, &b1);
    g_assert_false(cmd_done(&x.b, &b_later));
    hold_release(x.hold[H00], 3);
    cmd_wait(&x.b, &b_later);
    g_assert_cmpuint(b_later.resp->status, ==, 0);
    if (subtype == LUN_RESET) {
        g_assert_cmpuint(fe_tur(&x.a, 0, 0, &tur), ==, 2);
        g_assert_cmphex(sense_code(&tur), ==, 0x2903);
        g_assert_cmpuint(fe_tur(&x.b, 0, 0, &tur), ==, 2);
        g_assert_cmphex(sense_code(&tur), ==, 0x2903);
    }
    g_assert_cmpuint(fe_tur(&x.a, 0, 0, NULL), ==, 0);
    g_assert_cmpuint(fe_tur(&x.a, 0, 1, NULL), ==, 0);   /* another LUN: not reset */
    fx_teardown(&x);
}

static void test_lun_reset_waits_for_every_nexus_not_later_io(void)
{
    lun_wide_tmf(LUN_RESET);
}

static void test_clear_task_set_waits_for_every_nexus_not_later_io(void)
{
    lun_wide_tmf(CLEAR_TASK_SET);
}

/* I_T NEXUS RESET: this nexus's tasks on the target's LUNs; 29h/07h to it only. */
static void test_nexus_reset_waits_for_this_nexus_on_the_target(void)
{
    struct fx x;
    struct cmd a00, a01, a10, b00, tur;
    struct tmf t;

    fx_setup(&x);
    a00 = fe_read(&x.a, 0, 0, 0, 1, 1);
    a01 = fe_read(&x.a, 1, 0, 1, 2, 2);
    a10 = fe_read(&x.a, 0, 1, 0, 3, 3);
    b00 = fe_read(&x.b, 0, 0, 0, 4, 1);
    hold_wait_submitted(x.hold[H00], 2);
    hold_wait_submitted(x.hold[H01], 1);
    hold_wait_submitted(x.hold[H10], 1);
    t = fe_tmf(&x.a, NEXUS_RESET, 0, 0, 0);
    fe_ctrl_barrier(&x.a);
    hold_release(x.hold[H00], 1);
    fe_ctrl_barrier(&x.a);
    g_assert_false(tmf_answered(&x.a, &t));
    hold_release(x.hold[H01], 2);
    g_assert_cmpuint(tmf_wait(&x.a, &t), ==, FUNCTION_COMPLETE);
    g_assert_false(cmd_done(&x.a, &a10));            /* target 1 */
    g_assert_false(cmd_done(&x.b, &b00));            /* another nexus */
    g_assert_true(cmd_done(&x.a, &a00) && cmd_done(&x.a, &a01));
    hold_release(x.hold[H10], 3);
    hold_release(x.hold[H00], 4);
    cmd_wait(&x.a, &a10);
    cmd_wait(&x.b, &b00);
    g_assert_cmpuint(fe_tur(&x.a, 0, 1, &tur), ==, 2);
    g_assert_cmphex(sense_code(&tur), ==, 0x2907);
    g_assert_cmpuint(fe_tur(&x.a, 1, 0, NULL), ==, 0);
    g_assert_cmpuint(fe_tur(&x.b, 0, 0, NULL), ==, 0);
    fx_teardown(&x);
}

/* QUERY TASK and QUERY TASK SET answer at once, whatever is running. */
static void test_query_task_answers_at_once(void)
{
    struct fx x;
    struct cmd r;
    struct tmf t;

    fx_setup(&x);
    r = fe_read(&x.a, 1, 0, 0, 1, 0x77);
    hold_wait_submitted(x.hold[H00], 1);
    t = fe_tmf(&x.a, QUERY_TASK, 0, 0, 0x77);
    g_assert_cmpuint(tmf_wait(&x.a, &t), ==, VIRTIO_SCSI_S_FUNCTION_SUCCEEDED);
    t = fe_tmf(&x.a, QUERY_TASK, 0, 0, 0x78);
    g_assert_cmpuint(tmf_wait(&x.a, &t), ==, FUNCTION_COMPLETE);
    t = fe_tmf(&x.a, QUERY_TASK_SET, 0, 0, 0);
    g_assert_cmpuint(tmf_wait(&x.a, &t), ==, VIRTIO_SCSI_S_FUNCTION_SUCCEEDED);
    t = fe_tmf(&x.a, QUERY_TASK_SET, 0, 1, 0);
    g_assert_cmpuint(tmf_wait(&x.a, &t), ==, FUNCTION_COMPLETE);
    t = fe_tmf(&x.b, QUERY_TASK_SET, 0, 0, 0);       /* not B's task */
    g_assert_cmpuint(tmf_wait(&x.b, &t), ==, FUNCTION_COMPLETE);
    g_assert_false(cmd_done(&x.a, &r));
    hold_release(x.hold[H00], 1);
    cmd_wait(&x.a, &r);
    t = fe_tmf(&x.a, QUERY_TASK, 0, 0, 0x77);
    g_assert_cmpuint(tmf_wait(&x.a, &t), ==, FUNCTION_COMPLETE);
    fx_teardown(&x);
}

/* Several TMFs wait at once, each for its own tasks; other requests are answered. */
static void test_several_pending_tmfs(void)
{
    struct fx x;
    struct cmd r1, r2;
    struct tmf abort1, abort2, reset01;

    fx_setup(&x);
    r1 = fe_read(&x.a, 0, 0, 0, 1, 1);
    r2 = fe_read(&x.a, 1, 0, 1, 2, 2);
    hold_wait_submitted(x.hold[H00], 1);
    hold_wait_submitted(x.hold[H01], 1);
    abort1 = fe_tmf(&x.a, ABORT_TASK, 0, 0, 1);
    abort2 = fe_tmf(&x.a, ABORT_TASK, 0, 1, 2);
    reset01 = fe_tmf(&x.a, LUN_RESET, 0, 1, 0);
    fe_ctrl_barrier(&x.a);
    g_assert_false(tmf_answered(&x.a, &abort1));
    g_assert_false(tmf_answered(&x.a, &abort2));
    g_assert_false(tmf_answered(&x.a, &reset01));
    hold_release(x.hold[H01], 2);
    g_assert_cmpuint(tmf_wait(&x.a, &abort2), ==, FUNCTION_COMPLETE);
    g_assert_cmpuint(tmf_wait(&x.a, &reset01), ==, FUNCTION_COMPLETE);
    fe_ctrl_barrier(&x.a);
    g_assert_false(tmf_answered(&x.a, &abort1));
    hold_release(x.hold[H00], 1);
    g_assert_cmpuint(tmf_wait(&x.a, &abort1), ==, FUNCTION_COMPLETE);
    g_assert_true(cmd_done(&x.a, &r1) && cmd_done(&x.a, &r2));
    fx_teardown(&x);
}

/*
 * More TMFs than may wait at once: the rest stay on the ring until one
 * finishes, and then every one of them, and what came after, is answered.
 */
static void test_more_tmfs_than_may_wait(void)
{
    struct fx x;
    struct tmf t[70];
    struct cmd r;

    fx_setup(&x);
    r = fe_read(&x.a, 0, 0, 0, 1, 1);
    hold_wait_submitted(x.hold[H00], 1);
    for (unsigned i = 0; i < G_N_ELEMENTS(t); i++) {
        t[i] = fe_tmf(&x.a, ABORT_TASK, 0, 0, 1);
    }
    hold_release(x.hold[H00], 1);
    for (unsigned i = 0; i < G_N_ELEMENTS(t); i++) {
        g_assert_cmpuint(tmf_wait(&x.a, &t[i]), ==, FUNCTION_COMPLETE);
    }
    fe_ctrl_barrier(&x.a);
    g_assert_true(cmd_done(&x.a, &r));
    fx_teardown(&x);
}

/*
 * The control queue stops with TMFs waiting: they are answered FAILURE
 * before the stop returns, and their tasks completing later changes
 * nothing (no unit attention for a reset that was not carried out; ASan
 * checks that nothing freed is touched).
 */
static void test_pending_tmfs_at_control_queue_stop(void)
{
    struct fx x;
    struct cmd r;
    struct tmf abort, reset;

    fx_setup(&x);
    r = fe_read(&x.a, 0, 0, 0, 1, 1);
    hold_wait_submitted(x.hold[H00], 1);
    abort = fe_tmf(&x.a, ABORT_TASK, 0, 0, 1);
    reset = fe_tmf(&x.a, LUN_RESET, 0, 0, 0);
    fe_ctrl_barrier(&x.a);
    g_assert_false(tmf_answered(&x.a, &abort));
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE,
                          "*control queue stopped with * task management functions waiting*");
    fe_stop_queue(&x.a, VSCSI_CTRL_QUEUE);
    g_test_assert_expected_messages();
    g_assert_true(tmf_answered(&x.a, &abort));
    g_assert_true(tmf_answered(&x.a, &reset));
    g_assert_cmpuint(abort.resp->response, ==, VIRTIO_SCSI_S_FAILURE);
    g_assert_cmpuint(reset.resp->response, ==, VIRTIO_SCSI_S_FAILURE);
    g_assert_false(cmd_done(&x.a, &r));
    hold_release(x.hold[H00], 1);
    cmd_wait(&x.a, &r);
    g_assert_cmpuint(r.resp->status, ==, 0);
    /* The callbacks were posted to main before this runs there. */
    iothread_run_sync(x.th.main, nothing, NULL);
    g_assert_cmpuint(tq_used_count(&x.a, VSCSI_CTRL_QUEUE), ==, 3);
    g_assert_cmpuint(fe_tur(&x.a, 0, 0, NULL), ==, 0);
    g_assert_cmpuint(fe_tur(&x.b, 0, 0, NULL), ==, 0);
    fx_teardown(&x);
}

/*
 * A front-end goes away while its LOGICAL UNIT RESET waits for another
 * front-end's I/O: the reset is answered FAILURE as its device goes, and
 * the drain ending later frees it without touching the device.
 */
static void test_pending_tmf_when_its_front_end_goes_away(void)
{
    struct fx x;
    struct cmd b1;
    struct tmf reset;

    fx_setup(&x);
    b1 = fe_read(&x.b, 0, 0, 0, 1, 1);
    hold_wait_submitted(x.hold[H00], 1);
    reset = fe_tmf(&x.a, LUN_RESET, 0, 0, 0);
    fe_ctrl_barrier(&x.a);
    g_assert_false(tmf_answered(&x.a, &reset));
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE,
                          "*control queue stopped with 1 task management function waiting*");
    fe_free_dev(&x.a);
    g_test_assert_expected_messages();
    g_assert_true(tmf_answered(&x.a, &reset));
    g_assert_cmpuint(reset.resp->response, ==, VIRTIO_SCSI_S_FAILURE);
    hold_release(x.hold[H00], 1);
    cmd_wait(&x.b, &b1);
    iothread_run_sync(x.th.main, nothing, NULL);
    g_assert_cmpuint(fe_tur(&x.b, 0, 0, NULL), ==, 0);
    fx_teardown(&x);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/virtio-scsi/lun/single-level", test_single_level_lun);
    g_test_add_func("/virtio-scsi/response/writes-the-sense-it-reports",
                    test_response_writes_the_sense_it_reports);
    g_test_add_func("/virtio-scsi/lun/report-luns-well-known-lun",
                    test_report_luns_well_known_lun);
    g_test_add_func("/virtio-scsi/lun/other-addresses-refused", test_other_addresses_refused);
    g_test_add_func("/virtio-scsi/read-once/control-request-rewritten-while-read",
                    test_ctrl_request_rewritten_while_read);
    g_test_add_func("/virtio-scsi/tmf/abort-task/not-found", test_abort_task_not_found);
    g_test_add_func("/virtio-scsi/tmf/abort-task/after-its-task-completed",
                    test_abort_task_after_its_task_completed);
    g_test_add_func("/virtio-scsi/tmf/abort-task/waits-for-its-running-task",
                    test_abort_task_waits_for_its_running_task);
    g_test_add_func("/virtio-scsi/tmf/abort-task/racing-its-completion",
                    test_abort_task_racing_its_completion);
    g_test_add_func("/virtio-scsi/tmf/abort-task-set/waits-for-this-nexus-only",
                    test_abort_task_set_waits_for_this_nexus_only);
    g_test_add_func("/virtio-scsi/tmf/lun-reset/waits-for-every-nexus-not-later-io",
                    test_lun_reset_waits_for_every_nexus_not_later_io);
    g_test_add_func("/virtio-scsi/tmf/clear-task-set/waits-for-every-nexus-not-later-io",
                    test_clear_task_set_waits_for_every_nexus_not_later_io);
    g_test_add_func("/virtio-scsi/tmf/i-t-nexus-reset/waits-for-this-nexus-on-the-target",
                    test_nexus_reset_waits_for_this_nexus_on_the_target);
    g_test_add_func("/virtio-scsi/tmf/query-task/answers-at-once", test_query_task_answers_at_once);
    g_test_add_func("/virtio-scsi/quiesce/idle-queue-needs-no-wait",
                    test_quiesce_idle_queue_needs_no_wait);
    g_test_add_func("/virtio-scsi/quiesce/reports-after-the-last-completion",
                    test_quiesce_reports_after_the_last_completion);
    g_test_add_func("/virtio-scsi/quiesce/then-resume", test_quiesce_then_resume);
    g_test_add_func("/virtio-scsi/tmf/several-pending", test_several_pending_tmfs);
    g_test_add_func("/virtio-scsi/tmf/more-than-may-wait", test_more_tmfs_than_may_wait);
    g_test_add_func("/virtio-scsi/tmf/pending-at-control-queue-stop",
                    test_pending_tmfs_at_control_queue_stop);
    g_test_add_func("/virtio-scsi/tmf/pending-when-its-front-end-goes-away",
                    test_pending_tmf_when_its_front_end_goes_away);
    return g_test_run();
}
