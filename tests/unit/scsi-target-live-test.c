/*
 * Specification of the SCSI target's live changes (hw/scsi/scsi-target.c,
 * "live changes"), with initiators connected:
 *  - a LUN added is reached by every nexus at once, with POWER ON pending
 *    for each, REPORTED LUNS DATA HAS CHANGED on the port's other LUNs,
 *    in REPORT LUNS, and each nexus's transport is told;
 *  - a LUN removed is absent for the next command of every nexus, the
 *    port's other LUNs get REPORTED LUNS DATA HAS CHANGED, the transports
 *    are told, and the LUN is handed back only once the commands running
 *    on it have completed and a grace period of the I/O threads has ended
 *    (until then an I/O thread may still be reading the old table); READs
 *    waiting for its rate limit when it goes run after the grace period,
 *    with their nexus's unit attentions still there, and complete GOOD;
 *  - a LUN grown reports its new capacity after CAPACITY DATA HAS CHANGED
 *    to every nexus, and the transports are told; shrinking, and growing a
 *    backend that cannot grow, are refused and change nothing.
 * Commands go to RAM and null LUNs, which complete inside the call, or to
 * a parking backend that completes when the test says.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>

#include <glib.h>

#include "backend.h"
#include "grace.h"
#include "scsi-cmd.h"
#include "scsi-target.h"

#define MiB (1024 * 1024)
#define TIMEOUT_US (10 * G_USEC_PER_SEC)

/* ASC/ASCQ in libiscsi's form; libiscsi names neither of these. */
#define ASCQ_POWER_ON_RESET 0x2900
#define ASCQ_REPORTED_LUNS_CHANGED 0x3f0e

struct result {
    int ret;
    unsigned completions;
    uint8_t status;
    struct sc_sense sense;
    uint64_t in_xfer;
};

static void record(struct scsi_cmd *cmd)
{
    struct result *r = cmd->opaque;

    r->completions++;
    r->status = cmd->status;
    r->sense = sc_sense_of(cmd->sense, cmd->sense_len);
    r->in_xfer = cmd->data_in_xfer;
}

/* A command and what it needs until it completes (which may be later). */
struct pending {
    uint8_t cdb[SC_CDB_MAX];
    struct iovec iov;
    struct scsi_cmd cmd;
    struct result r;
};

/* Starts task from nx, run on I/O thread t (NULL: none, as a test's own thread). */
static void start_on(struct pending *p, struct iothread *t, struct scsi_nexus *nx,
                     unsigned port, unsigned lun, struct scsi_task *task, uint8_t *buf,
                     size_t len)
{
    memset(p, 0, sizeof(*p));
    p->cmd = (struct scsi_cmd){ .cdb = p->cdb, .thread = t, .complete = record,
                                .opaque = &p->r };
    p->cmd.cdb_len = sc_cdb(task, p->cdb);
    if (buf) {
        p->iov = (struct iovec){ buf, len };
        p->cmd.data_in = &p->iov;
        p->cmd.data_in_cnt = 1;
    }
    p->r.ret = scsi_nexus_exec(nx, port, lun, false, &p->cmd);
}

static void start(struct pending *p, struct scsi_nexus *nx, unsigned port, unsigned lun,
                  struct scsi_task *task, uint8_t *buf, size_t len)
{
    start_on(p, NULL, nx, port, lun, task, buf, len);
}

/* A command that completes inside the call (RAM, null, the target's own answers). */
static struct result exec(struct scsi_nexus *nx, unsigned port, unsigned lun,
                          struct scsi_task *task, uint8_t *buf, size_t len)
{
    struct pending p;

    start(&p, nx, port, lun, task, buf, len);
    g_assert_true(p.r.ret < 0 || p.r.completions == 1);
    return p.r;
}

static struct result tur(struct scsi_nexus *nx, unsigned port, unsigned lun)
{
    return exec(nx, port, lun, scsi_cdb_testunitready(), NULL, 0);
}

