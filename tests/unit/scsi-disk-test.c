/*
 * Specification of the SCSI block device emulation (lib/scsi/scsi-disk.c)
 * and the memory backends: each test sends CDBs to a ram or null LUN and
 * checks the bytes that come back (status, fixed-format sense, data) as
 * SPC-4/SBC-3 define them.  A "spy" backend wraps ram to observe the
 * requests the SCSI layer makes (FUA, FLUSH), to inject backend errors and
 * to defer completions, which exercises the asynchronous paths and the
 * drain that task management waits with: it ends when the commands in
 * flight at its start have completed, never waits for later ones, and
 * calls back on the thread it names.  The hold test backend parks requests
 * while its file exists and completes them on their thread once it is gone.
 * CDBs come from libiscsi's builders and data-in and sense are decoded by
 * libiscsi (tests/scsi-cmd.h); a CDB is built by hand only where a test
 * needs one libiscsi cannot build, and says so.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "backend.h"
#include "iothread.h"
#include "scsi-cmd.h"
#include "scsi-disk.h"

#define KiB 1024
#define MiB (1024 * 1024)

/* ---- harness ----------------------------------------------------------- */

#define BS 512                /* the block size of most LUNs here */

/* An operation code no standard assigns, which libiscsi builds no CDB for. */
#define NO_SUCH_OPCODE 0xc5

/*
 * A remote device's sense outside the SCSI layer's own conditions
 * (MEDIUM ERROR, UNRECOVERED READ ERROR - AUTO REALLOCATE FAILED): the spy
 * backend answers with it to show it is passed on as it came.
 */
#define REMOTE_ASCQ 0x1104

struct result {
    uint8_t status;
    uint8_t sense_len;
    uint8_t sense[SCSI_SENSE_MAX];
    uint64_t in_xfer;
    uint64_t out_xfer;
    uint8_t cdb[SC_CDB_MAX];  /* what was sent, for sc_datain_decode */
    unsigned cdb_len;
};

struct pending_cmd {
    struct scsi_cmd cmd;
    struct iovec in, out;
    uint8_t cdb[SC_CDB_MAX];  /* a CDB libiscsi built, kept until completion */
    int completions;
};

static void count_completion(struct scsi_cmd *cmd)
{
    struct pending_cmd *p = cmd->opaque;

    p->completions++;
}

/*
 * Starts cdb (which must stay valid until completion) through nexus ua
 * (NULL: the LUN's own); the caller checks p->completions.
 */
static void start_cdb(struct pending_cmd *p, struct scsi_lun *lun, struct scsi_ua_state *ua,
                      const uint8_t *cdb, unsigned cdb_len, const void *out, size_t out_len,
                      void *in, size_t in_len)
{
    p->cmd = (struct scsi_cmd){ .ua = ua, .cdb = cdb, .cdb_len = cdb_len,
                                .complete = count_completion, .opaque = p };
    p->completions = 0;
    if (out) {
        p->out = (struct iovec){ (void *)out, out_len };
        p->cmd.data_out = &p->out;
        p->cmd.data_out_cnt = 1;
    }
    if (in) {
        p->in = (struct iovec){ in, in_len };
        p->cmd.data_in = &p->in;
        p->cmd.data_in_cnt = 1;
    }
    scsi_lun_exec(lun, &p->cmd);
}

/* Starts the CDB libiscsi built in task (which this frees), kept in p. */
static void start_as(struct pending_cmd *p, struct scsi_lun *lun, struct scsi_ua_state *ua,
                     struct scsi_task *task, const void *out, size_t out_len, void *in,
                     size_t in_len)
{
    unsigned n = sc_cdb(task, p->cdb);

    start_cdb(p, lun, ua, p->cdb, n, out, out_len, in, in_len);
}

static void start(struct pending_cmd *p, struct scsi_lun *lun, struct scsi_task *task,
                  const void *out, size_t out_len, void *in, size_t in_len)
{
    start_as(p, lun, NULL, task, out, out_len, in, in_len);
}

static struct result result_of(const struct scsi_cmd *cmd)
{
    struct result r = { .status = cmd->status, .sense_len = cmd->sense_len,
                        .in_xfer = cmd->data_in_xfer, .out_xfer = cmd->data_out_xfer,
                        .cdb_len = MIN(cmd->cdb_len, SC_CDB_MAX) };

    memcpy(r.sense, cmd->sense, sizeof(r.sense));
    memcpy(r.cdb, cmd->cdb, r.cdb_len);
    return r;
}

/* Runs cdb on a synchronous backend: it must complete exactly once, inline. */
static struct result run_cdb(struct scsi_lun *lun, const uint8_t *cdb, unsigned cdb_len,
                             const void *out, size_t out_len, void *in, size_t in_len)
{
    struct pending_cmd p;

    start_cdb(&p, lun, NULL, cdb, cdb_len, out, out_len, in, in_len);
    g_assert_cmpint(p.completions, ==, 1);
    return result_of(&p.cmd);
}

/* run_cdb() for the CDB libiscsi built in task (which this frees). */
static struct result run(struct scsi_lun *lun, struct scsi_task *task, const void *out,
                         size_t out_len, void *in, size_t in_len)
{
    uint8_t cdb[SC_CDB_MAX];
    unsigned n = sc_cdb(task, cdb);

    return run_cdb(lun, cdb, n, out, out_len, in, in_len);
}

#define RUN(lun, task) run(lun, task, NULL, 0, NULL, 0)
#define RUN_IN(lun, task, buf, len) run(lun, task, NULL, 0, buf, len)
#define RUN_OUT(lun, task, buf, len) run(lun, task, buf, len, NULL, 0)

/* libiscsi's decoding of the data r's command read into buf; valid until sc_datain_free(d). */
static void *decoded(struct sc_datain *d, const struct result *r, const void *buf)
{
    void *v = sc_datain_decode(d, r->cdb, r->cdb_len, buf, r->in_xfer);

    g_assert_nonnull(v);
    return v;
}

static void assert_good(const struct result *r)
{
    g_assert_cmphex(r->status, ==, SAM_STAT_GOOD);
    g_assert_cmpuint(r->sense_len, ==, 0);
}

/* CHECK CONDITION with fixed-format sense of key and code (ASC << 8 | ASCQ). */
static struct sc_sense assert_sense(const struct result *r, unsigned key, unsigned code)
{
    struct sc_sense s;

    g_assert_cmphex(r->status, ==, SAM_STAT_CHECK_CONDITION);
    s = sc_fixed_sense(r->sense, r->sense_len);
    g_assert_cmphex(s.key, ==, key);
    g_assert_cmphex(s.code, ==, code);
    return s;
}

/* ILLEGAL REQUEST, INVALID FIELD IN CDB: the most common refusal. */
static void assert_invalid_cdb(const struct result *r)
{
    assert_sense(r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_INVALID_FIELD_IN_CDB);
}

/* A LUN whose power-on unit attention has been consumed. */
static struct scsi_lun *ready(struct scsi_lun *lun)
{
    struct result r = RUN(lun, scsi_cdb_testunitready());

    assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, SCSI_SENSE_ASCQ_BUS_RESET);
    r = RUN(lun, scsi_cdb_testunitready());
    assert_good(&r);
    return lun;
}

static struct scsi_lun *new_ram(uint64_t size, uint32_t bs)
{
    struct lun_backend *be;

    g_assert_cmpint(backend_ram_new(size, bs, &be), ==, 0);
    return scsi_lun_new(be, "test:ram", NULL);
}

static struct scsi_lun *ram_lun(void)
{
    return ready(new_ram(8 * MiB, 512));
}

static struct scsi_lun *null_lun(uint64_t size, uint32_t bs)
{
    struct lun_backend *be;

    g_assert_cmpint(backend_null_new(size, bs, &be), ==, 0);
    return ready(scsi_lun_new(be, "test:null", NULL));
}

/* ---- spy backend: records, fails or defers requests to a ram backend ---- */

struct spy {
    struct lun_backend be;
    struct lun_backend *inner;
    int fail_op;            /* -1: none */
    int fail_ret;
    uint8_t fail_status;    /* with -EREMOTEIO: a status instead of sense */
    bool defer;
    uint64_t max_len;       /* largest READ/WRITE submitted */
    GQueue pending;
    unsigned ops[5];
    unsigned fua_writes, plain_writes;
};

static int spy_submit(struct lun_backend *be, struct backend_io *io)
{
    struct spy *s = (struct spy *)be;

    s->ops[io->op]++;
    if (io->op == BACKEND_READ || io->op == BACKEND_WRITE) {
        s->max_len = MAX(s->max_len, io->len);
    }
    if (io->op == BACKEND_WRITE) {
        if (io->fua) {
            s->fua_writes++;
        } else {
            s->plain_writes++;
        }
    }
    if ((int)io->op == s->fail_op) {
        if (s->fail_ret == -EREMOTEIO && s->fail_status) {
            io->status = s->fail_status;
        } else if (s->fail_ret == -EREMOTEIO) {
            io->has_sense = true;
            io->sense_key = SCSI_SENSE_MEDIUM_ERROR;
            io->asc = REMOTE_ASCQ >> 8;
            io->ascq = REMOTE_ASCQ & 0xff;
        }
        io->complete(io, s->fail_ret);
        return 0;
    }
    if (s->defer) {
        g_queue_push_tail(&s->pending, io);
        return 0;
    }
    return s->inner->ops->submit(s->inner, io);
}

/*
 * Completes the requests deferred so far, outside submit(); requests their
 * completions submit wait for the next call.  Returns how many ran.
 */
static unsigned spy_run_pending(struct spy *s)
{
    unsigned n = g_queue_get_length(&s->pending);

    for (unsigned i = 0; i < n; i++) {
        struct backend_io *io = g_queue_pop_head(&s->pending);

        s->inner->ops->submit(s->inner, io);
    }
    return n;
}

/* Completes the oldest deferred request only. */
static void spy_run_one(struct spy *s)
{
    struct backend_io *io = g_queue_pop_head(&s->pending);

    g_assert_nonnull(io);
    s->inner->ops->submit(s->inner, io);
}

/* Completes the newest deferred request only. */
static void spy_run_newest(struct spy *s)
{
    struct backend_io *io = g_queue_pop_tail(&s->pending);

    g_assert_nonnull(io);
    s->inner->ops->submit(s->inner, io);
}

static void spy_close(struct lun_backend *be)
{
    struct spy *s = (struct spy *)be;

    g_assert_true(g_queue_is_empty(&s->pending));
    backend_close(s->inner);
    g_free(s->be.name);
    g_free(s);
}

static const struct backend_ops spy_ops = { .name = "spy", .submit = spy_submit,
                                            .close = spy_close };

static struct scsi_lun *spy_lun_with(bool write_cache, uint32_t max_transfer, struct spy **out)
{
    struct spy *s = g_new0(struct spy, 1);

    g_assert_cmpint(backend_ram_new(8 * MiB, 512, &s->inner), ==, 0);
    s->be = *s->inner;
    s->be.ops = &spy_ops;
    s->be.name = g_strdup("spy");
    s->be.write_cache = write_cache;
    s->be.max_transfer = max_transfer;
    s->fail_op = -1;
    g_queue_init(&s->pending);
    *out = s;
    return ready(scsi_lun_new(&s->be, "test:spy", NULL));
}

static struct scsi_lun *spy_lun(bool write_cache, struct spy **out)
{
    return spy_lun_with(write_cache, 0, out);
}

/* ---- unit attention ---------------------------------------------------- */

static void test_ua_power_on_reported_once(void)
{
    struct scsi_lun *lun = new_ram(MiB, 512);
    uint8_t buf[96];
    struct result r;

    /* INQUIRY passes through a pending UA without consuming it. */
    r = RUN_IN(lun, scsi_cdb_inquiry(0, 0, 96), buf, sizeof(buf));
    assert_good(&r);
    r = RUN(lun, scsi_cdb_testunitready());
    assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, SCSI_SENSE_ASCQ_BUS_RESET);
    r = RUN(lun, scsi_cdb_testunitready());
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_ua_reported_to_any_command(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[512];
    /* Hand-built: libiscsi builds no CDB for an unassigned opcode. */
    static const uint8_t bogus[6] = { NO_SUCH_OPCODE };
    struct result r;

    scsi_lun_set_ua(lun, SCSI_UA_LUN_RESET);
    r = RUN_IN(lun, scsi_cdb_read10(0, BS, BS, 0, 0, 0, 0, 0), buf, sizeof(buf));
    assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, SCSI_SENSE_ASCQ_BUS_DEVICE_RESET_FUNCTION_OCCURED);
    g_assert_cmpuint(r.in_xfer, ==, 0);
    r = RUN_IN(lun, scsi_cdb_read10(0, BS, BS, 0, 0, 0, 0, 0), buf, sizeof(buf));
    assert_good(&r);
    /* Even an unknown opcode reports the UA first. */
    scsi_lun_set_ua(lun, SCSI_UA_CAPACITY_CHANGED);
    r = run_cdb(lun, bogus, sizeof(bogus), NULL, 0, NULL, 0);
    assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, SCSI_SENSE_ASCQ_CAPACITY_DATA_HAS_CHANGED);
    r = run_cdb(lun, bogus, sizeof(bogus), NULL, 0, NULL, 0);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_INVALID_OPERATION_CODE);
    scsi_lun_free(lun);
}

/* A TEST UNIT READY sent through one I_T nexus's unit-attention state. */
static struct result tur_as(struct scsi_lun *lun, struct scsi_ua_state *ua)
{
    struct pending_cmd p;

    start_as(&p, lun, ua, scsi_cdb_testunitready(), NULL, 0, NULL, 0);
    g_assert_cmpint(p.completions, ==, 1);
    return result_of(&p.cmd);
}

/* code (ASC << 8 | ASCQ) is reported once to nexus ua, then nothing. */
static void assert_ua_once(struct scsi_lun *lun, struct scsi_ua_state *ua, unsigned code)
{
    struct result r = tur_as(lun, ua);

    assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, code);
    r = tur_as(lun, ua);
    assert_good(&r);
}

