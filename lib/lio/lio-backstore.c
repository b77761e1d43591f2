/*
 * LIO backstores (target/core/HBA/NAME) for vhost-scsi-ctl's LUNs: their
 * names (derived from WWPN, TPG and LUN, which is how delete recognises the
 * ones it may remove), the backing file made to exist with the wanted size,
 * creation step by step with every step undone when a later one fails, and
 * deletion with the HBA when it is left empty.  Listing them and telling
 * whether two paths are one file also live here, since both the LUN code
 * (lio-configfs.c) and this file need them.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "lio-int.h"
#include "size.h"

#define BACKSTORE_PREFIX "vs-"

char *lio_backstore_name(const char *wwpn, unsigned tpgt, unsigned lun)
{
    GString *s = g_string_new(BACKSTORE_PREFIX);
    for (const char *p = wwpn; *p; p++) {
        g_string_append_c(s, isalnum((unsigned char)*p) ? *p : '_');
    }
    g_string_append_printf(s, "-t%u-l%u", tpgt, lun);
    return g_string_free(s, FALSE);
}

/* The kernel parses control options separated by ',' and newlines. */
bool lio_backing_path_ok(const char *path)
{
    return path[0] == '/' && !strpbrk(path, ",\n=");
}

int lio_spec_parse(const char *spec, struct lio_backing *out, char **path)
{
    memset(out, 0, sizeof(*out));
    const char *rest;
    if (g_str_has_prefix(spec, "file:")) {
        out->type = LIO_LUN_FILE;
        rest = spec + 5;
    } else if (g_str_has_prefix(spec, "block:")) {
        out->type = LIO_LUN_BLOCK;
        rest = spec + 6;
    } else {
        g_warning("lio: LUN spec '%s': expected file:PATH[,size=BYTES] or block:DEV", spec);
        return -EINVAL;
    }
    const char *comma = strchr(rest, ',');
    g_autofree char *p = comma ? g_strndup(rest, comma - rest) : g_strdup(rest);
    if (comma) {
        if (out->type != LIO_LUN_FILE || !g_str_has_prefix(comma + 1, "size=") ||
            size_parse(comma + 6, &out->size) < 0 || out->size == 0) {
            g_warning("lio: LUN spec '%s': only file LUNs take ',size=BYTES[KMGT]' (> 0)", spec);
            return -EINVAL;
        }
        if (out->size % 512) {
            g_warning("lio: LUN spec '%s': size must be a multiple of 512", spec);
            return -EINVAL;
        }
    }
    if (!lio_backing_path_ok(p)) {
        g_warning("lio: LUN spec '%s': path must be absolute without ',', '=' or newlines",
                  spec);
        return -EINVAL;
    }
    out->path = *path = g_steal_pointer(&p);
    return 0;
}

uint64_t lio_device_size(const struct lio *lio, const char *path)
{
    struct stat st;
    uint64_t sz = 0;
    if (lio->ops->stat(lio->opaque, path, true, &st) < 0) {
        return 0;
    }
    if (S_ISREG(st.st_mode)) {
        return st.st_size;
    }
    if (S_ISBLK(st.st_mode) && lio->ops->blockdev_size(lio->opaque, path, &sz) == 0) {
        return sz;
    }
    return 0;
}

/*
 * Makes a file backing exist with at least the wanted size (*size: 0 takes
 * the file's own, and is then filled in); *created says whether the file
 * is new, so that a failure later can remove it again.  A block device is
 * taken as it is.
 */
static int prepare_backing(const struct lio *lio, const struct lio_backing *b, uint64_t *size,
                           bool *created)
{
    struct stat st;
    int ret = lio->ops->stat(lio->opaque, b->path, true, &st);

    *created = false;
    *size = b->size;
    if (b->type == LIO_LUN_BLOCK) {
        if (ret < 0 || !S_ISBLK(st.st_mode)) {
            g_warning("lio: %s is not a block device", b->path);
            return -ENODEV;
        }
        return 0;
    }
    if (ret == 0 && S_ISBLK(st.st_mode)) {
        *size = lio_device_size(lio, b->path);
        return 0;
    }
    if (ret == 0 && !S_ISREG(st.st_mode)) {
        g_warning("lio: %s is neither a regular file nor a block device", b->path);
        return -EINVAL;
    }
    if (*size == 0) {
        if (ret < 0) {
            g_warning("lio: file %s does not exist (give ,size=BYTES to create it)", b->path);
            return -ENOENT;
        }
        if (st.st_size == 0 || st.st_size % 512) {
            g_warning("lio: file %s size %jd is not a positive multiple of 512",
                      b->path, (intmax_t)st.st_size);
            return -EINVAL;
        }
        *size = st.st_size;
        return 0;
    }
    if (ret < 0) {
        ret = lio->ops->create_file(lio->opaque, b->path);
        if (ret < 0) {
            g_warning("lio: cannot create %s: %s", b->path, g_strerror(-ret));
            return ret;
        }
        *created = true;
        st.st_size = 0;
    }
    if ((uint64_t)st.st_size < *size) {
        ret = lio->ops->truncate(lio->opaque, b->path, *size);
        if (ret < 0) {
            g_warning("lio: cannot size %s to %" PRIu64 ": %s", b->path, *size,
                      g_strerror(-ret));
            if (*created) {
                lio->ops->unlink(lio->opaque, b->path);
                *created = false;
            }
            return ret;
        }
    }
    return 0;
}

static void bs_entry_free(gpointer p)
{
    struct lio_bs_entry *e = p;
    g_free(e->rel);
    g_free(e->path);
    g_free(e);
}