static void assert_good(const struct result *r)
{
    g_assert_cmpint(r->ret, ==, 0);
    g_assert_cmpuint(r->completions, ==, 1);
    g_assert_cmphex(r->status, ==, SAM_STAT_GOOD);
}

static void assert_ua(const struct result *r, unsigned code)
{
    g_assert_cmpint(r->ret, ==, 0);
    g_assert_cmphex(r->status, ==, SAM_STAT_CHECK_CONDITION);
    g_assert_cmpuint(r->sense.key, ==, SCSI_SENSE_UNIT_ATTENTION);
    g_assert_cmphex(r->sense.code, ==, code);
}

/* The port's LUNs as REPORT LUNS lists them to nx, into ids; returns how many. */
static unsigned report_luns(struct scsi_nexus *nx, unsigned port, uint16_t *ids, unsigned max)
{
    uint8_t buf[8 + 8 * 16], cdb[SC_CDB_MAX];
    unsigned cdb_len = sc_cdb(scsi_reportluns_cdb(0, sizeof(buf)), cdb);
    struct sc_datain d = { 0 };
    struct scsi_reportluns_list *list;
    struct result r = exec(nx, port, 0, scsi_reportluns_cdb(0, sizeof(buf)), buf, sizeof(buf));
    unsigned n;

    assert_good(&r);
    list = sc_datain_decode(&d, cdb, cdb_len, buf, r.in_xfer);
    g_assert_nonnull(list);
    n = MIN(list->num, max);
    for (unsigned i = 0; i < n; i++) {
        ids[i] = list->luns[i];
    }
    sc_datain_free(&d);
    return n;
}

static uint64_t capacity(struct scsi_nexus *nx, unsigned port, unsigned lun)
{
    uint8_t buf[32], cdb[SC_CDB_MAX];
    unsigned cdb_len = sc_cdb(scsi_cdb_readcapacity16(), cdb);
    struct sc_datain d = { 0 };
    struct scsi_readcapacity16 *rc;
    struct result r = exec(nx, port, lun, scsi_cdb_readcapacity16(), buf, sizeof(buf));
    uint64_t bytes;

    assert_good(&r);
    rc = sc_datain_decode(&d, cdb, cdb_len, buf, r.in_xfer);
    g_assert_nonnull(rc);
    bytes = (rc->returned_lba + 1) * rc->block_length;
    sc_datain_free(&d);
    return bytes;
}

static struct scsi_lun *ram_lun(const char *name)
{
    struct lun_backend *be;

    g_assert_cmpint(backend_ram_new(MiB, 512, &be, NULL), ==, 0);
    return scsi_lun_new(be, name, NULL, NULL);
}

/* Takes the unit attentions pending on (port, lun) until a TUR is GOOD. */
static void settle_lun(struct scsi_nexus *nx, unsigned port, unsigned lun)
{
    for (unsigned i = 0; i < 8; i++) {
        struct result r = tur(nx, port, lun);

        if (r.status == SAM_STAT_GOOD) {
            return;
        }
        g_assert_cmpuint(r.sense.key, ==, SCSI_SENSE_UNIT_ATTENTION);
    }
    g_assert_not_reached();
}

/* ---- what the transports hear -------------------------------------------- */

struct heard {
    unsigned added, removed, changed;
    unsigned port, lun;
    uint8_t asc, ascq;
};

static void heard_added(void *opaque, unsigned port, unsigned lun)
{
    struct heard *h = opaque;

    h->added++;
    h->port = port;
    h->lun = lun;
}

static void heard_removed(void *opaque, unsigned port, unsigned lun)
{
    struct heard *h = opaque;

    h->removed++;
    h->port = port;
    h->lun = lun;
}

static void heard_changed(void *opaque, unsigned port, unsigned lun, uint8_t asc, uint8_t ascq)
{
    struct heard *h = opaque;

    h->changed++;
    h->port = port;
    h->lun = lun;
    h->asc = asc;
    h->ascq = ascq;
}

