/*
 * Memory backends.  ram: keeps the blocks in an anonymous MAP_NORESERVE
 * mapping, so a large LUN costs only the pages actually written; discards
 * give pages back with MADV_DONTNEED (they read back as zeros).  A bitmap
 * of the 4 KiB pages written since they were last given back is ram's map
 * of mapped and deallocated blocks (GET LBA STATUS); a write sets bits only
 * where they are clear, so rewriting costs a load per page.  null:
 * stores nothing, reads zeros and drops writes, for measuring the rest of
 * the stack; its fill=none twin does not even write the zeros, like SPDK's
 * null bdev and Linux's null_blk, so a comparison with them is like for
 * like (the guest reads back its own buffer: nothing of the host leaks).  Both complete every request inside submit(); concurrent
 * requests to overlapping ranges race like they would on a real disk.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <glib.h>

#include "backend.h"
#include "iov.h"

/* The unit of ram's allocation map: a page on every Linux this runs on. */
#define MAP_UNIT 4096u

struct mem_backend {
    struct lun_backend be;
    uint8_t *base;      /* NULL for null: */
    _Atomic uint64_t *map;   /* ram: a bit per MAP_UNIT, set while it holds data */
};

static void map_set(struct mem_backend *m, uint64_t off, uint64_t len)
{
    for (uint64_t u = off / MAP_UNIT; u <= (off + len - 1) / MAP_UNIT; u++) {
        uint64_t bit = 1ull << (u % 64);

        if (!(atomic_load_explicit(&m->map[u / 64], memory_order_relaxed) & bit)) {
            atomic_fetch_or(&m->map[u / 64], bit);
        }
    }
}

/* Clears the units wholly inside [off, off + len): those were given back. */
static void map_clear(struct mem_backend *m, uint64_t off, uint64_t len)
{
    for (uint64_t u = (off + MAP_UNIT - 1) / MAP_UNIT; (u + 1) * MAP_UNIT <= off + len; u++) {
        atomic_fetch_and(&m->map[u / 64], ~(1ull << (u % 64)));
    }
}

static bool map_get(struct mem_backend *m, uint64_t u)
{
    return atomic_load_explicit(&m->map[u / 64], memory_order_relaxed) & (1ull << (u % 64));
}

static struct mem_backend *to_mem(struct lun_backend *be)
{
    return (struct mem_backend *)be;
}

/* Zeros [off, off+len): whole pages are returned to the kernel. */
static void ram_zero(struct mem_backend *m, uint64_t off, uint64_t len)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t start = (off + page - 1) & ~(page - 1);
    uint64_t end = (off + len) & ~(page - 1);

    if (start >= end) {
        memset(m->base + off, 0, len);
        return;
    }
    memset(m->base + off, 0, start - off);
    if (madvise(m->base + start, end - start, MADV_DONTNEED) < 0) {
        memset(m->base + start, 0, end - start);
    }
    memset(m->base + end, 0, off + len - end);
}

static int ram_submit(struct lun_backend *be, struct backend_io *io)
{
    struct mem_backend *m = to_mem(be);

    iothread_charge(io->thread, io->len);
    switch (io->op) {
    case BACKEND_READ:
        iov_from_buf(io->iov, io->iovcnt, 0, m->base + io->offset, io->len);
        break;
    case BACKEND_WRITE:
        if (io->len) {
            map_set(m, io->offset, io->len);
        }
        iov_to_buf(io->iov, io->iovcnt, 0, m->base + io->offset, io->len);
        break;
    case BACKEND_DISCARD:
    case BACKEND_WRITE_ZEROES:
        ram_zero(m, io->offset, io->len);
        map_clear(m, io->offset, io->len);
        break;
    case BACKEND_FLUSH:
        break;
    }
    io->complete(io, 0);
    return 0;
}

static int null_submit(struct lun_backend *be, struct backend_io *io)
{
    if (io->op == BACKEND_READ) {
        iothread_charge(io->thread, io->len);
        iov_memset(io->iov, io->iovcnt, 0, 0, io->len);
    }
    io->complete(io, 0);
    return 0;
}

static int null_nofill_submit(struct lun_backend *be, struct backend_io *io)
{
    (void)be;
    io->complete(io, 0);
    return 0;
}

/* The blocks are in memory already: nothing to fetch. */
static int mem_prefetch(struct lun_backend *be, uint64_t offset, uint64_t len)
{
    return 0;
}

