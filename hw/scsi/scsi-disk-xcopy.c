/*
 * The copy offload family (SPC-4 6.3, 6.18): EXTENDED COPY (LID1) with
 * identification (E4h) copy target descriptors naming LUNs by any
 * designator their VPD page 83h reports with the logical unit association
 * (NAA, T10 vendor id), as an initiator copies it from there, and
 * block-to-block (02h) segment descriptors; RECEIVE COPY RESULTS' COPY
 * STATUS and OPERATING PARAMETERS.
 * The LUN the command is sent to is the copy manager; its copy targets are
 * found through the sending nexus (scsi_cmd.find_lun: any LUN that nexus
 * reaches on its target, never another controller's), counted in flight on
 * them for as long as the copy runs (a LUN removed or reset meanwhile waits
 * for it, as for any command of its own), and checked up front as if the
 * nexus sent them a READ (sources) or a WRITE (destinations): reservation
 * conflicts, write protection, LBA ranges.  The whole parameter list is
 * checked before a block moves, in SPC-4's two steps (5.17.7.3-4): its
 * form (lengths, limits, descriptor types and fields) is ILLEGAL REQUEST,
 * then each segment's processing (copy targets it cannot reach, ranges,
 * inexact segments) COPY ABORTED naming the segment.  The data moves
 * through the backends' own asynchronous READ and WRITE, chunk by chunk
 * through one bounce buffer (the step engine of scsi-disk-io.c, which
 * yields the I/O thread between chunks that completed inside submit),
 * each chunk's write under the destination's write range lock, shared,
 * like any WRITE.
 *
 * Why not copy_file_range(2) where both LUNs are files: it is a blocking
 * system call (io_uring has no operation for it), so on an I/O thread it
 * would stall every queue the thread serves for as long as the kernel
 * copies, and a worker thread would be another thread and hand-off for a
 * command guests rarely send; the backend interface also hides the file
 * descriptor, so it would serve only file-to-file copies.  Read and write
 * through the backends work for every pair of backends (ram to file, file
 * to iSCSI, ...) and stay on the io_uring.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "scsi-disk-int.h"
#include "scsi-disk-ops.h"

/* Parameter list header (SPC-4 table 101): 16 bytes before the CSCD descriptors. */
#define XCOPY_HDR_LEN 16u

/* A held copy's state (COPY MANAGER STATUS, and free / running). */
enum { CR_FREE, CR_RUNNING, CR_GOOD, CR_ERROR };

/*
 * One copy known to the copy manager LUN: running, or done and held for
 * RECEIVE COPY RESULTS (SPC-4: per I_T nexus and LIST IDENTIFIER).  A
 * copy whose LIST ID USAGE is not 00b (hold: 10b discard, SPC-3's NRCR;
 * 11b the identifier unused) takes a slot while it runs (it bounds the
 * copies at once) and is never found by RECEIVE COPY RESULTS.
 */
struct sd_copy_result {
    char *initiator, *target;  /* the nexus, as reservations know it */
    uint16_t rtpi;
    uint8_t list_id;
    uint8_t state;
    bool held;                 /* LIST ID USAGE 00b: kept after completion */
    uint16_t segments;         /* SEGMENTS PROCESSED */
    uint64_t bytes;            /* TRANSFER COUNT, in bytes */
    uint64_t age;              /* when it started: the oldest done one is reused */
};

struct xc_segment {
    struct scsi_lun *src, *dst;
    uint64_t src_off, dst_off; /* bytes */
    uint64_t len;              /* bytes, whole blocks of both */
    bool backwards;            /* overlapping, destination above the source: from the end */
};

enum { XC_NEXT, XC_READ_DONE, XC_LOCKED, XC_WRITE_DONE };

struct xcopy {
    struct scsi_lun *lun;      /* the copy manager */
    struct scsi_lun *cscd[XCOPY_MAX_CSCDS];
    uint16_t cscd_rtpi[XCOPY_MAX_CSCDS];
    unsigned ncscd;
    /* Other LUNs counted in flight for the copy (each once). */
    struct scsi_lun *pinned[XCOPY_MAX_CSCDS];
    unsigned pinned_epoch[XCOPY_MAX_CSCDS];
    unsigned npinned;
    struct xc_segment seg[XCOPY_MAX_SEGMENTS];
    unsigned nseg, cur;
    uint64_t done;             /* bytes of the current segment copied */
    uint64_t max_chunk;        /* bytes of the bounce buffer: whole blocks of every LUN */
    uint64_t chunk;            /* the current request's bytes and offset in the segment */
    uint64_t chunk_at;
    int slot;                  /* in lun->copies; -1: none */
};

