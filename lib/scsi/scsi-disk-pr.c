/*
 * PERSISTENT RESERVE IN and OUT (SPC-4 6.15, 6.16): decoding the CDB and
 * the parameter list, with field pointers for what is refused, and
 * handing the service action to the LUN's reservation state (scsi-pr.c).
 * PREEMPT AND ABORT answers only once every command that was in flight on
 * the LUN has completed: backend I/O cannot be recalled, so this is how a
 * fenced node's queued writes are kept from landing after the fence.
 * Also where a LUN is given its APTPL state file (scsi_lun_set_pr_file).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "scsi-disk-ops.h"

#define PR_OUT_PARAM_LEN 24

static const struct scsi_it_id *cmd_it(const struct scsi_cmd *cmd)
{
    static const struct scsi_it_id own = { "", "", 0 };

    return cmd->it.initiator ? &cmd->it : &own;
}

int sd_exec_pr_in(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    uint8_t sa = cmd->cdb[1] & 0x1f;
    unsigned alloc = ld16(cmd->cdb + 7);
    GByteArray *b = scsi_pr_in(lun->pr, sa);
    int r;

    if (!b) {
        return invalid_cdb(cmd, 1, 4);
    }
    r = sd_reply(cmd, b->data, b->len, alloc);
    g_byte_array_unref(b);
    return r;
}

struct pr_abort {
    struct scsi_drain drain;
    struct scsi_cmd *cmd;
};

static void pr_abort_done(struct scsi_drain *d)
{
    struct pr_abort *a = (struct pr_abort *)d;
    struct scsi_cmd *cmd = a->cmd;

    g_free(a);
    sd_cmd_finish(cmd);
}

int sd_exec_pr_out(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    uint32_t plen = ld32(cdb + 5);
    uint8_t p[PR_OUT_PARAM_LEN];
    struct scsi_pr_out o = {
        .sa = cdb[1] & 0x1f, .scope = cdb[2] >> 4, .type = cdb[2] & 0x0f,
    };
    enum scsi_sc sc = SCSI_SC_INVALID_FIELD_IN_CDB;
    bool preempted;

    if (o.sa > PR_OUT_REPLACE_LOST || o.sa == PR_OUT_REGISTER_AND_MOVE ||
        o.sa == PR_OUT_REPLACE_LOST) {
        return invalid_cdb(cmd, 1, 4);
    }
    /* Without SPEC_I_PT (not supported) the list is exactly 24 bytes. */
    if (plen != PR_OUT_PARAM_LEN) {
        return sd_sense_done(cmd, SCSI_SC_PARAM_LIST_LENGTH_ERROR);
    }
    if (sd_data_out_size(cmd) < plen) {
        return invalid_cdb(cmd, 8, 7);
    }
    iov_to_buf(cmd->data_out, cmd->data_out_cnt, 0, p, sizeof(p));
    cmd->data_out_xfer = plen;
    o.key = ld64(p);
    o.sa_key = ld64(p + 8);
    o.spec_i_pt = p[20] & 0x08;
    o.all_tg_pt = p[20] & 0x04;
    o.aptpl = p[20] & 0x01;
    if (o.spec_i_pt) {
        return invalid_param(cmd, 20, 3);
    }
    if (o.all_tg_pt) {
        return invalid_param(cmd, 20, 2);
    }
    /* APTPL only where the LUN has a state file; the register actions alone look at it. */
    if (o.aptpl && (o.sa == PR_OUT_REGISTER || o.sa == PR_OUT_REGISTER_AND_IGNORE) &&
        !scsi_pr_can_persist(lun->pr)) {
        return invalid_param(cmd, 20, 0);
    }
    switch (scsi_pr_out(lun->pr, cmd_it(cmd), &o, &sc, &preempted)) {
    case SCSI_PR_RESULT_CONFLICT:
        cmd->status = SAM_STAT_RESERVATION_CONFLICT;
        return EXEC_DONE;
    case SCSI_PR_CHECK:
        if (sc == SCSI_SC_INVALID_FIELD_IN_CDB) {
            return invalid_cdb(cmd, 2, -1);   /* scope or type */
        }
        return sd_sense_done(cmd, sc);
    case SCSI_PR_GOOD:
        break;
    }
    cmd->status = SAM_STAT_GOOD;
    if (preempted) {
        struct pr_abort *a = g_new0(struct pr_abort, 1);

        g_message("%s: PREEMPT AND ABORT by %s waits for the commands in flight", lun->name,
                  cmd_it(cmd)->initiator);
        a->cmd = cmd;
        a->drain.done = pr_abort_done;
        a->drain.thread = cmd->thread;
        sd_cmd_leave_epoch(cmd);
        scsi_lun_drain_async(lun, &a->drain);
        return EXEC_ASYNC;
    }
    return EXEC_DONE;
}

int scsi_lun_set_pr_file(struct scsi_lun *lun, const char *path, char **err)
{
    return scsi_pr_persist_at(lun->pr, path, lun->naa, err);
}
