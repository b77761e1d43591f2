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
#include "scsi-disk.h"

#define KiB 1024
#define MiB (1024 * 1024)

/* ---- harness ----------------------------------------------------------- */

struct result {
    uint8_t status;
    uint8_t sense_len;
    uint8_t sense[SCSI_SENSE_MAX];
    uint64_t in_xfer;
    uint64_t out_xfer;
};

struct pending_cmd {
    struct scsi_cmd cmd;
    struct iovec in, out;
    int completions;
};

static void count_completion(struct scsi_cmd *cmd)
{
    struct pending_cmd *p = cmd->opaque;

    p->completions++;
}

/* Starts a command through nexus ua (NULL: the LUN's own); the caller checks p->completions. */
static void start_as(struct pending_cmd *p, struct scsi_lun *lun, struct scsi_ua_state *ua,
                     const uint8_t *cdb, unsigned cdb_len, const void *out, size_t out_len,
                     void *in, size_t in_len)
{
    memset(p, 0, sizeof(*p));
    p->cmd.ua = ua;
    p->cmd.cdb = cdb;
    p->cmd.cdb_len = cdb_len;
    if (out) {
        p->out.iov_base = (void *)out;
        p->out.iov_len = out_len;
        p->cmd.data_out = &p->out;
        p->cmd.data_out_cnt = 1;
    }
    if (in) {
        p->in.iov_base = in;
        p->in.iov_len = in_len;
        p->cmd.data_in = &p->in;
        p->cmd.data_in_cnt = 1;
    }
    p->cmd.complete = count_completion;
    p->cmd.opaque = p;
    scsi_lun_exec(lun, &p->cmd);
}

static void start(struct pending_cmd *p, struct scsi_lun *lun, const uint8_t *cdb,
                  unsigned cdb_len, const void *out, size_t out_len, void *in, size_t in_len)
{
    start_as(p, lun, NULL, cdb, cdb_len, out, out_len, in, in_len);
}

static struct result result_of(const struct scsi_cmd *cmd)
{
    struct result r = { .status = cmd->status, .sense_len = cmd->sense_len,
                        .in_xfer = cmd->data_in_xfer, .out_xfer = cmd->data_out_xfer };

    memcpy(r.sense, cmd->sense, sizeof(r.sense));
    return r;
}

/* Runs a command on a synchronous backend: it must complete exactly once, inline. */
static struct result run(struct scsi_lun *lun, const uint8_t *cdb, unsigned cdb_len,
                         const void *out, size_t out_len, void *in, size_t in_len)
{
    struct pending_cmd p;

    start(&p, lun, cdb, cdb_len, out, out_len, in, in_len);
    g_assert_cmpint(p.completions, ==, 1);
    return result_of(&p.cmd);
}

#define RUN(lun, cdb) run(lun, cdb, sizeof(cdb), NULL, 0, NULL, 0)
#define RUN_IN(lun, cdb, buf, len) run(lun, cdb, sizeof(cdb), NULL, 0, buf, len)
#define RUN_OUT(lun, cdb, buf, len) run(lun, cdb, sizeof(cdb), buf, len, NULL, 0)

static void assert_good(const struct result *r)
{
    g_assert_cmphex(r->status, ==, SAM_STAT_GOOD);
    g_assert_cmpuint(r->sense_len, ==, 0);
}

/* Fixed-format sense: response code 70h, 10 additional bytes, key/ASC/ASCQ. */
static void assert_sense(const struct result *r, uint8_t key, uint8_t asc, uint8_t ascq)
{
    g_assert_cmphex(r->status, ==, SAM_STAT_CHECK_CONDITION);
    g_assert_cmpuint(r->sense_len, >=, 18);
    g_assert_cmphex(r->sense[0] & 0x7f, ==, 0x70);
    g_assert_cmpuint(r->sense[7], ==, 10);
    g_assert_cmphex(r->sense[2] & 0xf, ==, key);
    g_assert_cmphex(r->sense[12], ==, asc);
    g_assert_cmphex(r->sense[13], ==, ascq);
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t be64(const uint8_t *p)
{
    return (uint64_t)be32(p) << 32 | be32(p + 4);
}

static uint16_t be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}

static void put64(uint8_t *p, uint64_t v)
{
    put32(p, v >> 32);
    put32(p + 4, (uint32_t)v);
}

/* CDB builders for the data commands. */
static void cdb10(uint8_t *c, uint8_t op, uint8_t flags, uint32_t lba, uint16_t n)
{
    memset(c, 0, 10);
    c[0] = op;
    c[1] = flags;
    put32(c + 2, lba);
    c[7] = n >> 8;
    c[8] = (uint8_t)n;
}

static void cdb16(uint8_t *c, uint8_t op, uint8_t flags, uint64_t lba, uint32_t n)
{
    memset(c, 0, 16);
    c[0] = op;
    c[1] = flags;
    put64(c + 2, lba);
    put32(c + 10, n);
}

static const uint8_t TUR[6] = { 0x00 };

/* A LUN whose power-on unit attention has been consumed. */
static struct scsi_lun *ready(struct scsi_lun *lun)
{
    struct result r = RUN(lun, TUR);

    assert_sense(&r, SENSE_UNIT_ATTENTION, 0x29, 0x00);
    r = RUN(lun, TUR);
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
            io->sense_key = SENSE_MEDIUM_ERROR;
            io->asc = 0x11;
            io->ascq = 0x04;     /* UNRECOVERED READ ERROR - AUTO REALLOCATE FAILED */
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
    uint8_t inq[6] = { 0x12, 0, 0, 0, 96, 0 }, buf[96];
    struct result r;

    /* INQUIRY passes through a pending UA without consuming it. */
    r = RUN_IN(lun, inq, buf, sizeof(buf));
    assert_good(&r);
    r = RUN(lun, TUR);
    assert_sense(&r, SENSE_UNIT_ATTENTION, 0x29, 0x00);
    r = RUN(lun, TUR);
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_ua_reported_to_any_command(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t cdb[10], buf[512];
    struct result r;

    scsi_lun_set_ua(lun, SCSI_UA_LUN_RESET);
    cdb10(cdb, 0x28, 0, 0, 1);
    r = RUN_IN(lun, cdb, buf, sizeof(buf));
    assert_sense(&r, SENSE_UNIT_ATTENTION, 0x29, 0x03);
    g_assert_cmpuint(r.in_xfer, ==, 0);
    r = RUN_IN(lun, cdb, buf, sizeof(buf));
    assert_good(&r);
    /* Even an unknown opcode reports the UA first. */
    scsi_lun_set_ua(lun, SCSI_UA_CAPACITY_CHANGED);
    static const uint8_t bogus[6] = { 0xff };
    r = RUN(lun, bogus);
    assert_sense(&r, SENSE_UNIT_ATTENTION, 0x2a, 0x09);
    r = RUN(lun, bogus);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x20, 0x00);
    scsi_lun_free(lun);
}

/* A TEST UNIT READY sent through one I_T nexus's unit-attention state. */
static struct result tur_as(struct scsi_lun *lun, struct scsi_ua_state *ua)
{
    struct pending_cmd p;

    start_as(&p, lun, ua, TUR, sizeof(TUR), NULL, 0, NULL, 0);
    g_assert_cmpint(p.completions, ==, 1);
    return result_of(&p.cmd);
}

