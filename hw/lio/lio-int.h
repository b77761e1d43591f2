/*
 * What the files of the lio layer share beyond include/lio/lio-configfs.h:
 * the open root with its operations table, the path and attribute helpers
 * on top of the table (lio-tree.c), the backstores (lio-backstore.c), the
 * JSON writing of both saved formats and the records lio_list returns.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_LIO_INT_H
#define VHOST_SCSI_LIO_INT_H

#include <stdbool.h>
#include <glib.h>
#include <json-glib/json-glib.h>

#include "lio-configfs.h"
#include "lio-fs.h"

#define LIO_ATTR_MAX 4096

struct lio {
    char *root;
    const struct lio_fs_ops *ops;
    void *opaque;
};

/* lio-tree.c: paths below the root, attributes and directories. */
char *lio_path(const struct lio *lio, const char *first, ...) G_GNUC_NULL_TERMINATED;
int lio_write_attr(const struct lio *lio, const char *path, const char *val);
/* An attribute, trailing whitespace stripped; NULL when unreadable. */
char *lio_read_attr(const struct lio *lio, const char *path);
bool lio_is_dir(const struct lio *lio, const char *path);
bool lio_is_link(const struct lio *lio, const char *path);
/* mkdir; an existing directory is fine. */
int lio_make_dir(const struct lio *lio, const char *path);
int lio_remove_dir(const struct lio *lio, const char *path);
/* The names in dir (empty when unreadable), sorted. */
GPtrArray *lio_readdir(const struct lio *lio, const char *dir);
/* The numbers N of entries PREFIX<N> of directory d, up to max, sorted. */
GArray *lio_numbered_entries(const struct lio *lio, const char *d, const char *prefix,
                             unsigned max);

/* lio-backstore.c */
/* A backstore directory, as "HBA/NAME" below target/core, and its udev_path. */
struct lio_bs_entry {
    char *rel;
    char *path;
};
/* The name of the backstore lio_lun_add makes for a LUN: "vs-WWPN-tT-lL". */
char *lio_backstore_name(const char *wwpn, unsigned tpgt, unsigned lun);
/* The HBA prefix of a backstore type's directories, e.g. "fileio_" (g_free). */
char *lio_backstore_kind(enum lio_lun_type type);
/* A backing file path the kernel's option parser cannot misread. */
bool lio_backing_path_ok(const char *path);
/* A configfs name or unit serial: 1..max graphic ASCII characters, no '/'. */
bool lio_name_ok(const char *s, size_t max);
/* Why LIO cannot make b (a g_malloc'd reason), or NULL when it can. */
char *lio_backing_refusal(const struct lio_backing *b);
/*
 * Parses spec (the daemon's grammar, no "ID=") and maps it onto *out, whose
 * path then points at *path (g_free it); -EINVAL when the spec is bad or
 * LIO cannot express it, naming what.
 */
int lio_backing_from_spec(const struct lio *lio, const char *spec, struct lio_backing *out,
                          char **path, GError **err);
/* The size of a file or block device; 0 when unknown. */
uint64_t lio_device_size(const struct lio *lio, const char *path);
/* Every backstore (GPtrArray of struct lio_bs_entry *). */
GPtrArray *lio_backstores(const struct lio *lio);
/* Whether two paths name one file or device. */
bool lio_same_file(const struct lio *lio, const char *a, const char *b);
/*
 * Creates backstore name for b (making the file exist first) and sets
 * *rel_out to its "HBA/NAME" and *file_created to whether the file is new;
 * a failure leaves nothing behind.
 */
int lio_backstore_create(const struct lio *lio, const char *name, const struct lio_backing *b,
                         char **rel_out, bool *file_created, GError **err);
/* Takes back a lio_backstore_create when a later step fails. */
void lio_backstore_undo_create(const struct lio *lio, const char *rel,
                               const struct lio_backing *b, bool file_created);
/* Fills in l's type, path, size and options from backstore core/rel. */
void lio_backstore_describe(const struct lio *lio, const char *rel, struct lio_lun *l);
/* Whether an existing backstore (as described) is what b asks for. */
bool lio_backing_matches(const struct lio *lio, const struct lio_lun *cur,
                         const struct lio_backing *b);
/* Removes core/rel and its HBA if that is left empty; a missing one is fine. */
int lio_backstore_delete(const struct lio *lio, const char *rel, GError **err);
/*
 * The JSON writing both formats share: the saved form (lio-config.c) and
 * targetcli's (lio-targetcli.c), which lio-config.c calls, so it lives here.
 */
static inline void lio_json_int(JsonBuilder *b, const char *member, gint64 value)
{
    json_builder_set_member_name(b, member);
    json_builder_add_int_value(b, value);
}

static inline void lio_json_bool(JsonBuilder *b, const char *member, bool value)
{
    json_builder_set_member_name(b, member);
    json_builder_add_boolean_value(b, value);
}

/* root pretty-printed (indent 2) with a final newline. */
static inline char *lio_json_text(JsonNode *root)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();
    json_generator_set_root(gen, root);
    json_generator_set_pretty(gen, TRUE);
    json_generator_set_indent(gen, 2);
    g_autofree char *text = json_generator_to_data(gen, NULL);
    return g_strconcat(text, "\n", NULL);
}
/* lio-configfs.c: takes a TPG without LUNs away (its nexus first). */
int lio_tpgt_remove(struct lio *lio, const char *wwpn, unsigned tpgt, GError **err);
/* An empty target record, as lio_list returns them. */
struct lio_target *lio_target_new(void);

#endif
