/*
 * targetcli-fb's saveconfig.json, read into and written from our LIO
 * configuration model (struct lio_target, include/lio/lio-configfs.h), so
 * that a host configured with targetcli moves to vhost-scsi-ctl and back.
 * The format is what rtslib_fb's RTSRoot.dump() writes and restore() reads
 * (rtslib_fb 2.1.75, targetcli-fb 2.1.53): "storage_objects" (fileio, block,
 * ramdisk, pscsi, user:*), "targets" (per fabric, with "tpgs" holding "luns"
 * that name "/backstores/PLUGIN/NAME") and "fabric_modules".  Reading maps
 * the vhost fabric and the fileio, block and ramdisk backstores, keeping
 * their names, unit serials and LUN link names; everything else (other
 * fabrics, pscsi and user backstores, attributes away from what LIO does
 * by itself, ACLs, portals, ALUA groups) is reported by the path targetcli
 * shows it at, and refused unless the caller asked for a partial restore.
 * A file that is not well-formed (wrong types, missing members, a LUN
 * naming no storage object) is always refused.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <json-glib/json-glib.h>

#include "json-member.h"
#include "json-strict.h"
#include "lio-configfs.h"
#include "lio-int.h"
#include "vs-error.h"

/*
 * A backstore's attributes (attrib/) as targetcli dumps them.  MAPPED ones
 * are our model's; DERIVED ones the kernel sets from the backing when the
 * backstore is enabled (a restore does not write them; a save reads them
 * back); DEFAULT ones must hold the value target_alloc_device() gives every
 * device, since vhost-scsi-ctl never changes them.
 */
enum attr_kind { ATTR_MAPPED, ATTR_DERIVED, ATTR_DEFAULT };
static const struct {
    const char *name;
    enum attr_kind kind;
    gint64 value;
} attrs[] = {
    { "block_size", ATTR_MAPPED, 512 }, { "emulate_write_cache", ATTR_MAPPED, 0 },
    { "optimal_sectors", ATTR_DERIVED }, { "queue_depth", ATTR_DERIVED },
    { "is_nonrot", ATTR_DERIVED }, { "max_unmap_lba_count", ATTR_DERIVED },
    { "max_unmap_block_desc_count", ATTR_DERIVED }, { "unmap_granularity", ATTR_DERIVED },
    { "unmap_granularity_alignment", ATTR_DERIVED }, { "unmap_zeroes_data", ATTR_DERIVED },
    { "max_write_same_len", ATTR_DERIVED }, { "hw_block_size", ATTR_DERIVED },
    { "hw_max_sectors", ATTR_DERIVED }, { "hw_queue_depth", ATTR_DERIVED },
    { "hw_pi_prot_type", ATTR_DERIVED }, { "alua_support", ATTR_DERIVED },
    { "pgr_support", ATTR_DERIVED },
    { "emulate_model_alias", ATTR_DEFAULT, 0 }, { "emulate_dpo", ATTR_DEFAULT, 1 },
    { "emulate_fua_write", ATTR_DEFAULT, 1 }, { "emulate_fua_read", ATTR_DEFAULT, 1 },
    { "emulate_ua_intlck_ctrl", ATTR_DEFAULT, 0 }, { "emulate_tas", ATTR_DEFAULT, 1 },
    { "emulate_tpu", ATTR_DEFAULT, 0 }, { "emulate_tpws", ATTR_DEFAULT, 0 },
    { "emulate_caw", ATTR_DEFAULT, 1 }, { "emulate_3pc", ATTR_DEFAULT, 1 },
    { "emulate_pr", ATTR_DEFAULT, 1 }, { "emulate_rsoc", ATTR_DEFAULT, 1 },
    { "pi_prot_type", ATTR_DEFAULT, 0 }, { "pi_prot_format", ATTR_DEFAULT, 0 },
    { "pi_prot_verify", ATTR_DEFAULT, 0 }, { "enforce_pr_isids", ATTR_DEFAULT, 1 },
    { "force_pr_aptpl", ATTR_DEFAULT, 0 }, { "emulate_rest_reord", ATTR_DEFAULT, 0 },
};

/* core_alua_allocate_tg_pt_gp(): the ALUA group every device has, as dumped. */
static const struct {
    const char *name;
    gint64 value;
} alua_default[] = {
    { "alua_access_state", 0 }, { "alua_access_status", 0 }, { "alua_access_type", 3 },
    { "alua_support_active_nonoptimized", 1 }, { "alua_support_active_optimized", 1 },
    { "alua_support_offline", 1 }, { "alua_support_standby", 1 },
    { "alua_support_transitioning", 1 }, { "alua_support_unavailable", 1 },
    { "alua_write_metadata", 0 }, { "implicit_trans_secs", 0 }, { "nonop_delay_msecs", 100 },
    { "preferred", 0 }, { "tg_pt_gp_id", 0 }, { "trans_delay_msecs", 0 },
};
#define ALUA_DEFAULT_NAME "default_tg_pt_gp"

