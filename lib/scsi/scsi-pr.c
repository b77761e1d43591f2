/*
 * Persistent reservations (SPC-4 5.14, 6.15, 6.16): the state machine of
 * one LUN.  Registrations and the reservation belong to I_T nexuses named
 * by their initiator and target ports, not to connections, so they
 * survive a front-end's reconnection and follow a migrated VM whose
 * controller keeps its initiator name.  State changes and the checks of
 * the data path take one mutex; the data path looks at it only while a
 * reservation or an owed unit attention exists (scsi_pr_restricts).
 * Not supported, and refused with INVALID FIELD as SPC-4 allows a device
 * server that reports so in REPORT CAPABILITIES: SPEC_I_PT, ALL_TG_PT,
 * APTPL (persistence through power loss), REGISTER AND MOVE and REPLACE
 * LOST RESERVATION.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <pthread.h>
#include <string.h>

#include "scsi-pr.h"

struct pr_nexus {
    char *initiator;
    char *target;
    uint16_t rtpi;
};

struct pr_reg {
    struct pr_nexus it;
    uint64_t key;
};

/* Unit attentions owed to a nexus, a bit per condition, reported oldest condition first. */
enum { UA_RES_PREEMPTED, UA_RES_RELEASED, UA_REG_PREEMPTED, UA_BITS };
static const enum scsi_sc ua_sense[UA_BITS] = {
    [UA_RES_PREEMPTED] = SCSI_SC_RESERVATIONS_PREEMPTED,
    [UA_RES_RELEASED] = SCSI_SC_RESERVATIONS_RELEASED,
    [UA_REG_PREEMPTED] = SCSI_SC_REGISTRATIONS_PREEMPTED,
};

struct pr_ua {
    struct pr_nexus it;
    unsigned mask;
};

struct scsi_pr {
    pthread_mutex_t lock;
    char *name;
    uint32_t generation;
    GArray *regs;              /* struct pr_reg */
    GArray *uas;               /* struct pr_ua */
    bool reserved;
    uint8_t type;
    struct pr_nexus holder;    /* unused for the all-registrants types */
    atomic_bool restricts;     /* reserved || uas->len */
};

static bool it_eq(const struct pr_nexus *a, const struct scsi_it_id *b)
{
    return a->rtpi == b->rtpi && !strcmp(a->initiator, b->initiator) &&
           !strcmp(a->target, b->target);
}

static bool nexus_eq(const struct pr_nexus *a, const struct pr_nexus *b)
{
    return a->rtpi == b->rtpi && !strcmp(a->initiator, b->initiator) &&
           !strcmp(a->target, b->target);
}

static struct pr_nexus nexus_dup(const struct scsi_it_id *it)
{
    return (struct pr_nexus) {
        .initiator = g_strdup(it->initiator), .target = g_strdup(it->target), .rtpi = it->rtpi,
    };
}

static struct pr_nexus nexus_copy(const struct pr_nexus *n)
{
    return (struct pr_nexus) {
        .initiator = g_strdup(n->initiator), .target = g_strdup(n->target), .rtpi = n->rtpi,
    };
}

static void nexus_clear(struct pr_nexus *n)
{
    g_free(n->initiator);
    g_free(n->target);
    *n = (struct pr_nexus) { 0 };
}

static bool all_registrants(uint8_t type)
{
    return type == PR_TYPE_WE_ALL_REGISTRANTS || type == PR_TYPE_EA_ALL_REGISTRANTS;
}

static bool registrants_only(uint8_t type)
{
    return type == PR_TYPE_WE_REGISTRANTS_ONLY || type == PR_TYPE_EA_REGISTRANTS_ONLY;
}

static bool type_valid(uint8_t type)
{
    return type == PR_TYPE_WRITE_EXCLUSIVE || type == PR_TYPE_EXCLUSIVE_ACCESS ||
           registrants_only(type) || all_registrants(type);
}

static void update_restricts(struct scsi_pr *pr)
{
    atomic_store_explicit(&pr->restricts, pr->reserved || pr->uas->len > 0,
                          memory_order_release);
}

struct scsi_pr *scsi_pr_new(const char *lun_name)
{
    struct scsi_pr *pr = g_new0(struct scsi_pr, 1);

