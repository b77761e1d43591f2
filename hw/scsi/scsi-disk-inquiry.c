/*
 * The identification command family, answered from the LUN's own state:
 * standard and VPD INQUIRY, READ CAPACITY (10) and (16), and REQUEST SENSE
 * (which reports a pending unit attention, a SANITIZE in progress with its
 * progress or one that failed, or NO SENSE).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include "scsi-disk-int.h"
#include "scsi-disk-ops.h"

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
    b[5] = 0x08;            /* 3PC: EXTENDED COPY (scsi-disk-xcopy.c) */
    b[7] = 0x02;            /* CMDQUE */
    pad_copy(b + 8, lun->vendor, 8);
    pad_copy(b + 16, lun->product, 16);
    pad_copy(b + 32, "0001", 4);
    for (unsigned i = 0; i < G_N_ELEMENTS(versions); i++) {
        st16(b + 58 + 2 * i, versions[i]);
    }
    return 74;
}

static const uint8_t vpd_pages[] = { 0x00, 0x80, 0x83, 0x8f, 0xb0, 0xb1, 0xb2 };

/* A third-party copy descriptor's header; returns where its parameters start. */
static uint8_t *tpc_desc(uint8_t *d, uint16_t type, uint16_t len)
{
    st16(d, type);
    st16(d + 2, len);       /* after these 4 bytes; every descriptor is whole 4-byte words */
    return d + 4;
}

/*
 * Third-party Copy (SPC-4 7.8.17): what scsi-disk-xcopy.c does and the
 * limits it enforces.  Returns the page's end.
 */
static uint8_t *vpd_third_party_copy(const struct scsi_lun *lun, uint8_t *d)
{
    uint8_t *q;

    /* Supported Commands: EXTENDED COPY (LID1), RECEIVE COPY RESULTS' two service actions. */
    q = tpc_desc(d, 0x0001, 8);
    q[0] = 7;               /* COMMANDS SUPPORTED LIST LENGTH */
    q[1] = OP_EXTENDED_COPY;
    q[2] = 1;
    q[3] = XCOPY_SA_LID1;
    q[4] = OP_RECEIVE_COPY_RESULTS;
    q[5] = 2;
    q[6] = RCR_SA_COPY_STATUS;
    q[7] = RCR_SA_OPERATING_PARAMETERS;
    d = q + 8;
    /* Parameter Data. */
    q = tpc_desc(d, 0x0004, 28);
    st16(q + 4, XCOPY_MAX_CSCDS);
    st16(q + 6, XCOPY_MAX_SEGMENTS);
    st32(q + 8, XCOPY_MAX_DESC_LIST);
    st32(q + 12, 0);        /* MAXIMUM INLINE DATA LENGTH */
    d = q + 28;
    /* Supported Descriptors: the block-to-block segment, the identification CSCD. */
    q = tpc_desc(d, 0x0008, 4);
    q[0] = 2;
    q[1] = XCOPY_SEG_BLOCK_TO_BLOCK;
    q[2] = XCOPY_CSCD_ID_DESC;
    d = q + 4;
    /* Supported CSCD Descriptor IDs: none of the special ones, only list indexes. */
    q = tpc_desc(d, 0x000c, 4);
    st16(q, 0);
    d = q + 4;
    /* General Copy Operations: copies at once, MAXIMUM SEGMENT LENGTH, granularity. */
    q = tpc_desc(d, 0x8001, 32);
    st32(q, XCOPY_MAX_COPIES);        /* TOTAL CONCURRENT COPIES */
    st32(q + 4, XCOPY_MAX_COPIES);    /* MAXIMUM IDENTIFIED CONCURRENT COPIES */
    st32(q + 8, XCOPY_MAX_SEGMENT_BYTES);
    q[12] = (uint8_t)__builtin_ctz(lun->bs);   /* DATA SEGMENT GRANULARITY */
    q[13] = 0;                                  /* INLINE DATA GRANULARITY */
    return q + 32;
}

/*
 * The logical unit's designation descriptors (SPC-4 7.8.6), as VPD page
 * 83h lists them and as EXTENDED COPY's identification CSCD descriptors
 * name the LUN (scsi-disk-xcopy.c); returns their length.
 */
size_t sd_lu_designators(const struct scsi_lun *lun, uint8_t *d)
{
    uint8_t *start = d;
    size_t sl = strlen(lun->serial);

    memset(d, 0, SD_LU_DESIGNATORS_MAX);
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
    return (size_t)(d - start);
}

/*
 * OPTIMAL TRANSFER LENGTH GRANULARITY: the backend's (an RBD object), else
 * the physical block (a 512e LUN's 4 KiB: Linux's io_min, where a guest
 * aligns its partitions and file system), in logical blocks.  One the
 * physical block does not divide, or beyond 16 bits of blocks, cannot be
 * said: the physical block instead.
 */
static uint16_t opt_granularity(const struct scsi_lun *lun)
{
    uint32_t phys = sd_atomic_granularity(lun);
    uint32_t g = lun->be->opt_granularity / lun->bs;

    return g > phys && g <= 0xffff && g % phys == 0 ? (uint16_t)g : (uint16_t)phys;
}