static const struct scsi_nexus_events heard_ops = {
    .lun_added = heard_added, .lun_removed = heard_removed, .lun_changed = heard_changed,
};

/* A target with 0:0 and 0:1 (RAM) and 3:5, two settled nexuses listening. */
struct fx {
    struct scsi_target *t;
    struct scsi_nexus *a, *b;
    struct heard ha, hb;
};

static void fx_setup(struct fx *x)
{
    memset(x, 0, sizeof(*x));
    x->t = scsi_target_new("t");
    g_assert_cmpint(scsi_target_add_lun(x->t, 0, 0, ram_lun("0:0")), ==, 0);
    g_assert_cmpint(scsi_target_add_lun(x->t, 0, 1, ram_lun("0:1")), ==, 0);
    g_assert_cmpint(scsi_target_add_lun(x->t, 3, 5, ram_lun("3:5")), ==, 0);
    x->a = scsi_target_nexus_new(x->t, "A");
    x->b = scsi_target_nexus_new(x->t, "B");
    scsi_nexus_set_events(x->a, &heard_ops, &x->ha);
    scsi_nexus_set_events(x->b, &heard_ops, &x->hb);
    for (unsigned i = 0; i < 2; i++) {
        struct scsi_nexus *nx = i ? x->b : x->a;

        settle_lun(nx, 0, 0);
        settle_lun(nx, 0, 1);
        settle_lun(nx, 3, 5);
    }
}

static void fx_teardown(struct fx *x)
{
    scsi_target_nexus_free(x->a);
    scsi_target_nexus_free(x->b);
    scsi_target_free_luns(x->t);
}

/* ---- adding ----------------------------------------------------------- */

static void test_add_reaches_every_nexus(void)
{
    struct fx x;
    struct scsi_lun *dup;
    uint16_t ids[16];
    struct result r;

    fx_setup(&x);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE, "t: LUN 0:7 added (0:7)");
    g_assert_cmpint(scsi_target_add_lun(x.t, 0, 7, ram_lun("0:7")), ==, 0);
    g_test_assert_expected_messages();
    for (unsigned i = 0; i < 2; i++) {
        struct scsi_nexus *nx = i ? x.b : x.a;
        struct heard *h = i ? &x.hb : &x.ha;

        g_assert_cmpuint(h->added, ==, 1);
        g_assert_cmpuint(h->port, ==, 0);
        g_assert_cmpuint(h->lun, ==, 7);
        /* The new LUN has just powered on for this initiator. */
        r = tur(nx, 0, 7);
        assert_ua(&r, ASCQ_POWER_ON_RESET);
        r = tur(nx, 0, 7);
        assert_good(&r);
        /* The LUNs it already knew tell it the inventory changed, once. */
        r = tur(nx, 0, 1);
        assert_ua(&r, ASCQ_REPORTED_LUNS_CHANGED);
        r = tur(nx, 0, 1);
        assert_good(&r);
        r = tur(nx, 0, 0);
        assert_ua(&r, ASCQ_REPORTED_LUNS_CHANGED);
        /* Another port's inventory did not change. */
        r = tur(nx, 3, 5);
        assert_good(&r);
        g_assert_cmpuint(report_luns(nx, 0, ids, G_N_ELEMENTS(ids)), ==, 3);
        g_assert_cmpuint(ids[2], ==, 7);
    }
    /* A duplicate is refused (it stays the caller's); nothing is announced. */
    dup = ram_lun("dup");
    g_assert_cmpint(scsi_target_add_lun(x.t, 0, 7, dup), ==, -EEXIST);
    scsi_lun_free(dup);
    g_assert_cmpuint(x.ha.added, ==, 1);
    fx_teardown(&x);
}

