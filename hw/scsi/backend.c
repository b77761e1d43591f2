/*
 * Generic backend entry points.  backend_submit() is the one place where an
 * I/O request is checked against the LUN's geometry before a backend sees
 * it, so backends can trust offsets, lengths and alignment; a failure here
 * is a bug in the caller (the SCSI layer checks guest values first), and is
 * logged as such.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <inttypes.h>

#include <glib.h>

#include "backend.h"

static const char *op_name(enum backend_op op)
{
    switch (op) {
    case BACKEND_READ: return "read";
    case BACKEND_WRITE: return "write";
    case BACKEND_FLUSH: return "flush";
    case BACKEND_DISCARD: return "discard";
    case BACKEND_WRITE_ZEROES: return "write-zeroes";
    }
    return "unknown op";
}

static int reject(const struct lun_backend *be, const struct backend_io *io, int err,
                  const char *why)
{
    g_warning("%s: %s of %" PRIu64 " bytes at %" PRIu64 " rejected: %s", be->name,
              op_name(io->op), io->len, io->offset, why);
    return err;
}

int backend_submit(struct lun_backend *be, struct backend_io *io)
{
    uint64_t total = 0;

    if (!io->complete) {
        return reject(be, io, -EINVAL, "no completion callback");
    }
    switch (io->op) {
    case BACKEND_FLUSH:
        return be->ops->submit(be, io);
    case BACKEND_READ:
    case BACKEND_WRITE:
        for (unsigned i = 0; i < io->iovcnt; i++) {
            total += io->iov[i].iov_len;
        }
        if (total != io->len) {
            return reject(be, io, -EINVAL, "length differs from the iovec size");
        }
        break;
    case BACKEND_DISCARD:
        if (!be->can_discard) {
            return -EOPNOTSUPP;     /* a capability answer, not a bug */
        }
        break;
    case BACKEND_WRITE_ZEROES:
        break;
    default:
        return reject(be, io, -EINVAL, "unknown operation");
    }
    if (io->op != BACKEND_READ && be->read_only) {
        return reject(be, io, -EROFS, "read-only backend");
    }
    if (io->offset % be->block_size || io->len % be->block_size) {
        return reject(be, io, -EINVAL, "not block aligned");
    }
    if (io->offset > backend_size(be) || io->len > backend_size(be) - io->offset) {
        return reject(be, io, -EINVAL, "beyond the end of the device");
    }
    return be->ops->submit(be, io);
}

bool backend_same_object(const struct lun_backend *a, const struct lun_backend *b)
{
    return a->object_kind != BACKEND_OBJECT_NONE && a->object_kind == b->object_kind &&
           a->object_dev == b->object_dev && a->object_ino == b->object_ino;
}

void backend_close(struct lun_backend *be)
{
    if (be) {
        be->ops->close(be);
    }
}

int backend_resize(struct lun_backend *be, uint64_t size, GError **err)
{
    uint64_t now = backend_size(be), got = 0;
    int ret;

    if (size && size < now) {
        return vs_error_set(err, -EINVAL, "%" PRIu64 " bytes is smaller than now (%" PRIu64
                            " bytes): shrinking is refused", size, now);
    }
    if (size && size % be->block_size) {
        return vs_error_set(err, -EINVAL, "%" PRIu64 " bytes is not a whole number of "
                            "%" PRIu32 "-byte blocks", size, be->block_size);
    }
    /* Following a device that grew underneath is no write of ours. */
    if (size && be->read_only) {
        return vs_error_set(err, -EROFS, "a read-only backend cannot grow");
    }
    if (!be->ops->resize) {
        return vs_error_set(err, -ENOTSUP, "a %s backend cannot grow", be->ops->name);
    }
    if (size == now) {
        return 0;
    }
    ret = be->ops->resize(be, size, &got, err);
    if (ret < 0) {
        return ret;
    }
    got -= got % be->block_size;
    if (got < now) {
        return vs_error_set(err, -EINVAL, "the device is now %" PRIu64 " bytes, smaller than %"
                            PRIu64 "; keeping the old size", got, now);
    }
    __atomic_store_n(&be->size, got, __ATOMIC_RELAXED);
    g_message("%s: resized from %" PRIu64 " to %" PRIu64 " bytes", be->name, now, got);
    return 0;
}