/* The format nests 6 deep; a storage object has some 40 attributes. */
static const struct json_limits tcli_limits = { .max_depth = 16, .max_members = 128 };

/* ------------------------------------------------------------------ read */

/* What reading found: problems that are the file's fault, and what we cannot map. */
struct reader {
    GString *malformed;         /* first message only */
    unsigned unmapped;
    GString *unmapped_text;     /* one line "  AT: WHY" each */
};

static void malformed(struct reader *r, const char *at, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static void malformed(struct reader *r, const char *at, const char *fmt, ...)
{
    if (r->malformed->len) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    g_string_append_printf(r->malformed, "%s: ", at);
    g_string_append_vprintf(r->malformed, fmt, ap);
    va_end(ap);
}

static void unmapped(struct reader *r, const char *at, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static void unmapped(struct reader *r, const char *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *why = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    r->unmapped++;
    g_string_append_printf(r->unmapped_text, "\n  %s: %s", at, why);
}

/*
 * Checks n against spec (types, required members) as json_check_object
 * does, but a member spec does not name is something we cannot map rather
 * than a malformed file.  False when n is malformed.
 */
static bool check(struct reader *r, const char *at, JsonNode *n, const struct json_member *spec,
                  unsigned count)
{
    if (!JSON_NODE_HOLDS_OBJECT(n)) {
        malformed(r, at, "expected an object");
        return false;
    }
    JsonObject *o = json_node_get_object(n);
    g_autoptr(JsonObject) known = json_object_new();
    g_autoptr(GList) names = json_object_get_members(o);
    for (GList *l = names; l; l = l->next) {
        unsigned i = 0;
        while (i < count && strcmp(spec[i].name, l->data)) {
            i++;
        }
        if (i == count) {
            unmapped(r, at, "member \"%s\" is not one vhost-scsi-ctl knows",
                     (const char *)l->data);
        } else {
            json_object_set_member(known, l->data, json_node_copy(json_object_get_member(o, l->data)));
        }
    }
    g_autoptr(JsonNode) kn = json_node_init_object(json_node_alloc(), known);
    g_autofree char *err = json_check_object(kn, spec, count);
    if (err) {
        malformed(r, at, "%s", err);
        return false;
    }
    return true;
}

/* One storage object, and whether a vhost LUN links it. */
struct so {
    char *at;                  /* "storage_objects[N] (/backstores/P/NAME)" */
    char *key;                 /* "P/NAME" */
    bool mappable;
    bool used;
    struct lio_lun l;          /* type, path, size, block_size, ro, direct, serial */
    char *name;
};

static void so_free(gpointer p)
{
    struct so *s = p;
    g_free(s->at);
    g_free(s->key);
    g_free(s->l.path);
    g_free(s->l.serial);
    g_free(s->name);
    g_free(s);
}

static bool int_value(JsonNode *n, gint64 *v)
{
    if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_INT64) {
        return false;
    }
    *v = json_node_get_int(n);
    return true;
}

static void read_attributes(struct reader *r, struct so *s, JsonObject *o, bool write_back)
{
    JsonObject *a = json_object_member_or_null(o, "attributes");
    g_autoptr(GList) names = a ? json_object_get_members(a) : NULL;
    for (GList *l = names; l; l = l->next) {
        const char *name = l->data;
        g_autofree char *at = g_strdup_printf("%s attribute %s", s->at, name);
        gint64 v;
        size_t i = 0;
        while (i < G_N_ELEMENTS(attrs) && strcmp(attrs[i].name, name)) {
            i++;
        }
        if (i == G_N_ELEMENTS(attrs)) {
            unmapped(r, at, "not an attribute vhost-scsi-ctl knows");
            s->mappable = false;
            continue;
        }
        if (!int_value(json_object_get_member(a, name), &v)) {
            malformed(r, at, "expected an integer");
            continue;
        }
        if (attrs[i].kind == ATTR_DERIVED) {
            continue;
        }
        if (!strcmp(name, "block_size")) {
            if (v < 0 || v > UINT32_MAX) {
                malformed(r, at, "out of range");
            }
            s->l.block_size = v == 512 ? 0 : v;
        } else if (!strcmp(name, "emulate_write_cache")) {
            /* fileio's write-back mode is WCE=1; iblock reports the device's own. */
            if (s->l.type != LIO_LUN_BLOCK && v != write_back) {
                unmapped(r, at, "%" PRId64 " with write_back %s", v,
                         write_back ? "true" : "false");
                s->mappable = false;
            }
        } else if (v != attrs[i].value) {
            unmapped(r, at, "%" PRId64 " (vhost-scsi-ctl keeps LIO's default, %" PRId64 ")", v,
                     attrs[i].value);
            s->mappable = false;
        }
    }
}

static void read_alua(struct reader *r, struct so *s, JsonObject *o)
{
    JsonArray *groups = json_array_member_or_null(o, "alua_tpgs");
    for (guint i = 0; groups && i < json_array_get_length(groups); i++) {
        g_autofree char *at = g_strdup_printf("%s alua_tpgs[%u]", s->at, i);
        JsonNode *n = json_array_get_element(groups, i);
        JsonObject *g = JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
        bool dflt = g && json_object_has_member(g, "name") &&
                    !g_strcmp0(json_object_get_string_member(g, "name"), ALUA_DEFAULT_NAME) &&
                    json_object_get_size(g) == G_N_ELEMENTS(alua_default) + 1;
        for (size_t k = 0; dflt && k < G_N_ELEMENTS(alua_default); k++) {
            gint64 v;
            JsonNode *m = json_object_get_member(g, alua_default[k].name);
            dflt = m && int_value(m, &v) && v == alua_default[k].value;
        }
        if (!dflt) {
            unmapped(r, at, "an ALUA target port group other than LIO's default");
            s->mappable = false;
        }
    }
}

static struct so *read_storage_object(struct reader *r, guint i, JsonNode *n)
{
    g_autofree char *at0 = g_strdup_printf("storage_objects[%u]", i);
    static const struct json_member head[] = {
        { "plugin", JSON_M_STR }, { "name", JSON_M_STR },
    };
    JsonObject *o = JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
    for (size_t k = 0; k < G_N_ELEMENTS(head); k++) {
        JsonNode *m = o ? json_object_get_member(o, head[k].name) : NULL;
        if (!m || !JSON_NODE_HOLDS_VALUE(m) || json_node_get_value_type(m) != G_TYPE_STRING) {
            malformed(r, at0, "needs a string \"%s\"", head[k].name);
            return NULL;
        }
    }
    const char *plugin = json_object_get_string_member(o, "plugin");
    const char *name = json_object_get_string_member(o, "name");
    struct so *s = g_new0(struct so, 1);
    s->at = g_strdup_printf("%s (/backstores/%s/%s)", at0, plugin, name);
    s->key = g_strdup_printf("%s/%s", plugin, name);
    s->name = g_strdup(name);
    s->mappable = true;
    s->l.path = g_strdup("");
    s->l.serial = g_strdup("");

    static const struct json_member fileio[] = {
        { "plugin", JSON_M_STR }, { "name", JSON_M_STR }, { "dev", JSON_M_STR },
        { "size", JSON_M_INT }, { "write_back", JSON_M_BOOL }, { "wwn", JSON_M_STR },
        { "aio", JSON_M_BOOL, true }, { "attributes", JSON_M_OBJ, true },
        { "alua_tpgs", JSON_M_ARR, true },
    };
    static const struct json_member block[] = {
        { "plugin", JSON_M_STR }, { "name", JSON_M_STR }, { "dev", JSON_M_STR },
        { "wwn", JSON_M_STR }, { "readonly", JSON_M_BOOL, true },
        { "write_back", JSON_M_BOOL, true }, { "attributes", JSON_M_OBJ, true },
        { "alua_tpgs", JSON_M_ARR, true },
    };
    static const struct json_member ramdisk[] = {
        { "plugin", JSON_M_STR }, { "name", JSON_M_STR }, { "size", JSON_M_INT },
        { "wwn", JSON_M_STR }, { "nullio", JSON_M_BOOL, true },
        { "attributes", JSON_M_OBJ, true }, { "alua_tpgs", JSON_M_ARR, true },
    };
    bool wb = false;
    if (!strcmp(plugin, "fileio")) {
        if (!check(r, s->at, n, fileio, G_N_ELEMENTS(fileio))) {
            return s;
        }
        bool aio = json_object_get_boolean_member_with_default(o, "aio", false);
        wb = json_object_get_boolean_member(o, "write_back");
        s->l.type = LIO_LUN_FILE;
        s->l.path = (g_free(s->l.path), g_strdup(json_object_get_string_member(o, "dev")));
        gint64 size = json_object_get_int_member(o, "size");
        if (size < 0) {
            malformed(r, s->at, "size out of range");
        }
        s->l.size = size;
        /* Ours: the page cache with a write cache the guest flushes, or O_DIRECT. */
        s->l.direct = aio;
        if (wb == aio) {
            unmapped(r, s->at, "%s", aio ? "write_back and aio together" :
                     "write_back false without aio is fileio's O_DSYNC write-through mode; "
                     "vhost-scsi-ctl's file LUNs are write-back through the page cache "
                     "(write_back true) or O_DIRECT (aio true)");
            s->mappable = false;
        }
    } else if (!strcmp(plugin, "block")) {
        if (!check(r, s->at, n, block, G_N_ELEMENTS(block))) {
            return s;
        }
        s->l.type = LIO_LUN_BLOCK;
        s->l.path = (g_free(s->l.path), g_strdup(json_object_get_string_member(o, "dev")));
        s->l.ro = json_object_get_boolean_member_with_default(o, "readonly", false);
    } else if (!strcmp(plugin, "ramdisk")) {
        if (!check(r, s->at, n, ramdisk, G_N_ELEMENTS(ramdisk))) {
            return s;
        }
        gint64 size = json_object_get_int_member(o, "size");
        if (size < 0) {
            malformed(r, s->at, "size out of range");
        }
        s->l.size = size;
        s->l.type = json_object_get_boolean_member_with_default(o, "nullio", false) ?
                    LIO_LUN_NULL : LIO_LUN_RAM;
    } else {
        unmapped(r, s->at, "LIO's %s backstore is not one vhost-scsi-ctl configures (fileio, "
                 "block and ramdisk are)", plugin);
        s->mappable = false;
        return s;
    }
    s->l.serial = (g_free(s->l.serial), g_strdup(json_object_get_string_member(o, "wwn")));
    read_attributes(r, s, o, wb);
    read_alua(r, s, o);
    struct lio_backing b = {
        .type = s->l.type, .path = s->l.path, .size = s->l.size, .block_size = s->l.block_size,
        .ro = s->l.ro, .direct = s->l.direct, .name = s->name, .serial = s->l.serial,
    };
    g_autofree char *why = s->mappable ? lio_backing_refusal(&b) : NULL;
    if (why) {
        unmapped(r, s->at, "%s", why);
        s->mappable = false;
    }
    return s;
}

static void read_lun(struct reader *r, struct lio_target *t, const char *tat, const char *tpath,
                     guint k, JsonNode *n, GHashTable *sos)
{
    static const struct json_member spec[] = {
        { "index", JSON_M_INT }, { "storage_object", JSON_M_STR },
        { "alias", JSON_M_ANY, true }, { "alua_tg_pt_gp_name", JSON_M_ANY, true },
    };
    g_autofree char *at0 = g_strdup_printf("%s.luns[%u]", tat, k);
    if (!check(r, at0, n, spec, G_N_ELEMENTS(spec))) {
        return;
    }
    JsonObject *o = json_node_get_object(n);
    gint64 index = json_object_get_int_member(o, "index");
    const char *so_path = json_object_get_string_member(o, "storage_object");
    g_autofree char *at = g_strdup_printf("%s (%s/luns/lun%" PRId64 ")", at0, tpath, index);
    JsonNode *alias = json_object_get_member(o, "alias");
    JsonNode *gp = json_object_get_member(o, "alua_tg_pt_gp_name");
    if (index < 0 || index > LIO_LUN_MAX) {
        malformed(r, at, "index out of range (0..%d)", LIO_LUN_MAX);
        return;
    }
    for (guint i = 0; i < t->luns->len; i++) {
        if (((struct lio_lun *)t->luns->pdata[i])->lun == index) {
            malformed(r, at, "LUN %" PRId64 " appears twice", index);
            return;
        }
    }
    if ((alias && !JSON_NODE_HOLDS_NULL(alias) &&
         (!JSON_NODE_HOLDS_VALUE(alias) || json_node_get_value_type(alias) != G_TYPE_STRING)) ||
        (gp && !JSON_NODE_HOLDS_NULL(gp) &&
         (!JSON_NODE_HOLDS_VALUE(gp) || json_node_get_value_type(gp) != G_TYPE_STRING))) {
        malformed(r, at, "alias and alua_tg_pt_gp_name must be strings or null");
        return;
    }
    if (!g_str_has_prefix(so_path, "/backstores/")) {
        malformed(r, at, "storage_object \"%s\" is not /backstores/PLUGIN/NAME", so_path);
        return;
    }
    struct so *s = g_hash_table_lookup(sos, so_path + strlen("/backstores/"));
    if (!s) {
        malformed(r, at, "storage_object %s is not among storage_objects", so_path);
        return;
    }
    s->used = true;
    if (gp && !JSON_NODE_HOLDS_NULL(gp) && strcmp(json_node_get_string(gp), ALUA_DEFAULT_NAME)) {
        unmapped(r, at, "ALUA target port group %s (only %s)", json_node_get_string(gp),
                 ALUA_DEFAULT_NAME);
        return;
    }
    if (!s->mappable) {
        unmapped(r, at, "its storage object %s is not mappable (above)", so_path);
        return;
    }
    const char *a = alias && !JSON_NODE_HOLDS_NULL(alias) ? json_node_get_string(alias) : "";
    if (a[0] && !lio_name_ok(a, 255)) {
        malformed(r, at, "alias \"%s\" is not a configfs name", a);
        return;
    }
    struct lio_lun *l = g_new0(struct lio_lun, 1);
    *l = s->l;
    l->lun = index;
    l->path = g_strdup(s->l.path);
    l->serial = g_strdup(s->l.serial);
    l->alias = g_strdup(a);
    l->backstore = g_strdup_printf("%s", s->key);  /* "PLUGIN/NAME": its name is kept */
    l->owned = false;
    g_ptr_array_add(t->luns, l);
}

static gint lun_cmp(gconstpointer a, gconstpointer b)
{
    const struct lio_lun *x = *(struct lio_lun *const *)a, *y = *(struct lio_lun *const *)b;
    return x->lun < y->lun ? -1 : x->lun > y->lun;
}

static void read_tpg(struct reader *r, const char *wwn, const char *tat0, guint j, JsonNode *n,
                     GHashTable *sos, GPtrArray *out)
{
    static const struct json_member spec[] = {
        { "tag", JSON_M_INT }, { "enable", JSON_M_BOOL, true }, { "luns", JSON_M_ARR, true },
        { "portals", JSON_M_ARR, true }, { "node_acls", JSON_M_ARR, true },
        { "attributes", JSON_M_OBJ, true }, { "parameters", JSON_M_OBJ, true },
        { "nexus", JSON_M_STR, true },
    };
    g_autofree char *at0 = g_strdup_printf("%s.tpgs[%u]", tat0, j);
    if (!check(r, at0, n, spec, G_N_ELEMENTS(spec))) {
        return;
    }
    JsonObject *o = json_node_get_object(n);
    gint64 tag = json_object_get_int_member(o, "tag");
    g_autofree char *tpath = g_strdup_printf("/vhost/%s/tpg%" PRId64, wwn, tag);
    g_autofree char *at = g_strdup_printf("%s (%s)", at0, tpath);
    if (tag < 0 || tag > LIO_TPGT_MAX) {
        malformed(r, at, "tag out of range (0..%d)", LIO_TPGT_MAX);
        return;
    }
    for (guint i = 0; i < out->len; i++) {
        struct lio_target *t = out->pdata[i];
        if (!strcmp(t->wwpn, wwn) && t->tpgt == tag) {
            malformed(r, at, "TPG %" PRId64 " of %s appears twice", tag, wwn);
            return;
        }
    }
    const char *nexus = json_object_get_string_member_with_default(o, "nexus", "");
    if (nexus[0] && !lio_wwpn_valid(nexus)) {
        malformed(r, at, "invalid nexus \"%s\"", nexus);
        return;
    }
    bool ok = true;
    if (!json_object_get_boolean_member_with_default(o, "enable", true)) {
        unmapped(r, at, "a disabled TPG (a vhost TPG is always enabled)");
        ok = false;
    }
    const char *const lists[] = { "portals", "node_acls" };
    for (size_t i = 0; i < G_N_ELEMENTS(lists); i++) {
        JsonArray *a = json_array_member_or_null(o, lists[i]);
        if (a && json_array_get_length(a)) {
            unmapped(r, at, "%s (vhost-scsi-ctl configures none)", lists[i]);
            ok = false;
        }
    }
    JsonObject *params = json_object_member_or_null(o, "parameters");
    if (params && json_object_get_size(params)) {
        unmapped(r, at, "parameters (a vhost TPG has none)");
        ok = false;
    }
    JsonObject *attr = json_object_member_or_null(o, "attributes");
    g_autoptr(GList) names = attr ? json_object_get_members(attr) : NULL;
    for (GList *l = names; l; l = l->next) {
        gint64 v;
        if (strcmp(l->data, "fabric_prot_type") ||
            !int_value(json_object_get_member(attr, l->data), &v) || v != 0) {
            unmapped(r, at, "attribute %s (only fabric_prot_type 0, no T10-PI)",
                     (const char *)l->data);
            ok = false;
        }
    }
    struct lio_target *t = lio_target_new();
    t->wwpn = g_strdup(wwn);
    t->tpgt = tag;
    t->nexus = g_strdup(nexus);
    JsonArray *luns = json_array_member_or_null(o, "luns");
    for (guint k = 0; luns && k < json_array_get_length(luns); k++) {
        read_lun(r, t, at0, tpath, k, json_array_get_element(luns, k), sos);
    }
    g_ptr_array_sort(t->luns, lun_cmp);
    if (!ok) {
        /* What the TPG holds is left out with it (each LUN still counts as linked). */
        lio_target_free(t);
        return;
    }
    g_ptr_array_add(out, t);
}

static void read_target(struct reader *r, guint i, JsonNode *n, GHashTable *sos, GPtrArray *out)
{
    static const struct json_member spec[] = {
        { "wwn", JSON_M_STR }, { "fabric", JSON_M_STR }, { "tpgs", JSON_M_ARR, true },
    };
    g_autofree char *at0 = g_strdup_printf("targets[%u]", i);
    if (!check(r, at0, n, spec, G_N_ELEMENTS(spec))) {
        return;
    }
    JsonObject *o = json_node_get_object(n);
    const char *wwn = json_object_get_string_member(o, "wwn");
    const char *fabric = json_object_get_string_member(o, "fabric");
    g_autofree char *at = g_strdup_printf("%s (/%s/%s)", at0, fabric, wwn);
    JsonArray *tpgs = json_array_member_or_null(o, "tpgs");
    if (strcmp(fabric, "vhost")) {
        unmapped(r, at, "the %s fabric (vhost-scsi-ctl configures vhost targets only)", fabric);
        /* Its storage objects are reported with it, not again as unlinked. */
        for (guint j = 0; tpgs && j < json_array_get_length(tpgs); j++) {
            JsonNode *tn = json_array_get_element(tpgs, j);
            JsonArray *luns = JSON_NODE_HOLDS_OBJECT(tn) ?
                              json_array_member_or_null(json_node_get_object(tn), "luns") : NULL;
            for (guint k = 0; luns && k < json_array_get_length(luns); k++) {
                JsonNode *ln = json_array_get_element(luns, k);
                JsonObject *lo = JSON_NODE_HOLDS_OBJECT(ln) ? json_node_get_object(ln) : NULL;
                const char *sp = lo && json_object_has_member(lo, "storage_object") &&
                                 JSON_NODE_HOLDS_VALUE(json_object_get_member(lo, "storage_object")) ?
                                 json_object_get_string_member(lo, "storage_object") : NULL;
                struct so *s = sp && g_str_has_prefix(sp, "/backstores/") ?
                               g_hash_table_lookup(sos, sp + strlen("/backstores/")) : NULL;
                if (s) {
                    s->used = true;
                }
            }
        }
        return;
    }
    if (!lio_wwpn_valid(wwn)) {
        malformed(r, at, "invalid vhost WWPN");
        return;
    }
    for (guint j = 0; tpgs && j < json_array_get_length(tpgs); j++) {
        read_tpg(r, wwn, at0, j, json_array_get_element(tpgs, j), sos, out);
    }
}

bool lio_targetcli_detect(const char *json, size_t len)
{
    g_autofree char *err = NULL;
    size_t at;
    g_autoptr(JsonNode) root = json_strict_parse(json, len, &tcli_limits, &err, &at);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        return false;
    }
    JsonObject *o = json_node_get_object(root);
    /* Ours has "version"; targetcli's never does. */
    return !json_object_has_member(o, "version") &&
           (json_object_has_member(o, "storage_objects") || json_object_has_member(o, "targets") ||
            json_object_has_member(o, "fabric_modules"));
}

