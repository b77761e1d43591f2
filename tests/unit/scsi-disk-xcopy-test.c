/*
 * Specification of EXTENDED COPY (LID1), RECEIVE COPY RESULTS and the
 * Third-party Copy VPD page (hw/scsi/scsi-disk-xcopy.c, and the VPD page
 * in scsi-disk-inquiry.c).  Commands go through an I_T nexus of a real
 * target (scsi-target.h), because the copy targets are the LUNs that
 * nexus reaches: a ram LUN (0:0), a file LUN of 4096-byte blocks (0:1,
 * the io_uring backend run synchronously, as it is without an I/O thread)
 * and a ram LUN on another port (1:0); copy target descriptors name them
 * by the NAA designator their VPD page 83h reports.  Specified: every
 * identification descriptor a standard initiator builds from VPD page 83h
 * (each LU designator, LU ID TYPE ignored, DISK BLOCK LENGTH 0, ASCII as
 * UTF-8) naming two LUNs of one target, and libiscsi's refusal cases, on
 * 512-byte, 4Kn and 512e LUNs; copies
 * between different backends and block sizes (DC), a copy whose manager
 * is neither source nor destination, overlapping ranges within one LUN
 * (copied as memmove would), a source that writes nothing into the bounce
 * buffer (null, fill=none: zeros arrive, not stale heap), every refusal
 * with its sense, in SPC-4's split: the list's form before any segment is
 * processed is ILLEGAL REQUEST (lengths, MAXIMUM DESCRIPTOR LIST LENGTH
 * before the descriptor counts, unsupported descriptor types, invalid
 * fields), an error processing a segment COPY ABORTED naming the segment
 * and the field (a CSCD index past the list, an unknown or unreachable
 * designator — a LUN of another target among them —, ranges past either
 * end, a segment past MAXIMUM SEGMENT LENGTH, an inexact segment); a
 * write-protected or reserved destination, a copy target being
 * sanitized; RECEIVE
 * COPY RESULTS' COPY STATUS (done, failed, running, the list identifier
 * in use, 16 copies at once and the oldest held result replaced) and
 * OPERATING PARAMETERS, and with a spy backend's completions
 * deferred: the destination's write waits for a COMPARE AND WRITE holding
 * its blocks, and a drain of a copy target waits for the copy.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "backend-uring.h"
#include "backend.h"
#include "scsi-cmd.h"
#include "scsi-disk.h"
#include "scsi-disk-fixture.h"
#include "scsi-pr-fixture.h"
#include "scsi-target.h"

#define RAM_BLOCKS (8 * MiB / BS)
#define FILE_BS 4096
#define FILE_SIZE (8 * MiB)
/* A copy's bounce buffer to a ram LUN: its piece (INLINE_PIECE_BYTES). */
#define BOUNCE_BYTES (16 * KiB)

/* The target, its nexus and LUNs; the file's path, removed at the end. */
struct rig {
    struct scsi_target *t;
    struct scsi_nexus *nx;
    struct scsi_lun *ram, *file, *far;   /* 0:0, 0:1, 1:0 */
    char *path;
};

/* Starts cdb from nx on (port, lun) into p; the caller checks p->completions. */
static void nx_start(struct pending_cmd *p, struct scsi_nexus *nx, unsigned port, unsigned lun,
                     const uint8_t *cdb, unsigned len, const void *out, size_t out_len,
                     void *in, size_t in_len)
{
    memcpy(p->cdb, cdb, len);
    prepare_cdb(p, NULL, p->cdb, len, out, out_len, in, in_len);
    g_assert_cmpint(scsi_nexus_exec(nx, port, lun, false, &p->cmd), ==, 0);
}

/* Runs cdb from nx on (port, lun); it must complete inline. */
static struct result nx_run(struct scsi_nexus *nx, unsigned port, unsigned lun,
                            const uint8_t *cdb, unsigned len, const void *out, size_t out_len,
                            void *in, size_t in_len)
{
    struct pending_cmd p;

    nx_start(&p, nx, port, lun, cdb, len, out, out_len, in, in_len);
    g_assert_cmpint(p.completions, ==, 1);
    return result_of(&p.cmd);
}

static struct result nx_task(struct scsi_nexus *nx, unsigned port, unsigned lun,
                             struct scsi_task *task, const void *out, size_t out_len, void *in,
                             size_t in_len)
{
    uint8_t cdb[SC_CDB_MAX];
    unsigned n = sc_cdb(task, cdb);

    return nx_run(nx, port, lun, cdb, n, out, out_len, in, in_len);
}

/* The nexus's POWER ON unit attention, consumed. */
static void nx_ready(struct scsi_nexus *nx, unsigned port, unsigned lun)
{
    struct result r = nx_task(nx, port, lun, scsi_cdb_testunitready(), NULL, 0, NULL, 0);

    assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, SCSI_SENSE_ASCQ_BUS_RESET);
    r = nx_task(nx, port, lun, scsi_cdb_testunitready(), NULL, 0, NULL, 0);
    assert_good(&r);
}

static void nx_write(struct scsi_nexus *nx, unsigned port, unsigned lun, uint32_t bs,
                     uint64_t lba, const uint8_t *buf, size_t len)
{
    struct result r = nx_task(nx, port, lun,
                              scsi_cdb_write16(lba, (uint32_t)len, (int)bs, 0, 0, 0, 0, 0), buf,
                              len, NULL, 0);

    assert_good(&r);
}

static void nx_read(struct scsi_nexus *nx, unsigned port, unsigned lun, uint32_t bs,
                    uint64_t lba, uint8_t *buf, size_t len)
{
    struct result r = nx_task(nx, port, lun,
                              scsi_cdb_read16(lba, (uint32_t)len, (int)bs, 0, 0, 0, 0, 0), NULL,
                              0, buf, len);

    assert_good(&r);
}

/* The NAA designator the LUN's VPD page 83h reports first: what a copy names it by. */
static uint64_t naa_of(struct scsi_nexus *nx, unsigned port, unsigned lun)
{
    uint8_t b[64];
    struct result r = nx_task(nx, port, lun, scsi_cdb_inquiry(1, 0x83, sizeof(b)), NULL, 0, b,
                              sizeof(b));

    assert_good(&r);
    g_assert_cmphex(b[4] & 0x0f, ==, 0x01);   /* binary */
    g_assert_cmphex(b[5] & 0x3f, ==, 0x03);   /* the LU's, NAA */
    g_assert_cmpuint(b[7], ==, 8);
    return scsi_get_uint64(b + 8);
}

static struct scsi_lun *named_ram(const char *name, uint64_t size, uint32_t bs)
{
    struct lun_backend *be;

    g_assert_cmpint(backend_ram_new(size, bs, &be, NULL), ==, 0);
    return scsi_lun_new(be, name, NULL, NULL);
}

static struct scsi_lun *file_lun(const char *path, bool ro)
{
    struct backend_file_opts o = { .path = path, .block_size = FILE_BS, .size = FILE_SIZE,
                                   .read_only = ro };
    struct lun_backend *be;

    g_assert_cmpint(backend_file_open(&o, &be, NULL), ==, 0);
    return scsi_lun_new(be, ro ? "xcopy:file-ro" : "xcopy:file", NULL, NULL);
}

static void rig_init(struct rig *g, bool file_ro)
{
    int fd;

    memset(g, 0, sizeof(*g));
    g->path = g_build_filename(g_get_tmp_dir(), "xcopy-test-XXXXXX", NULL);
    fd = g_mkstemp(g->path);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, FILE_SIZE), ==, 0);
    close(fd);
    g->t = scsi_target_new("xcopy-target");
    g->ram = named_ram("xcopy:ram", 8 * MiB, BS);
    g->file = file_lun(g->path, file_ro);
    g->far = named_ram("xcopy:far", 8 * MiB, BS);
    g_assert_cmpint(scsi_target_add_lun(g->t, 0, 0, g->ram), ==, 0);
    g_assert_cmpint(scsi_target_add_lun(g->t, 0, 1, g->file), ==, 0);
    g_assert_cmpint(scsi_target_add_lun(g->t, 1, 0, g->far), ==, 0);
    g->nx = scsi_target_nexus_new(g->t, "iqn.2026-12.test:copier");
    nx_ready(g->nx, 0, 0);
    nx_ready(g->nx, 0, 1);
    nx_ready(g->nx, 1, 0);
}

static void rig_free(struct rig *g)
{
    scsi_target_nexus_free(g->nx);
    scsi_target_free_luns(g->t);
    g_unlink(g->path);
    g_free(g->path);
}

/* ---- the parameter list ---------------------------------------------------- */

struct plist {
    uint8_t list_id, flags;      /* byte 1: LIST ID USAGE 10b (discard) 0x10, 11b 0x18 */
    uint8_t cscd[12][32];
    unsigned ncscd;
    uint8_t seg[12][28];
    unsigned nseg;
};

/* An identification CSCD descriptor naming naa, DISK BLOCK LENGTH bs; its index. */
static unsigned add_cscd(struct plist *l, uint64_t naa, uint32_t bs)
{
    uint8_t *d = l->cscd[l->ncscd];

    memset(d, 0, 32);
    d[0] = IDENT_DESCR_TGT_DESCR;
    d[4] = 0x01;                 /* binary */
    d[5] = 0x03;                 /* LU association, NAA */
    d[7] = 8;
    scsi_set_uint64(d + 8, naa);
    d[29] = (uint8_t)(bs >> 16);
    d[30] = (uint8_t)(bs >> 8);
    d[31] = (uint8_t)bs;
    return l->ncscd++;
}