static const char *str_or_empty(const char *s)
{
    return s ? s : "";
}

static bool same_nexus(const struct sd_copy_result *r, const struct scsi_it_id *it)
{
    return r->rtpi == it->rtpi && strcmp(r->initiator, str_or_empty(it->initiator)) == 0 &&
           strcmp(r->target, str_or_empty(it->target)) == 0;
}

static void result_clear(struct sd_copy_result *r)
{
    g_free(r->initiator);
    g_free(r->target);
    memset(r, 0, sizeof(*r));
}

void sd_xcopy_free(struct scsi_lun *lun)
{
    for (unsigned i = 0; lun->copies && i < XCOPY_MAX_COPIES; i++) {
        result_clear(&lun->copies[i]);
    }
    g_free(lun->copies);
    lun->copies = NULL;
}

/*
 * Takes a slot for a new copy from it (under lun->lock): a held result
 * of the same list identifier is replaced, a running one refused (a
 * duplicate LIST IDENTIFIER), else a free slot or the oldest done one.
 * Returns the slot, or -1 with the refusal in *sc.
 */
static int result_take(struct scsi_lun *lun, const struct scsi_it_id *it, uint8_t list_id,
                       bool held, enum scsi_sc *sc)
{
    struct sd_copy_result *c;
    int pick = -1;
    uint64_t age = 0;
    bool matched = false;

    if (!lun->copies) {
        lun->copies = g_new0(struct sd_copy_result, XCOPY_MAX_COPIES);
    }
    c = lun->copies;
    for (unsigned i = 0; i < XCOPY_MAX_COPIES; i++) {
        age = MAX(age, c[i].age);
    }
    for (unsigned i = 0; held && i < XCOPY_MAX_COPIES; i++) {
        if (c[i].state != CR_FREE && c[i].held && c[i].list_id == list_id &&
            same_nexus(&c[i], it)) {
            if (c[i].state == CR_RUNNING) {
                *sc = SCSI_SC_OPERATION_IN_PROGRESS;
                return -1;
            }
            pick = (int)i;   /* the old result of this list identifier goes */
            matched = true;
        }
    }
    for (unsigned i = 0; pick < 0 && i < XCOPY_MAX_COPIES; i++) {
        if (c[i].state == CR_FREE) {
            pick = (int)i;
        }
    }
    for (unsigned i = 0; pick < 0 && i < XCOPY_MAX_COPIES; i++) {
        if (c[i].state != CR_RUNNING) {
            pick = (int)i;
        }
    }
    /* No free slot: the oldest result held goes. */
    for (unsigned i = 0; !matched && pick >= 0 && c[pick].state != CR_FREE &&
                         i < XCOPY_MAX_COPIES; i++) {
        if (c[i].state != CR_RUNNING && c[i].age < c[pick].age) {
            pick = (int)i;
        }
    }
    if (pick < 0) {
        *sc = SCSI_SC_INSUFFICIENT_RESOURCES;   /* XCOPY_MAX_COPIES running */
        return -1;
    }
    result_clear(&c[pick]);
    c[pick] = (struct sd_copy_result) {
        .initiator = g_strdup(str_or_empty(it->initiator)),
        .target = g_strdup(str_or_empty(it->target)),
        .rtpi = it->rtpi, .list_id = list_id, .state = CR_RUNNING, .held = held,
        .age = age + 1,
    };
    return pick;
}

/* The end of the command (op_state.ext_free): the LUNs it pinned, its result. */
static void xcopy_end(struct scsi_cmd *cmd, void *ext)
{
    struct xcopy *x = ext;

    for (unsigned i = 0; i < x->npinned; i++) {
        sd_inflight_put(x->pinned[i], x->pinned_epoch[i]);
    }
    if (x->slot >= 0) {
        struct sd_copy_result *r;

        pthread_mutex_lock(&x->lun->lock);
        r = &x->lun->copies[x->slot];
        if (r->held) {
            r->state = cmd->status == SAM_STAT_GOOD ? CR_GOOD : CR_ERROR;
        } else {
            result_clear(r);
        }
        pthread_mutex_unlock(&x->lun->lock);
    }
    g_free(x);
}

