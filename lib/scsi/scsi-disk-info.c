/*
 * The commands a SCSI disk answers from its own state rather than its
 * medium: standard and VPD INQUIRY, READ CAPACITY, REQUEST SENSE, MODE
 * SENSE / MODE SELECT (caching and control pages), REPORT SUPPORTED
 * OPERATION CODES; and the target-level answers (REPORT LUNS, commands to
 * an absent LUN).  Sense building is scsi-sense.c's.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include "scsi-disk-int.h"

/* ---- INQUIRY ----------------------------------------------------------- */

static void pad_copy(uint8_t *dst, const char *src, size_t len)
{
    size_t n = MIN(strlen(src), len);

    memset(dst, ' ', len);
    memcpy(dst, src, n);
}

static size_t std_inquiry(const struct scsi_lun *lun, uint8_t *b)
{
    static const uint16_t versions[] = { 0x00a0 /* SAM-5 */, 0x0460 /* SPC-4 */,
                                         0x04c0 /* SBC-3 */ };

    memset(b, 0, 74);
    b[0] = 0x00;            /* qualifier 0, direct access block device */
    b[2] = 0x06;            /* SPC-4 */
    b[3] = 0x02;            /* response data format 2 */
    b[4] = 74 - 5;
    b[7] = 0x02;            /* CMDQUE */
    pad_copy(b + 8, lun->vendor, 8);
    pad_copy(b + 16, lun->product, 16);
    pad_copy(b + 32, "0001", 4);
    for (unsigned i = 0; i < G_N_ELEMENTS(versions); i++) {
        st16(b + 58 + 2 * i, versions[i]);
    }
    return 74;
}

static const uint8_t vpd_pages[] = { 0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2 };

/* Fills a VPD page into b (REPLY_MAX bytes); returns its length or 0 if unknown. */
static size_t vpd_page(const struct scsi_lun *lun, uint8_t page, uint8_t *b)
{
    const struct lun_backend *be = lun->be;
    size_t len;

    memset(b, 0, REPLY_MAX);
    b[1] = page;
    switch (page) {
    case 0x00:
        memcpy(b + 4, vpd_pages, sizeof(vpd_pages));
        len = 4 + sizeof(vpd_pages);
        break;
    case 0x80:
        len = strlen(lun->serial);
        memcpy(b + 4, lun->serial, len);
        len += 4;
        break;
    case 0x83: {
        uint8_t *d = b + 4;
        size_t sl = strlen(lun->serial);

        d[0] = 0x01;        /* binary */
        d[1] = 0x03;        /* LUN association, NAA */
        d[3] = 8;
        st64(d + 4, lun->naa);
        d += 12;
        d[0] = 0x02;        /* ASCII */
        d[1] = 0x01;        /* LUN association, T10 vendor id */
        d[3] = (uint8_t)(8 + sl);
        pad_copy(d + 4, lun->vendor, 8);
        memcpy(d + 12, lun->serial, sl);
        d += 12 + sl;
        len = (size_t)(d - b);
        break;
    }
    case 0xb0: {
        uint32_t max_xfer = sd_max_xfer_bytes(lun) / lun->bs;

        b[4] = 0x01;        /* WSNZ: WRITE SAME needs a non-zero length */
        st16(b + 6, 1);
        st32(b + 8, max_xfer);
        st32(b + 12, MIN(OPT_XFER_BYTES / lun->bs, max_xfer));
        if (be->can_discard) {
            st32(b + 20, MAX_UNMAP_LBAS);
            st32(b + 24, MAX_UNMAP_DESCS);
            st32(b + 28, MAX(4096u / lun->bs, 1u));
        }
        st64(b + 36, MAX_WRITE_SAME_LBAS);
        len = 64;
        break;
    }
    case 0xb1:
        st16(b + 4, 1);     /* non-rotating medium */
        len = 64;
        break;
    case 0xb2:
        if (be->can_discard) {
            b[5] = 0x80 | 0x40 | 0x20;              /* LBPU, LBPWS, LBPWS10 */
            b[5] |= be->discard_zeroes ? 0x04 : 0;  /* LBPRZ */
            b[6] = 0x02;                            /* thin provisioned */
        }
        len = 8;
        break;
    default:
        return 0;
    }
    st16(b + 2, (uint16_t)(len - 4));
    return len;
}