static void add_seg(struct plist *l, unsigned src, unsigned dst, bool dc, uint16_t n,
                    uint64_t src_lba, uint64_t dst_lba)
{
    uint8_t *d = l->seg[l->nseg++];

    memset(d, 0, 28);
    d[0] = BLK_TO_BLK_SEG_DESCR;
    d[1] = dc ? 0x02 : 0;
    scsi_set_uint16(d + 2, 0x18);
    scsi_set_uint16(d + 4, (uint16_t)src);
    scsi_set_uint16(d + 6, (uint16_t)dst);
    scsi_set_uint16(d + 10, n);
    scsi_set_uint64(d + 12, src_lba);
    scsi_set_uint64(d + 20, dst_lba);
}

/* The list as bytes into out (at least 16 + 12 * 60); returns its length. */
static size_t build(const struct plist *l, uint8_t *out)
{
    size_t at = 16;

    memset(out, 0, 16);
    out[0] = l->list_id;
    out[1] = l->flags;
    scsi_set_uint16(out + 2, (uint16_t)(32 * l->ncscd));
    scsi_set_uint32(out + 8, 28 * l->nseg);
    for (unsigned i = 0; i < l->ncscd; i++, at += 32) {
        memcpy(out + at, l->cscd[i], 32);
    }
    for (unsigned i = 0; i < l->nseg; i++, at += 28) {
        memcpy(out + at, l->seg[i], 28);
    }
    return at;
}

#define PLIST_MAX (16 + 12 * 60)

/* EXTENDED COPY of the list l from nx to (port, lun). */
static struct result xcopy(struct scsi_nexus *nx, unsigned port, unsigned lun,
                           const struct plist *l)
{
    uint8_t b[PLIST_MAX];
    size_t len = build(l, b);

    return nx_task(nx, port, lun, scsi_cdb_extended_copy((int)len), b, len, NULL, 0);
}

/* A list copying n blocks of src (port 0 LUN 0, ram) to dst in one segment. */
static struct plist one_segment(struct rig *g, uint64_t src_naa, uint32_t src_bs,
                                uint64_t dst_naa, uint32_t dst_bs, bool dc, uint16_t n,
                                uint64_t src_lba, uint64_t dst_lba)
{
    struct plist l = { .list_id = 1 };
    unsigned s = add_cscd(&l, src_naa, src_bs), d = add_cscd(&l, dst_naa, dst_bs);

    add_seg(&l, s, d, dc, n, src_lba, dst_lba);
    return l;
}

/*
 * COPY ABORTED for an error found processing segment seg (SPC-4 5.17.7.4):
 * code (ASC << 8 | ASCQ), no residual (VALID 0: nothing written), the
 * segment number in bytes 2-3 of COMMAND-SPECIFIC INFORMATION and the
 * segment pointer (SKSV, SD for an offset into the segment descriptor
 * rather than the parameter list, no bit pointer) to byte.
 */
static void assert_segment_abort(const struct result *r, unsigned code, unsigned seg,
                                 bool in_segment, unsigned byte)
{
    assert_sense(r, SCSI_SENSE_COPY_ABORTED, code);
    g_assert_cmphex(r->sense[0] & 0x80, ==, 0);
    g_assert_cmpuint(scsi_get_uint16(r->sense + 10), ==, seg);
    g_assert_cmphex(r->sense[15], ==, 0x80 | (in_segment ? 0x20 : 0));
    g_assert_cmpuint(scsi_get_uint16(r->sense + 16), ==, byte);
}

/* ---- copies ------------------------------------------------------------------- */

static void test_ram_to_file_and_back(void)
{
    struct rig g;
    size_t len = 3 * MiB + 4096;   /* more than one 1 MiB chunk, not a whole number of them */
    g_autofree uint8_t *src = g_malloc(len), *got = g_malloc(len), *back = g_malloc(len);
    struct plist l = { .list_id = 7 };
    uint64_t ram, file;
    unsigned a, b;
    struct result r;

    rig_init(&g, false);
    ram = naa_of(g.nx, 0, 0);
    file = naa_of(g.nx, 0, 1);
    g_assert_cmphex(ram, !=, file);
    fill_pattern(src, len, 3);
    nx_write(g.nx, 0, 0, BS, 100, src, len);

    /* Sent to the file LUN: DC 0 counts the ram's 512-byte blocks, DC 1 the file's. */
    a = add_cscd(&l, ram, BS);
    b = add_cscd(&l, file, FILE_BS);
    add_seg(&l, a, b, false, (uint16_t)(2 * MiB / BS), 100, 10);
    add_seg(&l, a, b, true, (uint16_t)((len - 2 * MiB) / FILE_BS), 100 + 2 * MiB / BS,
            10 + 2 * MiB / FILE_BS);
    r = xcopy(g.nx, 0, 1, &l);
    assert_good(&r);
    g_assert_cmpuint(r.out_xfer, ==, 16 + 2 * 32 + 2 * 28);
    nx_read(g.nx, 0, 1, FILE_BS, 10, got, len);
    g_assert_true(memcmp(got, src, len) == 0);

    /* And back, to another place of the ram LUN, sent to the LUN on the other port. */
    l = one_segment(&g, file, FILE_BS, ram, BS, false, (uint16_t)(len / FILE_BS), 10, 9000);
    r = xcopy(g.nx, 1, 0, &l);
    assert_good(&r);
    nx_read(g.nx, 0, 0, BS, 9000, back, len);
    g_assert_true(memcmp(back, src, len) == 0);
    rig_free(&g);
}

/* Within one LUN, a segment whose ranges overlap ends as memmove(3) would leave it. */
static void test_overlap_within_one_lun(void)
{
    struct rig g;
    size_t len = 3 * MiB, shift = MiB / 2 + BS;
    g_autofree uint8_t *data = g_malloc(len + shift), *want = g_malloc(len + shift);
    g_autofree uint8_t *got = g_malloc(len + shift);
    struct plist l;
    uint64_t ram;
    struct result r;

    rig_init(&g, false);
    ram = naa_of(g.nx, 0, 0);
    for (int up = 1; up >= 0; up--) {
        uint64_t base = 2048, src = up ? base : base + shift / BS, dst = up ? base + shift / BS
                                                                               : base;

        fill_pattern(data, len + shift, 5 + (unsigned)up);
        nx_write(g.nx, 0, 0, BS, base, data, len + shift);
        memcpy(want, data, len + shift);
        memmove(want + (dst - base) * BS, data + (src - base) * BS, len);
        l = one_segment(&g, ram, BS, ram, BS, false, (uint16_t)(len / BS), src, dst);
        r = xcopy(g.nx, 0, 0, &l);
        assert_good(&r);
        nx_read(g.nx, 0, 0, BS, base, got, len + shift);
        g_test_message("destination %s the source", up ? "above" : "below");
        g_assert_true(memcmp(got, want, len + shift) == 0);
    }
    rig_free(&g);
}

/*
 * A source that writes nothing into the bounce buffer (a null LUN with
 * fill=none) leaves it as it was allocated: cleared, so the destination
 * gets zeros, never bytes the daemon's heap held before (another tenant's).
 */
static void test_unwritten_source_copies_zeros(void)
{
    struct rig g;
    size_t len = 4 * BOUNCE_BYTES;
    g_autofree uint8_t *old = g_malloc(len), *got = g_malloc(len), *zeros = g_malloc0(len);
    struct plist l;
    struct result r;

    rig_init(&g, false);
    g_assert_cmpint(scsi_target_add_lun(g.t, 0, 2, nofill_lun(MiB, BS)), ==, 0);
    nx_ready(g.nx, 0, 2);
    /* 0:0 tells of the new LUN first: REPORTED LUNS DATA HAS CHANGED. */
    r = nx_task(g.nx, 0, 0, scsi_cdb_testunitready(), NULL, 0, NULL, 0);
    assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, 0x3f0e);
    fill_pattern(old, len, 11);
    nx_write(g.nx, 0, 0, BS, 300, old, len);
    l = one_segment(&g, naa_of(g.nx, 0, 2), BS, naa_of(g.nx, 0, 0), BS, false,
                    (uint16_t)(len / BS), 0, 300);
    dirty_heap(BOUNCE_BYTES);
    r = xcopy(g.nx, 0, 0, &l);
    assert_good(&r);
    nx_read(g.nx, 0, 0, BS, 300, got, len);
    g_assert_true(memcmp(got, zeros, len) == 0);
    rig_free(&g);
}

static void test_zero_length_and_no_segments(void)
{
    struct rig g;
    struct plist l = { 0 };
    uint8_t data[4 * BS], zero[4 * BS] = { 0 }, got[4 * BS];
    struct result r;

    rig_init(&g, false);
    /* PARAMETER LIST LENGTH 0: nothing to do, not an error. */
    r = nx_task(g.nx, 0, 0, scsi_cdb_extended_copy(0), NULL, 0, NULL, 0);
    assert_good(&r);
    /* A list of copy targets and no segment copies nothing. */
    add_cscd(&l, naa_of(g.nx, 0, 0), BS);
    r = xcopy(g.nx, 0, 0, &l);
    assert_good(&r);
    /* A segment of zero blocks neither. */
    l = one_segment(&g, naa_of(g.nx, 0, 0), BS, naa_of(g.nx, 1, 0), BS, false, 0, 0, 0);
    fill_pattern(data, sizeof(data), 1);
    nx_write(g.nx, 0, 0, BS, 0, data, sizeof(data));
    r = xcopy(g.nx, 0, 0, &l);
    assert_good(&r);
    nx_read(g.nx, 1, 0, BS, 0, got, sizeof(got));
    g_assert_true(memcmp(got, zero, sizeof(got)) == 0);
    rig_free(&g);
}

