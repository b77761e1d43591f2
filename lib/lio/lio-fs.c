/*
 * The filesystem under a LIO configuration: paths below the configfs root,
 * attribute reads and writes, directories, and bringing up the kernel side
 * (loading target_core_mod, vhost_scsi and the backstore modules with
 * libkmod, mounting configfs).  The unit tests point the root at a plain
 * directory; the few places where that tree must behave differently from
 * configfs (attribute files created on write, directories removed
 * recursively) are here and nowhere else.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <libkmod.h>

#include "lio-int.h"

/* Not in linux/magic.h: fs/configfs/configfs_internal.h. */
#define LIO_CONFIGFS_FS_MAGIC 0x62656570

static const char *const lio_modules[] = {
    "target_core_mod", "target_core_file", "target_core_iblock", "vhost_scsi",
};

char *lio_path(const struct lio *lio, const char *first, ...) G_GNUC_NULL_TERMINATED;
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
    int flags = O_WRONLY | O_CLOEXEC | (lio->configfs ? 0 : O_CREAT | O_TRUNC);
    int fd = open(path, flags, 0644);
    if (fd < 0) {
        return -errno;
    }
    size_t len = strlen(val);
    ssize_t n = write(fd, val, len);
    int e = n < 0 ? errno : EIO;
    close(fd);
    return n == (ssize_t)len ? 0 : -e;
}

/* Reads an attribute, trailing whitespace stripped; NULL when unreadable. */
char *lio_read_attr(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return NULL;
    }
    char *buf = g_malloc(LIO_ATTR_MAX + 1);
    size_t got = 0;
    while (got < LIO_ATTR_MAX) {
        ssize_t n = read(fd, buf + got, LIO_ATTR_MAX - got);
        if (n < 0) {
            close(fd);
            g_free(buf);
            return NULL;
        }
        if (n == 0) {
            break;
        }
        got += n;
    }
    close(fd);
    buf[got] = 0;
    g_strchomp(buf);
    return buf;
}

bool lio_is_dir(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int lio_make_dir(const char *p)
{
    if (mkdir(p, 0755) == 0 || (errno == EEXIST && lio_is_dir(p))) {
        return 0;
    }
    return -errno;
}

/* Plain trees: remove what the kernel would have removed with the group. */
int lio_remove_tree(const char *p)
{
    DIR *d = opendir(p);
    if (!d) {
        return -errno;
    }
    struct dirent *de;
    int ret = 0;
    while ((de = readdir(d)) && ret == 0) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) {
            continue;
        }
        g_autofree char *c = g_build_filename(p, de->d_name, NULL);
        if (lio_is_dir(c)) {
            ret = lio_remove_tree(c);
        } else if (unlink(c) < 0) {
            ret = -errno;
        }
    }
    closedir(d);
    if (ret == 0 && rmdir(p) < 0) {
        ret = -errno;
    }
    return ret;
}

int lio_remove_dir(const struct lio *lio, const char *p)
{
    if (lio->configfs) {
        return rmdir(p) < 0 ? -errno : 0;
    }
    return lio_remove_tree(p);
}