int sd_exec_inquiry(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    unsigned alloc = ld16(cdb + 3);
    uint8_t b[REPLY_MAX];
    size_t len;

    if (cdb[1] & 0x02) {
        return invalid_cdb(cmd, 1, 1);   /* CMDDT (obsolete) */
    }
    if (!(cdb[1] & 0x01)) {
        if (cdb[2]) {
            return invalid_cdb(cmd, 2, 7);
        }
        len = std_inquiry(lun, b);
        return sd_reply(cmd, b, len, alloc);
    }
    len = vpd_page(lun, cdb[2], b);
    if (!len) {
        return invalid_cdb(cmd, 2, 7);
    }
    return sd_reply(cmd, b, len, alloc);
}

/* ---- READ CAPACITY ----------------------------------------------------- */

int sd_exec_read_capacity_10(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    uint8_t b[8];
    uint64_t last = lun->nb_blocks - 1;

    /* Too big for 32 bits: FFFFFFFFh tells the initiator to use (16). */
    st32(b, last > 0xfffffffe ? 0xffffffff : (uint32_t)last);
    st32(b + 4, lun->bs);
    return sd_reply(cmd, b, sizeof(b), sizeof(b));
}

int sd_exec_read_capacity_16(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    uint8_t b[32] = { 0 };

    st64(b, lun->nb_blocks - 1);
    st32(b + 8, lun->bs);
    if (lun->be->can_discard) {
        b[14] = 0x80 | (lun->be->discard_zeroes ? 0x40 : 0);  /* LBPME, LBPRZ */
    }
    return sd_reply(cmd, b, sizeof(b), ld32(cmd->cdb + 10));
}

/* ---- REQUEST SENSE ----------------------------------------------------- */

int sd_exec_request_sense(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    uint8_t s[FIXED_SENSE_LEN];
    int ua;

    if (cmd->cdb[1] & 0x01) {
        return invalid_cdb(cmd, 1, 0);   /* DESC: only fixed format here */
    }
    ua = sd_take_ua(lun, cmd);
    if (ua >= 0) {
        sd_fill_fixed_sense(s, SENSE_UNIT_ATTENTION, sd_ua_codes[ua][0], sd_ua_codes[ua][1]);
    } else {
        sd_fill_fixed_sense(s, SENSE_NO_SENSE, 0, 0);
    }
    return sd_reply(cmd, s, sizeof(s), cmd->cdb[4]);
}

/* ---- MODE SENSE / MODE SELECT ----------------------------------------- */

enum { PC_CURRENT, PC_CHANGEABLE, PC_DEFAULT, PC_SAVED };
#define CACHING_PAGE 0x08
#define CONTROL_PAGE 0x0a
#define ALL_PAGES 0x3f
#define CACHING_WCE 0x04

/* Writes mode page `page` for page control pc into p; returns its length or 0. */
static size_t mode_page(struct scsi_lun *lun, uint8_t page, int pc, uint8_t *p)
{
    switch (page) {
    case CACHING_PAGE: {
        bool wce = pc == PC_DEFAULT ? lun->be->write_cache : atomic_load(&lun->wce);

        memset(p, 0, 20);
        p[0] = CACHING_PAGE;
        p[1] = 18;
        if (pc == PC_CHANGEABLE) {
            p[2] = CACHING_WCE;
        } else {
            p[2] = wce ? CACHING_WCE : 0;
        }
        return 20;
    }
    case CONTROL_PAGE:
        memset(p, 0, 12);
        p[0] = CONTROL_PAGE;
        p[1] = 10;
        if (pc != PC_CHANGEABLE) {
            p[3] = 0x10;    /* QUEUE ALGORITHM MODIFIER 1: unrestricted order */
            st16(p + 8, 0xffff);   /* BUSY TIMEOUT PERIOD: unlimited */
        }
        return 12;
    }
    return 0;
}