/* ---- what initiators send, on every geometry ------------------------------ */

/* Two LUNs of one geometry on one target (0:0 and 0:1), reached through one nexus. */
struct geo_rig {
    struct scsi_target *t;
    struct scsi_nexus *nx;
    uint32_t bs;                 /* DISK BLOCK LENGTH, as READ CAPACITY (16) reports it */
    uint8_t pdt;                 /* PERIPHERAL DEVICE TYPE, as the standard INQUIRY does */
    uint64_t blocks;             /* of each LUN */
};

#define GEO_SIZE (2 * MiB)

static void geo_rig_init(struct geo_rig *g, const struct geometry *geo)
{
    /* A serial short enough for the T10 vendor id designator to fit a CSCD descriptor. */
    static const struct scsi_lun_info short_serial = { .serial = "XC42" };
    uint8_t inq[96], cap[32];
    struct result r;

    g->t = scsi_target_new("xcopy-target");
    g_assert_cmpint(scsi_target_add_lun(g->t, 0, 0, geometry_ram(geo, "xcopy:a", GEO_SIZE, NULL)),
                    ==, 0);
    g_assert_cmpint(scsi_target_add_lun(g->t, 0, 1,
                                        geometry_ram(geo, "xcopy:b", GEO_SIZE, &short_serial)),
                    ==, 0);
    g->nx = scsi_target_nexus_new(g->t, "iqn.2026-12.test:copier");
    nx_ready(g->nx, 0, 0);
    nx_ready(g->nx, 0, 1);
    r = nx_task(g->nx, 0, 0, scsi_cdb_inquiry(0, 0, sizeof(inq)), NULL, 0, inq, sizeof(inq));
    assert_good(&r);
    g->pdt = inq[0] & 0x1f;
    r = nx_task(g->nx, 0, 0, scsi_cdb_readcapacity16(), NULL, 0, cap, sizeof(cap));
    assert_good(&r);
    g->bs = scsi_get_uint32(cap + 8);
    g_assert_cmpuint(g->bs, ==, geo->bs);
    g->blocks = GEO_SIZE / g->bs;
}

static void geo_rig_free(struct geo_rig *g)
{
    scsi_target_nexus_free(g->nx);
    scsi_target_free_luns(g->t);
}

/* A CSCD descriptor's bytes 4 to 27: a designation descriptor as VPD page 83h gives it. */
typedef uint8_t id_form[24];

/*
 * The designators (port, lun) reports in VPD page 83h with the logical
 * unit association that fit an identification CSCD descriptor (20 bytes
 * or less), each with its 4-byte header, as an initiator copies them
 * (libiscsi's test tool, sg_xcopy); returns how many, at most max.
 */
static unsigned lu_forms(struct scsi_nexus *nx, unsigned port, unsigned lun, id_form *out,
                         unsigned max)
{
    uint8_t b[255];
    struct result r = nx_task(nx, port, lun, scsi_cdb_inquiry(1, 0x83, sizeof(b)), NULL, 0, b,
                              sizeof(b));
    size_t len;
    unsigned n = 0;

    assert_good(&r);
    len = MIN(4u + scsi_get_uint16(b + 2), r.in_xfer);
    for (size_t at = 4; at + 4 <= len && at + 4 + b[at + 3] <= len; at += 4u + b[at + 3]) {
        if ((b[at + 1] & 0x30) == 0 && b[at + 3] <= 20 && n < max) {
            memset(out[n], 0, sizeof(id_form));
            memcpy(out[n++], b + at, 4u + b[at + 3]);
        }
    }
    return n;
}

/* An identification CSCD descriptor of form, byte 1 (LU ID TYPE, PERIPHERAL DEVICE TYPE), bs. */
static unsigned add_form(struct plist *l, const id_form form, uint8_t byte1, uint32_t bs)
{
    uint8_t *d = l->cscd[l->ncscd];

    memset(d, 0, 32);
    d[0] = IDENT_DESCR_TGT_DESCR;
    d[1] = byte1;
    memcpy(d + 4, form, sizeof(id_form));
    scsi_set_uint32(d + 28, bs);     /* byte 28 (PAD) is 0: bs < 2^24 */
    return l->ncscd++;
}

/*
 * SPC-4 6.4.5.6: an identification CSCD descriptor names the LU that
 * reports its designator in VPD page 83h.  Every form a standard initiator
 * builds from the page is accepted, on 512-byte, 4Kn and 512e LUNs: each
 * LU designator (NAA; T10 vendor id where the serial lets it fit), LU ID
 * TYPE 00b and the reserved 11b (ignored in this descriptor), DISK BLOCK
 * LENGTH as READ CAPACITY reports it or 0 (direct-access: the copy
 * manager knows it), an ASCII designator sent with the UTF-8 code set;
 * and the data arrives.
 */
static void test_designators_from_vpd(void)
{
    for (unsigned gi = 0; gi < G_N_ELEMENTS(geometries); gi++) {
        struct geo_rig g;
        id_form fa[4], fb[4];
        unsigned na, nb, k = 0;
        uint64_t n;
        g_autofree uint8_t *data = NULL, *got = NULL;
        struct plist l;
        struct result r;

        g_test_message("%s", geometries[gi].name);
        geo_rig_init(&g, &geometries[gi]);
        n = 16 * KiB / g.bs;
        data = g_malloc(16 * KiB);
        got = g_malloc(16 * KiB);
        fill_pattern(data, 16 * KiB, gi);
        nx_write(g.nx, 0, 0, g.bs, 0, data, 16 * KiB);
        na = lu_forms(g.nx, 0, 0, fa, G_N_ELEMENTS(fa));
        nb = lu_forms(g.nx, 0, 1, fb, G_N_ELEMENTS(fb));
        g_assert_cmpuint(na, ==, 1);     /* NAA: the default serial is too long for T10's */
        g_assert_cmpuint(nb, ==, 2);     /* NAA and T10 vendor id */
        for (unsigned i = 0; i < na; i++) {
            for (unsigned j = 0; j < nb; j++) {
                for (uint8_t type = 0; type < 4; type += 3) {
                    l = (struct plist){ .list_id = 1 };
                    add_form(&l, fa[i], (uint8_t)(type << 6 | g.pdt), g.bs);
                    add_form(&l, fb[j], (uint8_t)(type << 6 | g.pdt), type ? 0 : g.bs);
                    add_seg(&l, 0, 1, false, (uint16_t)n, 0, ++k * n);
                    /* Sent to the source LUN, and to the destination (each its own copy manager). */
                    r = xcopy(g.nx, 0, k % 2, &l);
                    g_test_message("form %u -> %u, LU ID TYPE %u", i, j, type);
                    assert_good(&r);
                    nx_read(g.nx, 0, 1, g.bs, k * n, got, 16 * KiB);
                    g_assert_true(memcmp(got, data, 16 * KiB) == 0);
                }
            }
        }
        /* The T10 vendor id (ASCII) with the UTF-8 code set: the same bytes. */
        g_assert_cmphex(fb[1][0] & 0x0f, ==, 0x02);
        g_assert_cmphex(fb[1][1] & 0x0f, ==, 0x01);
        fb[1][0] = (uint8_t)((fb[1][0] & 0xf0) | 0x03);
        l = (struct plist){ .list_id = 1 };
        add_form(&l, fa[0], g.pdt, g.bs);
        add_form(&l, fb[1], g.pdt, g.bs);
        add_seg(&l, 0, 1, false, (uint16_t)n, 0, ++k * n);
        r = xcopy(g.nx, 0, 0, &l);
        assert_good(&r);
        nx_read(g.nx, 0, 1, g.bs, k * n, got, 16 * KiB);
        g_assert_true(memcmp(got, data, 16 * KiB) == 0);
        /* But not as binary: a designator is matched with its code set. */
        fb[1][0] = (uint8_t)((fb[1][0] & 0xf0) | 0x01);
        l.cscd[1][4] = fb[1][0];
        r = xcopy(g.nx, 0, 0, &l);
        assert_segment_abort(&r, 0x0d02, 0, false, 16 + 32);
        geo_rig_free(&g);
    }
}

/*
 * The refusals of libiscsi's EXTENDED COPY tests, built as it builds them
 * (one CSCD descriptor from the LUN's VPD page 83h, segments of 2048
 * blocks), on 512-byte, 4Kn and 512e LUNs: each as SPC-4 has it.
 */