static void test_add_on_a_new_port(void)
{
    struct fx x;
    struct result r;

    fx_setup(&x);
    r = tur(x.a, 9, 0);
    g_assert_cmpint(r.ret, ==, -ENXIO);
    g_assert_false(scsi_nexus_has_port(x.a, 9));
    g_assert_cmpint(scsi_target_add_lun(x.t, 9, 0, ram_lun("9:0")), ==, 0);
    g_assert_true(scsi_nexus_has_port(x.a, 9));
    g_assert_nonnull(scsi_nexus_lun(x.b, 9, 0));
    r = tur(x.a, 9, 0);
    assert_ua(&r, ASCQ_POWER_ON_RESET);
    /* Port 0's inventory is untouched. */
    r = tur(x.a, 0, 0);
    assert_good(&r);
    fx_teardown(&x);
}

/* ---- removing --------------------------------------------------------- */

struct handed_back {
    unsigned calls;
    struct scsi_lun *lun;
};

static void handed_back(struct scsi_lun *lun, void *opaque)
{
    struct handed_back *hb = opaque;

    hb->calls++;
    hb->lun = lun;
}

static void test_remove_from_every_nexus(void)
{
    struct fx x;
    struct handed_back back = { 0 };
    struct scsi_lun *l;
    uint16_t ids[16];
    struct result r;

    fx_setup(&x);
    l = scsi_target_lun(x.t, 0, 1);
    g_assert_cmpint(scsi_target_remove_lun(x.t, 0, 1, handed_back, &back), ==, 0);
    /* Nothing in flight and no threads: handed back at once. */
    g_assert_cmpuint(back.calls, ==, 1);
    g_assert_true(back.lun == l);
    g_assert_null(scsi_target_lun(x.t, 0, 1));
    for (unsigned i = 0; i < 2; i++) {
        struct scsi_nexus *nx = i ? x.b : x.a;
        struct heard *h = i ? &x.hb : &x.ha;
        uint8_t inq[96];

        g_assert_cmpuint(h->removed, ==, 1);
        g_assert_cmpuint(h->lun, ==, 1);
        g_assert_null(scsi_nexus_lun(nx, 0, 1));
        r = tur(nx, 0, 1);
        g_assert_cmpint(r.ret, ==, -ENODEV);
        /* A scan finds the hole as any hole. */
        r = exec(nx, 0, 1, scsi_cdb_inquiry(0, 0, sizeof(inq)), inq, sizeof(inq));
        assert_good(&r);
        g_assert_cmphex(inq[0], ==, 0x7f);
        r = tur(nx, 0, 0);
        assert_ua(&r, ASCQ_REPORTED_LUNS_CHANGED);
        r = tur(nx, 3, 5);
        assert_good(&r);
        g_assert_cmpuint(report_luns(nx, 0, ids, G_N_ELEMENTS(ids)), ==, 1);
        g_assert_cmpuint(ids[0], ==, 0);
    }
    scsi_lun_free(back.lun);
    g_assert_cmpint(scsi_target_remove_lun(x.t, 0, 1, handed_back, &back), ==, -ENOENT);
    g_assert_cmpint(scsi_target_remove_lun(x.t, 0, 20000, handed_back, &back), ==, -EINVAL);
    /* The last LUN of a port takes the port with it. */
    back = (struct handed_back){ 0 };
    g_assert_cmpint(scsi_target_remove_lun(x.t, 3, 5, handed_back, &back), ==, 0);
    scsi_lun_free(back.lun);
    g_assert_false(scsi_nexus_has_port(x.a, 3));
    r = tur(x.a, 3, 5);
    g_assert_cmpint(r.ret, ==, -ENXIO);
    fx_teardown(&x);
}

