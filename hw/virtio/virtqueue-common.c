/*
 * What the two ring layouts (virtqueue.c split, virtqueue-packed.c packed)
 * both call and that depends on neither: marking a malformed queue
 * broken, writing the call eventfd, hanging up on a front-end whose
 * eventfd blocks, checking that a ring lies in guest memory, and the
 * resubmission state a restart leaves.  It calls neither layout, so the
 * virtqueue's files call one way: virtqueue.c to virtqueue-packed.c, both
 * to this file.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <glib.h>

#include "notify-fd.h"
#include "virtqueue.h"
#include "virtqueue-int.h"

/*
 * The front-end made one of its eventfds blocking and filled it (see
 * notify-fd.c): stop serving the ring and hang up on the front-end, the
 * way the SIGBUS guard does, so the main loop drops the connection.
 */
static void __attribute__((cold)) notify_fd_hostile(struct virtqueue *vq, const char *what)
{
    log_limit_warning(vq->log_limit,
                      "%s: the front-end's %s eventfd blocked (its O_NONBLOCK was cleared and "
                      "the counter filled); stopping the queue and dropping the connection",
                      vq->name, what);
    vq->broken = true;
    if (vq->mem && vq->mem->owner_fd >= 0) {
        shutdown(vq->mem->owner_fd, SHUT_RDWR);
    }
}

/* Logs the first malformation only: a hostile guest must not flood the log. */
int vq_fail(struct virtqueue *vq, int err, const char *fmt, ...)
{
    if (!vq->broken) {
        va_list ap;
        char *msg;

        va_start(ap, fmt);
        msg = g_strdup_vprintf(fmt, ap);
        va_end(ap);
        log_limit_warning(vq->log_limit, "%s: malformed virtqueue, stopping it: %s", vq->name, msg);
        g_free(msg);
        vq->broken = true;
        if (vq->err_fd >= 0) {
            /* The front-end reports it (QEMU: "vhost vring error"); best effort. */
            int r = notify_fd_signal(vq->err_fd);

            if (r == -ETIMEDOUT) {
                notify_fd_hostile(vq, "error");
            } else if (r < 0) {
                g_debug("%s: writing error eventfd: %s", vq->name, g_strerror(-r));
            }
        }
    }
    return err;
}

bool vq_signal_call(struct virtqueue *vq)
{
    int r;

    if (vq->call_fd < 0) {
        return false;
    }
    r = notify_fd_signal(vq->call_fd);
    if (r == -ETIMEDOUT) {
        notify_fd_hostile(vq, "call");
        return false;
    }
    if (r < 0 && r != -EAGAIN) {
        log_limit_warning(vq->log_limit, "%s: writing call eventfd %d failed: %s", vq->name,
                          vq->call_fd, g_strerror(-r));
        return false;
    }
    vq->notifications++;
    return true;
}

bool vq_host_range_in_mem(const struct guest_mem *mem, const void *p, uint64_t len)
{
    for (unsigned i = 0; i < mem->nregions; i++) {
        const struct guest_mem_region *r = &mem->r[i];
        uintptr_t start = (uintptr_t)r->host, addr = (uintptr_t)p;

        if (addr >= start && addr - start < r->size) {
            return len <= r->size - (addr - start);
        }
    }
    return false;
}

void vq_cleanup(struct virtqueue *vq)
{
    g_free(vq->resubmit);
    vq->resubmit = NULL;
    vq->resubmit_num = 0;
    g_free(vq->resubmit_record);
    vq->resubmit_record = NULL;
    vq->inflight_region = NULL;
    vq->inflight_packed = NULL;
    vq->track_batch_n = 0;
}

/* Newest first: vq_pop takes from the end of the array, oldest first. */
static int resubmit_cmp(const void *a, const void *b)
{
    const struct vq_resubmit *x = a, *y = b;

    return x->counter < y->counter ? 1 : x->counter > y->counter ? -1 : 0;
}

void vq_resubmit_take(struct virtqueue *vq, struct vq_resubmit *list, unsigned count)
{
    qsort(list, count, sizeof(list[0]), resubmit_cmp);
    vq->resubmit = g_new(uint16_t, count);
    for (unsigned k = 0; k < count; k++) {
        vq->resubmit[k] = list[k].head;
    }
    vq->resubmit_num = count;
    vq->inflight_counter = list[0].counter;
    g_free(list);
    log_limit_message(vq->log_limit,
                      "%s: resubmitting %u in-flight requests from the previous back-end", vq->name,
                      count);
}