static void test_conformance_refusals(void)
{
    for (unsigned gi = 0; gi < G_N_ELEMENTS(geometries); gi++) {
        struct geo_rig g;
        id_form f[4];
        struct plist l;
        struct result r;

        g_test_message("%s", geometries[gi].name);
        geo_rig_init(&g, &geometries[gi]);
        g_assert_cmpuint(lu_forms(g.nx, 0, 0, f, G_N_ELEMENTS(f)), >=, 1);

        /* ValidTgtDescr: a reserved LU ID TYPE is ignored (SPC-4 6.4.5.6). */
        l = (struct plist){ .list_id = 1 };
        add_form(&l, f[0], (uint8_t)(0x2 << 6 | g.pdt), g.bs);
        add_seg(&l, 0, 0, false, (uint16_t)MIN(g.blocks / 2, 2048), 0,
                g.blocks - MIN(g.blocks / 2, 2048));
        r = xcopy(g.nx, 0, 0, &l);
        assert_good(&r);

        /*
         * ValidSegDescr: a DESTINATION CSCD DESCRIPTOR ID past the list is
         * an unreachable copy target (6.4.6.1) and a copy past the
         * destination's end an error in the segment: COPY ABORTED, segment
         * 0, not ILLEGAL REQUEST (5.17.7.4).
         */
        l = (struct plist){ .list_id = 1 };
        add_form(&l, f[0], g.pdt, g.bs);
        add_seg(&l, 0, 1, false, (uint16_t)MIN(g.blocks / 2, 2048), 0,
                g.blocks - MIN(g.blocks / 2, 2048));
        r = xcopy(g.nx, 0, 0, &l);
        assert_segment_abort(&r, 0x0804, 0, true, 6);
        l.nseg = 0;
        add_seg(&l, 0, 0, false, (uint16_t)MIN(g.blocks / 2, 2048), 0, g.blocks - 1);
        r = xcopy(g.nx, 0, 0, &l);
        assert_segment_abort(&r, 0x0000, 0, true, 20);

        /*
         * DescrLimits: one more CSCD descriptor than MAXIMUM CSCD DESCRIPTOR
         * COUNT, then segments filling the list past MAXIMUM DESCRIPTOR LIST
         * LENGTH: the list's length is checked first (6.4.3.5).
         */
        l = (struct plist){ .list_id = 3 };
        for (unsigned i = 0; i < 9; i++) {
            add_form(&l, f[0], g.pdt, g.bs);
            add_seg(&l, 0, 0, false, 1, 0, g.blocks - 1);
        }
        r = xcopy(g.nx, 0, 0, &l);
        assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_PARAMETER_LIST_LENGTH_ERROR);
        l.nseg = 1;
        r = xcopy(g.nx, 0, 0, &l);
        assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_TOO_MANY_TARGET_DESCRIPTORS);
        geo_rig_free(&g);
    }
}

/* ---- refusals -------------------------------------------------------------- */

/* The parameter list's own lengths, and the limits we report. */
static void test_list_lengths(void)
{
    struct rig g;
    struct plist l = { 0 };
    uint8_t b[PLIST_MAX];
    uint64_t ram;
    size_t len;
    struct result r;

    rig_init(&g, false);
    ram = naa_of(g.nx, 0, 0);
    /* Shorter than the header. */
    memset(b, 0, sizeof(b));
    r = nx_task(g.nx, 0, 0, scsi_cdb_extended_copy(15), b, 15, NULL, 0);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_PARAMETER_LIST_LENGTH_ERROR);
    /* Lists longer than the parameter list. */
    l = one_segment(&g, ram, BS, ram, BS, false, 1, 0, 1);
    len = build(&l, b);
    r = nx_task(g.nx, 0, 0, scsi_cdb_extended_copy((int)len - 1), b, len - 1, NULL, 0);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_PARAMETER_LIST_LENGTH_ERROR);
    /* A CSCD list that is not whole descriptors. */
    scsi_set_uint16(b + 2, 33);
    r = nx_task(g.nx, 0, 0, scsi_cdb_extended_copy((int)len), b, len, NULL, 0);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_PARAMETER_LIST_LENGTH_ERROR);
    /* A data-out buffer shorter than PARAMETER LIST LENGTH. */
    build(&l, b);
    r = nx_task(g.nx, 0, 0, scsi_cdb_extended_copy((int)len), b, len - 1, NULL, 0);
    assert_field(&r, true, 10, 7);
    /* Inline data: MAXIMUM INLINE DATA LENGTH is 0. */
    scsi_set_uint32(b + 12, 4);
    r = nx_task(g.nx, 0, 0, scsi_cdb_extended_copy((int)len + 4), b, len + 4, NULL, 0);
    assert_field(&r, false, 12, 7);
    /* Reserved bits of the header, with field pointers. */
    build(&l, b);
    b[1] = 0x40;
    r = nx_task(g.nx, 0, 0, scsi_cdb_extended_copy((int)len), b, len, NULL, 0);
    assert_field(&r, false, 1, 7);
    build(&l, b);
    b[5] = 1;
    r = nx_task(g.nx, 0, 0, scsi_cdb_extended_copy((int)len), b, len, NULL, 0);
    assert_field(&r, false, 5, 7);

    /*
     * Nine copy targets and nine segments: 540 bytes of descriptors, past
     * MAXIMUM DESCRIPTOR LIST LENGTH (480), which is checked first:
     * PARAMETER LIST LENGTH ERROR, not TOO MANY TARGET DESCRIPTORS
     * (SPC-4 6.4.3.5; libiscsi's DescrLimits builds this list).
     */
    memset(&l, 0, sizeof(l));
    for (unsigned i = 0; i < 9; i++) {
        add_cscd(&l, ram, BS);
        add_seg(&l, 0, 0, false, 1, i, 100 + i);
    }
    r = xcopy(g.nx, 0, 0, &l);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_PARAMETER_LIST_LENGTH_ERROR);
    /* Eight of each are exactly the limit. */
    l.ncscd = l.nseg = 8;
    r = xcopy(g.nx, 0, 0, &l);
    assert_good(&r);

    /* Nine copy targets, one more than MAXIMUM CSCD DESCRIPTOR COUNT. */
    memset(&l, 0, sizeof(l));
    for (unsigned i = 0; i < 9; i++) {
        add_cscd(&l, ram, BS);
    }
    r = xcopy(g.nx, 0, 0, &l);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_TOO_MANY_TARGET_DESCRIPTORS);
    l.ncscd = 8;                 /* eight are fine */
    r = xcopy(g.nx, 0, 0, &l);
    assert_good(&r);
    /* Nine segments, one more than MAXIMUM SEGMENT DESCRIPTOR COUNT. */
    l.ncscd = 1;
    for (unsigned i = 0; i < 9; i++) {
        add_seg(&l, 0, 0, false, 1, i, 100 + i);
    }
    r = xcopy(g.nx, 0, 0, &l);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_TOO_MANY_SEGMENT_DESCRIPTORS);
    l.nseg = 8;
    r = xcopy(g.nx, 0, 0, &l);
    assert_good(&r);
    rig_free(&g);
}

/* CDB fields: the service action, reserved bytes. */
static void test_cdb_fields(void)
{
    struct rig g;
    uint8_t cdb[16] = { SCSI_OPCODE_EXTENDED_COPY };
    struct result r;

    rig_init(&g, false);
    cdb[1] = 0x01;               /* LID4: not supported */
    r = nx_run(g.nx, 0, 0, cdb, 16, NULL, 0, NULL, 0);
    assert_field(&r, true, 1, 4);
    cdb[1] = 0;
    cdb[5] = 0x10;               /* reserved */
    r = nx_run(g.nx, 0, 0, cdb, 16, NULL, 0, NULL, 0);
    assert_field(&r, true, 5, 4);
    cdb[5] = 0;
    cdb[14] = 0x01;
    r = nx_run(g.nx, 0, 0, cdb, 16, NULL, 0, NULL, 0);
    assert_field(&r, true, 14, 0);
    rig_free(&g);
}

static void test_descriptor_types(void)
{
    struct rig g;
    struct plist l;
    uint64_t ram, far;
    struct result r;

    rig_init(&g, false);
    ram = naa_of(g.nx, 0, 0);
    far = naa_of(g.nx, 1, 0);
    /* A segment type other than block to block (block to stream). */
    l = one_segment(&g, ram, BS, far, BS, false, 1, 0, 0);
    l.seg[0][0] = BLK_TO_STRM_SEG_DESCR;
    r = xcopy(g.nx, 0, 0, &l);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST,
                 SCSI_SENSE_ASCQ_UNSUPPORTED_SEGMENT_DESCRIPTOR_TYPE_CODE);
    /* A CSCD type other than identification (IPv4). */
    l = one_segment(&g, ram, BS, far, BS, false, 1, 0, 0);
    l.cscd[1][0] = IPV4_TGT_DESCR;
    r = xcopy(g.nx, 0, 0, &l);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST,
                 SCSI_SENSE_ASCQ_UNSUPPORTED_TARGET_DESCRIPTOR_TYPE_CODE);
    /* An identification descriptor of a device that is not a block device (a tape). */
    l = one_segment(&g, ram, BS, far, BS, false, 1, 0, 0);
    l.cscd[1][1] = 0x01;
    r = xcopy(g.nx, 0, 0, &l);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST,
                 SCSI_SENSE_ASCQ_UNSUPPORTED_TARGET_DESCRIPTOR_TYPE_CODE);
    /* A segment of the wrong length, a CSCD index past the list: field pointers. */
    l = one_segment(&g, ram, BS, far, BS, false, 1, 0, 0);
    scsi_set_uint16(l.seg[0] + 2, 0x14);
    r = xcopy(g.nx, 0, 0, &l);
    assert_field(&r, false, 16 + 64 + 2, 7);
    /*
     * A CSCD DESCRIPTOR ID past the list is found processing the segment:
     * COPY ABORTED, UNREACHABLE COPY TARGET (SPC-4 6.4.6.1), segment 0,
     * pointing at the field in the segment descriptor (libiscsi's
     * ValidSegDescr).  So is FFFFh, which VPD 8Fh does not offer.
     */
    l = one_segment(&g, ram, BS, far, BS, false, 1, 0, 0);
    scsi_set_uint16(l.seg[0] + 6, 2);
    r = xcopy(g.nx, 0, 0, &l);
    assert_segment_abort(&r, 0x0804, 0, true, 6);
    scsi_set_uint16(l.seg[0] + 4, 0xffff);
    r = xcopy(g.nx, 0, 0, &l);
    assert_segment_abort(&r, 0x0804, 0, true, 4);
    /* But a descriptor of the wrong form is refused before any segment: ILLEGAL REQUEST. */
    scsi_set_uint16(l.seg[0] + 2, 0x14);
    r = xcopy(g.nx, 0, 0, &l);
    assert_field(&r, false, 16 + 64 + 2, 7);
    /* DISK BLOCK LENGTH other than the LUN's. */
    l = one_segment(&g, ram, BS, far, 4096, false, 1, 0, 0);
    r = xcopy(g.nx, 0, 0, &l);
    assert_field(&r, false, 16 + 32 + 29, 7);
    /* 0 means the LUN's on a direct-access device (00h) only (SPC-4 6.4.5.3). */
    l = one_segment(&g, ram, BS, far, 0, false, 1, 0, 0);
    r = xcopy(g.nx, 0, 0, &l);
    assert_good(&r);
    l.cscd[1][1] = 0x0e;
    r = xcopy(g.nx, 0, 0, &l);
    assert_field(&r, false, 16 + 32 + 29, 7);
    /* The other block device types (04h, 05h, 07h, 0Eh) take the same parameters. */
    l = one_segment(&g, ram, BS, far, BS, false, 1, 0, 0);
    l.cscd[1][1] = 0x05;
    r = xcopy(g.nx, 0, 0, &l);
    assert_good(&r);
    /* A reserved PERIPHERAL DEVICE TYPE (02h). */
    l.cscd[1][1] = 0x02;
    r = xcopy(g.nx, 0, 0, &l);
    assert_field(&r, false, 16 + 32 + 1, 4);
    /* LU ID TYPE is ignored in an identification descriptor (6.4.5.6), reserved values too. */
    for (uint8_t t = 1; t < 4; t++) {
        l = one_segment(&g, ram, BS, far, BS, false, 1, 0, 0);
        l.cscd[0][1] = (uint8_t)(t << 6);
        l.cscd[1][1] = (uint8_t)(t << 6);
        r = xcopy(g.nx, 0, 0, &l);
        assert_good(&r);
    }
    /* Obsolete bit 5, SPC-3's NUL (a null device): not what the designator names. */
    l = one_segment(&g, ram, BS, far, BS, false, 1, 0, 0);
    l.cscd[0][1] = 0x20;
    r = xcopy(g.nx, 0, 0, &l);
    assert_field(&r, false, 16 + 1, 5);
    /* DESIGNATOR LENGTH is 20 or less. */
    l = one_segment(&g, ram, BS, far, BS, false, 1, 0, 0);
    l.cscd[1][7] = 21;
    r = xcopy(g.nx, 0, 0, &l);
    assert_field(&r, false, 16 + 32 + 7, 7);
    rig_free(&g);
}