static void test_remove_one_of_two_addresses(void)
{
    struct fx x;
    struct scsi_lun *l = ram_lun("shared");
    struct handed_back back = { 0 };
    struct result r;

    fx_setup(&x);
    /* One LUN at two addresses (a disk mapped twice, or by two controllers). */
    g_assert_cmpint(scsi_target_add_lun(x.t, 0, 5, l), ==, 0);
    g_assert_cmpint(scsi_target_add_lun(x.t, 0, 6, l), ==, 0);
    settle_lun(x.a, 0, 5);
    settle_lun(x.a, 0, 6);
    g_assert_cmpint(scsi_target_remove_lun(x.t, 0, 5, handed_back, &back), ==, 0);
    g_assert_true(back.lun == l);
    /* Only that address went; the other still reaches the LUN. */
    g_assert_null(scsi_nexus_lun(x.a, 0, 5));
    g_assert_true(scsi_nexus_lun(x.a, 0, 6) == l);
    settle_lun(x.a, 0, 6);
    r = tur(x.a, 0, 6);
    assert_good(&r);
    back = (struct handed_back){ 0 };
    g_assert_cmpint(scsi_target_remove_lun(x.t, 0, 6, handed_back, &back), ==, 0);
    scsi_lun_free(l);
    fx_teardown(&x);
}

/* A backend that parks every I/O until the test completes it (inline). */
struct park {
    struct lun_backend be;
    struct lun_backend *inner;
    GQueue parked;
};

static int park_submit(struct lun_backend *be, struct backend_io *io)
{
    g_queue_push_tail(&((struct park *)be)->parked, io);
    return 0;
}

static void park_close(struct lun_backend *be)
{
    struct park *p = (struct park *)be;

    g_assert_true(g_queue_is_empty(&p->parked));
    backend_close(p->inner);
    g_free(p->be.name);
    g_free(p);
}

static const struct backend_ops park_ops = { .name = "park", .submit = park_submit,
                                             .close = park_close };

static struct park *park_new(void)
{
    struct park *p = g_new0(struct park, 1);

    g_assert_cmpint(backend_ram_new(MiB, 512, &p->inner, NULL), ==, 0);
    p->be = *p->inner;
    p->be.ops = &park_ops;
    p->be.name = g_strdup("park");
    g_queue_init(&p->parked);
    return p;
}

static void park_release(struct park *p)
{
    struct backend_io *io = g_queue_pop_head(&p->parked);

    g_assert_nonnull(io);
    g_assert_cmpint(p->inner->ops->submit(p->inner, io), ==, 0);
}

static void test_remove_waits_for_commands_in_flight(void)
{
    struct fx x;
    struct park *p = park_new();
    struct handed_back back = { 0 };
    uint8_t buf[512];
    struct pending rd;

    fx_setup(&x);
    g_assert_cmpint(scsi_target_add_lun(x.t, 0, 2, scsi_lun_new(&p->be, "park", NULL, NULL)), ==,
                    0);
    settle_lun(x.a, 0, 2);
    start(&rd, x.a, 0, 2, scsi_cdb_read10(0, 512, 512, 0, 0, 0, 0, 0), buf, sizeof(buf));
    g_assert_cmpint(rd.r.ret, ==, 0);
    g_assert_cmpuint(rd.r.completions, ==, 0);
    g_assert_cmpint(scsi_target_remove_lun(x.t, 0, 2, handed_back, &back), ==, 0);
    /* Unreachable already, but not handed back while its READ runs. */
    g_assert_null(scsi_nexus_lun(x.a, 0, 2));
    g_assert_cmpuint(back.calls, ==, 0);
    park_release(p);
    g_assert_cmpuint(rd.r.completions, ==, 1);
    g_assert_cmphex(rd.r.status, ==, SAM_STAT_GOOD);
    g_assert_cmpuint(back.calls, ==, 1);
    scsi_lun_free(back.lun);
    fx_teardown(&x);
}

/* An I/O thread busy in one iteration until the test lets it go. */
struct busy {
    GMutex lock;
    GCond cond;
    bool in, release;
};

static void busy_iteration(void *opaque)
{
    struct busy *b = opaque;

    g_mutex_lock(&b->lock);
    b->in = true;
    g_cond_broadcast(&b->cond);
    while (!b->release) {
        g_cond_wait(&b->cond, &b->lock);
    }
    g_mutex_unlock(&b->lock);
}

