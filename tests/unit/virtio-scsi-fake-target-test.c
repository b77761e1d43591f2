/*
 * Specification of the virtio-scsi device model (hw/scsi/virtio-scsi.c)
 * against a fake SCSI target (fake-scsi-target.h), which records what the
 * transport hands it and answers when and how each test says:
 *  - a request's LUN address (virtio 1.2 5.6.6.1) becomes the target's
 *    (port, LUN) or the REPORT LUNS well-known LUN; a malformed one, or a
 *    target that refuses the command, is BAD_TARGET and nothing more;
 *  - the CDB, tag and data buffers reach the target as the driver wrote
 *    them; the target's status, sense and data-in count come back in the
 *    response (resid, sense_len) and the used length; completions may come
 *    in any order;
 *  - one I_T nexus per device, named after it, freed with it once its
 *    commands have completed; a device reset is that nexus's reset;
 *  - LUN changes the target announces become events (virtio 1.2 5.6.6.3)
 *    when the driver accepted HOTPLUG / CHANGE: TRANSPORT_RESET with
 *    RESCAN or REMOVED, PARAM_CHANGE with the ASC/ASCQ, the LUN encoded as
 *    REPORT LUNS lists it (peripheral below 256, flat above: Linux reads
 *    the bytes as its LUN number); an event with no buffer is lost and the next one (or a
 *    NO_EVENT as soon as a buffer comes) carries EVENTS_MISSED;
 *  - task management reaches the target through the nexus and the LUN:
 *    LOGICAL UNIT RESET and CLEAR TASK SET are answered only when the
 *    LUN's drain ends, and only the reset raises the LUN's unit attention;
 *    I_T NEXUS RESET is the nexus's loss on that port; TMFs for a port or
 *    LUN the nexus does not reach are answered by address (BAD_TARGET,
 *    INCORRECT LUN) without touching the target; AN queries too.
 *  - each request is counted in its device's statistics when it is
 *    answered, by class (read, write, other), with the bytes it moved; a
 *    status other than GOOD (a unit attention excepted) and a refusal
 *    before the target (BAD_TARGET) are errors.
 * Task matching itself (which commands a TMF waits for) is specified with
 * the real target in virtio-scsi-test.c.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include <glib.h>

#include "fake-scsi-target.h"
#include "scsi-cmd.h"
#include "vscsi-driver.h"

struct fx {
    struct fe_threads th;
    struct scsi_target *t;
    struct fe a, b;
};

static void fx_setup(struct fx *x)
{
    memset(x, 0, sizeof(*x));
    fe_threads_start(&x->th);
    x->t = fake_target_new();
    fake_target_add_lun(x->t, 0, 0);
    fake_target_add_lun(x->t, 0, 1);
    fake_target_add_lun(x->t, 3, 0x123);
    fe_open(&x->a, "A", x->t, x->th.main, x->th.io);
    fe_open(&x->b, "B", x->t, x->th.main, x->th.io);
}

static void fx_teardown(struct fx *x)
{
    fe_close(&x->a);
    fe_close(&x->b);
    fe_threads_stop(&x->th);
    fake_target_free(x->t);
}

static unsigned tur_cdb(uint8_t cdb[SC_CDB_MAX])
{
    return sc_cdb(scsi_cdb_testunitready(), cdb);
}

/* ---- requests ---------------------------------------------------------- */

static void test_lun_address_reaches_the_target(void)
{
    struct fx x;
    uint8_t cdb[SC_CDB_MAX];
    unsigned len = tur_cdb(cdb);
    const struct fake_cmd *c;
    struct cmd r;

    fx_setup(&x);
    r = fe_cmd(&x.a, VSCSI_FIRST_REQ_QUEUE + 1, 3, 0x123, 0x77, cdb, len, 0);
    fake_wait_cmds(x.t, 1);
    c = fake_cmd_at(x.t, 0);
    g_assert_true(c->nx == fake_nexus_at(x.t, 0));
    g_assert_cmpuint(c->port, ==, 3);
    g_assert_cmpuint(c->lun, ==, 0x123);
    g_assert_false(c->wlun);
    g_assert_cmphex(c->tag, ==, 0x77);
    /* The whole CDB field goes down: the target reads what its opcode needs. */
    g_assert_cmpuint(c->cdb_len, ==, VIRTIO_SCSI_CDB_DEFAULT_SIZE);
    g_assert_cmpmem(c->cdb, len, cdb, len);
    g_assert_cmpuint(c->out_len + c->in_len, ==, 0);
    /* Nothing is answered before the target completes. */
    fe_ctrl_barrier(&x.a);
    g_assert_false(cmd_done(&x.a, &r));
    fake_complete(x.t, 0, SAM_STAT_GOOD, NULL, 0, NULL, 0);
    cmd_wait(&x.a, &r);
    g_assert_cmpuint(r.resp->response, ==, VIRTIO_SCSI_S_OK);
    g_assert_cmpuint(r.resp->status, ==, SAM_STAT_GOOD);
    g_assert_cmpuint(le32toh(r.resp->sense_len), ==, 0);
    g_assert_cmpuint(le32toh(r.resp->resid), ==, 0);
    g_assert_cmpuint(tq_used_len(&x.a, r.qi, r.head), ==, sizeof(*r.resp));
    fx_teardown(&x);
}

