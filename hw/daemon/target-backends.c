/*
 * The daemon's backends and LUN mappings (include/daemon/target.h).  A backend is a
 * named, opened LUN (a --lun SPEC: file, ram, null, iscsi), attached to
 * every I/O thread; a mapping puts it at a (target, LUN) address of the
 * SCSI target the front-ends connect to.  One backend may be mapped at
 * several addresses (and, with per-VM controllers, by several targets),
 * so it counts its mappings and is closed only when unmapped and asked
 * to go.  A backend made by `--lun ID=SPEC` or `lun-add` is implicit: it
 * goes with its last mapping.  Unmapping is asynchronous: the SCSI target
 * hands the LUN back once no I/O thread can reach it and its commands
 * have drained.  A name or address that an open under way reserves
 * (target-opening.c) is refused here with -EBUSY.  Opening a backend and
 * serving it are target-backend-open.c's; this file keeps the table and
 * the mappings, below both it and target-resize.c.  Main thread only.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "backend.h"
#include "lun-open.h"
#include "target.h"
#include "vs-error.h"

/*
 * Backends with per-thread state (iSCSI sessions) set it up on each I/O
 * thread, from that thread, before any request can arrive, and tear it
 * down there once none can.
 */
struct thread_lun_call {
    struct lun_backend *be;
    struct iothread *t;
    int ret;
};

static void call_attach(void *opaque)
{
    struct thread_lun_call *c = opaque;

    c->ret = c->be->ops->attach_thread(c->be, c->t);
}

static void call_detach(void *opaque)
{
    struct thread_lun_call *c = opaque;

    c->be->ops->detach_thread(c->be, c->t);
}

/* Detaches be from threads[0..n). */
static void detach_backend(struct target *tgt, struct lun_backend *be, unsigned n)
{
    for (unsigned j = 0; j < n && be->ops->detach_thread; j++) {
        struct thread_lun_call c = { .be = be, .t = tgt->threads[j] };

        iothread_run_sync(c.t, call_detach, &c);
    }
}

int target_backend_attach(struct target *tgt, struct lun_backend *be, GError **err)
{
    for (unsigned j = 0; j < tgt->nthreads && tgt->threads[j] && be->ops->attach_thread; j++) {
        struct thread_lun_call c = { .be = be, .t = tgt->threads[j] };

        iothread_run_sync(c.t, call_attach, &c);
        if (c.ret < 0) {
            detach_backend(tgt, be, j);
            return vs_error_set(err, c.ret, "%s: cannot start on %s: %s", be->name,
                                iothread_name(c.t), g_strerror(-c.ret));
        }
    }
    return 0;
}

int target_attach_backends(struct target *tgt, bool attach, GError **err)
{
    GHashTableIter it;
    gpointer value;

    g_hash_table_iter_init(&it, tgt->backends);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        struct target_backend *b = value;
        struct lun_backend *be = scsi_lun_backend(b->lun);
        int ret;

        if (!attach) {
            detach_backend(tgt, be, tgt->nthreads);
            continue;
        }
        ret = target_backend_attach(tgt, be, err);
        if (ret < 0) {
            g_prefix_error(err, "backend %s: ", b->name);
            return ret;
        }
    }
    return 0;
}

static void backend_free(struct target_backend *b)
{
    scsi_lun_free(b->lun);
    g_free(b->pr_path);
    g_free(b->name);
    g_free(b->spec);
    g_free(b);
}

void target_backends_free(struct target *tgt)
{
    GHashTableIter it;
    gpointer value;

    if (tgt->backends) {
        /* One a resize given up still holds stays: its thread may yet return to it. */
        g_hash_table_iter_init(&it, tgt->backends);
        while (g_hash_table_iter_next(&it, NULL, &value)) {
            if (__atomic_load_n(&((struct target_backend *)value)->resizing,
                                __ATOMIC_ACQUIRE)) {
                g_hash_table_iter_steal(&it);
            }
        }
        g_hash_table_destroy(tgt->backends);
        tgt->backends = NULL;
    }
}

void target_backends_init(struct target *tgt)
{
    tgt->backends = g_hash_table_new_full(g_str_hash, g_str_equal, NULL,
                                          (GDestroyNotify)backend_free);
}

struct target_backend *target_backend_find(struct target *tgt, const char *name)
{
    return g_hash_table_lookup(tgt->backends, name);
}

bool target_reserved_name(struct target *tgt, const char *name)
{
    for (GList *l = tgt->openings; l; l = l->next) {
        if (!strcmp(((struct target_reservation *)l->data)->name, name)) {
            return true;
        }
    }
    return false;
}

