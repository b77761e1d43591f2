/*
 * What lio-configfs.c (the configfs tree) and lio-config.c (its saved
 * form) share beyond include/lio/lio-configfs.h.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_LIO_INT_H
#define VHOST_SCSI_LIO_INT_H

#include <stdbool.h>
#include <glib.h>

#include "lio-configfs.h"

#define LIO_ATTR_MAX 4096

struct lio {
    char *root;
    bool configfs;      /* the real configfs, not a test directory */
};

/* lio-fs.c: paths below the root, attributes and directories. */
char *lio_path(const struct lio *lio, const char *first, ...) G_GNUC_NULL_TERMINATED;
int lio_write_attr(const struct lio *lio, const char *path, const char *val);
char *lio_read_attr(const char *path);
bool lio_is_dir(const char *p);
int lio_make_dir(const char *p);
int lio_remove_dir(const struct lio *lio, const char *p);
/* Removes a plain directory tree (not configfs: its default groups go with rmdir). */
int lio_remove_tree(const char *p);
/* The numbers N of entries PREFIX<N> of directory d, up to max, sorted. */
GArray *lio_numbered_entries(const char *d, const char *prefix, unsigned max);

/* A backing file path the kernel's option parser cannot misread. */
bool lio_backing_path_ok(const char *path);
/* An empty target record, as lio_list returns them. */
struct lio_target *lio_target_new(void);

#endif
