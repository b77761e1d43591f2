/*
 * Persistent reservations (SPC-4 5.14, 6.15, 6.16): the state machine of
 * one LUN.  Registrations and the reservation belong to I_T nexuses named
 * by their initiator and target ports, not to connections, so they
 * survive a front-end's reconnection and follow a migrated VM whose
 * controller keeps its initiator name.  State changes and the checks of
 * the data path take one mutex; the data path looks at it only while a
 * reservation or an owed unit attention exists (scsi_pr_restricts).
 * With a state file (scsi_pr_persist_at), APTPL keeps the registrations
 * and the reservation there (scsi-pr-file.c), rewritten before the
 * command that changed them completes, so what a guest was told is what
 * a restart finds.  The writing is the LUN's saver thread's, never the
 * I/O thread's (a write, two fsyncs and a rename can take a disk's
 * hundreds of milliseconds, which every other queue of the thread would
 * wait): the command waits for it, the thread serves the others.  Saves
 * coalesce, one in flight and the latest state next, so a guest looping
 * PR OUT costs the disk two saves at a time, not one per command.  A
 * change the file cannot take is undone back to what the file has, and
 * the commands that waited for it fail.  Not supported, and refused with
 * INVALID FIELD as SPC-4 allows a device server that reports so in REPORT
 * CAPABILITIES: SPEC_I_PT, ALL_TG_PT and REPLACE LOST RESERVATION.
 * REGISTER AND MOVE moves a reservation to another initiator on the
 * sender's target.  The SPC-2 RESERVE/RELEASE live here too, under the
 * same lock, with the SPC-3 rules for their meeting persistent ones.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <string.h>

#include "offload.h"
#include "scsi-pr-file.h"
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

struct pr_undo;

struct scsi_pr {
    pthread_mutex_t lock;
    char *name;
    struct log_limit *log_limit;   /* the LUN's, for lines a guest's commands cause */
    uint32_t generation;
    GArray *regs;              /* struct pr_reg */
    GArray *uas;               /* struct pr_ua */
    bool reserved;
    uint8_t type;
    struct pr_nexus holder;    /* unused for the all-registrants types */
    bool spc2_reserved;        /* RESERVE(6)/(10) by spc2_holder */
    struct pr_nexus spc2_holder;
    atomic_bool restricts;     /* reserved || spc2_reserved || uas->len */
    /* Persistence through power loss (APTPL): where, for which LUN, and whether on. */
    char *path;                /* NULL: APTPL refused (PTPL_C 0) */
    uint64_t naa;
    bool aptpl;
    /*
     * The saver (save_job, on the saver worker, queued while save_queued):
     * changes numbers the changes the file must take, saved is the last
     * it has; while they differ, durable holds the state the file has
     * (what a failed save goes back to) and waiters the commands waiting,
     * oldest first.
     */
    const struct scsi_pr_store *store;     /* NULL: file_store */
    void *store_opaque;
    struct offload *saver;
    bool save_queued;
    uint64_t changes, saved;
    struct pr_undo *durable;
    struct scsi_pr_waiter *waiters, **waiters_tail;
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
    atomic_store_explicit(&pr->restricts, pr->reserved || pr->spc2_reserved || pr->uas->len > 0,
                          memory_order_release);
}

struct scsi_pr *scsi_pr_new(const char *lun_name, struct log_limit *log_limit)
{
    struct scsi_pr *pr = g_new0(struct scsi_pr, 1);