int sd_exec_mode_sense(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    bool ten = cdb[0] == OP_MODE_SENSE_10;
    bool dbd = cdb[1] & 0x08, llbaa = ten && (cdb[1] & 0x10);
    int pc = cdb[2] >> 6;
    uint8_t page = cdb[2] & 0x3f, subpage = cdb[3];
    unsigned alloc = ten ? ld16(cdb + 7) : cdb[4];
    unsigned hdr = ten ? 8 : 4, bdlen = dbd ? 0 : llbaa ? 16 : 8;
    uint8_t b[REPLY_MAX] = { 0 };
    uint8_t *p = b + hdr + bdlen;

    if (pc == PC_SAVED) {
        return sd_sense_done(cmd, SENSE_ILLEGAL_REQUEST, 0x39, 0x00);
    }
    if (subpage != 0 && !(page == ALL_PAGES && subpage == 0xff)) {
        return invalid_cdb(cmd, 3, 7);
    }
    if (page == ALL_PAGES) {
        p += mode_page(lun, CACHING_PAGE, pc, p);
        p += mode_page(lun, CONTROL_PAGE, pc, p);
    } else {
        size_t n = mode_page(lun, page, pc, p);

        if (!n) {
            return invalid_cdb(cmd, 2, 5);
        }
        p += n;
    }

    /* Header: WP for read-only LUNs; DPOFUA because FUA is honoured. */
    uint8_t dsp = (lun->be->read_only ? 0x80 : 0) | 0x10;
    size_t total = (size_t)(p - b);

    if (ten) {
        st16(b, (uint16_t)(total - 2));
        b[3] = dsp;
        b[4] = llbaa && !dbd ? 0x01 : 0;   /* LONGLBA */
        st16(b + 6, (uint16_t)bdlen);
    } else {
        b[0] = (uint8_t)(total - 1);
        b[2] = dsp;
        b[3] = (uint8_t)bdlen;
    }
    if (bdlen && pc != PC_CHANGEABLE) {
        uint8_t *d = b + hdr;

        if (bdlen == 16) {
            st64(d, lun->nb_blocks);
            st32(d + 12, lun->bs);
        } else {
            st32(d, lun->nb_blocks > 0xffffffff ? 0xffffffff : (uint32_t)lun->nb_blocks);
            st32(d + 4, lun->bs);    /* byte 4 reserved, 5..7 block length */
            d[4] = 0;
        }
    }
    return sd_reply(cmd, b, total, alloc);
}

/*
 * Checks the mode pages of a MODE SELECT parameter list from off to plen
 * against the current ones; on success *wce is the requested WCE.  On
 * failure the command's sense is set.  Called with lun->lock held.
 */
static bool parse_mode_pages(struct scsi_lun *lun, struct scsi_cmd *cmd, const uint8_t *p,
                             unsigned off, unsigned plen, bool *wce)
{
    while (off < plen) {
        uint8_t cur[REPLY_MAX];
        uint8_t code = p[off] & 0x3f;
        size_t n;

        if (plen - off < 2) {
            param_list_length_error(cmd);
            return false;
        }
        if (p[off] & 0x40) {
            invalid_param(cmd, off, 6);   /* SPF: no subpages */
            return false;
        }
        n = mode_page(lun, code, PC_CURRENT, cur);
        if (!n) {
            invalid_param(cmd, off, 5);
            return false;
        }
        if (p[off + 1] != n - 2 || off + n > plen) {
            invalid_param(cmd, off + 1, 7);
            return false;
        }
        for (size_t i = 2; i < n; i++) {
            uint8_t mask = code == CACHING_PAGE && i == 2 ? CACHING_WCE : 0;

            if ((p[off + i] ^ cur[i]) & ~mask) {
                invalid_param(cmd, off + i, -1);
                return false;
            }
        }
        if (code == CACHING_PAGE) {
            *wce = p[off + 2] & CACHING_WCE;
        }
        off += n;
    }
    return true;
}

/*
 * MODE SELECT: only WCE can change.  Every other byte of a page must match
 * its current value, as SPC requires for non-changeable fields.
 */