static void assert_ua_once(struct scsi_lun *lun, struct scsi_ua_state *ua, uint8_t asc,
                           uint8_t ascq)
{
    struct result r = tur_as(lun, ua);

    assert_sense(&r, SENSE_UNIT_ATTENTION, asc, ascq);
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
    assert_ua_once(lun, &a, 0x29, 0x00);
    assert_ua_once(lun, &b, 0x29, 0x00);   /* a consuming its own left b's */

    scsi_lun_set_ua(lun, SCSI_UA_CAPACITY_CHANGED);
    assert_ua_once(lun, &a, 0x2a, 0x09);
    assert_ua_once(lun, &b, 0x2a, 0x09);
    r = RUN(lun, TUR);
    assert_sense(&r, SENSE_UNIT_ATTENTION, 0x2a, 0x09);

    scsi_ua_set(&b, SCSI_UA_NEXUS_LOSS);
    r = tur_as(lun, &a);
    assert_good(&r);
    assert_ua_once(lun, &b, 0x29, 0x07);

    scsi_lun_set_ua(lun, SCSI_UA_REPORTED_LUNS_CHANGED);
    scsi_ua_init(&late, lun);
    assert_ua_once(lun, &late, 0x29, 0x00);
    assert_ua_once(lun, &a, 0x3f, 0x0e);
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
            g_assert_cmpuint(r.sense[2] & 0xf, ==, SENSE_UNIT_ATTENTION);
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
    r = RUN(lun, TUR);
    assert_sense(&r, SENSE_UNIT_ATTENTION, 0x29, 0x00);
    r = RUN(lun, TUR);
    assert_sense(&r, SENSE_UNIT_ATTENTION, 0x3f, 0x0e);
    r = RUN(lun, TUR);
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_request_sense_returns_and_clears_ua(void)
{
    struct scsi_lun *lun = new_ram(MiB, 512);
    uint8_t cdb[6] = { 0x03, 0, 0, 0, 252, 0 }, buf[252];
    struct result r;

    memset(buf, 0xaa, sizeof(buf));
    r = RUN_IN(lun, cdb, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 18);
    g_assert_cmphex(buf[0], ==, 0x70);
    g_assert_cmphex(buf[2], ==, SENSE_UNIT_ATTENTION);
    g_assert_cmphex(buf[12], ==, 0x29);
    g_assert_cmphex(buf[13], ==, 0x00);

    r = RUN_IN(lun, cdb, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmphex(buf[2], ==, SENSE_NO_SENSE);
    g_assert_cmphex(buf[12], ==, 0);
    r = RUN(lun, TUR);
    assert_good(&r);

    /* Descriptor format is not offered. */
    cdb[1] = 0x01;
    r = RUN_IN(lun, cdb, buf, sizeof(buf));
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
    scsi_lun_free(lun);
}

/* ---- INQUIRY ----------------------------------------------------------- */

static void test_inquiry_standard(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t cdb[6] = { 0x12, 0, 0, 0, 255, 0 }, buf[255];
    struct result r = RUN_IN(lun, cdb, buf, sizeof(buf));

    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, >=, 36);
    g_assert_cmpuint(r.in_xfer, ==, buf[4] + 5u);     /* ADDITIONAL LENGTH */
    g_assert_cmphex(buf[0], ==, 0x00);               /* connected, direct access */
    g_assert_cmphex(buf[1] & 0x80, ==, 0);           /* not removable */
    g_assert_cmphex(buf[2], ==, 0x06);               /* SPC-4 */
    g_assert_cmphex(buf[3] & 0x0f, ==, 0x02);        /* response data format */
    g_assert_cmphex(buf[7] & 0x02, ==, 0x02);        /* CMDQUE */
    g_assert_true(memcmp(buf + 8, "VHOSTSCS", 8) == 0);
    g_assert_true(memcmp(buf + 16, "RAM DISK        ", 16) == 0);
    scsi_lun_free(lun);
}

static void test_inquiry_allocation_length_truncates(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t cdb[6] = { 0x12, 0, 0, 0, 5, 0 }, buf[64];
    struct result r;

    memset(buf, 0xee, sizeof(buf));
    r = RUN_IN(lun, cdb, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 5);
    g_assert_cmphex(buf[5], ==, 0xee);

    /* A buffer smaller than the allocation length gets what fits. */
    cdb[4] = 255;
    r = RUN_IN(lun, cdb, buf, 20);
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 20);
    g_assert_cmphex(buf[20], ==, 0xee);
    scsi_lun_free(lun);
}

static size_t vpd(struct scsi_lun *lun, uint8_t page, uint8_t *buf, size_t len)
{
    uint8_t cdb[6] = { 0x12, 0x01, page, len >> 8, (uint8_t)len, 0 };
    struct result r = RUN_IN(lun, cdb, buf, len);

    assert_good(&r);
    g_assert_cmphex(buf[0], ==, 0x00);
    g_assert_cmphex(buf[1], ==, page);
    g_assert_cmpuint(r.in_xfer, ==, MIN(len, be16(buf + 2) + 4u));
    return r.in_xfer;
}

static void test_inquiry_vpd_supported_pages(void)
{
    struct scsi_lun *lun = ram_lun();
    static const uint8_t want[] = { 0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2 };
    uint8_t buf[64];
    size_t n = vpd(lun, 0x00, buf, sizeof(buf));

    g_assert_cmpuint(n, ==, 4 + sizeof(want));
    g_assert_true(memcmp(buf + 4, want, sizeof(want)) == 0);
    scsi_lun_free(lun);
}

static void test_inquiry_vpd_identification(void)
{
    struct lun_backend *be;
    struct scsi_lun_info info = { .vendor = "ACME", .product = "Widget",
                                  .serial = "SER-42", .naa_id = 0x123456789abcdefULL };
    struct scsi_lun *lun;
    uint8_t buf[255], std[36];
    uint8_t inq[6] = { 0x12, 0, 0, 0, 36, 0 };
    struct result r;
    size_t n;

    g_assert_cmpint(backend_ram_new(MiB, 512, &be), ==, 0);
    lun = ready(scsi_lun_new(be, "test:ident", &info));

    r = RUN_IN(lun, inq, std, sizeof(std));
    assert_good(&r);
    g_assert_true(memcmp(std + 8, "ACME    ", 8) == 0);
    g_assert_true(memcmp(std + 16, "Widget          ", 16) == 0);

    n = vpd(lun, 0x80, buf, sizeof(buf));
    g_assert_cmpuint(n, ==, 4 + 6);
    g_assert_true(memcmp(buf + 4, "SER-42", 6) == 0);

    n = vpd(lun, 0x83, buf, sizeof(buf));
    /* First designator: NAA, binary, LUN association, 8 bytes, NAA=5. */
    g_assert_cmphex(buf[4] & 0x0f, ==, 0x01);
    g_assert_cmphex(buf[5] & 0x3f, ==, 0x03);
    g_assert_cmpuint(buf[7], ==, 8);
    g_assert_cmphex(be64(buf + 8), ==, 0x5123456789abcdefULL);
    /* Second: T10 vendor id, ASCII: vendor padded to 8, then the serial. */
    g_assert_cmphex(buf[16] & 0x0f, ==, 0x02);
    g_assert_cmphex(buf[17] & 0x0f, ==, 0x01);
    g_assert_cmpuint(buf[19], ==, 8 + 6);
    g_assert_true(memcmp(buf + 20, "ACME    SER-42", 14) == 0);
    g_assert_cmpuint(n, ==, 34);
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
    uint8_t inq[6] = { 0x12, 0, 0, 0, 36, 0 }, buf[36];
    struct result r;

    g_assert_cmpint(backend_ram_new(MiB, 512, &be), ==, 0);
    ops = *be->ops;
    ops.passthrough_inquiry = remote_inquiry;
    be->ops = &ops;
    lun = ready(scsi_lun_new(be, "test:remote", NULL));
    r = RUN_IN(lun, inq, buf, sizeof(buf));
    assert_good(&r);
    g_assert_true(memcmp(buf + 8, "REMOTE  Far Away Disk   ", 24) == 0);
    scsi_lun_free(lun);
}

static void test_inquiry_default_identity_is_stable(void)
{
    struct scsi_lun *a = ram_lun(), *b = ram_lun(), *c = ready(new_ram(MiB, 512));
    uint8_t pa[64] = { 0 }, pb[64] = { 0 };

    /* Same name, same identifiers; an NAA-5 id is always produced. */
    vpd(a, 0x83, pa, sizeof(pa));
    vpd(b, 0x83, pb, sizeof(pb));
    g_assert_cmphex(pa[8] >> 4, ==, 5);
    g_assert_true(memcmp(pa, pb, sizeof(pa)) == 0);
    vpd(c, 0x80, pa, sizeof(pa));
    g_assert_cmpuint(be16(pa + 2), >, 0);
    scsi_lun_free(a);
    scsi_lun_free(b);
    scsi_lun_free(c);
}

static void test_inquiry_vpd_block_limits(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[64];

    g_assert_cmpuint(vpd(lun, 0xb0, buf, sizeof(buf)), ==, 64);
    g_assert_cmpuint(be16(buf + 2), ==, 0x3c);
    g_assert_cmphex(buf[4] & 0x01, ==, 0x01);                  /* WSNZ */
    g_assert_cmpuint(be32(buf + 8), ==, 32 * MiB / 512);       /* max transfer */
    g_assert_cmpuint(be32(buf + 12), >, 0);                    /* optimal transfer */
    g_assert_cmpuint(be32(buf + 12), <=, be32(buf + 8));
    g_assert_cmpuint(be32(buf + 20), >, 0);                    /* max unmap LBAs */
    g_assert_cmpuint(be32(buf + 24), >, 0);                    /* max unmap descriptors */
    g_assert_cmpuint(be64(buf + 36), >, 0);                    /* max write same */
    scsi_lun_free(lun);
}