    pthread_mutex_init(&pr->lock, NULL);
    pr->name = g_strdup(lun_name);
    pr->regs = g_array_new(FALSE, TRUE, sizeof(struct pr_reg));
    pr->uas = g_array_new(FALSE, TRUE, sizeof(struct pr_ua));
    atomic_init(&pr->restricts, false);
    return pr;
}

void scsi_pr_free(struct scsi_pr *pr)
{
    if (!pr) {
        return;
    }
    for (guint i = 0; i < pr->regs->len; i++) {
        nexus_clear(&g_array_index(pr->regs, struct pr_reg, i).it);
    }
    for (guint i = 0; i < pr->uas->len; i++) {
        nexus_clear(&g_array_index(pr->uas, struct pr_ua, i).it);
    }
    g_array_free(pr->regs, TRUE);
    g_array_free(pr->uas, TRUE);
    nexus_clear(&pr->holder);
    pthread_mutex_destroy(&pr->lock);
    g_free(pr->name);
    g_free(pr);
}

bool scsi_pr_restricts(const struct scsi_pr *pr)
{
    return atomic_load_explicit(&pr->restricts, memory_order_acquire);
}

uint32_t scsi_pr_generation(struct scsi_pr *pr)
{
    uint32_t g;

    pthread_mutex_lock(&pr->lock);
    g = pr->generation;
    pthread_mutex_unlock(&pr->lock);
    return g;
}

/* ---- state helpers (lock held) ------------------------------------------ */

static struct pr_reg *find_reg(struct scsi_pr *pr, const struct scsi_it_id *it)
{
    for (guint i = 0; i < pr->regs->len; i++) {
        struct pr_reg *r = &g_array_index(pr->regs, struct pr_reg, i);

        if (it_eq(&r->it, it)) {
            return r;
        }
    }
    return NULL;
}

static void owe_ua(struct scsi_pr *pr, const struct pr_nexus *n, unsigned bit)
{
    struct pr_ua ua;

    for (guint i = 0; i < pr->uas->len; i++) {
        struct pr_ua *u = &g_array_index(pr->uas, struct pr_ua, i);

        if (nexus_eq(&u->it, n)) {
            u->mask |= 1u << bit;
            return;
        }
    }
    ua = (struct pr_ua) { .it = nexus_copy(n), .mask = 1u << bit };
    g_array_append_val(pr->uas, ua);
}

static bool is_holder(struct scsi_pr *pr, const struct scsi_it_id *it)
{
    if (!pr->reserved) {
        return false;
    }
    return all_registrants(pr->type) ? find_reg(pr, it) != NULL : it_eq(&pr->holder, it);
}

static void release(struct scsi_pr *pr)
{
    pr->reserved = false;
    pr->type = 0;
    nexus_clear(&pr->holder);
}

/* Every other registrant is told RESERVATIONS RELEASED (types other than WE and EA). */
static void release_notify(struct scsi_pr *pr, const struct scsi_it_id *except)
{
    uint8_t type = pr->type;

    release(pr);
    if (type == PR_TYPE_WRITE_EXCLUSIVE || type == PR_TYPE_EXCLUSIVE_ACCESS) {
        return;
    }
    for (guint i = 0; i < pr->regs->len; i++) {
        struct pr_reg *r = &g_array_index(pr->regs, struct pr_reg, i);

        if (!except || !it_eq(&r->it, except)) {
            owe_ua(pr, &r->it, UA_RES_RELEASED);
        }
    }
}

static void remove_reg_at(struct scsi_pr *pr, guint i)
{
    nexus_clear(&g_array_index(pr->regs, struct pr_reg, i).it);
    g_array_remove_index(pr->regs, i);
}

/*
 * Removes it's registration: a reservation it held goes with it; an
 * all-registrants reservation goes with the last registrant.
 */
static void unregister(struct scsi_pr *pr, const struct scsi_it_id *it)
{
    bool held = pr->reserved && !all_registrants(pr->type) && it_eq(&pr->holder, it);

    for (guint i = 0; i < pr->regs->len; i++) {
        if (it_eq(&g_array_index(pr->regs, struct pr_reg, i).it, it)) {
            remove_reg_at(pr, i);
            break;
        }
    }
    if (held || (pr->reserved && all_registrants(pr->type) && pr->regs->len == 0)) {
        /* SPC-4 5.14.11.2.2: released by unregistering; the others are told (RO types). */
        release_notify(pr, it);
    }
}