int sd_exec_mode_select(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    bool ten = cdb[0] == OP_MODE_SELECT_10;
    unsigned plen = ten ? ld16(cdb + 7) : cdb[4];
    unsigned hdr = ten ? 8 : 4, bdlen;
    g_autofree uint8_t *p = NULL;
    bool new_wce, old_wce, ok;

    if (cdb[1] & 0x01) {
        return invalid_cdb(cmd, 1, 0);   /* SP: nothing is saved */
    }
    if (plen == 0) {
        cmd->status = SAM_STAT_GOOD;
        return EXEC_DONE;
    }
    if (sd_data_out_size(cmd) < plen) {
        return invalid_cdb(cmd, ten ? 7 : 4, 7);
    }
    if (plen < hdr) {
        return param_list_length_error(cmd);
    }
    p = g_malloc(plen);
    iov_to_buf(cmd->data_out, cmd->data_out_cnt, 0, p, plen);
    cmd->data_out_xfer = plen;
    bdlen = ten ? ld16(p + 6) : p[3];
    if (bdlen != 0 && bdlen != (ten && (p[4] & 1) ? 16u : 8u)) {   /* LONGLBA: 16 */
        return invalid_param(cmd, ten ? 6 : 3, 7);
    }
    if (hdr + bdlen > plen) {
        return param_list_length_error(cmd);
    }
    if (bdlen) {
        /* The block length cannot change (no FORMAT UNIT). */
        const uint8_t *d = p + hdr;
        uint32_t bl = bdlen == 16 ? ld32(d + 12) : ld32(d + 4) & 0xffffff;

        if (bl != lun->bs) {
            return invalid_param(cmd, hdr + (bdlen == 16 ? 12 : 5), 7);
        }
    }

    pthread_mutex_lock(&lun->lock);
    old_wce = new_wce = atomic_load(&lun->wce);
    ok = parse_mode_pages(lun, cmd, p, hdr + bdlen, plen, &new_wce);
    if (ok) {
        atomic_store(&lun->wce, new_wce);
    }
    pthread_mutex_unlock(&lun->lock);
    if (!ok) {
        return EXEC_DONE;
    }

    if (new_wce != old_wce) {
        g_message("%s: write cache %s", lun->name, new_wce ? "enabled" : "disabled");
    }
    /* Turning the cache off: what it held must be durable from now on. */
    if (old_wce && !new_wce && lun->be->write_cache) {
        return sd_start_flush(lun, cmd);
    }
    cmd->status = SAM_STAT_GOOD;
    return EXEC_DONE;
}

/* ---- REPORT SUPPORTED OPERATION CODES ---------------------------------- */

/* Command timeouts descriptor: 30 s recommended, no nominal figure. */
static uint8_t *put_timeouts(uint8_t *p)
{
    memset(p, 0, 12);
    st16(p, 10);
    st32(p + 8, 30);
    return p + 12;
}

int sd_exec_rsoc(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    bool rctd = cdb[2] & 0x80;
    unsigned options = cdb[2] & 0x07;
    uint8_t req_op = cdb[3];
    uint16_t req_sa = ld16(cdb + 4);
    uint32_t alloc = ld32(cdb + 6);
    uint8_t b[4 + 64 * 20];   /* up to 64 commands, with timeouts */
    uint8_t *p = b;
    const struct op_desc *d = NULL;

    if (options == 0) {
        p += 4;
        for (unsigned i = 0; i < G_N_ELEMENTS(sd_op_table); i++) {
            d = &sd_op_table[i];
            if (!d->fn || !sd_op_supported(lun, d)) {
                continue;
            }
            g_assert(p + 20 <= b + sizeof(b));   /* the table outgrew b */
            memset(p, 0, 8);
            p[0] = d->opcode;
            st16(p + 2, d->sa);
            p[5] = (rctd ? 0x02 : 0) | (d->has_sa ? 0x01 : 0);
            st16(p + 6, d->cdb_len);
            p += 8;
            if (rctd) {
                p = put_timeouts(p);
            }
        }
        st32(b, (uint32_t)(p - b - 4));
        return sd_reply(cmd, b, (size_t)(p - b), alloc);
    }
    switch (options) {
    case 1:     /* by opcode: wrong for commands with service actions */
        if (sd_opcode_has_sa(req_op)) {
            return invalid_cdb(cmd, 2, 2);
        }
        d = sd_find_op(req_op, 0);
        break;
    case 2:     /* by opcode and service action */
        if (!sd_opcode_has_sa(req_op)) {
            return invalid_cdb(cmd, 2, 2);
        }
        d = sd_find_op(req_op, req_sa);
        break;
    case 3:     /* either, as the opcode says */
        d = sd_find_op(req_op, sd_opcode_has_sa(req_op) ? req_sa : 0);
        break;
    default:
        return invalid_cdb(cmd, 2, 2);
    }
    if (d && !sd_op_supported(lun, d)) {
        d = NULL;
    }
    memset(b, 0, 4);
    b[1] = (rctd ? 0x80 : 0) | (d ? 0x03 : 0x01);   /* SUPPORT: 011b / 001b */
    p = b + 4;
    if (d) {
        st16(b + 2, d->cdb_len);
        memcpy(p, d->usage, d->cdb_len);
        p += d->cdb_len;
        if (rctd) {
            p = put_timeouts(p);
        }
    }
    return sd_reply(cmd, b, (size_t)(p - b), alloc);
}

