/*
 * Opening a backend (include/daemon/target.h): a SPEC parsed by the --lun
 * grammar, opened with its SCSI disk made and its reservations file read
 * (target_backend_open, on any thread), then served as a named backend on
 * the main thread (target_backend_install: the one-object check, attached
 * to the I/O threads, its device's size changes followed); the synchronous
 * backend and LUN adds of the start-up, which do all of it at once.  The
 * table these put backends in, and the mappings, are target-backends.c's;
 * the control socket's adds open off the main thread (target-opening.c).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "backend.h"
#include "lun-open.h"
#include "target.h"
#include "vs-error.h"

int target_backend_parse(const char *spec, struct lun_spec *ls, GError **err)
{
    /* The --lun grammar with a placeholder ID: one grammar for every way in. */
    g_autofree char *arg = g_strdup_printf("0=%s", spec);
    int ret = lun_spec_parse_full(arg, ls, err);

    if (ret < 0) {
        g_autofree char *shown = lun_spec_redact(spec);

        g_prefix_error(err, "%s: ", shown);
    }
    return ret;
}

/*
 * A backend's device changed size underneath (an RBD image resized by
 * another client): on the main thread, take the new size as `backend-resize
 * NAME` without a size does, so every mapping's front-ends are told.  The
 * backend is looked up again: it may have been removed since.
 */
struct backend_change {
    struct target *tgt;
    struct lun_backend *be;
};

static void backend_changed_main(void *opaque)
{
    struct backend_change *c = opaque;
    GHashTableIter it;
    gpointer key, val;

    g_hash_table_iter_init(&it, c->tgt->backends);
    while (g_hash_table_iter_next(&it, &key, &val)) {
        struct target_backend *b = val;

        if (scsi_lun_backend(b->lun) == c->be) {
            target_backend_follow_device(c->tgt, b);
            break;
        }
    }
    g_free(c);
}

/* Any thread (a library's own): hand the change to the main thread. */
static void backend_changed(struct lun_backend *be, void *opaque)
{
    struct backend_change *c = g_new(struct backend_change, 1);

    c->tgt = opaque;
    c->be = be;
    iothread_post(c->tgt->main, backend_changed_main, c);
}

/*
 * Where a backend's LUN keeps its persistent reservations while APTPL is
 * on: DIR/NAME.pr with --pr-dir, else FILE.pr beside a file: backend's
 * regular file (a block device's directory, /dev, is no place for it);
 * NULL: nowhere, APTPL refused.  The directory is resolved (symlinks,
 * "..") so that two backends naming one file by two paths are told apart
 * by the string.  Looks at the file system: off the main thread.
 */
static char *pr_file_for(const char *pr_dir, const char *name, const struct lun_spec *ls)
{
    g_autofree char *dir = NULL;
    g_autofree char *base = NULL;
    char *real;

    if (pr_dir) {
        dir = g_strdup(pr_dir);
        base = g_strdup_printf("%s.pr", name);
        g_strdelimit(base, "/", '_');
    } else if (ls->kind == LUN_SPEC_FILE && g_file_test(ls->path, G_FILE_TEST_IS_REGULAR)) {
        g_autofree char *file = g_path_get_basename(ls->path);

        dir = g_path_get_dirname(ls->path);
        base = g_strdup_printf("%s.pr", file);
    } else {
        return NULL;
    }
    real = realpath(dir, NULL);
    if (real) {
        g_free(dir);
        dir = real;
    }
    return g_build_filename(dir, base, NULL);
}

int target_backend_open(const char *pr_dir, const char *name, const char *spec,
                        const struct lun_spec *ls, int cancel_fd, struct target_opened *o,
                        GError **err)
{
    g_autofree char *shown = lun_spec_redact(spec);
    g_autoptr(GError) why = NULL;
    struct lun_backend *be;
    int ret;

    memset(o, 0, sizeof(*o));
    ret = lun_spec_open_cancellable(ls, cancel_fd, &be, err);
    if (ret < 0) {
        g_prefix_error(err, "%s: cannot open %s: ", name, shown);
        return ret;
    }
    /* A backend may answer INQUIRY with another device's identity (iSCSI). */
    o->lun = scsi_lun_new(be, name, be->ops->identity ? be->ops->identity(be) : NULL, &why);
    if (!o->lun) {
        ret = vs_error_errno(why);
        g_propagate_prefixed_error(err, g_steal_pointer(&why), "%s: %s: ", name, shown);
        return ret;
    }
    o->pr_path = pr_file_for(pr_dir, name, ls);
    if (o->pr_path) {
        o->pr_ret = scsi_lun_set_pr_file(o->lun, o->pr_path, &o->pr_err);
    }
    return 0;
}

void target_opened_clear(struct target_opened *o)
{
    scsi_lun_free(o->lun);
    g_free(o->pr_path);
    g_clear_error(&o->pr_err);
    memset(o, 0, sizeof(*o));
}