static void test_report_luns_well_known_lun_reaches_the_target(void)
{
    struct fx x;
    uint8_t cdb[SC_CDB_MAX];
    unsigned len = sc_cdb(scsi_reportluns_cdb(0, 64), cdb);
    const uint8_t wlun[8] = { 1, 3, 0xc1, 0x01 };
    struct seg in;
    struct cmd r;
    const struct fake_cmd *c;

    fx_setup(&x);
    in = (struct seg){ fe_alloc(&x.a, 64), 64, true };
    r = fe_cmd_segs(&x.a, VSCSI_FIRST_REQ_QUEUE, wlun, 1, cdb, len, &in, 1);
    fake_wait_cmds(x.t, 1);
    c = fake_cmd_at(x.t, 0);
    g_assert_true(c->wlun);
    g_assert_cmpuint(c->port, ==, 3);
    g_assert_cmpuint(c->in_len, ==, 64);
    fake_complete(x.t, 0, SAM_STAT_GOOD, NULL, 0, "\0\0\0\0\0\0\0\0", 8);
    cmd_wait(&x.a, &r);
    g_assert_cmpuint(r.resp->response, ==, VIRTIO_SCSI_S_OK);
    g_assert_cmpuint(le32toh(r.resp->resid), ==, 56);
    g_assert_cmpuint(tq_used_len(&x.a, r.qi, r.head), ==, sizeof(*r.resp) + 8);
    fx_teardown(&x);
}

static void test_malformed_lun_never_reaches_the_target(void)
{
    static const uint8_t bad[][8] = {
        { 2, 0, 0x40, 0 },              /* not the single-level structure */
        { 1, 0, 0x80, 0 },              /* logical unit addressing */
        { 1, 0, 0x40, 0, 0, 0, 0, 1 },  /* a second level */
    };
    struct fx x;
    uint8_t cdb[SC_CDB_MAX];
    unsigned len = tur_cdb(cdb);

    fx_setup(&x);
    for (unsigned i = 0; i < G_N_ELEMENTS(bad); i++) {
        struct cmd r = fe_cmd_segs(&x.a, VSCSI_FIRST_REQ_QUEUE, bad[i], i, cdb, len, NULL, 0);

        cmd_wait(&x.a, &r);
        g_assert_cmpuint(r.resp->response, ==, VIRTIO_SCSI_S_BAD_TARGET);
    }
    g_assert_cmpuint(fake_cmd_count(x.t), ==, 0);
    fx_teardown(&x);
}

static void test_target_refusal_is_bad_target(void)
{
    static const int refusals[] = { -ENXIO, -ENODEV };
    struct fx x;
    uint8_t cdb[SC_CDB_MAX];
    unsigned len = tur_cdb(cdb);

    fx_setup(&x);
    for (unsigned i = 0; i < G_N_ELEMENTS(refusals); i++) {
        struct cmd r;

        fake_target_refuse(x.t, refusals[i]);
        r = fe_cmd(&x.a, VSCSI_FIRST_REQ_QUEUE, 0, 7, i, cdb, len, 0);
        cmd_wait(&x.a, &r);
        g_assert_cmpuint(r.resp->response, ==, VIRTIO_SCSI_S_BAD_TARGET);
        g_assert_cmpuint(tq_used_len(&x.a, r.qi, r.head), ==, sizeof(*r.resp));
    }
    g_assert_cmpuint(fake_cmd_count(x.t), ==, 2);
    fx_teardown(&x);
}