/*
 * Unit attentions belong to an I_T nexus (one front-end connection): each
 * sees its own power-on, a LUN-wide condition is reported once to every
 * nexus, one raised for a single nexus only to it, and a nexus that
 * appears later does not inherit what happened before it.
 */
static void test_ua_per_nexus(void)
{
    struct scsi_lun *lun = ram_lun();      /* the LUN's own nexus: power-on consumed */
    struct scsi_ua_state a, b, late;
    struct result r;

    scsi_ua_init(&a, lun);
    scsi_ua_init(&b, lun);
    assert_ua_once(lun, &a, SCSI_SENSE_ASCQ_BUS_RESET);
    assert_ua_once(lun, &b, SCSI_SENSE_ASCQ_BUS_RESET);   /* a consuming its own left b's */

    scsi_lun_set_ua(lun, SCSI_UA_CAPACITY_CHANGED);
    assert_ua_once(lun, &a, SCSI_SENSE_ASCQ_CAPACITY_DATA_HAS_CHANGED);
    assert_ua_once(lun, &b, SCSI_SENSE_ASCQ_CAPACITY_DATA_HAS_CHANGED);
    r = RUN(lun, scsi_cdb_testunitready());
    assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, SCSI_SENSE_ASCQ_CAPACITY_DATA_HAS_CHANGED);

    scsi_ua_set(&b, SCSI_UA_NEXUS_LOSS);
    r = tur_as(lun, &a);
    assert_good(&r);
    assert_ua_once(lun, &b, SCSI_SENSE_ASCQ_NEXUS_LOSS);

    scsi_lun_set_ua(lun, SCSI_UA_REPORTED_LUNS_CHANGED);
    scsi_ua_init(&late, lun);
    assert_ua_once(lun, &late, SCSI_SENSE_ASCQ_BUS_RESET);
    assert_ua_once(lun, &a, SC_ASCQ_REPORTED_LUNS_DATA_HAS_CHANGED);
    scsi_lun_free(lun);
}

struct ua_race {
    struct scsi_lun *lun;
    struct scsi_ua_state *ua;
    atomic_int reports;
};

static gpointer ua_race_thread(gpointer opaque)
{
    struct ua_race *u = opaque;

    for (int i = 0; i < 200; i++) {
        struct result r = tur_as(u->lun, u->ua);

        if (r.status != SAM_STAT_GOOD) {
            g_assert_cmpuint(sc_sense_of(r.sense, r.sense_len).key, ==, SCSI_SENSE_UNIT_ATTENTION);
            atomic_fetch_add(&u->reports, 1);
        }
    }
    return NULL;
}

/* Commands racing on several threads through one nexus: exactly one reports it. */
static void test_ua_reported_once_across_threads(void)
{
    struct scsi_lun *lun = ram_lun();
    struct scsi_ua_state ua;
    struct ua_race u = { .lun = lun, .ua = &ua };
    GThread *th[4];

    scsi_ua_init(&ua, lun);
    for (int round = 0; round < 50; round++) {
        atomic_store(&u.reports, 0);
        scsi_lun_set_ua(lun, round & 1 ? SCSI_UA_LUN_RESET : SCSI_UA_CAPACITY_CHANGED);
        for (unsigned i = 0; i < G_N_ELEMENTS(th); i++) {
            th[i] = g_thread_new("ua", ua_race_thread, &u);
        }
        for (unsigned i = 0; i < G_N_ELEMENTS(th); i++) {
            g_thread_join(th[i]);
        }
        /* round 0 also has the nexus's power-on, which covers a reset only */
        g_assert_cmpint(atomic_load(&u.reports), ==, round == 0 ? 2 : 1);
    }
    scsi_lun_free(lun);
}

static void test_ua_power_on_covers_reset(void)
{
    struct scsi_lun *lun = ram_lun();
    struct result r;

    scsi_lun_set_ua(lun, SCSI_UA_LUN_RESET);
    scsi_lun_set_ua(lun, SCSI_UA_POWER_ON);
    scsi_lun_set_ua(lun, SCSI_UA_REPORTED_LUNS_CHANGED);
    r = RUN(lun, scsi_cdb_testunitready());
    assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, SCSI_SENSE_ASCQ_BUS_RESET);
    r = RUN(lun, scsi_cdb_testunitready());
    assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, SC_ASCQ_REPORTED_LUNS_DATA_HAS_CHANGED);
    r = RUN(lun, scsi_cdb_testunitready());
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_request_sense_returns_and_clears_ua(void)
{
    struct scsi_lun *lun = new_ram(MiB, 512);
    uint8_t cdb[SC_CDB_MAX], buf[252];
    unsigned n = sc_cdb_request_sense(cdb, false, 252);
    struct sc_sense s;
    struct result r;

    memset(buf, 0xaa, sizeof(buf));
    r = run_cdb(lun, cdb, n, NULL, 0, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 18);
    s = sc_fixed_sense(buf, r.in_xfer);
    g_assert_cmphex(s.key, ==, SCSI_SENSE_UNIT_ATTENTION);
    g_assert_cmphex(s.code, ==, SCSI_SENSE_ASCQ_BUS_RESET);

    r = run_cdb(lun, cdb, n, NULL, 0, buf, sizeof(buf));
    assert_good(&r);
    s = sc_fixed_sense(buf, r.in_xfer);
    g_assert_cmphex(s.key, ==, SCSI_SENSE_NO_SENSE);
    g_assert_cmphex(s.code, ==, SCSI_SENSE_ASCQ_NO_ADDL_SENSE);
    r = RUN(lun, scsi_cdb_testunitready());
    assert_good(&r);

    /* Descriptor format is not offered. */
    n = sc_cdb_request_sense(cdb, true, 252);
    r = run_cdb(lun, cdb, n, NULL, 0, buf, sizeof(buf));
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

/* ---- INQUIRY ----------------------------------------------------------- */

static void test_inquiry_standard(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[255];
    struct result r = RUN_IN(lun, scsi_cdb_inquiry(0, 0, 255), buf, sizeof(buf));
    struct scsi_inquiry_standard *inq;
    struct sc_datain d;

    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, >=, 36);
    inq = decoded(&d, &r, buf);
    g_assert_cmpuint(r.in_xfer, ==, inq->additional_length + 5u);
    g_assert_cmpint(inq->qualifier, ==, SCSI_INQUIRY_PERIPHERAL_QUALIFIER_CONNECTED);
    g_assert_cmpint(inq->device_type, ==, SCSI_INQUIRY_PERIPHERAL_DEVICE_TYPE_DIRECT_ACCESS);
    g_assert_false(inq->rmb);                                 /* not removable */
    g_assert_cmpint(inq->version, ==, 0x06);                  /* SPC-4 */
    g_assert_cmpint(inq->response_data_format, ==, 2);
    g_assert_true(inq->cmdque);
    g_assert_cmpstr(inq->vendor_identification, ==, "VHOSTSCS");
    g_assert_cmpstr(inq->product_identification, ==, "RAM DISK        ");
    sc_datain_free(&d);
    scsi_lun_free(lun);
}

static void test_inquiry_allocation_length_truncates(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[64];
    struct result r;

    memset(buf, 0xee, sizeof(buf));
    r = RUN_IN(lun, scsi_cdb_inquiry(0, 0, 5), buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 5);
    g_assert_cmphex(buf[5], ==, 0xee);

    /* A buffer smaller than the allocation length gets what fits. */
    r = RUN_IN(lun, scsi_cdb_inquiry(0, 0, 255), buf, 20);
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 20);
    g_assert_cmphex(buf[20], ==, 0xee);
    scsi_lun_free(lun);
}

/*
 * INQUIRY for VPD page code into buf, len bytes the allocation length:
 * GOOD, cut only by len (libiscsi reads the page's own length), and the
 * page as libiscsi decodes it, valid until sc_datain_free(d).  VPD() checks
 * the header every decoded page starts with.
 */
static void *vpd(struct scsi_lun *lun, uint8_t code, uint8_t *buf, size_t len,
                 struct sc_datain *d)
{
    struct result r = RUN_IN(lun, scsi_cdb_inquiry(1, code, (int)len), buf, len);
    void *page;

    assert_good(&r);
    page = decoded(d, &r, buf);
    g_assert_cmpuint(r.in_xfer, ==, MIN(len, (size_t)sc_datain_full_size(d)));
    return page;
}

#define VPD(type, lun, code, buf, len, d)                                                    \
    ({                                                                                       \
        type *page_ = vpd(lun, code, buf, len, d);                                           \
        g_assert_cmpint(page_->qualifier, ==, SCSI_INQUIRY_PERIPHERAL_QUALIFIER_CONNECTED);  \
        g_assert_cmpint(page_->device_type, ==,                                              \
                        SCSI_INQUIRY_PERIPHERAL_DEVICE_TYPE_DIRECT_ACCESS);                  \
        g_assert_cmphex(page_->pagecode, ==, code);                                          \
        page_;                                                                               \
    })
#define VPD_PAGES(lun, buf, d) \
    VPD(struct scsi_inquiry_supported_pages, lun, SCSI_INQUIRY_PAGECODE_SUPPORTED_VPD_PAGES, \
        buf, sizeof(buf), d)
#define VPD_SERIAL(lun, buf, d) \
    VPD(struct scsi_inquiry_unit_serial_number, lun, SCSI_INQUIRY_PAGECODE_UNIT_SERIAL_NUMBER, \
        buf, sizeof(buf), d)
#define VPD_IDENT(lun, buf, d) \
    VPD(struct scsi_inquiry_device_identification, lun, \
        SCSI_INQUIRY_PAGECODE_DEVICE_IDENTIFICATION, buf, sizeof(buf), d)
#define VPD_LIMITS(lun, buf, d) \
    VPD(struct scsi_inquiry_block_limits, lun, SCSI_INQUIRY_PAGECODE_BLOCK_LIMITS, buf, \
        sizeof(buf), d)
#define VPD_CHARACTERISTICS(lun, buf, d) \
    VPD(struct scsi_inquiry_block_device_characteristics, lun, \
        SCSI_INQUIRY_PAGECODE_BLOCK_DEVICE_CHARACTERISTICS, buf, sizeof(buf), d)
#define VPD_PROVISIONING(lun, buf, d) \
    VPD(struct scsi_inquiry_logical_block_provisioning, lun, \
        SCSI_INQUIRY_PAGECODE_LOGICAL_BLOCK_PROVISIONING, buf, sizeof(buf), d)

static void test_inquiry_vpd_supported_pages(void)
{
    struct scsi_lun *lun = ram_lun();
    static const uint8_t want[] = {
        SCSI_INQUIRY_PAGECODE_SUPPORTED_VPD_PAGES, SCSI_INQUIRY_PAGECODE_UNIT_SERIAL_NUMBER,
        SCSI_INQUIRY_PAGECODE_DEVICE_IDENTIFICATION, SCSI_INQUIRY_PAGECODE_BLOCK_LIMITS,
        SCSI_INQUIRY_PAGECODE_BLOCK_DEVICE_CHARACTERISTICS,
        SCSI_INQUIRY_PAGECODE_LOGICAL_BLOCK_PROVISIONING,
    };
    uint8_t buf[64];
    struct sc_datain d;
    struct scsi_inquiry_supported_pages *p = VPD_PAGES(lun, buf, &d);

    g_assert_cmpint(p->num_pages, ==, sizeof(want));
    g_assert_true(memcmp(p->pages, want, sizeof(want)) == 0);
    sc_datain_free(&d);
    scsi_lun_free(lun);
}

/* The vendor and product in the LUN's standard INQUIRY data (36 bytes). */
static void assert_identity(struct scsi_lun *lun, const char *vendor, const char *product)
{
    uint8_t buf[36];
    struct result r = RUN_IN(lun, scsi_cdb_inquiry(0, 0, 36), buf, sizeof(buf));
    struct scsi_inquiry_standard *inq;
    struct sc_datain d;

    assert_good(&r);
    inq = decoded(&d, &r, buf);
    g_assert_cmpstr(inq->vendor_identification, ==, vendor);
    g_assert_cmpstr(inq->product_identification, ==, product);
    sc_datain_free(&d);
}

/* The designator of type in a decoded Device Identification page, or NULL. */
static const struct scsi_inquiry_device_designator *
designator(const struct scsi_inquiry_device_identification *id, enum scsi_designator_type type)
{
    for (const struct scsi_inquiry_device_designator *e = id->designators; e; e = e->next) {
        if (e->designator_type == type) {
            return e;
        }
    }
    return NULL;
}

static void test_inquiry_vpd_identification(void)
{
    struct lun_backend *be;
    struct scsi_lun_info info = { .vendor = "ACME", .product = "Widget",
                                  .serial = "SER-42", .naa_id = 0x123456789abcdefULL };
    struct scsi_lun *lun;
    uint8_t buf[255];
    struct scsi_inquiry_unit_serial_number *sn;
    struct scsi_inquiry_device_identification *id;
    const struct scsi_inquiry_device_designator *naa, *t10;
    struct sc_datain d;

    g_assert_cmpint(backend_ram_new(MiB, 512, &be), ==, 0);
    lun = ready(scsi_lun_new(be, "test:ident", &info));

    assert_identity(lun, "ACME    ", "Widget          ");

    sn = VPD_SERIAL(lun, buf, &d);
    g_assert_cmpstr(sn->usn, ==, "SER-42");
    sc_datain_free(&d);

    id = VPD_IDENT(lun, buf, &d);
    g_assert_cmpint(sc_datain_full_size(&d), ==, 34);
    /* libiscsi lists designators last first: the NAA one comes first in the page. */
    naa = id->designators->next;
    t10 = id->designators;
    g_assert_true(naa == designator(id, SCSI_DESIGNATOR_TYPE_NAA));
    g_assert_null(naa->next);
    /* NAA, binary, LUN association, 8 bytes, NAA=5. */
    g_assert_cmpint(naa->code_set, ==, SCSI_CODESET_BINARY);
    g_assert_cmpint(naa->association, ==, SCSI_ASSOCIATION_LOGICAL_UNIT);
    g_assert_cmpint(naa->designator_length, ==, 8);
    g_assert_cmphex(scsi_get_uint64((const unsigned char *)naa->designator), ==,
                    0x5123456789abcdefULL);
    /* T10 vendor id, ASCII: vendor padded to 8, then the serial. */
    g_assert_cmpint(t10->code_set, ==, SCSI_CODESET_ASCII);
    g_assert_cmpint(t10->designator_type, ==, SCSI_DESIGNATOR_TYPE_T10_VENDORT_ID);
    g_assert_cmpint(t10->designator_length, ==, 8 + 6);
    g_assert_cmpstr(t10->designator, ==, "ACME    SER-42");
    sc_datain_free(&d);
    scsi_lun_free(lun);
}

