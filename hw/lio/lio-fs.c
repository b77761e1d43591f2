/*
 * The real filesystem and kernel operations under a LIO configuration
 * (lio_fs_configfs, see include/lio/lio-fs.h): system calls on configfs and
 * on the backing files, libkmod for the modules, mount(2) for configfs, and
 * a /proc scan for holders of /dev/vhost-scsi.  Each operation is one thin
 * step; what to do, in which order and how to undo it is decided above the
 * table (lio-configfs.c, lio-backstore.c), so the tests' fake runs the very
 * same logic.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <linux/fs.h>
#include <libkmod.h>

#include "lio-fs.h"

/* Not in linux/magic.h: fs/configfs/configfs_internal.h. */
#define LIO_CONFIGFS_FS_MAGIC 0x62656570

static int err_or_zero(int ret)
{
    return ret < 0 ? -errno : 0;
}

static int fs_mkdir(void *opaque, const char *path)
{
    return err_or_zero(mkdir(path, 0755));
}

static int fs_rmdir(void *opaque, const char *path)
{
    return err_or_zero(rmdir(path));
}

/* configfs provides every attribute file: never created here. */
static int fs_write_attr(void *opaque, const char *path, const char *value)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    size_t len = strlen(value);
    ssize_t n = write(fd, value, len);
    int e = n < 0 ? errno : EIO;
    close(fd);
    return n == (ssize_t)len ? 0 : -e;
}

static int fs_read_attr(void *opaque, const char *path, size_t max, char **value)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    char *buf = g_malloc(max + 1);
    size_t got = 0;
    while (got < max) {
        ssize_t n = read(fd, buf + got, max - got);
        if (n < 0) {
            int e = errno;
            close(fd);
            g_free(buf);
            return -e;
        }
        if (n == 0) {
            break;
        }
        got += n;
    }
    close(fd);
    buf[got] = 0;
    *value = buf;
    return 0;
}

static int fs_symlink(void *opaque, const char *target, const char *path)
{
    return err_or_zero(symlink(target, path));
}

static int fs_readlink(void *opaque, const char *path, char **target)
{
    g_autoptr(GError) err = NULL;
    *target = g_file_read_link(path, &err);
    return *target ? 0 : -EINVAL;
}

static int fs_unlink(void *opaque, const char *path)
{
    return err_or_zero(unlink(path));
}

static int fs_stat(void *opaque, const char *path, bool follow, struct stat *st)
{
    return err_or_zero(follow ? stat(path, st) : lstat(path, st));
}

static int fs_readdir(void *opaque, const char *dir, GPtrArray **names)
{
    DIR *d = opendir(dir);
    if (!d) {
        return -errno;
    }
    GPtrArray *a = g_ptr_array_new_with_free_func(g_free);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            g_ptr_array_add(a, g_strdup(de->d_name));
        }
    }
    closedir(d);
    *names = a;
    return 0;
}

static int fs_create_file(void *opaque, const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        return -errno;
    }
    close(fd);
    return 0;
}

static int fs_truncate(void *opaque, const char *path, uint64_t size)
{
    return err_or_zero(truncate(path, size));
}

static int fs_blockdev_size(void *opaque, const char *path, uint64_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    int ret = err_or_zero(ioctl(fd, BLKGETSIZE64, size));
    close(fd);
    return ret;
}

static int fs_load_module(void *opaque, const char *name)
{
    struct kmod_ctx *ctx = kmod_new(NULL, NULL);
    if (!ctx) {
        return -ENOMEM;
    }
    struct kmod_module *mod = NULL;
    int ret = 0;
    if (kmod_module_new_from_name(ctx, name, &mod) == 0) {
        int st = kmod_module_get_initstate(mod);
        kmod_module_unref(mod);
        if (st == KMOD_MODULE_LIVE || st == KMOD_MODULE_BUILTIN) {
            kmod_unref(ctx);
            return 0;
        }
    }
    struct kmod_list *list = NULL, *l;
    if (kmod_module_new_from_lookup(ctx, name, &list) < 0 || !list) {
        kmod_unref(ctx);
        return -ENOENT;
    }
    kmod_list_foreach(l, list) {
        mod = kmod_module_get_module(l);
        int r = kmod_module_probe_insert_module(mod, 0, NULL, NULL, NULL, NULL);
        if (r < 0 && r != -EEXIST && ret == 0) {
            ret = r;
        }
        kmod_module_unref(mod);
    }
    kmod_module_unref_list(list);
    kmod_unref(ctx);
    return ret;
}

static bool fs_is_configfs(void *opaque, const char *root)
{
    struct statfs sf;
    return statfs(root, &sf) == 0 && (unsigned long)sf.f_type == LIO_CONFIGFS_FS_MAGIC;
}

static int fs_mount_configfs(void *opaque, const char *root)
{
    return err_or_zero(mount("configfs", root, "configfs", 0, NULL));
}

static int fs_kernel_release(void *opaque, char *buf, size_t len)
{
    struct utsname u;
    if (uname(&u) < 0) {
        return -errno;
    }
    g_strlcpy(buf, u.release, len);
    return 0;
}

/*
 * Any process holding /dev/vhost-scsi open may have SET_ENDPOINT on a
 * WWPN; the kernel does not say which, so callers treat any holder as a
 * user of theirs.
 */
static int fs_vhost_holder(void *opaque, char **comm)
{
    struct stat vs;
    if (stat("/dev/vhost-scsi", &vs) < 0 || !S_ISCHR(vs.st_mode)) {
        return 0;
    }
    int found = 0;
    DIR *proc = opendir("/proc");
    struct dirent *pe;
    while (proc && !found && (pe = readdir(proc))) {
        if (!isdigit((unsigned char)pe->d_name[0]) || atoi(pe->d_name) == getpid()) {
            continue;
        }
        g_autofree char *fdd = g_strdup_printf("/proc/%s/fd", pe->d_name);
        DIR *fds = opendir(fdd);
        struct dirent *fe;
        while (fds && !found && (fe = readdir(fds))) {
            g_autofree char *f = g_build_filename(fdd, fe->d_name, NULL);
            struct stat st;
            if (fe->d_name[0] != '.' && stat(f, &st) == 0 && S_ISCHR(st.st_mode) &&
                st.st_rdev == vs.st_rdev) {
                found = atoi(pe->d_name);
            }
        }
        if (fds) {
            closedir(fds);
        }
    }
    if (proc) {
        closedir(proc);
    }
    if (found) {
        g_autofree char *cp = g_strdup_printf("/proc/%d/comm", found);
        char *c = NULL;
        if (fs_read_attr(opaque, cp, 64, &c) == 0) {
            *comm = g_strchomp(c);
        }
    }
    return found;
}

const struct lio_fs_ops lio_fs_configfs = {
    .mkdir = fs_mkdir,
    .rmdir = fs_rmdir,
    .write_attr = fs_write_attr,
    .read_attr = fs_read_attr,
    .symlink = fs_symlink,
    .readlink = fs_readlink,
    .unlink = fs_unlink,
    .stat = fs_stat,
    .readdir = fs_readdir,
    .create_file = fs_create_file,
    .truncate = fs_truncate,
    .blockdev_size = fs_blockdev_size,
    .load_module = fs_load_module,
    .is_configfs = fs_is_configfs,
    .mount_configfs = fs_mount_configfs,
    .kernel_release = fs_kernel_release,
    .vhost_holder = fs_vhost_holder,
};
