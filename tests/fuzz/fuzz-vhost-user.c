/*
 * Fuzz target for the vhost-user message parser (hw/virtio/vhost-user-server.c):
 * the input is written as raw bytes into one end of a socketpair, with up to
 * seven file descriptors (memfds and eventfds) attached, at once or in
 * pieces between dispatches; the server reads and handles messages until
 * it ends the connection.  Replies are drained as a front-end would.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz-common.h"
#include "vhost-user-server.h"

static int fake_start(void *opaque, unsigned idx, struct virtqueue *vq)
{
    int *running = opaque;

    (*running)++;
    return 0;
}

static void fake_stop(void *opaque, unsigned idx, struct virtqueue *vq)
{
    int *running = opaque;

    (*running)--;
}

static const struct vu_dev_ops fake_ops = {
    .queue_start = fake_start,
    .queue_stop = fake_stop,
};

static void drain(int fd)
{
    char buf[4096];

    while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct vu_dev_config cfg = { .name = "fuzz-conn", .num_queues = 4, .ops = &fake_ops };
    struct fuzz_in in = { data, size };
    int sv[2], fds[7];
    unsigned nfds, mode;
    size_t piece;
    bool over = false;
    int running = 0;
    struct vu_dev *dev;

    fuzz_quiet_logs();
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        abort();
    }
    /*
     * The first byte: how many fds, and (bits 3-7) the size of the pieces
     * the rest arrives in, with the server dispatching between pieces, so
     * messages are assembled across wake-ups; 0 sends it all at once.
     */
    mode = (unsigned)fuzz_take(&in, 1);
    nfds = mode % 8;
    piece = mode >> 3 ? (mode >> 3) * 3 : SIZE_MAX;
    for (unsigned i = 0; i < nfds; i++) {
        if (i & 1) {
            fds[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        } else {
            fds[i] = memfd_create("fuzz-ram", MFD_CLOEXEC);
            if (ftruncate(fds[i], 1 << 16) < 0) {
                abort();
            }
        }
    }
    dev = vu_dev_new(sv[0], &cfg);
    /* The first message's worth of bytes carries the fds, the rest follows. */
    {
        size_t first = MIN(in.left, (size_t)12 + 8 * 4 + 8 * 32);

        if (first && vhost_user_sendmsg(sv[1], in.p, first, fds, nfds, 0) < 0) {
            abort();
        }
        in.p += first;
        in.left -= first;
    }
    for (unsigned i = 0; i < nfds; i++) {
        close(fds[i]);
    }
    while (!over && in.left) {
        size_t n = MIN(in.left, piece);

        over = vu_dev_dispatch(dev) < 0;
        drain(sv[1]);
        if (send(sv[1], in.p, n, MSG_NOSIGNAL) < 0) {
            break;      /* the server hung up */
        }
        in.p += n;
        in.left -= n;
    }
    shutdown(sv[1], SHUT_WR);
    for (int i = 0; !over && i < 4096; i++) {
        over = vu_dev_dispatch(dev) < 0;
        drain(sv[1]);
    }
    vu_dev_free(dev);
    /* Every queue the server started, it also stopped. */
    if (running != 0) {
        abort();
    }
    close(sv[1]);
    return 0;
}