static int remote_inquiry(struct lun_backend *be, void *buf, unsigned len)
{
    uint8_t *b = buf;

    g_assert_cmpuint(len, >=, 36);
    memset(b, 0, 36);
    memcpy(b + 8, "REMOTE  ", 8);
    memcpy(b + 16, "Far Away Disk   ", 16);
    return 36;
}

static void test_inquiry_passthrough_identity(void)
{
    struct backend_ops ops;     /* outlives the LUN, freed below */
    struct lun_backend *be;
    struct scsi_lun *lun;

    g_assert_cmpint(backend_ram_new(MiB, 512, &be), ==, 0);
    ops = *be->ops;
    ops.passthrough_inquiry = remote_inquiry;
    be->ops = &ops;
    lun = ready(scsi_lun_new(be, "test:remote", NULL));
    assert_identity(lun, "REMOTE  ", "Far Away Disk   ");
    scsi_lun_free(lun);
}

static void test_inquiry_default_identity_is_stable(void)
{
    struct scsi_lun *a = ram_lun(), *b = ram_lun(), *c = ready(new_ram(MiB, 512));
    uint8_t pa[64] = { 0 }, pb[64] = { 0 };
    const struct scsi_inquiry_device_designator *naa;
    struct sc_datain da, db;

    /* Same name, same identifiers, to the byte; an NAA-5 id is always produced. */
    naa = designator(VPD_IDENT(a, pa, &da), SCSI_DESIGNATOR_TYPE_NAA);
    VPD_IDENT(b, pb, &db);
    g_assert_nonnull(naa);
    g_assert_cmphex((uint8_t)naa->designator[0] >> 4, ==, 5);
    g_assert_true(memcmp(pa, pb, sizeof(pa)) == 0);
    sc_datain_free(&da);
    sc_datain_free(&db);
    g_assert_cmpuint(strlen(VPD_SERIAL(c, pa, &da)->usn), >, 0);
    sc_datain_free(&da);
    scsi_lun_free(a);
    scsi_lun_free(b);
    scsi_lun_free(c);
}

static void test_inquiry_vpd_block_limits(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[64];
    struct sc_datain d;
    struct scsi_inquiry_block_limits *bl = VPD_LIMITS(lun, buf, &d);

    g_assert_cmpint(sc_datain_full_size(&d), ==, 64);           /* PAGE LENGTH 3Ch */
    g_assert_true(bl->wsnz);
    g_assert_cmpuint(bl->max_xfer_len, ==, 32 * MiB / 512);
    g_assert_cmpuint(bl->opt_xfer_len, >, 0);
    g_assert_cmpuint(bl->opt_xfer_len, <=, bl->max_xfer_len);
    g_assert_cmpuint(bl->max_unmap, >, 0);
    g_assert_cmpuint(bl->max_unmap_bdc, >, 0);
    g_assert_cmpuint(bl->max_ws_len, >, 0);
    sc_datain_free(&d);
    scsi_lun_free(lun);
}

static void test_inquiry_vpd_characteristics_and_provisioning(void)
{
    struct scsi_lun *lun = ram_lun();
    struct scsi_inquiry_logical_block_provisioning *lbp;
    struct scsi_inquiry_block_limits *bl;
    struct lun_backend *be;
    struct scsi_lun *thick;
    struct sc_datain d;
    uint8_t buf[64];

    g_assert_cmpint(VPD_CHARACTERISTICS(lun, buf, &d)->medium_rotation_rate, ==, 1);  /* non-rotating */
    sc_datain_free(&d);

    lbp = VPD_PROVISIONING(lun, buf, &d);
    g_assert_true(lbp->lbpu && lbp->lbpws && lbp->lbpws10);
    g_assert_true(lbp->lbprz);                                 /* ram zeroes */
    g_assert_cmpint(lbp->provisioning_type, ==, PROVISIONING_TYPE_THIN);
    sc_datain_free(&d);
    scsi_lun_free(lun);

    /* Without discard: nothing advertised, provisioning type full. */
    g_assert_cmpint(backend_ram_new(MiB, 512, &be), ==, 0);
    be->can_discard = false;
    thick = ready(scsi_lun_new(be, "test:thick", NULL));
    lbp = VPD_PROVISIONING(thick, buf, &d);
    g_assert_false(lbp->lbpu || lbp->lbpws || lbp->lbpws10 || lbp->lbprz || lbp->anc_sup ||
                   lbp->dp);
    g_assert_cmpint(lbp->provisioning_type, ==, PROVISIONING_TYPE_NONE);
    sc_datain_free(&d);
    bl = VPD_LIMITS(thick, buf, &d);
    g_assert_cmpuint(bl->max_unmap, ==, 0);
    g_assert_cmpuint(bl->max_unmap_bdc, ==, 0);
    sc_datain_free(&d);
    scsi_lun_free(thick);
}

static void test_inquiry_invalid_fields(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[255], cmddt[SC_CDB_MAX];
    unsigned cmddt_len = sc_cdb(scsi_cdb_inquiry(0, 0, 255), cmddt);
    struct sc_sense s;
    struct result r;

    /* A page code without EVPD. */
    r = RUN_IN(lun, scsi_cdb_inquiry(0, SCSI_INQUIRY_PAGECODE_UNIT_SERIAL_NUMBER, 255), buf,
               sizeof(buf));
    s = assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_INVALID_FIELD_IN_CDB);
    /* SKSV with C/D set: the field pointer names CDB byte 2. */
    g_assert_true(s.sksv && s.in_cdb);
    g_assert_cmpuint(s.field, ==, 2);
    r = RUN_IN(lun, scsi_cdb_inquiry(1, 0x89, 255), buf, sizeof(buf));   /* no such page */
    assert_invalid_cdb(&r);
    g_assert_cmpuint(r.in_xfer, ==, 0);
    /* CMDDT (obsolete), which libiscsi's builder has no argument for. */
    cmddt[1] |= 0x02;
    r = run_cdb(lun, cmddt, cmddt_len, NULL, 0, buf, sizeof(buf));
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

/* ---- READ CAPACITY ----------------------------------------------------- */

static void check_capacity(uint64_t size, uint32_t bs, uint32_t want10)
{
    struct scsi_lun *lun = null_lun(size, bs);
    struct scsi_readcapacity10 *rc10;
    struct scsi_readcapacity16 *rc16;
    struct sc_datain d;
    uint8_t buf[32];
    struct result r;

    r = RUN_IN(lun, scsi_cdb_readcapacity10(0, 0), buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 8);
    rc10 = decoded(&d, &r, buf);
    g_assert_cmphex(rc10->lba, ==, want10);
    g_assert_cmpuint(rc10->block_size, ==, bs);
    sc_datain_free(&d);

    r = RUN_IN(lun, scsi_cdb_readcapacity16(), buf, sizeof(buf));   /* allocation length 32 */
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 32);
    rc16 = decoded(&d, &r, buf);
    g_assert_cmpuint(rc16->returned_lba, ==, size / bs - 1);
    g_assert_cmpuint(rc16->block_length, ==, bs);
    g_assert_true(rc16->lbpme);                     /* null can discard */
    sc_datain_free(&d);
    scsi_lun_free(lun);
}

static void test_read_capacity(void)
{
    check_capacity(8 * MiB, 512, 8 * MiB / 512 - 1);
    check_capacity(8 * MiB, 4096, 8 * MiB / 4096 - 1);
    /* 4 TiB of 512-byte blocks does not fit READ CAPACITY(10). */
    check_capacity(4ULL << 40, 512, 0xffffffff);
    check_capacity(4ULL << 40, 4096, (uint32_t)((4ULL << 40) / 4096 - 1));
}

static void test_read_capacity_16_allocation_length(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[32];
    struct result r;

    r = RUN_IN(lun, scsi_cdb_serviceactionin16(SCSI_READCAPACITY16, 12), buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 12);

    /* A service action SERVICE ACTION IN(16) does not have here (11h). */
    r = RUN_IN(lun, scsi_cdb_serviceactionin16((enum scsi_service_action_in)0x11, 32), buf,
               sizeof(buf));
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

/* ---- READ / WRITE ------------------------------------------------------ */

static void fill_pattern(uint8_t *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++) {
        p[i] = (uint8_t)(i * 7 + seed * 131 + (i >> 9));
    }
}

static void test_write_read_back_all_sizes(void)
{
    struct scsi_lun *lun = ready(new_ram(64 * MiB, 512));   /* LBAs past 16 bits */
    uint8_t w[4096], rd[4096];
    /* Hand-built: libiscsi has a READ(6) builder but no WRITE(6) one. */
    static const uint8_t w6[6] = { SC_OPCODE_WRITE6, 0x01, 0x02, 0x03, 2, 0 };   /* LBA 0x10203 */
    uint32_t last = 64 * MiB / 512 - 2;
    struct result r;

    /* WRITE(6) / READ(6) */
    fill_pattern(w, 1024, 1);
    r = run_cdb(lun, w6, sizeof(w6), w, 1024, NULL, 0);
    assert_good(&r);
    g_assert_cmpuint(r.out_xfer, ==, 1024);
    r = RUN_IN(lun, scsi_cdb_read6(0x10203, 1024, BS), rd, 1024);
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 1024);
    g_assert_true(memcmp(w, rd, 1024) == 0);

    /* WRITE(10) / READ(16) on the same blocks: one medium. */
    fill_pattern(w, 4096, 2);
    r = RUN_OUT(lun, scsi_cdb_write10(100, 4096, BS, 0, 0, 0, 0, 0), w, 4096);
    assert_good(&r);
    r = RUN_IN(lun, scsi_cdb_read16(100, 4096, BS, 0, 0, 0, 0, 0), rd, 4096);
    assert_good(&r);
    g_assert_true(memcmp(w, rd, 4096) == 0);

    /* WRITE(12) / READ(12) at the last blocks of the LUN. */
    fill_pattern(w, 1024, 3);
    r = RUN_OUT(lun, scsi_cdb_write12(last, 1024, BS, 0, 0, 0, 0, 0), w, 1024);
    assert_good(&r);
    r = RUN_IN(lun, scsi_cdb_read12(last, 1024, BS, 0, 0, 0, 0, 0), rd, 1024);
    assert_good(&r);
    g_assert_true(memcmp(w, rd, 1024) == 0);

    /* WRITE(16) / READ(10) */
    fill_pattern(w, 512, 4);
    r = RUN_OUT(lun, scsi_cdb_write16(7, 512, BS, 0, 0, 0, 0, 0), w, 512);
    assert_good(&r);
    r = RUN_IN(lun, scsi_cdb_read10(7, 512, BS, 0, 0, 0, 0, 0), rd, 512);
    assert_good(&r);
    g_assert_true(memcmp(w, rd, 512) == 0);
    scsi_lun_free(lun);
}

static void test_rw6_zero_length_means_256(void)
{
    struct scsi_lun *lun = ram_lun();
    g_autofree uint8_t *buf = g_malloc(256 * 512);
    uint8_t r6[SC_CDB_MAX];
    /* libiscsi writes 256 blocks as TRANSFER LENGTH 0, which is the point here. */
    unsigned n = sc_cdb(scsi_cdb_read6(0, 256 * BS, BS), r6);
    struct result r;

    g_assert_cmpuint(r6[4], ==, 0);
    r = run_cdb(lun, r6, n, NULL, 0, buf, 256 * 512);
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 256 * 512);
    /* With a 255-block buffer the 256-block read is refused. */
    r = run_cdb(lun, r6, n, NULL, 0, buf, 255 * 512);
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

static void test_rw10_zero_length_transfers_nothing(void)
{
    struct scsi_lun *lun = ram_lun();
    struct result r;

    r = RUN(lun, scsi_cdb_read10(5, 0, BS, 0, 0, 0, 0, 0));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 0);
    r = RUN(lun, scsi_cdb_write10(5, 0, BS, 0, 0, 0, 0, 0));
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_read_into_larger_scattered_buffer(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t w[12 * 512], rd[16][512];
    struct iovec iov[16];
    struct pending_cmd p;

    fill_pattern(w, sizeof(w), 5);
    struct result r = RUN_OUT(lun, scsi_cdb_write10(40, sizeof(w), BS, 0, 0, 0, 0, 0), w,
                              sizeof(w));
    assert_good(&r);

    /* 16 pieces, 12 blocks wanted: more pieces than the command's slice array. */
    memset(rd, 0xee, sizeof(rd));
    for (int i = 0; i < 16; i++) {
        iov[i].iov_base = rd[i];
        iov[i].iov_len = 512;
    }
    memset(&p, 0, sizeof(p));
    p.cmd.cdb_len = sc_cdb(scsi_cdb_read10(40, sizeof(w), BS, 0, 0, 0, 0, 0), p.cdb);
    p.cmd.cdb = p.cdb;
    p.cmd.data_in = iov;
    p.cmd.data_in_cnt = 16;
    p.cmd.complete = count_completion;
    p.cmd.opaque = &p;
    scsi_lun_exec(lun, &p.cmd);
    g_assert_cmpint(p.completions, ==, 1);
    g_assert_cmphex(p.cmd.status, ==, SAM_STAT_GOOD);
    g_assert_cmpuint(p.cmd.data_in_xfer, ==, sizeof(w));
    for (int i = 0; i < 12; i++) {
        g_assert_true(memcmp(rd[i], w + i * 512, 512) == 0);
    }
    g_assert_cmphex(rd[12][0], ==, 0xee);   /* nothing past the transfer */
    scsi_lun_free(lun);
}

