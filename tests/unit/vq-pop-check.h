/*
 * What the virtqueue tests of both ring layouts ask of any pop, whatever
 * the guest wrote into the ring (random, or rewritten while it is read):
 * a chain inside guest memory and the caller's iovecs, an empty ring, or
 * a cleanly broken queue with one of vq_pop's documented errors.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_VQ_POP_CHECK_H
#define VHOST_SCSI_VQ_POP_CHECK_H

#include <errno.h>

#include <glib.h>

#include "guest-mem.h"
#include "iov.h"
#include "virtqueue.h"

/* vq_pop's r on vq: 1, 0, or a documented error that broke the queue.  True if a chain came. */
static inline bool vq_pop_result_sane(const struct virtqueue *vq, int r)
{
    if (r <= 0) {
        g_assert_true(r == 0 || r == -EINVAL || r == -ELOOP || r == -EFAULT || r == -ENOBUFS);
        g_assert_true(r == 0 || vq->broken);
        return false;
    }
    g_assert_cmpint(r, ==, 1);
    return true;
}

/* A popped chain: at most max_iov iovecs, each inside one region of mem, adding up to its lengths. */
static inline void vq_assert_chain_in_guest(const struct guest_mem *mem, const struct vq_elem *e,
                                            unsigned max_iov)
{
    g_assert_cmpuint(e->out_num + e->in_num, <=, max_iov);
    /* in_sg follows out_sg in the caller's array. */
    for (unsigned i = 0; i < e->out_num + e->in_num; i++) {
        uint64_t gpa;

        g_assert_cmpuint(guest_mem_host_gpa(mem, e->out_sg[i].iov_base, &gpa), >=,
                         e->out_sg[i].iov_len);
    }
    g_assert_cmpuint(iov_size(e->out_sg, e->out_num), ==, e->out_len);
    g_assert_cmpuint(iov_size(e->in_sg, e->in_num), ==, e->in_len);
}

#endif