static void nothing(void *opaque)
{
}

static void remove_on_main(void *opaque)
{
    struct fx *x = opaque;
    struct handed_back *back = (struct handed_back *)(x + 1);

    g_assert_cmpint(scsi_target_remove_lun(x->t, 0, 1, handed_back, back), ==, 0);
}

static void test_remove_waits_for_a_grace_period(void)
{
    struct {
        struct fx x;
        struct handed_back back;
    } s = { 0 };
    struct iothread *main_thread = iothread_new("g-main", 0, 0), *io = iothread_new("g-io", 1, 0);
    struct busy b = { 0 };
    gint64 deadline = g_get_monotonic_time() + TIMEOUT_US;

    g_mutex_init(&b.lock);
    g_cond_init(&b.cond);
    g_assert_cmpint(iothread_start(main_thread), ==, 0);
    g_assert_cmpint(iothread_start(io), ==, 0);
    fx_setup(&s.x);
    scsi_target_set_threads(s.x.t, main_thread, &io, 1);

    /* The I/O thread is inside an iteration, as if in the middle of a command. */
    iothread_post(io, busy_iteration, &b);
    g_mutex_lock(&b.lock);
    while (!b.in) {
        g_assert_true(g_cond_wait_until(&b.cond, &b.lock, deadline));
    }
    g_mutex_unlock(&b.lock);
    iothread_run_sync(main_thread, remove_on_main, &s.x);
    iothread_run_sync(main_thread, nothing, NULL);
    g_assert_cmpuint(s.back.calls, ==, 0);

    /* Its iteration ends: the grace period ends, the LUN comes back on main. */
    g_mutex_lock(&b.lock);
    b.release = true;
    g_cond_broadcast(&b.cond);
    g_mutex_unlock(&b.lock);
    iothread_run_sync(io, nothing, NULL);
    while (!g_atomic_int_get(&s.back.calls)) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        iothread_run_sync(main_thread, nothing, NULL);
    }
    g_assert_cmpuint(s.back.calls, ==, 1);
    scsi_lun_free(s.back.lun);
    iothread_free(io);
    iothread_free(main_thread);
    fx_teardown(&s.x);
    g_mutex_clear(&b.lock);
    g_cond_clear(&b.cond);
}

/*
 * READs to a LUN over its rate limit, waiting on an I/O thread's timer
 * (scsi-qos.c), while the LUN is removed.
 */
#define WAITING 16

struct rate_limited {
    struct fx x;
    struct handed_back back;
    struct iothread *io;
    struct pending p[WAITING];
    uint8_t buf[WAITING][512];
    GMutex lock;
    GCond cond;
    gint completed;             /* under lock; read alone, atomically */
};

static void rate_limited_done(struct scsi_cmd *cmd)
{
    struct rate_limited *s = cmd->opaque;
    struct pending *p = (struct pending *)((char *)cmd - G_STRUCT_OFFSET(struct pending, cmd));

    p->r.completions++;
    p->r.status = cmd->status;
    p->r.sense = sc_sense_of(cmd->sense, cmd->sense_len);
    g_mutex_lock(&s->lock);
    g_atomic_int_inc(&s->completed);
    g_cond_broadcast(&s->cond);
    g_mutex_unlock(&s->lock);
}

/* On the I/O thread, as a transport runs its commands. */
static void rate_limited_submit(void *opaque)
{
    struct rate_limited *s = opaque;

    for (unsigned i = 0; i < WAITING; i++) {
        struct pending *p = &s->p[i];

        memset(p, 0, sizeof(*p));
        p->cmd = (struct scsi_cmd){ .cdb = p->cdb, .thread = s->io,
                                    .complete = rate_limited_done, .opaque = s };
        p->cmd.cdb_len = sc_cdb(scsi_cdb_read10(i, 512, 512, 0, 0, 0, 0, 0), p->cdb);
        p->iov = (struct iovec){ s->buf[i], sizeof(s->buf[i]) };
        p->cmd.data_in = &p->iov;
        p->cmd.data_in_cnt = 1;
        p->r.ret = scsi_nexus_exec(s->x.a, 0, 2, false, &p->cmd);
    }
}