/* Where b is mapped, for messages: " (mapped at default 0:1, vm1 0:0)", or "". */
static char *mappings_of(struct target *tgt, struct target_backend *b)
{
    GString *s = g_string_new(NULL);

    for (GList *l = tgt->controllers; l; l = l->next) {
        struct controller *ctrl = l->data;
        unsigned n = scsi_target_lun_count(ctrl->scsi);

        for (unsigned i = 0; i < n; i++) {
            unsigned port, lun;

            scsi_target_lun_id_at(ctrl->scsi, i, &port, &lun);
            if (scsi_target_lun(ctrl->scsi, port, lun) == b->lun) {
                g_string_append_printf(s, "%s%s %u:%u", s->len ? ", " : " (mapped at ",
                                       ctrl->name, port, lun);
            }
        }
    }
    if (s->len) {
        g_string_append_c(s, ')');
    }
    return g_string_free(s, FALSE);
}

/*
 * One file or block device backs one backend, and one reservations file
 * belongs to one: two backends over the same blocks would be two logical
 * units whose reservations, range locks and unit attentions know nothing
 * of each other, writing one state file in turn.  Sharing is explicit:
 * one backend mapped at several addresses.  0, or -EEXIST with *err.
 */
static int object_free(struct target *tgt, const char *name, const struct target_opened *o,
                       GError **err)
{
    struct lun_backend *be = scsi_lun_backend(o->lun);
    GHashTableIter it;
    gpointer value;

    g_hash_table_iter_init(&it, tgt->backends);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        struct target_backend *b = value;
        struct lun_backend *other = scsi_lun_backend(b->lun);
        g_autofree char *where = NULL;

        if (backend_same_object(be, other)) {
            where = mappings_of(tgt, b);
            return vs_error_set(err, -EEXIST,
                                "backend %s: %s is the %s that backend %s%s serves as %s "
                                "already; one %s backs one backend: to serve it at several "
                                "addresses, add it once (backend-add) and map it at each "
                                "(lun-map)", name, be->name,
                                be->object_kind == BACKEND_OBJECT_BLOCK ? "block device" :
                                "file", b->name, where, other->name,
                                be->object_kind == BACKEND_OBJECT_BLOCK ? "block device" :
                                "file");
        }
        if (o->pr_path && b->pr_path && !strcmp(o->pr_path, b->pr_path)) {
            where = mappings_of(tgt, b);
            return vs_error_set(err, -EEXIST,
                                "backend %s: its reservations file %s is backend %s's%s "
                                "already", name, o->pr_path, b->name, where);
        }
    }
    return 0;
}

int target_backend_install(struct target *tgt, const char *name, const char *spec,
                           bool implicit, struct target_opened *o, struct target_backend **out,
                           GError **err)
{
    g_autofree char *shown = lun_spec_redact(spec);
    struct lun_backend *be = scsi_lun_backend(o->lun);
    struct target_backend *b;
    int ret;

    ret = object_free(tgt, name, o, err);
    if (ret == 0 && o->pr_ret < 0) {
        g_propagate_error(err, g_steal_pointer(&o->pr_err));
        ret = o->pr_ret;
    }
    /* Only a daemon already running has threads to attach to; at start they come later. */
    if (ret == 0 && tgt->threads) {
        ret = target_backend_attach(tgt, be, err);
        if (ret < 0) {
            g_prefix_error(err, "%s: ", shown);
        }
    }
    if (ret < 0) {
        target_opened_clear(o);
        return ret;
    }
    b = g_new0(struct target_backend, 1);
    b->name = g_strdup(name);
    b->spec = g_strdup(spec);
    b->lun = g_steal_pointer(&o->lun);
    b->pr_path = g_steal_pointer(&o->pr_path);
    b->implicit = implicit;
    target_opened_clear(o);
    g_hash_table_insert(tgt->backends, b->name, b);
    be->changed_opaque = tgt;
    __atomic_store_n(&be->changed, backend_changed, __ATOMIC_RELEASE);
    g_message("backend %s: %s, %" PRIu64 " bytes, %u-byte blocks%s", name, be->name,
              backend_size(be), be->block_size, be->read_only ? ", read-only" : "");
    if (out) {
        *out = b;
    }
    return 0;
}

int target_backend_add(struct target *tgt, const char *name, const char *spec, bool implicit,
                       struct target_backend **out, GError **err)
{
    struct target_opened o;
    struct lun_spec ls;
    int ret;

    ret = target_backend_name_free(tgt, name, err);
    if (ret == 0) {
        ret = target_backend_parse(spec, &ls, err);
    }
    if (ret < 0) {
        return ret;
    }
    ret = target_backend_open(tgt->opts ? tgt->opts->pr_dir : NULL, name, spec, &ls, -1, &o,
                              err);
    lun_spec_clear(&ls);
    if (ret < 0) {
        return ret;
    }
    return target_backend_install(tgt, name, spec, implicit, &o, out, err);
}

int target_lun_add(struct controller *ctrl, const char *arg, unsigned *port, unsigned *lun_id,
                   GError **err)
{
    g_autofree char *name = NULL;
    int ret = target_lun_add_check(ctrl, arg, port, lun_id, &name, err);

    if (ret == 0) {
        ret = target_backend_add(ctrl->tgt, name, strchr(arg, '=') + 1, true, NULL, err);
    }
    if (ret == 0) {
        ret = target_lun_map_implicit(ctrl, *port, *lun_id, name, err);
    }
    return ret;
}