/*
 * OPTIMAL UNMAP GRANULARITY: the backend's discard granularity (4 KiB if it
 * names none), at least the physical block, in whole physical blocks: a
 * discard of part of one deallocates nothing on a device that maps whole
 * ones, and Windows sizes its retrim ranges by it.
 */
static uint32_t unmap_granularity(const struct scsi_lun *lun)
{
    uint32_t phys = sd_atomic_granularity(lun);
    uint32_t g = MAX((lun->be->discard_granularity ? lun->be->discard_granularity : 4096u) /
                     lun->bs, 1u);

    return (g + phys - 1) / phys * phys;
}

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
    case 0x83:
        len = 4 + sd_lu_designators(lun, b + 4);
        break;
    case 0x8f:
        len = (size_t)(vpd_third_party_copy(lun, b + 4) - b);
        break;
    case 0xb0: {
        uint32_t max_xfer = sd_max_xfer_bytes(lun) / lun->bs;

        b[4] = 0x01;        /* WSNZ: WRITE SAME needs a non-zero length */
        b[5] = (uint8_t)sd_max_caw_blocks(lun);   /* MAXIMUM COMPARE AND WRITE LENGTH */
        st16(b + 6, opt_granularity(lun));
        st32(b + 8, max_xfer);
        st32(b + 12, MIN(OPT_XFER_BYTES / lun->bs, max_xfer));
        if (be->can_discard) {
            st32(b + 20, MAX_UNMAP_LBAS);
            st32(b + 24, MAX_UNMAP_DESCS);
            /* OPTIMAL UNMAP GRANULARITY, and UGAVALID with the alignment at LBA 0. */
            st32(b + 28, unmap_granularity(lun));
            st32(b + 32, 0x80000000u);
        }
        st64(b + 36, MAX_WRITE_SAME_LBAS);
        /* SBC-4 WRITE ATOMIC (16): no atomic boundaries (the last two fields 0). */
        st32(b + 44, sd_max_atomic_blocks(lun));   /* MAXIMUM ATOMIC TRANSFER LENGTH */
        st32(b + 48, sd_atomic_granularity(lun));  /* ATOMIC ALIGNMENT */
        st32(b + 52, sd_atomic_granularity(lun));  /* ATOMIC TRANSFER LENGTH GRANULARITY */
        len = 64;               /* PAGE LENGTH 003Ch */
        break;
    }
    case 0xb1:
        st16(b + 4, 1);     /* non-rotating medium */
        /*
         * WABEREQ 01b: a read of a block erased by SANITIZE BLOCK ERASE
         * completes GOOD, with zeros (every way it erases reads back zeros);
         * 00b where SANITIZE is not offered.  WACEREQ stays 00b: no
         * CRYPTOGRAPHIC ERASE.
         */
        b[7] = be->allow_sanitize ? 0x40 : 0;
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
            return invalid_cdb(cmd, 2, -1);   /* a PAGE CODE without EVPD: the field */
        }
        len = std_inquiry(lun, b);
        return sd_reply(cmd, b, len, alloc);
    }
    len = vpd_page(lun, cdb[2], b);
    if (!len) {
        return invalid_cdb(cmd, 2, -1);   /* a page we do not have: the field */
    }
    return sd_reply(cmd, b, len, alloc);
}

/* ---- READ CAPACITY ----------------------------------------------------- */

int sd_exec_read_capacity_10(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    uint8_t b[8];
    uint64_t last = sd_nb_blocks(lun) - 1;

    /* Too big for 32 bits: FFFFFFFFh tells the initiator to use (16). */
    st32(b, last > 0xfffffffe ? 0xffffffff : (uint32_t)last);
    st32(b + 4, lun->bs);
    return sd_reply(cmd, b, sizeof(b), sizeof(b));
}

/* log2 of physical per logical blocks, when the backend has a larger physical block. */
static uint8_t sd_phys_block_exponent(const struct scsi_lun *lun)
{
    uint32_t pbs = lun->be->phys_block_size;
    uint8_t e = 0;

    if (pbs <= lun->bs || pbs % lun->bs) {
        return 0;
    }
    while (e < 15 && (uint64_t)lun->bs << (e + 1) <= pbs) {
        e++;
    }
    return e;
}

int sd_exec_read_capacity_16(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    uint8_t b[32] = { 0 };

    st64(b, sd_nb_blocks(lun) - 1);
    st32(b + 8, lun->bs);
    b[13] = sd_phys_block_exponent(lun);   /* LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT */
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
        sd_fill_fixed_sense(s, sd_ua_sense[ua]);
    } else if (sd_sanitize_state(lun) == SD_SANITIZE_RUNNING) {
        /* SBC-3 4.11: how far the sanitize has got is polled here. */
        sd_fill_progress_sense(s, SCSI_SC_SANITIZE_IN_PROGRESS, sd_sanitize_progress(lun));
    } else if (sd_sanitize_state(lun) == SD_SANITIZE_FAILED) {
        sd_fill_fixed_sense(s, SCSI_SC_SANITIZE_FAILED);
    } else {
        sd_fill_fixed_sense(s, SCSI_SC_NO_SENSE);
    }
    return sd_reply(cmd, s, sizeof(s), cmd->cdb[4]);
}
