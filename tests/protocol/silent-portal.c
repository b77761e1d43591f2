/*
 * See silent-portal.h.  One thread polls the listener, a stop eventfd and
 * every accepted connection; what arrives is read and dropped (so a peer
 * never blocks on a full socket), nothing is ever sent.  The counts are
 * under a mutex with a condition the waiting test blocks on.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib.h>

#include "silent-portal.h"

#define MAX_CONNS 64

struct silent_portal {
    int listen_fd, stop_fd, port;
    GThread *thread;
    GMutex lock;
    GCond changed;
    unsigned accepted, closed;    /* under lock */
};

static void count(struct silent_portal *p, unsigned *what)
{
    g_mutex_lock(&p->lock);
    (*what)++;
    g_cond_broadcast(&p->changed);
    g_mutex_unlock(&p->lock);
}

static gpointer portal_thread(gpointer opaque)
{
    struct silent_portal *p = opaque;
    struct pollfd fds[MAX_CONNS + 2] = {
        { .fd = p->stop_fd, .events = POLLIN }, { .fd = p->listen_fd, .events = POLLIN },
    };
    unsigned n = 2;

    for (;;) {
        g_assert_cmpint(poll(fds, n, -1), >=, 0);
        if (fds[0].revents) {
            break;
        }
        if (fds[1].revents) {
            int fd = accept4(p->listen_fd, NULL, NULL, SOCK_CLOEXEC);

            g_assert_cmpint(fd, >=, 0);
            g_assert_cmpuint(n, <, G_N_ELEMENTS(fds));
            fds[n++] = (struct pollfd) { .fd = fd, .events = POLLIN };
            count(p, &p->accepted);
        }
        for (unsigned i = 2; i < n; i++) {
            char buf[4096];

            if (fds[i].fd < 0 || !fds[i].revents) {
                continue;
            }
            if (recv(fds[i].fd, buf, sizeof(buf), MSG_DONTWAIT) <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;     /* poll skips it */
                count(p, &p->closed);
            }
        }
    }
    for (unsigned i = 2; i < n; i++) {
        if (fds[i].fd >= 0) {
            close(fds[i].fd);
        }
    }
    return NULL;
}

struct silent_portal *silent_portal_start(void)
{
    struct silent_portal *p = g_new0(struct silent_portal, 1);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof(sa);

    p->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    g_assert_cmpint(p->listen_fd, >=, 0);
    g_assert_cmpint(bind(p->listen_fd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
    g_assert_cmpint(listen(p->listen_fd, 16), ==, 0);
    g_assert_cmpint(getsockname(p->listen_fd, (struct sockaddr *)&sa, &len), ==, 0);
    p->port = ntohs(sa.sin_port);
    p->stop_fd = eventfd(0, EFD_CLOEXEC);
    g_assert_cmpint(p->stop_fd, >=, 0);
    g_mutex_init(&p->lock);
    g_cond_init(&p->changed);
    p->thread = g_thread_new("silent-portal", portal_thread, p);
    return p;
}

int silent_portal_port(const struct silent_portal *p)
{
    return p->port;
}

static bool wait_for(struct silent_portal *p, const unsigned *what, unsigned n, int timeout_ms)
{
    gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
    bool reached;

    g_mutex_lock(&p->lock);
    while (*what < n && g_cond_wait_until(&p->changed, &p->lock, deadline)) {
    }
    reached = *what >= n;
    g_mutex_unlock(&p->lock);
    return reached;
}

bool silent_portal_wait_accepted(struct silent_portal *p, unsigned n, int timeout_ms)
{
    return wait_for(p, &p->accepted, n, timeout_ms);
}

bool silent_portal_wait_closed(struct silent_portal *p, unsigned n, int timeout_ms)
{
    return wait_for(p, &p->closed, n, timeout_ms);
}

void silent_portal_stop(struct silent_portal *p)
{
    uint64_t one = 1;

    g_assert_cmpint(write(p->stop_fd, &one, sizeof(one)), ==, sizeof(one));
    g_thread_join(p->thread);
    close(p->stop_fd);
    close(p->listen_fd);
    g_mutex_clear(&p->lock);
    g_cond_clear(&p->changed);
    g_free(p);
}