static void test_unreachable(void)
{
    struct rig g;
    struct plist l;
    struct scsi_target *other = scsi_target_new("other-target");
    struct scsi_lun *elsewhere = named_ram("xcopy:elsewhere", MiB, BS);
    struct scsi_nexus *onx;
    uint64_t ram, foreign;
    struct result r;

    rig_init(&g, false);
    ram = naa_of(g.nx, 0, 0);
    g_assert_cmpint(scsi_target_add_lun(other, 0, 0, elsewhere), ==, 0);
    onx = scsi_target_nexus_new(other, "iqn.2026-12.test:other");
    nx_ready(onx, 0, 0);
    foreign = naa_of(onx, 0, 0);
    /*
     * A designator no LUN has: COPY ABORTED, COPY TARGET DEVICE NOT
     * REACHABLE when segment 0 uses it, pointing at the first byte of its
     * CSCD descriptor in the parameter list (SPC-4 5.17.7.4 f).
     */
    l = one_segment(&g, ram, BS, 0x5123456789abcdefULL, BS, false, 1, 0, 0);
    r = xcopy(g.nx, 0, 0, &l);
    assert_segment_abort(&r, 0x0d02, 0, false, 16 + 32);
    /* A copy target no segment uses is not reached for: no error. */
    l.seg[0][7] = 0;
    r = xcopy(g.nx, 0, 0, &l);
    assert_good(&r);
    /* A LUN of another target of the daemon: not one this nexus reaches. */
    l = one_segment(&g, ram, BS, foreign, BS, false, 1, 0, 0);
    r = xcopy(g.nx, 0, 0, &l);
    assert_segment_abort(&r, 0x0d02, 0, false, 16 + 32);
    /*
     * The NAA's bytes under another designator type (T10 vendor id), as
     * a target port's rather than the LU's, or as ASCII: none of them is
     * a designator the LUN reports.
     */
    l = one_segment(&g, ram, BS, ram, BS, false, 1, 0, 1);
    l.cscd[1][5] = 0x01;
    r = xcopy(g.nx, 0, 0, &l);
    assert_segment_abort(&r, 0x0d02, 0, false, 16 + 32);
    l.cscd[1][5] = 0x13;
    r = xcopy(g.nx, 0, 0, &l);
    assert_segment_abort(&r, 0x0d02, 0, false, 16 + 32);
    l.cscd[1][5] = 0x03;
    l.cscd[1][4] = 0x02;
    r = xcopy(g.nx, 0, 0, &l);
    assert_segment_abort(&r, 0x0d02, 0, false, 16 + 32);
    /* The LUN itself is reached without a nexus (the LUN's own initiator). */
    {
        uint8_t b[PLIST_MAX];
        size_t len;

        ready(g.ram);
        l = one_segment(&g, ram, BS, ram, BS, false, 1, 0, 1);
        len = build(&l, b);
        r = run(g.ram, scsi_cdb_extended_copy((int)len), b, len, NULL, 0);
        assert_good(&r);
        l = one_segment(&g, ram, BS, naa_of(g.nx, 1, 0), BS, false, 1, 0, 1);
        len = build(&l, b);
        r = run(g.ram, scsi_cdb_extended_copy((int)len), b, len, NULL, 0);
        assert_segment_abort(&r, 0x0d02, 0, false, 16 + 32);
    }
    scsi_target_nexus_free(onx);
    scsi_target_free_luns(other);
    rig_free(&g);
}

static void test_ranges_and_segment_length(void)
{
    struct rig g;
    struct plist l;
    uint64_t ram, file;
    uint8_t before[FILE_BS], after[FILE_BS], data[2 * FILE_BS];
    struct result r;

    rig_init(&g, false);
    ram = naa_of(g.nx, 0, 0);
    file = naa_of(g.nx, 0, 1);
    nx_read(g.nx, 0, 1, FILE_BS, FILE_SIZE / FILE_BS - 1, before, sizeof(before));
    fill_pattern(data, sizeof(data), 4);            /* what a wrongly run copy would write */
    nx_write(g.nx, 0, 0, BS, 0, data, sizeof(data));
    /*
     * Ranges past a copy target's end are found processing the segment:
     * COPY ABORTED, segment 0, pointing at the LBA field that overruns
     * (libiscsi's ValidSegDescr: a copy beyond the destination's end).
     * Past the source's end.
     */
    l = one_segment(&g, ram, BS, file, FILE_BS, false, 16, RAM_BLOCKS - 8, 0);
    r = xcopy(g.nx, 0, 0, &l);
    assert_segment_abort(&r, 0x0000, 0, true, 12);
    /* Past the destination's end (the file's last block and one more). */
    l = one_segment(&g, ram, BS, file, FILE_BS, true, 2, 0, FILE_SIZE / FILE_BS - 1);
    r = xcopy(g.nx, 0, 0, &l);
    assert_segment_abort(&r, 0x0000, 0, true, 20);
    nx_read(g.nx, 0, 1, FILE_BS, FILE_SIZE / FILE_BS - 1, after, sizeof(after));
    g_assert_true(memcmp(before, after, sizeof(after)) == 0);   /* nothing was written */
    /* An LBA that wraps. */
    l = one_segment(&g, ram, BS, file, FILE_BS, false, 8, UINT64_MAX - 2, 0);
    r = xcopy(g.nx, 0, 0, &l);
    assert_segment_abort(&r, 0x0000, 0, true, 12);
    /* Past MAXIMUM SEGMENT LENGTH (32 MiB): 8193 blocks of 4 KiB. */
    l = one_segment(&g, file, FILE_BS, file, FILE_BS, false, 8193, 0, 0);
    r = xcopy(g.nx, 0, 0, &l);
    assert_segment_abort(&r, 0x2600, 0, true, 10);
    /* One 512-byte block is no whole 4 KiB block: an inexact segment. */
    l = one_segment(&g, ram, BS, file, FILE_BS, false, 1, 0, 0);
    r = xcopy(g.nx, 0, 0, &l);
    assert_segment_abort(&r, 0x260a, 0, true, 10);
    /*
     * The segment in error is named: the second here.  Every segment is
     * checked before a block moves, so the first wrote nothing either.
     */
    l = one_segment(&g, ram, BS, file, FILE_BS, true, 1, 0, FILE_SIZE / FILE_BS - 1);
    add_seg(&l, 0, 1, true, 2, 0, FILE_SIZE / FILE_BS - 1);
    r = xcopy(g.nx, 0, 0, &l);
    assert_segment_abort(&r, 0x0000, 1, true, 20);
    nx_read(g.nx, 0, 1, FILE_BS, FILE_SIZE / FILE_BS - 1, after, sizeof(after));
    g_assert_true(memcmp(before, after, sizeof(after)) == 0);
    rig_free(&g);
}