int lio_targetcli_parse(const char *json, size_t len, bool partial, GPtrArray **out,
                        GError **err)
{
    g_autofree char *bad = NULL;
    size_t at;
    g_autoptr(JsonNode) root = json_strict_parse(json, len, &tcli_limits, &bad, &at);
    if (!root) {
        if (at != JSON_AT_NONE) {
            return vs_error_set(err, -EINVAL, "targetcli configuration rejected at byte %zu: %s",
                                at, bad);
        }
        return vs_error_set(err, -EINVAL, "targetcli configuration rejected: %s", bad);
    }
    struct reader r = { .malformed = g_string_new(NULL), .unmapped_text = g_string_new(NULL) };
    static const struct json_member top[] = {
        { "storage_objects", JSON_M_ARR, true }, { "targets", JSON_M_ARR, true },
        { "fabric_modules", JSON_M_ARR, true },
    };
    g_autoptr(GHashTable) sos = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, so_free);
    g_autoptr(GPtrArray) order = g_ptr_array_new();
    GPtrArray *targets = g_ptr_array_new_with_free_func((GDestroyNotify)lio_target_free);
    if (check(&r, "top level", root, top, G_N_ELEMENTS(top))) {
        JsonObject *o = json_node_get_object(root);
        JsonArray *fm = json_array_member_or_null(o, "fabric_modules");
        for (guint i = 0; fm && i < json_array_get_length(fm); i++) {
            g_autofree char *fat = g_strdup_printf("fabric_modules[%u]", i);
            unmapped(&r, fat, "fabric module settings (iSCSI discovery authentication)");
        }
        JsonArray *a = json_array_member_or_null(o, "storage_objects");
        for (guint i = 0; a && i < json_array_get_length(a) && !r.malformed->len; i++) {
            struct so *s = read_storage_object(&r, i, json_array_get_element(a, i));
            if (s && g_hash_table_contains(sos, s->key)) {
                malformed(&r, s->at, "a second storage object of that name");
                so_free(s);
            } else if (s) {
                g_hash_table_insert(sos, s->key, s);
                g_ptr_array_add(order, s);
            }
        }
        a = json_array_member_or_null(o, "targets");
        for (guint i = 0; a && i < json_array_get_length(a) && !r.malformed->len; i++) {
            read_target(&r, i, json_array_get_element(a, i), sos, targets);
        }
        for (guint i = 0; i < order->len && !r.malformed->len; i++) {
            struct so *s = order->pdata[i];
            if (!s->used && s->mappable) {
                unmapped(&r, s->at, "no vhost LUN links it (vhost-scsi-ctl keeps backstores "
                         "only as LUNs)");
            }
        }
    }
    int ret = 0;
    if (r.malformed->len) {
        ret = vs_error_set(err, -EINVAL, "targetcli configuration rejected: %s",
                           r.malformed->str);
    } else if (r.unmapped && !partial) {
        ret = vs_error_set(err, -EINVAL, "targetcli configuration: %u object(s) cannot be "
                           "mapped; nothing was changed (--partial restores the rest):%s",
                           r.unmapped, r.unmapped_text->str);
    } else if (r.unmapped) {
        /* Not a failure: what --partial leaves out is told, and the rest restored. */
        g_message("lio: targetcli configuration: %u object(s) left out (--partial):%s",
                  r.unmapped, r.unmapped_text->str);
    }
    g_string_free(r.malformed, TRUE);
    g_string_free(r.unmapped_text, TRUE);
    if (ret < 0) {
        g_ptr_array_unref(targets);
        return ret;
    }
    *out = targets;
    return 0;
}

