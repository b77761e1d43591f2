/*
 * The configfs tree as the rest of the lio layer sees it: paths below the
 * root, attributes, directories and listings, each one call into the
 * operations table (include/lio/lio-fs.h) the root was opened with; and
 * opening a root, which on the host first brings up the kernel side
 * (target_core_mod, the backstore modules and vhost_scsi, the configfs
 * mount).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "lio-int.h"
#include "vs-error.h"

static const char *const lio_modules[] = {
    "target_core_mod", "target_core_file", "target_core_iblock", "vhost_scsi",
};

char *lio_path(const struct lio *lio, const char *first, ...)
{
    va_list ap;
    GString *s = g_string_new(lio->root);
    va_start(ap, first);
    for (const char *c = first; c; c = va_arg(ap, const char *)) {
        g_string_append_c(s, '/');
        g_string_append(s, c);
    }
    va_end(ap);
    return g_string_free(s, FALSE);
}

int lio_write_attr(const struct lio *lio, const char *path, const char *val)
{
    return lio->ops->write_attr(lio->opaque, path, val);
}

char *lio_read_attr(const struct lio *lio, const char *path)
{
    char *v = NULL;
    if (lio->ops->read_attr(lio->opaque, path, LIO_ATTR_MAX, &v) < 0) {
        return NULL;
    }
    return g_strchomp(v);
}

static bool is_type(const struct lio *lio, const char *path, mode_t type)
{
    struct stat st;
    return lio->ops->stat(lio->opaque, path, false, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

bool lio_is_dir(const struct lio *lio, const char *path)
{
    return is_type(lio, path, S_IFDIR);
}

bool lio_is_link(const struct lio *lio, const char *path)
{
    return is_type(lio, path, S_IFLNK);
}

int lio_make_dir(const struct lio *lio, const char *path)
{
    int ret = lio->ops->mkdir(lio->opaque, path);
    return ret == -EEXIST && lio_is_dir(lio, path) ? 0 : ret;
}

int lio_remove_dir(const struct lio *lio, const char *path)
{
    return lio->ops->rmdir(lio->opaque, path);
}

static gint cmp_str(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

GPtrArray *lio_readdir(const struct lio *lio, const char *dir)
{
    GPtrArray *names = NULL;
    if (lio->ops->readdir(lio->opaque, dir, &names) < 0) {
        return g_ptr_array_new_with_free_func(g_free);
    }
    g_ptr_array_sort(names, cmp_str);
    return names;
}

static gint cmp_uint(gconstpointer a, gconstpointer b)
{
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return x < y ? -1 : x > y;
}

GArray *lio_numbered_entries(const struct lio *lio, const char *d, const char *prefix,
                             unsigned max)
{
    GArray *a = g_array_new(FALSE, FALSE, sizeof(unsigned));
    g_autoptr(GPtrArray) names = lio_readdir(lio, d);
    size_t pl = strlen(prefix);
    for (guint i = 0; i < names->len; i++) {
        const char *n = names->pdata[i];
        char *end;
        if (strncmp(n, prefix, pl) || !isdigit((unsigned char)n[pl])) {
            continue;
        }
        unsigned long v = strtoul(n + pl, &end, 10);
        if (*end || v > max) {
            continue;
        }
        unsigned u = v;
        g_array_append_val(a, u);
    }
    g_array_sort(a, cmp_uint);
    return a;
}

static int setup_kernel(const struct lio *lio, GError **err)
{
    for (size_t i = 0; i < G_N_ELEMENTS(lio_modules); i++) {
        int ret = lio->ops->load_module(lio->opaque, lio_modules[i]);
        if (ret == -ENOENT) {
            char rel[256];
            if (lio->ops->kernel_release(lio->opaque, rel, sizeof(rel)) < 0) {
                g_strlcpy(rel, "?", sizeof(rel));
            }
            return vs_error_set(err, ret, "kernel module %s is missing for kernel %s "
                                "(CONFIG_VHOST_SCSI/CONFIG_TCM_* enabled? modules installed?)",
                                lio_modules[i], rel);
        }
        if (ret < 0) {
            return vs_error_set(err, ret, "loading kernel module %s failed: %s",
                                lio_modules[i], g_strerror(-ret));
        }
    }
    if (lio->ops->is_configfs(lio->opaque, lio->root)) {
        return 0;
    }
    int ret = lio->ops->mount_configfs(lio->opaque, lio->root);
    if (ret < 0) {
        return vs_error_set(err, ret, "mounting configfs on %s failed: %s", lio->root,
                            g_strerror(-ret));
    }
    g_info("lio: mounted configfs on %s", lio->root);
    return 0;
}

int lio_open(const struct lio_options *opts, struct lio **out, GError **err)
{
    struct lio *lio = g_new0(struct lio, 1);
    g_autofree char *core = NULL, *vhost = NULL;
    int ret;

    lio->root = g_strdup(opts && opts->configfs ? opts->configfs : LIO_CONFIGFS_DEFAULT);
    lio->ops = opts && opts->fs ? opts->fs : &lio_fs_configfs;
    lio->opaque = opts ? opts->fs_opaque : NULL;
    /* Loading target_core_mod loads configfs, which makes /sys/kernel/config. */
    if (opts && opts->setup_kernel && (ret = setup_kernel(lio, err)) < 0) {
        goto fail;
    }
    if (!lio_is_dir(lio, lio->root)) {
        ret = vs_error_set(err, -ENOENT, "configfs root %s is not a directory", lio->root);
        goto fail;
    }
    core = lio_path(lio, "target", "core", NULL);
    vhost = lio_path(lio, "target", "vhost", NULL);
    if (!lio_is_dir(lio, core)) {
        ret = vs_error_set(err, -ENOENT, "%s has no target/core: kernel module "
                           "target_core_mod not loaded", lio->root);
        goto fail;
    }
    /* mkdir of target/vhost is how the vhost fabric gets registered. */
    ret = lio_make_dir(lio, vhost);
    if (ret < 0) {
        vs_error_set(err, ret, "cannot create %s (%s): kernel module vhost_scsi not loaded?",
                     vhost, g_strerror(-ret));
        goto fail;
    }
    *out = lio;
    return 0;
fail:
    lio_close(lio);
    return ret;
}

void lio_close(struct lio *lio)
{
    if (lio) {
        g_free(lio->root);
        g_free(lio);
    }
}
