/*
 * Guest memory table: validates and maps the regions a vhost front-end
 * shares with us and translates guest physical (and front-end virtual)
 * addresses into host pointers.  Every translation is bounds-checked
 * without integer overflow, because the addresses come from the guest.
 * A range must lie inside one region unless the caller asks for an iovec
 * split (guest_mem_gpa_iov), since guest RAM is usually two regions around
 * the PCI hole and a buffer may straddle them.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "guest-mem.h"
#include "guest-mem-guard.h"

void guest_mem_init(struct guest_mem *m)
{
    memset(m, 0, sizeof(*m));
    m->owner_fd = -1;
}

static void region_release(struct guest_mem_region *r)
{
    guest_mem_guard_remove(r->guard);
    r->guard = 0;
    if (r->mmap_base) {
        munmap(r->mmap_base, r->mmap_size);
        r->mmap_base = NULL;
    }
    if (r->fd >= 0) {
        close(r->fd);
        r->fd = -1;
    }
}

/* True if [a, a+alen) and [b, b+blen) intersect; both are known not to wrap. */
static bool ranges_overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
    return a <= b + (blen - 1) && b <= a + (alen - 1);
}

/* size >= 1 is assumed; "wraps" means the last byte is past 2^64 - 1. */
static bool range_wraps(uint64_t start, uint64_t size)
{
    return size - 1 > UINT64_MAX - start;
}

int guest_mem_add(struct guest_mem *m, struct guest_mem_region *r)
{
    int ret = -EINVAL;

    if (r->size == 0) {
        log_limit_warning(m->log_limit, "guest memory: region at gpa 0x%" G_GINT64_MODIFIER
                          "x has zero size", r->gpa);
        goto fail;
    }
    if (!r->host || range_wraps(r->gpa, r->size) || range_wraps(r->uva, r->size) ||
        range_wraps((uintptr_t)r->host, r->size)) {
        log_limit_warning(m->log_limit, "guest memory: region gpa 0x%" G_GINT64_MODIFIER
                          "x size 0x%" G_GINT64_MODIFIER
                          "x wraps the address space or has no mapping", r->gpa, r->size);
        goto fail;
    }
    for (unsigned i = 0; i < m->nregions; i++) {
        const struct guest_mem_region *o = &m->r[i];

        if (ranges_overlap(r->gpa, r->size, o->gpa, o->size) ||
            ranges_overlap(r->uva, r->size, o->uva, o->size)) {
            log_limit_warning(m->log_limit, "guest memory: region gpa 0x%" G_GINT64_MODIFIER
                              "x size 0x%" G_GINT64_MODIFIER "x overlaps region gpa 0x%"
                              G_GINT64_MODIFIER "x size 0x%" G_GINT64_MODIFIER "x", r->gpa, r->size,
                              o->gpa, o->size);
            goto fail;
        }
    }
    if (m->nregions == GUEST_MEM_MAX_REGIONS) {
        log_limit_warning(m->log_limit, "guest memory: more than %d regions",
                          GUEST_MEM_MAX_REGIONS);
        ret = -ENOSPC;
        goto fail;
    }
    m->r[m->nregions++] = *r;
    return 0;

fail:
    region_release(r);
    return ret;
}

int guest_mem_map_fd(struct guest_mem *m, int fd, uint64_t gpa, uint64_t size,
                     uint64_t uva, uint64_t mmap_offset)
{
    struct guest_mem_region r = {
        .gpa = gpa, .size = size, .uva = uva, .mmap_offset = mmap_offset, .fd = fd,
    };
    void *base;
    int guard;

    /*
     * Mapping from offset 0 keeps hugetlbfs happy (its offsets must be
     * huge-page aligned, mmap_offset need not be); the unused head costs
     * address space only.
     */
    if (size == 0 || range_wraps(mmap_offset, size) || mmap_offset + size > SIZE_MAX) {
        log_limit_warning(m->log_limit, "guest memory: cannot map fd %d: size 0x%" G_GINT64_MODIFIER
                          "x offset 0x%" G_GINT64_MODIFIER "x", fd, size, mmap_offset);
        region_release(&r);
        return -EINVAL;
    }
    /*
     * Touching a mapping past the end of its file raises SIGBUS: refuse a
     * region the fd cannot back.  (A sealed memfd, QEMU's default, cannot
     * shrink later either; an unsealed file could, by a hostile front-end.)
     */
    {
        struct stat st;

        if (fstat(fd, &st) == 0 && (S_ISREG(st.st_mode)) &&
            (uint64_t)st.st_size < mmap_offset + size) {
            log_limit_warning(m->log_limit, "guest memory: fd %d holds 0x%" G_GINT64_MODIFIER
                              "x bytes, less than the region's offset 0x%" G_GINT64_MODIFIER
                              "x + size 0x%" G_GINT64_MODIFIER "x", fd, (uint64_t)st.st_size,
                              mmap_offset, size);
            region_release(&r);
            return -EINVAL;
        }
    }
    r.mmap_size = mmap_offset + size;
    base = mmap(NULL, r.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
                fd, 0);
    if (base == MAP_FAILED) {
        int err = errno;

        log_limit_warning(m->log_limit, "guest memory: mmap of fd %d (0x%zx bytes) for gpa 0x%"
                          G_GINT64_MODIFIER "x failed: %s", fd, r.mmap_size, gpa, g_strerror(err));
        region_release(&r);
        return -err;
    }
    r.mmap_base = base;
    r.host = (char *)base + mmap_offset;
    /* QEMU's memfds are sealed against shrinking: nothing to guard there. */
    guard = guest_mem_guard_fd_mapping(fd, base, r.mmap_size, m->owner_fd);
    if (guard < 0) {
        region_release(&r);
        return guard;
    }
    r.guard = guard;
    /* The mapping keeps the memory alive; holding the fd would only cost fds. */
    close(fd);
    r.fd = -1;
    return guest_mem_add(m, &r);
}

