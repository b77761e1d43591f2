/*
 * The saved form of a LIO configuration, for vhost-scsi-ctl: list as JSON
 * or text, save to a file and restore from one.  The format is small JSON,
 * written with json-glib and parsed through json-strict.h (bounded, strict
 * RFC 8259, no repeated member names, a schema per object).  Restoring goes through the same
 * idempotent operations as the command line (lio-configfs.c), and is all
 * or nothing: when a step fails, what the restore had made is taken back,
 * since a VM must not start on half a configuration.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-glib/json-glib.h>

#include "json-strict.h"
#include "lio-configfs.h"
#include "lio-int.h"
#include "vs-error.h"

/*
 * The one JSON writer, for list --json and save alike.  configfs gives back
 * whatever bytes were written to udev_path, and json-glib would copy bytes
 * that are not UTF-8 into its output, so such a string is refused here.
 */
static bool add_string(JsonBuilder *b, const char *at, const char *member, const char *value,
                       GError **err)
{
    if (!g_utf8_validate(value, -1, NULL)) {
        g_autofree char *shown = g_strescape(value, NULL);
        vs_error_set(err, -EINVAL, "cannot write the configuration as JSON: %s.%s is not "
                     "UTF-8: \"%s\"", at, member, shown);
        return false;
    }
    json_builder_set_member_name(b, member);
    json_builder_add_string_value(b, value);
    return true;
}

int lio_list_to_json(GPtrArray *targets, char **out, GError **err)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    lio_json_int(b, "version", 1);
    json_builder_set_member_name(b, "targets");
    json_builder_begin_array(b);
    for (guint i = 0; i < targets->len; i++) {
        struct lio_target *t = targets->pdata[i];
        g_autofree char *at = g_strdup_printf("targets[%u]", i);
        json_builder_begin_object(b);
        if (!add_string(b, at, "wwpn", t->wwpn, err)) {
            return -EINVAL;
        }
        lio_json_int(b, "tpgt", t->tpgt);
        if (!add_string(b, at, "nexus", t->nexus, err)) {
            return -EINVAL;
        }
        json_builder_set_member_name(b, "luns");
        json_builder_begin_array(b);
        for (guint j = 0; j < t->luns->len; j++) {
            struct lio_lun *l = t->luns->pdata[j];
            g_autofree char *lat = g_strdup_printf("%s.luns[%u]", at, j);
            json_builder_begin_object(b);
            lio_json_int(b, "lun", l->lun);
            json_builder_set_member_name(b, "type");
            json_builder_add_string_value(b, lio_lun_type_name(l->type));
            if (!add_string(b, lat, "path", l->path, err)) {
                return -EINVAL;
            }
            /* JSON integers are read back as gint64; a larger size would not restore. */
            if (l->size > G_MAXINT64) {
                return vs_error_set(err, -EINVAL, "cannot write the configuration as JSON: "
                                    "%s.size %" PRIu64 " is out of range", lat, l->size);
            }
            lio_json_int(b, "size", l->size);
            if (!add_string(b, lat, "backstore", l->backstore, err)) {
                return -EINVAL;
            }
            /* Only what differs from the default, so older files read the same. */
            if (l->ro) {
                lio_json_bool(b, "ro", true);
            }
            if (l->direct) {
                lio_json_bool(b, "direct", true);
            }
            if (l->block_size && l->block_size != 512) {
                lio_json_int(b, "block_size", l->block_size);
            }
            if (l->serial && l->serial[0] && !add_string(b, lat, "serial", l->serial, err)) {
                return -EINVAL;
            }
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);

    g_autoptr(JsonNode) root = json_builder_get_root(b);
    *out = lio_json_text(root);
    return 0;
}

char *lio_list_to_text(GPtrArray *targets)
{
    GString *s = g_string_new("");
    if (!targets->len) {
        g_string_append(s, "no vhost targets\n");
    }
    for (guint i = 0; i < targets->len; i++) {
        struct lio_target *t = targets->pdata[i];
        g_string_append_printf(s, "%s tpgt %u nexus %s\n", t->wwpn, t->tpgt,
                               t->nexus[0] ? t->nexus : "(none)");
        for (guint j = 0; j < t->luns->len; j++) {
            struct lio_lun *l = t->luns->pdata[j];
            bool rd = l->type == LIO_LUN_RAM || l->type == LIO_LUN_NULL;
            g_string_append_printf(s, "  lun %-5u %-5s %s size %" PRIu64 " backstore core/%s",
                                   l->lun, lio_lun_type_name(l->type),
                                   l->path[0] ? l->path : rd ? "-" : "(unknown)", l->size,
                                   l->backstore);
            if (l->block_size && l->block_size != 512) {
                g_string_append_printf(s, " block-size %" PRIu32, l->block_size);
            }
            g_string_append_printf(s, "%s%s%s\n", l->ro ? " ro" : "", l->direct ? " direct" : "",
                                   l->owned ? "" : " (not created by vhost-scsi-ctl)");
        }
    }
    return g_string_free(s, FALSE);
}

