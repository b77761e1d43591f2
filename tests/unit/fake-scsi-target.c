/*
 * The fake SCSI target of the transport tests (fake-scsi-target.h): the
 * target, nexus and LUN objects are the fake's own, so the transport only
 * ever holds pointers it cannot look into, as with the real ones.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <glib.h>

#include "fake-scsi-target.h"
#include "iothread.h"
#include "iov.h"

#define FAKE_TIMEOUT_US (10 * G_USEC_PER_SEC)

struct scsi_lun {
    unsigned port, lun;
    char name[32];
    GQueue drains;                  /* struct scsi_drain *, pending */
    unsigned ndrains;
    unsigned uas[SCSI_UA_COUNT];
};

struct scsi_nexus {
    struct scsi_target *t;
    char *name;
    bool alive;
    unsigned resets;
    unsigned losses[SCSI_TARGET_MAX_PORT + 1];
    const struct scsi_nexus_events *ev;
    void *ev_opaque;
};

struct scsi_target {
    GMutex lock;
    GCond cond;
    GPtrArray *luns;                /* struct scsi_lun * */
    GPtrArray *nexuses;             /* struct scsi_nexus *, freed ones too */
    GPtrArray *cmds;                /* struct fake_cmd * */
    int refuse;
};

struct scsi_target *fake_target_new(void)
{
    struct scsi_target *t = g_new0(struct scsi_target, 1);

    g_mutex_init(&t->lock);
    g_cond_init(&t->cond);
    t->luns = g_ptr_array_new_with_free_func(g_free);
    t->nexuses = g_ptr_array_new();
    t->cmds = g_ptr_array_new();
    return t;
}

void fake_target_free(struct scsi_target *t)
{
    for (unsigned i = 0; i < t->nexuses->len; i++) {
        struct scsi_nexus *nx = t->nexuses->pdata[i];

        g_assert_false(nx->alive);
        g_free(nx->name);
        g_free(nx);
    }
    for (unsigned i = 0; i < t->cmds->len; i++) {
        struct fake_cmd *c = t->cmds->pdata[i];

        /* A transport freed with a command the target still holds is a bug. */
        g_assert_null(c->cmd);
        g_free(c->out);
        g_free(c);
    }
    for (unsigned i = 0; i < t->luns->len; i++) {
        g_assert_true(g_queue_is_empty(&((struct scsi_lun *)t->luns->pdata[i])->drains));
    }
    g_ptr_array_free(t->cmds, TRUE);
    g_ptr_array_free(t->nexuses, TRUE);
    g_ptr_array_free(t->luns, TRUE);
    g_mutex_clear(&t->lock);
    g_cond_clear(&t->cond);
    g_free(t);
}

static struct scsi_lun *find_lun(struct scsi_target *t, unsigned port, unsigned lun)
{
    for (unsigned i = 0; i < t->luns->len; i++) {
        struct scsi_lun *l = t->luns->pdata[i];

        if (l->port == port && l->lun == lun) {
            return l;
        }
    }
    return NULL;
}

void fake_target_add_lun(struct scsi_target *t, unsigned port, unsigned lun)
{
    struct scsi_lun *l = g_new0(struct scsi_lun, 1);

    l->port = port;
    l->lun = lun;
    snprintf(l->name, sizeof(l->name), "fake%u:%u", port, lun);
    g_queue_init(&l->drains);
    g_ptr_array_add(t->luns, l);
}

void fake_target_refuse(struct scsi_target *t, int err)
{
    g_mutex_lock(&t->lock);
    t->refuse = err;
    g_mutex_unlock(&t->lock);
}

/* ---- what the transport calls ----------------------------------------- */

struct scsi_nexus *scsi_target_nexus_new(struct scsi_target *t, const char *name)
{
    struct scsi_nexus *nx = g_new0(struct scsi_nexus, 1);

    nx->t = t;
    nx->name = g_strdup(name);
    nx->alive = true;
    g_mutex_lock(&t->lock);
    g_ptr_array_add(t->nexuses, nx);
    g_mutex_unlock(&t->lock);
    return nx;
}

void scsi_target_nexus_free(struct scsi_nexus *nx)
{
    struct scsi_target *t = nx->t;

    g_mutex_lock(&t->lock);
    g_assert_true(nx->alive);
    for (unsigned i = 0; i < t->cmds->len; i++) {
        struct fake_cmd *c = t->cmds->pdata[i];

        /* The contract: every command of the nexus has completed. */
        g_assert_true(c->nx != nx || !c->cmd);
    }
    nx->alive = false;
    g_mutex_unlock(&t->lock);
}

/* Reservations are the real target's business: the fake only accepts the name. */
void scsi_nexus_set_initiator(struct scsi_nexus *nx, const char *initiator)
{
    (void)nx;
    (void)initiator;
}