static void assert_lba_out_of_range(const struct result *r)
{
    assert_sense(r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_LBA_OUT_OF_RANGE);
}

static void test_lba_out_of_range(void)
{
    struct scsi_lun *lun = ram_lun();
    uint64_t nb = 8 * MiB / 512;
    uint8_t buf[1024];
    struct result r;

    /* Runs one block past the end. */
    r = RUN_IN(lun, scsi_cdb_read16(nb - 1, 1024, BS, 0, 0, 0, 0, 0), buf, 1024);
    assert_lba_out_of_range(&r);
    g_assert_cmpuint(r.in_xfer, ==, 0);

    /* Zero length, LBA past the end. */
    r = RUN(lun, scsi_cdb_read16(nb, 0, BS, 0, 0, 0, 0, 0));
    assert_lba_out_of_range(&r);

    /* LBA + length wraps 2^64. */
    r = RUN_IN(lun, scsi_cdb_read16(UINT64_MAX, 1024, BS, 0, 0, 0, 0, 0), buf, 1024);
    assert_lba_out_of_range(&r);
    r = RUN_OUT(lun, scsi_cdb_write16(UINT64_MAX - 1, 1024, BS, 0, 0, 0, 0, 0), buf, 1024);
    assert_lba_out_of_range(&r);

    /* Exactly the last blocks: fine. */
    r = RUN_IN(lun, scsi_cdb_read16(nb - 2, 1024, BS, 0, 0, 0, 0, 0), buf, 1024);
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_transfer_length_cap(void)
{
    struct scsi_lun *lun = null_lun(1ULL << 30, 512);
    uint32_t max = 32 * MiB / 512;
    g_autofree uint8_t *buf = g_malloc(32 * MiB + 512);
    struct result r;

    r = RUN_IN(lun, scsi_cdb_read16(0, max * BS, BS, 0, 0, 0, 0, 0), buf, 32 * MiB + 512);
    assert_good(&r);
    r = RUN_IN(lun, scsi_cdb_read16(0, (max + 1) * BS, BS, 0, 0, 0, 0, 0), buf, 32 * MiB + 512);
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

/*
 * A backend whose device takes at most 64 KiB per command (a remote LUN's
 * Block Limits): the LUN reports that limit, refuses a bigger READ as the
 * remote would, and splits its own bounce-buffer I/O to fit.
 */
static void test_backend_transfer_limit(void)
{
    struct spy *s;
    struct scsi_lun *lun;
    g_autofree uint8_t *buf = g_malloc0(128 * KiB);
    struct scsi_inquiry_block_limits *bl;
    struct sc_datain d;
    uint8_t vbuf[64], blk[512];
    struct result r;

    lun = spy_lun_with(false, 64 * KiB, &s);
    bl = VPD_LIMITS(lun, vbuf, &d);
    g_assert_cmpint(sc_datain_full_size(&d), ==, 64);
    g_assert_cmpuint(bl->max_xfer_len, ==, 128);              /* blocks */
    g_assert_cmpuint(bl->opt_xfer_len, <=, 128);              /* optimal <= max */
    sc_datain_free(&d);
    r = RUN_IN(lun, scsi_cdb_read16(0, 128 * BS, BS, 0, 0, 0, 0, 0), buf, 128 * KiB);
    assert_good(&r);
    r = RUN_IN(lun, scsi_cdb_read16(0, 129 * BS, BS, 0, 0, 0, 0, 0), buf, 128 * KiB);
    assert_invalid_cdb(&r);
    memset(blk, 0xa5, sizeof(blk));
    r = RUN_OUT(lun, scsi_cdb_writesame16(0, 0, 0, 0, 0, 4000, BS), blk, 512);   /* 2 MB */
    assert_good(&r);
    g_assert_cmpuint(s->max_len, ==, 64 * KiB);
    scsi_lun_free(lun);
}

static void test_short_buffers(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[1024 + 16];
    struct result r;

    /* A write whose data-out is shorter than the CDB says is refused. */
    r = RUN_OUT(lun, scsi_cdb_write10(0, 1024, BS, 0, 0, 0, 0, 0), buf, 512);
    assert_invalid_cdb(&r);
    g_assert_cmpuint(r.out_xfer, ==, 0);

    /* A read is refused rather than written past the buffer. */
    memset(buf, 0xee, sizeof(buf));
    r = RUN_IN(lun, scsi_cdb_read10(0, 1024, BS, 0, 0, 0, 0, 0), buf, 512);
    assert_invalid_cdb(&r);
    g_assert_cmpuint(r.in_xfer, ==, 0);
    g_assert_cmphex(buf[0], ==, 0xee);

    /* No buffer at all. */
    r = RUN(lun, scsi_cdb_read10(0, 1024, BS, 0, 0, 0, 0, 0));
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

static void test_write_protected(void)
{
    struct lun_backend *be;
    struct scsi_lun *lun;
    struct scsi_mode_sense *ms;
    struct sc_datain d;
    uint8_t buf[512] = { 0 }, msbuf[255];
    struct result r;

    g_assert_cmpint(backend_ram_new(MiB, 512, &be), ==, 0);
    be->read_only = true;
    lun = ready(scsi_lun_new(be, "test:ro", NULL));

    r = RUN_OUT(lun, scsi_cdb_write10(0, 512, BS, 0, 0, 0, 0, 0), buf, 512);
    assert_sense(&r, SCSI_SENSE_DATA_PROTECTION, SCSI_SENSE_ASCQ_WRITE_PROTECTED);
    r = RUN_OUT(lun, scsi_cdb_writesame16(0, 0, 1, 0, 0, 1, BS), buf, 512);   /* UNMAP */
    assert_sense(&r, SCSI_SENSE_DATA_PROTECTION, SCSI_SENSE_ASCQ_WRITE_PROTECTED);
    r = RUN_IN(lun, scsi_cdb_read10(0, 512, BS, 0, 0, 0, 0, 0), buf, 512);
    assert_good(&r);

    /* MODE SENSE header: WP set in the device-specific parameter. */
    r = RUN_IN(lun, scsi_cdb_modesense6(0, SCSI_MODESENSE_PC_CURRENT, SCSI_MODEPAGE_RETURN_ALL_PAGES,
                                        0, 255), msbuf, sizeof(msbuf));
    assert_good(&r);
    ms = decoded(&d, &r, msbuf);
    g_assert_cmphex(ms->device_specific_parameter & 0x80, ==, 0x80);
    sc_datain_free(&d);
    scsi_lun_free(lun);
}

static void test_invalid_opcode_and_control_byte(void)
{
    struct scsi_lun *lun = ram_lun();
    /* Hand-built: an unassigned opcode, and a READ(16) opcode in a 6-byte CDB buffer. */
    static const uint8_t bogus[6] = { NO_SUCH_OPCODE };
    static const uint8_t short_cdb[6] = { SCSI_OPCODE_READ16 };
    uint8_t naca[SC_CDB_MAX];
    unsigned naca_len = sc_cdb(scsi_cdb_testunitready(), naca);
    struct result r;

    r = run_cdb(lun, bogus, sizeof(bogus), NULL, 0, NULL, 0);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_INVALID_OPERATION_CODE);
    naca[naca_len - 1] |= 0x04;     /* NACA in the control byte: libiscsi never sets it */
    r = run_cdb(lun, naca, naca_len, NULL, 0, NULL, 0);
    assert_invalid_cdb(&r);
    /* A 16-byte opcode in a 6-byte CDB buffer must not be read past its end. */
    r = run_cdb(lun, short_cdb, sizeof(short_cdb), NULL, 0, NULL, 0);
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

static void test_null_backend(void)
{
    struct scsi_lun *lun = null_lun(MiB, 4096);
    uint8_t w[4096], rd[4096];
    struct result r;

    memset(w, 0x5a, sizeof(w));
    r = RUN_OUT(lun, scsi_cdb_write10(3, 4096, 4096, 0, 0, 0, 0, 0), w, sizeof(w));
    assert_good(&r);
    memset(rd, 0xee, sizeof(rd));
    r = RUN_IN(lun, scsi_cdb_read10(3, 4096, 4096, 0, 0, 0, 0, 0), rd, sizeof(rd));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 4096);
    for (size_t i = 0; i < sizeof(rd); i++) {
        g_assert_cmphex(rd[i], ==, 0);
    }
    scsi_lun_free(lun);
}

/* ---- FUA and the write cache ------------------------------------------- */

/* The caching mode page, current values, without block descriptors. */
static struct scsi_mode_page *caching_page(struct scsi_lun *lun, struct sc_datain *d,
                                           uint8_t *buf)
{
    struct result r = RUN_IN(lun, scsi_cdb_modesense6(1, SCSI_MODESENSE_PC_CURRENT,
                                                      SCSI_MODEPAGE_CACHING, 0, 255),
                             buf, 255);
    struct scsi_mode_sense *ms;

    assert_good(&r);
    ms = decoded(d, &r, buf);
    g_assert_nonnull(ms->pages);
    g_assert_cmpint(ms->pages->page_code, ==, SCSI_MODEPAGE_CACHING);
    g_assert_null(ms->pages->next);
    return ms->pages;
}

static void set_wce(struct scsi_lun *lun, bool on)
{
    uint8_t buf[255];
    struct sc_datain d;
    struct scsi_mode_page *mp = caching_page(lun, &d, buf);
    struct scsi_data *list;
    struct result r;

    /* The page back with WCE changed, as libiscsi marshalls a MODE SELECT(6) parameter list. */
    mp->caching.wce = on;
    mp->ps = 0;     /* reserved in MODE SELECT */
    list = scsi_modesense_dataout_marshall(d.task, mp, 1);
    g_assert_nonnull(list);
    r = RUN_OUT(lun, scsi_cdb_modeselect6(1, 0, list->size), list->data, (size_t)list->size);
    assert_good(&r);
    sc_datain_free(&d);
}

static bool get_wce(struct scsi_lun *lun)
{
    uint8_t buf[255];
    struct sc_datain d;
    bool wce = caching_page(lun, &d, buf)->caching.wce;

    sc_datain_free(&d);
    return wce;
}

static struct scsi_task *write10(uint32_t lba, bool fua, bool dpo)
{
    return scsi_cdb_write10(lba, 512, BS, 0, dpo, fua, 0, 0);
}

static void test_fua_and_write_cache(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(true, &s);
    uint8_t w[512] = { 1 }, blk[512];
    struct result r;

    g_assert_true(get_wce(lun));              /* initially the backend's cache */
    r = RUN_OUT(lun, write10(0, false, false), w, 512);
    assert_good(&r);
    g_assert_cmpuint(s->plain_writes, ==, 1);
    r = RUN_OUT(lun, write10(0, true, false), w, 512);
    assert_good(&r);
    g_assert_cmpuint(s->fua_writes, ==, 1);
    r = RUN_OUT(lun, write10(0, false, true), w, 512);     /* DPO alone: ignored */
    assert_good(&r);
    g_assert_cmpuint(s->plain_writes, ==, 2);

    /* Turning WCE off flushes the cache and makes every write FUA. */
    set_wce(lun, false);
    g_assert_false(get_wce(lun));
    g_assert_cmpuint(s->ops[BACKEND_FLUSH], ==, 1);
    r = RUN_OUT(lun, write10(0, false, false), w, 512);
    assert_good(&r);
    g_assert_cmpuint(s->fua_writes, ==, 2);
    g_assert_cmpuint(s->plain_writes, ==, 2);

    /* WRITE SAME too: FUA copies, or a FLUSH after zeroing. */
    memset(blk, 9, sizeof(blk));
    r = RUN_OUT(lun, scsi_cdb_writesame16(0, 0, 0, 0, 0, 2, BS), blk, sizeof(blk));
    assert_good(&r);
    g_assert_cmpuint(s->fua_writes, ==, 3);
    memset(blk, 0, sizeof(blk));
    r = RUN_OUT(lun, scsi_cdb_writesame16(0, 0, 0, 0, 0, 2, BS), blk, sizeof(blk));
    assert_good(&r);
    g_assert_cmpuint(s->ops[BACKEND_WRITE_ZEROES], ==, 1);
    g_assert_cmpuint(s->ops[BACKEND_FLUSH], ==, 2);

    set_wce(lun, true);
    g_assert_true(get_wce(lun));
    r = RUN_OUT(lun, write10(0, false, false), w, 512);
    assert_good(&r);
    g_assert_cmpuint(s->plain_writes, ==, 3);

    /* SYNCHRONIZE CACHE(10) and (16) flush. */
    r = RUN(lun, scsi_cdb_synchronizecache10(0, 0, 0, 0));
    assert_good(&r);
    r = RUN(lun, scsi_cdb_synchronizecache16(0, 0, 0, 0));
    assert_good(&r);
    g_assert_cmpuint(s->ops[BACKEND_FLUSH], ==, 4);
    scsi_lun_free(lun);
}

static void test_sync_cache_range(void)
{
    struct scsi_lun *lun = ram_lun();
    struct result r;

    r = RUN(lun, scsi_cdb_synchronizecache16(8 * MiB / 512, 0, 0, 0));
    assert_lba_out_of_range(&r);
    r = RUN(lun, scsi_cdb_synchronizecache10(10, 20, 0, 1));    /* IMMED, a range */
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_start_stop_and_prevent_allow(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(true, &s);
    struct result r;

    r = RUN(lun, scsi_cdb_startstopunit(0, 0, 0, 0, 0, 0));     /* stop */
    assert_good(&r);
    g_assert_cmpuint(s->ops[BACKEND_FLUSH], ==, 1);   /* stopping writes the cache back */
    r = RUN(lun, scsi_cdb_startstopunit(0, 0, 0, 0, 0, 1));     /* start */
    assert_good(&r);
    r = RUN(lun, scsi_cdb_preventallow(1));
    assert_good(&r);
    r = RUN(lun, scsi_cdb_preventallow(0));
    assert_good(&r);
    scsi_lun_free(lun);
}

/* ---- MODE SENSE / MODE SELECT ----------------------------------------- */

static void test_mode_sense_pages(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[255];
    struct result r = RUN_IN(lun, scsi_cdb_modesense6(0, SCSI_MODESENSE_PC_CURRENT,
                                                      SCSI_MODEPAGE_RETURN_ALL_PAGES, 0, 255),
                             buf, sizeof(buf));
    struct scsi_mode_sense *ms;
    struct scsi_mode_page *mp;
    struct sc_datain d;

    assert_good(&r);
    ms = decoded(&d, &r, buf);
    g_assert_cmpuint(r.in_xfer, ==, ms->mode_data_length + 1u);
    g_assert_cmphex(ms->device_specific_parameter & 0x90, ==, 0x10);   /* DPOFUA, not WP */
    g_assert_cmpuint(ms->block_descriptor_length, ==, 8);             /* short descriptor */
    /* libiscsi skips block descriptors: their fields are read with its accessors. */
    g_assert_cmpuint(scsi_get_uint32(buf + 4), ==, 8 * MiB / 512);
    g_assert_cmpuint(scsi_get_uint32(buf + 8) & 0xffffff, ==, 512);
    /* Pages in ascending order (libiscsi lists them last first): caching, control. */
    mp = ms->pages;
    g_assert_cmpint(mp->page_code, ==, SCSI_MODEPAGE_CONTROL);
    g_assert_cmpint(mp->len, ==, 10);
    mp = mp->next;
    g_assert_cmpint(mp->page_code, ==, SCSI_MODEPAGE_CACHING);
    g_assert_cmpint(mp->len, ==, 18);
    g_assert_null(mp->next);
    g_assert_cmpuint(r.in_xfer, ==, 4 + 8 + 20 + 12);
    sc_datain_free(&d);

    /* DBD drops the block descriptor. */
    r = RUN_IN(lun, scsi_cdb_modesense6(1, SCSI_MODESENSE_PC_CURRENT,
                                        SCSI_MODEPAGE_RETURN_ALL_PAGES, 0, 255), buf, sizeof(buf));
    assert_good(&r);
    ms = decoded(&d, &r, buf);
    g_assert_cmpuint(ms->block_descriptor_length, ==, 0);
    g_assert_cmpint(ms->pages->next->page_code, ==, SCSI_MODEPAGE_CACHING);   /* the first */
    sc_datain_free(&d);

    /* MODE SENSE(10) with LLBAA: 16-byte descriptor, LONGLBA set. */
    r = RUN_IN(lun, scsi_cdb_modesense10(1, 0, SCSI_MODESENSE_PC_CURRENT, SCSI_MODEPAGE_CONTROL, 0,
                                         255), buf, sizeof(buf));
    assert_good(&r);
    ms = decoded(&d, &r, buf);
    g_assert_cmpuint(ms->mode_data_length, ==, r.in_xfer - 2);
    g_assert_true(ms->longlba);
    g_assert_cmpuint(ms->block_descriptor_length, ==, 16);
    g_assert_cmpuint(scsi_get_uint64(buf + 8), ==, 8 * MiB / 512);
    g_assert_cmpuint(scsi_get_uint32(buf + 20), ==, 512);
    g_assert_cmpint(ms->pages->page_code, ==, SCSI_MODEPAGE_CONTROL);
    g_assert_null(ms->pages->next);
    sc_datain_free(&d);
    scsi_lun_free(lun);
}

static void test_mode_sense_page_control(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[255];
    const uint8_t *pg;
    struct scsi_mode_sense *ms;
    struct scsi_mode_page *mp;
    struct sc_datain d;
    struct result r;

    /* Changeable: only WCE.  libiscsi decodes the page's fields, not its reserved bytes. */
    r = RUN_IN(lun, scsi_cdb_modesense6(1, SCSI_MODESENSE_PC_CHANGEABLE, SCSI_MODEPAGE_CACHING, 0,
                                        255), buf, sizeof(buf));
    assert_good(&r);
    ms = decoded(&d, &r, buf);
    mp = ms->pages;
    g_assert_true(mp->caching.wce);
    g_assert_false(mp->caching.ic || mp->caching.abpf || mp->caching.cap || mp->caching.disc ||
                   mp->caching.size || mp->caching.mf || mp->caching.rcd);
    pg = buf + 4 + ms->block_descriptor_length;
    g_assert_cmpint(mp->len, ==, 18);
    for (int i = 3; i < 20; i++) {
        g_assert_cmphex(pg[i], ==, 0);
    }
    sc_datain_free(&d);
    /* Default: the backend's cache (none). */
    r = RUN_IN(lun, scsi_cdb_modesense6(1, SCSI_MODESENSE_PC_DEFAULT, SCSI_MODEPAGE_CACHING, 0,
                                        255), buf, sizeof(buf));
    assert_good(&r);
    ms = decoded(&d, &r, buf);
    g_assert_false(ms->pages->caching.wce);
    sc_datain_free(&d);
    r = RUN_IN(lun, scsi_cdb_modesense6(1, SCSI_MODESENSE_PC_SAVED, SCSI_MODEPAGE_CACHING, 0, 255),
               buf, sizeof(buf));
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SC_ASCQ_SAVING_PARAMETERS_NOT_SUPPORTED);
    scsi_lun_free(lun);
}

static void test_mode_sense_invalid(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[255];
    struct result r;

    /* A page this LUN does not have. */
    r = RUN_IN(lun, scsi_cdb_modesense6(0, SCSI_MODESENSE_PC_CURRENT,
                                        SCSI_MODEPAGE_INFORMATIONAL_EXCEPTIONS_CONTROL, 0, 255),
               buf, sizeof(buf));
    assert_invalid_cdb(&r);
    /* A subpage of the caching page. */
    r = RUN_IN(lun, scsi_cdb_modesense6(0, SCSI_MODESENSE_PC_CURRENT, SCSI_MODEPAGE_CACHING, 0x01,
                                        255), buf, sizeof(buf));
    assert_invalid_cdb(&r);
    /* All pages and all subpages. */
    r = RUN_IN(lun, scsi_cdb_modesense6(0, SCSI_MODESENSE_PC_CURRENT,
                                        SCSI_MODEPAGE_RETURN_ALL_PAGES, 0xff, 255), buf, sizeof(buf));
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_mode_select_toggles_wce(void)
{
    struct scsi_lun *lun = ram_lun();

    g_assert_false(get_wce(lun));
    set_wce(lun, true);
    g_assert_true(get_wce(lun));
    set_wce(lun, false);
    g_assert_false(get_wce(lun));
    scsi_lun_free(lun);
}

/*
 * The MODE SELECT parameter lists below are MODE SENSE data edited by hand:
 * libiscsi marshalls one mode page, not block descriptors or the broken
 * lists these tests need.
 */
static void test_mode_select_block_descriptor(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t p[255];
    struct result r = RUN_IN(lun, scsi_cdb_modesense6(0, SCSI_MODESENSE_PC_CURRENT,
                                                      SCSI_MODEPAGE_CACHING, 0, 255), p, sizeof(p));
    size_t len = r.in_xfer;

    /* MODE SENSE without DBD: header, 8-byte descriptor, caching page. */
    assert_good(&r);
    g_assert_cmpuint(len, ==, 4 + 8 + 20);
    p[0] = 0;               /* MODE DATA LENGTH is reserved in MODE SELECT */
    p[12 + 2] |= 0x04;      /* WCE */
    r = RUN_OUT(lun, scsi_cdb_modeselect6(1, 0, (int)len), p, len);
    assert_good(&r);
    g_assert_true(get_wce(lun));

    /* The block length cannot be changed. */
    p[4 + 6] = 0x10;        /* 4096 */
    p[4 + 7] = 0x00;
    r = RUN_OUT(lun, scsi_cdb_modeselect6(1, 0, (int)len), p, len);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_INVALID_FIELD_IN_PARAMETER_LIST);

    /* A descriptor length that is neither 0 nor 8. */
    p[4 + 6] = 0x02;
    p[3] = 4;
    r = RUN_OUT(lun, scsi_cdb_modeselect6(1, 0, (int)len), p, len);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_INVALID_FIELD_IN_PARAMETER_LIST);
    scsi_lun_free(lun);
}

static void assert_invalid_param(const struct result *r)
{
    assert_sense(r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_INVALID_FIELD_IN_PARAMETER_LIST);
}

static void test_mode_select_invalid(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t page[255], p[255];
    struct result r = RUN_IN(lun, scsi_cdb_modesense10(0, 1, SCSI_MODESENSE_PC_CURRENT,
                                                       SCSI_MODEPAGE_CACHING, 0, 255),
                             page, sizeof(page));
    size_t len = r.in_xfer;
    struct sc_sense s;

    assert_good(&r);
    g_assert_cmpuint(len, ==, 8 + 20);
    page[0] = page[1] = 0;

    /* A byte that is not changeable (RCD in the caching page). */
    memcpy(p, page, len);
    p[10] |= 0x01;
    r = RUN_OUT(lun, scsi_cdb_modeselect10(1, 0, (int)len), p, len);
    s = assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_INVALID_FIELD_IN_PARAMETER_LIST);
    g_assert_true(s.sksv && !s.in_cdb);                      /* in the parameter list */
    g_assert_cmpuint(s.field, ==, 10);

    /* Wrong page length. */
    memcpy(p, page, len);
    p[9] = 0x10;
    r = RUN_OUT(lun, scsi_cdb_modeselect10(1, 0, (int)len), p, len);
    assert_invalid_param(&r);

    /* Unknown page. */
    memcpy(p, page, len);
    p[8] = SCSI_MODEPAGE_INFORMATIONAL_EXCEPTIONS_CONTROL;   /* one this LUN does not have */
    r = RUN_OUT(lun, scsi_cdb_modeselect10(1, 0, (int)len), p, len);
    assert_invalid_param(&r);

    /* Page runs past the parameter list. */
    r = RUN_OUT(lun, scsi_cdb_modeselect10(1, 0, (int)len - 4), page, len);
    assert_invalid_param(&r);

    /* Parameter list shorter than the header. */
    r = RUN_OUT(lun, scsi_cdb_modeselect10(1, 0, 3), page, len);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_PARAMETER_LIST_LENGTH_ERROR);

    /* Data-out shorter than the parameter list length. */
    r = RUN_OUT(lun, scsi_cdb_modeselect10(1, 0, (int)len), page, len - 1);
    assert_invalid_cdb(&r);

    /* SP: saving pages is not supported. */
    r = RUN_OUT(lun, scsi_cdb_modeselect10(1, 1, (int)len), page, len);
    assert_invalid_cdb(&r);

    /* Nothing changed. */
    g_assert_false(get_wce(lun));
    scsi_lun_free(lun);
}