static void test_inquiry_vpd_characteristics_and_provisioning(void)
{
    struct scsi_lun *lun = ram_lun();
    struct lun_backend *be;
    struct scsi_lun *thick;
    uint8_t buf[64];

    vpd(lun, 0xb1, buf, sizeof(buf));
    g_assert_cmpuint(be16(buf + 4), ==, 1);                    /* non-rotating */

    vpd(lun, 0xb2, buf, sizeof(buf));
    g_assert_cmphex(buf[5] & 0xe0, ==, 0xe0);                  /* LBPU LBPWS LBPWS10 */
    g_assert_cmphex(buf[5] & 0x04, ==, 0x04);                  /* LBPRZ: ram zeroes */
    g_assert_cmphex(buf[6] & 0x07, ==, 0x02);                  /* thin */
    scsi_lun_free(lun);

    /* Without discard: nothing advertised, provisioning type full. */
    g_assert_cmpint(backend_ram_new(MiB, 512, &be), ==, 0);
    be->can_discard = false;
    thick = ready(scsi_lun_new(be, "test:thick", NULL));
    vpd(thick, 0xb2, buf, sizeof(buf));
    g_assert_cmphex(buf[5], ==, 0);
    g_assert_cmphex(buf[6] & 0x07, ==, 0);
    vpd(thick, 0xb0, buf, sizeof(buf));
    g_assert_cmpuint(be32(buf + 20), ==, 0);
    g_assert_cmpuint(be32(buf + 24), ==, 0);
    scsi_lun_free(thick);
}

static void test_inquiry_invalid_fields(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[255];
    uint8_t page_without_evpd[6] = { 0x12, 0x00, 0x80, 0, 255, 0 };
    uint8_t unknown_page[6] = { 0x12, 0x01, 0x89, 0, 255, 0 };
    uint8_t cmddt[6] = { 0x12, 0x02, 0x00, 0, 255, 0 };
    struct result r;

    r = RUN_IN(lun, page_without_evpd, buf, sizeof(buf));
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
    /* SKSV with C/D set: the field pointer names CDB byte 2. */
    g_assert_cmphex(r.sense[15] & 0xc0, ==, 0xc0);
    g_assert_cmpuint(be16(r.sense + 16), ==, 2);
    r = RUN_IN(lun, unknown_page, buf, sizeof(buf));
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
    g_assert_cmpuint(r.in_xfer, ==, 0);
    r = RUN_IN(lun, cmddt, buf, sizeof(buf));
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
    scsi_lun_free(lun);
}

/* ---- READ CAPACITY ----------------------------------------------------- */

static void check_capacity(uint64_t size, uint32_t bs, uint32_t want10)
{
    struct scsi_lun *lun = null_lun(size, bs);
    uint8_t rc10[10] = { 0x25 }, rc16[16] = { 0x9e, 0x10 }, buf[32];
    struct result r;

    r = RUN_IN(lun, rc10, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 8);
    g_assert_cmphex(be32(buf), ==, want10);
    g_assert_cmpuint(be32(buf + 4), ==, bs);

    put32(rc16 + 10, 32);
    r = RUN_IN(lun, rc16, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 32);
    g_assert_cmpuint(be64(buf), ==, size / bs - 1);
    g_assert_cmpuint(be32(buf + 8), ==, bs);
    g_assert_cmphex(buf[14] & 0x80, ==, 0x80);     /* LBPME: null can discard */
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
    uint8_t rc16[16] = { 0x9e, 0x10 }, bad_sa[16] = { 0x9e, 0x11 }, buf[32];
    struct result r;

    put32(rc16 + 10, 12);
    r = RUN_IN(lun, rc16, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 12);

    put32(bad_sa + 10, 32);
    r = RUN_IN(lun, bad_sa, buf, sizeof(buf));
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
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
    uint8_t w[4096], rd[4096], cdb[16];
    struct result r;

    /* WRITE(6) / READ(6) */
    fill_pattern(w, 1024, 1);
    uint8_t w6[6] = { 0x0a, 0x01, 0x02, 0x03, 2, 0 };   /* LBA 0x10203 */
    uint8_t r6[6] = { 0x08, 0x01, 0x02, 0x03, 2, 0 };
    r = RUN_OUT(lun, w6, w, 1024);
    assert_good(&r);
    g_assert_cmpuint(r.out_xfer, ==, 1024);
    r = RUN_IN(lun, r6, rd, 1024);
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 1024);
    g_assert_true(memcmp(w, rd, 1024) == 0);

    /* WRITE(10) / READ(16) on the same blocks: one medium. */
    fill_pattern(w, 4096, 2);
    cdb10(cdb, 0x2a, 0, 100, 8);
    r = run(lun, cdb, 10, w, 4096, NULL, 0);
    assert_good(&r);
    cdb16(cdb, 0x88, 0, 100, 8);
    r = run(lun, cdb, 16, NULL, 0, rd, 4096);
    assert_good(&r);
    g_assert_true(memcmp(w, rd, 4096) == 0);

    /* WRITE(12) / READ(12) at the last blocks of the LUN. */
    uint8_t w12[12] = { 0xaa }, r12[12] = { 0xa8 };
    uint32_t last = 64 * MiB / 512 - 2;
    fill_pattern(w, 1024, 3);
    put32(w12 + 2, last);
    put32(w12 + 6, 2);
    put32(r12 + 2, last);
    put32(r12 + 6, 2);
    r = RUN_OUT(lun, w12, w, 1024);
    assert_good(&r);
    r = RUN_IN(lun, r12, rd, 1024);
    assert_good(&r);
    g_assert_true(memcmp(w, rd, 1024) == 0);

    /* WRITE(16) / READ(10) */
    fill_pattern(w, 512, 4);
    cdb16(cdb, 0x8a, 0, 7, 1);
    r = run(lun, cdb, 16, w, 512, NULL, 0);
    assert_good(&r);
    cdb10(cdb, 0x28, 0, 7, 1);
    r = run(lun, cdb, 10, NULL, 0, rd, 512);
    assert_good(&r);
    g_assert_true(memcmp(w, rd, 512) == 0);
    scsi_lun_free(lun);
}

static void test_rw6_zero_length_means_256(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t r6[6] = { 0x08, 0, 0, 0, 0, 0 };
    g_autofree uint8_t *buf = g_malloc(256 * 512);
    struct result r;

    r = RUN_IN(lun, r6, buf, 256 * 512);
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 256 * 512);
    /* With a 255-block buffer the 256-block read is refused. */
    r = RUN_IN(lun, r6, buf, 255 * 512);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
    scsi_lun_free(lun);
}

