/*
 * The file backend: a LUN stored in a regular file or a block device, with
 * I/O issued on the submitting iothread's io_uring.  Reads and writes go
 * straight between the guest's buffers and the file (READV/WRITEV on the
 * guest iovecs, no copy, no allocation); a short transfer is resubmitted
 * for the remainder until the whole request is done or fails, so a partial
 * transfer is never reported as success.  Without an iothread ring (tests
 * of other layers, tools) the same steps run synchronously with
 * preadv2/pwritev2 and friends, and complete() runs inside submit().
 *
 * O_DIRECT ("direct"): the block size must be at least the file's direct
 * I/O offset alignment (the device's logical block size).  Guest buffers
 * that are not aligned for O_DIRECT are served through a bounce buffer
 * allocated for that request only, and the first one is logged: that is
 * the one path that allocates per I/O, and a Linux guest never takes it.
 *
 * Size: by default the whole file or device (rounded down to a block).  An
 * explicit size may be smaller; for a block device it may not be larger,
 * and a regular file smaller than it is extended (sparsely) only if it was
 * opened writable; a read-only one is refused.  A file is never shrunk.
 *
 * DISCARD punches a hole (FALLOC_FL_PUNCH_HOLE) in a regular file, on
 * filesystems that support it (probed at open), and issues BLKDISCARD on a
 * block device from the backend's discard worker (offload.h): io_uring has
 * no discard opcode on the kernels we run on, and a device can take
 * hundreds of milliseconds over one, which every queue of the I/O thread
 * would wait; the result comes back to the request's I/O thread.  WRITE_ZEROES tries
 * FALLOC_FL_ZERO_RANGE (async, for files and devices alike), then a hole
 * punch (files), then writes zeros from a read-only zero mapping; a
 * method the file refuses is remembered so it is tried once only.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <glib.h>
#include <liburing.h>

#include "backend-uring.h"
#include "vs-error.h"
#include "iov.h"
#include "offload.h"

#ifndef container_of
#define container_of(ptr, type, member) \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))
#endif

/* Longest single read/write step; the kernel caps one call near 2 GiB. */
#define FILE_MAX_STEP   (1u << 30)
/* Size of the read-only zero mapping WRITE_ZEROES falls back to writing. */
#define FILE_ZERO_BUF   (1u << 20)

struct file_backend {
    struct lun_backend be;
    int fd;
    bool is_blockdev;
    bool direct;
    /* O_DIRECT constraints: buffer address, and offset/segment length. */
    uint32_t dio_mem_align;
    uint32_t dio_len_align;
    const void *zeros;          /* FILE_ZERO_BUF bytes of PROT_READ zeros */
    struct offload *discards;   /* a block device that discards: where BLKDISCARD runs */
    /* Learnt at run time, shared by all threads: accessed atomically. */
    bool no_zero_range;
    bool no_punch_hole;
    bool bounce_logged;
};

/* WRITE_ZEROES methods, tried in this order. */
enum { ZW_ZERO_RANGE, ZW_PUNCH_HOLE, ZW_WRITE };

/* Per-request state, kept in backend_io.backend_priv (no allocation). */
struct file_io {
    uint64_t done;              /* bytes transferred so far */
    struct file_backend *fb;
    void *bounce;               /* aligned copy of the data, or NULL */
    uint32_t zw_method;
    int32_t offloaded_res;      /* an offloaded step's result, handed back to the I/O thread */
};

G_STATIC_ASSERT(sizeof(struct file_io) <= sizeof(((struct backend_io *)0)->backend_priv));
G_STATIC_ASSERT(G_ALIGNOF(struct file_io) <= G_ALIGNOF(uint64_t));

static inline struct file_io *file_io(struct backend_io *io)
{
    return (struct file_io *)(void *)io->backend_priv;
}

