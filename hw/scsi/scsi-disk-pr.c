/*
 * PERSISTENT RESERVE IN and OUT (SPC-4 6.15, 6.16): decoding the CDB and
 * the parameter list, with field pointers for what is refused, and
 * handing the service action to the LUN's reservation state (scsi-pr.c).
 * PREEMPT AND ABORT answers only once every command that was in flight on
 * the LUN has completed: backend I/O cannot be recalled, so this is how a
 * fenced node's queued writes are kept from landing after the fence.
 * A change the APTPL state file must take answers once the LUN's saver
 * thread has written it: the command waits off its I/O thread, which
 * serves the other queues meanwhile, and is completed back on it.
 * Also RESERVE/RELEASE(6)/(10), and where a LUN is given its APTPL state
 * file (scsi_lun_set_pr_file).
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

/* GOOD, once the LUN's commands in flight are done if the command preempted them. */
static int pr_out_good(struct scsi_lun *lun, struct scsi_cmd *cmd, bool preempted)
{
    struct pr_abort *a;

    cmd->status = SAM_STAT_GOOD;
    if (!preempted) {
        return EXEC_DONE;
    }
    a = g_new0(struct pr_abort, 1);
    log_limit_message(&lun->log_limit,
                      "%s: PREEMPT AND ABORT by %s waits for the commands in flight", lun->name,
                      cmd_it(cmd)->initiator);
    a->cmd = cmd;
    a->drain.done = pr_abort_done;
    a->drain.thread = cmd->thread;
    sd_cmd_leave_epoch(cmd);
    scsi_lun_drain_async(lun, &a->drain);
    return EXEC_ASYNC;
}

/*
 * A PR OUT waiting for the state file (SCSI_PR_SAVING).  On an I/O
 * thread it is completed there, posted by the saver; without one (tests,
 * tools) the submitter waits for it.
 */
struct pr_save_wait {
    struct scsi_pr_waiter w;
    struct scsi_lun *lun;
    struct scsi_cmd *cmd;
    bool preempted;
    int ret;
    pthread_mutex_t lock;      /* no thread: ret is in once done is */
    pthread_cond_t cond;
    bool done;
};

/* The outcome: GOOD (and the preempted commands' drain), or INTERNAL TARGET FAILURE. */
static int pr_save_result(struct pr_save_wait *sw)
{
    if (sw->ret < 0) {
        return sd_sense_done(sw->cmd, SCSI_SC_INTERNAL_TARGET_FAILURE);
    }
    return pr_out_good(sw->lun, sw->cmd, sw->preempted);
}

static void pr_saved_on_thread(void *opaque)
{
    struct pr_save_wait *sw = opaque;
    struct scsi_cmd *cmd = sw->cmd;
    int r = pr_save_result(sw);

    g_free(sw);
    if (r == EXEC_DONE) {
        sd_cmd_finish(cmd);
    }
}

static void pr_saved(struct scsi_pr_waiter *w, int ret)
{
    struct pr_save_wait *sw = (struct pr_save_wait *)w;

    sw->ret = ret;
    if (sw->cmd->thread) {
        iothread_post(sw->cmd->thread, pr_saved_on_thread, sw);
        return;
    }
    pthread_mutex_lock(&sw->lock);
    sw->done = true;
    pthread_cond_signal(&sw->cond);
    pthread_mutex_unlock(&sw->lock);
}

/* The command has no I/O thread: its submitter waits for the save. */
static int pr_save_wait(struct pr_save_wait *sw)
{
    int r;

    pthread_mutex_lock(&sw->lock);
    while (!sw->done) {
        pthread_cond_wait(&sw->cond, &sw->lock);
    }
    pthread_mutex_unlock(&sw->lock);
    pthread_mutex_destroy(&sw->lock);
    pthread_cond_destroy(&sw->cond);
    r = pr_save_result(sw);
    g_free(sw);
    return r;
}

/* A REGISTER AND MOVE's parameter list: header, then one TransportID (at most this long). */
#define MOVE_TID_MAX 256

static bool register_action(uint8_t sa)
{
    return sa == PR_OUT_REGISTER || sa == PR_OUT_REGISTER_AND_IGNORE;
}

/*
 * REGISTER AND MOVE's own parameter list (SPC-4 6.16.4): UNREG and APTPL
 * in byte 17, the RELATIVE TARGET PORT IDENTIFIER, and the TransportID
 * that names where the reservation goes.  0, or the refusal's EXEC_DONE.
 */