static void test_rw10_zero_length_transfers_nothing(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t cdb[10];
    struct result r;

    cdb10(cdb, 0x28, 0, 5, 0);
    r = RUN(lun, cdb);
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 0);
    cdb10(cdb, 0x2a, 0, 5, 0);
    r = RUN(lun, cdb);
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_read_into_larger_scattered_buffer(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t w[12 * 512], rd[16][512], cdb[10];
    struct iovec iov[16];
    struct pending_cmd p;

    fill_pattern(w, sizeof(w), 5);
    cdb10(cdb, 0x2a, 0, 40, 12);
    struct result r = run(lun, cdb, 10, w, sizeof(w), NULL, 0);
    assert_good(&r);

    /* 16 pieces, 12 blocks wanted: more pieces than the command's slice array. */
    memset(rd, 0xee, sizeof(rd));
    for (int i = 0; i < 16; i++) {
        iov[i].iov_base = rd[i];
        iov[i].iov_len = 512;
    }
    cdb10(cdb, 0x28, 0, 40, 12);
    memset(&p, 0, sizeof(p));
    p.cmd.cdb = cdb;
    p.cmd.cdb_len = 10;
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

static void test_lba_out_of_range(void)
{
    struct scsi_lun *lun = ram_lun();
    uint64_t nb = 8 * MiB / 512;
    uint8_t cdb[16], buf[1024];
    struct result r;

    cdb16(cdb, 0x88, 0, nb - 1, 2);            /* runs one block past the end */
    r = run(lun, cdb, 16, NULL, 0, buf, 1024);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x21, 0x00);
    g_assert_cmpuint(r.in_xfer, ==, 0);

    cdb16(cdb, 0x88, 0, nb, 0);                /* zero length, LBA past the end */
    r = run(lun, cdb, 16, NULL, 0, NULL, 0);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x21, 0x00);

    cdb16(cdb, 0x88, 0, UINT64_MAX, 2);        /* LBA + length wraps 2^64 */
    r = run(lun, cdb, 16, NULL, 0, buf, 1024);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x21, 0x00);

    cdb16(cdb, 0x8a, 0, UINT64_MAX - 1, 2);
    r = run(lun, cdb, 16, buf, 1024, NULL, 0);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x21, 0x00);

    cdb16(cdb, 0x88, 0, nb - 2, 2);            /* exactly the last blocks: fine */
    r = run(lun, cdb, 16, NULL, 0, buf, 1024);
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_transfer_length_cap(void)
{
    struct scsi_lun *lun = null_lun(1ULL << 30, 512);
    uint32_t max = 32 * MiB / 512;
    g_autofree uint8_t *buf = g_malloc(32 * MiB + 512);
    uint8_t cdb[16];
    struct result r;

    cdb16(cdb, 0x88, 0, 0, max);
    r = run(lun, cdb, 16, NULL, 0, buf, 32 * MiB + 512);
    assert_good(&r);
    cdb16(cdb, 0x88, 0, 0, max + 1);
    r = run(lun, cdb, 16, NULL, 0, buf, 32 * MiB + 512);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
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
    uint8_t vbuf[64], cdb[16], blk[512];
    struct result r;

    lun = spy_lun_with(false, 64 * KiB, &s);
    g_assert_cmpuint(vpd(lun, 0xb0, vbuf, sizeof(vbuf)), ==, 64);
    g_assert_cmpuint(be32(vbuf + 8), ==, 128);                 /* max transfer, blocks */
    g_assert_cmpuint(be32(vbuf + 12), <=, 128);                /* optimal <= max */
    cdb16(cdb, 0x88, 0, 0, 128);
    r = run(lun, cdb, 16, NULL, 0, buf, 128 * KiB);
    assert_good(&r);
    cdb16(cdb, 0x88, 0, 0, 129);
    r = run(lun, cdb, 16, NULL, 0, buf, 128 * KiB);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
    memset(blk, 0xa5, sizeof(blk));
    cdb16(cdb, 0x93, 0, 0, 4000);                              /* WRITE SAME, 2 MB */
    r = run(lun, cdb, 16, blk, 512, NULL, 0);
    assert_good(&r);
    g_assert_cmpuint(s->max_len, ==, 64 * KiB);
    scsi_lun_free(lun);
}

static void test_short_buffers(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[1024 + 16], cdb[10];
    struct result r;

    /* A write whose data-out is shorter than the CDB says is refused. */
    cdb10(cdb, 0x2a, 0, 0, 2);
    r = run(lun, cdb, 10, buf, 512, NULL, 0);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
    g_assert_cmpuint(r.out_xfer, ==, 0);

    /* A read is refused rather than written past the buffer. */
    memset(buf, 0xee, sizeof(buf));
    cdb10(cdb, 0x28, 0, 0, 2);
    r = run(lun, cdb, 10, NULL, 0, buf, 512);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
    g_assert_cmpuint(r.in_xfer, ==, 0);
    g_assert_cmphex(buf[0], ==, 0xee);

    /* No buffer at all. */
    r = run(lun, cdb, 10, NULL, 0, NULL, 0);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
    scsi_lun_free(lun);
}

static void test_write_protected(void)
{
    struct lun_backend *be;
    struct scsi_lun *lun;
    uint8_t buf[512] = { 0 }, cdb[16];
    uint8_t ms[6] = { 0x1a, 0, 0x3f, 0, 255, 0 }, msbuf[255];
    struct result r;

    g_assert_cmpint(backend_ram_new(MiB, 512, &be), ==, 0);
    be->read_only = true;
    lun = ready(scsi_lun_new(be, "test:ro", NULL));

    cdb10(cdb, 0x2a, 0, 0, 1);
    r = run(lun, cdb, 10, buf, 512, NULL, 0);
    assert_sense(&r, SENSE_DATA_PROTECT, 0x27, 0x00);
    cdb16(cdb, 0x93, 0x08, 0, 1);              /* WRITE SAME(16) UNMAP */
    r = run(lun, cdb, 16, buf, 512, NULL, 0);
    assert_sense(&r, SENSE_DATA_PROTECT, 0x27, 0x00);
    cdb10(cdb, 0x28, 0, 0, 1);
    r = run(lun, cdb, 10, NULL, 0, buf, 512);
    assert_good(&r);

    /* MODE SENSE header: WP set in the device-specific parameter. */
    r = RUN_IN(lun, ms, msbuf, sizeof(msbuf));
    assert_good(&r);
    g_assert_cmphex(msbuf[2] & 0x80, ==, 0x80);
    scsi_lun_free(lun);
}

static void test_invalid_opcode_and_control_byte(void)
{
    struct scsi_lun *lun = ram_lun();
    static const uint8_t bogus[6] = { 0xc5 };
    static const uint8_t naca[6] = { 0x00, 0, 0, 0, 0, 0x04 };
    static const uint8_t short_cdb[6] = { 0x88 };
    struct result r;

    r = RUN(lun, bogus);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x20, 0x00);
    r = RUN(lun, naca);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
    /* A 16-byte opcode in a 6-byte CDB buffer must not be read past its end. */
    r = RUN(lun, short_cdb);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
    scsi_lun_free(lun);
}

static void test_null_backend(void)
{
    struct scsi_lun *lun = null_lun(MiB, 4096);
    uint8_t w[4096], rd[4096], cdb[10];
    struct result r;

    memset(w, 0x5a, sizeof(w));
    cdb10(cdb, 0x2a, 0, 3, 1);
    r = run(lun, cdb, 10, w, sizeof(w), NULL, 0);
    assert_good(&r);
    memset(rd, 0xee, sizeof(rd));
    cdb10(cdb, 0x28, 0, 3, 1);
    r = run(lun, cdb, 10, NULL, 0, rd, sizeof(rd));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 4096);
    for (size_t i = 0; i < sizeof(rd); i++) {
        g_assert_cmphex(rd[i], ==, 0);
    }
    scsi_lun_free(lun);
}

/* ---- FUA and the write cache ------------------------------------------- */

static void set_wce(struct scsi_lun *lun, bool on)
{
    uint8_t sense[6] = { 0x1a, 0x08, 0x08, 0, 255, 0 }, buf[255];
    uint8_t select[6] = { 0x15, 0x10, 0, 0, 0, 0 };
    struct result r = RUN_IN(lun, sense, buf, sizeof(buf));
    size_t len;

    assert_good(&r);
    len = r.in_xfer;
    /* Send the page back with WCE changed (header mode data length is reserved). */
    buf[0] = 0;
    buf[4] &= 0x7f;     /* PS is reserved in MODE SELECT */
    buf[6] = on ? (buf[6] | 0x04) : (buf[6] & ~0x04);
    select[4] = (uint8_t)len;
    r = run(lun, select, 6, buf, len, NULL, 0);
    assert_good(&r);
}

static bool get_wce(struct scsi_lun *lun)
{
    uint8_t sense[6] = { 0x1a, 0x08, 0x08, 0, 255, 0 }, buf[255];
    struct result r = RUN_IN(lun, sense, buf, sizeof(buf));

    assert_good(&r);
    g_assert_cmphex(buf[4], ==, 0x08);
    return buf[6] & 0x04;
}