static void test_data_out_reaches_the_target_as_written(void)
{
    struct fx x;
    uint8_t cdb[SC_CDB_MAX];
    unsigned len = sc_cdb(scsi_cdb_write10(0, 2048, 512, 0, 0, 0, 0, 0), cdb);
    struct seg out[3];
    uint8_t want[2048];
    size_t at = 0;
    const struct fake_cmd *c;
    struct cmd r;

    fx_setup(&x);
    for (unsigned i = 0; i < 3; i++) {
        uint32_t n = i == 1 ? 1024 : 512;

        out[i] = (struct seg){ fe_alloc(&x.a, n), n, false };
        memset(fe_gpa_host(&x.a, out[i].gpa), 'a' + i, n);
        memset(want + at, 'a' + i, n);
        at += n;
    }
    r = fe_cmd_segs(&x.a, VSCSI_FIRST_REQ_QUEUE, (const uint8_t[8]){ 1, 0, 0x40, 1 }, 9, cdb,
                    len, out, 3);
    fake_wait_cmds(x.t, 1);
    c = fake_cmd_at(x.t, 0);
    g_assert_cmpuint(c->lun, ==, 1);
    g_assert_cmpuint(c->out_len, ==, sizeof(want));
    g_assert_cmpuint(c->out_cnt, ==, 3);
    g_assert_cmpuint(c->in_len, ==, 0);
    g_assert_cmpmem(c->out, c->out_len, want, sizeof(want));
    fake_complete(x.t, 0, SAM_STAT_GOOD, NULL, 0, NULL, 0);
    cmd_wait(&x.a, &r);
    g_assert_cmpuint(r.resp->response, ==, VIRTIO_SCSI_S_OK);
    /* The fake consumed none of it: data_out_xfer 0 is all resid. */
    g_assert_cmpuint(le32toh(r.resp->resid), ==, sizeof(want));
    fx_teardown(&x);
}

static void test_data_in_and_sense_come_back(void)
{
    struct fx x;
    uint8_t cdb[SC_CDB_MAX];
    unsigned len = sc_cdb(scsi_cdb_read10(0, 2048, 512, 0, 0, 0, 0, 0), cdb);
    struct seg in[2];
    uint8_t data[1536], sense[18] = { 0x70, 0, SCSI_SENSE_MEDIUM_ERROR, [7] = 10,
                                      [12] = 0x11, [13] = 0x00 };
    const struct fake_cmd *c;
    struct cmd r;

    fx_setup(&x);
    in[0] = (struct seg){ fe_alloc(&x.a, 1024), 1024, true };
    in[1] = (struct seg){ fe_alloc(&x.a, 1024), 1024, true };
    for (unsigned i = 0; i < sizeof(data); i++) {
        data[i] = (uint8_t)(i * 7);
    }
    r = fe_cmd_segs(&x.a, VSCSI_FIRST_REQ_QUEUE + 1, (const uint8_t[8]){ 1, 0, 0x40, 0 }, 5,
                    cdb, len, in, 2);
    fake_wait_cmds(x.t, 1);
    c = fake_cmd_at(x.t, 0);
    g_assert_cmpuint(c->in_len, ==, 2048);
    g_assert_cmpuint(c->in_cnt, ==, 2);
    /* Part of the data, then the error: the driver is told how much arrived. */
    fake_complete(x.t, 0, SAM_STAT_CHECK_CONDITION, sense, sizeof(sense), data, sizeof(data));
    cmd_wait(&x.a, &r);
    g_assert_cmpuint(r.resp->response, ==, VIRTIO_SCSI_S_OK);
    g_assert_cmpuint(r.resp->status, ==, SAM_STAT_CHECK_CONDITION);
    g_assert_cmpuint(le32toh(r.resp->sense_len), ==, sizeof(sense));
    g_assert_cmpmem(r.resp->sense, sizeof(sense), sense, sizeof(sense));
    g_assert_cmpuint(sc_sense_of(r.resp->sense, sizeof(sense)).key, ==, SCSI_SENSE_MEDIUM_ERROR);
    g_assert_cmpuint(le32toh(r.resp->resid), ==, 512);
    g_assert_cmpuint(tq_used_len(&x.a, r.qi, r.head), ==, sizeof(*r.resp) + sizeof(data));
    g_assert_cmpmem(fe_gpa_host(&x.a, in[0].gpa), 1024, data, 1024);
    g_assert_cmpmem(fe_gpa_host(&x.a, in[1].gpa), 512, data + 1024, 512);
    fx_teardown(&x);
}