int lio_save(struct lio *lio, const char *file, enum lio_format format, GError **err)
{
    GPtrArray *targets;
    int ret = lio_list(lio, &targets);
    if (ret < 0) {
        return ret;
    }
    g_autofree char *json = NULL;
    ret = format == LIO_FORMAT_TARGETCLI ? lio_list_to_targetcli(lio, targets, &json, err) :
          lio_list_to_json(targets, &json, err);
    g_ptr_array_unref(targets);
    if (ret < 0) {
        return ret;
    }
    g_autoptr(GError) werr = NULL;
    if (!g_file_set_contents(file, json, -1, &werr)) {
        return vs_error_set(err, -EIO, "saving to %s failed: %s", file, werr->message);
    }
    return 0;
}

/* ---------------------------------------------------------- JSON parser */

/* The values a saved LUN is made from (a block LUN's size is the device's). */
static struct lio_backing lio_lun_backing(const struct lio_lun *l)
{
    /* A backstore that is not ours (a targetcli one) keeps its name and link. */
    const char *slash = strrchr(l->backstore, '/');
    return (struct lio_backing) {
        .type = l->type, .path = l->path, .size = l->type == LIO_LUN_BLOCK ? 0 : l->size,
        .block_size = l->block_size, .ro = l->ro, .direct = l->direct, .serial = l->serial,
        .name = l->owned ? NULL : slash ? slash + 1 : l->backstore, .alias = l->owned ? NULL : l->alias,
    };
}

/* The format nests 5 deep and its largest object has 9 members. */
static const struct json_limits config_limits = { .max_depth = 16, .max_members = 64 };

