/*
 * The unit tests' fake of the LIO filesystem and kernel operations (see
 * lio-fs-fake.h): the real operations (lio_fs_configfs) on a temporary
 * directory wherever a plain tree behaves as configfs does, the little of
 * configfs our code depends on where it does not, and error injection.  Which
 * directories mkdir made is remembered here, since that is what decides
 * whether configfs lets a group go.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "lio-fs-fake.h"

/* What a plain tree does as configfs would: the real operations. */
static const struct lio_fs_ops *const real = &lio_fs_configfs;

struct blockdev {
    uint64_t size;
    unsigned minor;
};

struct lio_fake {
    char *root;
    GHashTable *groups;         /* directories made by mkdir */
    GHashTable *blockdevs;      /* path -> struct blockdev */
    unsigned changes;
    unsigned fail_at;           /* 0: none; else the change number that fails */
    int fail_at_err;
    char *fail_glob;
    int fail_glob_err;
    char *failed;
    char *release;
    int holder;
    char *holder_comm;
    GString *modules;
    bool mounted;
};

/* Counts a change to path; nonzero (-errno) when it is to fail. */
static int change(struct lio_fake *f, const char *op, const char *path)
{
    int err = 0;

    f->changes++;
    if (f->fail_at && f->changes == f->fail_at) {
        err = f->fail_at_err;
        f->fail_at = 0;
    } else if (f->fail_glob && g_pattern_match_simple(f->fail_glob, path)) {
        err = f->fail_glob_err;
    }
    if (err) {
        g_free(f->failed);
        f->failed = g_strdup_printf("%s %s", op, path);
    }
    return -err;
}

static int err_or_zero(int ret)
{
    return ret < 0 ? -errno : 0;
}

/* The components of path below the root, or NULL when it is not below it. */
static char **below_root(const struct lio_fake *f, const char *path)
{
    size_t n = strlen(f->root);
    if (strncmp(path, f->root, n) || path[n] != '/') {
        return NULL;
    }
    return g_strsplit(path + n + 1, "/", -1);
}

/* The default groups configfs gives a new TPG (lun/) and backstore (attrib/). */
static void make_default_groups(struct lio_fake *f, const char *path)
{
    g_auto(GStrv) c = below_root(f, path);
    if (!c || g_strv_length(c) != 4 || strcmp(c[0], "target")) {
        return;
    }
    bool tpg = !strcmp(c[1], "vhost") && g_str_has_prefix(c[3], "tpgt_");
    bool so = !strcmp(c[1], "core");
    const char *const *groups = tpg ? (const char *const[]) { "lun", NULL } :
                                so ? (const char *const[]) { "attrib", "wwn", NULL } : NULL;
    for (guint i = 0; groups && groups[i]; i++) {
        g_autofree char *d = g_build_filename(path, groups[i], NULL);
        g_assert_cmpint(g_mkdir(d, 0755), ==, 0);
    }
}

static int fake_mkdir(void *opaque, const char *path)
{
    struct lio_fake *f = opaque;
    int ret = change(f, "mkdir", path);
    if (ret == 0 && (ret = real->mkdir(NULL, path)) == 0) {
        g_hash_table_add(f->groups, g_strdup(path));
        make_default_groups(f, path);
    }
    return ret;
}

/* What configfs would refuse to take away with dir: a made group or a link. */
static bool holds_items(struct lio_fake *f, const char *dir)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *n;
    while (d && (n = g_dir_read_name(d))) {
        g_autofree char *c = g_build_filename(dir, n, NULL);
        struct stat st;
        if (lstat(c, &st) < 0) {
            continue;
        }
        if (S_ISLNK(st.st_mode) || (S_ISDIR(st.st_mode) &&
                                    (g_hash_table_contains(f->groups, c) || holds_items(f, c)))) {
            return true;
        }
    }
    return false;
}

static int remove_tree(const char *dir)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *n;
    while (d && (n = g_dir_read_name(d))) {
        g_autofree char *c = g_build_filename(dir, n, NULL);
        struct stat st;
        if (lstat(c, &st) == 0 && S_ISDIR(st.st_mode)) {
            remove_tree(c);
        } else {
            g_unlink(c);
        }
    }
    return err_or_zero(g_rmdir(dir));
}

static int fake_rmdir(void *opaque, const char *path)
{
    struct lio_fake *f = opaque;
    struct stat st;
    int ret = change(f, "rmdir", path);
    if (ret < 0) {
        return ret;
    }
    if (lstat(path, &st) < 0) {
        return -errno;
    }
    if (!S_ISDIR(st.st_mode)) {
        return -ENOTDIR;
    }
    if (holds_items(f, path)) {
        return -ENOTEMPTY;
    }
    ret = remove_tree(path);
    if (ret == 0) {
        g_hash_table_remove(f->groups, path);
    }
    return ret;
}

static int write_file(const char *path, const char *value)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        return -errno;
    }
    ssize_t n = write(fd, value, strlen(value));
    int ret = n == (ssize_t)strlen(value) ? 0 : -EIO;
    close(fd);
    return ret;
}