static void test_fua_and_write_cache(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(true, &s);
    uint8_t w[512] = { 1 }, cdb[10];
    struct result r;

    g_assert_true(get_wce(lun));              /* initially the backend's cache */
    cdb10(cdb, 0x2a, 0, 0, 1);
    r = run(lun, cdb, 10, w, 512, NULL, 0);
    assert_good(&r);
    g_assert_cmpuint(s->plain_writes, ==, 1);
    cdb10(cdb, 0x2a, 0x08, 0, 1);             /* FUA */
    r = run(lun, cdb, 10, w, 512, NULL, 0);
    assert_good(&r);
    g_assert_cmpuint(s->fua_writes, ==, 1);
    cdb10(cdb, 0x2a, 0x10, 0, 1);             /* DPO alone: ignored */
    r = run(lun, cdb, 10, w, 512, NULL, 0);
    assert_good(&r);
    g_assert_cmpuint(s->plain_writes, ==, 2);

    /* Turning WCE off flushes the cache and makes every write FUA. */
    set_wce(lun, false);
    g_assert_false(get_wce(lun));
    g_assert_cmpuint(s->ops[BACKEND_FLUSH], ==, 1);
    cdb10(cdb, 0x2a, 0, 0, 1);
    r = run(lun, cdb, 10, w, 512, NULL, 0);
    assert_good(&r);
    g_assert_cmpuint(s->fua_writes, ==, 2);
    g_assert_cmpuint(s->plain_writes, ==, 2);

    /* WRITE SAME too: FUA copies, or a FLUSH after zeroing. */
    uint8_t ws[16], blk[512];
    memset(blk, 9, sizeof(blk));
    cdb16(ws, 0x93, 0, 0, 2);
    r = run(lun, ws, 16, blk, sizeof(blk), NULL, 0);
    assert_good(&r);
    g_assert_cmpuint(s->fua_writes, ==, 3);
    memset(blk, 0, sizeof(blk));
    r = run(lun, ws, 16, blk, sizeof(blk), NULL, 0);
    assert_good(&r);
    g_assert_cmpuint(s->ops[BACKEND_WRITE_ZEROES], ==, 1);
    g_assert_cmpuint(s->ops[BACKEND_FLUSH], ==, 2);

    set_wce(lun, true);
    g_assert_true(get_wce(lun));
    r = run(lun, cdb, 10, w, 512, NULL, 0);
    assert_good(&r);
    g_assert_cmpuint(s->plain_writes, ==, 3);

    /* SYNCHRONIZE CACHE(10) and (16) flush. */
    uint8_t sc10[10] = { 0x35 }, sc16[16] = { 0x91 };
    r = RUN(lun, sc10);
    assert_good(&r);
    r = RUN(lun, sc16);
    assert_good(&r);
    g_assert_cmpuint(s->ops[BACKEND_FLUSH], ==, 4);
    scsi_lun_free(lun);
}

static void test_sync_cache_range(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t cdb[16];
    struct result r;

    cdb16(cdb, 0x91, 0, 8 * MiB / 512, 0);
    r = run(lun, cdb, 16, NULL, 0, NULL, 0);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x21, 0x00);
    cdb10(cdb, 0x35, 0x02, 10, 20);           /* IMMED, a range */
    r = run(lun, cdb, 10, NULL, 0, NULL, 0);
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_start_stop_and_prevent_allow(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(true, &s);
    uint8_t stop[6] = { 0x1b, 0, 0, 0, 0x00, 0 }, start[6] = { 0x1b, 0, 0, 0, 0x01, 0 };
    uint8_t prevent[6] = { 0x1e, 0, 0, 0, 0x01, 0 }, allow[6] = { 0x1e };
    struct result r;

    r = RUN(lun, stop);
    assert_good(&r);
    g_assert_cmpuint(s->ops[BACKEND_FLUSH], ==, 1);   /* stopping writes the cache back */
    r = RUN(lun, start);
    assert_good(&r);
    r = RUN(lun, prevent);
    assert_good(&r);
    r = RUN(lun, allow);
    assert_good(&r);
    scsi_lun_free(lun);
}

/* ---- MODE SENSE / MODE SELECT ----------------------------------------- */

static void test_mode_sense_pages(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[255];
    uint8_t all6[6] = { 0x1a, 0, 0x3f, 0, 255, 0 };
    struct result r = RUN_IN(lun, all6, buf, sizeof(buf));

    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, buf[0] + 1u);
    g_assert_cmphex(buf[2] & 0x90, ==, 0x10);       /* DPOFUA, not WP */
    g_assert_cmpuint(buf[3], ==, 8);                /* short block descriptor */
    g_assert_cmpuint(be32(buf + 4), ==, 8 * MiB / 512);
    g_assert_cmpuint(be32(buf + 8) & 0xffffff, ==, 512);
    /* Pages in ascending order: caching (08h, 18 bytes), control (0Ah, 10). */
    g_assert_cmphex(buf[12], ==, 0x08);
    g_assert_cmpuint(buf[13], ==, 0x12);
    g_assert_cmphex(buf[32], ==, 0x0a);
    g_assert_cmpuint(buf[33], ==, 0x0a);
    g_assert_cmpuint(r.in_xfer, ==, 4 + 8 + 20 + 12);

    /* DBD drops the block descriptor. */
    all6[1] = 0x08;
    r = RUN_IN(lun, all6, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(buf[3], ==, 0);
    g_assert_cmphex(buf[4], ==, 0x08);

    /* MODE SENSE(10) with LLBAA: 16-byte descriptor, LONGLBA set. */
    uint8_t ms10[10] = { 0x5a, 0x10, 0x0a, 0, 0, 0, 0, 0, 255, 0 };
    r = RUN_IN(lun, ms10, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(be16(buf), ==, r.in_xfer - 2);
    g_assert_cmphex(buf[4] & 0x01, ==, 0x01);
    g_assert_cmpuint(be16(buf + 6), ==, 16);
    g_assert_cmpuint(be64(buf + 8), ==, 8 * MiB / 512);
    g_assert_cmpuint(be32(buf + 20), ==, 512);
    g_assert_cmphex(buf[24], ==, 0x0a);
    scsi_lun_free(lun);
}

static void test_mode_sense_page_control(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t cdb[6] = { 0x1a, 0x08, 0x08, 0, 255, 0 }, buf[255];
    struct result r;

    cdb[2] = 0x40 | 0x08;                       /* changeable: only WCE */
    r = RUN_IN(lun, cdb, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmphex(buf[6], ==, 0x04);
    for (int i = 7; i < 24; i++) {
        g_assert_cmphex(buf[i], ==, 0);
    }
    cdb[2] = 0x80 | 0x08;                       /* default: the backend's cache (none) */
    r = RUN_IN(lun, cdb, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmphex(buf[6] & 0x04, ==, 0);
    cdb[2] = 0xc0 | 0x08;                       /* saved */
    r = RUN_IN(lun, cdb, buf, sizeof(buf));
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x39, 0x00);
    scsi_lun_free(lun);
}

static void test_mode_sense_invalid(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[255];
    uint8_t bad_page[6] = { 0x1a, 0, 0x1c, 0, 255, 0 };
    uint8_t bad_subpage[6] = { 0x1a, 0, 0x08, 0x01, 255, 0 };
    uint8_t all_subpages[6] = { 0x1a, 0, 0x3f, 0xff, 255, 0 };
    struct result r;

    r = RUN_IN(lun, bad_page, buf, sizeof(buf));
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
    r = RUN_IN(lun, bad_subpage, buf, sizeof(buf));
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
    r = RUN_IN(lun, all_subpages, buf, sizeof(buf));
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

static void test_mode_select_block_descriptor(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t sense[6] = { 0x1a, 0x00, 0x08, 0, 255, 0 }, p[255];
    uint8_t sel[6] = { 0x15, 0x10, 0, 0, 0, 0 };
    struct result r = RUN_IN(lun, sense, p, sizeof(p));
    size_t len = r.in_xfer;

    /* MODE SENSE without DBD: header, 8-byte descriptor, caching page. */
    assert_good(&r);
    g_assert_cmpuint(len, ==, 4 + 8 + 20);
    p[0] = 0;
    p[12 + 2] |= 0x04;
    sel[4] = (uint8_t)len;
    r = run(lun, sel, 6, p, len, NULL, 0);
    assert_good(&r);
    g_assert_true(get_wce(lun));

    /* The block length cannot be changed. */
    p[4 + 6] = 0x10;        /* 4096 */
    p[4 + 7] = 0x00;
    r = run(lun, sel, 6, p, len, NULL, 0);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x26, 0x00);

    /* A descriptor length that is neither 0 nor 8. */
    p[4 + 6] = 0x02;
    p[3] = 4;
    r = run(lun, sel, 6, p, len, NULL, 0);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x26, 0x00);
    scsi_lun_free(lun);
}

static void test_mode_select_invalid(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t sense[10] = { 0x5a, 0x08, 0x08, 0, 0, 0, 0, 0, 255, 0 }, page[255], p[255];
    uint8_t sel[10] = { 0x55, 0x10, 0, 0, 0, 0, 0, 0, 0, 0 };
    struct result r = RUN_IN(lun, sense, page, sizeof(page));
    size_t len = r.in_xfer;

    assert_good(&r);
    g_assert_cmpuint(len, ==, 8 + 20);
    page[0] = page[1] = 0;
    sel[8] = (uint8_t)len;

    /* A byte that is not changeable (RCD in the caching page). */
    memcpy(p, page, len);
    p[10] |= 0x01;
    r = run(lun, sel, 10, p, len, NULL, 0);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x26, 0x00);
    g_assert_cmphex(r.sense[15] & 0xc0, ==, 0x80);   /* SKSV, parameter list */
    g_assert_cmpuint(be16(r.sense + 16), ==, 10);

    /* Wrong page length. */
    memcpy(p, page, len);
    p[9] = 0x10;
    r = run(lun, sel, 10, p, len, NULL, 0);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x26, 0x00);

    /* Unknown page. */
    memcpy(p, page, len);
    p[8] = 0x1c;
    r = run(lun, sel, 10, p, len, NULL, 0);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x26, 0x00);

    /* Page runs past the parameter list. */
    sel[8] = (uint8_t)(len - 4);
    r = run(lun, sel, 10, page, len, NULL, 0);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x26, 0x00);

    /* Parameter list shorter than the header. */
    sel[8] = 3;
    r = run(lun, sel, 10, page, len, NULL, 0);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x1a, 0x00);

    /* Data-out shorter than the parameter list length. */
    sel[8] = (uint8_t)len;
    r = run(lun, sel, 10, page, len - 1, NULL, 0);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);

    /* SP: saving pages is not supported. */
    sel[1] = 0x11;
    r = run(lun, sel, 10, page, len, NULL, 0);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);

    /* Nothing changed. */
    g_assert_false(get_wce(lun));
    scsi_lun_free(lun);
}