/* ----------------------------------------------------------------- write */

static const char *plugin_of(enum lio_lun_type t)
{
    return t == LIO_LUN_FILE ? "fileio" : t == LIO_LUN_BLOCK ? "block" :
           t == LIO_LUN_RAM || t == LIO_LUN_NULL ? "ramdisk" : NULL;
}

static void member_str(JsonBuilder *b, const char *name, const char *v)
{
    json_builder_set_member_name(b, name);
    json_builder_add_string_value(b, v);
}

/* An attribute file's value, as rtslib dumps it: an integer if it is one. */
static JsonNode *attr_node(const char *v)
{
    gint64 n;
    JsonNode *node = json_node_alloc();
    if (g_ascii_string_to_signed(v, 10, G_MININT64, G_MAXINT64, &n, NULL)) {
        return json_node_init_int(node, n);
    }
    return json_node_init_string(node, v);
}

/*
 * The writable files of dir (attrib/), as rtslib's dump() reads them, with
 * our model's values and LIO's defaults for what the tree does not show (a
 * fake tree; the kernel shows them all).
 */
static JsonNode *attributes_of(const struct lio *lio, const char *dir, const struct lio_lun *l)
{
    g_autoptr(JsonObject) o = json_object_new();
    if (l) {
        for (size_t i = 0; i < G_N_ELEMENTS(attrs); i++) {
            gint64 v = attrs[i].value;
            if (!strcmp(attrs[i].name, "block_size")) {
                v = l->block_size ? l->block_size : 512;
            } else if (!strcmp(attrs[i].name, "emulate_write_cache")) {
                v = l->type == LIO_LUN_FILE && !l->direct;
            } else if (attrs[i].kind == ATTR_DERIVED || !strcmp(attrs[i].name, "emulate_rsoc")) {
                continue;       /* the kernel's own (and emulate_rsoc only from 6.2 on) */
            }
            json_object_set_int_member(o, attrs[i].name, v);
        }
    }
    g_autoptr(GPtrArray) names = lio_readdir(lio, dir);
    for (guint i = 0; i < names->len; i++) {
        g_autofree char *p = g_build_filename(dir, names->pdata[i], NULL);
        struct stat st;
        g_autofree char *v = NULL;
        if (lio->ops->stat(lio->opaque, p, false, &st) < 0 || !S_ISREG(st.st_mode) ||
            !(st.st_mode & S_IWUSR) || !(v = lio_read_attr(lio, p))) {
            continue;
        }
        json_object_set_member(o, names->pdata[i], attr_node(v));
    }
    return json_node_init_object(json_node_alloc(), o);
}