int lio_config_parse(const char *json, size_t len, GPtrArray **out, GError **error)
{
    g_autofree char *bad = NULL;
    size_t at;
    g_autoptr(JsonNode) root = json_strict_parse(json, len, &config_limits, &bad, &at);

    if (!root && at != JSON_AT_NONE) {
        return vs_error_set(error, -EINVAL, "configuration rejected at byte %zu: %s", at, bad);
    }
    if (!root) {
        return vs_error_set(error, -EINVAL, "configuration rejected: %s", bad);
    }

    static const struct json_member top_members[] = { { "version", JSON_M_INT }, { "targets", JSON_M_ARR } };
    static const struct json_member target_members[] = {
        { "wwpn", JSON_M_STR }, { "tpgt", JSON_M_INT }, { "nexus", JSON_M_STR }, { "luns", JSON_M_ARR },
    };
    static const struct json_member lun_members[] = {
        { "lun", JSON_M_INT }, { "type", JSON_M_STR }, { "path", JSON_M_STR }, { "size", JSON_M_INT },
        { "backstore", JSON_M_STR }, { "ro", JSON_M_BOOL, true }, { "direct", JSON_M_BOOL, true },
        { "block_size", JSON_M_INT, true }, { "serial", JSON_M_STR, true },
    };
    g_autofree char *ctx = NULL;       /* which element an error is in */
    GPtrArray *targets = g_ptr_array_new_with_free_func((GDestroyNotify)lio_target_free);
    char *err = json_check_object(root, top_members, G_N_ELEMENTS(top_members));
    JsonObject *top = err ? NULL : json_node_get_object(root);
    if (!err && json_object_get_int_member(top, "version") != 1) {
        err = g_strdup("unsupported version (expected 1)");
    }
    JsonArray *arr = err ? NULL : json_object_get_array_member(top, "targets");
    for (guint i = 0; arr && !err && i < json_array_get_length(arr); i++) {
        JsonNode *tn = json_array_get_element(arr, i);
        g_free(ctx);
        ctx = g_strdup_printf("targets[%u]", i);
        err = json_check_object(tn, target_members, G_N_ELEMENTS(target_members));
        if (err) {
            break;
        }
        JsonObject *to = json_node_get_object(tn);
        struct lio_target *t = lio_target_new();
        g_ptr_array_add(targets, t);
        t->wwpn = g_strdup(json_object_get_string_member(to, "wwpn"));
        t->nexus = g_strdup(json_object_get_string_member(to, "nexus"));
        gint64 tpgt = json_object_get_int_member(to, "tpgt");
        if (!lio_wwpn_valid(t->wwpn)) {
            err = g_strdup("invalid wwpn");
        } else if (t->nexus[0] && !lio_wwpn_valid(t->nexus)) {
            err = g_strdup("invalid nexus");
        } else if (tpgt < 0 || tpgt > LIO_TPGT_MAX) {
            err = g_strdup("tpgt out of range");
        }
        t->tpgt = tpgt;
        JsonArray *luns = json_object_get_array_member(to, "luns");
        for (guint k = 0; !err && k < json_array_get_length(luns); k++) {
            JsonNode *ln = json_array_get_element(luns, k);
            g_free(ctx);
            ctx = g_strdup_printf("targets[%u].luns[%u]", i, k);
            err = json_check_object(ln, lun_members, G_N_ELEMENTS(lun_members));
            if (err) {
                break;
            }
            JsonObject *lo = json_node_get_object(ln);
            struct lio_lun *l = g_new0(struct lio_lun, 1);
            g_ptr_array_add(t->luns, l);
            gint64 lun = json_object_get_int_member(lo, "lun");
            gint64 size = json_object_get_int_member(lo, "size");
            gint64 bs = json_object_get_int_member_with_default(lo, "block_size", 0);
            const char *type = json_object_get_string_member(lo, "type");
            l->path = g_strdup(json_object_get_string_member(lo, "path"));
            l->backstore = g_strdup(json_object_get_string_member(lo, "backstore"));
            l->ro = json_object_get_boolean_member_with_default(lo, "ro", false);
            l->direct = json_object_get_boolean_member_with_default(lo, "direct", false);
            l->serial = g_strdup(json_object_get_string_member_with_default(lo, "serial", ""));
            l->owned = true;
            l->type = LIO_LUN_OTHER;
            for (enum lio_lun_type ty = 0; ty < LIO_LUN_OTHER; ty++) {
                if (!strcmp(type, lio_lun_type_name(ty))) {
                    l->type = ty;
                }
            }
            l->lun = lun;
            l->size = size;
            l->block_size = bs;
            struct lio_backing back = lio_lun_backing(l);
            if (lun < 0 || lun > LIO_LUN_MAX) {
                err = g_strdup("lun out of range");
            } else if (size < 0) {
                err = g_strdup("size out of range");
            } else if (bs < 0 || bs > UINT32_MAX) {
                err = g_strdup("block_size out of range");
            } else if (l->type == LIO_LUN_OTHER) {
                err = g_strdup("lun type must be \"file\", \"block\", \"ram\" or \"null\"");
            } else {
                err = lio_backing_refusal(&back);
            }
        }
    }
    if (err) {
        vs_error_set(error, -EINVAL, "configuration rejected: %s: %s",
                     ctx ? ctx : "top level", err);
        g_free(err);
        g_ptr_array_unref(targets);
        return -EINVAL;
    }
    *out = targets;
    return 0;
}

/* What restore made, to take back in reverse when a later step fails. */
struct made {
    const struct lio_target *t;
    enum { MADE_WWPN, MADE_TPGT, MADE_LUN, MADE_FILE, MADE_BACKSTORE } what;
    const struct lio_lun *l;
    char *rel;                 /* MADE_BACKSTORE: core/REL, a named one (not ours) */
};

/* The backstore named name of type's kind ("HBA/NAME"), or NULL. */
static char *find_backstore(const struct lio *lio, enum lio_lun_type type, const char *name)
{
    g_autoptr(GPtrArray) bss = lio_backstores(lio);
    g_autofree char *kind = lio_backstore_kind(type);
    for (guint i = 0; i < bss->len; i++) {
        struct lio_bs_entry *e = bss->pdata[i];
        const char *slash = strchr(e->rel, '/');
        if (g_str_has_prefix(e->rel, kind) && slash && !strcmp(slash + 1, name)) {
            return g_strdup(e->rel);
        }
    }
    return NULL;
}