/* ---- VERIFY, WRITE AND VERIFY ------------------------------------------ */

static void test_verify(void)
{
    struct scsi_lun *lun = ram_lun();
    g_autofree uint8_t *w = g_malloc(3000 * 512);
    uint8_t cdb[16];
    struct result r;

    fill_pattern(w, 3000 * 512, 9);
    cdb16(cdb, 0x8a, 0, 1000, 3000);
    r = run(lun, cdb, 16, w, 3000 * 512, NULL, 0);
    assert_good(&r);

    /* BYTCHK=0: range check only. */
    cdb10(cdb, 0x2f, 0, 1000, 3000);
    r = run(lun, cdb, 10, NULL, 0, NULL, 0);
    assert_good(&r);
    cdb10(cdb, 0x2f, 0, 8 * MiB / 512, 1);
    r = run(lun, cdb, 10, NULL, 0, NULL, 0);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x21, 0x00);

    /* BYTCHK=1: compares across more than one bounce chunk. */
    cdb16(cdb, 0x8f, 0x02, 1000, 3000);
    r = run(lun, cdb, 16, w, 3000 * 512, NULL, 0);
    assert_good(&r);
    g_assert_cmpuint(r.out_xfer, ==, 3000 * 512);

    /* A mismatch in the second chunk: MISCOMPARE, INFORMATION = its offset. */
    w[2500 * 512 + 17] ^= 0xff;
    r = run(lun, cdb, 16, w, 3000 * 512, NULL, 0);
    assert_sense(&r, SENSE_MISCOMPARE, 0x1d, 0x00);
    g_assert_cmphex(r.sense[0] & 0x80, ==, 0x80);
    g_assert_cmpuint(be32(r.sense + 3), ==, 2500 * 512 + 17);

    /* Data-out shorter than the range. */
    r = run(lun, cdb, 16, w, 512, NULL, 0);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);

    /* BYTCHK=3: one block compared against each block of the range. */
    uint8_t blk[512];
    memset(blk, 0x77, sizeof(blk));
    uint8_t ws[10];
    cdb10(ws, 0x41, 0, 50, 10);
    r = run(lun, ws, 10, blk, 512, NULL, 0);
    assert_good(&r);
    cdb10(cdb, 0x2f, 0x06, 50, 10);
    r = run(lun, cdb, 10, blk, 512, NULL, 0);
    assert_good(&r);
    cdb10(cdb, 0x2f, 0x06, 50, 11);
    r = run(lun, cdb, 10, blk, 512, NULL, 0);
    assert_sense(&r, SENSE_MISCOMPARE, 0x1d, 0x00);

    /* BYTCHK=2 is reserved. */
    cdb10(cdb, 0x2f, 0x04, 50, 1);
    r = run(lun, cdb, 10, blk, 512, NULL, 0);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
    scsi_lun_free(lun);
}

static void test_write_and_verify(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(true, &s);
    uint8_t w[1024], rd[1024], cdb[16];
    struct result r;

    fill_pattern(w, sizeof(w), 11);
    cdb10(cdb, 0x2e, 0x02, 20, 2);             /* BYTCHK=1 */
    r = run(lun, cdb, 10, w, sizeof(w), NULL, 0);
    assert_good(&r);
    cdb16(cdb, 0x8e, 0x00, 22, 2);
    r = run(lun, cdb, 16, w, sizeof(w), NULL, 0);
    assert_good(&r);
    g_assert_cmpuint(s->fua_writes, ==, 2);     /* verified means on the medium */
    cdb16(cdb, 0x88, 0, 22, 2);
    r = run(lun, cdb, 16, NULL, 0, rd, sizeof(rd));
    assert_good(&r);
    g_assert_true(memcmp(w, rd, sizeof(w)) == 0);
    cdb10(cdb, 0x2e, 0x06, 20, 2);             /* BYTCHK=3: not for this command */
    r = run(lun, cdb, 10, w, sizeof(w), NULL, 0);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
    scsi_lun_free(lun);
}

/* ---- WRITE SAME -------------------------------------------------------- */

static void read_blocks(struct scsi_lun *lun, uint64_t lba, uint32_t n, uint8_t *buf)
{
    uint8_t cdb[16];
    struct result r;

    cdb16(cdb, 0x88, 0, lba, n);
    r = run(lun, cdb, 16, NULL, 0, buf, (size_t)n * 512);
    assert_good(&r);
}

static void test_write_same_replicates_block(void)
{
    struct scsi_lun *lun = ram_lun();
    const uint32_t n = 5000;                  /* > one 1 MiB bounce chunk */
    g_autofree uint8_t *rd = g_malloc((n + 2) * 512);
    uint8_t blk[512], cdb[16];
    struct result r;

    fill_pattern(blk, sizeof(blk), 13);
    cdb16(cdb, 0x93, 0, 100, n);
    r = run(lun, cdb, 16, blk, sizeof(blk), NULL, 0);
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
    cdb10(cdb, 0x41, 0, 7, 3);
    r = run(lun, cdb, 10, blk, sizeof(blk), NULL, 0);
    assert_good(&r);
    read_blocks(lun, 7, 3, rd);
    g_assert_true(memcmp(rd + 1024, blk, 512) == 0);
    scsi_lun_free(lun);
}

static void test_write_same_zeroes_and_unmap(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(false, &s);
    uint8_t blk[512], zero[512] = { 0 }, cdb[16], rd[4 * 512];
    struct result r;

    memset(blk, 0x3c, sizeof(blk));
    cdb16(cdb, 0x93, 0, 10, 4);
    r = run(lun, cdb, 16, blk, sizeof(blk), NULL, 0);
    assert_good(&r);

    /* UNMAP bit with zero data: one WRITE ZEROES, no data written. */
    unsigned writes = s->ops[BACKEND_WRITE];
    cdb16(cdb, 0x93, 0x08, 10, 2);
    r = run(lun, cdb, 16, zero, sizeof(zero), NULL, 0);
    assert_good(&r);
    g_assert_cmpuint(s->ops[BACKEND_WRITE_ZEROES], ==, 1);
    g_assert_cmpuint(s->ops[BACKEND_WRITE], ==, writes);
    read_blocks(lun, 10, 4, rd);
    g_assert_cmphex(rd[0], ==, 0);
    g_assert_cmphex(rd[1023], ==, 0);
    g_assert_cmphex(rd[1024], ==, 0x3c);

    /* NDOB: no data-out buffer, zeros. */
    cdb16(cdb, 0x93, 0x09, 12, 2);
    r = run(lun, cdb, 16, NULL, 0, NULL, 0);
    assert_good(&r);
    read_blocks(lun, 10, 4, rd);
    g_assert_cmphex(rd[1024], ==, 0);
    g_assert_cmphex(rd[2047], ==, 0);
    scsi_lun_free(lun);
}

static void test_write_same_invalid(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t blk[512] = { 1 }, cdb[16];
    struct result r;

    cdb16(cdb, 0x93, 0, 0, 0);                 /* WSNZ: zero length refused */
    r = run(lun, cdb, 16, blk, 512, NULL, 0);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
    cdb16(cdb, 0x93, 0, 8 * MiB / 512 - 1, 2);
    r = run(lun, cdb, 16, blk, 512, NULL, 0);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x21, 0x00);
    cdb16(cdb, 0x93, 0, 0, 1);                 /* no data-out */
    r = run(lun, cdb, 16, blk, 100, NULL, 0);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
    cdb16(cdb, 0x93, 0x10, 0, 1);              /* ANCHOR */
    r = run(lun, cdb, 16, blk, 512, NULL, 0);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
    scsi_lun_free(lun);
}