/*
 * Removes every registration with key except it's own, telling each
 * nexus REGISTRATIONS PREEMPTED; key 0 with match_all removes all but
 * it's.  Returns how many were removed.
 */
static unsigned preempt_regs(struct scsi_pr *pr, const struct scsi_it_id *it, uint64_t key,
                             bool match_all)
{
    unsigned n = 0;

    for (guint i = 0; i < pr->regs->len;) {
        struct pr_reg *r = &g_array_index(pr->regs, struct pr_reg, i);

        if ((match_all || r->key == key) && !it_eq(&r->it, it)) {
            owe_ua(pr, &r->it, UA_REG_PREEMPTED);
            remove_reg_at(pr, i);
            n++;
        } else {
            i++;
        }
    }
    return n;
}

/* ---- PERSISTENT RESERVE OUT --------------------------------------------- */

static enum scsi_pr_result check(enum scsi_sc *out, enum scsi_sc sc)
{
    *out = sc;
    return SCSI_PR_CHECK;
}

static enum scsi_pr_result do_register(struct scsi_pr *pr, const struct scsi_it_id *it,
                                       const struct scsi_pr_out *o, enum scsi_sc *sc)
{
    struct pr_reg *r = find_reg(pr, it);

    if (!r) {
        struct pr_reg fresh;

        if (o->sa == PR_OUT_REGISTER && o->key != 0) {
            return SCSI_PR_RESULT_CONFLICT;
        }
        if (o->sa_key == 0) {
            return SCSI_PR_GOOD;       /* nothing to register, nothing changes */
        }
        if (pr->regs->len >= SCSI_PR_MAX_REGS) {
            return check(sc, SCSI_SC_INSUFFICIENT_REG_RESOURCES);
        }
        fresh = (struct pr_reg) { .it = nexus_dup(it), .key = o->sa_key };
        g_array_append_val(pr->regs, fresh);
    } else if (o->sa == PR_OUT_REGISTER && o->key != r->key) {
        return SCSI_PR_RESULT_CONFLICT;
    } else if (o->sa_key == 0) {
        unregister(pr, it);
    } else {
        r->key = o->sa_key;
    }
    pr->generation++;
    return SCSI_PR_GOOD;
}

static enum scsi_pr_result do_reserve(struct scsi_pr *pr, const struct scsi_it_id *it,
                                      const struct scsi_pr_out *o)
{
    if (pr->reserved) {
        /* The holder may repeat its reservation; anything else conflicts. */
        return is_holder(pr, it) && pr->type == o->type ? SCSI_PR_GOOD
                                                         : SCSI_PR_RESULT_CONFLICT;
    }
    pr->reserved = true;
    pr->type = o->type;
    if (!all_registrants(o->type)) {
        pr->holder = nexus_dup(it);
    }
    return SCSI_PR_GOOD;
}

static enum scsi_pr_result do_release(struct scsi_pr *pr, const struct scsi_it_id *it,
                                      const struct scsi_pr_out *o, enum scsi_sc *sc)
{
    if (!pr->reserved || !is_holder(pr, it)) {
        return SCSI_PR_GOOD;           /* SPC-4 5.14.11.2.2: nothing to release */
    }
    if (o->type != pr->type) {
        return check(sc, SCSI_SC_INVALID_RELEASE_OF_PR);
    }
    release_notify(pr, it);
    return SCSI_PR_GOOD;
}

static enum scsi_pr_result do_clear(struct scsi_pr *pr, const struct scsi_it_id *it)
{
    for (guint i = 0; i < pr->regs->len; i++) {
        struct pr_reg *r = &g_array_index(pr->regs, struct pr_reg, i);

        if (!it_eq(&r->it, it)) {
            owe_ua(pr, &r->it, UA_RES_PREEMPTED);
        }
    }
    while (pr->regs->len) {
        remove_reg_at(pr, pr->regs->len - 1);
    }
    release(pr);
    pr->generation++;
    return SCSI_PR_GOOD;
}