/* ---- VERIFY, WRITE AND VERIFY ------------------------------------------ */

/*
 * The CDB of task with BYTCHK (byte 1, bits 2-1) set to bytchk: libiscsi's
 * VERIFY and WRITE AND VERIFY builders set it to 0 or 1 only.
 */
static unsigned with_bytchk(struct scsi_task *task, unsigned bytchk, uint8_t cdb[SC_CDB_MAX])
{
    unsigned n = sc_cdb(task, cdb);

    cdb[1] = (uint8_t)((cdb[1] & ~0x06) | (bytchk & 3) << 1);
    return n;
}

static void assert_miscompare(const struct result *r)
{
    assert_sense(r, SCSI_SENSE_MISCOMPARE, SCSI_SENSE_ASCQ_MISCOMPARE_DURING_VERIFY);
}

static void test_verify(void)
{
    struct scsi_lun *lun = ram_lun();
    g_autofree uint8_t *w = g_malloc(3000 * 512);
    uint8_t blk[512], cdb[SC_CDB_MAX];
    unsigned n;
    struct sc_sense s;
    struct result r;

    fill_pattern(w, 3000 * 512, 9);
    r = RUN_OUT(lun, scsi_cdb_write16(1000, 3000 * BS, BS, 0, 0, 0, 0, 0), w, 3000 * 512);
    assert_good(&r);

    /* BYTCHK=0: range check only. */
    r = RUN(lun, scsi_cdb_verify10(1000, 3000 * BS, 0, 0, 0, BS));
    assert_good(&r);
    r = RUN(lun, scsi_cdb_verify10(8 * MiB / 512, BS, 0, 0, 0, BS));
    assert_lba_out_of_range(&r);

    /* BYTCHK=1: compares across more than one bounce chunk. */
    n = sc_cdb(scsi_cdb_verify16(1000, 3000 * BS, 0, 0, 1, BS), cdb);
    r = run_cdb(lun, cdb, n, w, 3000 * 512, NULL, 0);
    assert_good(&r);
    g_assert_cmpuint(r.out_xfer, ==, 3000 * 512);

    /* A mismatch in the second chunk: MISCOMPARE, INFORMATION = its offset. */
    w[2500 * 512 + 17] ^= 0xff;
    r = run_cdb(lun, cdb, n, w, 3000 * 512, NULL, 0);
    assert_miscompare(&r);
    s = sc_sense_of(r.sense, r.sense_len);
    g_assert_true(s.info_valid);
    g_assert_cmpuint(s.info, ==, 2500 * 512 + 17);

    /* Data-out shorter than the range. */
    r = run_cdb(lun, cdb, n, w, 512, NULL, 0);
    assert_invalid_cdb(&r);

    /* BYTCHK=3: one block compared against each block of the range. */
    memset(blk, 0x77, sizeof(blk));
    r = RUN_OUT(lun, scsi_cdb_writesame10(0, 0, 0, 50, 0, 10, BS), blk, 512);
    assert_good(&r);
    n = with_bytchk(scsi_cdb_verify10(50, 10 * BS, 0, 0, 1, BS), 3, cdb);
    r = run_cdb(lun, cdb, n, blk, 512, NULL, 0);
    assert_good(&r);
    n = with_bytchk(scsi_cdb_verify10(50, 11 * BS, 0, 0, 1, BS), 3, cdb);
    r = run_cdb(lun, cdb, n, blk, 512, NULL, 0);
    assert_miscompare(&r);

    /* BYTCHK=2 is reserved. */
    n = with_bytchk(scsi_cdb_verify10(50, BS, 0, 0, 1, BS), 2, cdb);
    r = run_cdb(lun, cdb, n, blk, 512, NULL, 0);
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

static void test_write_and_verify(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(true, &s);
    uint8_t w[1024], rd[1024], cdb[SC_CDB_MAX];
    unsigned n;
    struct result r;

    fill_pattern(w, sizeof(w), 11);
    r = RUN_OUT(lun, scsi_cdb_writeverify10(20, sizeof(w), BS, 0, 0, 1, 0), w, sizeof(w));
    assert_good(&r);                          /* BYTCHK=1 */
    r = RUN_OUT(lun, scsi_cdb_writeverify16(22, sizeof(w), BS, 0, 0, 0, 0), w, sizeof(w));
    assert_good(&r);
    g_assert_cmpuint(s->fua_writes, ==, 2);     /* verified means on the medium */
    r = RUN_IN(lun, scsi_cdb_read16(22, sizeof(rd), BS, 0, 0, 0, 0, 0), rd, sizeof(rd));
    assert_good(&r);
    g_assert_true(memcmp(w, rd, sizeof(w)) == 0);
    /* BYTCHK=3: not for this command. */
    n = with_bytchk(scsi_cdb_writeverify10(20, sizeof(w), BS, 0, 0, 1, 0), 3, cdb);
    r = run_cdb(lun, cdb, n, w, sizeof(w), NULL, 0);
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

/* ---- WRITE SAME -------------------------------------------------------- */

static void read_blocks(struct scsi_lun *lun, uint64_t lba, uint32_t n, uint8_t *buf)
{
    struct result r = RUN_IN(lun, scsi_cdb_read16(lba, n * BS, BS, 0, 0, 0, 0, 0), buf,
                             (size_t)n * 512);

    assert_good(&r);
}

/* WRITE SAME(16) of one block (NDOB when data is NULL: libiscsi sets it for no data-out). */
static struct result write_same16(struct scsi_lun *lun, bool unmap, bool anchor, uint64_t lba,
                                  uint32_t n, const uint8_t *data, size_t len)
{
    return run(lun, scsi_cdb_writesame16(0, anchor, unmap, lba, 0, n, data ? BS : 0), data, len,
               NULL, 0);
}

static void test_write_same_replicates_block(void)
{
    struct scsi_lun *lun = ram_lun();
    const uint32_t n = 5000;                  /* > one 1 MiB bounce chunk */
    g_autofree uint8_t *rd = g_malloc((n + 2) * 512);
    uint8_t blk[512];
    struct result r;

    fill_pattern(blk, sizeof(blk), 13);
    r = write_same16(lun, false, false, 100, n, blk, sizeof(blk));
    assert_good(&r);
    g_assert_cmpuint(r.out_xfer, ==, 512);
    read_blocks(lun, 99, n + 2, rd);
    for (uint32_t i = 1; i <= n; i++) {
        g_assert_true(memcmp(rd + i * 512, blk, 512) == 0);
    }
    for (int i = 0; i < 512; i++) {             /* neighbours untouched */
        g_assert_cmphex(rd[i], ==, 0);
        g_assert_cmphex(rd[(n + 1) * 512 + i], ==, 0);
    }

    /* WRITE SAME(10) too. */
    fill_pattern(blk, sizeof(blk), 14);
    r = RUN_OUT(lun, scsi_cdb_writesame10(0, 0, 0, 7, 0, 3, BS), blk, sizeof(blk));
    assert_good(&r);
    read_blocks(lun, 7, 3, rd);
    g_assert_true(memcmp(rd + 1024, blk, 512) == 0);
    scsi_lun_free(lun);
}

static void test_write_same_zeroes_and_unmap(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(false, &s);
    uint8_t blk[512], zero[512] = { 0 }, rd[4 * 512];
    struct result r;

    memset(blk, 0x3c, sizeof(blk));
    r = write_same16(lun, false, false, 10, 4, blk, sizeof(blk));
    assert_good(&r);

    /* UNMAP bit with zero data: one WRITE ZEROES, no data written. */
    unsigned writes = s->ops[BACKEND_WRITE];
    r = write_same16(lun, true, false, 10, 2, zero, sizeof(zero));
    assert_good(&r);
    g_assert_cmpuint(s->ops[BACKEND_WRITE_ZEROES], ==, 1);
    g_assert_cmpuint(s->ops[BACKEND_WRITE], ==, writes);
    read_blocks(lun, 10, 4, rd);
    g_assert_cmphex(rd[0], ==, 0);
    g_assert_cmphex(rd[1023], ==, 0);
    g_assert_cmphex(rd[1024], ==, 0x3c);

    /* NDOB: no data-out buffer, zeros. */
    r = write_same16(lun, true, false, 12, 2, NULL, 0);
    assert_good(&r);
    read_blocks(lun, 10, 4, rd);
    g_assert_cmphex(rd[1024], ==, 0);
    g_assert_cmphex(rd[2047], ==, 0);
    scsi_lun_free(lun);
}

static void test_write_same_invalid(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t blk[512] = { 1 };
    struct result r;

    r = write_same16(lun, false, false, 0, 0, blk, 512);      /* WSNZ: zero length refused */
    assert_invalid_cdb(&r);
    r = write_same16(lun, false, false, 8 * MiB / 512 - 1, 2, blk, 512);
    assert_lba_out_of_range(&r);
    r = write_same16(lun, false, false, 0, 1, blk, 100);      /* no whole block of data-out */
    assert_invalid_cdb(&r);
    r = write_same16(lun, false, true, 0, 1, blk, 512);       /* ANCHOR */
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

/* ---- UNMAP ------------------------------------------------------------- */

static size_t unmap_list(uint8_t *p, const uint64_t (*d)[2], unsigned n)
{
    memset(p, 0, 8 + 16 * n);
    scsi_set_uint16(p, (uint16_t)(6 + 16 * n));       /* UNMAP DATA LENGTH */
    scsi_set_uint16(p + 2, (uint16_t)(16 * n));       /* BLOCK DESCRIPTOR DATA LENGTH */
    for (unsigned i = 0; i < n; i++) {
        scsi_set_uint64(p + 8 + 16 * i, d[i][0]);
        scsi_set_uint32(p + 16 + 16 * i, (uint32_t)d[i][1]);
    }
    return 8 + 16 * n;
}

static struct result unmap(struct scsi_lun *lun, const uint8_t *list, size_t plen, size_t buflen)
{
    return RUN_OUT(lun, scsi_cdb_unmap(0, 0, (uint16_t)plen), list, buflen);
}

static void test_unmap_then_read_zeros(void)
{
    struct scsi_lun *lun = ram_lun();
    g_autofree uint8_t *w = g_malloc(64 * 512);
    g_autofree uint8_t *rd = g_malloc(64 * 512);
    static const uint64_t d[][2] = { { 8, 16 }, { 40, 3 }, { 60, 0 } };
    uint8_t list[8 + 16 * 3];
    size_t plen = unmap_list(list, d, 3);
    struct result r;

    memset(w, 0xab, 64 * 512);
    r = RUN_OUT(lun, scsi_cdb_write16(0, 64 * BS, BS, 0, 0, 0, 0, 0), w, 64 * 512);
    assert_good(&r);

    r = unmap(lun, list, plen, plen);
    assert_good(&r);
    g_assert_cmpuint(r.out_xfer, ==, plen);
    read_blocks(lun, 0, 64, rd);
    for (uint32_t b = 0; b < 64; b++) {
        bool unmapped = (b >= 8 && b < 24) || (b >= 40 && b < 43);

        for (int i = 0; i < 512; i += 97) {
            g_assert_cmphex(rd[b * 512 + i], ==, unmapped ? 0 : 0xab);
        }
    }
    scsi_lun_free(lun);
}

static void test_unmap_bad_lengths(void)
{
    struct scsi_lun *lun = ram_lun();
    static const uint64_t d[][2] = { { 0, 1 }, { 2, 1 } };
    uint8_t list[8 + 16 * 2 + 8], bad[sizeof(list)];
    size_t plen = unmap_list(list, d, 2);
    struct result r;

    /* Block descriptor data length runs past the parameter list. */
    memcpy(bad, list, plen);
    bad[3] = 48;
    r = unmap(lun, bad, plen, plen);
    assert_invalid_param(&r);

    /* UNMAP DATA LENGTH does not cover the descriptors. */
    memcpy(bad, list, plen);
    bad[1] = 6;
    r = unmap(lun, bad, plen, plen);
    assert_invalid_param(&r);

    /* A parameter list too short for the header. */
    r = unmap(lun, list, 7, plen);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_PARAMETER_LIST_LENGTH_ERROR);

    /* Data-out shorter than the parameter list length. */
    r = unmap(lun, list, plen, plen - 1);
    assert_invalid_cdb(&r);

    /* A descriptor beyond the capacity. */
    static const uint64_t far[][2] = { { 8 * MiB / 512 - 1, 2 } };
    plen = unmap_list(bad, far, 1);
    r = unmap(lun, bad, plen, plen);
    assert_lba_out_of_range(&r);
    static const uint64_t wrap[][2] = { { UINT64_MAX, 2 } };
    plen = unmap_list(bad, wrap, 1);
    r = unmap(lun, bad, plen, plen);
    assert_lba_out_of_range(&r);

    /* Zero parameter list length: nothing to do. */
    r = unmap(lun, list, 0, 0);
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_unmap_limits(void)
{
    struct scsi_lun *lun = null_lun(1ULL << 40, 512);
    uint8_t vpd_b0[64];
    uint32_t max_lbas, max_descs;
    struct scsi_inquiry_block_limits *bl;
    struct sc_datain dd;
    struct result r;

    bl = VPD_LIMITS(lun, vpd_b0, &dd);
    max_lbas = bl->max_unmap;
    max_descs = bl->max_unmap_bdc;
    sc_datain_free(&dd);

    /* One descriptor too many. */
    g_autofree uint64_t (*d)[2] = g_malloc0_n(max_descs + 1, sizeof(*d));
    g_autofree uint8_t *list = g_malloc(8 + 16 * (max_descs + 1));
    for (uint32_t i = 0; i <= max_descs; i++) {
        d[i][0] = i;
        d[i][1] = 1;
    }
    size_t plen = unmap_list(list, (const uint64_t (*)[2])d, max_descs + 1);
    r = unmap(lun, list, plen, plen);
    assert_invalid_param(&r);
    plen = unmap_list(list, (const uint64_t (*)[2])d, max_descs);
    r = unmap(lun, list, plen, plen);
    assert_good(&r);

    /* More LBAs than the advertised maximum, split over two descriptors. */
    const uint64_t big[2][2] = { { 0, max_lbas }, { (uint64_t)max_lbas + 10, 1 } };
    plen = unmap_list(list, big, 2);
    r = unmap(lun, list, plen, plen);
    assert_invalid_param(&r);
    plen = unmap_list(list, big, 1);
    r = unmap(lun, list, plen, plen);
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_unmap_partial_descriptor_ignored(void)
{
    struct scsi_lun *lun = ram_lun();
    static const uint64_t d[][2] = { { 4, 1 }, { 5, 1 } };
    uint8_t list[8 + 32], blk[512], rd[2 * 512];
    size_t plen = unmap_list(list, d, 2);
    struct result r;

    memset(blk, 0x11, sizeof(blk));
    r = write_same16(lun, false, false, 4, 2, blk, 512);
    assert_good(&r);
    /* SBC-3: a trailing incomplete descriptor is ignored, not an error. */
    list[3] = 16 + 8;
    r = unmap(lun, list, plen, plen);
    assert_good(&r);
    read_blocks(lun, 4, 2, rd);
    g_assert_cmphex(rd[0], ==, 0);
    g_assert_cmphex(rd[512], ==, 0x11);
    scsi_lun_free(lun);
}

static void test_unmap_unsupported_without_discard(void)
{
    struct lun_backend *be;
    struct scsi_lun *lun;
    static const uint64_t d[][2] = { { 0, 1 } };
    uint8_t list[24];
    size_t plen = unmap_list(list, d, 1);
    struct result r;

    g_assert_cmpint(backend_ram_new(MiB, 512, &be), ==, 0);
    be->can_discard = false;
    lun = ready(scsi_lun_new(be, "test:thick", NULL));
    r = unmap(lun, list, plen, plen);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_INVALID_OPERATION_CODE);
    scsi_lun_free(lun);
}

/* ---- REPORT SUPPORTED OPERATION CODES ---------------------------------- */

static struct result rsoc(struct scsi_lun *lun, bool rctd, int options, uint8_t op, uint16_t sa,
                          uint8_t *buf, uint32_t len)
{
    return RUN_IN(lun, scsi_cdb_report_supported_opcodes(rctd, options, op, sa, len), buf, len);
}

/* The descriptor of (op, sa) in an all-commands list, or NULL. */
static const struct scsi_command_descriptor *
find_descriptor(const struct scsi_report_supported_op_codes *l, uint8_t op, uint16_t sa)
{
    for (int i = 0; i < l->num_descriptors; i++) {
        const struct scsi_command_descriptor *d = &l->descriptors[i];

        if (d->opcode == op && (!d->servactv || d->sa == sa)) {
            return d;
        }
    }
    return NULL;
}

static void test_rsoc_all(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[2048];
    struct result r = rsoc(lun, false, SCSI_REPORT_SUPPORTING_OPS_ALL, 0, 0, buf, sizeof(buf));
    const struct scsi_report_supported_op_codes *l;
    const struct scsi_command_descriptor *d;
    struct sc_datain dd;

    assert_good(&r);
    l = decoded(&dd, &r, buf);
    g_assert_cmpint(sc_datain_full_size(&dd), ==, r.in_xfer);
    g_assert_cmpuint(4 + 8 * l->num_descriptors, ==, r.in_xfer);   /* 8 bytes each */
    d = find_descriptor(l, SCSI_OPCODE_READ16, 0);
    g_assert_nonnull(d);
    g_assert_false(d->ctdp);
    g_assert_cmpuint(d->cdb_len, ==, 16);
    d = find_descriptor(l, SCSI_OPCODE_SERVICE_ACTION_IN, SCSI_READCAPACITY16);
    g_assert_nonnull(d);
    g_assert_true(d->servactv);
    g_assert_nonnull(find_descriptor(l, SCSI_OPCODE_UNMAP, 0));
    g_assert_null(find_descriptor(l, NO_SUCH_OPCODE, 0));
    sc_datain_free(&dd);

    /* RCTD: every descriptor carries a 12-byte timeouts descriptor. */
    r = rsoc(lun, true, SCSI_REPORT_SUPPORTING_OPS_ALL, 0, 0, buf, sizeof(buf));
    assert_good(&r);
    l = decoded(&dd, &r, buf);
    g_assert_cmpuint(4 + 20 * l->num_descriptors, ==, r.in_xfer);
    for (int i = 0; i < l->num_descriptors; i++) {
        g_assert_true(l->descriptors[i].ctdp);
        g_assert_cmpuint(l->descriptors[i].to.descriptor_length, ==, 10);
    }
    g_assert_nonnull(find_descriptor(l, SCSI_OPCODE_READ16, 0));
    sc_datain_free(&dd);
    scsi_lun_free(lun);
}

static void test_rsoc_one(void)
{
    struct scsi_lun *lun = ram_lun();
    const struct scsi_report_supported_op_codes_one_command *one;
    struct sc_datain d;
    uint8_t buf[64];
    struct result r;

    r = rsoc(lun, false, SCSI_REPORT_SUPPORTING_OPCODE, SCSI_OPCODE_READ16, 0, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 4 + 16);
    one = decoded(&d, &r, buf);
    g_assert_cmpuint(one->support, ==, 3);                  /* supported, standard */
    g_assert_cmpuint(one->cdb_length, ==, 16);
    g_assert_cmphex(one->cdb_usage_data[0], ==, SCSI_OPCODE_READ16);  /* opcode first */
    g_assert_cmphex(one->cdb_usage_data[1] & 0x08, ==, 0x08);         /* FUA is looked at */
    sc_datain_free(&d);

    r = rsoc(lun, false, SCSI_REPORT_SUPPORTING_OPCODE, NO_SUCH_OPCODE, 0, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 4);
    one = decoded(&d, &r, buf);
    g_assert_cmpuint(one->support, ==, 1);                  /* not supported */
    sc_datain_free(&d);

    r = rsoc(lun, false, SCSI_REPORT_SUPPORTING_SERVICEACTION, SCSI_OPCODE_SERVICE_ACTION_IN,
             SCSI_READCAPACITY16, buf, sizeof(buf));
    assert_good(&r);
    one = decoded(&d, &r, buf);
    g_assert_cmpuint(one->support, ==, 3);
    g_assert_cmphex(one->cdb_usage_data[0], ==, SCSI_OPCODE_SERVICE_ACTION_IN);
    g_assert_cmphex(one->cdb_usage_data[1], ==, SCSI_READCAPACITY16);
    sc_datain_free(&d);

    r = rsoc(lun, true, SCSI_REPORT_SUPPORTING_OPCODE, SCSI_OPCODE_WRITE_SAME16, 0, buf,
             sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 4 + 16 + 12);
    one = decoded(&d, &r, buf);
    g_assert_true(one->ctdp);
    g_assert_cmpuint(one->support, ==, 3);
    sc_datain_free(&d);

    /* Option 1 on a command with service actions, option 2 on one without, option 5. */
    r = rsoc(lun, false, SCSI_REPORT_SUPPORTING_OPCODE, SCSI_OPCODE_SERVICE_ACTION_IN, 0, buf,
             sizeof(buf));
    assert_invalid_cdb(&r);
    r = rsoc(lun, false, SCSI_REPORT_SUPPORTING_SERVICEACTION, SCSI_OPCODE_READ16, 0, buf,
             sizeof(buf));
    assert_invalid_cdb(&r);
    r = rsoc(lun, false, 5, SCSI_OPCODE_READ16, 0, buf, sizeof(buf));
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

static void test_rsoc_follows_backend(void)
{
    struct lun_backend *be;
    struct scsi_lun *lun;
    const struct scsi_report_supported_op_codes *l;
    struct sc_datain d;
    uint8_t buf[2048];
    struct result r;

    g_assert_cmpint(backend_ram_new(MiB, 512, &be), ==, 0);
    be->can_discard = false;
    lun = ready(scsi_lun_new(be, "test:thick", NULL));
    /* No discard, no UNMAP: neither listed nor reported as supported. */
    r = rsoc(lun, false, SCSI_REPORT_SUPPORTING_OPCODE, SCSI_OPCODE_UNMAP, 0, buf, 64);
    assert_good(&r);
    g_assert_cmpuint(((const struct scsi_report_supported_op_codes_one_command *)
                      decoded(&d, &r, buf))->support, ==, 1);
    sc_datain_free(&d);
    r = rsoc(lun, false, SCSI_REPORT_SUPPORTING_OPS_ALL, 0, 0, buf, sizeof(buf));
    assert_good(&r);
    l = decoded(&d, &r, buf);
    g_assert_null(find_descriptor(l, SCSI_OPCODE_UNMAP, 0));
    g_assert_nonnull(find_descriptor(l, SCSI_OPCODE_WRITE_SAME16, 0));
    sc_datain_free(&d);
    scsi_lun_free(lun);
}

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

#define DRAIN_TIMEOUT_US (10 * G_TIME_SPAN_SECOND)

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

static void nothing(void *opaque)
{
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

static void test_drain_under_continuous_io(void)
{
    struct lun_backend *be = g_new0(struct lun_backend, 1);
    struct parker w[STRESS_THREADS];
    GThread *t[STRESS_THREADS];
    struct scsi_lun *lun;
    struct stress_drain sd = { .w = w };

    g_assert_cmpint(backend_ram_new(1 * MiB, 512, &stress_ram), ==, 0);
    *be = *stress_ram;
    be->ops = &parking_ops;
    be->name = g_strdup("parking");
    lun = ready(scsi_lun_new(be, "test:parking", NULL));
    atomic_store(&stress_stop, false);
    g_mutex_init(&sd.lock);
    g_cond_init(&sd.cond);
    for (unsigned i = 0; i < STRESS_THREADS; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].lun = lun;
        w[i].id = i;
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
    }
    g_assert_cmpuint(scsi_lun_inflight(lun), ==, 0);
    g_mutex_clear(&sd.lock);
    g_cond_clear(&sd.cond);
    scsi_lun_free(lun);
}

struct worker {
    struct scsi_lun *lun;
    unsigned id;
    unsigned ua_seen;
};

static gpointer io_thread(gpointer opaque)
{
    struct worker *w = opaque;
    uint8_t wbuf[1024], rbuf[1024];

    for (unsigned i = 0; i < 2000; i++) {
        uint32_t lba = w->id * 4096 + (i % 2000) * 2;
        struct pending_cmd p;

        fill_pattern(wbuf, sizeof(wbuf), w->id * 7919 + i);
        start(&p, w->lun, scsi_cdb_write10(lba, sizeof(wbuf), BS, 0, 0, 0, 0, 0), wbuf,
              sizeof(wbuf), NULL, 0);
        g_assert_cmpint(p.completions, ==, 1);
        if (p.cmd.status == SAM_STAT_CHECK_CONDITION) {
            g_assert_cmphex(sc_fixed_sense(p.cmd.sense, p.cmd.sense_len).key, ==,
                            SCSI_SENSE_UNIT_ATTENTION);
            w->ua_seen++;
            continue;
        }
        g_assert_cmphex(p.cmd.status, ==, SAM_STAT_GOOD);
        start(&p, w->lun, scsi_cdb_read10(lba, sizeof(rbuf), BS, 0, 0, 0, 0, 0), NULL, 0, rbuf,
              sizeof(rbuf));
        if (p.cmd.status == SAM_STAT_CHECK_CONDITION) {
            w->ua_seen++;
            continue;
        }
        g_assert_true(memcmp(wbuf, rbuf, sizeof(rbuf)) == 0);
    }
    return NULL;
}

static void test_concurrent_io_and_unit_attention(void)
{
    struct scsi_lun *lun = ram_lun();
    struct worker w[4];
    GThread *t[4];
    unsigned seen = 0;

    scsi_lun_set_ua(lun, SCSI_UA_LUN_RESET);
    for (unsigned i = 0; i < 4; i++) {
        w[i] = (struct worker){ .lun = lun, .id = i };
        t[i] = g_thread_new("io", io_thread, &w[i]);
    }
    for (unsigned i = 0; i < 4; i++) {
        g_thread_join(t[i]);
        seen += w[i].ua_seen;
    }
    /* Exactly one command, on whichever thread, saw the UA. */
    g_assert_cmpuint(seen, ==, 1);
    g_assert_cmpuint(scsi_lun_inflight(lun), ==, 0);
    scsi_lun_free(lun);
}

/* ---- hold backend (tests only) ------------------------------------------ */

struct hold_probe {
    struct lun_backend *be;
    struct iothread *t;
    struct backend_io io[4];
    uint8_t buf[4][512];
    struct iovec iov[4];
    GMutex lock;
    GCond cond;
    unsigned done;
    bool all_on_thread;
    int ret;
    unsigned next;
};

static void hold_io_done(struct backend_io *io, int ret)
{
    struct hold_probe *h = io->opaque;

    g_mutex_lock(&h->lock);
    h->done++;
    h->all_on_thread = h->all_on_thread && iothread_is_current(h->t) && ret == 0;
    g_cond_broadcast(&h->cond);
    g_mutex_unlock(&h->lock);
}

static void hold_submit_next(void *opaque)
{
    struct hold_probe *h = opaque;
    unsigned i = h->next++;

    h->iov[i] = (struct iovec){ h->buf[i], 512 };
    h->io[i] = (struct backend_io){ .op = BACKEND_READ, .offset = i * 512, .len = 512,
                                    .iov = &h->iov[i], .iovcnt = 1, .thread = h->t,
                                    .complete = hold_io_done, .opaque = h };
    g_assert_cmpint(backend_submit(h->be, &h->io[i]), ==, 0);
}

static void hold_attach(void *opaque)
{
    struct hold_probe *h = opaque;

    h->ret = h->be->ops->attach_thread(h->be, h->t);
}

static void hold_detach(void *opaque)
{
    struct hold_probe *h = opaque;

    h->be->ops->detach_thread(h->be, h->t);
}

static unsigned hold_done(struct hold_probe *h)
{
    unsigned n;

    g_mutex_lock(&h->lock);
    n = h->done;
    g_mutex_unlock(&h->lock);
    return n;
}

static void test_hold_backend_holds_while_its_file_exists(void)
{
    g_autofree char *dir = g_dir_make_tmp("hold-XXXXXX", NULL);
    g_autofree char *gate = g_build_filename(dir, "gate", NULL);
    gint64 deadline = g_get_monotonic_time() + DRAIN_TIMEOUT_US;
    struct hold_probe h = { .all_on_thread = true };

    g_mutex_init(&h.lock);
    g_cond_init(&h.cond);
    h.t = iothread_new("t-hold", 1, 0);
    g_assert_cmpint(iothread_start(h.t), ==, 0);
    g_assert_true(g_file_set_contents(gate, "", 0, NULL));
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE, "hold:*test backend*");
    g_assert_cmpint(backend_hold_new(1 * MiB, 512, gate, &h.be), ==, 0);
    g_test_assert_expected_messages();
    iothread_run_sync(h.t, hold_attach, &h);
    g_assert_cmpint(h.ret, ==, 0);

    iothread_run_sync(h.t, hold_submit_next, &h);
    iothread_run_sync(h.t, hold_submit_next, &h);
    iothread_run_sync(h.t, nothing, NULL);
    g_assert_cmpuint(hold_done(&h), ==, 0);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE, "hold:*is gone: completed 2 held*");
    g_assert_cmpint(g_unlink(gate), ==, 0);
    g_mutex_lock(&h.lock);
    while (h.done < 2) {
        g_assert_true(g_cond_wait_until(&h.cond, &h.lock, deadline));
    }
    g_mutex_unlock(&h.lock);
    iothread_run_sync(h.t, nothing, NULL);      /* the handler has returned (and logged) */
    g_test_assert_expected_messages();
    g_assert_true(h.all_on_thread);

    /* No file: completes inside submit. */
    iothread_run_sync(h.t, hold_submit_next, &h);
    g_assert_cmpuint(hold_done(&h), ==, 3);

    /* Held again once the file is back; the thread's detach completes stragglers. */
    g_assert_true(g_file_set_contents(gate, "", 0, NULL));
    iothread_run_sync(h.t, hold_submit_next, &h);
    g_assert_cmpuint(hold_done(&h), ==, 3);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE, "hold:*completed 1 held*");
    iothread_run_sync(h.t, hold_detach, &h);
    g_test_assert_expected_messages();
    g_assert_cmpuint(hold_done(&h), ==, 4);
    g_assert_true(h.all_on_thread);
    backend_close(h.be);
    g_unlink(gate);
    g_rmdir(dir);

    /* A thread cannot serve it without the file's directory to watch. */
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE, "hold:*test backend*");
    g_assert_cmpint(backend_hold_new(1 * MiB, 512, gate, &h.be), ==, 0);
    g_test_assert_expected_messages();
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "hold:*cannot watch*");
    iothread_run_sync(h.t, hold_attach, &h);
    g_test_assert_expected_messages();
    g_assert_cmpint(h.ret, ==, -ENOENT);
    backend_close(h.be);
    iothread_free(h.t);
    g_mutex_clear(&h.lock);
    g_cond_clear(&h.cond);
}