static bool flag_get(bool *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static void flag_set(bool *p)
{
    __atomic_store_n(p, true, __ATOMIC_RELAXED);
}

/* The next system call a request needs, derived from its progress. */
struct step {
    enum { STEP_RW, STEP_RW1, STEP_FSYNC, STEP_FALLOC, STEP_BLKDISCARD } kind;
    bool write;
    const struct iovec *iov;    /* STEP_RW */
    unsigned iovcnt;
    void *buf;                  /* STEP_RW1 */
    uint32_t len;
    uint64_t offset;
    uint64_t flen;              /* STEP_FALLOC / STEP_BLKDISCARD */
    int mode;                   /* STEP_FALLOC */
    int rw_flags;
};

static void file_io_plan(struct file_backend *fb, struct backend_io *io,
                         struct step *s)
{
    struct file_io *fio = file_io(io);
    uint64_t left = io->len - fio->done;

    memset(s, 0, sizeof(*s));
    s->offset = io->offset + fio->done;
    switch (io->op) {
    case BACKEND_READ:
    case BACKEND_WRITE:
        s->write = io->op == BACKEND_WRITE;
        s->rw_flags = s->write && io->fua ? RWF_DSYNC : 0;
        if (fio->bounce) {
            s->kind = STEP_RW1;
            s->buf = (char *)fio->bounce + fio->done;
            s->len = MIN(left, FILE_MAX_STEP);
            return;
        }
        {
            /* Find where the remainder starts in the guest's iovecs. */
            uint64_t skip = fio->done;
            unsigned i = 0;

            while (i < io->iovcnt && skip >= io->iov[i].iov_len) {
                skip -= io->iov[i].iov_len;
                i++;
            }
            /* submit() checked that the iovecs cover len, so i < iovcnt. */
            if (skip) {
                /* Mid-segment (after a short transfer): finish the segment. */
                s->kind = STEP_RW1;
                s->buf = (char *)io->iov[i].iov_base + skip;
                s->len = MIN(MIN(io->iov[i].iov_len - skip, left), FILE_MAX_STEP);
            } else {
                s->kind = STEP_RW;
                s->iov = &io->iov[i];
                s->iovcnt = MIN(io->iovcnt - i, (unsigned)IOV_MAX);
            }
        }
        return;
    case BACKEND_FLUSH:
        s->kind = STEP_FSYNC;
        return;
    case BACKEND_DISCARD:
        if (fb->is_blockdev) {
            s->kind = STEP_BLKDISCARD;
        } else {
            s->kind = STEP_FALLOC;
            s->mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
        }
        s->flen = left;
        return;
    case BACKEND_WRITE_ZEROES:
        if (fio->zw_method == ZW_WRITE) {
            s->kind = STEP_RW1;
            s->write = true;
            s->buf = (void *)fb->zeros;
            s->len = MIN(left, FILE_ZERO_BUF);
            s->rw_flags = io->fua ? RWF_DSYNC : 0;
            return;
        }
        s->kind = STEP_FALLOC;
        s->mode = FALLOC_FL_KEEP_SIZE | (fio->zw_method == ZW_ZERO_RANGE ?
                                         FALLOC_FL_ZERO_RANGE : FALLOC_FL_PUNCH_HOLE);
        s->flen = left;
        return;
    }
    g_assert_not_reached();
}

static void file_io_cqe(struct iothread_uring_cb *cb, int res);

static int blkdiscard(struct file_backend *fb, const struct step *s)
{
    uint64_t range[2] = { s->offset, s->flen };

    return ioctl(fb->fd, BLKDISCARD, range) < 0 ? -errno : 0;
}

static void file_io_offloaded_done(void *opaque)
{
    struct backend_io *io = opaque;

    file_io_cqe(&io->uring_cb, file_io(io)->offloaded_res);
}

/* On the discard worker: the BLKDISCARD, its result posted back to the request's thread. */
static void file_io_offloaded(void *opaque)
{
    struct backend_io *io = opaque;
    struct file_io *fio = file_io(io);
    struct step s;

    file_io_plan(fio->fb, io, &s);
    fio->offloaded_res = blkdiscard(fio->fb, &s);
    iothread_post(io->thread, file_io_offloaded_done, io);
}

/*
 * Issues a request's next step: prepares an SQE on t's ring and returns
 * true, or (t NULL, or the step has no async form) runs it now, sets *res
 * to a syscall-style result and returns false.
 */
static bool file_io_step(struct file_backend *fb, struct backend_io *io,
                         struct iothread *t, int *res)
{
    struct step s;
    struct io_uring_sqe *sqe = NULL;
    ssize_t r;

    file_io_plan(fb, io, &s);
    if (t && s.kind == STEP_BLKDISCARD && fb->discards &&
        offload_run(fb->discards, file_io_offloaded, io) == 0) {
        return true;
    }
    if (t && s.kind != STEP_BLKDISCARD) {
        sqe = iothread_get_sqe(t);
    }
    if (sqe) {
        switch (s.kind) {
        case STEP_RW:
            io_uring_prep_rw(s.write ? IORING_OP_WRITEV : IORING_OP_READV, sqe,
                             fb->fd, s.iov, s.iovcnt, s.offset);
            sqe->rw_flags = s.rw_flags;
            break;
        case STEP_RW1:
            io_uring_prep_rw(s.write ? IORING_OP_WRITE : IORING_OP_READ, sqe,
                             fb->fd, s.buf, s.len, s.offset);
            sqe->rw_flags = s.rw_flags;
            break;
        case STEP_FSYNC:
            io_uring_prep_fsync(sqe, fb->fd, IORING_FSYNC_DATASYNC);
            break;
        case STEP_FALLOC:
            io_uring_prep_fallocate(sqe, fb->fd, s.mode, s.offset, s.flen);
            break;
        case STEP_BLKDISCARD:
            g_assert_not_reached();
        }
        io->uring_cb.fn = file_io_cqe;
        io_uring_sqe_set_data(sqe, &io->uring_cb);
        iothread_sqe_ready(t);
        return true;
    }

    switch (s.kind) {
    case STEP_RW:
        r = s.write ? pwritev2(fb->fd, s.iov, s.iovcnt, s.offset, s.rw_flags)
                    : preadv2(fb->fd, s.iov, s.iovcnt, s.offset, 0);
        break;
    case STEP_RW1: {
        struct iovec one = { .iov_base = s.buf, .iov_len = s.len };
        r = s.write ? pwritev2(fb->fd, &one, 1, s.offset, s.rw_flags)
                    : preadv2(fb->fd, &one, 1, s.offset, 0);
        break;
    }
    case STEP_FSYNC:
        r = fdatasync(fb->fd);
        break;
    case STEP_FALLOC:
        r = fallocate(fb->fd, s.mode, s.offset, s.flen);
        break;
    case STEP_BLKDISCARD:
        *res = blkdiscard(fb, &s);
        return false;
    default:
        g_assert_not_reached();
    }
    *res = r < 0 ? -errno : (int)r;
    return false;
}

/*
 * Accounts one step's result.  Returns 1 if the request needs another
 * step, else its final status (0 or -errno).
 */
static int file_io_result(struct file_backend *fb, struct backend_io *io, int res)
{
    struct file_io *fio = file_io(io);

    if (res == -EINTR) {
        return 1;
    }
    switch (io->op) {
    case BACKEND_READ:
    case BACKEND_WRITE:
        if (res < 0) {
            return res;
        }
        if (res == 0) {
            /* No progress: the file shrank under us or the device ended. */
            g_warning("%s: %s at offset %" PRIu64 " made no progress (file "
                      "truncated?)", fb->be.name,
                      io->op == BACKEND_READ ? "read" : "write",
                      io->offset + fio->done);
            return -EIO;
        }
        fio->done += (unsigned)res;
        return fio->done < io->len ? 1 : 0;
    case BACKEND_FLUSH:
    case BACKEND_DISCARD:
        return res < 0 ? res : 0;
    case BACKEND_WRITE_ZEROES:
        if (fio->zw_method == ZW_WRITE) {
            if (res < 0) {
                return res;
            }
            if (res == 0) {
                g_warning("%s: writing zeros at offset %" PRIu64 " made no "
                          "progress", fb->be.name, io->offset + fio->done);
                return -EIO;
            }
            fio->done += (unsigned)res;
            return fio->done < io->len ? 1 : 0;
        }
        if (res != -EOPNOTSUPP && res != -EINVAL) {
            return res < 0 ? res : 0;
        }
        /*
         * The file refuses this method (some filesystems say EINVAL for
         * an unsupported mode): remember it and try the next one.
         */
        if (fio->zw_method == ZW_ZERO_RANGE) {
            if (!flag_get(&fb->no_zero_range)) {
                g_info("%s: no FALLOC_FL_ZERO_RANGE (%s), falling back",
                       fb->be.name, g_strerror(-res));
                flag_set(&fb->no_zero_range);
            }
            fio->zw_method = fb->be.can_discard && !fb->is_blockdev &&
                             !flag_get(&fb->no_punch_hole) ? ZW_PUNCH_HOLE : ZW_WRITE;
        } else {
            flag_set(&fb->no_punch_hole);
            fio->zw_method = ZW_WRITE;
        }
        return 1;
    }
    g_assert_not_reached();
}

static void file_io_finish(struct backend_io *io, int ret)
{
    struct file_io *fio = file_io(io);

    if (fio->bounce) {
        if (ret == 0 && io->op == BACKEND_READ) {
            iov_from_buf(io->iov, io->iovcnt, 0, fio->bounce, io->len);
        }
        free(fio->bounce);
        fio->bounce = NULL;
    }
    io->complete(io, ret);
}

/* Runs steps synchronously until the request is done. */
static void file_io_run_sync(struct file_backend *fb, struct backend_io *io)
{
    int res, ret;

    do {
        file_io_step(fb, io, NULL, &res);
        ret = file_io_result(fb, io, res);
    } while (ret == 1);
    file_io_finish(io, ret);
}

/* Issues steps on t until one is queued or the request finishes. */
static void file_io_continue(struct file_backend *fb, struct backend_io *io,
                             struct iothread *t)
{
    int res, ret;

    do {
        if (file_io_step(fb, io, t, &res)) {
            return;
        }
        ret = file_io_result(fb, io, res);
    } while (ret == 1);
    file_io_finish(io, ret);
}

static void file_io_cqe(struct iothread_uring_cb *cb, int res)
{
    struct backend_io *io = container_of(cb, struct backend_io, uring_cb);
    struct file_io *fio = file_io(io);
    int ret = file_io_result(fio->fb, io, res);

    if (ret == 1) {
        file_io_continue(fio->fb, io, io->thread);
    } else {
        file_io_finish(io, ret);
    }
}

/* True if O_DIRECT can use the guest's buffers as they are. */
static bool file_dio_aligned(const struct file_backend *fb,
                             const struct backend_io *io)
{
    uintptr_t mem_mask = fb->dio_mem_align - 1;
    uint64_t len_mask = fb->dio_len_align - 1;

    for (unsigned i = 0; i < io->iovcnt; i++) {
        if (((uintptr_t)io->iov[i].iov_base & mem_mask) ||
            (io->iov[i].iov_len & len_mask)) {
            return false;
        }
    }
    return true;
}

static int file_io_bounce(struct file_backend *fb, struct backend_io *io)
{
    struct file_io *fio = file_io(io);
    void *buf;

    if (!flag_get(&fb->bounce_logged)) {
        flag_set(&fb->bounce_logged);
        g_message("%s: guest buffers not aligned for O_DIRECT, using bounce "
                  "buffers for such requests", fb->be.name);
    }
    if (posix_memalign(&buf, MAX(fb->dio_mem_align, fb->dio_len_align), io->len)) {
        return -ENOMEM;
    }
    if (io->op == BACKEND_WRITE) {
        iov_to_buf(io->iov, io->iovcnt, 0, buf, io->len);
    }
    fio->bounce = buf;
    return 0;
}

static int file_submit(struct lun_backend *be, struct backend_io *io)
{
    struct file_backend *fb = container_of(be, struct file_backend, be);
    struct file_io *fio = file_io(io);

    memset(fio, 0, sizeof(*fio));
    fio->fb = fb;
    switch (io->op) {
    case BACKEND_WRITE:
    case BACKEND_DISCARD:
    case BACKEND_WRITE_ZEROES:
        if (be->read_only) {
            return -EROFS;
        }
        break;
    default:
        break;
    }
    if (io->op != BACKEND_FLUSH &&
        (io->offset > backend_size(be) || io->len > backend_size(be) - io->offset)) {
        return -EINVAL;
    }

    switch (io->op) {
    case BACKEND_READ:
    case BACKEND_WRITE: {
        uint64_t total = 0;

        for (unsigned i = 0; i < io->iovcnt; i++) {
            total += io->iov[i].iov_len;
        }
        if (total != io->len) {
            return -EINVAL;
        }
        if (io->len == 0) {
            io->complete(io, 0);
            return 0;
        }
        if (fb->direct && !file_dio_aligned(fb, io)) {
            int r = file_io_bounce(fb, io);
            if (r < 0) {
                return r;
            }
        }
        break;
    }
    case BACKEND_DISCARD:
        if (!be->can_discard) {
            return -EOPNOTSUPP;
        }
        if (io->len == 0) {
            io->complete(io, 0);
            return 0;
        }
        break;
    case BACKEND_WRITE_ZEROES:
        if (io->len == 0) {
            io->complete(io, 0);
            return 0;
        }
        if (flag_get(&fb->no_zero_range)) {
            fio->zw_method = be->can_discard && !fb->is_blockdev &&
                             !flag_get(&fb->no_punch_hole) ? ZW_PUNCH_HOLE : ZW_WRITE;
        }
        break;
    case BACKEND_FLUSH:
        break;
    default:
        return -EINVAL;
    }

    if (io->thread) {
        file_io_continue(fb, io, io->thread);
    } else {
        file_io_run_sync(fb, io);
    }
    return 0;
}

static void file_close(struct lun_backend *be)
{
    struct file_backend *fb = container_of(be, struct file_backend, be);

    if (fb->zeros) {
        munmap((void *)fb->zeros, FILE_ZERO_BUF);
    }
    offload_free(fb->discards);
    close(fb->fd);
    g_free(be->name);
    g_free(fb);
}

/*
 * A file grows by ftruncate (sparse); a block device is grown by its owner
 * (lvextend, a SAN resize) and the LUN then takes its new size.
 */
static int file_resize(struct lun_backend *be, uint64_t size, uint64_t *out, GError **err)
{
    struct file_backend *fb = container_of(be, struct file_backend, be);
    uint64_t dev_size;

    if (!fb->is_blockdev) {
        if (!size) {
            struct stat st;

            if (fstat(fb->fd, &st) < 0) {
                return vs_error_set(err, -errno, "cannot measure the file: %s",
                                    g_strerror(errno));
            }
            *out = (uint64_t)st.st_size;
            return 0;
        }
        if (ftruncate(fb->fd, (off_t)size) < 0) {
            return vs_error_set(err, -errno, "cannot extend the file to %" PRIu64 " bytes: %s",
                                size, g_strerror(errno));
        }
        *out = size;
        return 0;
    }
    if (ioctl(fb->fd, BLKGETSIZE64, &dev_size) < 0) {
        return vs_error_set(err, -errno, "cannot measure the device: %s", g_strerror(errno));
    }
    if (size && size != dev_size) {
        return vs_error_set(err, -EINVAL, "a block device is %" PRIu64 " bytes; grow the "
                            "device itself, then resize without a size", dev_size);
    }
    *out = dev_size;
    return 0;
}

/*
 * PRE-FETCH: POSIX_FADV_WILLNEED starts readahead into the page cache and
 * returns without waiting for it.  With O_DIRECT there is no cache to fill.
 */
static int file_prefetch(struct lun_backend *be, uint64_t offset, uint64_t len)
{
    struct file_backend *fb = container_of(be, struct file_backend, be);

    if (fb->direct) {
        return -EOPNOTSUPP;
    }
    return -posix_fadvise(fb->fd, (off_t)offset, (off_t)len, POSIX_FADV_WILLNEED);
}

/*
 * GET LBA STATUS: SEEK_DATA / SEEK_HOLE on a regular file.  A hole's
 * edges are rounded inwards to whole blocks, so a block with any data in
 * it is reported mapped.  A block device has no holes we can see.
 */
static int file_block_status(struct lun_backend *be, uint64_t offset, uint64_t len,
                             bool *mapped, uint64_t *run)
{
    struct file_backend *fb = container_of(be, struct file_backend, be);
    uint64_t bs = be->block_size, end = offset + len;
    off_t data, hole;

    if (fb->is_blockdev) {
        return -EOPNOTSUPP;
    }
    data = lseek(fb->fd, (off_t)offset, SEEK_DATA);
    if (data < 0 && errno != ENXIO) {
        return -errno;
    }
    /* ENXIO: no data from offset to the end of the file. */
    if (data < 0 || (uint64_t)data > offset) {
        uint64_t hole_end = data < 0 ? end : MIN((uint64_t)data / bs * bs, end);

        if (hole_end > offset) {
            *mapped = false;
            *run = hole_end - offset;
            return 0;
        }
        data = (off_t)offset;   /* data within the first block: it is mapped */
    }
    hole = lseek(fb->fd, (off_t)offset, SEEK_HOLE);
    if (hole < 0) {
        return -errno;
    }
    *mapped = true;
    *run = MIN(((uint64_t)hole + bs - 1) / bs * bs, end) - offset;
    if (*run == 0) {
        *run = MIN(bs, len);
    }
    return 0;
}

static const struct backend_ops file_backend_ops = {
    .name = "file",
    .submit = file_submit,
    .resize = file_resize,
    .prefetch = file_prefetch,
    .block_status = file_block_status,
    .close = file_close,
};

/*
 * Reads a block device queue attribute from sysfs; partitions have their
 * queue/ directory in the parent device's directory.
 */
static bool blockdev_queue_attr(dev_t rdev, const char *attr, char *buf, size_t len)
{
    static const char *const fmts[] = {
        "/sys/dev/block/%u:%u/queue/%s",
        "/sys/dev/block/%u:%u/../queue/%s",
    };

    for (unsigned i = 0; i < G_N_ELEMENTS(fmts); i++) {
        g_autofree char *path = g_strdup_printf(fmts[i], major(rdev), minor(rdev), attr);
        FILE *f = fopen(path, "re");
        bool ok;

        if (!f) {
            continue;
        }
        ok = fgets(buf, len, f) != NULL;
        fclose(f);
        if (ok) {
            g_strchomp(buf);
            return true;
        }
    }
    return false;
}

/* Learns the O_DIRECT alignment the kernel will ask for. */
static void file_probe_dio_align(struct file_backend *fb, uint32_t dev_lbs)
{
    uint32_t mem = dev_lbs, len = dev_lbs;
#ifdef STATX_DIOALIGN
    struct statx stx;

    if (statx(fb->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
        (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align) {
        mem = stx.stx_dio_mem_align;
        len = stx.stx_dio_offset_align;
    }
#endif
    /* The kernel checks segment lengths against the logical block size. */
    fb->dio_mem_align = MAX(mem, 1u);
    fb->dio_len_align = MAX(len, 1u);
}

/* Fails the open: fd closed, *err set to msg (taken), the errno returned. */
static int file_open_error(int fd, char *msg, int ret, GError **err)
{
    if (fd >= 0) {
        close(fd);
    }
    vs_error_set(err, ret, "%s", msg);
    g_free(msg);
    return ret;
}

int backend_file_open(const struct backend_file_opts *o, struct lun_backend **out,
                      GError **err)
{
    g_autofree char *name = NULL;
    char *msg;
    struct file_backend *fb;
    struct stat st;
    uint64_t phys_size, size;
    uint32_t dev_lbs = 512, block_size;
    bool blockdev;
    int flags, fd, ret;

    if (!o || !o->path || !o->path[0]) {
        return vs_error_set(err, -EINVAL, "no path given");
    }
    name = g_strdup_printf("file:%s", o->path);
    flags = O_CLOEXEC | (o->read_only ? O_RDONLY : O_RDWR) | (o->direct ? O_DIRECT : 0);
    fd = open(o->path, flags);
    if (fd < 0) {
        ret = -errno;
        msg = g_strdup_printf("%s%s%s%s%s%s", o->read_only || o->direct ? "opening" : "",
                              o->read_only ? " read-only" : "",
                              o->direct ? " with O_DIRECT" : "",
                              o->read_only || o->direct ? ": " : "", g_strerror(-ret),
                              !o->read_only && (ret == -EACCES || ret == -EROFS) ? " (use ,ro?)" :
                              ret == -EINVAL && o->direct ? " (no O_DIRECT here?)" : "");
        return file_open_error(-1, msg, ret, err);
    }
    if (fstat(fd, &st) < 0) {
        ret = -errno;
        msg = g_strdup_printf("fstat: %s", g_strerror(-ret));
        return file_open_error(fd, msg, ret, err);
    }
    if (S_ISBLK(st.st_mode)) {
        int lbs;

        blockdev = true;
        if (ioctl(fd, BLKGETSIZE64, &phys_size) < 0 || ioctl(fd, BLKSSZGET, &lbs) < 0) {
            ret = -errno;
            msg = g_strdup_printf("cannot get device geometry: %s", g_strerror(-ret));
            return file_open_error(fd, msg, ret, err);
        }
        dev_lbs = lbs > 0 ? (uint32_t)lbs : 512;
    } else if (S_ISREG(st.st_mode)) {
        blockdev = false;
        phys_size = st.st_size;
    } else {
        return file_open_error(fd, g_strdup("not a regular file or block device"), -EINVAL, err);
    }

    block_size = o->block_size ? o->block_size : (blockdev ? dev_lbs : 512);
    if (block_size != 512 && block_size != 4096) {
        msg = g_strdup_printf("block size %" PRIu32 " is not 512 or 4096", block_size);
        return file_open_error(fd, msg, -EINVAL, err);
    }
    if (blockdev && block_size < dev_lbs) {
        msg = g_strdup_printf("block size %" PRIu32 " is smaller than the device's "
                              "logical block size %" PRIu32, block_size, dev_lbs);
        return file_open_error(fd, msg, -EINVAL, err);
    }

    fb = g_new0(struct file_backend, 1);
    fb->fd = fd;
    fb->is_blockdev = blockdev;
    fb->direct = o->direct;
    if (o->direct) {
        file_probe_dio_align(fb, dev_lbs);
        if (block_size < fb->dio_len_align) {
            msg = g_strdup_printf("block size %" PRIu32 " is smaller than the O_DIRECT "
                                  "alignment %" PRIu32, block_size, fb->dio_len_align);
            g_free(fb);
            return file_open_error(fd, msg, -EINVAL, err);
        }
    }

    if (o->size) {
        size = o->size;
        if (size % block_size) {
            msg = g_strdup_printf("size %" PRIu64 " is not a multiple of the block "
                                  "size %" PRIu32, size, block_size);
            g_free(fb);
            return file_open_error(fd, msg, -EINVAL, err);
        }
        if (size > phys_size) {
            if (blockdev || o->read_only) {
                msg = g_strdup_printf("size %" PRIu64 " is larger than the %s (%" PRIu64
                                      " bytes)", size, blockdev ? "device" :
                                      "read-only file", phys_size);
                g_free(fb);
                return file_open_error(fd, msg, -EINVAL, err);
            }
            if (ftruncate(fd, size) < 0) {
                ret = -errno;
                msg = g_strdup_printf("cannot extend to %" PRIu64 " bytes: %s", size,
                                      g_strerror(-ret));
                g_free(fb);
                return file_open_error(fd, msg, ret, err);
            }
            g_message("%s: extended from %" PRIu64 " to %" PRIu64 " bytes", name,
                      phys_size, size);
            phys_size = size;
        }
    } else {
        size = phys_size - phys_size % block_size;
        if (size == 0) {
            msg = g_strdup_printf("the file is smaller than one block (%" PRIu64 " bytes); give "
                                  "size=", phys_size);
            g_free(fb);
            return file_open_error(fd, msg, -EINVAL, err);
        }
        if (size != phys_size) {
            g_message("%s: using %" PRIu64 " of %" PRIu64 " bytes (whole blocks only)",
                      name, size, phys_size);
        }
    }

    fb->be.ops = &file_backend_ops;
    fb->be.size = size;
    fb->be.block_size = block_size;
    fb->be.read_only = o->read_only;
    fb->be.write_cache = true;
    fb->be.phys_block_size = o->phys_block_size;
    fb->be.object_kind = blockdev ? BACKEND_OBJECT_BLOCK : BACKEND_OBJECT_FILE;
    fb->be.object_dev = blockdev ? (uint64_t)st.st_rdev : (uint64_t)st.st_dev;
    fb->be.object_ino = blockdev ? 0 : (uint64_t)st.st_ino;
    if (blockdev) {
        char buf[64];
        unsigned int pbs = 0;

        /* A 512e disk: 512-byte logical blocks in 4 KiB sectors. */
        if (!o->phys_block_size && ioctl(fd, BLKPBSZGET, &pbs) == 0 && pbs > block_size) {
            fb->be.phys_block_size = pbs;
        }

        if (!o->read_only && blockdev_queue_attr(st.st_rdev, "discard_max_bytes",
                                                 buf, sizeof(buf))) {
            fb->be.can_discard = g_ascii_strtoull(buf, NULL, 10) > 0;
        }
        if (fb->be.can_discard &&
            blockdev_queue_attr(st.st_rdev, "discard_granularity", buf, sizeof(buf))) {
            uint64_t g = g_ascii_strtoull(buf, NULL, 10);

            if (g >= block_size && g <= (1u << 30) && !(g & (g - 1))) {
                fb->be.discard_granularity = (uint32_t)g;
            }
        }
        if (fb->be.can_discard) {
            fb->discards = offload_new("discard");
        }
        /* Without O_DIRECT the page cache is a volatile cache anyway. */
        if (o->direct && blockdev_queue_attr(st.st_rdev, "write_cache", buf, sizeof(buf))) {
            fb->be.write_cache = strcmp(buf, "write through") != 0;
        }
    } else if (!o->read_only) {
        /*
         * Probe hole punching past the end of the file, where it cannot
         * change any data.
         */
        fb->be.can_discard = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                       phys_size, block_size) == 0;
        /* Holes are punched in the file system's blocks. */
        if (st.st_blksize >= (blksize_t)block_size && st.st_blksize <= (1 << 20) &&
            !(st.st_blksize & (st.st_blksize - 1))) {
            fb->be.discard_granularity = (uint32_t)st.st_blksize;
        }
        if (!fb->be.can_discard) {
            flag_set(&fb->no_punch_hole);
        }
    }
    if (!o->read_only) {
        void *z = mmap(NULL, FILE_ZERO_BUF, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

        if (z == MAP_FAILED) {
            ret = -errno;
            msg = g_strdup_printf("cannot map zero buffer: %s", g_strerror(-ret));
            g_free(fb);
            return file_open_error(fd, msg, ret, err);
        }
        fb->zeros = z;
    }
    g_debug("%s: %" PRIu64 " bytes, block size %" PRIu32 "%s%s%s%s", name, size,
            block_size, o->read_only ? ", read-only" : "", o->direct ? ", O_DIRECT" : "",
            fb->be.can_discard ? ", discard" : "",
            fb->be.write_cache ? ", write cache" : "");
    fb->be.name = g_steal_pointer(&name);
    *out = &fb->be;
    return 0;
}
