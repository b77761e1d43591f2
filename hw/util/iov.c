/*
 * Scatter-gather helpers over iovec arrays.  Request headers and data
 * arrive split across guest descriptors at arbitrary byte boundaries, so
 * every helper takes a byte offset into the whole array and copes with
 * zero-length elements and short arrays (it reports how much it did rather
 * than touching memory past the end).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <glib.h>

#include "iov.h"

/*
 * Shared walk: calls op on each contiguous piece of [offset, offset+len).
 * Inlined into each helper so the per-piece operation is a direct call.
 */
#define IOV_FOR_EACH_PIECE(iov, cnt, offset, len, done, piece_base, piece_len, body) \
    do {                                                                       \
        size_t skip_ = (offset);                                               \
        (done) = 0;                                                            \
        for (unsigned i_ = 0; i_ < (cnt) && (done) < (len); i_++) {            \
            size_t l_ = (iov)[i_].iov_len;                                     \
            if (skip_ >= l_) {                                                 \
                skip_ -= l_;                                                   \
                continue;                                                      \
            }                                                                  \
            char *piece_base = (char *)(iov)[i_].iov_base + skip_;             \
            size_t piece_len = MIN(l_ - skip_, (len) - (done));                \
            body;                                                              \
            skip_ = 0;                                                         \
            (done) += piece_len;                                               \
        }                                                                      \
    } while (0)

size_t iov_to_buf_sg(const struct iovec *iov, unsigned cnt, size_t offset,
                     void *buf, size_t len)
{
    size_t done;

    IOV_FOR_EACH_PIECE(iov, cnt, offset, len, done, p, n,
                       memcpy((char *)buf + done, p, n));
    return done;
}

size_t iov_from_buf_sg(const struct iovec *iov, unsigned cnt, size_t offset,
                       const void *buf, size_t len)
{
    size_t done;

    IOV_FOR_EACH_PIECE(iov, cnt, offset, len, done, p, n,
                       memcpy(p, (const char *)buf + done, n));
    return done;
}

size_t iov_memset(const struct iovec *iov, unsigned cnt, size_t offset,
                  int c, size_t len)
{
    size_t done;

    IOV_FOR_EACH_PIECE(iov, cnt, offset, len, done, p, n, memset(p, c, n));
    return done;
}

size_t iov_size(const struct iovec *iov, unsigned cnt)
{
    size_t total = 0;

    for (unsigned i = 0; i < cnt; i++) {
        total += iov[i].iov_len;
    }
    return total;
}

int iov_slice(const struct iovec *src, unsigned cnt, size_t offset, size_t len,
              struct iovec *dst, unsigned max)
{
    size_t done;
    unsigned n = 0;
    bool overflow = false;

    IOV_FOR_EACH_PIECE(src, cnt, offset, len, done, p, l, {
        if (n == max) {
            overflow = true;
            break;
        }
        dst[n].iov_base = p;
        dst[n].iov_len = l;
        n++;
    });
    if (overflow) {
        return -ENOBUFS;
    }
    if (done < len) {
        return -EINVAL;
    }
    return n;
}
