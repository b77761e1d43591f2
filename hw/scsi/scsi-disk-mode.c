/*
 * The mode parameter command family: MODE SENSE and MODE SELECT (6) and
 * (10) for the caching and control pages.  Only WCE is changeable; turning
 * the write cache off flushes what it held before the command completes.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include "scsi-disk-int.h"
#include "scsi-disk-ops.h"

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
        return sd_sense_done(cmd, SCSI_SC_SAVING_PARAMS_UNSUPPORTED);
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
            st64(d, sd_nb_blocks(lun));
            st32(d + 12, lun->bs);
        } else {
            st32(d, sd_nb_blocks(lun) > 0xffffffff ? 0xffffffff : (uint32_t)sd_nb_blocks(lun));
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
            sd_sense_done(cmd, SCSI_SC_PARAM_LIST_LENGTH_ERROR);
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
        return sd_sense_done(cmd, SCSI_SC_PARAM_LIST_LENGTH_ERROR);
    }
    p = g_malloc(plen);
    iov_to_buf(cmd->data_out, cmd->data_out_cnt, 0, p, plen);
    cmd->data_out_xfer = plen;
    bdlen = ten ? ld16(p + 6) : p[3];
    if (bdlen != 0 && bdlen != (ten && (p[4] & 1) ? 16u : 8u)) {   /* LONGLBA: 16 */
        return invalid_param(cmd, ten ? 6 : 3, 7);
    }
    if (hdr + bdlen > plen) {
        return sd_sense_done(cmd, SCSI_SC_PARAM_LIST_LENGTH_ERROR);
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
        log_limit_message(&lun->log_limit, "%s: write cache %s", lun->name,
                          new_wce ? "enabled" : "disabled");
    }
    /* Turning the cache off: what it held must be durable from now on. */
    if (old_wce && !new_wce && lun->be->write_cache) {
        return sd_start_flush(lun, cmd);
    }
    cmd->status = SAM_STAT_GOOD;
    return EXEC_DONE;
}
