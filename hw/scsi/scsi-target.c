/*
 * The SCSI target (include/scsi/scsi-target.h): its LUN table, a sorted
 * array searched with bsearch (main thread); the target's own answers
 * (REPORT LUNS, commands to an absent LUN); and the I_T nexuses.  Each
 * nexus reads its own copy of the table on the I/O threads without a
 * lock: a LUN change builds every nexus a new table, publishes it with
 * one atomic pointer store, and frees the old one after a grace period of
 * the I/O threads (grace.h); a removed LUN is handed back to its owner
 * only once no table names it and its commands have drained.  The target
 * maps LUNs it does not own: one LUN may be mapped by several targets (a
 * disk shared by several VMs' controllers).  A nexus's
 * unit-attention state for a LUN is its own allocation, shared by the
 * successive tables that name the LUN, so a condition raised while a
 * table is replaced is never lost; a removed LUN's are freed with its
 * drain, once every command that names them has completed.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include <glib.h>

#include "grace.h"
#include "scsi-sense.h"
#include "scsi-target.h"

/* REPORT LUNS lists at most this many LUNs of a port (as it always has). */
#define REPORT_LUNS_MAX 256

#define PORT_WORDS ((SCSI_TARGET_MAX_PORT + 1) / 64)

struct target_lun {
    uint32_t key;              /* port << 16 | LUN */
    struct scsi_lun *lun;
};

struct scsi_target {
    char *name;
    unsigned n;
    struct target_lun *e;      /* sorted by key */
    GList *nexuses;            /* main thread */
    struct iothread *main;     /* where grace periods end; NULL: no threads */
    struct iothread **threads; /* the threads that run commands */
    unsigned nthreads;
    unsigned graces;           /* grace periods not ended yet */
};

/* One LUN as one nexus sees it. */
struct nexus_lun {
    uint32_t key;
    struct scsi_lun *lun;
    struct scsi_ua_state *ua;  /* the nexus's, shared by its successive tables */
};

/* What one nexus reaches; immutable once published. */
struct nexus_table {
    /* Ports with a LUN: every command asks, so one bit test, not a scan. */
    uint64_t ports[PORT_WORDS];
    unsigned n;
    struct nexus_lun e[];      /* sorted by key, like the target's table */
};

struct scsi_nexus {
    struct scsi_target *t;
    char *name;
    char *initiator;           /* its initiator port name, for reservations */
    _Atomic(struct nexus_table *) table;
    const struct scsi_nexus_events *ev;
    void *ev_opaque;
};

static uint32_t lun_key(unsigned port, unsigned lun_id)
{
    return (uint32_t)port << 16 | lun_id;
}

static unsigned key_port(uint32_t key)
{
    return key >> 16;
}

static unsigned key_lun(uint32_t key)
{
    return key & 0xffff;
}

static bool key_valid(unsigned port, unsigned lun_id)
{
    return port <= SCSI_TARGET_MAX_PORT && lun_id <= SCSI_TARGET_MAX_LUN;
}

/* Both tables start with the key, so one comparison serves both. */
static int key_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return x < y ? -1 : x > y;
}

/* ---- grace periods ------------------------------------------------------ */

/*
 * What a change leaves to free once no I/O thread can be looking at it:
 * the replaced tables after the grace period; a removed LUN's
 * unit-attention states only after its drain too, because a command that
 * waits in flight (for a rate limit, scsi-qos.c) reads its nexus's state
 * when it runs, after the grace period that let it in.
 */
struct retired {
    struct scsi_target *t;
    GPtrArray *tables;         /* struct nexus_table *, g_free */
    GPtrArray *uas;            /* struct scsi_ua_state *, g_free */
    struct scsi_lun *lun;      /* removed: drained, then handed back */
    struct scsi_drain drain;
    scsi_target_removed_fn *removed;
    void *removed_opaque;
};