/* The value of key= in a control string, "" when absent. */
static char *control_value(const char *control, const char *key)
{
    g_auto(GStrv) opts = g_strsplit(control, ",", -1);
    size_t n = strlen(key);
    for (guint i = 0; opts[i]; i++) {
        if (!strncmp(opts[i], key, n) && opts[i][n] == '=') {
            return g_strdup(opts[i] + n + 1);
        }
    }
    return g_strdup("");
}

/*
 * Enabling a backstore: its info, as target_core_{file,iblock,rd}.c would
 * show it, from what was written to its control (list reads it back).
 */
static void enable_backstore(const char *dir)
{
    g_autofree char *cp = g_build_filename(dir, "control", NULL);
    g_autofree char *control = NULL;
    g_autofree char *parent = g_path_get_dirname(dir);
    g_autofree char *kind = g_path_get_basename(parent);
    g_autoptr(GString) info = g_string_new("Status: ACTIVATED  Max Queue Depth: 128  "
                                           "SectorSize: 512  HwMaxSectors: 16384\n        ");
    if (!g_file_get_contents(cp, &control, NULL, NULL)) {
        return;
    }
#define V(key) g_autofree char *key = control_value(control, #key)
    if (g_str_has_prefix(kind, "fileio_")) {
        V(fd_dev_name);
        V(fd_dev_size);
        V(fd_buffered_io);
        V(fd_async_io);
        g_string_append_printf(info, "TCM FILEIO ID: 0        File: %s  Size: %s  Mode: %s "
                               "Async: %d\n", fd_dev_name, fd_dev_size,
                               !strcmp(fd_buffered_io, "1") ? "Buffered-WCE" : "O_DSYNC",
                               !strcmp(fd_async_io, "1"));
    } else if (g_str_has_prefix(kind, "iblock_")) {
        V(udev_path);
        V(readonly);
        g_string_append_printf(info, "iBlock device: fake  UDEV PATH: %s  readonly: %d\n"
                               "        Major: 259 Minor: 0  CLAIMED: IBLOCK\n", udev_path,
                               !strcmp(readonly, "1"));
    } else if (g_str_has_prefix(kind, "rd_mcp_")) {
        V(rd_pages);
        V(rd_nullio);
        g_string_append_printf(info, "TCM RamDisk ID: 0  RamDisk Makeup: rd_mcp\n        "
                               "PAGES/PAGE_SIZE: %s*%ld  SG_table_count: 1  nullio: %d\n",
                               rd_pages, sysconf(_SC_PAGESIZE), !strcmp(rd_nullio, "1"));
    }
#undef V
    g_autofree char *ip = g_build_filename(dir, "info", NULL);
    g_assert_cmpint(write_file(ip, info->str), ==, 0);
}

/* No kernel provides the attribute files: they appear when written. */
static int fake_write_attr(void *opaque, const char *path, const char *value)
{
    struct lio_fake *f = opaque;
    int ret = change(f, "write", path);
    if (ret == 0 && g_str_has_suffix(path, "/wwn/vpd_unit_serial")) {
        /* Read back as the kernel shows it. */
        g_autofree char *shown = g_strdup_printf("T10 VPD Unit Serial Number: %s\n", value);
        ret = write_file(path, shown);
    } else if (ret == 0) {
        ret = write_file(path, value);
    }
    g_auto(GStrv) c = below_root(f, path);
    if (ret == 0 && c && g_strv_length(c) == 5 && !strcmp(c[1], "core") &&
        !strcmp(c[4], "enable") && !strcmp(value, "1")) {
        g_autofree char *dir = g_path_get_dirname(path);
        enable_backstore(dir);
    }
    return ret;
}

/* Reading works on a plain tree as on configfs. */
static int fake_read_attr(void *opaque, const char *path, size_t max, char **value)
{
    return real->read_attr(NULL, path, max, value);
}

static int fake_readlink(void *opaque, const char *path, char **target)
{
    return real->readlink(NULL, path, target);
}

static int fake_readdir(void *opaque, const char *dir, GPtrArray **names)
{
    return real->readdir(NULL, dir, names);
}

static int fake_symlink(void *opaque, const char *target, const char *path)
{
    int ret = change(opaque, "symlink", path);
    return ret < 0 ? ret : real->symlink(NULL, target, path);
}

static int fake_unlink(void *opaque, const char *path)
{
    int ret = change(opaque, "unlink", path);
    return ret < 0 ? ret : real->unlink(NULL, path);
}

static int fake_stat(void *opaque, const char *path, bool follow, struct stat *st)
{
    struct lio_fake *f = opaque;
    struct blockdev *b = g_hash_table_lookup(f->blockdevs, path);
    if (b) {
        memset(st, 0, sizeof(*st));
        st->st_mode = S_IFBLK | 0660;
        st->st_rdev = makedev(259, b->minor);
        st->st_ino = 1 + b->minor;
        return 0;
    }
    return real->stat(NULL, path, follow, st);
}

static int fake_create_file(void *opaque, const char *path)
{
    int ret = change(opaque, "create", path);
    return ret < 0 ? ret : real->create_file(NULL, path);
}