static void rate_limited_remove(void *opaque)
{
    struct rate_limited *s = opaque;

    g_assert_cmpint(scsi_target_remove_lun(s->x.t, 0, 2, handed_back, &s->back), ==, 0);
}

static void test_remove_runs_commands_waiting_for_a_rate_limit(void)
{
    struct rate_limited *s = g_new0(struct rate_limited, 1);
    struct iothread *main_thread = iothread_new("q-main", 0, 0);
    struct scsi_qos one_per_s = { .iops = 1 }, unlimited = { 0 };
    gint64 deadline = g_get_monotonic_time() + TIMEOUT_US;
    struct lun_backend *be;
    struct scsi_lun *l;

    g_mutex_init(&s->lock);
    g_cond_init(&s->cond);
    s->io = iothread_new("q-io", 1, 0);
    g_assert_cmpint(iothread_start(main_thread), ==, 0);
    g_assert_cmpint(iothread_start(s->io), ==, 0);
    fx_setup(&s->x);
    g_assert_cmpint(backend_null_new(MiB, 512, &be, NULL), ==, 0);
    l = scsi_lun_new(be, "0:2", NULL, NULL);
    g_assert_cmpint(scsi_target_add_lun(s->x.t, 0, 2, l), ==, 0);
    settle_lun(s->x.a, 0, 2);
    scsi_target_set_threads(s->x.t, main_thread, &s->io, 1);

    /* One READ a second: the first takes the burst, the others wait in flight. */
    scsi_lun_set_qos(l, &one_per_s);
    iothread_run_sync(s->io, rate_limited_submit, s);
    for (unsigned i = 0; i < WAITING; i++) {
        g_assert_cmpint(s->p[i].r.ret, ==, 0);
    }

    /* Removed, and the grace period over: no table names the LUN any more. */
    iothread_run_sync(main_thread, rate_limited_remove, s);
    iothread_run_sync(s->io, nothing, NULL);
    iothread_run_sync(main_thread, nothing, NULL);
    g_assert_null(scsi_nexus_lun(s->x.a, 0, 2));
    /* Not handed back while READs wait (a second each: most still do). */
    g_assert_cmpint(g_atomic_int_get(&s->completed), <, WAITING);
    g_assert_cmpuint(s->back.calls, ==, 0);

    /* Let them run: each completes once, GOOD, as any command the LUN had taken. */
    scsi_lun_set_qos(l, &unlimited);
    g_mutex_lock(&s->lock);
    while (s->completed < WAITING) {
        g_assert_true(g_cond_wait_until(&s->cond, &s->lock, deadline));
    }
    g_mutex_unlock(&s->lock);
    iothread_run_sync(s->io, nothing, NULL);
    for (unsigned i = 0; i < WAITING; i++) {
        g_assert_cmpuint(s->p[i].r.completions, ==, 1);
        g_assert_cmphex(s->p[i].r.status, ==, SAM_STAT_GOOD);
    }
    /* Then, drained, the LUN comes back on the main thread. */
    while (!g_atomic_int_get(&s->back.calls)) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        iothread_run_sync(main_thread, nothing, NULL);
    }
    g_assert_true(s->back.lun == l);
    scsi_lun_free(l);
    iothread_free(s->io);
    iothread_free(main_thread);
    fx_teardown(&s->x);
    g_mutex_clear(&s->lock);
    g_cond_clear(&s->cond);
    g_free(s);
}

/* ---- resizing --------------------------------------------------------- */