static struct retired *retired_new(struct scsi_target *t)
{
    struct retired *r = g_new0(struct retired, 1);

    r->t = t;
    r->tables = g_ptr_array_new_with_free_func(g_free);
    r->uas = g_ptr_array_new_with_free_func(g_free);
    return r;
}

static void retired_finish(struct retired *r)
{
    g_ptr_array_free(r->uas, TRUE);
    r->t->graces--;
    if (r->removed) {
        r->removed(r->lun, r->removed_opaque);
    }
    g_free(r);
}

static void retired_drained(struct scsi_drain *d)
{
    retired_finish(d->opaque);
}

static void grace_ended(void *opaque)
{
    struct retired *r = opaque;

    g_ptr_array_free(r->tables, TRUE);
    if (!r->lun) {
        retired_finish(r);
        return;
    }
    /*
     * No table names the LUN now; its commands still in flight, those
     * waiting for a rate limit among them, finish first.
     */
    r->drain = (struct scsi_drain){ .done = retired_drained, .thread = r->t->main, .opaque = r };
    scsi_lun_drain_async(r->lun, &r->drain);
}

static void retire(struct retired *r)
{
    struct scsi_target *t = r->t;

    t->graces++;
    iothread_grace(t->main, t->threads, t->nthreads, grace_ended, r);
}

/* ---- the LUN table ----------------------------------------------------- */

struct scsi_target *scsi_target_new(const char *name)
{
    struct scsi_target *t = g_new0(struct scsi_target, 1);

    t->name = g_strdup(name ? name : "target");
    return t;
}

void scsi_target_set_threads(struct scsi_target *t, struct iothread *main,
                             struct iothread *const *threads, unsigned n)
{
    g_free(t->threads);
    t->main = main;
    t->threads = g_memdup2(threads, sizeof(*threads) * n);
    t->nthreads = n;
}

void scsi_target_free(struct scsi_target *t)
{
    if (!t) {
        return;
    }
    /* A nexus left alive would read the tables freed here. */
    g_assert(!t->nexuses);
    /* The threads' loops have ended (freed) before the target: every grace with them. */
    g_assert(!t->graces);
    g_free(t->e);
    g_free(t->threads);
    g_free(t->name);
    g_free(t);
}

void scsi_target_free_luns(struct scsi_target *t)
{
    g_autoptr(GPtrArray) luns = g_ptr_array_new_with_free_func((GDestroyNotify)scsi_lun_free);

    for (unsigned i = 0; t && i < t->n; i++) {
        g_ptr_array_add(luns, t->e[i].lun);
    }
    scsi_target_free(t);
}

static struct target_lun *target_find(const struct scsi_target *t, unsigned port, unsigned lun_id)
{
    uint32_t key = lun_key(port, lun_id);

    if (!key_valid(port, lun_id) || !t->n) {
        return NULL;
    }
    return bsearch(&key, t->e, t->n, sizeof(*t->e), key_cmp);
}

struct scsi_lun *scsi_target_lun(const struct scsi_target *t, unsigned port, unsigned lun_id)
{
    const struct target_lun *e = target_find(t, port, lun_id);

    return e ? e->lun : NULL;
}

bool scsi_target_has_port(const struct scsi_target *t, unsigned port)
{
    for (unsigned i = 0; i < t->n; i++) {
        if (key_port(t->e[i].key) == port) {
            return true;
        }
    }
    return false;
}

unsigned scsi_target_lun_count(const struct scsi_target *t)
{
    return t->n;
}

struct scsi_lun *scsi_target_lun_at(const struct scsi_target *t, unsigned i)
{
    return i < t->n ? t->e[i].lun : NULL;
}

bool scsi_target_lun_id_at(const struct scsi_target *t, unsigned i, unsigned *port,
                           unsigned *lun_id)
{
    if (i >= t->n) {
        return false;
    }
    *port = key_port(t->e[i].key);
    *lun_id = key_lun(t->e[i].key);
    return true;
}

