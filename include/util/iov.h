/*
 * Scatter-gather helpers: copying between iovec arrays and flat buffers and
 * slicing an iovec array.  Requests arrive as iovecs over guest memory and
 * headers may be split across descriptors at any byte.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_IOV_H
#define VHOST_SCSI_IOV_H

#include <stddef.h>
#include <string.h>
#include <sys/uio.h>

/* The general copies, piece by piece; iov_to_buf/iov_from_buf below are the ones to call. */
size_t iov_to_buf_sg(const struct iovec *iov, unsigned cnt, size_t offset,
                     void *buf, size_t len);
size_t iov_from_buf_sg(const struct iovec *iov, unsigned cnt, size_t offset,
                       const void *buf, size_t len);

/*
 * Copies up to len bytes starting offset bytes into iov; returns bytes
 * copied.  Inline for the common case of a span inside the first buffer
 * (a request's header or response in its own descriptor), one memcpy
 * rather than the piece walk on every request.
 */
static inline size_t iov_to_buf(const struct iovec *iov, unsigned cnt, size_t offset,
                                void *buf, size_t len)
{
    if (cnt && offset <= iov[0].iov_len && len <= iov[0].iov_len - offset) {
        memcpy(buf, (const char *)iov[0].iov_base + offset, len);
        return len;
    }
    return iov_to_buf_sg(iov, cnt, offset, buf, len);
}

static inline size_t iov_from_buf(const struct iovec *iov, unsigned cnt, size_t offset,
                                  const void *buf, size_t len)
{
    if (cnt && offset <= iov[0].iov_len && len <= iov[0].iov_len - offset) {
        memcpy((char *)iov[0].iov_base + offset, buf, len);
        return len;
    }
    return iov_from_buf_sg(iov, cnt, offset, buf, len);
}
/* Writes len zero bytes from offset; returns bytes written. */
size_t iov_memset(const struct iovec *iov, unsigned cnt, size_t offset,
                  int c, size_t len);
size_t iov_size(const struct iovec *iov, unsigned cnt);
/*
 * Makes dst describe the bytes [offset, offset+len) of src; returns the
 * number of iovecs written (<= max), -EINVAL if src is shorter than
 * offset+len, -ENOBUFS if max is too small.
 */
int iov_slice(const struct iovec *src, unsigned cnt, size_t offset, size_t len,
              struct iovec *dst, unsigned max);

#endif