/* ---- the copy ------------------------------------------------------------ */

static void bounce(struct scsi_cmd *cmd, struct op_state *st, enum backend_op op,
                   struct scsi_lun *on, uint64_t off, uint64_t len)
{
    sd_bio_init(on, cmd, op, off, len, sd_op_bio_done);
    cmd->bio.fua = op == BACKEND_WRITE && sd_write_needs_fua(on, false);
    st->be = on->be;
    st->iov = (struct iovec) { .iov_base = st->buf, .iov_len = len };
    cmd->bio.iov = &st->iov;
    cmd->bio.iovcnt = 1;
}

/* Counts what the current segment has moved where RECEIVE COPY RESULTS reads it. */
static void account(struct xcopy *x, uint64_t bytes, bool segment_done)
{
    struct sd_copy_result *r;

    if (x->slot < 0) {
        return;
    }
    pthread_mutex_lock(&x->lun->lock);
    r = &x->lun->copies[x->slot];
    r->bytes += bytes;
    r->segments += segment_done;
    pthread_mutex_unlock(&x->lun->lock);
}

static int xcopy_step(struct scsi_lun *lun, struct scsi_cmd *cmd, struct op_state *st, int ret)
{
    struct xcopy *x = st->ext;
    struct xc_segment *s = &x->seg[MIN(x->cur, XCOPY_MAX_SEGMENTS - 1)];

    if (ret < 0) {
        /* Logged with the copy target that failed; a held range is given back at the end. */
        return sd_step_fail(st->state == XC_READ_DONE ? s->src : s->dst, cmd, ret);
    }
    switch (st->state) {
    case XC_NEXT:
        while (x->cur < x->nseg && x->done == x->seg[x->cur].len) {
            if (x->seg[x->cur].len == 0) {
                account(x, 0, true);   /* nothing to move: processed as it stands */
            }
            x->cur++;
            x->done = 0;
        }
        if (x->cur == x->nseg) {
            cmd->status = SAM_STAT_GOOD;
            return STEP_DONE;
        }
        s = &x->seg[x->cur];
        x->chunk = MIN(s->len - x->done, x->max_chunk);
        /* memmove order: from the end when the destination overlaps above the source. */
        x->chunk_at = s->backwards ? s->len - x->done - x->chunk : x->done;
        bounce(cmd, st, BACKEND_READ, s->src, s->src_off + x->chunk_at, x->chunk);
        st->state = XC_READ_DONE;
        return STEP_SUBMIT;
    case XC_READ_DONE:
        st->range_lun = s->dst;
        st->range_lba = (s->dst_off + x->chunk_at) / s->dst->bs;
        st->range_n = x->chunk / s->dst->bs;
        st->state = XC_LOCKED;
        return STEP_RANGE;
    case XC_LOCKED:
        bounce(cmd, st, BACKEND_WRITE, s->dst, s->dst_off + x->chunk_at, x->chunk);
        st->state = XC_WRITE_DONE;
        return STEP_SUBMIT;
    default:
        sd_op_range_unlock(cmd, st);
        x->done += x->chunk;
        account(x, x->chunk, x->done == s->len);
        st->state = XC_NEXT;
        return xcopy_step(lun, cmd, st, 0);
    }
}

/* ---- EXTENDED COPY: the parameter list ----------------------------------- */