static int ram_block_status(struct lun_backend *be, uint64_t offset, uint64_t len,
                            bool *mapped, uint64_t *run)
{
    struct mem_backend *m = to_mem(be);
    uint64_t u = offset / MAP_UNIT, end = offset + len, next;
    bool state = map_get(m, u);

    /* Past the first unit, whole units only; a block shares its unit's state. */
    for (next = (u + 1) * MAP_UNIT; next < end && map_get(m, next / MAP_UNIT) == state;
         next += MAP_UNIT) {
    }
    *mapped = state;
    *run = MIN(next, end) - offset;
    return 0;
}

static void mem_close(struct lun_backend *be)
{
    struct mem_backend *m = to_mem(be);

    if (m->base) {
        munmap(m->base, be->size);
    }
    g_free(m->map);
    g_free(be->name);
    g_free(m);
}

static const struct backend_ops ram_ops = {
    .name = "ram",
    .submit = ram_submit,
    .prefetch = mem_prefetch,
    .block_status = ram_block_status,
    .close = mem_close,
};

/* null stores nothing, so any size is free; RAM would have to move under I/O. */
static int null_resize(struct lun_backend *be, uint64_t size, uint64_t *out, GError **err)
{
    if (!size) {
        return vs_error_set(err, -EINVAL, "a null backend has no device to follow: give a size");
    }
    *out = size;
    return 0;
}

static const struct backend_ops null_ops = {
    .name = "null",
    .submit = null_submit,
    .resize = null_resize,
    .prefetch = mem_prefetch,
    .close = mem_close,
};

static const struct backend_ops null_nofill_ops = {
    .name = "null",
    .submit = null_nofill_submit,
    .resize = null_resize,
    .prefetch = mem_prefetch,
    .close = mem_close,
};

static int check_geometry(uint64_t size, uint32_t block_size, GError **err)
{
    if (block_size < 512 || block_size > 4096 || (block_size & (block_size - 1))) {
        return vs_error_set(err, -EINVAL, "block size %" PRIu32 " is not a power of two in "
                            "512..4096", block_size);
    }
    if (size == 0 || size % block_size) {
        return vs_error_set(err, -EINVAL, "size %" PRIu64 " is not a non-zero multiple of the "
                            "block size %" PRIu32, size, block_size);
    }
    return 0;
}

static struct mem_backend *mem_new(const struct backend_ops *ops, uint64_t size,
                                   uint32_t block_size)
{
    struct mem_backend *m = g_new0(struct mem_backend, 1);

    m->be.ops = ops;
    m->be.name = g_strdup_printf("%s:%" PRIu64, ops->name, size);
    m->be.size = size;
    m->be.block_size = block_size;
    m->be.can_discard = true;
    m->be.discard_zeroes = true;
    m->be.write_cache = false;   /* nothing to flush: writes are final */
    /* Every byte is copied or zeroed in submit(); fill=none touches none. */
    m->be.works_inline = ops != &null_nofill_ops;
    return m;
}

int backend_ram_new(uint64_t size, uint32_t block_size, struct lun_backend **out,
                    GError **err)
{
    struct mem_backend *m;
    void *base;
    int ret = check_geometry(size, block_size, err);

    if (ret < 0) {
        return ret;
    }
    if (size > SIZE_MAX) {
        return vs_error_set(err, -EFBIG, "%" PRIu64 " bytes do not fit in memory", size);
    }
    base = mmap(NULL, size, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        return vs_error_set(err, -errno, "cannot map %" PRIu64 " bytes: %s", size,
                            g_strerror(errno));
    }
    m = mem_new(&ram_ops, size, block_size);
    m->base = base;
    m->map = g_new0(_Atomic uint64_t, (size + 64 * MAP_UNIT - 1) / (64 * MAP_UNIT));
    *out = &m->be;
    return 0;
}

static int null_new(const struct backend_ops *ops, uint64_t size, uint32_t block_size,
                    struct lun_backend **out, GError **err)
{
    int ret = check_geometry(size, block_size, err);

    if (ret < 0) {
        return ret;
    }
    *out = &mem_new(ops, size, block_size)->be;
    return 0;
}

int backend_null_new(uint64_t size, uint32_t block_size, struct lun_backend **out,
                     GError **err)
{
    return null_new(&null_ops, size, block_size, out, err);
}

int backend_null_nofill_new(uint64_t size, uint32_t block_size, struct lun_backend **out,
                            GError **err)
{
    return null_new(&null_nofill_ops, size, block_size, out, err);
}