bool target_reserved_slot(struct controller *ctrl, unsigned port, unsigned lun)
{
    for (GList *l = ctrl->tgt->openings; l; l = l->next) {
        struct target_reservation *r = l->data;

        if (r->ctrl_name && !strcmp(r->ctrl_name, ctrl->name) && r->port == port &&
            r->lun == lun) {
            return true;
        }
    }
    return false;
}

int target_backend_name_free(struct target *tgt, const char *name, GError **err)
{
    if (!target_name_ok(name)) {
        return vs_error_set(err, -EINVAL, "backend name '%s': 1-64 of A-Z a-z 0-9 . _ : - /", name);
    }
    if (target_backend_find(tgt, name)) {
        return vs_error_set(err, -EEXIST, "a backend named '%s' exists", name);
    }
    if (target_reserved_name(tgt, name)) {
        return vs_error_set(err, -EBUSY, "backend '%s' is still opening", name);
    }
    return 0;
}

/*
 * Closing may wait too (a file's last close flushes it to an NFS server,
 * an iSCSI session logs out): a job that nobody waits for does it.
 */
static int close_run(void *arg)
{
    scsi_lun_free(arg);
    return 0;
}

static void close_ended(void *arg, int ret)
{
}

static const struct target_job_ops close_ops = {
    .run = close_run,
    .done = close_ended,
    .abandoned = close_ended,
    .discard = close_ended,
};

static void close_off_main(struct target *tgt, struct scsi_lun *lun)
{
    g_autoptr(GError) err = NULL;

    if (target_job_start(tgt, "closing a backend", &close_ops, lun, false, &err) < 0) {
        g_message("%s; closing it on the main thread", err->message);
        scsi_lun_free(lun);
    }
}

int target_backend_remove(struct target *tgt, const char *name, GError **err)
{
    struct target_backend *b = target_backend_find(tgt, name);

    if (!b && target_reserved_name(tgt, name)) {
        return vs_error_set(err, -EBUSY, "backend '%s' is still opening", name);
    }
    if (!b) {
        return vs_error_set(err, -ENOENT, "no backend named '%s'", name);
    }
    if (b->mappings || b->unmapping) {
        return vs_error_set(err, -EBUSY, "backend '%s' is mapped %u time(s); unmap it first", name,
                            b->mappings + b->unmapping);
    }
    if (__atomic_load_n(&b->resizing, __ATOMIC_ACQUIRE)) {
        return vs_error_set(err, -EBUSY,
                            "backend '%s' is being resized; try again when it is done", name);
    }
    /* Unmapped and drained: no thread can reach it any more. */
    detach_backend(tgt, scsi_lun_backend(b->lun), tgt->nthreads);
    g_hash_table_steal(tgt->backends, name);
    close_off_main(tgt, g_steal_pointer(&b->lun));
    g_message("backend %s: closed", name);
    backend_free(b);
    return 0;
}

void target_backend_close_if_unused(struct target *tgt, struct target_backend *b)
{
    /* An implicit backend (--lun, lun-add) goes with its last mapping. */
    if (b->implicit && !b->mappings && !b->unmapping) {
        target_backend_remove(tgt, b->name, NULL);
    }
}

/*
 * The spec with its size made the backend's size now, so that a saved
 * configuration does not bring a grown disk back at its old size: a
 * "size=" option gets the new value, a null backend's "null:SIZE" too; a
 * file without size= takes its (grown) file size anyway.  ",," in a path
 * is an escaped comma, not an option separator.
 */
static char *spec_with_size(const char *spec, uint64_t bytes)
{
    GString *out = g_string_new(NULL);
    size_t i = 0, n = strlen(spec);

    if (g_str_has_prefix(spec, "null:")) {
        const char *comma = strchr(spec, ',');

        g_string_printf(out, "null:%" PRIu64 "%s", bytes, comma ? comma : "");
        return g_string_free(out, FALSE);
    }
    while (i < n) {
        if (spec[i] == ',' && spec[i + 1] == ',') {
            g_string_append(out, ",,");
            i += 2;
        } else if (spec[i] == ',' && g_str_has_prefix(spec + i + 1, "size=")) {
            g_string_append_printf(out, ",size=%" PRIu64, bytes);
            for (i += 6; i < n && spec[i] != ','; i++) {
            }
        } else {
            g_string_append_c(out, spec[i++]);
        }
    }
    return g_string_free(out, FALSE);
}

void target_backend_resized(struct target *tgt, struct target_backend *b)
{
    /* Every address it is mapped at, in every controller, tells its front-ends. */
    for (GList *l = tgt->controllers; l; l = l->next) {
        scsi_target_lun_changed(((struct controller *)l->data)->scsi, b->lun);
    }
    {
        char *grown = spec_with_size(b->spec, backend_size(scsi_lun_backend(b->lun)));

        g_free(b->spec);
        b->spec = grown;
    }
}