static void test_write_protected_destination(void)
{
    struct rig g;
    struct plist l;
    struct result r;

    rig_init(&g, true);
    l = one_segment(&g, naa_of(g.nx, 0, 0), BS, naa_of(g.nx, 0, 1), FILE_BS, true, 1, 0, 0);
    r = xcopy(g.nx, 0, 0, &l);
    assert_sense(&r, SCSI_SENSE_DATA_PROTECTION, SCSI_SENSE_ASCQ_WRITE_PROTECTED);
    /* As a source it serves. */
    l = one_segment(&g, naa_of(g.nx, 0, 1), FILE_BS, naa_of(g.nx, 0, 0), BS, false, 1, 0, 0);
    r = xcopy(g.nx, 0, 0, &l);
    assert_good(&r);
    rig_free(&g);
}

/*
 * Another initiator holds Write Exclusive on the far LUN: the copy, on the
 * nexus's behalf, may read it but not write it, as the nexus itself.
 */
/* A copy target being sanitized is NOT READY, SANITIZE IN PROGRESS, as a READ of it would be. */
static void test_sanitizing_copy_target(void)
{
    struct rig g;
    struct spy *s;
    struct scsi_lun *sl = spy_lun(false, &s);
    struct plist l;
    struct result r;

    rig_init(&g, false);
    scsi_lun_backend(sl)->allow_sanitize = true;
    g_assert_cmpint(scsi_target_add_lun(g.t, 0, 2, sl), ==, 0);
    nx_ready(g.nx, 0, 2);
    /* The copy manager's nexus hears of the new LUN first. */
    r = nx_task(g.nx, 0, 0, scsi_cdb_testunitready(), NULL, 0, NULL, 0);
    assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, SC_ASCQ_REPORTED_LUNS_DATA_HAS_CHANGED);
    s->defer = true;
    r = nx_task(g.nx, 0, 2, scsi_cdb_sanitize(1, 0, SCSI_SANITIZE_BLOCK_ERASE, 0), NULL, 0,
                NULL, 0);
    assert_good(&r);                     /* IMMED: the erase is held in the spy */
    l = one_segment(&g, naa_of(g.nx, 0, 0), BS, naa_of(g.nx, 0, 2), BS, false, 1, 0, 0);
    r = xcopy(g.nx, 0, 0, &l);
    assert_sense(&r, SCSI_SENSE_NOT_READY, SCSI_SENSE_ASCQ_SANITIZE_IN_PROGRESS);
    l = one_segment(&g, naa_of(g.nx, 0, 2), BS, naa_of(g.nx, 0, 0), BS, false, 1, 0, 0);
    r = xcopy(g.nx, 0, 0, &l);
    assert_sense(&r, SCSI_SENSE_NOT_READY, SCSI_SENSE_ASCQ_SANITIZE_IN_PROGRESS);
    s->defer = false;
    while (spy_run_pending(s)) {
    }
    r = xcopy(g.nx, 0, 0, &l);
    assert_good(&r);
    rig_free(&g);
}

static void test_reservation_on_a_copy_target(void)
{
    static const struct scsi_it_id holder = { "iqn.2026-12.test:holder", "xcopy-target", 2 };
    struct rig g;
    struct plist l;
    uint8_t before[BS], after[BS], data[BS];
    uint64_t ram, far;
    struct result r;

    rig_init(&g, false);
    ram = naa_of(g.nx, 0, 0);
    far = naa_of(g.nx, 1, 0);
    fill_pattern(data, BS, 9);
    nx_write(g.nx, 0, 0, BS, 0, data, BS);
    ready(g.far);   /* the holder's commands go to the LUN itself, its own unit attention */
    g_assert_cmphex(pr_out(g.far, &holder, SCSI_PERSISTENT_RESERVE_REGISTER, 0, 0, 0x1234), ==, GOOD);
    g_assert_cmphex(pr_out(g.far, &holder, SCSI_PERSISTENT_RESERVE_RESERVE,
                           SCSI_PERSISTENT_RESERVE_TYPE_WRITE_EXCLUSIVE, 0x1234, 0),
                    ==, GOOD);
    nx_read(g.nx, 1, 0, BS, 0, before, BS);
    l = one_segment(&g, ram, BS, far, BS, false, 1, 0, 0);
    r = xcopy(g.nx, 0, 0, &l);
    g_assert_cmphex(r.status, ==, CONFLICT);
    nx_read(g.nx, 1, 0, BS, 0, after, BS);
    g_assert_true(memcmp(before, after, BS) == 0);
    /* Reading it is allowed under Write Exclusive. */
    l = one_segment(&g, far, BS, ram, BS, false, 1, 0, 1);
    r = xcopy(g.nx, 0, 0, &l);
    assert_good(&r);
    /* The holder's own copy within the LUN (sent to it without a nexus) writes. */
    l = one_segment(&g, far, BS, far, BS, false, 1, 0, 5);
    {
        uint8_t b[PLIST_MAX];
        size_t len = build(&l, b);
        uint8_t cdb[SC_CDB_MAX];
        unsigned n = sc_cdb(scsi_cdb_extended_copy((int)len), cdb);

        nx_write(g.nx, 0, 0, BS, 0, data, BS);
        r = run_as(g.far, &holder, cdb, n, b, len, NULL, 0);
        assert_good(&r);
    }
    nx_read(g.nx, 1, 0, BS, 5, after, BS);
    g_assert_true(memcmp(before, after, BS) == 0);
    rig_free(&g);
}

/* ---- RECEIVE COPY RESULTS ------------------------------------------------ */

static struct result rcr(struct scsi_nexus *nx, unsigned port, unsigned lun,
                         enum scsi_copy_results_sa sa, uint8_t list_id, uint8_t *buf,
                         size_t len)
{
    return nx_task(nx, port, lun, scsi_cdb_receive_copy_results(sa, list_id, (int)len), NULL,
                   0, buf, len);
}

static void assert_copy_status(struct scsi_nexus *nx, unsigned port, unsigned lun,
                               uint8_t list_id, uint8_t status, uint16_t segments,
                               uint32_t bytes)
{
    uint8_t b[64];
    struct result r = rcr(nx, port, lun, SCSI_COPY_RESULTS_COPY_STATUS, list_id, b, sizeof(b));
    struct scsi_copy_results_copy_status *cs;
    struct sc_datain d;

    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 12);
    cs = decoded(&d, &r, b);
    g_assert_cmpuint(cs->copy_manager_status, ==, status);
    g_assert_cmpuint(cs->segments_processed, ==, segments);
    g_assert_cmpuint(cs->transfer_count_units, ==, 0);   /* bytes */
    g_assert_cmpuint(cs->transfer_count, ==, bytes);
    sc_datain_free(&d);
}

static void test_copy_status(void)
{
    struct rig g;
    struct plist l = { .list_id = 42 };
    uint64_t ram, far;
    uint8_t b[64];
    struct result r;

    rig_init(&g, false);
    ram = naa_of(g.nx, 0, 0);
    far = naa_of(g.nx, 1, 0);
    add_cscd(&l, ram, BS);
    add_cscd(&l, far, BS);
    add_seg(&l, 0, 1, false, 2048, 0, 0);
    add_seg(&l, 1, 0, false, 16, 0, 4096);
    r = xcopy(g.nx, 0, 0, &l);
    assert_good(&r);
    assert_copy_status(g.nx, 0, 0, 42, 0x01, 2, (2048 + 16) * BS);
    /* Only the copy manager LUN holds it, and only for its list identifier. */
    r = rcr(g.nx, 0, 0, SCSI_COPY_RESULTS_COPY_STATUS, 41, b, sizeof(b));
    assert_field(&r, true, 2, 7);
    r = rcr(g.nx, 1, 0, SCSI_COPY_RESULTS_COPY_STATUS, 42, b, sizeof(b));
    assert_field(&r, true, 2, 7);
    /* The same list identifier again replaces the result. */
    l.nseg = 1;
    scsi_set_uint16(l.seg[0] + 10, 8);
    r = xcopy(g.nx, 0, 0, &l);
    assert_good(&r);
    assert_copy_status(g.nx, 0, 0, 42, 0x01, 1, 8 * BS);
    /* LIST ID USAGE 10b (discard; SPC-3's NRCR) and 11b (no identifier): nothing held. */
    l.list_id = 43;
    for (uint8_t usage = 0x10; usage <= 0x18; usage += 0x08) {
        l.flags = usage;
        r = xcopy(g.nx, 0, 0, &l);
        assert_good(&r);
        r = rcr(g.nx, 0, 0, SCSI_COPY_RESULTS_COPY_STATUS, 43, b, sizeof(b));
        assert_field(&r, true, 2, 7);
    }
    /* 01b is reserved. */
    l.flags = 0x08;
    r = xcopy(g.nx, 0, 0, &l);
    assert_field(&r, false, 1, 4);
    /* Unsupported service actions (RECEIVE DATA, FAILED SEGMENT DETAILS). */
    r = rcr(g.nx, 0, 0, SCSI_COPY_RESULTS_RECEIVE_DATA, 42, b, sizeof(b));
    assert_field(&r, true, 1, 4);
    r = rcr(g.nx, 0, 0, SCSI_COPY_RESULTS_FAILED_SEGMENT, 42, b, sizeof(b));
    assert_field(&r, true, 1, 4);
    /* The allocation length cuts the reply. */
    r = rcr(g.nx, 0, 0, SCSI_COPY_RESULTS_COPY_STATUS, 42, b, 4);
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 4);
    rig_free(&g);
}

