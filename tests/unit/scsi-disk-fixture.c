/*
 * The SCSI disk emulation tests' harness (scsi-disk-fixture.h): running
 * CDBs on a LUN, the sense checks, the ram, null and spy LUNs.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>

#include <glib.h>

#include "backend.h"
#include "scsi-cmd.h"
#include "scsi-disk.h"
#include "scsi-disk-fixture.h"

void count_completion(struct scsi_cmd *cmd)
{
    struct pending_cmd *p = cmd->opaque;

    p->completions++;
}

void prepare_cdb(struct pending_cmd *p, struct scsi_ua_state *ua, const uint8_t *cdb,
                 unsigned cdb_len, const void *out, size_t out_len, void *in, size_t in_len)
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
}

void start_cdb(struct pending_cmd *p, struct scsi_lun *lun, struct scsi_ua_state *ua,
               const uint8_t *cdb, unsigned cdb_len, const void *out, size_t out_len,
               void *in, size_t in_len)
{
    prepare_cdb(p, ua, cdb, cdb_len, out, out_len, in, in_len);
    scsi_lun_exec(lun, &p->cmd);
}

void start_as(struct pending_cmd *p, struct scsi_lun *lun, struct scsi_ua_state *ua,
              struct scsi_task *task, const void *out, size_t out_len, void *in,
              size_t in_len)
{
    unsigned n = sc_cdb(task, p->cdb);

    start_cdb(p, lun, ua, p->cdb, n, out, out_len, in, in_len);
}

void start(struct pending_cmd *p, struct scsi_lun *lun, struct scsi_task *task,
           const void *out, size_t out_len, void *in, size_t in_len)
{
    start_as(p, lun, NULL, task, out, out_len, in, in_len);
}

struct result result_of(const struct scsi_cmd *cmd)
{
    struct result r = { .status = cmd->status, .sense_len = cmd->sense_len,
                        .in_xfer = cmd->data_in_xfer, .out_xfer = cmd->data_out_xfer,
                        .cdb_len = MIN(cmd->cdb_len, SC_CDB_MAX) };

    memcpy(r.sense, cmd->sense, sizeof(r.sense));
    memcpy(r.cdb, cmd->cdb, r.cdb_len);
    return r;
}

struct result run_cdb(struct scsi_lun *lun, const uint8_t *cdb, unsigned cdb_len,
                      const void *out, size_t out_len, void *in, size_t in_len)
{
    struct pending_cmd p;

    start_cdb(&p, lun, NULL, cdb, cdb_len, out, out_len, in, in_len);
    g_assert_cmpint(p.completions, ==, 1);
    return result_of(&p.cmd);
}

struct result run(struct scsi_lun *lun, struct scsi_task *task, const void *out,
                  size_t out_len, void *in, size_t in_len)
{
    uint8_t cdb[SC_CDB_MAX];
    unsigned n = sc_cdb(task, cdb);

    return run_cdb(lun, cdb, n, out, out_len, in, in_len);
}

void *decoded(struct sc_datain *d, const struct result *r, const void *buf)
{
    void *v = sc_datain_decode(d, r->cdb, r->cdb_len, buf, r->in_xfer);

    g_assert_nonnull(v);
    return v;
}

void assert_good(const struct result *r)
{
    g_assert_cmphex(r->status, ==, SAM_STAT_GOOD);
    g_assert_cmpuint(r->sense_len, ==, 0);
}

struct sc_sense assert_sense(const struct result *r, unsigned key, unsigned code)
{
    struct sc_sense s;

    g_assert_cmphex(r->status, ==, SAM_STAT_CHECK_CONDITION);
    s = sc_fixed_sense(r->sense, r->sense_len);
    g_assert_cmphex(s.key, ==, key);
    g_assert_cmphex(s.code, ==, code);
    return s;
}

void assert_invalid_cdb(const struct result *r)
{
    assert_sense(r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_INVALID_FIELD_IN_CDB);
}

void assert_field(const struct result *r, bool in_cdb, unsigned byte, int bit)
{
    struct sc_sense s = assert_sense(r, SCSI_SENSE_ILLEGAL_REQUEST,
                                     in_cdb ? SCSI_SENSE_ASCQ_INVALID_FIELD_IN_CDB
                                            : SCSI_SENSE_ASCQ_INVALID_FIELD_IN_PARAMETER_LIST);

    g_assert_true(s.sksv);
    g_assert_cmpint(s.in_cdb, ==, in_cdb);
    g_assert_cmpuint(s.field, ==, byte);
    g_assert_cmpint(s.bit_valid, ==, bit >= 0);
    if (bit >= 0) {
        g_assert_cmpuint(s.bit, ==, (unsigned)bit);
    }
}

void assert_lba_out_of_range(const struct result *r)
{
    assert_sense(r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_LBA_OUT_OF_RANGE);
}

void assert_invalid_param(const struct result *r)
{
    assert_sense(r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_INVALID_FIELD_IN_PARAMETER_LIST);
}

struct scsi_lun *ready(struct scsi_lun *lun)
{
    struct result r = RUN(lun, scsi_cdb_testunitready());

    assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, SCSI_SENSE_ASCQ_BUS_RESET);
    r = RUN(lun, scsi_cdb_testunitready());
    assert_good(&r);
    return lun;
}

struct scsi_lun *new_ram(uint64_t size, uint32_t bs)
{
    struct lun_backend *be;

    g_assert_cmpint(backend_ram_new(size, bs, &be, NULL), ==, 0);
    return scsi_lun_new(be, "test:ram", NULL, NULL);
}

struct scsi_lun *ram_lun(void)
{
    return ready(new_ram(8 * MiB, 512));
}

struct scsi_lun *geometry_ram(const struct geometry *g, const char *name, uint64_t size,
                              const struct scsi_lun_info *info)
{
    struct lun_backend *be;

    g_assert_cmpint(backend_ram_new(size, g->bs, &be, NULL), ==, 0);
    be->phys_block_size = g->pbs;
    return scsi_lun_new(be, name, info, NULL);
}

struct scsi_lun *null_lun(uint64_t size, uint32_t bs)
{
    struct lun_backend *be;

    g_assert_cmpint(backend_null_new(size, bs, &be, NULL), ==, 0);
    return ready(scsi_lun_new(be, "test:null", NULL, NULL));
}

struct scsi_lun *nofill_lun(uint64_t size, uint32_t bs)
{
    struct lun_backend *be;

    g_assert_cmpint(backend_null_nofill_new(size, bs, &be, NULL), ==, 0);
    return ready(scsi_lun_new(be, "test:null-nofill", NULL, NULL));
}

void dirty_heap(size_t size)
{
    void *b[4];

    for (unsigned i = 0; i < G_N_ELEMENTS(b); i++) {
        b[i] = g_malloc(size);
        memset(b[i], HEAP_PATTERN, size);
    }
    for (unsigned i = G_N_ELEMENTS(b); i-- > 0;) {
        g_free(b[i]);
    }
}

void fill_pattern(uint8_t *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++) {
        p[i] = (uint8_t)(i * 7 + seed * 131 + (i >> 9));
    }
}

void read_blocks(struct scsi_lun *lun, uint64_t lba, uint32_t n, uint8_t *buf)
{
    struct result r = RUN_IN(lun, scsi_cdb_read16(lba, n * BS, BS, 0, 0, 0, 0, 0), buf,
                             (size_t)n * 512);

    assert_good(&r);
}

struct result write_same16(struct scsi_lun *lun, bool unmap, bool anchor, uint64_t lba,
                           uint32_t n, const uint8_t *data, size_t len)
{
    return run(lun, scsi_cdb_writesame16(0, anchor, unmap, lba, 0, n, data ? BS : 0), data, len,
               NULL, 0);
}

void nothing(void *opaque)
{
}

const struct geometry geometries[3] = {
    { "512", 512, 0 },
    { "4kn", 4096, 0 },
    { "512e", 512, 4096 },
};

struct scsi_lun *geometry_lun(const struct geometry *g, uint64_t size)
{
    struct scsi_lun *lun = ready(new_ram(size, g->bs));

    scsi_lun_backend(lun)->phys_block_size = g->pbs;
    return lun;
}

void add_geometry_tests(const char *path, GTestDataFunc fn)
{
    for (unsigned i = 0; i < G_N_ELEMENTS(geometries); i++) {
        g_autofree char *p = g_strdup_printf("%s/%s", path, geometries[i].name);

        g_test_add_data_func(p, &geometries[i], fn);
    }
}

void read_lbas(struct scsi_lun *lun, uint32_t bs, uint64_t lba, uint32_t n, uint8_t *buf)
{
    struct result r = RUN_IN(lun, scsi_cdb_read16(lba, n * bs, (int)bs, 0, 0, 0, 0, 0), buf,
                             (size_t)n * bs);

    assert_good(&r);
}

/* ---- spy backend: records, fails or defers requests to a ram backend ---- */