/* The holder's key, for a reservation held by one nexus. */
static uint64_t holder_key(struct scsi_pr *pr)
{
    for (guint i = 0; i < pr->regs->len; i++) {
        struct pr_reg *r = &g_array_index(pr->regs, struct pr_reg, i);

        if (nexus_eq(&r->it, &pr->holder)) {
            return r->key;
        }
    }
    return 0;
}

static enum scsi_pr_result do_preempt(struct scsi_pr *pr, const struct scsi_it_id *it,
                                      const struct scsi_pr_out *o, enum scsi_sc *sc,
                                      bool *preempted)
{
    unsigned n;

    if (pr->reserved && all_registrants(pr->type) && o->sa_key == 0) {
        /* SPC-4 5.14.11.4.4: everybody else goes; the preempter holds the new reservation. */
        n = preempt_regs(pr, it, 0, true);
        release(pr);
        pr->reserved = true;
        pr->type = o->type;
        if (!all_registrants(o->type)) {
            pr->holder = nexus_dup(it);
        }
    } else if (o->sa_key == 0) {
        return check(sc, SCSI_SC_INVALID_FIELD_IN_PARAM_LIST);
    } else if (pr->reserved && !all_registrants(pr->type) && o->sa_key == holder_key(pr)) {
        /* The holder is preempted: its reservation moves to the preempter, type and all. */
        n = preempt_regs(pr, it, o->sa_key, false);
        release(pr);
        pr->reserved = true;
        pr->type = o->type;
        if (!all_registrants(o->type)) {
            pr->holder = nexus_dup(it);
        }
    } else {
        /* Only registrations go; none with that key is a conflict. */
        n = preempt_regs(pr, it, o->sa_key, false);
        if (n == 0) {
            return SCSI_PR_RESULT_CONFLICT;
        }
    }
    *preempted = n > 0;
    pr->generation++;
    return SCSI_PR_GOOD;
}

enum scsi_pr_result scsi_pr_out(struct scsi_pr *pr, const struct scsi_it_id *it,
                                const struct scsi_pr_out *o, enum scsi_sc *sc,
                                bool *preempted)
{
    enum scsi_pr_result res;
    struct pr_reg *r;

    *preempted = false;
    if (o->sa == PR_OUT_REGISTER_AND_MOVE || o->sa == PR_OUT_REPLACE_LOST || o->sa > 8) {
        return check(sc, SCSI_SC_INVALID_FIELD_IN_CDB);
    }
    /* Capabilities we report as absent (REPORT CAPABILITIES): SIP_C, ATP_C, PTPL_C 0. */
    if (o->spec_i_pt || o->all_tg_pt || o->aptpl) {
        return check(sc, SCSI_SC_INVALID_FIELD_IN_PARAM_LIST);
    }
    pthread_mutex_lock(&pr->lock);
    if (o->sa == PR_OUT_REGISTER || o->sa == PR_OUT_REGISTER_AND_IGNORE) {
        res = do_register(pr, it, o, sc);
        goto out;
    }
    /* Everything else needs the nexus registered, under the key it gives. */
    r = find_reg(pr, it);
    if (!r || r->key != o->key) {
        res = SCSI_PR_RESULT_CONFLICT;
        goto out;
    }
    /* LU_SCOPE only; RELEASE's type is checked against the reservation's. */
    if (o->sa != PR_OUT_CLEAR &&
        (o->scope != 0 || (o->sa != PR_OUT_RELEASE && !type_valid(o->type)))) {
        res = check(sc, SCSI_SC_INVALID_FIELD_IN_CDB);
        goto out;
    }
    switch (o->sa) {
    case PR_OUT_RESERVE:
        res = do_reserve(pr, it, o);
        break;
    case PR_OUT_RELEASE:
        res = do_release(pr, it, o, sc);
        break;
    case PR_OUT_CLEAR:
        res = do_clear(pr, it);
        break;
    default:
        res = do_preempt(pr, it, o, sc, preempted);
        if (o->sa != PR_OUT_PREEMPT_AND_ABORT) {
            *preempted = false;
        }
        break;
    }
out:
    update_restricts(pr);
    pthread_mutex_unlock(&pr->lock);
    return res;
}

/* ---- PERSISTENT RESERVE IN ---------------------------------------------- */

static void put32(GByteArray *b, uint32_t v)
{
    uint8_t p[4];

    st32(p, v);
    g_byte_array_append(b, p, 4);
}