static void test_completions_in_any_order(void)
{
    static const unsigned order[] = { 2, 0, 1 };
    struct fx x;
    uint8_t cdb[SC_CDB_MAX];
    unsigned len = tur_cdb(cdb);
    struct cmd r[3];

    fx_setup(&x);
    for (unsigned i = 0; i < 3; i++) {
        r[i] = fe_cmd(&x.a, VSCSI_FIRST_REQ_QUEUE, 0, 0, 0x10 + i, cdb, len, 0);
    }
    fake_wait_cmds(x.t, 3);
    for (unsigned i = 0; i < 3; i++) {
        g_assert_cmphex(fake_cmd_at(x.t, i)->tag, ==, 0x10 + i);
    }
    for (unsigned k = 0; k < 3; k++) {
        unsigned i = order[k];
        uint8_t status = k == 1 ? SAM_STAT_BUSY : SAM_STAT_GOOD;

        fake_complete(x.t, i, status, NULL, 0, NULL, 0);
        cmd_wait(&x.a, &r[i]);
        g_assert_cmpuint(tq_used_head(&x.a, r[i].qi, k), ==, r[i].head);
        g_assert_cmpuint(r[i].resp->status, ==, status);
    }
    g_assert_cmpuint(tq_used_count(&x.a, VSCSI_FIRST_REQ_QUEUE), ==, 3);
    fx_teardown(&x);
}

/*
 * A batch that completes in one turn of the I/O thread is published to
 * the used ring in groups of eight (VSCSI_PUBLISH_EVERY), each signalled
 * (this driver asks for every interrupt: no EVENT_IDX, no NO_INTERRUPT),
 * not once at the turn's end: 20 completions are published at 8, 16 and
 * 20, three signals.  A driver waiting for interrupts then wakes while
 * the rest of the batch is still being answered.
 */
static void test_a_batch_is_published_in_groups(void)
{
    enum { N = 20 };
    struct fx x;
    uint8_t cdb[SC_CDB_MAX];
    unsigned len = tur_cdb(cdb);
    unsigned qi = VSCSI_FIRST_REQ_QUEUE;
    struct cmd r[N];
    uint64_t signals = 0;

    fx_setup(&x);
    for (unsigned i = 0; i < N; i++) {
        r[i] = fe_cmd(&x.a, qi, 0, 0, i, cdb, len, 0);
    }
    fake_wait_cmds(x.t, N);
    /* Nothing answered yet: whatever the call fd holds is not ours. */
    (void)!read(x.a.q[qi].vq.call_fd, &signals, sizeof(signals));
    fake_complete_batch(x.t, 0, N);
    /* The next turn of each thread starts after the last one's flush. */
    iothread_run_sync(x.th.io[0], fake_nothing, NULL);
    iothread_run_sync(x.th.io[1], fake_nothing, NULL);
    for (unsigned i = 0; i < N; i++) {
        g_assert_true(cmd_done(&x.a, &r[i]));
        g_assert_cmpuint(r[i].resp->status, ==, SAM_STAT_GOOD);
    }
    g_assert_cmpint(read(x.a.q[qi].vq.call_fd, &signals, sizeof(signals)), ==,
                    sizeof(signals));
    g_assert_cmpuint(signals, ==, 3);
    fx_teardown(&x);
}

/* ---- the I_T nexus ----------------------------------------------------- */

static void reset_on_main(void *opaque)
{
    vscsi_dev_reset(((struct fe *)opaque)->dev);
}

static void test_one_nexus_per_device(void)
{
    struct fx x;
    uint8_t cdb[SC_CDB_MAX];
    unsigned len = tur_cdb(cdb);
    struct cmd r;

    fx_setup(&x);
    g_assert_cmpuint(fake_nexus_created(x.t), ==, 2);
    g_assert_cmpstr(fake_nexus_name(fake_nexus_at(x.t, 0)), ==, "A");
    g_assert_cmpstr(fake_nexus_name(fake_nexus_at(x.t, 1)), ==, "B");
    r = fe_cmd(&x.b, VSCSI_FIRST_REQ_QUEUE, 0, 0, 1, cdb, len, 0);
    fake_wait_cmds(x.t, 1);
    g_assert_true(fake_cmd_at(x.t, 0)->nx == fake_nexus_at(x.t, 1));
    fake_complete(x.t, 0, SAM_STAT_GOOD, NULL, 0, NULL, 0);
    cmd_wait(&x.b, &r);
    /* The fake asserts that a nexus is freed only once its commands are done. */
    fe_free_dev(&x.b);
    g_assert_cmpuint(fake_nexus_alive(x.t), ==, 1);
    fe_free_dev(&x.a);
    g_assert_cmpuint(fake_nexus_alive(x.t), ==, 0);
    fx_teardown(&x);
}

static void test_device_reset_is_its_nexus_reset(void)
{
    struct fx x;

    fx_setup(&x);
    fe_on_main(&x.a, reset_on_main, &x.a);
    g_assert_cmpuint(fake_nexus_resets(fake_nexus_at(x.t, 0)), ==, 1);
    g_assert_cmpuint(fake_nexus_resets(fake_nexus_at(x.t, 1)), ==, 0);
    fx_teardown(&x);
}

