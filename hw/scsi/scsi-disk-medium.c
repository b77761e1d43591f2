/*
 * The medium-status command family, answered from what the backend knows
 * of its blocks without moving any data to the initiator's buffers:
 * PRE-FETCH (10) and (16), which ask the backend to start filling its
 * cache (the page cache) and answer GOOD; GET LBA STATUS, which reports runs of mapped and deallocated
 * blocks from the backend's map (SEEK_DATA/SEEK_HOLE on files, ram's
 * bitmap), with bounded work per command; and READ DEFECT DATA (10) and
 * (12), whose list is empty: a virtual medium has no grown defects.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>

#include "scsi-disk-int.h"
#include "scsi-disk-ops.h"

/* The most one PRE-FETCH asks the backend to read. */
#define PREFETCH_MAX_BYTES (32u << 20)
/* GET LBA STATUS: descriptors per reply, and bytes of the map looked at per backend query. */
#define LBA_STATUS_MAX_DESCS 64u
#define LBA_STATUS_QUERY_BYTES (256u << 20)

/* ---- PRE-FETCH --------------------------------------------------------- */

int sd_exec_pre_fetch(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    const struct backend_ops *ops = lun->be->ops;
    uint64_t lba, count, bytes;
    uint32_t n;
    unsigned len_byte;
    int ret;

    sd_decode_lba_len(cdb, &lba, &n, &len_byte);
    if (!sd_range_ok(lun, lba, n)) {
        return sd_sense_done(cmd, SCSI_SC_LBA_OUT_OF_RANGE);
    }
    /* PREFETCH LENGTH 0: from lba to the last block. */
    count = n ? n : sd_nb_blocks(lun) - lba;
    bytes = count * lun->bs;
    /*
     * A hint the backend may take (the page cache fills in the background);
     * IMMED makes no difference since nothing waits for it.  The answer is
     * GOOD whatever the backend did: the blocks are not held in a cache the
     * LUN controls (the kernel may evict them at once), and SBC-3's PRE-FETCH
     * answers CONDITION MET only for blocks that are; initiators over SG_IO and
     * Linux's midlayer also take any status but GOOD as an error.
     */
    ret = ops && ops->prefetch ? ops->prefetch(lun->be, lba * lun->bs,
                                              MIN(bytes, PREFETCH_MAX_BYTES)) : -EOPNOTSUPP;
    if (ret < 0 && ret != -EOPNOTSUPP) {
        g_debug("%s: prefetch of %" G_GUINT64_FORMAT " blocks at %" G_GUINT64_FORMAT ": %s",
                lun->name, count, lba, g_strerror(-ret));
    }
    cmd->status = SAM_STAT_GOOD;
    return EXEC_DONE;
}

/* ---- GET LBA STATUS ---------------------------------------------------- */

/*
 * The state of the blocks from lba and for how many blocks it holds (at
 * most max).  Without a map, or if the backend cannot say, mapped: never
 * deallocated on a guess, since a guest may skip copying what it is told
 * is deallocated.
 */
static uint64_t lba_run(struct scsi_lun *lun, uint64_t lba, uint64_t max, bool *mapped)
{
    const struct backend_ops *ops = lun->be->ops;
    uint64_t run = 0;
    int ret;

    *mapped = true;
    if (!lun->be->can_discard || !ops || !ops->block_status) {
        return max;         /* fully provisioned: every block is mapped */
    }
    ret = ops->block_status(lun->be, lba * lun->bs,
                            MIN(max, LBA_STATUS_QUERY_BYTES / lun->bs) * lun->bs, mapped, &run);
    if (ret < 0 || run < lun->bs) {
        if (ret < 0 && ret != -EOPNOTSUPP) {
            g_debug("%s: block status at %" G_GUINT64_FORMAT ": %s", lun->name, lba,
                    g_strerror(-ret));
        }
        *mapped = true;
        return ret < 0 ? MIN(max, LBA_STATUS_QUERY_BYTES / lun->bs) : 1;
    }
    return run / lun->bs;
}

int sd_exec_get_lba_status(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    uint64_t lba = ld64(cdb + 2), nb = sd_nb_blocks(lun);
    uint32_t alloc = ld32(cdb + 10);
    uint8_t b[8 + 16 * LBA_STATUS_MAX_DESCS];
    unsigned want, k = 0;

    if (lba >= nb) {
        return sd_sense_done(cmd, SCSI_SC_LBA_OUT_OF_RANGE);
    }
    /* As many descriptors as the allocation length takes (at least one, for the length). */
    want = alloc < 24 ? 1 : (unsigned)MIN((alloc - 8) / 16, LBA_STATUS_MAX_DESCS);
    memset(b, 0, sizeof(b));
    /* A bounded number of backend queries; fewer descriptors than asked is allowed. */
    for (unsigned q = 0; q < 2 * LBA_STATUS_MAX_DESCS && k <= want && lba < nb; q++) {
        bool mapped;
        uint64_t run = lba_run(lun, lba, MIN(nb - lba, UINT32_MAX), &mapped);
        uint8_t *d = k ? b + 8 + 16 * (k - 1) : NULL;

        /* Extend the last descriptor while the state stays and its count fits. */
        if (d && (d[12] == 0) == mapped && ld32(d + 8) + run <= UINT32_MAX) {
            st32(d + 8, (uint32_t)(ld32(d + 8) + run));
        } else if (k == want) {
            break;
        } else {
            d = b + 8 + 16 * k++;
            st64(d, lba);
            st32(d + 8, (uint32_t)run);
            d[12] = mapped ? 0 : 1;     /* PROVISIONING STATUS: mapped / deallocated */
        }
        lba += run;
    }
    st32(b, 4 + 16 * k);               /* PARAMETER DATA LENGTH: what follows it */
    return sd_reply(cmd, b, 8 + 16 * k, alloc);
}

/* ---- READ DEFECT DATA -------------------------------------------------- */

int sd_exec_read_defect_data(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    bool twelve = cdb[0] == OP_READ_DEFECT_DATA_12;
    uint8_t req = twelve ? cdb[1] : cdb[2];
    uint8_t b[8] = { 0 };

    /* 111b is the one reserved format; any other describes an empty list alike. */
    if ((req & 0x07) == 0x07) {
        return invalid_cdb(cmd, twelve ? 1 : 2, 2);
    }
    /* PLISTV and GLISTV as asked: the lists asked for are valid, and empty. */
    b[1] = req & 0x1f;
    return sd_reply(cmd, b, twelve ? 8 : 4, twelve ? ld32(cdb + 6) : ld16(cdb + 7));
}
