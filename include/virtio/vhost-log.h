/*
 * Dirty-page logging for live migration (QEMU docs/interop/vhost-user.rst,
 * "Migration"): while the front-end migrates a guest, every byte the
 * back-end writes into guest memory must mark its 4 KiB page in a bitmap
 * shared with the front-end, which sends those pages again.  A page
 * written and not marked reaches the destination stale: silent guest
 * corruption, which is why the kernel's vhost-scsi had to be fixed in
 * 2025.  The virtqueue layer calls these functions for everything it
 * returns to the driver (vq_fill), so no writer can bypass them.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_VHOST_LOG_H
#define VHOST_SCSI_VHOST_LOG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "guest-mem.h"

/* One bit per page of guest physical address: bit (p % 8) of byte p / 8. */
#define VHOST_LOG_PAGE 4096u

struct vhost_log {
    uint8_t *bits;       /* the shared bitmap (not owned here) */
    uint64_t size;       /* its bytes: pages [0, 8 * size) have a bit */
    /*
     * Pages written outside the bitmap or outside guest memory, which no
     * bit can name (atomic).  The server refuses to run queues on a log
     * that does not cover the memory table, so this stays 0; a test or a
     * diagnostic that sees it move has found a bug.
     */
    uint64_t missed;
};

/* Bitmap bytes that give every page of mem a bit (0 for an empty table). */
uint64_t vhost_log_size_for(const struct guest_mem *mem);

/* True if log has a bit for every page of every region of mem. */
bool vhost_log_covers(const struct vhost_log *log, const struct guest_mem *mem);

/*
 * Marks the pages of [gpa, gpa + len): atomic OR with release order, so
 * the front-end, which reads and clears the bitmap concurrently, sees the
 * bit only after the data it stands for.  A range that wraps past 2^64
 * ends at the last page; pages past the bitmap count in missed.
 */
void vhost_log_mark_gpa(struct vhost_log *log, uint64_t gpa, uint64_t len);

/* The same for host bytes inside mem's regions (a range may span regions). */
void vhost_log_mark_host(struct vhost_log *log, const struct guest_mem *mem,
                         const void *host, uint64_t len);

/* Every byte of n iovecs pointing into mem. */
void vhost_log_mark_iov(struct vhost_log *log, const struct guest_mem *mem,
                        const struct iovec *iov, unsigned n);

#endif