GPtrArray *lio_backstores(const struct lio *lio)
{
    GPtrArray *a = g_ptr_array_new_with_free_func(bs_entry_free);
    g_autofree char *core = lio_path(lio, "target", "core", NULL);
    g_autoptr(GPtrArray) hbas = lio_readdir(lio, core);
    for (guint i = 0; i < hbas->len; i++) {
        const char *h = hbas->pdata[i];
        g_autofree char *hba = g_build_filename(core, h, NULL);
        /* core/alua holds ALUA groups, not storage objects. */
        if (h[0] == '.' || !strcmp(h, "alua") || !lio_is_dir(lio, hba)) {
            continue;
        }
        g_autoptr(GPtrArray) sos = lio_readdir(lio, hba);
        for (guint j = 0; j < sos->len; j++) {
            const char *n = sos->pdata[j];
            g_autofree char *so = g_build_filename(hba, n, NULL);
            if (n[0] == '.' || !lio_is_dir(lio, so)) {
                continue;
            }
            g_autofree char *up = g_build_filename(so, "udev_path", NULL);
            struct lio_bs_entry *e = g_new0(struct lio_bs_entry, 1);
            e->rel = g_strdup_printf("%s/%s", h, n);
            e->path = lio_read_attr(lio, up);
            if (!e->path) {
                e->path = g_strdup("");
            }
            g_ptr_array_add(a, e);
        }
    }
    return a;
}

bool lio_same_file(const struct lio *lio, const char *a, const char *b)
{
    struct stat sa, sb;
    if (!a[0] || !b[0]) {
        return false;
    }
    if (lio->ops->stat(lio->opaque, a, true, &sa) == 0 &&
        lio->ops->stat(lio->opaque, b, true, &sb) == 0) {
        if (S_ISBLK(sa.st_mode) && S_ISBLK(sb.st_mode)) {
            return sa.st_rdev == sb.st_rdev;
        }
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    }
    return !strcmp(a, b);
}

int lio_backstore_create(const struct lio *lio, const char *name, const struct lio_backing *b,
                         char **rel_out, bool *file_created)
{
    const char *kind = b->type == LIO_LUN_FILE ? "fileio" : "iblock";
    g_autofree char *core = lio_path(lio, "target", "core", NULL);
    g_autofree char *hba = NULL, *so = NULL, *control = NULL;
    uint64_t size;
    bool created;
    int ret = prepare_backing(lio, b, &size, &created);
    if (ret < 0) {
        return ret;
    }

    /* One HBA per backstore, first free index, as rtslib does. */
    for (unsigned i = 0;; i++) {
        g_free(hba);
        hba = g_strdup_printf("%s/%s_%u", core, kind, i);
        ret = lio->ops->mkdir(lio->opaque, hba);
        if (ret != -EEXIST || i > 100000) {
            break;
        }
    }
    if (ret < 0) {
        g_warning("lio: backstore %s: cannot create HBA %s: %s", name, hba, g_strerror(-ret));
        goto undo_file;
    }
    so = g_build_filename(hba, name, NULL);
    ret = lio->ops->mkdir(lio->opaque, so);
    if (ret < 0) {
        g_warning("lio: cannot create backstore %s: %s", so, g_strerror(-ret));
        goto undo_hba;
    }
    if (b->type == LIO_LUN_FILE) {
        control = g_strdup_printf("fd_dev_name=%s,fd_dev_size=%" PRIu64, b->path, size);
    } else {
        control = g_strdup_printf("udev_path=%s", b->path);
    }
    const char *steps[][2] = {
        { "control", control }, { "udev_path", b->path }, { "enable", "1" },
    };
    for (size_t i = 0; i < G_N_ELEMENTS(steps); i++) {
        g_autofree char *attr = g_build_filename(so, steps[i][0], NULL);
        ret = lio_write_attr(lio, attr, steps[i][1]);
        if (ret < 0) {
            g_warning("lio: backstore %s: writing %s='%s' failed: %s%s", so, steps[i][0],
                      steps[i][1], g_strerror(-ret),
                      ret == -EEXIST || ret == -EBUSY ? " (device busy/claimed?)" : "");
            goto undo_so;
        }
    }
    *rel_out = g_strdup_printf("%s_%s/%s", kind, strrchr(hba, '_') + 1, name);
    *file_created = created;
    return 0;

undo_so:
    lio_remove_dir(lio, so);
undo_hba:
    lio_remove_dir(lio, hba);
undo_file:
    if (created) {
        lio->ops->unlink(lio->opaque, b->path);
    }
    return ret;
}

void lio_backstore_undo_create(const struct lio *lio, const char *rel,
                               const struct lio_backing *b, bool file_created)
{
    lio_backstore_delete(lio, rel);
    if (file_created) {
        lio->ops->unlink(lio->opaque, b->path);
    }
}

int lio_backstore_delete(const struct lio *lio, const char *rel)
{
    g_autofree char *so = lio_path(lio, "target", "core", rel, NULL);
    g_autofree char *hba = g_path_get_dirname(so);
    if (!lio_is_dir(lio, so)) {
        return 0;
    }
    int ret = lio_remove_dir(lio, so);
    if (ret < 0) {
        g_warning("lio: removing backstore core/%s failed: %s", rel, g_strerror(-ret));
        return ret;
    }
    /* The HBA goes too when we left it empty; a shared one stays (ENOTEMPTY). */
    lio_remove_dir(lio, hba);
    return 0;
}