/* A refused resize of (0, lun): its errno, and words the operator reads. */
static void resize_refused(struct scsi_target *t, unsigned lun, uint64_t size, int code,
                           const char *words)
{
    g_autoptr(GError) err = NULL;

    g_assert_cmpint(scsi_target_resize_lun(t, 0, lun, size, &err), ==, -code);
    g_assert_error(err, VS_ERROR, code);
    g_assert_cmpstr(err->message, ==, words);
}

static void test_resize_grows_for_every_nexus(void)
{
    struct fx x;
    struct lun_backend *be;
    struct result r;

    fx_setup(&x);
    g_assert_cmpint(backend_null_new(64 * MiB, 4096, &be, NULL), ==, 0);
    g_assert_cmpint(scsi_target_add_lun(x.t, 0, 4, scsi_lun_new(be, "0:4", NULL, NULL)), ==, 0);
    for (unsigned lun = 0; lun < 5; lun += lun == 1 ? 3 : 1) {
        settle_lun(x.a, 0, lun);
        settle_lun(x.b, 0, lun);
    }
    g_assert_cmpuint(capacity(x.a, 0, 4), ==, 64 * MiB);

    g_assert_cmpint(scsi_target_resize_lun(x.t, 0, 4, 128 * MiB, NULL), ==, 0);
    for (unsigned i = 0; i < 2; i++) {
        struct scsi_nexus *nx = i ? x.b : x.a;
        struct heard *h = i ? &x.hb : &x.ha;

        g_assert_cmpuint(h->changed, ==, 1);
        g_assert_cmpuint(h->lun, ==, 4);
        g_assert_cmphex(h->asc, ==, 0x2a);
        g_assert_cmphex(h->ascq, ==, 0x09);
        r = tur(nx, 0, 4);
        assert_ua(&r, SCSI_SENSE_ASCQ_CAPACITY_DATA_HAS_CHANGED);
        g_assert_cmpuint(capacity(nx, 0, 4), ==, 128 * MiB);
        /* Only the LUN that grew. */
        r = tur(nx, 0, 0);
        assert_good(&r);
    }

    /*
     * Refused, and nothing changes: smaller, not whole blocks, a RAM LUN,
     * nothing there.  The error says which, and nothing is logged (a
     * warning would fail the test).
     */
    resize_refused(x.t, 4, 64 * MiB, EINVAL,
                   "67108864 bytes is smaller than now (134217728 bytes): shrinking is refused");
    resize_refused(x.t, 4, 128 * MiB + 512, EINVAL,
                   "134218240 bytes is not a whole number of 4096-byte blocks");
    resize_refused(x.t, 0, 2 * MiB, ENOTSUP, "a ram backend cannot grow");
    resize_refused(x.t, 9, 2 * MiB, ENOENT, "no LUN is mapped at 0:9");
    g_assert_cmpuint(x.ha.changed, ==, 1);
    g_assert_cmpuint(capacity(x.a, 0, 4), ==, 128 * MiB);
    r = tur(x.a, 0, 4);
    assert_good(&r);
    fx_teardown(&x);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/scsi-target/live/add/reaches-every-nexus", test_add_reaches_every_nexus);
    g_test_add_func("/scsi-target/live/add/on-a-new-port", test_add_on_a_new_port);
    g_test_add_func("/scsi-target/live/remove/from-every-nexus", test_remove_from_every_nexus);
    g_test_add_func("/scsi-target/live/remove/one-of-two-addresses",
                    test_remove_one_of_two_addresses);
    g_test_add_func("/scsi-target/live/remove/waits-for-commands-in-flight",
                    test_remove_waits_for_commands_in_flight);
    g_test_add_func("/scsi-target/live/remove/waits-for-a-grace-period",
                    test_remove_waits_for_a_grace_period);
    g_test_add_func("/scsi-target/live/remove/runs-commands-waiting-for-a-rate-limit",
                    test_remove_runs_commands_waiting_for_a_rate_limit);
    g_test_add_func("/scsi-target/live/resize/grows-for-every-nexus",
                    test_resize_grows_for_every_nexus);
    return g_test_run();
}
