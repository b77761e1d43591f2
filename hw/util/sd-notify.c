/*
 * Readiness and status for a service manager (include/util/sd-notify.h):
 * the datagram protocol systemd documents for sd_notify(3), which is all
 * of libsystemd a daemon needs for Type=notify.  The manager tells the
 * sender by its credentials, which the kernel attaches to each datagram,
 * so a connected socket serves for every message from this process.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <glib.h>

#include "sd-notify.h"

struct sd_notify {
    int fd;
};

/* The address $NOTIFY_SOCKET names; its length, or -errno. */
static int notify_address(const char *name, struct sockaddr_un *sa)
{
    size_t len = strlen(name);

    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    if (len < 2 || (name[0] != '/' && name[0] != '@')) {
        return -EINVAL;
    }
    /* A path needs its terminating NUL in sun_path; an abstract name has none. */
    if (len > sizeof(sa->sun_path) - (name[0] == '/')) {
        return -ENAMETOOLONG;
    }
    memcpy(sa->sun_path, name, len);
    if (name[0] == '@') {
        sa->sun_path[0] = '\0';
    }
    return (int)(offsetof(struct sockaddr_un, sun_path) + len);
}

int sd_notify_open(struct sd_notify **out)
{
    g_autofree char *name = g_strdup(g_getenv("NOTIFY_SOCKET"));
    struct sockaddr_un sa;
    int len, fd;

    *out = NULL;
    if (!name) {
        return 0;
    }
    g_unsetenv("NOTIFY_SOCKET");
    len = notify_address(name, &sa);
    if (len < 0) {
        return len;
    }
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    if (connect(fd, (struct sockaddr *)&sa, (socklen_t)len) < 0) {
        int err = -errno;

        close(fd);
        return err;
    }
    *out = g_new0(struct sd_notify, 1);
    (*out)->fd = fd;
    return 0;
}

int sd_notify_send(struct sd_notify *n, const char *state)
{
    size_t len = strlen(state);
    ssize_t r;

    if (!n) {
        return 0;
    }
    do {
        r = send(n->fd, state, len, MSG_NOSIGNAL);
    } while (r < 0 && errno == EINTR);
    if (r < 0) {
        return -errno;
    }
    return (size_t)r == len ? 0 : -EMSGSIZE;
}

void sd_notify_free(struct sd_notify *n)
{
    if (n) {
        close(n->fd);
        g_free(n);
    }
}