/* ---- UNMAP ------------------------------------------------------------- */

static size_t unmap_list(uint8_t *p, const uint64_t (*d)[2], unsigned n)
{
    memset(p, 0, 8 + 16 * n);
    p[0] = (6 + 16 * n) >> 8;
    p[1] = (uint8_t)(6 + 16 * n);
    p[2] = (16 * n) >> 8;
    p[3] = (uint8_t)(16 * n);
    for (unsigned i = 0; i < n; i++) {
        put64(p + 8 + 16 * i, d[i][0]);
        put32(p + 16 + 16 * i, (uint32_t)d[i][1]);
    }
    return 8 + 16 * n;
}

static struct result unmap(struct scsi_lun *lun, const uint8_t *list, size_t plen, size_t buflen)
{
    uint8_t cdb[10] = { 0x42 };

    cdb[7] = plen >> 8;
    cdb[8] = (uint8_t)plen;
    return run(lun, cdb, 10, list, buflen, NULL, 0);
}

static void test_unmap_then_read_zeros(void)
{
    struct scsi_lun *lun = ram_lun();
    g_autofree uint8_t *w = g_malloc(64 * 512);
    g_autofree uint8_t *rd = g_malloc(64 * 512);
    static const uint64_t d[][2] = { { 8, 16 }, { 40, 3 }, { 60, 0 } };
    uint8_t list[8 + 16 * 3], cdb[16];
    size_t plen = unmap_list(list, d, 3);
    struct result r;

    memset(w, 0xab, 64 * 512);
    cdb16(cdb, 0x8a, 0, 0, 64);
    r = run(lun, cdb, 16, w, 64 * 512, NULL, 0);
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
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x26, 0x00);

    /* UNMAP DATA LENGTH does not cover the descriptors. */
    memcpy(bad, list, plen);
    bad[1] = 6;
    r = unmap(lun, bad, plen, plen);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x26, 0x00);

    /* A parameter list too short for the header. */
    r = unmap(lun, list, 7, plen);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x1a, 0x00);

    /* Data-out shorter than the parameter list length. */
    r = unmap(lun, list, plen, plen - 1);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);

    /* A descriptor beyond the capacity. */
    static const uint64_t far[][2] = { { 8 * MiB / 512 - 1, 2 } };
    plen = unmap_list(bad, far, 1);
    r = unmap(lun, bad, plen, plen);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x21, 0x00);
    static const uint64_t wrap[][2] = { { UINT64_MAX, 2 } };
    plen = unmap_list(bad, wrap, 1);
    r = unmap(lun, bad, plen, plen);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x21, 0x00);

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
    struct result r;

    vpd(lun, 0xb0, vpd_b0, sizeof(vpd_b0));
    max_lbas = be32(vpd_b0 + 20);
    max_descs = be32(vpd_b0 + 24);

    /* One descriptor too many. */
    g_autofree uint64_t (*d)[2] = g_malloc0_n(max_descs + 1, sizeof(*d));
    g_autofree uint8_t *list = g_malloc(8 + 16 * (max_descs + 1));
    for (uint32_t i = 0; i <= max_descs; i++) {
        d[i][0] = i;
        d[i][1] = 1;
    }
    size_t plen = unmap_list(list, (const uint64_t (*)[2])d, max_descs + 1);
    r = unmap(lun, list, plen, plen);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x26, 0x00);
    plen = unmap_list(list, (const uint64_t (*)[2])d, max_descs);
    r = unmap(lun, list, plen, plen);
    assert_good(&r);

    /* More LBAs than the advertised maximum, split over two descriptors. */
    const uint64_t big[2][2] = { { 0, max_lbas }, { (uint64_t)max_lbas + 10, 1 } };
    plen = unmap_list(list, big, 2);
    r = unmap(lun, list, plen, plen);
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x26, 0x00);
    plen = unmap_list(list, big, 1);
    r = unmap(lun, list, plen, plen);
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_unmap_partial_descriptor_ignored(void)
{
    struct scsi_lun *lun = ram_lun();
    static const uint64_t d[][2] = { { 4, 1 }, { 5, 1 } };
    uint8_t list[8 + 32], cdb[16], blk[512], rd[2 * 512];
    size_t plen = unmap_list(list, d, 2);
    struct result r;

    memset(blk, 0x11, sizeof(blk));
    cdb16(cdb, 0x93, 0, 4, 2);
    r = run(lun, cdb, 16, blk, 512, NULL, 0);
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
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x20, 0x00);
    scsi_lun_free(lun);
}

/* ---- REPORT SUPPORTED OPERATION CODES ---------------------------------- */

static struct result rsoc(struct scsi_lun *lun, uint8_t options, uint8_t op, uint16_t sa,
                          uint8_t *buf, uint32_t len)
{
    uint8_t cdb[12] = { 0xa3, 0x0c, options, op, sa >> 8, (uint8_t)sa };

    put32(cdb + 6, len);
    return RUN_IN(lun, cdb, buf, len);
}

static const uint8_t *find_descriptor(const uint8_t *buf, size_t n, uint8_t op, uint16_t sa,
                                      size_t stride)
{
    for (size_t off = 4; off + 8 <= n; off += stride) {
        if (buf[off] == op && (!(buf[off + 5] & 1) || be16(buf + off + 2) == sa)) {
            return buf + off;
        }
    }
    return NULL;
}

static void test_rsoc_all(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[2048];
    struct result r = rsoc(lun, 0, 0, 0, buf, sizeof(buf));
    const uint8_t *d;

    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, be32(buf) + 4u);
    g_assert_cmpuint(be32(buf) % 8, ==, 0);
    d = find_descriptor(buf, r.in_xfer, 0x88, 0, 8);
    g_assert_nonnull(d);
    g_assert_cmpuint(be16(d + 6), ==, 16);
    d = find_descriptor(buf, r.in_xfer, 0x9e, 0x10, 8);
    g_assert_nonnull(d);
    g_assert_cmphex(d[5] & 0x01, ==, 0x01);          /* SERVACTV */
    g_assert_nonnull(find_descriptor(buf, r.in_xfer, 0x42, 0, 8));     /* UNMAP */
    g_assert_null(find_descriptor(buf, r.in_xfer, 0xc5, 0, 8));

    /* RCTD: every descriptor carries a 12-byte timeouts descriptor. */
    r = rsoc(lun, 0x80, 0, 0, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(be32(buf) % 20, ==, 0);
    d = find_descriptor(buf, r.in_xfer, 0x88, 0, 20);
    g_assert_nonnull(d);
    g_assert_cmphex(d[5] & 0x02, ==, 0x02);          /* CTDP */
    g_assert_cmpuint(be16(d + 8), ==, 10);
    scsi_lun_free(lun);
}

static void test_rsoc_one(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[64];
    struct result r;

    r = rsoc(lun, 1, 0x88, 0, buf, sizeof(buf));      /* READ(16) */
    assert_good(&r);
    g_assert_cmphex(buf[1] & 0x07, ==, 0x03);         /* supported, standard */
    g_assert_cmpuint(be16(buf + 2), ==, 16);
    g_assert_cmpuint(r.in_xfer, ==, 4 + 16);
    g_assert_cmphex(buf[4], ==, 0x88);                /* usage data: opcode first */
    g_assert_cmphex(buf[5] & 0x08, ==, 0x08);         /* FUA is looked at */

    r = rsoc(lun, 1, 0xc5, 0, buf, sizeof(buf));      /* not supported */
    assert_good(&r);
    g_assert_cmphex(buf[1] & 0x07, ==, 0x01);
    g_assert_cmpuint(r.in_xfer, ==, 4);

    r = rsoc(lun, 2, 0x9e, 0x10, buf, sizeof(buf));   /* READ CAPACITY(16) */
    assert_good(&r);
    g_assert_cmphex(buf[1] & 0x07, ==, 0x03);
    g_assert_cmphex(buf[4], ==, 0x9e);
    g_assert_cmphex(buf[5], ==, 0x10);

    r = rsoc(lun, 0x81, 0x93, 0, buf, sizeof(buf));   /* WRITE SAME(16), RCTD */
    assert_good(&r);
    g_assert_cmphex(buf[1], ==, 0x83);
    g_assert_cmpuint(r.in_xfer, ==, 4 + 16 + 12);

    /* Option 1 on a command with service actions, option 2 on one without. */
    r = rsoc(lun, 1, 0x9e, 0, buf, sizeof(buf));
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
    r = rsoc(lun, 2, 0x88, 0, buf, sizeof(buf));
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
    r = rsoc(lun, 5, 0x88, 0, buf, sizeof(buf));
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
    scsi_lun_free(lun);
}