/* ---- task management through the target -------------------------------- */

static void lun_drain_tmf(uint32_t subtype, unsigned reset_uas)
{
    struct fx x;
    struct tmf t;

    fx_setup(&x);
    t = fe_tmf(&x.a, subtype, 0, 1, 0);
    fe_ctrl_barrier(&x.a);
    g_assert_cmpuint(fake_drains(x.t, 0, 1), ==, 1);
    g_assert_cmpuint(fake_drains(x.t, 0, 0), ==, 0);
    g_assert_false(tmf_answered(&x.a, &t));
    g_assert_cmpuint(fake_lun_uas(x.t, 0, 1, SCSI_UA_LUN_RESET), ==, 0);
    fake_drain_end(x.t, 0, 1);
    g_assert_cmpuint(tmf_wait(&x.a, &t), ==, FUNCTION_COMPLETE);
    g_assert_cmpuint(fake_lun_uas(x.t, 0, 1, SCSI_UA_LUN_RESET), ==, reset_uas);
    g_assert_cmpuint(fake_lun_uas(x.t, 0, 0, SCSI_UA_LUN_RESET), ==, 0);
    /* Nothing of the other nexus's is touched. */
    g_assert_cmpuint(fake_nexus_losses(fake_nexus_at(x.t, 1), 0), ==, 0);
    fx_teardown(&x);
}

static void test_lun_reset_waits_for_the_lun_drain(void)
{
    lun_drain_tmf(LUN_RESET, 1);
}

static void test_clear_task_set_waits_for_the_lun_drain(void)
{
    lun_drain_tmf(CLEAR_TASK_SET, 0);
}

static void test_nexus_reset_is_the_nexus_loss_on_its_port(void)
{
    struct fx x;
    struct tmf t;

    fx_setup(&x);
    t = fe_tmf(&x.a, NEXUS_RESET, 3, 0, 0);
    g_assert_cmpuint(tmf_wait(&x.a, &t), ==, FUNCTION_COMPLETE);
    g_assert_cmpuint(fake_nexus_losses(fake_nexus_at(x.t, 0), 3), ==, 1);
    g_assert_cmpuint(fake_nexus_losses(fake_nexus_at(x.t, 0), 0), ==, 0);
    g_assert_cmpuint(fake_nexus_losses(fake_nexus_at(x.t, 1), 3), ==, 0);
    g_assert_cmpuint(fake_drains(x.t, 3, 0x123), ==, 0);
    fx_teardown(&x);
}

static void test_tmf_addressing(void)
{
    static const struct {
        uint32_t subtype;
        unsigned port, lun;
        uint8_t response;
    } cases[] = {
        { LUN_RESET, 9, 0, VIRTIO_SCSI_S_BAD_TARGET },       /* no such port */
        { ABORT_TASK, 9, 0, VIRTIO_SCSI_S_BAD_TARGET },
        { LUN_RESET, 0, 5, VIRTIO_SCSI_S_INCORRECT_LUN },    /* no such LUN */
        { ABORT_TASK_SET, 0, 5, VIRTIO_SCSI_S_INCORRECT_LUN },
        { CLEAR_TASK_SET, 3, 0, VIRTIO_SCSI_S_INCORRECT_LUN },
        { NEXUS_RESET, 0, 5, FUNCTION_COMPLETE },            /* the port is enough */
    };
    struct fx x;

    fx_setup(&x);
    for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
        struct tmf t = fe_tmf(&x.a, cases[i].subtype, cases[i].port, cases[i].lun, 0);

        g_assert_cmpuint(tmf_wait(&x.a, &t), ==, cases[i].response);
    }
    g_assert_cmpuint(fake_drains(x.t, 0, 0) + fake_drains(x.t, 0, 1) +
                     fake_drains(x.t, 3, 0x123), ==, 0);
    g_assert_cmpuint(fake_nexus_losses(fake_nexus_at(x.t, 0), 0), ==, 1);
    g_assert_cmpuint(fake_cmd_count(x.t), ==, 0);
    fx_teardown(&x);
}

static void test_an_query_by_port(void)
{
    struct fx x;

    fx_setup(&x);
    g_assert_cmpuint(fe_an_query(&x.a, 3), ==, VIRTIO_SCSI_S_OK);
    g_assert_cmpuint(fe_an_query(&x.a, 1), ==, VIRTIO_SCSI_S_BAD_TARGET);
    fx_teardown(&x);
}

