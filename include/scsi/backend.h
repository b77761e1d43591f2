/*
 * LUN backends: where a logical unit's blocks live.  A backend is a table of
 * operations (like an SPDK bdev's function table) plus the geometry the SCSI
 * layer reports.  I/O is asynchronous: submit() returns at once and the
 * completion callback runs later on the same iothread, or inside submit()
 * for backends that finish synchronously (ram, null).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_BACKEND_H
#define VHOST_SCSI_BACKEND_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "iothread.h"
#include "vs-error.h"

enum backend_op {
    BACKEND_READ,
    BACKEND_WRITE,
    BACKEND_FLUSH,          /* make completed writes durable */
    BACKEND_DISCARD,        /* UNMAP: contents become zeros or undefined */
    BACKEND_WRITE_ZEROES,   /* contents must read back as zeros */
};

struct backend_io {
    enum backend_op op;
    uint64_t offset;            /* bytes */
    uint64_t len;               /* bytes; for READ/WRITE == iov_size(iov) */
    const struct iovec *iov;    /* READ/WRITE only; points into guest memory */
    unsigned iovcnt;
    bool fua;                   /* WRITE: durable before completion */
    struct iothread *thread;    /* the thread submitting (and completing) */
    /* ret: 0 on success, -errno on failure (-EIO, -ENOSPC, -EAGAIN = retry) */
    void (*complete)(struct backend_io *io, int ret);
    void *opaque;
    /* scratch for the backend, e.g. an iothread_uring_cb */
    struct iothread_uring_cb uring_cb;
    uint64_t backend_priv[4];
    /*
     * Set by a backend with ret == -EREMOTEIO: the remote device answered
     * CHECK CONDITION with this sense, which the SCSI layer passes on as is.
     * Raw bytes rather than one of the SCSI layer's named conditions: a
     * remote target's sense can be anything.  A backend's own failures are
     * -errno, which the SCSI layer maps to its named conditions.
     */
    bool has_sense;
    uint8_t sense_key, asc, ascq;
    /*
     * Set by a backend with ret == -EREMOTEIO and no sense: a remote SCSI
     * status that is itself the answer (RESERVATION CONFLICT), passed on.
     */
    uint8_t status;
};

struct lun_backend;
struct scsi_lun_info;

struct backend_ops {
    const char *name;
    /* Starts io; returns 0 (complete() will run) or -errno (it will not). */
    int (*submit)(struct lun_backend *be, struct backend_io *io);
    /* Optional: per-thread set-up/tear-down, called on that thread. */
    int (*attach_thread)(struct lun_backend *be, struct iothread *t);
    void (*detach_thread)(struct lun_backend *be, struct iothread *t);
    /*
     * Optional: fills buf with the standard INQUIRY data of the device
     * behind the backend (e.g. a remote iSCSI LUN) and returns its length
     * or -errno.  Called once by scsi_lun_new() (may block); the LUN then
     * reports that vendor and product unless scsi_lun_info overrides them.
     */
    int (*passthrough_inquiry)(struct lun_backend *be, void *buf, unsigned len);
    /* Optional: vendor/product/serial the LUN reports (e.g. the remote LUN's). */
    const struct scsi_lun_info *(*identity)(struct lun_backend *be);
    /*
     * Optional: grows the device to size bytes (whole blocks, more than
     * now), or with size 0 takes the size the device itself has grown to
     * (a block device extended underneath), and returns the new size in
     * *out, or -errno with *err (include/util/vs-error.h) saying why.
     * Main thread, with I/O running: backend_resize publishes it.
     */
    int (*resize)(struct lun_backend *be, uint64_t size, uint64_t *out, GError **err);
    /*
     * Optional: starts reading [offset, offset + len) into the cache the
     * backend has (the page cache) and returns 0, or -errno (-EOPNOTSUPP:
     * no cache, e.g. O_DIRECT).  Called on an I/O thread: it must not wait
     * for the read itself (PRE-FETCH).  Without it the LUN has no cache.
     */
    int (*prefetch)(struct lun_backend *be, uint64_t offset, uint64_t len);
    /*
     * Optional: whether the bytes at offset are mapped (hold data) or
     * deallocated (read as zeros when discard_zeroes, else undefined), in
     * *mapped, and in *run for how many bytes from offset that holds, a
     * multiple of the block size from 1 block to len (len whole blocks).
     * Called on an I/O thread, so cheap (a SEEK_DATA/SEEK_HOLE, a bitmap);
     * -errno on failure.  Without it every block is mapped (GET LBA STATUS).
     */
    int (*block_status)(struct lun_backend *be, uint64_t offset, uint64_t len, bool *mapped,
                        uint64_t *run);
    void (*close)(struct lun_backend *be);   /* frees be */
};

