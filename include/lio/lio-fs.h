/*
 * Every filesystem and kernel operation a LIO configuration does, as a
 * table of operations (like a backend's): the configfs tree (directories,
 * attributes, LUN symlinks), the backing files and block devices behind
 * backstores, and the kernel side (modules, the configfs mount, the running
 * kernel's release, who holds /dev/vhost-scsi).  lio_fs_configfs is the
 * real one; the unit tests give lio_open() a fake that keeps the tree in a
 * temporary directory and can make any step fail, which is how rollback is
 * specified.  The code above the table has no test-only branches.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_LIO_FS_H
#define VHOST_SCSI_LIO_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <glib.h>

/* Paths are absolute; results are 0 or -errno unless said otherwise. */
struct lio_fs_ops {
    /* configfs: a group is made by mkdir and removed by rmdir alone. */
    int (*mkdir)(void *opaque, const char *path);
    int (*rmdir)(void *opaque, const char *path);
    /* An attribute takes its whole value in one write. */
    int (*write_attr)(void *opaque, const char *path, const char *value);
    /* Up to max bytes of an attribute, NUL-terminated, into *value (g_free). */
    int (*read_attr)(void *opaque, const char *path, size_t max, char **value);
    int (*symlink)(void *opaque, const char *target, const char *path);
    int (*readlink)(void *opaque, const char *path, char **target);
    int (*unlink)(void *opaque, const char *path);
    /* stat(2), or lstat(2) when follow is false. */
    int (*stat)(void *opaque, const char *path, bool follow, struct stat *st);
    /* The names in dir without "." and "..", as a new GPtrArray of char *. */
    int (*readdir)(void *opaque, const char *dir, GPtrArray **names);

    /* Backing files: create one (-EEXIST if it exists), grow it. */
    int (*create_file)(void *opaque, const char *path);
    int (*truncate)(void *opaque, const char *path, uint64_t size);
    int (*blockdev_size)(void *opaque, const char *path, uint64_t *size);

    /* The kernel. */
    int (*load_module)(void *opaque, const char *name);
    bool (*is_configfs)(void *opaque, const char *root);
    int (*mount_configfs)(void *opaque, const char *root);
    /* uname's release into buf. */
    int (*kernel_release)(void *opaque, char *buf, size_t len);
    /* A process (not this one) with /dev/vhost-scsi open: its pid, or 0. */
    int (*vhost_holder)(void *opaque, char **comm);
};

/* configfs, libkmod and the host's files: what vhost-scsi-ctl uses. */
extern const struct lio_fs_ops lio_fs_configfs;

#endif