/* ---- events ------------------------------------------------------------ */

struct announce {
    struct fe *f;
    struct scsi_target *t;
    enum fake_change change;
    unsigned port, lun;
    uint64_t features;
};

static void announce_on_main(void *opaque)
{
    struct announce *a = opaque;

    fake_nexus_announce(fake_nexus_at(a->t, 0), a->change, a->port, a->lun);
}

static void announce(struct fx *x, enum fake_change change, unsigned port, unsigned lun)
{
    struct announce a = { &x->a, x->t, change, port, lun };

    fe_on_main(&x->a, announce_on_main, &a);
}

static void features_on_main(void *opaque)
{
    struct announce *a = opaque;

    vscsi_dev_set_features(a->f->dev, a->features);
}

static void set_features(struct fx *x, uint64_t features)
{
    struct announce a = { .f = &x->a, .features = features };

    fe_on_main(&x->a, features_on_main, &a);
}

#define HOTPLUG_AND_CHANGE (1ull << VIRTIO_SCSI_F_HOTPLUG | 1ull << VIRTIO_SCSI_F_CHANGE)

static void assert_event(struct fx *x, const struct evbuf *b, uint32_t event, uint32_t reason,
                         unsigned port, unsigned lun)
{
    uint8_t want[8];

    tq_wait(&x->a, VSCSI_EVENT_QUEUE, b->head);
    g_assert_cmpuint(tq_used_len(&x->a, VSCSI_EVENT_QUEUE, b->head), ==,
                     sizeof(struct virtio_scsi_event));
    g_assert_cmphex(le32toh(b->ev->event), ==, event);
    g_assert_cmphex(le32toh(b->ev->reason), ==, reason);
    if ((event & ~VIRTIO_SCSI_T_EVENTS_MISSED) != VIRTIO_SCSI_T_NO_EVENT) {
        /* As REPORT LUNS encodes it: peripheral below 256, flat (40h) above. */
        memset(want, 0, sizeof(want));
        want[0] = 1;
        want[1] = (uint8_t)port;
        want[2] = lun < 256 ? 0 : 0x40 | (uint8_t)(lun >> 8);
        want[3] = (uint8_t)lun;
        g_assert_cmpmem(b->ev->lun, 8, want, 8);
    }
}

static void test_lun_changes_become_events(void)
{
    struct fx x;
    struct evbuf b[3];

    fx_setup(&x);
    set_features(&x, HOTPLUG_AND_CHANGE);
    for (unsigned i = 0; i < 3; i++) {
        b[i] = fe_event_buf(&x.a, sizeof(struct virtio_scsi_event));
    }
    fe_ctrl_barrier(&x.a);
    /* Buffers wait on the ring until an event needs one. */
    g_assert_cmpuint(tq_used_count(&x.a, VSCSI_EVENT_QUEUE), ==, 0);
    announce(&x, FAKE_LUN_ADDED, 0, 7);
    announce(&x, FAKE_LUN_REMOVED, 0, 1);
    announce(&x, FAKE_LUN_RESIZED, 3, 0x123);
    assert_event(&x, &b[0], VIRTIO_SCSI_T_TRANSPORT_RESET, VIRTIO_SCSI_EVT_RESET_RESCAN, 0, 7);
    assert_event(&x, &b[1], VIRTIO_SCSI_T_TRANSPORT_RESET, VIRTIO_SCSI_EVT_RESET_REMOVED, 0, 1);
    /* ASC in the low byte of reason, ASCQ in the next (as Linux and QEMU read it). */
    assert_event(&x, &b[2], VIRTIO_SCSI_T_PARAM_CHANGE, 0x092a, 3, 0x123);
    /* Only B's own nexus was told anything: A's device posted them all. */
    g_assert_cmpuint(tq_used_count(&x.b, VSCSI_EVENT_QUEUE), ==, 0);
    fx_teardown(&x);
}

static void test_missed_events_are_flagged(void)
{
    struct fx x;
    struct evbuf b, c;

    fx_setup(&x);
    set_features(&x, HOTPLUG_AND_CHANGE);
    /* No buffer: the event is lost. */
    announce(&x, FAKE_LUN_ADDED, 0, 7);
    /* The first buffer posted after a loss says so at once. */
    b = fe_event_buf(&x.a, sizeof(struct virtio_scsi_event));
    assert_event(&x, &b, VIRTIO_SCSI_T_NO_EVENT | VIRTIO_SCSI_T_EVENTS_MISSED, 0, 0, 0);
    /* Then events come unflagged. */
    c = fe_event_buf(&x.a, sizeof(struct virtio_scsi_event));
    fe_ctrl_barrier(&x.a);
    g_assert_false(tq_used(&x.a, VSCSI_EVENT_QUEUE, c.head));
    announce(&x, FAKE_LUN_REMOVED, 0, 7);
    assert_event(&x, &c, VIRTIO_SCSI_T_TRANSPORT_RESET, VIRTIO_SCSI_EVT_RESET_REMOVED, 0, 7);
    fx_teardown(&x);
}