/* ---- robustness -------------------------------------------------------- */

/*
 * Random CDBs (mostly valid opcodes with random fields) and random buffer
 * sizes: every command completes once, with a defined status, well-formed
 * sense, and never transfers more than the buffers hold (ASan checks the
 * rest).
 */
static void drop_log(const gchar *domain, GLogLevelFlags level, const gchar *msg, gpointer opaque)
{
}

static void test_random_cdbs(void)
{
    static const uint8_t ops[] = {
        SCSI_OPCODE_TESTUNITREADY, SC_OPCODE_REQUEST_SENSE, SCSI_OPCODE_READ6, SC_OPCODE_WRITE6,
        SCSI_OPCODE_INQUIRY, SCSI_OPCODE_MODESELECT6, SCSI_OPCODE_MODESENSE6,
        SCSI_OPCODE_STARTSTOPUNIT, SCSI_OPCODE_PREVENTALLOW, SCSI_OPCODE_READCAPACITY10,
        SCSI_OPCODE_READ10, SCSI_OPCODE_WRITE10, SCSI_OPCODE_WRITE_VERIFY10, SCSI_OPCODE_VERIFY10,
        SCSI_OPCODE_SYNCHRONIZECACHE10, SCSI_OPCODE_WRITE_SAME10, SCSI_OPCODE_UNMAP,
        SCSI_OPCODE_MODESELECT10, SCSI_OPCODE_MODESENSE10, SCSI_OPCODE_READ16,
        SCSI_OPCODE_WRITE16, SCSI_OPCODE_WRITE_VERIFY16, SCSI_OPCODE_VERIFY16,
        SCSI_OPCODE_SYNCHRONIZECACHE16, SCSI_OPCODE_WRITE_SAME16, SCSI_OPCODE_SERVICE_ACTION_IN,
        SCSI_OPCODE_REPORTLUNS, SCSI_OPCODE_MAINTENANCE_IN, SCSI_OPCODE_READ12, SCSI_OPCODE_WRITE12,
    };
    struct scsi_lun *luns[2] = { ram_lun(), null_lun(MiB, 4096) };
    g_autofree uint8_t *out = g_malloc(64 * 1024);
    g_autofree uint8_t *in = g_malloc(64 * 1024);
    unsigned iterations = g_test_slow() ? 200000 : 20000;
    /* Thousands of "unsupported opcode" debug lines would bury the TAP log. */
    guint quiet = g_log_set_handler(G_LOG_DOMAIN, G_LOG_LEVEL_DEBUG | G_LOG_LEVEL_MESSAGE,
                                    drop_log, NULL);

    for (unsigned it = 0; it < iterations; it++) {
        struct scsi_lun *lun = luns[it & 1];
        uint8_t cdb[16];
        size_t out_len = 0, in_len = 0;
        struct pending_cmd p;

        for (unsigned i = 0; i < sizeof(cdb); i++) {
            cdb[i] = (uint8_t)g_test_rand_int();
        }
        if (g_test_rand_int_range(0, 4)) {
            cdb[0] = ops[g_test_rand_int_range(0, sizeof(ops))];
        }
        /* Keep lengths small enough that most commands get past the checks. */
        switch (g_test_rand_int_range(0, 3)) {
        case 0:
            cdb[2] = cdb[3] = cdb[4] = cdb[5] = 0;
            cdb[6] = cdb[7] = cdb[10] = cdb[11] = 0;
            cdb[12] &= 0x01;
            break;
        case 1:
            cdb[7] = 0;
            cdb[10] = cdb[11] = cdb[12] = 0;
            break;
        }
        cdb[g_test_rand_int_range(5, 16)] &= ~0x04;   /* mostly no NACA */
        if (g_test_rand_bit()) {
            out_len = (size_t)g_test_rand_int_range(0, 64 * 1024);
            fill_pattern(out, out_len, it);
            if (g_test_rand_bit()) {
                memset(out, 0, out_len);
            }
        } else {
            in_len = (size_t)g_test_rand_int_range(0, 64 * 1024);
        }
        start_cdb(&p, lun, NULL, cdb, g_test_rand_int_range(1, 17), out_len ? out : NULL,
                  out_len, in_len ? in : NULL, in_len);
        g_assert_cmpint(p.completions, ==, 1);
        g_assert_cmpuint(p.cmd.data_in_xfer, <=, in_len);
        g_assert_cmpuint(p.cmd.data_out_xfer, <=, out_len);
        switch (p.cmd.status) {
        case SAM_STAT_GOOD:
            g_assert_cmpuint(p.cmd.sense_len, ==, 0);
            break;
        case SAM_STAT_CHECK_CONDITION:
            sc_fixed_sense(p.cmd.sense, p.cmd.sense_len);
            break;
        default:
            g_assert_not_reached();
        }
    }
    g_log_remove_handler(G_LOG_DOMAIN, quiet);
    g_assert_cmpuint(scsi_lun_inflight(luns[0]), ==, 0);
    scsi_lun_free(luns[0]);
    scsi_lun_free(luns[1]);
}