static int fake_truncate(void *opaque, const char *path, uint64_t size)
{
    int ret = change(opaque, "truncate", path);
    return ret < 0 ? ret : real->truncate(NULL, path, size);
}

static int fake_blockdev_size(void *opaque, const char *path, uint64_t *size)
{
    struct lio_fake *f = opaque;
    struct blockdev *b = g_hash_table_lookup(f->blockdevs, path);
    if (!b) {
        return -ENOTBLK;
    }
    *size = b->size;
    return 0;
}

static int fake_load_module(void *opaque, const char *name)
{
    struct lio_fake *f = opaque;
    int ret = change(f, "modprobe", name);
    if (ret == 0) {
        g_string_append_printf(f->modules, "%s%s", f->modules->len ? " " : "", name);
    }
    return ret;
}

static bool fake_is_configfs(void *opaque, const char *root)
{
    return ((struct lio_fake *)opaque)->mounted;
}

static int fake_mount_configfs(void *opaque, const char *root)
{
    struct lio_fake *f = opaque;
    int ret = change(f, "mount", root);
    f->mounted = ret == 0;
    return ret;
}

static int fake_kernel_release(void *opaque, char *buf, size_t len)
{
    g_strlcpy(buf, ((struct lio_fake *)opaque)->release, len);
    return 0;
}

static int fake_vhost_holder(void *opaque, char **comm)
{
    struct lio_fake *f = opaque;
    if (f->holder) {
        *comm = g_strdup(f->holder_comm);
    }
    return f->holder;
}

const struct lio_fs_ops lio_fake_ops = {
    .mkdir = fake_mkdir,
    .rmdir = fake_rmdir,
    .write_attr = fake_write_attr,
    .read_attr = fake_read_attr,
    .symlink = fake_symlink,
    .readlink = fake_readlink,
    .unlink = fake_unlink,
    .stat = fake_stat,
    .readdir = fake_readdir,
    .create_file = fake_create_file,
    .truncate = fake_truncate,
    .blockdev_size = fake_blockdev_size,
    .load_module = fake_load_module,
    .is_configfs = fake_is_configfs,
    .mount_configfs = fake_mount_configfs,
    .kernel_release = fake_kernel_release,
    .vhost_holder = fake_vhost_holder,
};

struct lio_fake *lio_fake_new(const char *root)
{
    struct lio_fake *f = g_new0(struct lio_fake, 1);
    f->root = g_strdup(root);
    f->groups = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    f->blockdevs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    f->release = g_strdup("6.8.0");
    f->modules = g_string_new(NULL);
    g_autofree char *core = g_build_filename(root, "target", "core", NULL);
    g_assert_cmpint(g_mkdir_with_parents(core, 0755), ==, 0);
    return f;
}

void lio_fake_free(struct lio_fake *f)
{
    g_hash_table_unref(f->groups);
    g_hash_table_unref(f->blockdevs);
    g_string_free(f->modules, TRUE);
    g_free(f->root);
    g_free(f->fail_glob);
    g_free(f->failed);
    g_free(f->release);
    g_free(f->holder_comm);
    g_free(f);
}

void lio_fake_fail_at(struct lio_fake *f, unsigned n, int err)
{
    f->fail_at = n ? f->changes + n : 0;
    f->fail_at_err = err;
}

void lio_fake_fail_path(struct lio_fake *f, const char *glob, int err)
{
    g_free(f->fail_glob);
    f->fail_glob = g_strdup(glob);
    f->fail_glob_err = err;
}

unsigned lio_fake_changes(const struct lio_fake *f)
{
    return f->changes;
}

const char *lio_fake_failed(const struct lio_fake *f)
{
    return f->failed;
}

void lio_fake_add_blockdev(struct lio_fake *f, const char *path, uint64_t size)
{
    struct blockdev *b = g_new(struct blockdev, 1);
    b->size = size;
    b->minor = g_hash_table_size(f->blockdevs);
    g_hash_table_insert(f->blockdevs, g_strdup(path), b);
}

void lio_fake_set_release(struct lio_fake *f, const char *release)
{
    g_free(f->release);
    f->release = g_strdup(release);
}

void lio_fake_set_holder(struct lio_fake *f, int pid, const char *comm)
{
    f->holder = pid;
    g_free(f->holder_comm);
    f->holder_comm = g_strdup(comm);
}

const char *lio_fake_modules(const struct lio_fake *f)
{
    return f->modules->str;
}

bool lio_fake_mounted(const struct lio_fake *f)
{
    return f->mounted;
}

void lio_fake_make_groups(struct lio_fake *f, const char *path)
{
    g_auto(GStrv) c = below_root(f, path);
    g_assert_nonnull(c);
    g_autoptr(GString) p = g_string_new(f->root);
    for (guint i = 0; c[i]; i++) {
        g_string_append_printf(p, "/%s", c[i]);
        if (!g_file_test(p->str, G_FILE_TEST_IS_DIR)) {
            g_assert_cmpint(g_mkdir(p->str, 0755), ==, 0);
            g_hash_table_add(f->groups, g_strdup(p->str));
        }
    }
}