static void test_short_event_buffer_counts_as_missed(void)
{
    struct fx x;
    struct evbuf shortb, b, c;

    fx_setup(&x);
    set_features(&x, HOTPLUG_AND_CHANGE);
    shortb = fe_event_buf(&x.a, 8);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*event buffer*8 bytes*");
    announce(&x, FAKE_LUN_ADDED, 0, 7);
    g_test_assert_expected_messages();
    /* The short buffer goes back empty: the event is lost... */
    tq_wait(&x.a, VSCSI_EVENT_QUEUE, shortb.head);
    g_assert_cmpuint(tq_used_len(&x.a, VSCSI_EVENT_QUEUE, shortb.head), ==, 0);
    /*
     * ...and counted as missed, as if there had been no buffer: the next
     * buffer says so at once.  (Posted only now: one posted beside the
     * short one may be seen before or after the loss, so it could carry
     * either this NO_EVENT or the next event flagged.)
     */
    b = fe_event_buf(&x.a, sizeof(struct virtio_scsi_event));
    assert_event(&x, &b, VIRTIO_SCSI_T_NO_EVENT | VIRTIO_SCSI_T_EVENTS_MISSED, 0, 0, 0);
    c = fe_event_buf(&x.a, sizeof(struct virtio_scsi_event));
    announce(&x, FAKE_LUN_RESIZED, 0, 7);
    assert_event(&x, &c, VIRTIO_SCSI_T_PARAM_CHANGE, 0x092a, 0, 7);
    fx_teardown(&x);
}

static void test_events_need_the_features(void)
{
    struct fx x;
    struct evbuf b;

    fx_setup(&x);
    b = fe_event_buf(&x.a, sizeof(struct virtio_scsi_event));
    /* Neither accepted: nothing is sent. */
    announce(&x, FAKE_LUN_ADDED, 0, 7);
    announce(&x, FAKE_LUN_RESIZED, 0, 7);
    /* CHANGE alone: parameter changes only. */
    set_features(&x, 1ull << VIRTIO_SCSI_F_CHANGE);
    announce(&x, FAKE_LUN_REMOVED, 0, 7);
    fe_ctrl_barrier(&x.a);
    g_assert_cmpuint(tq_used_count(&x.a, VSCSI_EVENT_QUEUE), ==, 0);
    announce(&x, FAKE_LUN_RESIZED, 0, 0);
    assert_event(&x, &b, VIRTIO_SCSI_T_PARAM_CHANGE, 0x092a, 0, 0);
    fx_teardown(&x);
}

/* ---- statistics ------------------------------------------------------- */