static bool decode_move(struct scsi_lun *lun, struct scsi_cmd *cmd, const uint8_t *p,
                       uint32_t plen, struct scsi_pr_out *o, char **dest)
{
    uint32_t tid_len = ld32(p + 20);
    uint8_t tid[MOVE_TID_MAX];
    size_t bad;
    int bad_bit;

    o->aptpl = p[17] & 0x01;
    o->unreg = p[17] & 0x02;
    o->dest_rtpi = ld16(p + 18);
    if (tid_len < 24 || tid_len > MOVE_TID_MAX || plen != PR_OUT_PARAM_LEN + tid_len) {
        invalid_param(cmd, 20, -1);
        return false;
    }
    if (o->sa_key == 0) {
        invalid_param(cmd, 8, -1);
        return false;
    }
    if (o->aptpl && !scsi_pr_can_persist(lun->pr)) {
        invalid_param(cmd, 17, 0);
        return false;
    }
    if (o->dest_rtpi == 0) {
        invalid_param(cmd, 18, -1);
        return false;
    }
    iov_to_buf(cmd->data_out, cmd->data_out_cnt, PR_OUT_PARAM_LEN, tid, tid_len);
    if (scsi_pr_transport_id_parse(tid, tid_len, dest, &bad, &bad_bit) < 0) {
        invalid_param(cmd, PR_OUT_PARAM_LEN + (unsigned)bad, bad_bit);
        return false;
    }
    o->dest_initiator = *dest;
    return true;
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
    g_autofree char *dest = NULL;
    struct pr_save_wait *sw;
    enum scsi_pr_result res;
    bool preempted;

    if (o.sa >= PR_OUT_REPLACE_LOST) {
        return invalid_cdb(cmd, 1, 4);
    }
    if (plen < PR_OUT_PARAM_LEN) {
        return sd_sense_done(cmd, SCSI_SC_PARAM_LIST_LENGTH_ERROR);
    }
    if (sd_data_out_size(cmd) < plen) {
        return invalid_cdb(cmd, 8, 7);
    }
    iov_to_buf(cmd->data_out, cmd->data_out_cnt, 0, p, sizeof(p));
    cmd->data_out_xfer = plen;
    o.key = ld64(p);
    o.sa_key = ld64(p + 8);
    if (o.sa == PR_OUT_REGISTER_AND_MOVE) {
        if (!decode_move(lun, cmd, p, plen, &o, &dest)) {
            return EXEC_DONE;
        }
    } else {
        o.spec_i_pt = p[20] & 0x08;
        o.all_tg_pt = p[20] & 0x04;
        o.aptpl = p[20] & 0x01;
        /* SPEC_I_PT is not supported (SIP_C 0), and only REGISTER may set it anyway. */
        if (o.spec_i_pt) {
            return invalid_param(cmd, 20, 3);
        }
        /* Without SPEC_I_PT the list is exactly 24 bytes. */
        if (plen != PR_OUT_PARAM_LEN) {
            return sd_sense_done(cmd, SCSI_SC_PARAM_LIST_LENGTH_ERROR);
        }
        /* ALL_TG_PT (ATP_C 0) and APTPL mean something to the register actions only. */
        if (o.all_tg_pt && register_action(o.sa)) {
            return invalid_param(cmd, 20, 2);
        }
        /* APTPL only where the LUN has a state file. */
        if (o.aptpl && register_action(o.sa) && !scsi_pr_can_persist(lun->pr)) {
            return invalid_param(cmd, 20, 0);
        }
    }
    sw = g_new0(struct pr_save_wait, 1);
    *sw = (struct pr_save_wait) { .w.done = pr_saved, .lun = lun, .cmd = cmd };
    if (!cmd->thread) {
        pthread_mutex_init(&sw->lock, NULL);
        pthread_cond_init(&sw->cond, NULL);
    }
    res = scsi_pr_out(lun->pr, cmd_it(cmd), &o, &sc, &preempted, &sw->w);
    if (res == SCSI_PR_SAVING) {
        sw->preempted = preempted;
        return cmd->thread ? EXEC_ASYNC : pr_save_wait(sw);
    }
    if (!cmd->thread) {
        pthread_mutex_destroy(&sw->lock);
        pthread_cond_destroy(&sw->cond);
    }
    g_free(sw);
    switch (res) {
    case SCSI_PR_RESULT_CONFLICT:
        cmd->status = SAM_STAT_RESERVATION_CONFLICT;
        return EXEC_DONE;
    case SCSI_PR_CHECK:
        if (o.sa == PR_OUT_REGISTER_AND_MOVE && sc == SCSI_SC_INVALID_FIELD_IN_CDB) {
            return invalid_cdb(cmd, 1, 4);    /* nothing to move */
        }
        if (o.sa == PR_OUT_REGISTER_AND_MOVE && sc == SCSI_SC_INVALID_FIELD_IN_PARAM_LIST) {
            return invalid_param(cmd, PR_OUT_PARAM_LEN, -1);   /* a move to itself */
        }
        if (sc == SCSI_SC_INVALID_FIELD_IN_CDB) {
            return invalid_cdb(cmd, 2, -1);   /* scope or type */
        }
        return sd_sense_done(cmd, sc);
    default:
        return pr_out_good(lun, cmd, preempted);
    }
}

/*
 * RESERVE(6)/(10) and RELEASE(6)/(10) (SPC-2 7.21, 7.17): the whole LUN
 * only; third-party and extent reservations are refused.
 */
int sd_exec_reserve_release(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    uint8_t op = cmd->cdb[0];
    bool ten = op == PR_OP_RESERVE_10 || op == PR_OP_RELEASE_10;
    bool reserve = op == PR_OP_RESERVE_6 || op == PR_OP_RESERVE_10;

    /* (10): 3RDPTY (bit 4), LONGID (bit 1); (6): the obsolete third-party and extent bits. */
    if (cmd->cdb[1] & (ten ? 0x12 : 0x1f)) {
        return invalid_cdb(cmd, 1, ten ? ((cmd->cdb[1] & 0x10) ? 4 : 1) : -1);
    }
    if (scsi_pr_legacy(lun->pr, cmd_it(cmd), reserve) == SCSI_PR_RESULT_CONFLICT) {
        cmd->status = SAM_STAT_RESERVATION_CONFLICT;
        return EXEC_DONE;
    }
    cmd->status = SAM_STAT_GOOD;
    return EXEC_DONE;
}

int scsi_lun_set_pr_file(struct scsi_lun *lun, const char *path, GError **err)
{
    g_autofree char *why = NULL;
    int ret = scsi_pr_persist_at(lun->pr, path, lun->naa, &why);

    if (ret < 0) {
        vs_error_set(err, ret, "%s", why ? why : g_strerror(-ret));
    }
    return ret;
}

void scsi_lun_set_pr_store(struct scsi_lun *lun, const struct scsi_pr_store *store,
                           void *opaque)
{
    scsi_pr_set_store(lun->pr, store, opaque);
}