    pthread_mutex_init(&pr->lock, NULL);
    pr->saver = offload_new("pr-saver");
    pr->waiters_tail = &pr->waiters;
    pr->name = g_strdup(lun_name);
    pr->log_limit = log_limit;
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
    /* The LUN's commands have drained: none waits, a save still queued is the last. */
    offload_free(pr->saver);
    g_assert(!pr->waiters);
    for (guint i = 0; i < pr->regs->len; i++) {
        nexus_clear(&g_array_index(pr->regs, struct pr_reg, i).it);
    }
    for (guint i = 0; i < pr->uas->len; i++) {
        nexus_clear(&g_array_index(pr->uas, struct pr_ua, i).it);
    }
    g_array_free(pr->regs, TRUE);
    g_array_free(pr->uas, TRUE);
    nexus_clear(&pr->holder);
    nexus_clear(&pr->spc2_holder);
    pthread_mutex_destroy(&pr->lock);
    g_free(pr->path);
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

/* ---- persistence through power loss (lock held) ------------------------ */

/* The registrations, the reservation and PRgeneration, as the state file has them. */
static void to_file_state(struct scsi_pr *pr, struct pr_file_state *fs)
{
    *fs = (struct pr_file_state) { .naa = pr->naa, .generation = pr->generation, .holder = -1,
                                   .nregs = pr->regs->len };
    fs->regs = g_new0(struct pr_file_reg, pr->regs->len);
    for (guint i = 0; i < pr->regs->len; i++) {
        struct pr_reg *r = &g_array_index(pr->regs, struct pr_reg, i);

        fs->regs[i] = (struct pr_file_reg) { .initiator = g_strdup(r->it.initiator),
                                             .target = g_strdup(r->it.target),
                                             .rtpi = r->it.rtpi, .key = r->key };
        if (pr->reserved && !all_registrants(pr->type) && nexus_eq(&r->it, &pr->holder)) {
            fs->holder = (int)i;
        }
    }
    fs->type = pr->reserved ? pr->type : 0;
}

/* Replaces the registrations and the reservation with fs's. */
static void from_file_state(struct scsi_pr *pr, const struct pr_file_state *fs)
{
    while (pr->regs->len) {
        remove_reg_at(pr, pr->regs->len - 1);
    }
    release(pr);
    for (unsigned i = 0; i < fs->nregs; i++) {
        struct pr_reg r = {
            .it = { .initiator = g_strdup(fs->regs[i].initiator),
                    .target = g_strdup(fs->regs[i].target), .rtpi = fs->regs[i].rtpi },
            .key = fs->regs[i].key,
        };

        g_array_append_val(pr->regs, r);
    }
    pr->generation = fs->generation;
    if (fs->type) {
        pr->reserved = true;
        pr->type = fs->type;
        if (fs->holder >= 0) {
            pr->holder = nexus_copy(&g_array_index(pr->regs, struct pr_reg, fs->holder).it);
        }
    }
}

/* What a failed save puts back: the state before the command, its owed unit attentions too. */
struct pr_undo {
    struct pr_file_state fs;
    GArray *uas;
    bool aptpl;
};

static void undo_take(struct scsi_pr *pr, struct pr_undo *u)
{
    to_file_state(pr, &u->fs);
    u->aptpl = pr->aptpl;
    u->uas = g_array_new(FALSE, TRUE, sizeof(struct pr_ua));
    for (guint i = 0; i < pr->uas->len; i++) {
        struct pr_ua *ua = &g_array_index(pr->uas, struct pr_ua, i);
        struct pr_ua copy = { .it = nexus_copy(&ua->it), .mask = ua->mask };

        g_array_append_val(u->uas, copy);
    }
}

static void uas_free(GArray *uas)
{
    for (guint i = 0; i < uas->len; i++) {
        nexus_clear(&g_array_index(uas, struct pr_ua, i).it);
    }
    g_array_free(uas, TRUE);
}

static void undo_apply(struct scsi_pr *pr, struct pr_undo *u)
{
    from_file_state(pr, &u->fs);
    pr->aptpl = u->aptpl;
    uas_free(pr->uas);
    pr->uas = u->uas;
    u->uas = NULL;
}

static void undo_drop(struct pr_undo *u)
{
    pr_file_state_clear(&u->fs);
    if (u->uas) {
        uas_free(u->uas);
    }
}

/* ---- the saver (off the I/O thread) -------------------------------------- */

static int store_write(void *opaque, const char *path, const char *data, size_t len,
                       char **why)
{
    return pr_file_write(path, data, len, why);
}

static int store_remove(void *opaque, const char *path, char **why)
{
    return pr_file_remove(path, why);
}

static const struct scsi_pr_store file_store = { store_write, store_remove };

/*
 * Writes snap to the state file (APTPL on) or removes the file (APTPL
 * off, the file had it on); without the lock.  0 or -errno, logged.
 */
static int save(struct scsi_pr *pr, const struct pr_undo *snap, bool file_on)
{
    const struct scsi_pr_store *store = pr->store ? pr->store : &file_store;
    g_autofree char *why = NULL;
    int ret = 0;

    if (snap->aptpl) {
        size_t len;
        g_autofree char *text = pr_file_format(&snap->fs, &len);

        ret = store->write(pr->store_opaque, pr->path, text, len, &why);
    } else if (file_on) {
        ret = store->remove(pr->store_opaque, pr->path, &why);
    }
    if (ret < 0) {
        log_limit_warning(pr->log_limit,
                          "%s: persistent reservations: %s; the commands waiting for the save "
                          "fail, the state is as the file has it", pr->name, why);
    }
    return ret;
}

/*
 * After a save of the changes up to seq: on success the file has snap,
 * which becomes what a later failure goes back to; on failure the state
 * goes back to what the file had, and every change since fails.  Takes
 * the waiters to tell off the list (lock held).
 */
static struct scsi_pr_waiter *save_settle(struct scsi_pr *pr, uint64_t seq, struct pr_undo *snap,
                                          int ret)
{
    struct scsi_pr_waiter *done = pr->waiters, **tail = &done;

    if (ret == 0) {
        while (*tail && (*tail)->change <= seq) {
            tail = &(*tail)->next;
        }
        pr->saved = seq;
        undo_drop(pr->durable);
        if (pr->changes == seq) {
            undo_drop(snap);
            g_free(pr->durable);
            pr->durable = NULL;
        } else {
            *pr->durable = *snap;
        }
    } else {
        while (*tail) {
            tail = &(*tail)->next;
        }
        undo_drop(snap);
        undo_apply(pr, pr->durable);
        undo_drop(pr->durable);
        g_free(pr->durable);
        pr->durable = NULL;
        pr->changes = pr->saved;
        update_restricts(pr);
    }
    pr->waiters = *tail;
    if (!pr->waiters) {
        pr->waiters_tail = &pr->waiters;
    }
    *tail = NULL;
    return done;
}

/*
 * The saver: while the file lags the state, takes a snapshot under the
 * lock, writes it without, and tells the commands it covered.  Changes
 * made during a write are the next snapshot's, however many they are.
 */
static void save_job(void *opaque)
{
    struct scsi_pr *pr = opaque;

    pthread_mutex_lock(&pr->lock);
    while (pr->changes != pr->saved) {
        struct pr_undo snap;
        struct scsi_pr_waiter *done;
        uint64_t seq = pr->changes;
        bool file_on = pr->durable->aptpl;
        int ret;

        undo_take(pr, &snap);
        pthread_mutex_unlock(&pr->lock);
        ret = save(pr, &snap, file_on);
        pthread_mutex_lock(&pr->lock);
        done = save_settle(pr, seq, &snap, ret);
        pthread_mutex_unlock(&pr->lock);
        /* pr outlives this job (scsi_pr_free joins the saver): telling them is safe unlocked. */
        while (done) {
            struct scsi_pr_waiter *w = done;

            done = w->next;
            w->next = NULL;
            w->done(w, ret);
        }
        pthread_mutex_lock(&pr->lock);
    }
    pr->save_queued = false;
    pthread_mutex_unlock(&pr->lock);
}

/*
 * Queues w for the save of the change just made (lock held); the state
 * before it is the one to go back to if this is the first change the
 * file lags.  False: the saver could not start, the change is undone.
 */
static bool save_later(struct scsi_pr *pr, struct pr_undo *before, struct scsi_pr_waiter *w)
{
    if (!pr->save_queued) {
        int ret = offload_run(pr->saver, save_job, pr);

        if (ret < 0) {
            log_limit_warning(pr->log_limit,
                              "%s: persistent reservations: cannot start the saver: %s; the "
                              "command fails, the state is as before", pr->name, g_strerror(-ret));
            undo_apply(pr, before);
            return false;
        }
        pr->save_queued = true;
    }
    if (pr->changes == pr->saved) {
        pr->durable = g_new(struct pr_undo, 1);
        *pr->durable = *before;
        *before = (struct pr_undo) { 0 };
    }
    w->change = ++pr->changes;
    w->next = NULL;
    *pr->waiters_tail = w;
    pr->waiters_tail = &w->next;
    return true;
}

void scsi_pr_set_store(struct scsi_pr *pr, const struct scsi_pr_store *store, void *opaque)
{
    pthread_mutex_lock(&pr->lock);
    pr->store = store;
    pr->store_opaque = opaque;
    pthread_mutex_unlock(&pr->lock);
}

int scsi_pr_persist_at(struct scsi_pr *pr, const char *path, uint64_t naa, char **why)
{
    g_autoptr(GError) err = NULL;
    g_autofree char *text = NULL;
    struct pr_file_state fs = { .holder = -1 };
    g_autofree char *bad = NULL;
    gsize len;
    int ret = 0;

    pthread_mutex_lock(&pr->lock);
    if (!g_file_get_contents(path, &text, &len, &err)) {
        if (!g_error_matches(err, G_FILE_ERROR, G_FILE_ERROR_NOENT)) {
            *why = g_strdup_printf("LUN %s: cannot read its reservations file: %s", pr->name,
                                   err->message);
            ret = -EIO;
        }
    } else if (pr_file_parse(text, len, naa, SCSI_PR_MAX_REGS, &fs, &bad) < 0) {
        *why = g_strdup_printf("LUN %s: reservations file %s is refused: %s (move it away "
                               "to start without its reservations)", pr->name, path, bad);
        ret = -EINVAL;
    } else {
        from_file_state(pr, &fs);
        pr->aptpl = true;
        g_message("%s: %u registration(s)%s restored from %s (APTPL)", pr->name, fs.nregs,
                  fs.type ? " and a reservation" : "", path);
        pr_file_state_clear(&fs);
    }
    if (ret == 0) {
        g_free(pr->path);
        pr->path = g_strdup(path);
        pr->naa = naa;
    }
    update_restricts(pr);
    pthread_mutex_unlock(&pr->lock);
    return ret;
}

bool scsi_pr_can_persist(struct scsi_pr *pr)
{
    bool yes;

    pthread_mutex_lock(&pr->lock);
    yes = pr->path != NULL;
    pthread_mutex_unlock(&pr->lock);
    return yes;
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

/*
 * The preempter takes the reservation with the type it names (SPC-4
 * 5.14.11.4.3 d); if that changed the type, the registrants that stay are
 * told RESERVATIONS RELEASED (the reservation they shared is gone).
 */
static void take_over(struct scsi_pr *pr, const struct scsi_it_id *it, uint8_t type)
{
    uint8_t old = pr->type;

    release(pr);
    pr->reserved = true;
    pr->type = type;
    if (!all_registrants(type)) {
        pr->holder = nexus_dup(it);
    }
    if (old == type) {
        return;
    }
    for (guint i = 0; i < pr->regs->len; i++) {
        struct pr_reg *r = &g_array_index(pr->regs, struct pr_reg, i);

        if (!it_eq(&r->it, it)) {
            owe_ua(pr, &r->it, UA_RES_RELEASED);
        }
    }
}

static enum scsi_pr_result do_preempt(struct scsi_pr *pr, const struct scsi_it_id *it,
                                      const struct scsi_pr_out *o, enum scsi_sc *sc,
                                      bool *preempted)
{
    unsigned n;

    if (pr->reserved && all_registrants(pr->type) && o->sa_key == 0) {
        /* SPC-4 5.14.11.4.4: everybody else goes; the preempter holds the new reservation. */
        n = preempt_regs(pr, it, 0, true);
        take_over(pr, it, o->type);
    } else if (o->sa_key == 0) {
        return check(sc, SCSI_SC_INVALID_FIELD_IN_PARAM_LIST);
    } else if (pr->reserved && !all_registrants(pr->type) && o->sa_key == holder_key(pr)) {
        /* The holder is preempted: its reservation moves to the preempter. */
        n = preempt_regs(pr, it, o->sa_key, false);
        take_over(pr, it, o->type);
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

/* SPC-4 5.14.8: REGISTER AND MOVE, by the holder of a one-holder reservation. */
static enum scsi_pr_result do_move(struct scsi_pr *pr, const struct scsi_it_id *it,
                                   const struct scsi_pr_out *o, enum scsi_sc *sc)
{
    struct scsi_it_id dest = { .initiator = o->dest_initiator, .target = it->target,
                               .rtpi = o->dest_rtpi };
    struct pr_reg *r;

    if (!dest.initiator) {
        return check(sc, SCSI_SC_INVALID_FIELD_IN_PARAM_LIST);
    }
    if (!pr->reserved) {
        return check(sc, SCSI_SC_INVALID_FIELD_IN_CDB);
    }
    if (all_registrants(pr->type) || !it_eq(&pr->holder, it)) {
        return SCSI_PR_RESULT_CONFLICT;
    }
    if (!strcmp(dest.initiator, it->initiator) && dest.rtpi == it->rtpi) {
        return check(sc, SCSI_SC_INVALID_FIELD_IN_PARAM_LIST);    /* to itself */
    }
    r = find_reg(pr, &dest);
    if (r) {
        r->key = o->sa_key;
    } else {
        struct pr_reg fresh = { .it = nexus_dup(&dest), .key = o->sa_key };

        if (pr->regs->len >= SCSI_PR_MAX_REGS) {
            return check(sc, SCSI_SC_INSUFFICIENT_REG_RESOURCES);
        }
        g_array_append_val(pr->regs, fresh);
    }
    /* The same type and scope, another holder. */
    nexus_clear(&pr->holder);
    pr->holder = nexus_dup(&dest);
    if (o->unreg) {
        for (guint i = 0; i < pr->regs->len; i++) {
            if (it_eq(&g_array_index(pr->regs, struct pr_reg, i).it, it)) {
                remove_reg_at(pr, i);
                break;
            }
        }
    }
    pr->generation++;
    return SCSI_PR_GOOD;
}

/* ---- RESERVE / RELEASE (SPC-2) ------------------------------------------ */

enum scsi_pr_result scsi_pr_legacy(struct scsi_pr *pr, const struct scsi_it_id *it,
                                   bool reserve)
{
    enum scsi_pr_result res = SCSI_PR_GOOD;

    pthread_mutex_lock(&pr->lock);
    if (pr->reserved || pr->regs->len) {
        /* SPC-3 5.6.3: the holder and the RO/AR registrants change nothing; others conflict. */
        bool exempt = is_holder(pr, it) ||
                      (pr->reserved && (registrants_only(pr->type) ||
                                        all_registrants(pr->type)) && find_reg(pr, it));

        res = exempt ? SCSI_PR_GOOD : SCSI_PR_RESULT_CONFLICT;
    } else if (reserve) {
        if (pr->spc2_reserved && !it_eq(&pr->spc2_holder, it)) {
            res = SCSI_PR_RESULT_CONFLICT;
        } else if (!pr->spc2_reserved) {
            pr->spc2_reserved = true;
            pr->spc2_holder = nexus_dup(it);
        }
    } else if (pr->spc2_reserved && it_eq(&pr->spc2_holder, it)) {
        pr->spc2_reserved = false;
        nexus_clear(&pr->spc2_holder);
    }
    /* A RELEASE by anyone else releases nothing, and is GOOD (SPC-2 7.17). */
    update_restricts(pr);
    pthread_mutex_unlock(&pr->lock);
    return res;
}

void scsi_pr_lun_reset(struct scsi_pr *pr)
{
    pthread_mutex_lock(&pr->lock);
    if (pr->spc2_reserved) {
        log_limit_message(pr->log_limit, "%s: LOGICAL UNIT RESET releases the reservation of %s",
                          pr->name, pr->spc2_holder.initiator);
        pr->spc2_reserved = false;
        nexus_clear(&pr->spc2_holder);
    }
    update_restricts(pr);
    pthread_mutex_unlock(&pr->lock);
}

static enum scsi_pr_result run_out(struct scsi_pr *pr, const struct scsi_it_id *it,
                                   const struct scsi_pr_out *o, enum scsi_sc *sc,
                                   bool *preempted)
{
    enum scsi_pr_result res;
    struct pr_reg *r;

    if (o->sa == PR_OUT_REGISTER || o->sa == PR_OUT_REGISTER_AND_IGNORE) {
        return do_register(pr, it, o, sc);
    }
    /* Everything else needs the nexus registered, under the key it gives. */
    r = find_reg(pr, it);
    if (!r || r->key != o->key) {
        return SCSI_PR_RESULT_CONFLICT;
    }
    if (o->sa == PR_OUT_REGISTER_AND_MOVE) {
        return do_move(pr, it, o, sc);     /* SCOPE and TYPE ignored */
    }
    /* LU_SCOPE only; RELEASE's type is checked against the reservation's. */
    if (o->sa != PR_OUT_CLEAR &&
        (o->scope != 0 || (o->sa != PR_OUT_RELEASE && !type_valid(o->type)))) {
        return check(sc, SCSI_SC_INVALID_FIELD_IN_CDB);
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
    return res;
}

static bool sets_aptpl(uint8_t sa)
{
    return sa == PR_OUT_REGISTER || sa == PR_OUT_REGISTER_AND_IGNORE ||
           sa == PR_OUT_REGISTER_AND_MOVE;
}

enum scsi_pr_result scsi_pr_out(struct scsi_pr *pr, const struct scsi_it_id *it,
                                const struct scsi_pr_out *o, enum scsi_sc *sc,
                                bool *preempted, struct scsi_pr_waiter *w)
{
    enum scsi_pr_result res;
    struct pr_undo undo = { 0 };
    bool persist;

    *preempted = false;
    if (o->sa == PR_OUT_REPLACE_LOST || o->sa > 8) {
        return check(sc, SCSI_SC_INVALID_FIELD_IN_CDB);
    }
    /*
     * Capabilities we report as absent (REPORT CAPABILITIES SIP_C, ATP_C 0);
     * ALL_TG_PT means something to the two register actions only.
     */
    if (o->spec_i_pt || (o->all_tg_pt && (o->sa == PR_OUT_REGISTER ||
                                          o->sa == PR_OUT_REGISTER_AND_IGNORE))) {
        return check(sc, SCSI_SC_INVALID_FIELD_IN_PARAM_LIST);
    }
    pthread_mutex_lock(&pr->lock);
    /* APTPL is the register service actions' to set or clear; the others ignore the bit. */
    if (o->aptpl && sets_aptpl(o->sa) && !pr->path) {
        res = check(sc, SCSI_SC_INVALID_FIELD_IN_PARAM_LIST);
        goto out;
    }
    /* While the file lags, every change waits for it: a failed save undoes them all. */
    persist = pr->path && (pr->aptpl || (o->aptpl && sets_aptpl(o->sa)) ||
                           pr->changes != pr->saved);
    if (persist && pr->changes == pr->saved) {
        undo_take(pr, &undo);
    }
    res = run_out(pr, it, o, sc, preempted);
    if (persist && res == SCSI_PR_GOOD) {
        if (sets_aptpl(o->sa)) {
            pr->aptpl = o->aptpl;
        }
        res = SCSI_PR_SAVING;
        if (!save_later(pr, &undo, w)) {
            *preempted = false;
            res = check(sc, SCSI_SC_INTERNAL_TARGET_FAILURE);
        }
    }
    undo_drop(&undo);
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

int scsi_pr_transport_id_parse(const uint8_t *p, size_t len, char **name, size_t *bad,
                               int *bad_bit)
{
    unsigned format, proto;

    *bad_bit = -1;
    if (len < 24) {
        *bad = 0;
        return -EINVAL;
    }
    format = p[0] >> 6;
    proto = p[0] & 0x0f;
    if (proto == 0x06 && format == 0) {
        /* SAS: the address in bytes 4-11, the rest reserved. */
        uint64_t a = 0;

        for (int i = 4; i < 12; i++) {
            a = a << 8 | p[i];
        }
        if (len != 24 || a == 0) {
            *bad = len != 24 ? 0 : 4;
            return -EINVAL;
        }
        *name = g_strdup_printf("naa.%016" PRIx64, a);
        return 0;
    }
    if (proto == 0x05 && format <= 1) {
        /* iSCSI: a NUL-terminated name (",i,0x" and an ISID after it in format 01b). */
        size_t n = ld16(p + 2);
        const char *s = (const char *)p + 4;
        size_t slen;

        if (n < 20 || n % 4 || n + 4 != len) {
            *bad = 2;
            return -EINVAL;
        }
        slen = strnlen(s, n);
        if (slen == n || slen == 0 || slen > 223 || !g_utf8_validate(s, (gssize)slen, NULL)) {
            *bad = 4;
            return -EINVAL;
        }
        if (format == 1) {
            const char *sep = g_strstr_len(s, (gssize)slen, ",i,0x");

            if (!sep || sep == s) {
                *bad = 4;
                return -EINVAL;
            }
            slen = (size_t)(sep - s);
        }
        *name = g_strndup(s, slen);
        return 0;
    }
    *bad = 0;
    *bad_bit = proto == 0x05 || proto == 0x06 ? 7 : 3;   /* FORMAT CODE, else PROTOCOL IDENTIFIER */
    return -EINVAL;
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
        /* CRH: RESERVE/RELEASE as SPC-3 5.6.3 says; RLR_C, SIP_C, ATP_C 0. */
        c[2] = 0x10 | (pr->path ? 0x01 : 0);       /* PTPL_C: a state file to keep it in */
        c[3] = 0x80 | 0x10 | (pr->aptpl ? 1 : 0);  /* TMV; ALLOW COMMANDS 001b; PTPL_A */
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

/* Operation codes only the reservation rules need to name (the rest: scsi-sense.h). */
enum {
    PRC_RECEIVE_DIAGNOSTIC = 0x1c,
    PRC_READ_BUFFER = 0x3c,
    PRC_READ_LONG_10 = 0x3e,
    PRC_LOG_SENSE = 0x4d,
    PRC_READ_ATTRIBUTE = 0x8c,
    PRC_SECURITY_PROTOCOL_IN = 0xa2,
    PRC_SERVICE_ACTION_IN_12 = 0xab,
};

/*
 * SPC-4 table 63 and SBC-3 table 13, as the columns of a non-holder read
 * them: FREE runs under every type, READ under the Write Exclusive types
 * (and for registrants of the RO/AR types), WRITE only for the holder and
 * the registrants of the RO/AR types.
 */
static enum access classify(const uint8_t *cdb, unsigned len)
{
    uint8_t sa = len > 1 ? cdb[1] & 0x1f : 0;

    switch (cdb[0]) {
    case OP_INQUIRY:
    case OP_REPORT_LUNS:
    case OP_REQUEST_SENSE:
    case OP_PR_IN:
    case OP_PR_OUT:
    case OP_TEST_UNIT_READY:
    case OP_READ_CAPACITY_10:
    case PRC_LOG_SENSE:
    case PR_OP_RESERVE_6:      /* these decide their own conflicts (scsi_pr_legacy) */
    case PR_OP_RESERVE_10:
    case PR_OP_RELEASE_6:
    case PR_OP_RELEASE_10:
        return ACC_FREE;
    case OP_MAINTENANCE_IN:
        /*
         * REPORT SUPPORTED OPERATION CODES / TASK MANAGEMENT FUNCTIONS and
         * MANAGEMENT PROTOCOL IN read; the REPORT TARGET PORT GROUPS,
         * ALIASES, PRIORITY, TIMESTAMP and IDENTIFYING INFORMATION are free.
         */
        return sa == 0x0c || sa == 0x0d || sa == 0x10 ? ACC_READ : ACC_FREE;
    case PRC_SERVICE_ACTION_IN_12:
        return sa == 0x01 ? ACC_FREE : ACC_WRITE;    /* READ MEDIA SERIAL NUMBER */
    case OP_SERVICE_ACTION_IN_16:
        /* READ CAPACITY(16) is free; the other service actions (GET LBA STATUS) read. */
        return sa == SAI_READ_CAPACITY_16 ? ACC_FREE : ACC_READ;
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
    case PRC_RECEIVE_DIAGNOSTIC:
    case PRC_READ_BUFFER:
    case PRC_READ_LONG_10:
    case PRC_READ_ATTRIBUTE:
    case PRC_SECURITY_PROTOCOL_IN:
        return ACC_READ;
    default:
        /* Writes, cache flushes, MODE/LOG SELECT, copies, and whatever we do not know. */
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

/*
 * Under an SPC-2 reservation (SPC-2 5.5.1, 7.21): another nexus may run
 * only what reports (INQUIRY, REPORT LUNS, REQUEST SENSE, LOG SENSE, READ
 * MEDIA SERIAL NUMBER) and RELEASE, which does nothing for it; nobody may
 * run PERSISTENT RESERVE IN or OUT.
 */
static bool spc2_conflicts(struct scsi_pr *pr, const struct scsi_it_id *it,
                           const uint8_t *cdb, unsigned len)
{
    if (cdb[0] == OP_PR_IN || cdb[0] == OP_PR_OUT) {
        return true;
    }
    if (it_eq(&pr->spc2_holder, it)) {
        return false;
    }
    switch (cdb[0]) {
    case OP_INQUIRY:
    case OP_REPORT_LUNS:
    case OP_REQUEST_SENSE:
    case PRC_LOG_SENSE:
    case PR_OP_RELEASE_6:
    case PR_OP_RELEASE_10:
        return false;
    case PRC_SERVICE_ACTION_IN_12:
        return !(len > 1 && (cdb[1] & 0x1f) == 0x01);
    default:
        return true;
    }
}

/* Either kind of reservation refuses cdb from it (under pr->lock). */
static bool refused(struct scsi_pr *pr, const struct scsi_it_id *it, const uint8_t *cdb,
                    unsigned cdb_len)
{
    return (pr->spc2_reserved && spc2_conflicts(pr, it, cdb, cdb_len)) ||
           conflicts(pr, it, classify(cdb, cdb_len));
}

bool scsi_pr_conflicts(struct scsi_pr *pr, const struct scsi_it_id *it, const uint8_t *cdb,
                       unsigned cdb_len)
{
    bool no;

    if (!scsi_pr_restricts(pr)) {
        return false;
    }
    pthread_mutex_lock(&pr->lock);
    no = refused(pr, it, cdb, cdb_len);
    pthread_mutex_unlock(&pr->lock);
    return no;
}

enum scsi_pr_verdict scsi_pr_check(struct scsi_pr *pr, const struct scsi_it_id *it,
                                   const uint8_t *cdb, unsigned cdb_len, enum scsi_sc *ua)
{
    enum scsi_pr_verdict v = SCSI_PR_ALLOW;
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
    if (v == SCSI_PR_ALLOW && refused(pr, it, cdb, cdb_len)) {
        v = SCSI_PR_CONFLICT;
    }
    update_restricts(pr);
    pthread_mutex_unlock(&pr->lock);
    return v;
}