/* ---- target-level answers ---------------------------------------------- */

void scsi_report_luns(struct scsi_cmd *cmd, const uint16_t *luns, unsigned n)
{
    const uint8_t *cdb = cmd->cdb;
    uint32_t alloc;
    g_autofree uint8_t *b = NULL;

    cmd->status = SAM_STAT_GOOD;
    cmd->sense_len = 0;
    cmd->data_in_xfer = 0;
    cmd->data_out_xfer = 0;
    if (!cdb || cmd->cdb_len < 12) {
        scsi_cmd_set_sense(cmd, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
        return;
    }
    if (cdb[11] & 0x04) {
        sd_field_error(cmd, true, 11, 2);
        return;
    }
    alloc = ld32(cdb + 6);
    if (alloc < 16) {
        sd_field_error(cmd, true, 6, 7);   /* SPC-4: fewer than 16 bytes is invalid */
        return;
    }
    switch (cdb[2]) {
    case 0x00:      /* logical units */
    case 0x02:      /* everything; there are no well-known LUNs to add */
        break;
    case 0x01:      /* well-known logical units only: none are listed */
        n = 0;
        break;
    default:
        sd_field_error(cmd, true, 2, 7);
        return;
    }
    b = g_malloc0(8 + 8 * (size_t)n);
    st32(b, 8 * n);
    for (unsigned i = 0; i < n; i++) {
        uint8_t *e = b + 8 + 8 * i;

        /* Single-level LUN: peripheral addressing below 256, else flat. */
        if (luns[i] < 256) {
            e[1] = (uint8_t)luns[i];
        } else {
            e[0] = 0x40 | ((luns[i] >> 8) & 0x3f);
            e[1] = (uint8_t)luns[i];
        }
    }
    sd_reply(cmd, b, 8 + 8 * (size_t)n, alloc);
}

void scsi_no_lun_exec(struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    uint8_t b[36] = { 0 };
    uint8_t s[FIXED_SENSE_LEN];

    cmd->status = SAM_STAT_GOOD;
    cmd->sense_len = 0;
    cmd->data_in_xfer = 0;
    cmd->data_out_xfer = 0;
    if (!cdb || cmd->cdb_len < 6) {
        scsi_cmd_set_sense(cmd, SENSE_ILLEGAL_REQUEST, 0x25, 0x00);
        return;
    }
    switch (cdb[0]) {
    case OP_INQUIRY:
        /* Qualifier 011b, type 1Fh: no LUN here, nor ever will be. */
        b[0] = 0x7f;
        if (cdb[1] & 0x01) {
            b[1] = cdb[2];          /* an empty VPD page */
            sd_reply(cmd, b, 4, ld16(cdb + 3));
            return;
        }
        b[2] = 0x06;
        b[3] = 0x02;
        b[4] = sizeof(b) - 5;
        sd_reply(cmd, b, sizeof(b), ld16(cdb + 3));
        return;
    case OP_REQUEST_SENSE:
        sd_fill_fixed_sense(s, SENSE_ILLEGAL_REQUEST, 0x25, 0x00);
        sd_reply(cmd, s, sizeof(s), cdb[4]);
        return;
    default:
        scsi_cmd_set_sense(cmd, SENSE_ILLEGAL_REQUEST, 0x25, 0x00);
        return;
    }
}