static int spy_submit(struct lun_backend *be, struct backend_io *io)
{
    struct spy *s = (struct spy *)be;

    s->ops[io->op]++;
    if (io->op == BACKEND_READ || io->op == BACKEND_WRITE) {
        s->max_len = MAX(s->max_len, io->len);
    } else if (io->op == BACKEND_DISCARD || io->op == BACKEND_WRITE_ZEROES) {
        s->max_range_len = MAX(s->max_range_len, io->len);
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

unsigned spy_run_pending(struct spy *s)
{
    unsigned n = g_queue_get_length(&s->pending);

    for (unsigned i = 0; i < n; i++) {
        struct backend_io *io = g_queue_pop_head(&s->pending);

        s->inner->ops->submit(s->inner, io);
    }
    return n;
}

void spy_run_one(struct spy *s)
{
    struct backend_io *io = g_queue_pop_head(&s->pending);

    g_assert_nonnull(io);
    s->inner->ops->submit(s->inner, io);
}

void spy_run_newest(struct spy *s)
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

struct scsi_lun *spy_lun_with(bool write_cache, uint32_t max_transfer, struct spy **out)
{
    return spy_lun_sized(8 * MiB, write_cache, max_transfer, out);
}

struct scsi_lun *spy_lun_sized(uint64_t size, bool write_cache, uint32_t max_transfer,
                               struct spy **out)
{
    struct spy *s = g_new0(struct spy, 1);

    g_assert_cmpint(backend_ram_new(size, 512, &s->inner, NULL), ==, 0);
    s->be = *s->inner;
    s->be.ops = &spy_ops;
    s->be.name = g_strdup("spy");
    s->be.write_cache = write_cache;
    s->be.max_transfer = max_transfer;
    /* A backend of any kind (it may complete later): not ram's small pieces. */
    s->be.works_inline = false;
    s->fail_op = -1;
    g_queue_init(&s->pending);
    *out = s;
    return ready(scsi_lun_new(&s->be, "test:spy", NULL, NULL));
}

struct scsi_lun *spy_lun(bool write_cache, struct spy **out)
{
    return spy_lun_with(write_cache, 0, out);
}

/* ---- VPD pages ---------------------------------------------------------- */

void *vpd(struct scsi_lun *lun, uint8_t code, uint8_t *buf, size_t len,
          struct sc_datain *d)
{
    struct result r = RUN_IN(lun, scsi_cdb_inquiry(1, code, (int)len), buf, len);
    void *page;

    assert_good(&r);
    page = decoded(d, &r, buf);
    g_assert_cmpuint(r.in_xfer, ==, MIN(len, (size_t)sc_datain_full_size(d)));
    return page;
}

/* ---- the write cache (the caching mode page) ---------------------------- */

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

void set_wce(struct scsi_lun *lun, bool on)
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

bool get_wce(struct scsi_lun *lun)
{
    uint8_t buf[255];
    struct sc_datain d;
    bool wce = caching_page(lun, &d, buf)->caching.wce;

    sc_datain_free(&d);
    return wce;
}