struct lun_backend {
    const struct backend_ops *ops;
    char *name;              /* for log lines, e.g. "file:/var/disk.img" */
    uint64_t size;           /* bytes, a multiple of block_size; backend_size() */
    uint32_t block_size;     /* 512 or 4096 */
    bool read_only;
    bool can_discard;        /* DISCARD supported */
    bool discard_zeroes;     /* discarded blocks read back as zeros (LBPRZ) */
    bool write_cache;        /* backend has a volatile cache (FLUSH matters) */
    /*
     * Set by the owner (a LUN spec's sanitize=on): the LUN takes SANITIZE,
     * which erases every block; without it the opcode is not supported.
     */
    bool allow_sanitize;
    /*
     * Does its work inside submit(), on the I/O thread's own CPU (ram,
     * null): the disk cuts what it sends into small pieces and runs long
     * commands a piece per loop iteration, so the thread's other queues
     * are served between them (scsi-disk-int.h, INLINE_PIECE_BYTES).
     */
    bool works_inline;
    /*
     * Largest READ/WRITE the device behind the backend accepts, in bytes
     * (a remote LUN's Block Limits); 0: no limit of its own.  The LUN
     * reports and enforces the smaller of this and its own limit.
     */
    uint32_t max_transfer;
    /*
     * The unit the device behind the backend stores in, in bytes (an RBD
     * image's object size): reported as OPTIMAL TRANSFER LENGTH
     * GRANULARITY so initiators align to it; 0: one block.
     */
    uint32_t opt_granularity;
    /*
     * The device's physical block in bytes, a power-of-two multiple of
     * block_size (512-byte logical blocks on a 4 KiB-sector disk); 0: one
     * block.  Reported in READ CAPACITY (16) so initiators align to it.
     */
    uint32_t phys_block_size;
    /*
     * The unit in which discards free space, in bytes (a file system's
     * block for hole punching); 0: 4 KiB.  Block Limits' OPTIMAL UNMAP
     * GRANULARITY, aligned at LBA 0.
     */
    uint32_t discard_granularity;
    /*
     * Set by the backend's owner, optional: called from any thread (a
     * library's own included) when the device changed size underneath (an
     * RBD image resized by another client).  The owner then calls
     * backend_resize(be, 0) on its main thread.  The backend stops calling
     * it before its close returns.
     */
    void (*changed)(struct lun_backend *be, void *opaque);
    void *changed_opaque;
    /*
     * The file or block device it serves, set by the backend at open
     * (files and block devices): a regular file by its st_dev and st_ino,
     * whatever path, symlink or hard link reached it; a block device by
     * its st_rdev, whatever device node.  Two backends over one object
     * would be two logical units with their own reservations over the
     * same blocks: the owner refuses that (backend_same_object).
     */
    enum backend_object_kind { BACKEND_OBJECT_NONE, BACKEND_OBJECT_FILE,
                               BACKEND_OBJECT_BLOCK } object_kind;
    uint64_t object_dev;     /* st_dev, or a block device's st_rdev */
    uint64_t object_ino;     /* st_ino; 0 for a block device */
};

/* Whether a and b serve the same file or block device (never for RAM, null, remote). */
bool backend_same_object(const struct lun_backend *a, const struct lun_backend *b);

/* Generic entry points; they check the op against the geometry. */
int backend_submit(struct lun_backend *be, struct backend_io *io);
void backend_close(struct lun_backend *be);

/* The size now: a resize may change it while I/O threads read it. */
static inline uint64_t backend_size(const struct lun_backend *be)
{
    return __atomic_load_n(&be->size, __ATOMIC_RELAXED);
}
/*
 * Grows the backend to size bytes (0: to what the device has grown to).
 * -EINVAL if size is not whole blocks or smaller than now (shrinking under
 * a guest loses data: refused), -ENOTSUP if the backend cannot grow, -EROFS
 * for a read-only one given a size (size 0 follows its device even so);
 * *err (VS_ERROR, the errno) says which, without the backend's name.
 */
int backend_resize(struct lun_backend *be, uint64_t size, GError **err);

/*
 * Constructors of the backends without a library of their own (SPEC
 * parsing lives in hw/block/lun-spec.c, opening in hw/block/lun-open.c;
 * files and block devices are in include/uring/backend-uring.h, iSCSI in
 * include/iscsi/backend-iscsi.h).
 * All return 0 and set *out, or -errno with *err (VS_ERROR) saying why.
 */
int backend_ram_new(uint64_t size, uint32_t block_size, struct lun_backend **out,
                    GError **err);
int backend_null_new(uint64_t size, uint32_t block_size, struct lun_backend **out,
                     GError **err);
/* null: with fill=none: a READ completes without writing its buffer. */
int backend_null_nofill_new(uint64_t size, uint32_t block_size, struct lun_backend **out,
                            GError **err);
/*
 * For tests, in a build with -Dtest_hooks=true only (hw/scsi/backend-hold.c):
 * RAM that holds every request
 * submitted while the file path exists, and completes what it holds once
 * the file is removed.  Its directory must exist.
 */
int backend_hold_new(uint64_t size, uint32_t block_size, const char *path,
                     struct lun_backend **out, GError **err);

#endif
