/*
 * The readiness protocol's receiving end the tests play (notify-receiver.h).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <glib.h>

#include "notify-receiver.h"

int notify_receiver_bind(const char *name)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    size_t len = strlen(name);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0), one = 1;

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpuint(len, <, sizeof(sa.sun_path));
    memcpy(sa.sun_path, name, len);
    if (name[0] == '@') {
        sa.sun_path[0] = '\0';
    } else {
        len++;
    }
    g_assert_cmpint(bind(fd, (struct sockaddr *)&sa,
                         (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)), ==, 0);
    g_assert_cmpint(setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)), ==, 0);
    return fd;
}

bool notify_receiver_waiting(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };

    return poll(&p, 1, 0) == 1;
}

char *notify_receiver_next(int fd, int timeout_ms, pid_t *pid)
{
    char buf[4096];
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(sizeof(struct ucred))];
    } ctl;
    struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl,
                        .msg_controllen = sizeof(ctl) };
    struct pollfd p = { .fd = fd, .events = POLLIN };
    ssize_t n;

    g_assert_cmpint(poll(&p, 1, timeout_ms), ==, 1);
    n = recvmsg(fd, &m, MSG_DONTWAIT);
    g_assert_cmpint(n, >=, 0);
    *pid = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
            struct ucred cred;

            memcpy(&cred, CMSG_DATA(c), sizeof(cred));
            *pid = cred.pid;
        }
    }
    return g_strndup(buf, (gsize)n);
}