/* rtslib writes its keys sorted; json-glib keeps insertion order, so sort here. */
static JsonNode *sorted(JsonNode *n)
{
    if (JSON_NODE_HOLDS_ARRAY(n)) {
        JsonArray *a = json_node_get_array(n);
        g_autoptr(JsonArray) s = json_array_new();
        for (guint i = 0; i < json_array_get_length(a); i++) {
            json_array_add_element(s, sorted(json_array_get_element(a, i)));
        }
        return json_node_init_array(json_node_alloc(), s);
    }
    if (JSON_NODE_HOLDS_OBJECT(n)) {
        JsonObject *o = json_node_get_object(n);
        g_autoptr(JsonObject) s = json_object_new();
        g_autoptr(GList) names = g_list_sort(json_object_get_members(o), (GCompareFunc)strcmp);
        for (GList *l = names; l; l = l->next) {
            json_object_set_member(s, l->data, sorted(json_object_get_member(o, l->data)));
        }
        return json_node_init_object(json_node_alloc(), s);
    }
    return json_node_copy(n);
}

static void add_storage_object(const struct lio *lio, JsonBuilder *b, const struct lio_lun *l)
{
    g_autofree char *name = g_path_get_basename(l->backstore);
    g_autofree char *so = lio_path(lio, "target", "core", l->backstore, NULL);
    g_autofree char *adir = g_build_filename(so, "attrib", NULL);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "alua_tpgs");
    json_builder_begin_array(b);
    json_builder_begin_object(b);
    for (size_t i = 0; i < G_N_ELEMENTS(alua_default); i++) {
        lio_json_int(b, alua_default[i].name, alua_default[i].value);
    }
    member_str(b, "name", ALUA_DEFAULT_NAME);
    json_builder_end_object(b);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "attributes");
    json_builder_add_value(b, attributes_of(lio, adir, l));
    member_str(b, "name", name);
    member_str(b, "plugin", plugin_of(l->type));
    member_str(b, "wwn", l->serial ? l->serial : "");
    switch (l->type) {
    case LIO_LUN_FILE:
        lio_json_bool(b, "aio", l->direct);
        member_str(b, "dev", l->path);
        lio_json_int(b, "size", l->size);
        lio_json_bool(b, "write_back", !l->direct);
        break;
    case LIO_LUN_BLOCK: {
        g_autofree char *wcp = g_build_filename(adir, "emulate_write_cache", NULL);
        g_autofree char *wc = lio_read_attr(lio, wcp);
        member_str(b, "dev", l->path);
        lio_json_bool(b, "readonly", l->ro);
        lio_json_bool(b, "write_back", wc && !strcmp(wc, "1"));
        break;
    }
    default:
        if (l->type == LIO_LUN_NULL) {
            lio_json_bool(b, "nullio", true);
        }
        lio_json_int(b, "size", l->size);
        break;
    }
    json_builder_end_object(b);
}