static void undo(struct lio *lio, GArray *made)
{
    for (guint i = made->len; i-- > 0;) {
        const struct made *m = &g_array_index(made, struct made, i);
        g_autofree char *wdir = lio_path(lio, "target", "vhost", m->t->wwpn, NULL);
        switch (m->what) {
        case MADE_LUN:
            lio_lun_remove(lio, m->t->wwpn, m->t->tpgt, m->l->lun, NULL);
            break;
        case MADE_FILE:
            /* New and empty: no one's data yet (an existing file is never removed). */
            lio->ops->unlink(lio->opaque, m->l->path);
            break;
        case MADE_TPGT:
            lio_tpgt_remove(lio, m->t->wwpn, m->t->tpgt, NULL);
            break;
        case MADE_WWPN:
            lio_remove_dir(lio, wdir);
            break;
        case MADE_BACKSTORE:
            /* lio_lun_remove leaves a backstore that is not ours: this one is new. */
            lio_backstore_delete(lio, m->rel, NULL);
            break;
        }
        g_free(m->rel);
    }
}

static void note(GArray *made, const struct lio_target *t, int what, const struct lio_lun *l,
                 char *rel)
{
    struct made m = { .t = t, .what = what, .l = l, .rel = rel };
    g_array_append_val(made, m);
}

int lio_restore(struct lio *lio, const char *file, bool partial, GError **err)
{
    g_autofree char *json = NULL;
    gsize len;
    g_autoptr(GError) gerr = NULL;
    if (!g_file_get_contents(file, &json, &len, &gerr)) {
        return vs_error_set(err, -ENOENT, "reading %s failed: %s", file, gerr->message);
    }
    GPtrArray *targets;
    int ret = lio_targetcli_detect(json, len) ?
              lio_targetcli_parse(json, len, partial, &targets, err) :
              lio_config_parse(json, len, &targets, err);
    if (ret < 0) {
        g_prefix_error(err, "%s: ", file);
        return ret;
    }
    g_autoptr(GArray) made = g_array_new(FALSE, FALSE, sizeof(struct made));
    g_autofree char *at = NULL;
    for (guint i = 0; i < targets->len && ret == 0; i++) {
        struct lio_target *t = targets->pdata[i];
        g_autofree char *wdir = lio_path(lio, "target", "vhost", t->wwpn, NULL);
        g_autofree char *tdir = g_strdup_printf("%s/tpgt_%u", wdir, t->tpgt);
        bool had_wwpn = lio_is_dir(lio, wdir), had_tpgt = lio_is_dir(lio, tdir);
        ret = lio_target_create(lio, t->wwpn, t->tpgt, t->nexus[0] ? t->nexus : NULL, &gerr);
        if (ret < 0) {
            at = g_strdup_printf("targets[%u] (%s tpgt %u)", i, t->wwpn, t->tpgt);
            break;
        }
        if (!had_wwpn) {
            note(made, t, MADE_WWPN, NULL, NULL);
        }
        if (!had_tpgt) {
            note(made, t, MADE_TPGT, NULL, NULL);
        }
        for (guint k = 0; k < t->luns->len && ret == 0; k++) {
            struct lio_lun *l = t->luns->pdata[k];
            g_autofree char *ld = g_strdup_printf("%s/lun/lun_%u", tdir, l->lun);
            struct stat st;
            bool had_lun = lio_is_dir(lio, ld);
            bool had_file = !l->path[0] || lio->ops->stat(lio->opaque, l->path, false, &st) == 0;
            struct lio_backing b = lio_lun_backing(l);
            g_autofree char *had_bs = b.name ? find_backstore(lio, b.type, b.name) : NULL;
            ret = lio_lun_add_backing(lio, t->wwpn, t->tpgt, l->lun, &b, &gerr);
            if (ret < 0) {
                at = g_strdup_printf("targets[%u].luns[%u] (%s tpgt %u LUN %u, %s %s, backstore "
                                     "core/%s)", i, k, t->wwpn, t->tpgt, l->lun,
                                     lio_lun_type_name(l->type), l->path[0] ? l->path : "-",
                                     l->backstore[0] ? l->backstore : "-");
            } else if (!had_lun) {
                if (!had_file) {
                    note(made, t, MADE_FILE, l, NULL);
                }
                if (b.name && !had_bs) {
                    note(made, t, MADE_BACKSTORE, l, find_backstore(lio, b.type, b.name));
                }
                note(made, t, MADE_LUN, l, NULL);
            }
        }
    }
    if (ret < 0) {
        /* All or nothing: a VM must not start on half a configuration. */
        vs_error_set(err, ret, "restoring %s stopped at %s: %s; what the restore had made is "
                     "removed again", file, at, gerr->message);
        undo(lio, made);
    } else {
        for (guint i = 0; i < made->len; i++) {
            g_free(g_array_index(made, struct made, i).rel);
        }
    }
    g_ptr_array_unref(targets);
    return ret;
}
