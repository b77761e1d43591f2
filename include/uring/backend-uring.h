/*
 * Files and block devices as LUNs, through the I/O thread's io_uring
 * (hw/block/backend-uring.c).  The only layer that links liburing besides
 * the event loop itself.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_BACKEND_URING_H
#define VHOST_SCSI_BACKEND_URING_H

#include "backend.h"

/*
 * Returns 0 and sets *out, or -errno with *err (VS_ERROR) saying why in
 * the operator's words, without the path (the caller names what it
 * opened).  Logs no error.
 */
struct backend_file_opts {
    const char *path;
    bool read_only;
    bool direct;             /* O_DIRECT */
    uint32_t block_size;     /* 0: 512 (or the device's logical block size) */
    uint64_t size;           /* 0: the file's or device's size */
    uint32_t phys_block_size; /* 0: a block device's own (BLKPBSZGET), else one block */
};
int backend_file_open(const struct backend_file_opts *o, struct lun_backend **out,
                      GError **err);

#endif