static void test_operating_parameters(void)
{
    struct rig g;
    uint8_t b[128];
    struct result r;
    struct scsi_copy_results_op_params *op;
    struct sc_datain d;

    rig_init(&g, false);
    r = rcr(g.nx, 0, 1, SCSI_COPY_RESULTS_OP_PARAMS, 3, b, sizeof(b));   /* any list id */
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 46);
    op = decoded(&d, &r, b);
    g_assert_cmpuint(op->max_target_desc_count, ==, 8);
    g_assert_cmpuint(op->max_segment_desc_count, ==, 8);
    g_assert_cmpuint(op->max_desc_list_length, ==, 8 * 32 + 8 * 28);
    g_assert_cmpuint(op->max_segment_length, ==, 32 * MiB);
    g_assert_cmpuint(op->max_inline_data_length, ==, 0);
    g_assert_cmpuint(op->total_concurrent_copies, ==, 16);
    g_assert_cmpuint(op->max_concurrent_copies, ==, 16);
    g_assert_cmpuint(op->data_segment_granularity, ==, 12);   /* the file LUN's 4 KiB */
    g_assert_cmpuint(op->impl_desc_list_length, ==, 2);
    g_assert_cmphex(op->imp_desc_type_codes[0], ==, BLK_TO_BLK_SEG_DESCR);
    g_assert_cmphex(op->imp_desc_type_codes[1], ==, IDENT_DESCR_TGT_DESCR);
    sc_datain_free(&d);
    rig_free(&g);
}

/* ---- asynchronous copies: a spy LUN whose completions wait ---------------- */

struct spy_rig {
    struct scsi_target *t;
    struct scsi_nexus *nx;
    struct scsi_lun *ram, *spied;   /* 0:0, 0:1 */
    struct spy *spy;
};

static void spy_rig_init(struct spy_rig *g)
{
    g->t = scsi_target_new("xcopy-target");
    g->ram = named_ram("xcopy:ram", 8 * MiB, BS);
    g->spied = spy_lun(false, &g->spy);
    g_assert_cmpint(scsi_target_add_lun(g->t, 0, 0, g->ram), ==, 0);
    g_assert_cmpint(scsi_target_add_lun(g->t, 0, 1, g->spied), ==, 0);
    g->nx = scsi_target_nexus_new(g->t, "iqn.2026-12.test:copier");
    nx_ready(g->nx, 0, 0);
    nx_ready(g->nx, 0, 1);
}

static void spy_rig_free(struct spy_rig *g)
{
    scsi_target_nexus_free(g->nx);
    scsi_target_free_luns(g->t);
}

/* A list copying n blocks from the ram LUN's block 0 to the spied LUN's block 0. */
static struct plist to_spied(struct spy_rig *g, uint8_t list_id, uint16_t n)
{
    struct plist l = { .list_id = list_id };

    add_cscd(&l, naa_of(g->nx, 0, 0), BS);
    add_cscd(&l, naa_of(g->nx, 0, 1), BS);
    add_seg(&l, 0, 1, false, n, 0, 0);
    return l;
}

static void drained(struct scsi_drain *d)
{
    (*(int *)d->opaque)++;
}

/* Starts EXTENDED COPY of l (built into b, which must outlive it) from nx on (port, lun). */
static void xcopy_start(struct pending_cmd *p, struct scsi_nexus *nx, unsigned port,
                        unsigned lun, const struct plist *l, uint8_t *b)
{
    size_t len = build(l, b);
    uint8_t cdb[SC_CDB_MAX];
    unsigned n = sc_cdb(scsi_cdb_extended_copy((int)len), cdb);

    nx_start(p, nx, port, lun, cdb, n, b, len, NULL, 0);
}

/*
 * A copy's chunk: the smaller of its two LUNs' (16 KiB here, as the source
 * is a ram LUN, whose backend works on the I/O thread's CPU).
 */
#define XCHUNK (16 * KiB)

/*
 * While the copy runs: COPY STATUS says so, the list identifier is in use,
 * and a drain of the copy target (a LUN reset, its removal) waits for it.
 */
static void test_running_copy(void)
{
    struct spy_rig g;
    struct plist l;
    uint8_t b[PLIST_MAX];
    struct pending_cmd p;
    struct scsi_drain d = { .done = drained };
    int drains = 0;
    g_autofree uint8_t *data = g_malloc(2 * XCHUNK), *got = g_malloc(2 * XCHUNK);
    struct result r;

    spy_rig_init(&g);
    fill_pattern(data, 2 * XCHUNK, 11);
    nx_write(g.nx, 0, 0, BS, 0, data, 2 * XCHUNK);
    l = to_spied(&g, 5, 2 * XCHUNK / BS);
    g.spy->defer = true;
    xcopy_start(&p, g.nx, 0, 0, &l, b);
    g_assert_cmpint(p.completions, ==, 0);
    g_assert_cmpuint(g_queue_get_length(&g.spy->pending), ==, 1);   /* the first chunk's write */
    g_assert_cmpuint(g.spy->max_len, ==, XCHUNK);
    assert_copy_status(g.nx, 0, 0, 5, 0x00, 0, 0);
    /* The list identifier is in use. */
    r = xcopy(g.nx, 0, 0, &l);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, 0x0016);   /* OPERATION IN PROGRESS */
    /* The copy target's drain waits for the copy the ram LUN runs on it. */
    d.opaque = &drains;
    scsi_lun_drain_async(g.spied, &d);
    g_assert_cmpint(drains, ==, 0);

    g_assert_cmpuint(spy_run_pending(g.spy), ==, 1);
    g_assert_cmpint(p.completions, ==, 0);
    assert_copy_status(g.nx, 0, 0, 5, 0x00, 0, XCHUNK);
    g_assert_cmpint(drains, ==, 0);
    g_assert_cmpuint(spy_run_pending(g.spy), ==, 1);
    g_assert_cmpint(p.completions, ==, 1);
    r = result_of(&p.cmd);
    assert_good(&r);
    g_assert_cmpint(drains, ==, 1);
    assert_copy_status(g.nx, 0, 0, 5, 0x01, 1, 2 * XCHUNK);
    g.spy->defer = false;
    nx_read(g.nx, 0, 1, BS, 0, got, 2 * XCHUNK);
    g_assert_true(memcmp(got, data, 2 * XCHUNK) == 0);
    spy_rig_free(&g);
}

/*
 * At most 16 copies run on one copy manager (TOTAL CONCURRENT COPIES); 16
 * results are held, and a new list identifier then takes the oldest's place.
 */
static void test_copies_at_once(void)
{
    struct spy_rig g;
    struct plist l;
    uint8_t b[17][PLIST_MAX], st[64];
    struct pending_cmd p[17];
    struct result r;

    spy_rig_init(&g);
    l = to_spied(&g, 100, 8);
    g.spy->defer = true;
    for (unsigned i = 0; i < 16; i++) {
        l.list_id = (uint8_t)(100 + i);
        xcopy_start(&p[i], g.nx, 0, 0, &l, b[i]);
        g_assert_cmpint(p[i].completions, ==, 0);
    }
    l.list_id = 116;
    r = xcopy(g.nx, 0, 0, &l);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, 0x5503);   /* INSUFFICIENT RESOURCES */
    g_assert_cmpuint(spy_run_pending(g.spy), ==, 16);
    for (unsigned i = 0; i < 16; i++) {
        g_assert_cmpint(p[i].completions, ==, 1);
        r = result_of(&p[i].cmd);
        assert_good(&r);
    }
    g.spy->defer = false;
    /* Sixteen results held; a seventeenth list identifier replaces the oldest. */
    r = xcopy(g.nx, 0, 0, &l);
    assert_good(&r);
    assert_copy_status(g.nx, 0, 0, 116, 0x01, 1, 8 * BS);
    assert_copy_status(g.nx, 0, 0, 101, 0x01, 1, 8 * BS);
    r = rcr(g.nx, 0, 0, SCSI_COPY_RESULTS_COPY_STATUS, 100, st, sizeof(st));
    assert_field(&r, true, 2, 7);
    spy_rig_free(&g);
}

/* A backend failure ends the copy with the sense of the failure, and COPY STATUS says so. */
static void test_failed_copy(void)
{
    struct spy_rig g;
    struct plist l;
    struct result r;

    spy_rig_init(&g);
    l = to_spied(&g, 6, 8);
    g.spy->fail_op = BACKEND_WRITE;
    g.spy->fail_ret = -EIO;
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "test:spy: write at byte 0 failed*");
    r = xcopy(g.nx, 0, 0, &l);
    g_test_assert_expected_messages();
    assert_sense(&r, SCSI_SENSE_MEDIUM_ERROR, SC_ASCQ_WRITE_ERROR);
    assert_copy_status(g.nx, 0, 0, 6, 0x02, 0, 0);
    spy_rig_free(&g);
}

/*
 * The destination's write takes its blocks of the write range lock like a
 * WRITE: it waits for a COMPARE AND WRITE that holds them, and lands after it.
 */
