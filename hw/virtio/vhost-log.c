/*
 * The dirty log's bit arithmetic: from guest ranges (or host bytes inside
 * the memory table) to bits of the shared bitmap.  Everything here runs on
 * the I/O threads, only while the front-end has asked for logging; it
 * never writes past the bitmap, whatever address it is given.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "vhost-log.h"

uint64_t vhost_log_size_for(const struct guest_mem *mem)
{
    uint64_t pages = 0;

    for (unsigned i = 0; i < mem->nregions; i++) {
        /* guest_mem_add refused regions that wrap: gpa + size - 1 fits. */
        uint64_t last = (mem->r[i].gpa + (mem->r[i].size - 1)) / VHOST_LOG_PAGE;

        if (last + 1 > pages) {
            pages = last + 1;
        }
    }
    return pages / 8 + (pages % 8 != 0);
}

bool vhost_log_covers(const struct vhost_log *log, const struct guest_mem *mem)
{
    return log->bits && log->size >= vhost_log_size_for(mem);
}

void vhost_log_mark_gpa(struct vhost_log *log, uint64_t gpa, uint64_t len)
{
    uint64_t first, last, end;

    if (len == 0) {
        return;
    }
    first = gpa / VHOST_LOG_PAGE;
    end = len - 1 > UINT64_MAX - gpa ? UINT64_MAX : gpa + (len - 1);
    last = end / VHOST_LOG_PAGE;
    for (uint64_t p = first; p <= last; p++) {
        if (p / 8 >= log->size) {
            __atomic_fetch_add(&log->missed, last - p + 1, __ATOMIC_RELAXED);
            return;
        }
        __atomic_fetch_or(&log->bits[p / 8], (uint8_t)(1u << (p % 8)), __ATOMIC_RELEASE);
        if (p == UINT64_MAX) {
            break;
        }
    }
}

void vhost_log_mark_host(struct vhost_log *log, const struct guest_mem *mem,
                         const void *host, uint64_t len)
{
    const uint8_t *p = host;

    while (len) {
        uint64_t gpa, n = guest_mem_host_gpa(mem, p, &gpa);

        if (n == 0) {
            /* Not guest memory: nothing a migration copies, but say so. */
            __atomic_fetch_add(&log->missed, (len + VHOST_LOG_PAGE - 1) / VHOST_LOG_PAGE,
                               __ATOMIC_RELAXED);
            return;
        }
        if (n > len) {
            n = len;
        }
        vhost_log_mark_gpa(log, gpa, n);
        p += n;
        len -= n;
    }
}

void vhost_log_mark_iov(struct vhost_log *log, const struct guest_mem *mem,
                        const struct iovec *iov, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        vhost_log_mark_host(log, mem, iov[i].iov_base, iov[i].iov_len);
    }
}
