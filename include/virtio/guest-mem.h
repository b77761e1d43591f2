/*
 * Guest memory as a vhost back-end sees it: a table of regions that the
 * front-end shared with us (memfd/hugetlbfs fds, mmapped here).  Every guest
 * address that comes from a ring or a descriptor goes through this table;
 * nothing else in the back-end dereferences a guest address.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_GUEST_MEM_H
#define VHOST_SCSI_GUEST_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "log-limit.h"

#define GUEST_MEM_MAX_REGIONS 32

struct guest_mem_region {
    uint64_t gpa;          /* guest physical address of the first byte */
    uint64_t size;         /* bytes */
    uint64_t uva;          /* the front-end's virtual address (vring addrs use it) */
    uint64_t mmap_offset;  /* offset of the region inside the fd */
    void *host;            /* our pointer to the first byte of the region */
    void *mmap_base;       /* what to munmap; NULL if not owned (tests) */
    size_t mmap_size;
    int fd;                /* -1 if none/closed */
    int guard;             /* guest-mem-guard handle; 0: unguarded */
};

struct guest_mem {
    unsigned nregions;
    /*
     * The connection the regions came from: if one loses its backing file
     * under us, the SIGBUS guard shuts this socket down (-1: none).
     */
    int owner_fd;
    /* Lines about bad regions go through the connection's limit (NULL: none). */
    struct log_limit *log_limit;
    struct guest_mem_region r[GUEST_MEM_MAX_REGIONS];
};

void guest_mem_init(struct guest_mem *m);

/*
 * Validates and adds a region.  Takes ownership of r->fd and of the mapping
 * when r->mmap_base is set (also on failure).  -EINVAL for a zero size, a
 * size/address that wraps, or overlap (in GPA or UVA) with an existing region;
 * -ENOSPC when the table is full.
 */
int guest_mem_add(struct guest_mem *m, struct guest_mem_region *r);

/*
 * mmaps fd at offset for size bytes and adds it; -errno on failure.  A
 * file that could still shrink (anything but a memfd sealed against it)
 * is put under the SIGBUS guard with m->owner_fd as its owner.
 */
int guest_mem_map_fd(struct guest_mem *m, int fd, uint64_t gpa, uint64_t size,
                     uint64_t uva, uint64_t mmap_offset);

/* Removes (and unmaps) the region with exactly this gpa and size. -ENOENT. */
int guest_mem_remove(struct guest_mem *m, uint64_t gpa, uint64_t size);

/* Unmaps and closes everything. */
void guest_mem_clear(struct guest_mem *m);

/*
 * Returns a host pointer for [gpa, gpa+len) if it lies entirely inside one
 * region, else NULL.  len == 0 is treated as 1 byte for the lookup.
 */
void *guest_mem_gpa_ptr(const struct guest_mem *m, uint64_t gpa, uint64_t len);

/* Same, for a front-end virtual address (used for SET_VRING_ADDR). */
void *guest_mem_uva_ptr(const struct guest_mem *m, uint64_t uva, uint64_t len);

/*
 * The reverse: stores the guest physical address of host pointer host and
 * returns how many bytes from there on belong to the same region (0 if
 * host is not in guest memory).  Dirty logging uses it to name, in guest
 * terms, the bytes it wrote.
 */
uint64_t guest_mem_host_gpa(const struct guest_mem *m, const void *host, uint64_t *gpa);

/*
 * Maps [gpa, gpa+len) into at most max iovecs, splitting at region
 * boundaries (guest RAM is often two regions around the PCI hole).
 * Returns the number of iovecs used, -EFAULT if any byte is outside guest
 * memory or the range wraps, -ENOBUFS if more than max iovecs are needed.
 */
int guest_mem_gpa_iov(const struct guest_mem *m, uint64_t gpa, uint64_t len,
                      struct iovec *iov, unsigned max);

#endif