static void put64(GByteArray *b, uint64_t v)
{
    uint8_t p[8];

    st64(p, v);
    g_byte_array_append(b, p, 8);
}

static void put_zero(GByteArray *b, unsigned n)
{
    static const uint8_t z[32];

    g_assert(n <= sizeof(z));
    g_byte_array_append(b, z, n);
}

/*
 * The initiator's TransportID (SPC-4 7.6.4): SAS (protocol 6h) for a
 * naa. name, as the kernel's vhost-scsi reports, else the iSCSI format
 * (protocol 5h, a NUL-terminated name padded to a multiple of 4 bytes).
 */
static void put_transport_id(GByteArray *b, const char *initiator)
{
    size_t n = strlen(initiator);
    uint8_t hdr[4] = { 0 };

    if (n == 20 && g_str_has_prefix(initiator, "naa.")) {
        uint64_t wwn = g_ascii_strtoull(initiator + 4, NULL, 16);

        hdr[0] = 0x06;
        g_byte_array_append(b, hdr, 4);
        put64(b, wwn);
        put_zero(b, 12);
        return;
    }
    n = MIN(n, 223);               /* iSCSI names are at most 223 bytes */
    size_t len = MAX((n + 1 + 3) & ~(size_t)3, 20);
    hdr[0] = 0x05;
    st16(hdr + 2, (uint16_t)len);
    g_byte_array_append(b, hdr, 4);
    g_byte_array_append(b, (const uint8_t *)initiator, (guint)n);
    put_zero(b, (unsigned)(len - n));
}

static bool reg_holds(struct scsi_pr *pr, const struct pr_reg *r)
{
    return pr->reserved && (all_registrants(pr->type) || nexus_eq(&r->it, &pr->holder));
}

GByteArray *scsi_pr_in(struct scsi_pr *pr, uint8_t sa)
{
    GByteArray *b = g_byte_array_new();

    pthread_mutex_lock(&pr->lock);
    switch (sa) {
    case PR_IN_READ_KEYS:
        put32(b, pr->generation);
        put32(b, pr->regs->len * 8);
        for (guint i = 0; i < pr->regs->len; i++) {
            put64(b, g_array_index(pr->regs, struct pr_reg, i).key);
        }
        break;
    case PR_IN_READ_RESERVATION:
        put32(b, pr->generation);
        put32(b, pr->reserved ? 16 : 0);
        if (pr->reserved) {
            uint8_t t[8] = { 0 };

            /* All-registrants reservations have no one key (SPC-4 6.15.3.3): 0. */
            put64(b, all_registrants(pr->type) ? 0 : holder_key(pr));
            t[5] = pr->type;       /* scope 0 (LU_SCOPE) in the high nibble */
            g_byte_array_append(b, t, 8);
        }
        break;
    case PR_IN_REPORT_CAPABILITIES: {
        uint8_t c[8] = { 0 };

        st16(c, 8);
        /* RLR_C, CRH, SIP_C, ATP_C, PTPL_C: 0 (no RESERVE(6)/RELEASE(6) either). */
        c[3] = 0x80 | 0x10;        /* TMV; ALLOW COMMANDS 001b */
        c[4] = 0x80 | 0x40 | 0x20 | 0x08 | 0x02;   /* WR_EX_AR EX_AC_RO WR_EX_RO EX_AC WR_EX */
        c[5] = 0x01;               /* EX_AC_AR */
        g_byte_array_append(b, c, 8);
        break;
    }
    case PR_IN_READ_FULL_STATUS:
        put32(b, pr->generation);
        put32(b, 0);               /* additional length, filled in below */
        for (guint i = 0; i < pr->regs->len; i++) {
            struct pr_reg *r = &g_array_index(pr->regs, struct pr_reg, i);
            uint8_t d[16] = { 0 };
            guint at;

            put64(b, r->key);
            d[4] = reg_holds(pr, r) ? 0x01 : 0;
            d[5] = reg_holds(pr, r) ? pr->type : 0;
            st16(d + 10, r->it.rtpi);
            g_byte_array_append(b, d, 12);
            at = b->len;
            put32(b, 0);
            put_transport_id(b, r->it.initiator);
            st32(b->data + at, b->len - at - 4);
        }
        st32(b->data + 4, b->len - 8);
        break;
    default:
        g_byte_array_unref(b);
        b = NULL;
        break;
    }
    pthread_mutex_unlock(&pr->lock);
    return b;
}