int guest_mem_remove(struct guest_mem *m, uint64_t gpa, uint64_t size)
{
    for (unsigned i = 0; i < m->nregions; i++) {
        if (m->r[i].gpa == gpa && m->r[i].size == size) {
            region_release(&m->r[i]);
            memmove(&m->r[i], &m->r[i + 1], (m->nregions - i - 1) * sizeof(m->r[0]));
            m->nregions--;
            return 0;
        }
    }
    return -ENOENT;
}

void guest_mem_clear(struct guest_mem *m)
{
    for (unsigned i = 0; i < m->nregions; i++) {
        region_release(&m->r[i]);
    }
    m->nregions = 0;
}

/* Stores addr's offset into [start, start+size) if it lies inside. */
static inline bool region_offset(uint64_t start, uint64_t size, uint64_t addr,
                                 uint64_t *off)
{
    if (addr < start || addr - start >= size) {
        return false;
    }
    *off = addr - start;
    return true;
}

void *guest_mem_gpa_ptr(const struct guest_mem *m, uint64_t gpa, uint64_t len)
{
    if (len == 0) {
        len = 1;
    }
    for (unsigned i = 0; i < m->nregions; i++) {
        const struct guest_mem_region *r = &m->r[i];
        uint64_t off;

        if (region_offset(r->gpa, r->size, gpa, &off)) {
            return len <= r->size - off ? (char *)r->host + off : NULL;
        }
    }
    return NULL;
}

uint64_t guest_mem_host_gpa(const struct guest_mem *m, const void *host, uint64_t *gpa)
{
    for (unsigned i = 0; i < m->nregions; i++) {
        const struct guest_mem_region *r = &m->r[i];
        uint64_t off;

        if (region_offset((uintptr_t)r->host, r->size, (uintptr_t)host, &off)) {
            *gpa = r->gpa + off;
            return r->size - off;
        }
    }
    return 0;
}

void *guest_mem_uva_ptr(const struct guest_mem *m, uint64_t uva, uint64_t len)
{
    if (len == 0) {
        len = 1;
    }
    for (unsigned i = 0; i < m->nregions; i++) {
        const struct guest_mem_region *r = &m->r[i];
        uint64_t off;

        if (region_offset(r->uva, r->size, uva, &off)) {
            return len <= r->size - off ? (char *)r->host + off : NULL;
        }
    }
    return NULL;
}

int guest_mem_gpa_iov(const struct guest_mem *m, uint64_t gpa, uint64_t len,
                      struct iovec *iov, unsigned max)
{
    unsigned n = 0;

    if (len == 0) {
        return 0;
    }
    if (range_wraps(gpa, len)) {
        return -EFAULT;
    }
    while (len > 0) {
        const struct guest_mem_region *r = NULL;
        uint64_t off = 0, chunk;

        for (unsigned i = 0; i < m->nregions; i++) {
            if (region_offset(m->r[i].gpa, m->r[i].size, gpa, &off)) {
                r = &m->r[i];
                break;
            }
        }
        if (!r) {
            return -EFAULT;
        }
        if (n == max) {
            return -ENOBUFS;
        }
        chunk = MIN(len, r->size - off);
        iov[n].iov_base = (char *)r->host + off;
        iov[n].iov_len = chunk;
        n++;
        gpa += chunk;
        len -= chunk;
    }
    return n;
}