int lio_list_to_targetcli(struct lio *lio, GPtrArray *targets, char **out, GError **err)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "fabric_modules");
    json_builder_begin_array(b);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "storage_objects");
    json_builder_begin_array(b);
    for (guint i = 0; i < targets->len; i++) {
        struct lio_target *t = targets->pdata[i];
        for (guint j = 0; j < t->luns->len; j++) {
            struct lio_lun *l = t->luns->pdata[j];
            const char *plugin = plugin_of(l->type);
            g_autofree char *name = g_path_get_basename(l->backstore);
            if (!plugin || !l->backstore[0]) {
                return vs_error_set(err, -EINVAL, "cannot write a targetcli configuration: %s "
                                    "tpgt %u LUN %u maps backstore core/%s, which is not "
                                    "fileio, iblock or rd_mcp", t->wwpn, t->tpgt, l->lun,
                                    l->backstore[0] ? l->backstore : "(none)");
            }
            g_autofree char *key = g_strdup_printf("%s/%s", plugin, name);
            const char *other = g_hash_table_lookup(seen, key);
            if (other && strcmp(other, l->backstore)) {
                /* targetcli names a storage object by plugin and name alone. */
                return vs_error_set(err, -EINVAL, "cannot write a targetcli configuration: "
                                    "backstores core/%s and core/%s would both be "
                                    "/backstores/%s", other, l->backstore, key);
            }
            if (!g_utf8_validate(l->path, -1, NULL) || !g_utf8_validate(l->serial, -1, NULL)) {
                return vs_error_set(err, -EINVAL, "cannot write a targetcli configuration: "
                                    "backstore core/%s holds a path or serial that is not "
                                    "UTF-8", l->backstore);
            }
            if (!other) {
                g_hash_table_insert(seen, g_steal_pointer(&key), g_strdup(l->backstore));
                add_storage_object(lio, b, l);
            }
        }
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "targets");
    json_builder_begin_array(b);
    for (guint i = 0; i < targets->len; i++) {
        struct lio_target *t = targets->pdata[i];
        /* lio_list gives one record per TPG, sorted by WWPN: one target each run. */
        if (i > 0 && !strcmp(((struct lio_target *)targets->pdata[i - 1])->wwpn, t->wwpn)) {
            continue;
        }
        json_builder_begin_object(b);
        member_str(b, "fabric", "vhost");
        json_builder_set_member_name(b, "tpgs");
        json_builder_begin_array(b);
        for (guint k = i; k < targets->len; k++) {
            struct lio_target *tp = targets->pdata[k];
            if (strcmp(tp->wwpn, t->wwpn)) {
                break;
            }
            g_autofree char *tdir = g_strdup_printf("%s/tpgt_%u", t->wwpn, tp->tpgt);
            g_autofree char *adir = lio_path(lio, "target", "vhost", tdir, "attrib", NULL);
            json_builder_begin_object(b);
            g_autoptr(JsonNode) an = attributes_of(lio, adir, NULL);
            if (!json_object_has_member(json_node_get_object(an), "fabric_prot_type")) {
                json_object_set_int_member(json_node_get_object(an), "fabric_prot_type", 0);
            }
            json_builder_set_member_name(b, "attributes");
            json_builder_add_value(b, json_node_copy(an));
            lio_json_bool(b, "enable", true);
            json_builder_set_member_name(b, "luns");
            json_builder_begin_array(b);
            for (guint j = 0; j < tp->luns->len; j++) {
                struct lio_lun *l = tp->luns->pdata[j];
                g_autofree char *name = g_path_get_basename(l->backstore);
                g_autofree char *so = g_strdup_printf("/backstores/%s/%s", plugin_of(l->type),
                                                      name);
                json_builder_begin_object(b);
                member_str(b, "alias", l->alias ? l->alias : name);
                member_str(b, "alua_tg_pt_gp_name", ALUA_DEFAULT_NAME);
                lio_json_int(b, "index", l->lun);
                member_str(b, "storage_object", so);
                json_builder_end_object(b);
            }
            json_builder_end_array(b);
            json_builder_set_member_name(b, "node_acls");
            json_builder_begin_array(b);
            json_builder_end_array(b);
            json_builder_set_member_name(b, "portals");
            json_builder_begin_array(b);
            json_builder_end_array(b);
            lio_json_int(b, "tag", tp->tpgt);
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
        member_str(b, "wwn", t->wwpn);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);

    g_autoptr(JsonNode) root = json_builder_get_root(b);
    g_autoptr(JsonNode) s = sorted(root);
    *out = lio_json_text(s);
    return 0;
}