static void test_requests_are_counted_by_class(void)
{
    struct fx x;
    uint8_t rd[SC_CDB_MAX], tur[SC_CDB_MAX];
    unsigned rd_len = sc_cdb(scsi_cdb_read10(0, 1024, 512, 0, 0, 0, 0, 0), rd);
    unsigned tur_len = tur_cdb(tur);
    uint8_t data[1024] = { 0 }, medium[18] = { 0x70, 0, SCSI_SENSE_MEDIUM_ERROR, [7] = 10,
                                               [12] = 0x11 };
    uint8_t ua[18] = { 0x70, 0, SCSI_SENSE_UNIT_ATTENTION, [7] = 10, [12] = 0x29 };
    struct io_stats_snapshot a = { 0 }, b = { 0 };
    struct cmd r[4];

    fx_setup(&x);
    r[0] = fe_cmd(&x.a, VSCSI_FIRST_REQ_QUEUE, 0, 0, 1, rd, rd_len, 1024);
    fake_wait_cmds(x.t, 1);
    fake_complete(x.t, 0, SAM_STAT_GOOD, NULL, 0, data, sizeof(data));
    r[1] = fe_cmd(&x.a, VSCSI_FIRST_REQ_QUEUE, 0, 0, 2, rd, rd_len, 1024);
    fake_wait_cmds(x.t, 2);
    fake_complete(x.t, 1, SAM_STAT_CHECK_CONDITION, medium, sizeof(medium), NULL, 0);
    r[2] = fe_cmd(&x.a, VSCSI_FIRST_REQ_QUEUE + 1, 0, 0, 3, tur, tur_len, 0);
    fake_wait_cmds(x.t, 3);
    fake_complete(x.t, 2, SAM_STAT_CHECK_CONDITION, ua, sizeof(ua), NULL, 0);
    fake_target_refuse(x.t, -ENXIO);
    r[3] = fe_cmd(&x.a, VSCSI_FIRST_REQ_QUEUE + 1, 0, 9, 4, tur, tur_len, 0);
    for (unsigned i = 0; i < G_N_ELEMENTS(r); i++) {
        cmd_wait(&x.a, &r[i]);
    }
    g_assert_cmpuint(r[3].resp->response, ==, VIRTIO_SCSI_S_BAD_TARGET);

    io_stats_read(&x.a.stats, &a);
    g_assert_cmpuint(a.c[IO_READ].ops, ==, 2);
    g_assert_cmpuint(a.c[IO_READ].bytes, ==, 1024);
    g_assert_cmpuint(a.c[IO_READ].errors, ==, 1);
    g_assert_cmpuint(a.c[IO_WRITE].ops, ==, 0);
    g_assert_cmpuint(a.c[IO_OTHER].ops, ==, 2);
    g_assert_cmpuint(a.c[IO_OTHER].errors, ==, 1);   /* the refusal, not the unit attention */
    /* Another device is another controller's: nothing of A's is in B's. */
    io_stats_read(&x.b.stats, &b);
    g_assert_cmpuint(b.c[IO_READ].ops + b.c[IO_WRITE].ops + b.c[IO_OTHER].ops, ==, 0);
    fx_teardown(&x);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/virtio-scsi-fake-target/request/lun-address-reaches-the-target",
                    test_lun_address_reaches_the_target);
    g_test_add_func("/virtio-scsi-fake-target/request/report-luns-well-known-lun",
                    test_report_luns_well_known_lun_reaches_the_target);
    g_test_add_func("/virtio-scsi-fake-target/request/malformed-lun-never-reaches-the-target",
                    test_malformed_lun_never_reaches_the_target);
    g_test_add_func("/virtio-scsi-fake-target/request/target-refusal-is-bad-target",
                    test_target_refusal_is_bad_target);
    g_test_add_func("/virtio-scsi-fake-target/request/data-out-as-written",
                    test_data_out_reaches_the_target_as_written);
    g_test_add_func("/virtio-scsi-fake-target/request/data-in-and-sense-come-back",
                    test_data_in_and_sense_come_back);
    g_test_add_func("/virtio-scsi-fake-target/request/a-batch-is-published-in-groups",
                    test_a_batch_is_published_in_groups);
    g_test_add_func("/virtio-scsi-fake-target/request/completions-in-any-order",
                    test_completions_in_any_order);
    g_test_add_func("/virtio-scsi-fake-target/nexus/one-per-device", test_one_nexus_per_device);
    g_test_add_func("/virtio-scsi-fake-target/nexus/device-reset-is-its-reset",
                    test_device_reset_is_its_nexus_reset);
    g_test_add_func("/virtio-scsi-fake-target/tmf/lun-reset-waits-for-the-lun-drain",
                    test_lun_reset_waits_for_the_lun_drain);
    g_test_add_func("/virtio-scsi-fake-target/tmf/clear-task-set-waits-for-the-lun-drain",
                    test_clear_task_set_waits_for_the_lun_drain);
    g_test_add_func("/virtio-scsi-fake-target/tmf/i-t-nexus-reset-is-the-loss-on-its-port",
                    test_nexus_reset_is_the_nexus_loss_on_its_port);
    g_test_add_func("/virtio-scsi-fake-target/tmf/addressing", test_tmf_addressing);
    g_test_add_func("/virtio-scsi-fake-target/ctrl/an-query-by-port", test_an_query_by_port);
    g_test_add_func("/virtio-scsi-fake-target/event/lun-changes-become-events",
                    test_lun_changes_become_events);
    g_test_add_func("/virtio-scsi-fake-target/event/missed-events-are-flagged",
                    test_missed_events_are_flagged);
    g_test_add_func("/virtio-scsi-fake-target/event/short-buffer-counts-as-missed",
                    test_short_event_buffer_counts_as_missed);
    g_test_add_func("/virtio-scsi-fake-target/stats/requests-counted-by-class",
                    test_requests_are_counted_by_class);
    g_test_add_func("/virtio-scsi-fake-target/event/need-the-features",
                    test_events_need_the_features);
    return g_test_run();
}