/* ---- backends ---------------------------------------------------------- */

static void noop_complete(struct backend_io *io, int ret)
{
    *(int *)io->opaque = ret;
}

static void test_backend_submit_checks_geometry(void)
{
    struct lun_backend *be;
    uint8_t buf[1024];
    struct iovec iov = { buf, 512 };
    int ret = 1;
    struct backend_io io = { .op = BACKEND_READ, .offset = 0, .len = 512, .iov = &iov,
                             .iovcnt = 1, .complete = noop_complete, .opaque = &ret };

    g_assert_cmpint(backend_ram_new(MiB, 512, &be), ==, 0);
    g_assert_cmpint(backend_submit(be, &io), ==, 0);
    g_assert_cmpint(ret, ==, 0);

    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*not block aligned*");
    io.offset = 100;
    g_assert_cmpint(backend_submit(be, &io), ==, -EINVAL);
    g_test_assert_expected_messages();

    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*beyond the end*");
    io.offset = MiB;
    g_assert_cmpint(backend_submit(be, &io), ==, -EINVAL);
    g_test_assert_expected_messages();

    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*length differs*");
    io.offset = 0;
    io.len = 1024;
    g_assert_cmpint(backend_submit(be, &io), ==, -EINVAL);
    g_test_assert_expected_messages();

    be->read_only = true;
    io.op = BACKEND_WRITE;
    io.len = 512;
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*read-only*");
    g_assert_cmpint(backend_submit(be, &io), ==, -EROFS);
    g_test_assert_expected_messages();

    be->read_only = false;
    be->can_discard = false;
    io.op = BACKEND_DISCARD;
    g_assert_cmpint(backend_submit(be, &io), ==, -EOPNOTSUPP);
    backend_close(be);

    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*block size*");
    g_assert_cmpint(backend_ram_new(MiB, 1000, &be), ==, -EINVAL);
    g_test_assert_expected_messages();
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*multiple*");
    g_assert_cmpint(backend_null_new(MiB + 1, 512, &be), ==, -EINVAL);
    g_test_assert_expected_messages();
}