static uint32_t ld24(const uint8_t *p)
{
    return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

/* Counts other in flight for the copy (once per LUN), before the dispatch returns. */
static void pin(struct xcopy *x, struct scsi_lun *other)
{
    if (other == x->lun) {
        return;
    }
    for (unsigned i = 0; i < x->npinned; i++) {
        if (x->pinned[i] == other) {
            return;
        }
    }
    x->pinned[x->npinned] = other;
    /* Slot 0: put back by xcopy_end, on whichever thread ends the copy. */
    x->pinned_epoch[x->npinned++] = sd_inflight_get(other, 0);
}

/* Block device types (SPC-4 table 134): their CSCD parameters are PAD and DISK BLOCK LENGTH. */
static bool block_device_type(uint8_t pdt)
{
    return pdt == 0x00 || pdt == 0x04 || pdt == 0x05 || pdt == 0x07 || pdt == 0x0e;
}

/*
 * Whether the designator of an identification CSCD descriptor (its bytes
 * 4 to 27, laid out as a designation descriptor) is one the LUN reports
 * in VPD page 83h with the logical unit association: the same association,
 * designator type, length and bytes, a binary designator as binary and an
 * ASCII one as ASCII or UTF-8 (whose bytes are the same for ASCII text).
 * The PROTOCOL IDENTIFIER and PIV bits, which an initiator may copy from
 * the page along with the rest, mean nothing for a logical unit's
 * designator and are not compared.
 */
static bool names_lun(const struct scsi_lun *lun, const void *arg)
{
    const uint8_t *want = arg;
    uint8_t d[SD_LU_DESIGNATORS_MAX];
    size_t len = sd_lu_designators(lun, d);
    bool want_text = (want[0] & 0x0f) == 0x02 || (want[0] & 0x0f) == 0x03;

    for (size_t at = 0; at + 4 <= len; at += 4 + (size_t)d[at + 3]) {
        const uint8_t *have = d + at;
        bool text = (have[0] & 0x0f) == 0x02 || (have[0] & 0x0f) == 0x03;

        if ((text ? want_text : (want[0] & 0x0f) == (have[0] & 0x0f)) &&
            (have[1] & 0x3f) == (want[1] & 0x3f) && have[3] == want[3] &&
            memcmp(have + 4, want + 4, want[3]) == 0) {
            return true;
        }
    }
    return false;
}

/*
 * An identification CSCD descriptor (SPC-4 6.4.5.6) at byte at of the
 * list, as x->cscd[i]: the LUN its designator names, NULL if none this
 * nexus reaches (unreachable: refused when a segment uses it, 5.17.7.4).
 * EXEC_DONE with the refusal set if the descriptor itself is invalid.
 */
static int parse_cscd(struct scsi_cmd *cmd, struct xcopy *x, const uint8_t *d, unsigned at,
                      unsigned i)
{
    struct scsi_lun *l = NULL;
    uint16_t rtpi = cmd->it.rtpi;
    uint8_t pdt = d[1] & 0x1f;
    uint32_t disk_bs = ld24(d + 29);

    if (d[0] != XCOPY_CSCD_ID_DESC) {
        return sd_sense_done(cmd, SCSI_SC_UNSUPPORTED_TARGET_DESC);
    }
    /* LU ID TYPE (byte 1, bits 7-6) is ignored in this descriptor. */
    /* Stream and processor devices have other parameters: copies between block devices only. */
    if (pdt == 0x01 || pdt == 0x03) {
        return sd_sense_done(cmd, SCSI_SC_UNSUPPORTED_TARGET_DESC);
    }
    if (!block_device_type(pdt)) {
        return invalid_param(cmd, at + 1, 4);   /* a reserved PERIPHERAL DEVICE TYPE */
    }
    /*
     * Bit 5, obsolete in SPC-4, was SPC-3's NUL: a null device no data may
     * reach.  Copying to or from the LU the designator names instead is
     * not what an initiator setting it asks for.
     */
    if (d[1] & 0x20) {
        return invalid_param(cmd, at + 1, 5);
    }
    if (d[7] > 20) {
        return invalid_param(cmd, at + 7, 7);   /* DESIGNATOR LENGTH: 20 or less */
    }
    if (names_lun(x->lun, d + 4)) {
        l = x->lun;
    } else if (cmd->find_lun) {
        l = cmd->find_lun(cmd->find_ctx, names_lun, d + 4, &rtpi);
    }
    if (!l) {
        g_debug("%s: EXTENDED COPY's CSCD descriptor %u names no LUN reachable", x->lun->name, i);
        return EXEC_ASYNC;
    }
    pin(x, l);
    /* DISK BLOCK LENGTH: the LUN's, or 0 on a direct-access device (the copy manager knows it). */
    if (disk_bs != l->bs && !(disk_bs == 0 && pdt == 0x00)) {
        return invalid_param(cmd, at + 29, 7);
    }
    x->cscd[i] = l;
    x->cscd_rtpi[i] = rtpi;
    return EXEC_ASYNC;
}

/* The nexus as copy target c sees it: the sender, on the port it reaches c by. */
static struct scsi_it_id cscd_it(const struct scsi_cmd *cmd, const struct xcopy *x, unsigned c)
{
    struct scsi_it_id it = cmd->it;

    if (!it.initiator) {
        it = (struct scsi_it_id){ "", "", 0 };  /* the LUN's own nexus, as the dispatch has it */
    }
    if (x->cscd[c] != x->lun) {
        it.rtpi = x->cscd_rtpi[c];
    }
    return it;
}

/*
 * COPY ABORTED for an error found processing segment seg (SPC-4 5.17.7.4):
 * the segment number in bytes 2-3 of COMMAND-SPECIFIC INFORMATION, and the
 * segment pointer (SKSV, no bit pointer) to byte of that segment
 * descriptor (SD set) or of the parameter list (a CSCD descriptor).
 * INFORMATION stays invalid: nothing was written.  EXEC_DONE.
 */
static int segment_abort(struct scsi_cmd *cmd, enum scsi_sc sc, unsigned seg, bool in_segment,
                         unsigned byte)
{
    sd_set_sense(cmd, sc);
    st16(cmd->sense + 10, (uint16_t)seg);
    cmd->sense[15] = 0x80 | (in_segment ? 0x20 : 0);
    st16(cmd->sense + 16, (uint16_t)byte);
    return EXEC_DONE;
}

/* The form of a segment descriptor at byte at (checked before any segment is processed). */
static int check_segment_form(struct scsi_cmd *cmd, const uint8_t *d, unsigned at, unsigned left)
{
    if (left < 4) {
        return sd_sense_done(cmd, SCSI_SC_PARAM_LIST_LENGTH_ERROR);
    }
    if (d[0] != XCOPY_SEG_BLOCK_TO_BLOCK) {
        return sd_sense_done(cmd, SCSI_SC_UNSUPPORTED_SEGMENT_DESC);
    }
    if (ld16(d + 2) != XCOPY_SEGMENT_LEN - 4) {
        return invalid_param(cmd, at + 2, 7);
    }
    if (left < XCOPY_SEGMENT_LEN) {
        return sd_sense_done(cmd, SCSI_SC_PARAM_LIST_LENGTH_ERROR);
    }
    if (d[1] & 0xfc) {
        return invalid_param(cmd, at + 1, 7);   /* reserved */
    }
    return EXEC_ASYNC;
}

/*
 * Segment i, a block-to-block segment descriptor of a valid form: its
 * copy targets, its ranges and the destination's state (what a WRITE from
 * the nexus would be told), as x->seg[i].  Every segment is processed so
 * before the first block moves, so a refused copy has written nothing;
 * what SPC-4 5.17.7.4 counts as errors of segment processing is COPY
 * ABORTED naming the segment.  EXEC_DONE with the refusal set if it
 * cannot run.
 */
static int parse_segment(struct scsi_cmd *cmd, struct xcopy *x, const uint8_t *d, unsigned i)
{
    static const uint8_t rd16[16] = { OP_READ_16 }, wr16[16] = { OP_WRITE_16 };
    struct xc_segment *s = &x->seg[i];
    uint16_t src = ld16(d + 4), dst = ld16(d + 6);
    uint32_t n = ld16(d + 10);
    uint64_t src_lba = ld64(d + 12), dst_lba = ld64(d + 20);
    struct scsi_it_id it;

    /* Past the list, or a special CSCD DESCRIPTOR ID (VPD 8Fh offers none): not accessible (6.4.6.1). */
    if (src >= x->ncscd) {
        return segment_abort(cmd, SCSI_SC_UNREACHABLE_COPY_TARGET, i, true, 4);
    }
    if (dst >= x->ncscd) {
        return segment_abort(cmd, SCSI_SC_UNREACHABLE_COPY_TARGET, i, true, 6);
    }
    /* A designator naming no LUN this nexus reaches: the pointer is to its CSCD descriptor. */
    if (!x->cscd[src]) {
        return segment_abort(cmd, SCSI_SC_COPY_TARGET_UNREACHABLE, i, false,
                             XCOPY_HDR_LEN + src * XCOPY_CSCD_LEN);
    }
    if (!x->cscd[dst]) {
        return segment_abort(cmd, SCSI_SC_COPY_TARGET_UNREACHABLE, i, false,
                             XCOPY_HDR_LEN + dst * XCOPY_CSCD_LEN);
    }
    s->src = x->cscd[src];
    s->dst = x->cscd[dst];
    /* DC: NUMBER OF BLOCKS counts destination blocks, else source blocks. */
    s->len = (uint64_t)n * ((d[1] & 0x02) ? s->dst->bs : s->src->bs);
    /* Not whole blocks of both: a residue we neither pad nor carry (CAT) to the next. */
    if (s->len % s->src->bs || s->len % s->dst->bs) {
        return segment_abort(cmd, SCSI_SC_UNEXPECTED_INEXACT_SEGMENT, i, true, 10);
    }
    if (s->len > XCOPY_MAX_SEGMENT_BYTES) {
        return segment_abort(cmd, SCSI_SC_COPY_INVALID_FIELD, i, true, 10);
    }
    /*
     * A range past a copy target's end, which its READ or WRITE would
     * refuse.  SPC-4 leaves the additional sense code of an error in a
     * segment descriptor open (5.17.7.4 g); the field pointer names the
     * LBA.  Not LOGICAL BLOCK ADDRESS OUT OF RANGE, which an initiator
     * reads as its own command's LBA (and conformance suites, libiscsi's
     * among them, expect none but NO ADDITIONAL SENSE INFORMATION or an
     * unreachable target here).
     */
    if (!sd_range_ok(s->src, src_lba, s->len / s->src->bs)) {
        return segment_abort(cmd, SCSI_SC_COPY_ABORTED, i, true, 12);
    }
    if (!sd_range_ok(s->dst, dst_lba, s->len / s->dst->bs)) {
        return segment_abort(cmd, SCSI_SC_COPY_ABORTED, i, true, 20);
    }
    it = cscd_it(cmd, x, src);
    if (scsi_pr_conflicts(s->src->pr, &it, rd16, sizeof(rd16))) {
        cmd->status = SAM_STAT_RESERVATION_CONFLICT;
        return EXEC_DONE;
    }
    it = cscd_it(cmd, x, dst);
    if (scsi_pr_conflicts(s->dst->pr, &it, wr16, sizeof(wr16))) {
        cmd->status = SAM_STAT_RESERVATION_CONFLICT;
        return EXEC_DONE;
    }
    if (s->dst->be->read_only) {
        return sd_sense_done(cmd, SCSI_SC_WRITE_PROTECTED);
    }
    /* A copy target being sanitized (or failed to be) is refused as a READ or WRITE to it is. */
    if (sd_sanitize_gate(s->src, cmd, false, true) == EXEC_DONE ||
        sd_sanitize_gate(s->dst, cmd, false, true) == EXEC_DONE) {
        return EXEC_DONE;
    }
    s->src_off = src_lba * s->src->bs;
    s->dst_off = dst_lba * s->dst->bs;
    s->backwards = s->src == s->dst && s->dst_off > s->src_off &&
                   s->dst_off < s->src_off + s->len;
    return EXEC_ASYNC;
}

int sd_exec_extended_copy(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    uint32_t plen = ld32(cmd->cdb + 10);
    uint8_t hdr[XCOPY_HDR_LEN];
    uint32_t cscd_len, seg_len, inline_len;
    g_autofree uint8_t *p = NULL;
    struct op_state *st;
    struct xcopy *x;
    uint64_t chunk = UINT64_MAX, unit = 0;
    enum scsi_sc sc = SCSI_SC_INSUFFICIENT_RESOURCES;
    unsigned seg_at[XCOPY_MAX_SEGMENTS], nseg = 0;
    unsigned at;

    if (plen == 0) {
        cmd->status = SAM_STAT_GOOD;            /* SPC-4: no parameter data is no error */
        return EXEC_DONE;
    }
    if (plen < XCOPY_HDR_LEN) {
        return sd_sense_done(cmd, SCSI_SC_PARAM_LIST_LENGTH_ERROR);
    }
    if (sd_data_out_size(cmd) < plen) {
        return invalid_cdb(cmd, 10, 7);
    }
    iov_to_buf(cmd->data_out, cmd->data_out_cnt, 0, hdr, sizeof(hdr));
    cscd_len = ld16(hdr + 2);
    seg_len = ld32(hdr + 8);
    inline_len = ld32(hdr + 12);
    if (hdr[1] & 0xc0) {
        return invalid_param(cmd, 1, 7);        /* reserved bits */
    }
    if ((hdr[1] & 0x18) == 0x08) {
        return invalid_param(cmd, 1, 4);        /* LIST ID USAGE 01b is reserved */
    }
    for (unsigned i = 4; i < 8; i++) {
        if (hdr[i]) {
            return invalid_param(cmd, i, 7);
        }
    }
    /*
     * Against the limits we report, before the lengths are trusted for
     * anything else: the whole list against MAXIMUM DESCRIPTOR LIST LENGTH
     * first (PARAMETER LIST LENGTH ERROR, SPC-4 6.4.3.5), then the counts.
     */
    if ((uint64_t)cscd_len + seg_len > XCOPY_MAX_DESC_LIST) {
        return sd_sense_done(cmd, SCSI_SC_PARAM_LIST_LENGTH_ERROR);
    }
    if (cscd_len > XCOPY_MAX_CSCDS * XCOPY_CSCD_LEN) {
        return sd_sense_done(cmd, SCSI_SC_TOO_MANY_TARGET_DESCS);
    }
    if (seg_len > XCOPY_MAX_SEGMENTS * XCOPY_SEGMENT_LEN) {
        return sd_sense_done(cmd, SCSI_SC_TOO_MANY_SEGMENT_DESCS);
    }
    if (inline_len) {
        return invalid_param(cmd, 12, 7);       /* MAXIMUM INLINE DATA LENGTH is 0 */
    }
    if (cscd_len % XCOPY_CSCD_LEN || (uint64_t)XCOPY_HDR_LEN + cscd_len + seg_len > plen) {
        return sd_sense_done(cmd, SCSI_SC_PARAM_LIST_LENGTH_ERROR);
    }
    p = g_malloc(XCOPY_HDR_LEN + cscd_len + seg_len);
    iov_to_buf(cmd->data_out, cmd->data_out_cnt, 0, p, XCOPY_HDR_LEN + cscd_len + seg_len);
    cmd->data_out_xfer = plen;

    /* From here the op frees what a refusal leaves: the pinned LUNs with it. */
    st = sd_op_new(cmd, xcopy_step);
    x = g_new0(struct xcopy, 1);
    x->lun = lun;
    x->slot = -1;
    st->ext = x;
    st->ext_free = xcopy_end;
    x->ncscd = cscd_len / XCOPY_CSCD_LEN;
    for (unsigned i = 0; i < x->ncscd; i++) {
        at = XCOPY_HDR_LEN + i * XCOPY_CSCD_LEN;
        if (parse_cscd(cmd, x, p + at, at, i) == EXEC_DONE) {
            return EXEC_DONE;
        }
    }
    /* Segments: each says its own length; the one type we take is 28 bytes. */
    at = XCOPY_HDR_LEN + cscd_len;
    while (at < XCOPY_HDR_LEN + cscd_len + seg_len) {
        if (check_segment_form(cmd, p + at, at, XCOPY_HDR_LEN + cscd_len + seg_len - at) ==
            EXEC_DONE) {
            return EXEC_DONE;
        }
        seg_at[nseg++] = at;
        at += XCOPY_SEGMENT_LEN;
    }
    /* The list is well formed: the segments are processed, in order. */
    for (x->nseg = 0; x->nseg < nseg; x->nseg++) {
        if (parse_segment(cmd, x, p + seg_at[x->nseg], x->nseg) == EXEC_DONE) {
            return EXEC_DONE;
        }
        chunk = MIN(chunk, MIN(sd_chunk_bytes(x->seg[x->nseg].src),
                               sd_chunk_bytes(x->seg[x->nseg].dst)));
        unit = MAX(unit, MAX(x->seg[x->nseg].src->bs, x->seg[x->nseg].dst->bs));
    }
    pthread_mutex_lock(&lun->lock);
    x->slot = result_take(lun, &cmd->it, p[0], (p[1] & 0x18) == 0, &sc);
    pthread_mutex_unlock(&lun->lock);
    if (x->slot < 0) {
        return sd_sense_done(cmd, sc);
    }
    if (!x->nseg) {
        cmd->status = SAM_STAT_GOOD;
        return EXEC_DONE;
    }
    /* Block sizes are powers of two: a chunk of whole blocks of every LUN involved. */
    x->max_chunk = MAX(chunk / unit * unit, unit);
    /*
     * Cleared: a source may write nothing into it (null, fill=none), and
     * what it holds goes to the destination, which a guest reads.
     */
    st->buf = g_malloc0(x->max_chunk);
    st->state = XC_NEXT;
    return sd_op_start(lun, cmd, st);
}

/* ---- RECEIVE COPY RESULTS ------------------------------------------------ */

static int copy_status(struct scsi_lun *lun, struct scsi_cmd *cmd, uint32_t alloc)
{
    struct scsi_it_id it = cmd->it;
    uint8_t b[12] = { 0 };
    int found = -1;

    if (!it.initiator) {
        it = (struct scsi_it_id){ "", "", 0 };
    }
    pthread_mutex_lock(&lun->lock);
    for (unsigned i = 0; lun->copies && i < XCOPY_MAX_COPIES; i++) {
        const struct sd_copy_result *r = &lun->copies[i];

        if (r->state != CR_FREE && r->held && r->list_id == cmd->cdb[2] &&
            same_nexus(r, &it)) {
            uint64_t bytes = r->bytes;
            uint8_t units = 0;

            /* TRANSFER COUNT UNITS: bytes, KiB, MiB, ... whichever fits 32 bits. */
            while (bytes > UINT32_MAX) {
                bytes >>= 10;
                units++;
            }
            st32(b, sizeof(b) - 4);
            b[4] = r->state == CR_RUNNING ? 0x00 : r->state == CR_GOOD ? 0x01 : 0x02;
            st16(b + 5, r->segments);
            b[7] = units;
            st32(b + 8, (uint32_t)bytes);
            found = (int)i;
            break;
        }
    }
    pthread_mutex_unlock(&lun->lock);
    if (found < 0) {
        return invalid_cdb(cmd, 2, 7);          /* no copy with that LIST IDENTIFIER */
    }
    return sd_reply(cmd, b, sizeof(b), alloc);
}

static int operating_parameters(struct scsi_lun *lun, struct scsi_cmd *cmd, uint32_t alloc)
{
    uint8_t b[44 + 2] = { 0 };

    st32(b, sizeof(b) - 4);
    b[4] = 0x01;                                  /* SNLID: LID1 is all there is */
    st16(b + 8, XCOPY_MAX_CSCDS);
    st16(b + 10, XCOPY_MAX_SEGMENTS);
    st32(b + 12, XCOPY_MAX_DESC_LIST);
    st32(b + 16, XCOPY_MAX_SEGMENT_BYTES);
    st32(b + 20, 0);                              /* MAXIMUM INLINE DATA LENGTH */
    st32(b + 24, 0);                              /* HELD DATA LIMIT: none held */
    st32(b + 28, 0);                              /* no stream devices */
    st16(b + 34, XCOPY_MAX_COPIES);               /* TOTAL CONCURRENT COPIES */
    b[36] = XCOPY_MAX_COPIES;                     /* MAXIMUM CONCURRENT COPIES */
    b[37] = (uint8_t)__builtin_ctz(lun->bs);      /* DATA SEGMENT GRANULARITY: a block */
    b[43] = 2;                                    /* the implemented descriptor types */
    b[44] = XCOPY_SEG_BLOCK_TO_BLOCK;
    b[45] = XCOPY_CSCD_ID_DESC;
    return sd_reply(cmd, b, sizeof(b), alloc);
}

int sd_exec_receive_copy_results(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    uint32_t alloc = ld32(cmd->cdb + 10);

    /* The dispatch takes only the service actions in the command table. */
    if ((cmd->cdb[1] & 0x1f) == RCR_SA_OPERATING_PARAMETERS) {
        return operating_parameters(lun, cmd, alloc);
    }
    return copy_status(lun, cmd, alloc);
}