unsigned scsi_target_nexus_count(const struct scsi_target *t)
{
    return g_list_length(t->nexuses);
}

/* ---- the target's own answers ------------------------------------------ */

static void cmd_reset(struct scsi_cmd *cmd)
{
    cmd->status = SAM_STAT_GOOD;
    cmd->sense_len = 0;
    cmd->data_in_xfer = 0;
    cmd->data_out_xfer = 0;
}

static void report_luns(struct scsi_cmd *cmd, const uint16_t *luns, unsigned n)
{
    const uint8_t *cdb = cmd->cdb;
    uint32_t alloc;
    g_autofree uint8_t *b = NULL;

    cmd_reset(cmd);
    if (!cdb || cmd->cdb_len < 12) {
        sd_set_sense(cmd, SCSI_SC_INVALID_FIELD_IN_CDB);
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

static void absent_lun_exec(struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    uint8_t b[36] = { 0 };
    uint8_t s[FIXED_SENSE_LEN];

    cmd_reset(cmd);
    if (!cdb || cmd->cdb_len < 6) {
        sd_set_sense(cmd, SCSI_SC_LUN_NOT_SUPPORTED);
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
        sd_fill_fixed_sense(s, SCSI_SC_LUN_NOT_SUPPORTED);
        sd_reply(cmd, s, sizeof(s), cdb[4]);
        return;
    default:
        sd_set_sense(cmd, SCSI_SC_LUN_NOT_SUPPORTED);
        return;
    }
}

/* ---- I_T nexuses ------------------------------------------------------- */

static struct nexus_table *table_of(const struct scsi_nexus *nx)
{
    return atomic_load_explicit(&((struct scsi_nexus *)nx)->table, memory_order_acquire);
}

static struct nexus_table *table_alloc(unsigned n)
{
    struct nexus_table *tb = g_malloc0(sizeof(*tb) + sizeof(tb->e[0]) * n);

    tb->n = n;
    return tb;
}

static void table_fill_ports(struct nexus_table *tb)
{
    memset(tb->ports, 0, sizeof(tb->ports));
    for (unsigned i = 0; i < tb->n; i++) {
        unsigned port = key_port(tb->e[i].key);

        tb->ports[port / 64] |= 1ull << (port % 64);
    }
}

static struct nexus_lun *table_find(struct nexus_table *tb, unsigned port, unsigned lun_id)
{
    uint32_t key = lun_key(port, lun_id);

    if (!key_valid(port, lun_id) || !tb->n) {
        return NULL;
    }
    return bsearch(&key, tb->e, tb->n, sizeof(tb->e[0]), key_cmp);
}

struct scsi_nexus *scsi_target_nexus_new(struct scsi_target *t, const char *name)
{
    struct scsi_nexus *nx = g_new0(struct scsi_nexus, 1);
    struct nexus_table *tb = table_alloc(t->n);

    nx->t = t;
    nx->name = g_strdup(name ? name : "nexus");
    nx->initiator = g_strdup(nx->name);
    for (unsigned i = 0; i < t->n; i++) {
        tb->e[i].key = t->e[i].key;
        tb->e[i].lun = t->e[i].lun;
        tb->e[i].ua = g_new0(struct scsi_ua_state, 1);
        scsi_ua_init(tb->e[i].ua, t->e[i].lun);
    }
    table_fill_ports(tb);
    atomic_init(&nx->table, tb);
    t->nexuses = g_list_prepend(t->nexuses, nx);
    return nx;
}

void scsi_target_nexus_free(struct scsi_nexus *nx)
{
    struct nexus_table *tb;

    if (!nx) {
        return;
    }
    /* The transport has stopped: no thread runs this nexus's commands now. */
    tb = table_of(nx);
    for (unsigned i = 0; i < tb->n; i++) {
        g_free(tb->e[i].ua);
    }
    g_free(tb);
    nx->t->nexuses = g_list_remove(nx->t->nexuses, nx);
    g_free(nx->initiator);
    g_free(nx->name);
    g_free(nx);
}

void scsi_nexus_set_initiator(struct scsi_nexus *nx, const char *initiator)
{
    g_free(nx->initiator);
    nx->initiator = g_strdup(initiator);
}

const char *scsi_nexus_initiator(const struct scsi_nexus *nx)
{
    return nx->initiator;
}

const char *scsi_nexus_name(const struct scsi_nexus *nx)
{
    return nx->name;
}

void scsi_nexus_set_events(struct scsi_nexus *nx, const struct scsi_nexus_events *ev,
                           void *opaque)
{
    nx->ev = ev;
    nx->ev_opaque = opaque;
}

bool scsi_nexus_has_port(const struct scsi_nexus *nx, unsigned port)
{
    const struct nexus_table *tb = table_of(nx);

    return port <= SCSI_TARGET_MAX_PORT && tb->ports[port / 64] >> (port % 64) & 1;
}

struct scsi_lun *scsi_nexus_lun(struct scsi_nexus *nx, unsigned port, unsigned lun_id)
{
    struct nexus_lun *e = table_find(table_of(nx), port, lun_id);

    return e ? e->lun : NULL;
}

/* The port's LUN ids in ascending order, at most max of them. */
static unsigned port_luns(const struct nexus_table *tb, unsigned port, uint16_t *ids,
                          unsigned max)
{
    unsigned n = 0;

    for (unsigned i = 0; i < tb->n && n < max; i++) {
        if (key_port(tb->e[i].key) == port) {
            ids[n++] = (uint16_t)key_lun(tb->e[i].key);
        }
    }
    return n;
}

/*
 * EXTENDED COPY's copy targets: a LUN this nexus reaches, on any port of
 * its target, that the copy manager's match accepts (cmd->find_lun).
 * Only the nexus's own table, so a copy reaches no LUN its initiator
 * could not address itself (another controller's disks stay out of
 * reach).  A linear scan: a copy resolves a few descriptors per command.
 */
static struct scsi_lun *nexus_find_lun(const void *ctx,
                                       bool (*match)(const struct scsi_lun *lun, const void *arg),
                                       const void *arg, uint16_t *rtpi)
{
    const struct nexus_table *tb = ctx;

    for (unsigned i = 0; i < tb->n; i++) {
        if (match(tb->e[i].lun, arg)) {
            *rtpi = (uint16_t)(key_port(tb->e[i].key) + 1);
            return tb->e[i].lun;
        }
    }
    return NULL;
}

int scsi_nexus_exec(struct scsi_nexus *nx, unsigned port, unsigned lun_id,
                    bool report_luns_wlun, struct scsi_cmd *cmd)
{
    /* One table for the whole command: a change publishes a new one beside it. */
    struct nexus_table *tb = table_of(nx);
    struct nexus_lun *e;

    if (port > SCSI_TARGET_MAX_PORT || !(tb->ports[port / 64] >> (port % 64) & 1)) {
        return -ENXIO;
    }
    /* REPORT LUNS is the target's answer, whichever LUN it is sent to. */
    if (cmd->cdb && cmd->cdb_len && cmd->cdb[0] == OP_REPORT_LUNS) {
        uint16_t ids[REPORT_LUNS_MAX];

        report_luns(cmd, ids, port_luns(tb, port, ids, G_N_ELEMENTS(ids)));
        cmd->complete(cmd);
        return 0;
    }
    e = report_luns_wlun ? NULL : table_find(tb, port, lun_id);
    if (!e) {
        /*
         * A hole in the LUN space of an existing port: answer what an
         * initiator scanning LUNs needs; anything else is the transport's
         * "no such LUN".
         */
        if (cmd->cdb && cmd->cdb_len &&
            (cmd->cdb[0] == OP_INQUIRY || cmd->cdb[0] == OP_REQUEST_SENSE)) {
            absent_lun_exec(cmd);
            cmd->complete(cmd);
            return 0;
        }
        return -ENODEV;
    }
    /*
     * The unit attentions until the command completes (a removed LUN's
     * outlive its drain); the table only inside scsi_lun_exec's dispatch,
     * within this grace period.
     */
    cmd->ua = e->ua;
    cmd->it = (struct scsi_it_id) {
        .initiator = nx->initiator, .target = nx->t->name, .rtpi = (uint16_t)(port + 1),
    };
    cmd->find_lun = nexus_find_lun;
    cmd->find_ctx = tb;
    scsi_lun_exec(e->lun, cmd);
    return 0;
}

void scsi_nexus_reset(struct scsi_nexus *nx)
{
    struct nexus_table *tb = table_of(nx);

    for (unsigned i = 0; i < tb->n; i++) {
        scsi_ua_set(tb->e[i].ua, SCSI_UA_POWER_ON);
    }
}

void scsi_nexus_loss(struct scsi_nexus *nx, unsigned port)
{
    struct nexus_table *tb = table_of(nx);

    for (unsigned i = 0; i < tb->n; i++) {
        if (key_port(tb->e[i].key) == port) {
            scsi_ua_set(tb->e[i].ua, SCSI_UA_NEXUS_LOSS);
        }
    }
}

/* ---- live changes (main thread) ---------------------------------------- */

/*
 * REPORTED LUNS DATA HAS CHANGED on every LUN of the port that this nexus
 * still reaches (SPC-4 6.33: the inventory an initiator got is stale).
 */
static void table_luns_changed(struct nexus_table *tb, unsigned port)
{
    for (unsigned i = 0; i < tb->n; i++) {
        if (key_port(tb->e[i].key) == port) {
            scsi_ua_set(tb->e[i].ua, SCSI_UA_REPORTED_LUNS_CHANGED);
        }
    }
}

/* Publishes tb for nx; the table it replaces goes to r. */
static void nexus_publish(struct scsi_nexus *nx, struct nexus_table *tb, struct retired *r)
{
    table_fill_ports(tb);
    g_ptr_array_add(r->tables, atomic_exchange_explicit(&nx->table, tb, memory_order_acq_rel));
}

int scsi_target_add_lun(struct scsi_target *t, unsigned port, unsigned lun_id,
                        struct scsi_lun *l)
{
    uint32_t key = lun_key(port, lun_id);
    struct retired *r;
    int ret = 0;

    if (!key_valid(port, lun_id)) {
        ret = -EINVAL;
    } else if (target_find(t, port, lun_id)) {
        ret = -EEXIST;
    }
    if (ret < 0) {
        return ret;
    }
    t->e = g_renew(struct target_lun, t->e, t->n + 1);
    t->e[t->n++] = (struct target_lun){ .key = key, .lun = l };
    qsort(t->e, t->n, sizeof(*t->e), key_cmp);
    if (!t->nexuses) {
        return 0;
    }
    r = retired_new(t);
    for (GList *it = t->nexuses; it; it = it->next) {
        struct scsi_nexus *nx = it->data;
        struct nexus_table *old = table_of(nx);
        struct nexus_table *tb = table_alloc(old->n + 1);
        unsigned j = 0;
        bool placed = false;

        /* Every LUN the nexus already reaches learns of the new one. */
        table_luns_changed(old, port);
        for (unsigned i = 0; i <= old->n; i++) {
            if (!placed && (i == old->n || old->e[i].key > key)) {
                tb->e[j].key = key;
                tb->e[j].lun = l;
                tb->e[j].ua = g_new0(struct scsi_ua_state, 1);
                /* It has just powered on, for this initiator as for any. */
                scsi_ua_init(tb->e[j].ua, l);
                j++;
                placed = true;
            }
            if (i < old->n) {
                tb->e[j++] = old->e[i];
            }
        }
        nexus_publish(nx, tb, r);
    }
    retire(r);
    for (GList *it = t->nexuses; it; it = it->next) {
        struct scsi_nexus *nx = it->data;

        if (nx->ev && nx->ev->lun_added) {
            nx->ev->lun_added(nx->ev_opaque, port, lun_id);
        }
    }
    g_message("%s: LUN %u:%u added (%s)", t->name, port, lun_id, scsi_lun_name(l));
    return 0;
}

int scsi_target_remove_lun(struct scsi_target *t, unsigned port, unsigned lun_id,
                           scsi_target_removed_fn *removed, void *opaque)
{
    struct target_lun *te = target_find(t, port, lun_id);
    uint32_t key = lun_key(port, lun_id);
    struct scsi_lun *l;
    struct retired *r;
    unsigned at;

    if (!te) {
        return key_valid(port, lun_id) ? -ENOENT : -EINVAL;
    }
    l = te->lun;
    at = (unsigned)(te - t->e);
    memmove(&t->e[at], &t->e[at + 1], sizeof(*t->e) * (t->n - at - 1));
    t->n--;

    r = retired_new(t);
    r->lun = l;
    r->removed = removed;
    r->removed_opaque = opaque;
    for (GList *it = t->nexuses; it; it = it->next) {
        struct scsi_nexus *nx = it->data;
        struct nexus_table *old = table_of(nx);
        struct nexus_table *tb = table_alloc(old->n - 1);
        unsigned j = 0;

        /* By address: the same LUN may be mapped at another one, which stays. */
        for (unsigned i = 0; i < old->n; i++) {
            if (old->e[i].key == key) {
                g_ptr_array_add(r->uas, old->e[i].ua);
            } else {
                tb->e[j++] = old->e[i];
            }
        }
        g_assert(j == tb->n);
        table_luns_changed(tb, port);
        nexus_publish(nx, tb, r);
    }
    g_message("%s: LUN %u:%u removed (%s)", t->name, port, lun_id, scsi_lun_name(l));
    for (GList *it = t->nexuses; it; it = it->next) {
        struct scsi_nexus *nx = it->data;

        if (nx->ev && nx->ev->lun_removed) {
            nx->ev->lun_removed(nx->ev_opaque, port, lun_id);
        }
    }
    /* Handed back (or freed) after the grace period and the LUN's drain: l may be gone. */
    retire(r);
    return 0;
}

void scsi_target_lun_changed(struct scsi_target *t, struct scsi_lun *l)
{
    uint8_t asc, ascq;

    /* The condition the unit attention reports, for the transports' events. */
    sd_sense_asc(sd_ua_sense[SCSI_UA_CAPACITY_CHANGED], &asc, &ascq);
    for (unsigned i = 0; i < t->n; i++) {
        if (t->e[i].lun != l) {
            continue;
        }
        for (GList *it = t->nexuses; it; it = it->next) {
            struct scsi_nexus *nx = it->data;

            if (nx->ev && nx->ev->lun_changed) {
                nx->ev->lun_changed(nx->ev_opaque, key_port(t->e[i].key), key_lun(t->e[i].key),
                                    asc, ascq);
            }
        }
    }
}

int scsi_target_resize_lun(struct scsi_target *t, unsigned port, unsigned lun_id,
                           uint64_t size, GError **err)
{
    struct scsi_lun *l = scsi_target_lun(t, port, lun_id);
    int ret;

    if (!l) {
        return key_valid(port, lun_id)
            ? vs_error_set(err, -ENOENT, "no LUN is mapped at %u:%u", port, lun_id)
            : vs_error_set(err, -EINVAL, "%u:%u is no LUN address", port, lun_id);
    }
    ret = scsi_lun_resize(l, size, err);
    if (ret == 0) {
        scsi_target_lun_changed(t, l);
    }
    return ret;
}