/* Names in d matching prefix+number, sorted by number. */
GArray *lio_numbered_entries(const char *d, const char *prefix, unsigned max)
{
    GArray *a = g_array_new(FALSE, FALSE, sizeof(unsigned));
    DIR *dir = opendir(d);
    if (!dir) {
        return a;
    }
    struct dirent *de;
    size_t pl = strlen(prefix);
    while ((de = readdir(dir))) {
        char *end;
        if (strncmp(de->d_name, prefix, pl) || !isdigit((unsigned char)de->d_name[pl])) {
            continue;
        }
        unsigned long v = strtoul(de->d_name + pl, &end, 10);
        if (*end || v > max) {
            continue;
        }
        unsigned u = v;
        g_array_append_val(a, u);
    }
    closedir(dir);
    /* insertion sort: these lists are short */
    unsigned *v = (unsigned *)a->data;
    for (guint i = 1; i < a->len; i++) {
        for (guint j = i; j > 0 && v[j - 1] > v[j]; j--) {
            unsigned t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    }
    return a;
}

/* ----------------------------------------------------------- kernel setup */

static int load_modules(void)
{
    struct kmod_ctx *ctx = kmod_new(NULL, NULL);
    if (!ctx) {
        g_warning("lio: libkmod initialisation failed");
        return -ENOMEM;
    }
    int ret = 0;
    for (size_t i = 0; i < G_N_ELEMENTS(lio_modules) && ret == 0; i++) {
        const char *name = lio_modules[i];
        struct kmod_module *mod = NULL;
        if (kmod_module_new_from_name(ctx, name, &mod) == 0) {
            int st = kmod_module_get_initstate(mod);
            kmod_module_unref(mod);
            if (st == KMOD_MODULE_LIVE || st == KMOD_MODULE_BUILTIN) {
                continue;
            }
        }
        struct kmod_list *list = NULL, *l;
        if (kmod_module_new_from_lookup(ctx, name, &list) < 0 || !list) {
            struct utsname u;
            g_warning("lio: kernel module %s is missing for kernel %s "
                      "(CONFIG_VHOST_SCSI/CONFIG_TCM_* enabled? modules installed?)", name,
                      uname(&u) == 0 ? u.release : "?");
            ret = -ENOENT;
            break;
        }
        kmod_list_foreach(l, list) {
            mod = kmod_module_get_module(l);
            int r = kmod_module_probe_insert_module(mod, 0, NULL, NULL, NULL, NULL);
            if (r < 0 && r != -EEXIST) {
                g_warning("lio: loading kernel module %s failed: %s", name, g_strerror(-r));
                ret = r;
            }
            kmod_module_unref(mod);
        }
        kmod_module_unref_list(list);
    }
    kmod_unref(ctx);
    return ret;
}

static bool on_configfs(const char *p)
{
    struct statfs sf;
    return statfs(p, &sf) == 0 && (unsigned long)sf.f_type == LIO_CONFIGFS_FS_MAGIC;
}

static int setup_kernel(const char *root)
{
    int ret = load_modules();
    if (ret < 0) {
        return ret;
    }
    if (on_configfs(root)) {
        return 0;
    }
    if (mount("configfs", root, "configfs", 0, NULL) < 0) {
        ret = -errno;
        g_warning("lio: mounting configfs on %s failed: %s", root, g_strerror(-ret));
        return ret;
    }
    g_info("lio: mounted configfs on %s", root);
    return 0;
}

int lio_open(const struct lio_options *opts, struct lio **out)
{
    const char *root = opts && opts->configfs ? opts->configfs : LIO_CONFIGFS_DEFAULT;
    int ret;

    if (opts && opts->setup_kernel && !strcmp(root, LIO_CONFIGFS_DEFAULT)) {
        ret = setup_kernel(root);
        if (ret < 0) {
            return ret;
        }
    }
    if (!lio_is_dir(root)) {
        g_warning("lio: configfs root %s is not a directory", root);
        return -ENOENT;
    }
    struct lio *lio = g_new0(struct lio, 1);
    lio->root = g_strdup(root);
    lio->configfs = on_configfs(root);

    g_autofree char *target = lio_path(lio, "target", NULL);
    g_autofree char *core = lio_path(lio, "target", "core", NULL);
    g_autofree char *vhost = lio_path(lio, "target", "vhost", NULL);
    if (lio->configfs && !lio_is_dir(core)) {
        g_warning("lio: %s has no target/core: kernel module target_core_mod not loaded", root);
        lio_close(lio);
        return -ENOENT;
    }
    if (!lio->configfs) {
        lio_make_dir(target);
        lio_make_dir(core);
    }
    /* mkdir of target/vhost is how the vhost fabric gets registered. */
    ret = lio_make_dir(vhost);
    if (ret < 0) {
        g_warning("lio: cannot create %s (%s): kernel module vhost_scsi not loaded?",
                  vhost, g_strerror(-ret));
        lio_close(lio);
        return ret;
    }
    *out = lio;
    return 0;
}

void lio_close(struct lio *lio)
{
    if (lio) {
        g_free(lio->root);
        g_free(lio);
    }
}

bool lio_is_configfs(const struct lio *lio)
{
    return lio->configfs;
}