static void test_lun_refuses_bad_geometry(void)
{
    struct lun_backend *be;

    g_assert_cmpint(backend_ram_new(MiB, 512, &be), ==, 0);
    be->block_size = 520;       /* a backend bug: not a power of two */
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "test:bad: cannot serve*");
    g_assert_null(scsi_lun_new(be, "test:bad", NULL));   /* and be is closed */
    g_test_assert_expected_messages();
}

static long rss_kib(void)
{
    g_autofree char *status = NULL;
    const char *p;

    g_assert_true(g_file_get_contents("/proc/self/status", &status, NULL, NULL));
    p = strstr(status, "VmRSS:");
    g_assert_nonnull(p);
    return strtol(p + 6, NULL, 10);
}

static void test_ram_costs_only_written_pages(void)
{
    struct lun_backend *be;
    long before = rss_kib();
    uint8_t buf[4096];
    struct iovec iov = { buf, sizeof(buf) };
    int ret = 1;
    struct backend_io io = { .op = BACKEND_READ, .offset = 512 * MiB, .len = sizeof(buf),
                             .iov = &iov, .iovcnt = 1, .complete = noop_complete,
                             .opaque = &ret };

    g_assert_cmpint(backend_ram_new(1ULL << 30, 4096, &be), ==, 0);
    memset(buf, 0xee, sizeof(buf));
    g_assert_cmpint(backend_submit(be, &io), ==, 0);
    g_assert_cmpint(ret, ==, 0);
    g_assert_cmphex(buf[0], ==, 0);
    g_assert_cmphex(buf[4095], ==, 0);
    /* 1 GiB mapped, a page read: far less than 64 MiB resident. */
    g_assert_cmpint(rss_kib() - before, <, 64 * 1024);
    backend_close(be);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/scsi-disk/ua/power-on-reported-once", test_ua_power_on_reported_once);
    g_test_add_func("/scsi-disk/ua/reported-to-any-command", test_ua_reported_to_any_command);
    g_test_add_func("/scsi-disk/ua/per-nexus", test_ua_per_nexus);
    g_test_add_func("/scsi-disk/ua/reported-once-across-threads",
                    test_ua_reported_once_across_threads);
    g_test_add_func("/scsi-disk/ua/power-on-covers-reset", test_ua_power_on_covers_reset);
    g_test_add_func("/scsi-disk/ua/request-sense-returns-and-clears",
                    test_request_sense_returns_and_clears_ua);
    g_test_add_func("/scsi-disk/ua/concurrent-io", test_concurrent_io_and_unit_attention);

    g_test_add_func("/scsi-disk/inquiry/standard", test_inquiry_standard);
    g_test_add_func("/scsi-disk/inquiry/allocation-length", test_inquiry_allocation_length_truncates);
    g_test_add_func("/scsi-disk/inquiry/vpd-00", test_inquiry_vpd_supported_pages);
    g_test_add_func("/scsi-disk/inquiry/vpd-80-83", test_inquiry_vpd_identification);
    g_test_add_func("/scsi-disk/inquiry/default-identity", test_inquiry_default_identity_is_stable);
    g_test_add_func("/scsi-disk/inquiry/passthrough-identity", test_inquiry_passthrough_identity);
    g_test_add_func("/scsi-disk/inquiry/vpd-b0", test_inquiry_vpd_block_limits);
    g_test_add_func("/scsi-disk/inquiry/vpd-b1-b2", test_inquiry_vpd_characteristics_and_provisioning);
    g_test_add_func("/scsi-disk/inquiry/invalid", test_inquiry_invalid_fields);

    g_test_add_func("/scsi-disk/read-capacity/values", test_read_capacity);
    g_test_add_func("/scsi-disk/read-capacity/16-allocation", test_read_capacity_16_allocation_length);

    g_test_add_func("/scsi-disk/rw/read-back-all-sizes", test_write_read_back_all_sizes);
    g_test_add_func("/scsi-disk/rw/6-byte-zero-is-256", test_rw6_zero_length_means_256);
    g_test_add_func("/scsi-disk/rw/zero-length", test_rw10_zero_length_transfers_nothing);
    g_test_add_func("/scsi-disk/rw/scattered-larger-buffer", test_read_into_larger_scattered_buffer);
    g_test_add_func("/scsi-disk/rw/lba-out-of-range", test_lba_out_of_range);
    g_test_add_func("/scsi-disk/rw/transfer-cap", test_transfer_length_cap);
    g_test_add_func("/scsi-disk/rw/backend-transfer-limit", test_backend_transfer_limit);
    g_test_add_func("/scsi-disk/rw/short-buffers", test_short_buffers);
    g_test_add_func("/scsi-disk/rw/write-protected", test_write_protected);
    g_test_add_func("/scsi-disk/rw/null-backend", test_null_backend);
    g_test_add_func("/scsi-disk/cdb/invalid-opcode", test_invalid_opcode_and_control_byte);

    g_test_add_func("/scsi-disk/cache/fua-and-wce", test_fua_and_write_cache);
    g_test_add_func("/scsi-disk/cache/sync-range", test_sync_cache_range);
    g_test_add_func("/scsi-disk/start-stop-prevent-allow", test_start_stop_and_prevent_allow);

    g_test_add_func("/scsi-disk/mode/sense-pages", test_mode_sense_pages);
    g_test_add_func("/scsi-disk/mode/page-control", test_mode_sense_page_control);
    g_test_add_func("/scsi-disk/mode/sense-invalid", test_mode_sense_invalid);
    g_test_add_func("/scsi-disk/mode/select-wce", test_mode_select_toggles_wce);
    g_test_add_func("/scsi-disk/mode/select-invalid", test_mode_select_invalid);
    g_test_add_func("/scsi-disk/mode/select-block-descriptor", test_mode_select_block_descriptor);

    g_test_add_func("/scsi-disk/verify/bytchk", test_verify);
    g_test_add_func("/scsi-disk/verify/write-and-verify", test_write_and_verify);

    g_test_add_func("/scsi-disk/write-same/replicate", test_write_same_replicates_block);
    g_test_add_func("/scsi-disk/write-same/zeroes", test_write_same_zeroes_and_unmap);
    g_test_add_func("/scsi-disk/write-same/invalid", test_write_same_invalid);

    g_test_add_func("/scsi-disk/unmap/read-zeros", test_unmap_then_read_zeros);
    g_test_add_func("/scsi-disk/unmap/bad-lengths", test_unmap_bad_lengths);
    g_test_add_func("/scsi-disk/unmap/limits", test_unmap_limits);
    g_test_add_func("/scsi-disk/unmap/partial-descriptor", test_unmap_partial_descriptor_ignored);
    g_test_add_func("/scsi-disk/unmap/unsupported", test_unmap_unsupported_without_discard);

    g_test_add_func("/scsi-disk/rsoc/all", test_rsoc_all);
    g_test_add_func("/scsi-disk/rsoc/one", test_rsoc_one);
    g_test_add_func("/scsi-disk/rsoc/follows-backend", test_rsoc_follows_backend);


    g_test_add_func("/scsi-disk/robustness/random-cdbs", test_random_cdbs);
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
    g_test_add_func("/scsi-disk/backend/geometry-checks", test_backend_submit_checks_geometry);
    g_test_add_func("/scsi-disk/backend/ram-sparse", test_ram_costs_only_written_pages);
    g_test_add_func("/scsi-disk/backend/hold-holds-while-its-file-exists",
                    test_hold_backend_holds_while_its_file_exists);
    g_test_add_func("/scsi-disk/lun/refuses-bad-geometry", test_lun_refuses_bad_geometry);

    return g_test_run();
}
