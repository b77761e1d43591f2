/*
 * Fuzz target for the SCSI CDB decoder (hw/scsi/scsi-disk.c): a small RAM
 * LUN receives a CDB from the input with data-out and data-in buffers of
 * input-chosen sizes (data-out filled from the input too).  Each command
 * must complete exactly once, with sense that fits and byte counts that
 * never exceed the buffers.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdlib.h>

#include "fuzz-common.h"
#include "scsi-disk.h"

struct fuzz_cmd {
    struct scsi_cmd cmd;
    int completions;
};

static void fuzz_complete(struct scsi_cmd *cmd)
{
    struct fuzz_cmd *fc = cmd->opaque;

    fc->completions++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct scsi_lun *luns[2];
    static uint8_t out_buf[65536], in_buf[65536];
    struct fuzz_in in = { data, size };
    struct fuzz_cmd fc;
    uint8_t cdb[SCSI_CDB_MAX];
    struct iovec out_iov[2], in_iov[2];

    fuzz_quiet_logs();
    if (!luns[0]) {
        struct lun_backend *be;

        if (backend_ram_new(1 << 20, 512, &be, NULL) < 0) {
            abort();
        }
        luns[0] = scsi_lun_new(be, "fuzz-ram", NULL, NULL);
        if (backend_null_new(1ull << 40, 4096, &be, NULL) < 0) {
            abort();
        }
        luns[1] = scsi_lun_new(be, "fuzz-null", NULL, NULL);
    }
    /* A few commands per input so state (UA, mode pages) evolves. */
    while (in.left) {
        struct scsi_lun *lun = luns[fuzz_take(&in, 1) & 1];
        size_t out_len = fuzz_take(&in, 2) % sizeof(out_buf);
        size_t in_len = fuzz_take(&in, 2) % sizeof(in_buf);
        unsigned split = (unsigned)fuzz_take(&in, 1);
        unsigned cdb_len = 6 + (unsigned)(fuzz_take(&in, 1) % (SCSI_CDB_MAX - 5));

        fuzz_copy(&in, cdb, sizeof(cdb));
        fuzz_copy(&in, out_buf, MIN(out_len, 512));
        memset(&fc, 0, sizeof(fc));
        fc.cmd.cdb = cdb;
        fc.cmd.cdb_len = cdb_len;
        /* Either direction, never both (the transport guarantees that). */
        if (out_len && (split & 0x80)) {
            size_t a = MIN(out_len, split & 0x7f);

            out_iov[0] = (struct iovec){ out_buf, a };
            out_iov[1] = (struct iovec){ out_buf + a, out_len - a };
            fc.cmd.data_out = out_iov;
            fc.cmd.data_out_cnt = 2;
        } else if (in_len) {
            size_t a = MIN(in_len, split);

            in_iov[0] = (struct iovec){ in_buf, a };
            in_iov[1] = (struct iovec){ in_buf + a, in_len - a };
            fc.cmd.data_in = in_iov;
            fc.cmd.data_in_cnt = 2;
        }
        fc.cmd.complete = fuzz_complete;
        fc.cmd.opaque = &fc;
        scsi_lun_exec(lun, &fc.cmd);
        if (fc.completions != 1 || fc.cmd.sense_len > SCSI_SENSE_MAX ||
            fc.cmd.data_in_xfer > (fc.cmd.data_in ? in_len : 0) ||
            fc.cmd.data_out_xfer > (fc.cmd.data_out ? out_len : 0)) {
            abort();
        }
    }
    return 0;
}
