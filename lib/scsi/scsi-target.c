/*
 * The SCSI target (include/scsi/scsi-target.h): its LUN table, a sorted array
 * searched with bsearch and immutable once a nexus exists; the target's
 * own answers (REPORT LUNS, commands to an absent LUN); and the I_T
 * nexuses, each with a unit-attention state per LUN, kept in a table of
 * its own sorted by the same (port, LUN) key and looked up by that key, so
 * a LUN's place in the target's table is never part of a nexus's state.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdlib.h>

#include <glib.h>

#include "scsi-sense.h"
#include "scsi-target.h"

/* REPORT LUNS lists at most this many LUNs of a port (as it always has). */
#define REPORT_LUNS_MAX 256

struct target_lun {
    uint32_t key;              /* port << 16 | LUN */
    struct scsi_lun *lun;
};

struct scsi_target {
    char *name;
    unsigned n;
    struct target_lun *e;      /* sorted by key */
    GList *nexuses;            /* main thread */
};

/* One LUN as one nexus sees it. */
struct nexus_lun {
    uint32_t key;
    struct scsi_lun *lun;
    struct scsi_ua_state ua;
};

struct scsi_nexus {
    struct scsi_target *t;
    char *name;
    unsigned n;
    struct nexus_lun *e;       /* sorted by key, like the target's table */
};

static uint32_t lun_key(unsigned port, unsigned lun_id)
{
    return (uint32_t)port << 16 | lun_id;
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

/* ---- the LUN table ----------------------------------------------------- */

struct scsi_target *scsi_target_new(const char *name)
{
    struct scsi_target *t = g_new0(struct scsi_target, 1);

    t->name = g_strdup(name ? name : "target");
    return t;
}

void scsi_target_free(struct scsi_target *t)
{
    if (!t) {
        return;
    }
    /* A nexus left alive would point into the LUNs freed here. */
    g_assert(!t->nexuses);
    for (unsigned i = 0; i < t->n; i++) {
        scsi_lun_free(t->e[i].lun);
    }
    g_free(t->e);
    g_free(t->name);
    g_free(t);
}

int scsi_target_add_lun(struct scsi_target *t, unsigned port, unsigned lun_id,
                        struct scsi_lun *l)
{
    int ret = 0;

    if (!key_valid(port, lun_id)) {
        ret = -EINVAL;
    } else if (scsi_target_lun(t, port, lun_id)) {
        ret = -EEXIST;
    } else if (t->nexuses) {
        g_warning("%s: LUN %u:%u not added: initiators are connected", t->name, port, lun_id);
        ret = -EBUSY;
    }
    if (ret < 0) {
        scsi_lun_free(l);
        return ret;
    }
    t->e = g_renew(struct target_lun, t->e, t->n + 1);
    t->e[t->n++] = (struct target_lun){ .key = lun_key(port, lun_id), .lun = l };
    qsort(t->e, t->n, sizeof(*t->e), key_cmp);
    return 0;
}

struct scsi_lun *scsi_target_lun(const struct scsi_target *t, unsigned port, unsigned lun_id)
{
    uint32_t key = lun_key(port, lun_id);
    const struct target_lun *e;

    if (!key_valid(port, lun_id) || !t->n) {
        return NULL;
    }
    e = bsearch(&key, t->e, t->n, sizeof(*t->e), key_cmp);
    return e ? e->lun : NULL;
}

bool scsi_target_has_port(const struct scsi_target *t, unsigned port)
{
    for (unsigned i = 0; i < t->n; i++) {
        if (t->e[i].key >> 16 == port) {
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

/* The port's LUN ids in ascending order, at most max of them. */
static unsigned port_luns(const struct scsi_target *t, unsigned port, uint16_t *ids, unsigned max)
{
    unsigned n = 0;

    for (unsigned i = 0; i < t->n && n < max; i++) {
        if (t->e[i].key >> 16 == port) {
            ids[n++] = (uint16_t)(t->e[i].key & 0xffff);
        }
    }
    return n;
}

/* ---- I_T nexuses ------------------------------------------------------- */

struct scsi_nexus *scsi_target_nexus_new(struct scsi_target *t, const char *name)
{
    struct scsi_nexus *nx = g_new0(struct scsi_nexus, 1);

    nx->t = t;
    nx->name = g_strdup(name ? name : "nexus");
    nx->n = t->n;
    nx->e = g_new0(struct nexus_lun, MAX(t->n, 1u));
    for (unsigned i = 0; i < t->n; i++) {
        nx->e[i].key = t->e[i].key;
        nx->e[i].lun = t->e[i].lun;
        scsi_ua_init(&nx->e[i].ua, t->e[i].lun);
    }
    t->nexuses = g_list_prepend(t->nexuses, nx);
    return nx;
}

void scsi_target_nexus_free(struct scsi_nexus *nx)
{
    if (!nx) {
        return;
    }
    nx->t->nexuses = g_list_remove(nx->t->nexuses, nx);
    g_free(nx->e);
    g_free(nx->name);
    g_free(nx);
}

const char *scsi_nexus_name(const struct scsi_nexus *nx)
{
    return nx->name;
}

static struct nexus_lun *nexus_find(struct scsi_nexus *nx, unsigned port, unsigned lun_id)
{
    uint32_t key = lun_key(port, lun_id);

    if (!key_valid(port, lun_id) || !nx->n) {
        return NULL;
    }
    return bsearch(&key, nx->e, nx->n, sizeof(*nx->e), key_cmp);
}

int scsi_nexus_exec(struct scsi_nexus *nx, unsigned port, unsigned lun_id,
                    bool report_luns_wlun, struct scsi_cmd *cmd)
{
    struct nexus_lun *e;

    if (!scsi_target_has_port(nx->t, port)) {
        return -ENXIO;
    }
    /* REPORT LUNS is the target's answer, whichever LUN it is sent to. */
    if (cmd->cdb && cmd->cdb_len && cmd->cdb[0] == OP_REPORT_LUNS) {
        uint16_t ids[REPORT_LUNS_MAX];

        report_luns(cmd, ids, port_luns(nx->t, port, ids, G_N_ELEMENTS(ids)));
        cmd->complete(cmd);
        return 0;
    }
    e = report_luns_wlun ? NULL : nexus_find(nx, port, lun_id);
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
    cmd->ua = &e->ua;
    scsi_lun_exec(e->lun, cmd);
    return 0;
}

void scsi_nexus_reset(struct scsi_nexus *nx)
{
    for (unsigned i = 0; i < nx->n; i++) {
        scsi_ua_set(&nx->e[i].ua, SCSI_UA_POWER_ON);
    }
}

void scsi_nexus_loss(struct scsi_nexus *nx, unsigned port)
{
    for (unsigned i = 0; i < nx->n; i++) {
        if (nx->e[i].key >> 16 == port) {
            scsi_ua_set(&nx->e[i].ua, SCSI_UA_NEXUS_LOSS);
        }
    }
}