static void test_destination_waits_for_compare_and_write(void)
{
    struct spy_rig g;
    struct plist l;
    uint8_t b[PLIST_MAX], src[8 * BS], caw_out[2 * BS] = { 0 }, got[8 * BS];
    uint8_t cdb[SC_CDB_MAX];
    unsigned n = sc_cdb(scsi_cdb_compareandwrite(2, 2 * BS, BS, 0, 0, 0, 0, 0), cdb);
    struct pending_cmd caw, cp;
    struct result r;

    spy_rig_init(&g);
    fill_pattern(src, sizeof(src), 12);
    nx_write(g.nx, 0, 0, BS, 0, src, sizeof(src));
    fill_pattern(caw_out + BS, BS, 13);   /* compares with zeros, writes a pattern */
    g.spy->defer = true;
    nx_start(&caw, g.nx, 0, 1, cdb, n, caw_out, sizeof(caw_out), NULL, 0);
    g_assert_cmpuint(g.spy->ops[BACKEND_READ], ==, 1);
    l = to_spied(&g, 8, 8);
    xcopy_start(&cp, g.nx, 0, 0, &l, b);
    /* Read from the ram LUN, then waiting for block 2 of the spied one. */
    g_assert_cmpuint(g.spy->ops[BACKEND_WRITE], ==, 0);
    spy_run_one(g.spy);                   /* the COMPARE AND WRITE's read: its write goes */
    g_assert_cmpuint(g.spy->ops[BACKEND_WRITE], ==, 1);
    g_assert_cmpint(cp.completions, ==, 0);
    spy_run_one(g.spy);                   /* its write: it ends, the copy's write goes */
    g_assert_cmpint(caw.completions, ==, 1);
    r = result_of(&caw.cmd);
    assert_good(&r);
    g_assert_cmpuint(g.spy->ops[BACKEND_WRITE], ==, 2);
    g_assert_cmpint(cp.completions, ==, 0);
    spy_run_one(g.spy);
    g_assert_cmpint(cp.completions, ==, 1);
    r = result_of(&cp.cmd);
    assert_good(&r);
    g.spy->defer = false;
    nx_read(g.nx, 0, 1, BS, 0, got, sizeof(got));
    g_assert_true(memcmp(got, src, sizeof(src)) == 0);   /* the copy's data, written last */
    spy_rig_free(&g);
}

/* ---- the Third-party Copy VPD page, REPORT SUPPORTED OPERATION CODES ---- */

/* The descriptor of type in the page b (len bytes), or NULL. */
static const uint8_t *tpc_find(const uint8_t *b, size_t len, uint16_t type)
{
    for (size_t at = 4; at + 4 <= len; at += 4 + scsi_get_uint16(b + at + 2)) {
        if (scsi_get_uint16(b + at) == type) {
            return b + at;
        }
    }
    return NULL;
}

static void test_vpd_page(void)
{
    struct rig g;
    uint8_t b[512];
    const uint8_t *d;
    size_t len;
    struct result r;

    rig_init(&g, false);
    r = nx_task(g.nx, 0, 0, scsi_cdb_inquiry(1, 0x8f, sizeof(b)), NULL, 0, b, sizeof(b));
    assert_good(&r);
    g_assert_cmphex(b[1], ==, 0x8f);
    len = 4 + scsi_get_uint16(b + 2);
    g_assert_cmpuint(r.in_xfer, ==, len);
    /* Every descriptor is whole 4-byte words and the page ends with the last. */
    for (size_t at = 4; at < len; at += 4 + scsi_get_uint16(b + at + 2)) {
        g_assert_cmpuint(scsi_get_uint16(b + at + 2) % 4, ==, 0);
        g_assert_cmpuint(at + 4 + scsi_get_uint16(b + at + 2), <=, len);
    }
    /* Supported Commands: 83h with SA 00h, 84h with 00h and 03h. */
    d = tpc_find(b, len, 0x0001);
    g_assert_nonnull(d);
    g_assert_cmpuint(d[4], ==, 7);
    g_assert_cmphex(d[5], ==, 0x83);
    g_assert_cmpuint(d[6], ==, 1);
    g_assert_cmphex(d[7], ==, 0x00);
    g_assert_cmphex(d[8], ==, 0x84);
    g_assert_cmpuint(d[9], ==, 2);
    g_assert_cmphex(d[10], ==, 0x00);
    g_assert_cmphex(d[11], ==, 0x03);
    /* Parameter Data: the limits the refusals above enforce. */
    d = tpc_find(b, len, 0x0004);
    g_assert_nonnull(d);
    g_assert_cmpuint(scsi_get_uint16(d + 2), ==, 0x1c);
    g_assert_cmpuint(scsi_get_uint16(d + 8), ==, 8);
    g_assert_cmpuint(scsi_get_uint16(d + 10), ==, 8);
    g_assert_cmpuint(scsi_get_uint32(d + 12), ==, 8 * 32 + 8 * 28);
    g_assert_cmpuint(scsi_get_uint32(d + 16), ==, 0);
    /* Supported Descriptors. */
    d = tpc_find(b, len, 0x0008);
    g_assert_nonnull(d);
    g_assert_cmpuint(d[4], ==, 2);
    g_assert_cmphex(d[5], ==, BLK_TO_BLK_SEG_DESCR);
    g_assert_cmphex(d[6], ==, IDENT_DESCR_TGT_DESCR);
    /* Supported CSCD Descriptor IDs: none of the special ones. */
    d = tpc_find(b, len, 0x000c);
    g_assert_nonnull(d);
    g_assert_cmpuint(scsi_get_uint16(d + 4), ==, 0);
    /* General Copy Operations: MAXIMUM SEGMENT LENGTH. */
    d = tpc_find(b, len, 0x8001);
    g_assert_nonnull(d);
    g_assert_cmpuint(scsi_get_uint32(d + 4), ==, 16);
    g_assert_cmpuint(scsi_get_uint32(d + 12), ==, 32 * MiB);
    g_assert_cmpuint(d[16], ==, 9);            /* the ram LUN's 512-byte blocks */
    rig_free(&g);
}

static void test_report_supported_opcodes(void)
{
    static const struct { uint8_t op, sa; } want[] = {
        { SCSI_OPCODE_EXTENDED_COPY, 0x00 },
        { SCSI_OPCODE_RECEIVE_COPY_RESULTS, SCSI_COPY_RESULTS_COPY_STATUS },
        { SCSI_OPCODE_RECEIVE_COPY_RESULTS, SCSI_COPY_RESULTS_OP_PARAMS },
    };
    struct scsi_lun *lun = ram_lun();

    for (unsigned i = 0; i < G_N_ELEMENTS(want); i++) {
        uint8_t b[64];
        struct result r = RUN_IN(lun, scsi_cdb_report_supported_opcodes(0, 2, want[i].op,
                                                                        want[i].sa, sizeof(b)),
                                 b, sizeof(b));

        assert_good(&r);
        g_assert_cmphex(b[1] & 0x07, ==, 0x03);   /* SUPPORT: as the standard says */
        g_assert_cmpuint(scsi_get_uint16(b + 2), ==, 16);
        g_assert_cmphex(b[4], ==, want[i].op);
        g_assert_cmphex(b[5], ==, want[i].sa);
    }
    /* And in the list of all commands, each with its service action. */
    {
        uint8_t b[4096];
        struct result r = RUN_IN(lun, scsi_cdb_report_supported_opcodes(0, 0, 0, 0, sizeof(b)),
                                 b, sizeof(b));
        unsigned found = 0;

        assert_good(&r);
        for (uint32_t at = 4; at + 8 <= 4 + scsi_get_uint32(b); at += 8) {
            for (unsigned i = 0; i < G_N_ELEMENTS(want); i++) {
                if (b[at] == want[i].op && scsi_get_uint16(b + at + 2) == want[i].sa) {
                    g_assert_cmphex(b[at + 5] & 0x01, ==, 0x01);   /* SERVACTV */
                    g_assert_cmpuint(scsi_get_uint16(b + at + 6), ==, 16);
                    found++;
                }
            }
        }
        g_assert_cmpuint(found, ==, G_N_ELEMENTS(want));
    }
    scsi_lun_free(lun);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/scsi-disk/xcopy/ram-to-file-and-back", test_ram_to_file_and_back);
    g_test_add_func("/scsi-disk/xcopy/overlap-within-one-lun", test_overlap_within_one_lun);
    g_test_add_func("/scsi-disk/xcopy/unwritten-source-copies-zeros",
                    test_unwritten_source_copies_zeros);
    g_test_add_func("/scsi-disk/xcopy/zero-length", test_zero_length_and_no_segments);
    g_test_add_func("/scsi-disk/xcopy/designators-from-vpd", test_designators_from_vpd);
    g_test_add_func("/scsi-disk/xcopy/conformance-refusals", test_conformance_refusals);
    g_test_add_func("/scsi-disk/xcopy/list-lengths", test_list_lengths);
    g_test_add_func("/scsi-disk/xcopy/cdb-fields", test_cdb_fields);
    g_test_add_func("/scsi-disk/xcopy/descriptor-types", test_descriptor_types);
    g_test_add_func("/scsi-disk/xcopy/unreachable", test_unreachable);
    g_test_add_func("/scsi-disk/xcopy/ranges", test_ranges_and_segment_length);
    g_test_add_func("/scsi-disk/xcopy/write-protected", test_write_protected_destination);
    g_test_add_func("/scsi-disk/xcopy/sanitizing-copy-target", test_sanitizing_copy_target);
    g_test_add_func("/scsi-disk/xcopy/reservation", test_reservation_on_a_copy_target);
    g_test_add_func("/scsi-disk/xcopy/copy-status", test_copy_status);
    g_test_add_func("/scsi-disk/xcopy/operating-parameters", test_operating_parameters);
    g_test_add_func("/scsi-disk/xcopy/running", test_running_copy);
    g_test_add_func("/scsi-disk/xcopy/failed", test_failed_copy);
    g_test_add_func("/scsi-disk/xcopy/copies-at-once", test_copies_at_once);
    g_test_add_func("/scsi-disk/xcopy/waits-for-compare-and-write",
                    test_destination_waits_for_compare_and_write);
    g_test_add_func("/scsi-disk/xcopy/vpd-page", test_vpd_page);
    g_test_add_func("/scsi-disk/xcopy/report-supported-opcodes",
                    test_report_supported_opcodes);
    return g_test_run();
}