static void test_rsoc_follows_backend(void)
{
    struct lun_backend *be;
    struct scsi_lun *lun;
    uint8_t buf[2048];
    struct result r;

    g_assert_cmpint(backend_ram_new(MiB, 512, &be), ==, 0);
    be->can_discard = false;
    lun = ready(scsi_lun_new(be, "test:thick", NULL));
    /* No discard, no UNMAP: neither listed nor reported as supported. */
    r = rsoc(lun, 1, 0x42, 0, buf, 64);
    assert_good(&r);
    g_assert_cmphex(buf[1] & 0x07, ==, 0x01);
    r = rsoc(lun, 0, 0, 0, buf, sizeof(buf));
    assert_good(&r);
    g_assert_null(find_descriptor(buf, r.in_xfer, 0x42, 0, 8));
    g_assert_nonnull(find_descriptor(buf, r.in_xfer, 0x93, 0, 8));
    scsi_lun_free(lun);
}

/* ---- backend errors ---------------------------------------------------- */

static void test_backend_errors(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(false, &s);
    uint8_t buf[512] = { 0 }, cdb[10];
    struct result r;

    s->fail_op = BACKEND_READ;
    s->fail_ret = -EIO;
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "test:spy: read at byte 512 failed*");
    cdb10(cdb, 0x28, 0, 1, 1);
    r = run(lun, cdb, 10, NULL, 0, buf, 512);
    g_test_assert_expected_messages();
    assert_sense(&r, SENSE_MEDIUM_ERROR, 0x11, 0x00);
    g_assert_cmpuint(r.in_xfer, ==, 0);

    s->fail_op = BACKEND_WRITE;
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*write*failed*");
    cdb10(cdb, 0x2a, 0, 1, 1);
    r = run(lun, cdb, 10, buf, 512, NULL, 0);
    g_test_assert_expected_messages();
    assert_sense(&r, SENSE_MEDIUM_ERROR, 0x0c, 0x00);

    s->fail_ret = -ENOSPC;
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*write*failed*");
    r = run(lun, cdb, 10, buf, 512, NULL, 0);
    g_test_assert_expected_messages();
    assert_sense(&r, SENSE_DATA_PROTECT, 0x27, 0x07);

    /* A remote device's sense is passed through as it is. */
    s->fail_op = BACKEND_READ;
    s->fail_ret = -EREMOTEIO;
    cdb10(cdb, 0x28, 0, 1, 1);
    r = run(lun, cdb, 10, NULL, 0, buf, 512);
    assert_sense(&r, SENSE_MEDIUM_ERROR, 0x11, 0x04);

    /*
     * A remote status that is itself the answer: another initiator's
     * reservation is RESERVATION CONFLICT, not a medium error to retry.
     */
    s->fail_op = BACKEND_WRITE;
    s->fail_status = SAM_STAT_RESERVATION_CONFLICT;
    cdb10(cdb, 0x2a, 0, 1, 1);
    r = run(lun, cdb, 10, buf, 512, NULL, 0);
    g_assert_cmphex(r.status, ==, SAM_STAT_RESERVATION_CONFLICT);
    g_assert_cmpuint(r.sense_len, ==, 0);
    s->fail_status = 0;

    /* Transient: BUSY, no sense, nothing logged as an error. */
    s->fail_op = BACKEND_WRITE;
    cdb10(cdb, 0x2a, 0, 1, 1);
    s->fail_ret = -EAGAIN;
    r = run(lun, cdb, 10, buf, 512, NULL, 0);
    g_assert_cmphex(r.status, ==, SAM_STAT_BUSY);
    g_assert_cmpuint(r.sense_len, ==, 0);

    /* An error in the middle of a multi-request command ends it once. */
    s->fail_op = BACKEND_WRITE;
    s->fail_ret = -EIO;
    uint8_t ws[16], blk[512];
    memset(blk, 1, sizeof(blk));
    cdb16(ws, 0x93, 0, 0, 4000);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*write*failed*");
    r = run(lun, ws, 16, blk, 512, NULL, 0);
    g_test_assert_expected_messages();
    assert_sense(&r, SENSE_MEDIUM_ERROR, 0x0c, 0x00);
    g_assert_cmpuint(scsi_lun_inflight(lun), ==, 0);
    scsi_lun_free(lun);
}

/* ---- asynchronous completion and drain --------------------------------- */

static void test_async_multi_request_commands(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(false, &s);
    uint8_t blk[512], cdb[16];
    g_autofree uint8_t *rd = g_malloc(4000 * 512);
    struct pending_cmd p;
    unsigned rounds = 0;

    fill_pattern(blk, sizeof(blk), 21);
    s->defer = true;
    cdb16(cdb, 0x93, 0, 0, 4000);               /* two bounce chunks */
    start(&p, lun, cdb, 16, blk, sizeof(blk), NULL, 0);
    g_assert_cmpint(p.completions, ==, 0);
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
    uint8_t cdb[10];

    cdb10(cdb, 0x28, 0, lba, 1);
    start(p, lun, cdb, 10, NULL, 0, buf, 512);
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
    uint8_t cdb[10];

    tls_parker = w;
    g_queue_init(&w->parked);
    for (unsigned i = 0; !atomic_load(&stress_stop); i++) {
        struct pending_cmd *p = &w->cmds[i % STRESS_DEPTH];

        if (g_queue_get_length(&w->parked) == STRESS_DEPTH) {
            parker_complete_oldest(w);          /* frees p's slot: it is the oldest */
        }
        cdb10(cdb, 0x28, 0, w->id * 64 + i % STRESS_DEPTH, 1);
        memset(p, 0, sizeof(*p));
        p->in.iov_base = w->buf[i % STRESS_DEPTH];
        p->in.iov_len = 512;
        p->cmd.data_in = &p->in;
        p->cmd.data_in_cnt = 1;
        p->cmd.cdb = cdb;
        p->cmd.cdb_len = 10;
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
    uint8_t wbuf[1024], rbuf[1024], cdb[10];

    for (unsigned i = 0; i < 2000; i++) {
        uint32_t lba = w->id * 4096 + (i % 2000) * 2;
        struct pending_cmd p;

        fill_pattern(wbuf, sizeof(wbuf), w->id * 7919 + i);
        cdb10(cdb, 0x2a, 0, lba, 2);
        start(&p, w->lun, cdb, 10, wbuf, sizeof(wbuf), NULL, 0);
        g_assert_cmpint(p.completions, ==, 1);
        if (p.cmd.status == SAM_STAT_CHECK_CONDITION) {
            g_assert_cmphex(p.cmd.sense[2], ==, SENSE_UNIT_ATTENTION);
            w->ua_seen++;
            continue;
        }
        g_assert_cmphex(p.cmd.status, ==, SAM_STAT_GOOD);
        cdb10(cdb, 0x28, 0, lba, 2);
        start(&p, w->lun, cdb, 10, NULL, 0, rbuf, sizeof(rbuf));
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
    static const uint8_t ops[] = { 0x00, 0x03, 0x08, 0x0a, 0x12, 0x15, 0x1a, 0x1b, 0x1e,
                                   0x25, 0x28, 0x2a, 0x2e, 0x2f, 0x35, 0x41, 0x42, 0x55,
                                   0x5a, 0x88, 0x8a, 0x8e, 0x8f, 0x91, 0x93, 0x9e, 0xa0,
                                   0xa3, 0xa8, 0xaa };
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
        start(&p, lun, cdb, g_test_rand_int_range(1, 17), out_len ? out : NULL, out_len,
              in_len ? in : NULL, in_len);
        g_assert_cmpint(p.completions, ==, 1);
        g_assert_cmpuint(p.cmd.data_in_xfer, <=, in_len);
        g_assert_cmpuint(p.cmd.data_out_xfer, <=, out_len);
        switch (p.cmd.status) {
        case SAM_STAT_GOOD:
            g_assert_cmpuint(p.cmd.sense_len, ==, 0);
            break;
        case SAM_STAT_CHECK_CONDITION:
            g_assert_cmpuint(p.cmd.sense_len, ==, 18);
            g_assert_cmphex(p.cmd.sense[0] & 0x7f, ==, 0x70);
            g_assert_cmpuint(p.cmd.sense[7], ==, 10);
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