void scsi_nexus_set_events(struct scsi_nexus *nx, const struct scsi_nexus_events *ev,
                           void *opaque)
{
    nx->ev = ev;
    nx->ev_opaque = opaque;
}

bool scsi_nexus_has_port(const struct scsi_nexus *nx, unsigned port)
{
    for (unsigned i = 0; i < nx->t->luns->len; i++) {
        if (((struct scsi_lun *)nx->t->luns->pdata[i])->port == port) {
            return true;
        }
    }
    return false;
}

struct scsi_lun *scsi_nexus_lun(struct scsi_nexus *nx, unsigned port, unsigned lun_id)
{
    return find_lun(nx->t, port, lun_id);
}

int scsi_nexus_exec(struct scsi_nexus *nx, unsigned port, unsigned lun_id,
                    bool report_luns_wlun, struct scsi_cmd *cmd)
{
    struct scsi_target *t = nx->t;
    struct fake_cmd *c = g_new0(struct fake_cmd, 1);
    int ret;

    g_assert_true(nx->alive);
    c->nx = nx;
    c->port = port;
    c->lun = lun_id;
    c->wlun = report_luns_wlun;
    c->cdb_len = MIN(cmd->cdb_len, sizeof(c->cdb));
    memcpy(c->cdb, cmd->cdb, c->cdb_len);
    c->tag = cmd->tag;
    c->out_cnt = cmd->data_out_cnt;
    c->in_cnt = cmd->data_in_cnt;
    c->out_len = cmd->data_out ? iov_size(cmd->data_out, cmd->data_out_cnt) : 0;
    c->in_len = cmd->data_in ? iov_size(cmd->data_in, cmd->data_in_cnt) : 0;
    c->out = g_malloc(MAX(c->out_len, 1));
    if (c->out_len) {
        iov_to_buf(cmd->data_out, cmd->data_out_cnt, 0, c->out, c->out_len);
    }
    g_mutex_lock(&t->lock);
    ret = t->refuse;
    c->cmd = ret ? NULL : cmd;
    g_ptr_array_add(t->cmds, c);
    g_cond_broadcast(&t->cond);
    g_mutex_unlock(&t->lock);
    return ret;
}

void scsi_nexus_reset(struct scsi_nexus *nx)
{
    nx->resets++;
}

void scsi_nexus_loss(struct scsi_nexus *nx, unsigned port)
{
    g_assert_cmpuint(port, <=, SCSI_TARGET_MAX_PORT);
    nx->losses[port]++;
}

void scsi_lun_drain_async(struct scsi_lun *lun, struct scsi_drain *d)
{
    /* The transport's TMFs run on the main thread, as the drain's users must. */
    g_queue_push_tail(&lun->drains, d);
    lun->ndrains++;
}

const char *scsi_lun_name(const struct scsi_lun *lun)
{
    return lun->name;
}

void scsi_lun_set_ua(struct scsi_lun *lun, enum scsi_ua ua)
{
    g_assert_cmpuint(ua, <, SCSI_UA_COUNT);
    lun->uas[ua]++;
}

/* ---- what the test calls ---------------------------------------------- */

void fake_wait_cmds(struct scsi_target *t, unsigned n)
{
    gint64 deadline = g_get_monotonic_time() + FAKE_TIMEOUT_US;

    g_mutex_lock(&t->lock);
    while (t->cmds->len < n) {
        g_assert_true(g_cond_wait_until(&t->cond, &t->lock, deadline));
    }
    g_mutex_unlock(&t->lock);
}

unsigned fake_cmd_count(struct scsi_target *t)
{
    unsigned n;

    g_mutex_lock(&t->lock);
    n = t->cmds->len;
    g_mutex_unlock(&t->lock);
    return n;
}

const struct fake_cmd *fake_cmd_at(struct scsi_target *t, unsigned i)
{
    const struct fake_cmd *c;

    g_mutex_lock(&t->lock);
    g_assert_cmpuint(i, <, t->cmds->len);
    c = t->cmds->pdata[i];
    g_mutex_unlock(&t->lock);
    return c;
}

struct completion {
    struct scsi_cmd *cmd;
    uint8_t status;
    const uint8_t *sense;
    unsigned sense_len;
    const void *data;
    size_t len;
};

static void complete_on_thread(void *opaque)
{
    struct completion *k = opaque;
    struct scsi_cmd *cmd = k->cmd;

    cmd->status = k->status;
    cmd->sense_len = (uint8_t)MIN(k->sense_len, sizeof(cmd->sense));
    if (cmd->sense_len) {
        memcpy(cmd->sense, k->sense, cmd->sense_len);
    }
    cmd->data_in_xfer = k->len && cmd->data_in
                            ? iov_from_buf(cmd->data_in, cmd->data_in_cnt, 0, k->data, k->len) : 0;
    cmd->complete(cmd);
}

