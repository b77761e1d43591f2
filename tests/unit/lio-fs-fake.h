/*
 * A fake of the LIO filesystem and kernel operations (include/lio/lio-fs.h)
 * for the unit tests: the configfs tree is kept in a temporary directory and
 * behaves as configfs does where our code could tell (attribute files appear
 * when written, a TPG has its lun/ group and a backstore its attrib/ group
 * from the start, rmdir refuses a group that still holds a group made by
 * mkdir or a link, and removes it with its attributes otherwise).  Files can
 * be presented as block devices, the kernel release and a /dev/vhost-scsi
 * holder chosen, and any change (mkdir, rmdir, attribute write, symlink,
 * unlink, file creation or growth, module load, mount) made to fail: the Nth
 * from now, or every one on a path matching a glob.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_LIO_FS_FAKE_H
#define VHOST_SCSI_LIO_FS_FAKE_H

#include <stdint.h>
#include <glib.h>

#include "lio-fs.h"

struct lio_fake;

extern const struct lio_fs_ops lio_fake_ops;

/* A fake whose configfs is root (made, with target/core, as the module would). */
struct lio_fake *lio_fake_new(const char *root);
void lio_fake_free(struct lio_fake *f);

/* The nth change from now (1: the next one) fails with -err, once. */
void lio_fake_fail_at(struct lio_fake *f, unsigned n, int err);
/* Every change to a path matching glob fails with -err (NULL: none). */
void lio_fake_fail_path(struct lio_fake *f, const char *glob, int err);
/* Changes made (or refused) so far. */
unsigned lio_fake_changes(const struct lio_fake *f);
/* The change the last injected failure refused, e.g. "mkdir /…/lun_0". */
const char *lio_fake_failed(const struct lio_fake *f);

/* path (which need not exist) is a block device of size bytes. */
void lio_fake_add_blockdev(struct lio_fake *f, const char *path, uint64_t size);
void lio_fake_set_release(struct lio_fake *f, const char *release);
void lio_fake_set_holder(struct lio_fake *f, int pid, const char *comm);
/* The modules loaded, space-separated, and whether configfs got mounted. */
const char *lio_fake_modules(const struct lio_fake *f);
bool lio_fake_mounted(const struct lio_fake *f);

/* mkdir -p of groups under the root, as a user (or targetcli) would. */
void lio_fake_make_groups(struct lio_fake *f, const char *path);

#endif