/* ---- the data path ------------------------------------------------------- */

enum access { ACC_FREE, ACC_READ, ACC_WRITE };

/* SPC-4 table 61 and SBC-3 table 13, as the columns of a non-holder read them. */
static enum access classify(const uint8_t *cdb, unsigned len)
{
    switch (cdb[0]) {
    case OP_INQUIRY:
    case OP_REPORT_LUNS:
    case OP_REQUEST_SENSE:
    case OP_PR_IN:
    case OP_PR_OUT:
    case OP_TEST_UNIT_READY:
    case OP_READ_CAPACITY_10:
    case OP_MAINTENANCE_IN:
        return ACC_FREE;
    case OP_SERVICE_ACTION_IN_16:
        /* READ CAPACITY(16) is free; the other service actions (GET LBA STATUS) read. */
        return len > 1 && (cdb[1] & 0x1f) == SAI_READ_CAPACITY_16 ? ACC_FREE : ACC_READ;
    case OP_PREVENT_ALLOW:
        return len > 4 && (cdb[4] & 0x03) == 0 ? ACC_FREE : ACC_WRITE;
    case OP_START_STOP_UNIT:
        return len > 4 && (cdb[4] & 0x01) && (cdb[4] >> 4) == 0 ? ACC_FREE : ACC_WRITE;
    case OP_READ_6:
    case OP_READ_10:
    case OP_READ_12:
    case OP_READ_16:
    case OP_VERIFY_10:
    case OP_VERIFY_12:
    case OP_VERIFY_16:
    case OP_PRE_FETCH_10:
    case OP_PRE_FETCH_16:
    case OP_READ_DEFECT_DATA_10:
    case OP_READ_DEFECT_DATA_12:
    case OP_MODE_SENSE_6:
    case OP_MODE_SENSE_10:
        return ACC_READ;
    default:
        /* Writes, cache flushes, MODE SELECT, and whatever we do not know. */
        return ACC_WRITE;
    }
}

static bool conflicts(struct scsi_pr *pr, const struct scsi_it_id *it, enum access acc)
{
    bool excl_access;

    if (!pr->reserved || acc == ACC_FREE || is_holder(pr, it)) {
        return false;
    }
    if ((registrants_only(pr->type) || all_registrants(pr->type)) && find_reg(pr, it)) {
        return false;              /* registrants have access under these types */
    }
    excl_access = pr->type == PR_TYPE_EXCLUSIVE_ACCESS ||
                  pr->type == PR_TYPE_EA_REGISTRANTS_ONLY ||
                  pr->type == PR_TYPE_EA_ALL_REGISTRANTS;
    return acc == ACC_WRITE || excl_access;
}

enum scsi_pr_verdict scsi_pr_check(struct scsi_pr *pr, const struct scsi_it_id *it,
                                   const uint8_t *cdb, unsigned cdb_len, enum scsi_sc *ua)
{
    enum scsi_pr_verdict v = SCSI_PR_ALLOW;
    enum access acc = classify(cdb, cdb_len);
    bool ua_pass = cdb[0] == OP_INQUIRY || cdb[0] == OP_REPORT_LUNS ||
                   cdb[0] == OP_REQUEST_SENSE;

    pthread_mutex_lock(&pr->lock);
    for (guint i = 0; !ua_pass && i < pr->uas->len; i++) {
        struct pr_ua *u = &g_array_index(pr->uas, struct pr_ua, i);

        if (it_eq(&u->it, it)) {
            unsigned bit = (unsigned)__builtin_ctz(u->mask);

            *ua = ua_sense[bit];
            u->mask &= ~(1u << bit);
            if (!u->mask) {
                nexus_clear(&u->it);
                g_array_remove_index_fast(pr->uas, i);
            }
            v = SCSI_PR_UA;
            break;
        }
    }
    if (v == SCSI_PR_ALLOW && conflicts(pr, it, acc)) {
        v = SCSI_PR_CONFLICT;
    }
    update_restricts(pr);
    pthread_mutex_unlock(&pr->lock);
    return v;
}