struct target_backend *target_backend_of(struct target *tgt, const struct scsi_lun *lun)
{
    GHashTableIter it;
    gpointer value;

    g_hash_table_iter_init(&it, tgt->backends);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        if (((struct target_backend *)value)->lun == lun) {
            return value;
        }
    }
    return NULL;
}

int target_lun_map(struct controller *ctrl, unsigned port, unsigned lun, const char *backend,
                   GError **err)
{
    struct target_backend *b = target_backend_find(ctrl->tgt, backend);
    int ret;

    if (!b) {
        return vs_error_set(err, -ENOENT, "no backend named '%s'", backend);
    }
    if (target_reserved_slot(ctrl, port, lun)) {
        return vs_error_set(err, -EBUSY, "%s: LUN %u:%u is still opening", ctrl->name, port, lun);
    }
    ret = scsi_target_add_lun(ctrl->scsi, port, lun, b->lun);
    if (ret == -EEXIST) {
        return vs_error_set(err, ret, "%s: LUN %u:%u is already mapped", ctrl->name, port, lun);
    }
    if (ret < 0) {
        return vs_error_set(err, ret, "%s: LUN %u:%u: %s", ctrl->name, port, lun,
                            g_strerror(-ret));
    }
    b->mappings++;
    return 0;
}

struct unmapping {
    struct target *tgt;
    struct target_backend *b;
    void (*done)(int ret, void *opaque);
    void *opaque;
};

static void lun_handed_back(struct scsi_lun *lun, void *opaque)
{
    struct unmapping *u = opaque;

    u->b->unmapping--;
    target_backend_close_if_unused(u->tgt, u->b);
    u->tgt->removing--;
    if (u->done) {
        u->done(0, u->opaque);
    }
    target_maybe_quit(u->tgt);
    g_free(u);
}

void target_lun_unmap(struct controller *ctrl, unsigned port, unsigned lun,
                      void (*done)(int ret, void *opaque), void *opaque)
{
    struct target *tgt = ctrl->tgt;
    struct scsi_lun *l = scsi_target_lun(ctrl->scsi, port, lun);
    struct unmapping *u;
    int ret;

    if (!l) {
        if (done) {
            done(port > SCSI_TARGET_MAX_PORT || lun > SCSI_TARGET_MAX_LUN ? -EINVAL : -ENOENT,
                 opaque);
        }
        return;
    }
    u = g_new0(struct unmapping, 1);
    u->tgt = tgt;
    u->b = target_backend_of(tgt, l);
    u->done = done;
    u->opaque = opaque;
    g_assert(u->b);
    /* Counted as going until it is handed back: the backend cannot close meanwhile. */
    u->b->mappings--;
    u->b->unmapping++;
    tgt->removing++;
    ret = scsi_target_remove_lun(ctrl->scsi, port, lun, lun_handed_back, u);
    g_assert(ret == 0);
}

int target_lun_add_check(struct controller *ctrl, const char *arg, unsigned *port,
                         unsigned *lun_id, char **name, GError **err)
{
    struct target *tgt = ctrl->tgt;
    g_autofree char *shown = lun_spec_redact(arg);
    struct lun_spec spec;
    int ret;

    /* The ID part, parsed by the grammar: the spec after '=' is the backend's. */
    ret = lun_spec_parse_full(arg, &spec, err);
    if (ret < 0) {
        g_prefix_error(err, "%s: ", shown);
        return ret;
    }
    *port = spec.target;
    *lun_id = spec.lun;
    lun_spec_clear(&spec);
    if (scsi_target_lun(ctrl->scsi, *port, *lun_id)) {
        return vs_error_set(err, -EEXIST, "%s: LUN %u:%u is already mapped", shown, *port, *lun_id);
    }
    if (target_reserved_slot(ctrl, *port, *lun_id)) {
        return vs_error_set(err, -EBUSY, "%s: LUN %u:%u is still opening", shown, *port, *lun_id);
    }
    /* The default controller's keep the names they always had. */
    *name = ctrl == tgt->dflt ? g_strdup_printf("lun%u:%u", *port, *lun_id)
                              : g_strdup_printf("%s/lun%u:%u", ctrl->name, *port, *lun_id);
    ret = target_backend_name_free(tgt, *name, err);
    if (ret < 0) {
        g_clear_pointer(name, g_free);
    }
    return ret;
}

int target_lun_map_implicit(struct controller *ctrl, unsigned port, unsigned lun,
                            const char *name, GError **err)
{
    int ret = target_lun_map(ctrl, port, lun, name, err);

    if (ret < 0) {
        target_backend_remove(ctrl->tgt, name, NULL);
    }
    return ret;
}
