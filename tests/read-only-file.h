/*
 * A regular file this process may open only for reading, for the tests of
 * what a user reads when a file LUN is opened without ,ro: mode 0444, or
 * for root, who may write any mode, a sysfs attribute without a store
 * (the kernel refuses write access with EACCES to root too).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_READ_ONLY_FILE_H
#define VHOST_SCSI_READ_ONLY_FILE_H

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

/* mine (made 0444) or the sysfs file, g_malloc'd; NULL if there is none. */
static inline char *read_only_file(const char *mine)
{
    const char *sysfs = "/sys/kernel/uevent_seqnum";
    int fd;

    if (geteuid() != 0) {
        g_assert_cmpint(chmod(mine, 0444), ==, 0);
        return g_strdup(mine);
    }
    fd = open(sysfs, O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        close(fd);
        return NULL;
    }
    return errno == EACCES ? g_strdup(sysfs) : NULL;
}

#endif