void fake_complete(struct scsi_target *t, unsigned i, uint8_t status, const uint8_t *sense,
                   unsigned sense_len, const void *data, size_t len)
{
    struct completion k = { .status = status, .sense = sense, .sense_len = sense_len,
                            .data = data, .len = len };
    struct fake_cmd *c;

    g_mutex_lock(&t->lock);
    g_assert_cmpuint(i, <, t->cmds->len);
    c = t->cmds->pdata[i];
    k.cmd = c->cmd;
    c->cmd = NULL;
    g_mutex_unlock(&t->lock);
    g_assert_nonnull(k.cmd);
    g_assert_nonnull(k.cmd->thread);
    iothread_run_sync(k.cmd->thread, complete_on_thread, &k);
}

struct batch {
    struct scsi_cmd **cmds;
    unsigned n;
};

static void complete_batch_on_thread(void *opaque)
{
    struct batch *b = opaque;

    for (unsigned i = 0; i < b->n; i++) {
        struct scsi_cmd *cmd = b->cmds[i];

        cmd->status = SAM_STAT_GOOD;
        cmd->sense_len = 0;
        cmd->data_in_xfer = 0;
        cmd->complete(cmd);
    }
}

void fake_complete_batch(struct scsi_target *t, unsigned first, unsigned n)
{
    struct batch b = { .cmds = g_new(struct scsi_cmd *, n), .n = n };

    g_mutex_lock(&t->lock);
    g_assert_cmpuint(first + n, <=, t->cmds->len);
    for (unsigned i = 0; i < n; i++) {
        struct fake_cmd *c = t->cmds->pdata[first + i];

        b.cmds[i] = c->cmd;
        c->cmd = NULL;
        g_assert_nonnull(b.cmds[i]);
        g_assert_true(b.cmds[i]->thread == b.cmds[0]->thread);
    }
    g_mutex_unlock(&t->lock);
    iothread_run_sync(b.cmds[0]->thread, complete_batch_on_thread, &b);
    g_free(b.cmds);
}

void fake_nothing(void *opaque)
{
    (void)opaque;
}

unsigned fake_nexus_created(struct scsi_target *t)
{
    return t->nexuses->len;
}

unsigned fake_nexus_alive(struct scsi_target *t)
{
    unsigned n = 0;

    for (unsigned i = 0; i < t->nexuses->len; i++) {
        n += ((struct scsi_nexus *)t->nexuses->pdata[i])->alive;
    }
    return n;
}

struct scsi_nexus *fake_nexus_at(struct scsi_target *t, unsigned i)
{
    g_assert_cmpuint(i, <, t->nexuses->len);
    return t->nexuses->pdata[i];
}

const char *fake_nexus_name(struct scsi_nexus *nx)
{
    return nx->name;
}

unsigned fake_nexus_resets(struct scsi_nexus *nx)
{
    return nx->resets;
}

unsigned fake_nexus_losses(struct scsi_nexus *nx, unsigned port)
{
    return nx->losses[port];
}

static struct scsi_lun *lun_of(struct scsi_target *t, unsigned port, unsigned lun)
{
    struct scsi_lun *l = find_lun(t, port, lun);

    g_assert_nonnull(l);
    return l;
}

unsigned fake_drains(struct scsi_target *t, unsigned port, unsigned lun)
{
    return lun_of(t, port, lun)->ndrains;
}

unsigned fake_drains_pending(struct scsi_target *t, unsigned port, unsigned lun)
{
    return g_queue_get_length(&lun_of(t, port, lun)->drains);
}

static void drain_done_on_thread(void *opaque)
{
    struct scsi_drain *d = opaque;

    d->done(d);
}

void fake_drain_end(struct scsi_target *t, unsigned port, unsigned lun)
{
    struct scsi_drain *d = g_queue_pop_head(&lun_of(t, port, lun)->drains);

    g_assert_nonnull(d);
    g_assert_nonnull(d->thread);
    iothread_run_sync(d->thread, drain_done_on_thread, d);
}

unsigned fake_lun_uas(struct scsi_target *t, unsigned port, unsigned lun, enum scsi_ua ua)
{
    return lun_of(t, port, lun)->uas[ua];
}

void fake_nexus_announce(struct scsi_nexus *nx, enum fake_change change, unsigned port,
                         unsigned lun)
{
    g_assert_nonnull(nx->ev);
    switch (change) {
    case FAKE_LUN_ADDED:
        nx->ev->lun_added(nx->ev_opaque, port, lun);
        break;
    case FAKE_LUN_REMOVED:
        nx->ev->lun_removed(nx->ev_opaque, port, lun);
        break;
    case FAKE_LUN_RESIZED:
        nx->ev->lun_changed(nx->ev_opaque, port, lun, 0x2a, 0x09);
        break;
    }
}
