/*
 * The answer to a system call the filter neither allows nor finds
 * dangerous (include/sandbox/sandbox.h): the filter hands it to this
 * file's thread as a seccomp user notification, which answers ENOSYS and
 * counts it by call number; the owner reports the counts now and then
 * (sandbox_report_refusals), one line per report however many there were.
 * A user notification rather than a SIGSYS handler because it reaches
 * every thread alike: librados's threads block every signal, and a
 * SIGSYS the kernel finds blocked kills the process.  The thread must
 * make no call the filter refuses (it would wait for its own answer), so
 * it only polls, reads, writes its eventfds and makes the notification
 * ioctls, all allowed by sandbox.c; its buffers are allocated before.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <glib.h>
#include <seccomp.h>

#include "sandbox-int.h"
#include "vs-error.h"

/* Call numbers counted one by one; any larger one is counted as "other". */
#define COUNTED_CALLS 512

struct sandbox {
    int notify_fd;              /* the filter's listener; -1 until loaded */
    int go_fd;                  /* eventfd: the listener is there (or will not be) */
    int stop_fd;                /* eventfd: the thread is to end */
    int report_fd;              /* eventfd: refusals wait to be reported */
    GThread *thread;
    struct seccomp_notif *req;
    struct seccomp_notif_resp *resp;
    size_t req_size;
    atomic_uint counts[COUNTED_CALLS + 1];
    atomic_bool pending;
    uint64_t last_report_ns;
    bool reported;
};

static void refuse(struct sandbox *sb)
{
    unsigned slot;

    memset(sb->req, 0, sb->req_size);     /* the kernel wants it zeroed */
    if (ioctl(sb->notify_fd, SECCOMP_IOCTL_NOTIF_RECV, sb->req) < 0) {
        return;     /* the caller was interrupted or has gone */
    }
    slot = sb->req->data.nr >= 0 && sb->req->data.nr < COUNTED_CALLS ? (unsigned)sb->req->data.nr
                                                                      : COUNTED_CALLS;
    atomic_fetch_add(&sb->counts[slot], 1);
    /*
     * Signalled before the answer, so that a refusal is reportable by the
     * time the refused call returns (the owner and the tests rely on it).
     */
    if (!atomic_exchange(&sb->pending, true)) {
        eventfd_write(sb->report_fd, 1);
    }
    sb->resp->id = sb->req->id;
    sb->resp->val = 0;
    /* ENOSYS: what a library falls back from, as from a call an older kernel lacks. */
    sb->resp->error = -ENOSYS;
    sb->resp->flags = 0;
    /* ENOENT: the caller was interrupted meanwhile and will ask again. */
    (void)ioctl(sb->notify_fd, SECCOMP_IOCTL_NOTIF_SEND, sb->resp);
}

static gpointer answer_main(gpointer opaque)
{
    struct sandbox *sb = opaque;
    eventfd_t v;

    if (eventfd_read(sb->go_fd, &v) < 0 || sb->notify_fd < 0) {
        return NULL;
    }
    for (;;) {
        struct pollfd p[2] = { { .fd = sb->notify_fd, .events = POLLIN },
                               { .fd = sb->stop_fd, .events = POLLIN } };

        if (poll(p, 2, -1) < 0) {
            continue;       /* EINTR */
        }
        if (p[1].revents) {
            return NULL;
        }
        if (p[0].revents & POLLIN) {
            refuse(sb);
        } else if (p[0].revents) {
            return NULL;    /* no task is left under the filter: nothing more to answer */
        }
    }
}

int sandbox_refusals_new(struct sandbox **out, GError **err)
{
    struct seccomp_notif_sizes sizes = { 0 };
    struct sandbox *sb;
    int r;

    *out = NULL;
    /* Asked now: after the filter, this seccomp() call would be refused itself. */
    if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) < 0) {
        return vs_error_set(err, -errno, "seccomp user notifications: %s", g_strerror(errno));
    }
    sb = g_new0(struct sandbox, 1);
    sb->notify_fd = -1;
    sb->req_size = MAX(sizes.seccomp_notif, sizeof(*sb->req));
    sb->req = g_malloc0(sb->req_size);
    sb->resp = g_malloc0(MAX(sizes.seccomp_notif_resp, sizeof(*sb->resp)));
    sb->go_fd = eventfd(0, EFD_CLOEXEC);
    sb->stop_fd = eventfd(0, EFD_CLOEXEC);
    sb->report_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (sb->go_fd < 0 || sb->stop_fd < 0 || sb->report_fd < 0) {
        r = vs_error_set(err, -errno, "eventfd: %s", g_strerror(errno));
        sandbox_free(sb);
        return r;
    }
    /* Started before the filter: starting a thread makes calls it might refuse. */
    sb->thread = g_thread_new("sandbox", answer_main, sb);
    *out = sb;
    return 0;
}

void sandbox_refusals_start(struct sandbox *sb, int notify_fd)
{
    sb->notify_fd = notify_fd;
    eventfd_write(sb->go_fd, 1);
}

int sandbox_refusals_fd(const struct sandbox *sb)
{
    return sb->report_fd;
}

/* Logs the counts since the last report in one line, and clears them. */
static void report(struct sandbox *sb)
{
    g_autoptr(GString) s = g_string_new(NULL);
    unsigned total = 0;
    eventfd_t v;

    /* Cleared first: a refusal counted from now on is reported next time. */
    atomic_store(&sb->pending, false);
    (void)eventfd_read(sb->report_fd, &v);
    for (unsigned i = 0; i <= COUNTED_CALLS; i++) {
        unsigned n = atomic_exchange(&sb->counts[i], 0);
        char *name;

        if (!n) {
            continue;
        }
        total += n;
        name = i < COUNTED_CALLS ? seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, (int)i)
                                 : NULL;
        if (i < COUNTED_CALLS) {
            g_string_append_printf(s, ", %u (%s) %u times", i, name ? name : "?", n);
        } else {
            g_string_append_printf(s, ", others %u times", n);
        }
        free(name);
    }
    if (total) {
        g_warning("sandbox: refused %u system calls with ENOSYS: %s", total, s->str + 2);
    }
}

uint64_t sandbox_report_refusals(struct sandbox *sb, uint64_t now_ns)
{
    if (sb->reported && now_ns - sb->last_report_ns < SANDBOX_REPORT_INTERVAL_NS) {
        return sb->last_report_ns + SANDBOX_REPORT_INTERVAL_NS - now_ns;
    }
    if (!atomic_load(&sb->pending)) {
        return 0;
    }
    report(sb);
    sb->reported = true;
    sb->last_report_ns = now_ns;
    return 0;
}

void sandbox_free(struct sandbox *sb)
{
    if (!sb) {
        return;
    }
    if (sb->thread) {
        eventfd_write(sb->go_fd, 1);      /* in case the filter never came */
        eventfd_write(sb->stop_fd, 1);
        g_thread_join(sb->thread);
    }
    /* What is left is reported whatever the interval; further refusals get ENOSYS unlogged. */
    report(sb);
    if (sb->notify_fd >= 0) {
        close(sb->notify_fd);
    }
    for (unsigned i = 0; i < 3; i++) {
        int fd = i == 0 ? sb->go_fd : i == 1 ? sb->stop_fd : sb->report_fd;

        if (fd >= 0) {
            close(fd);
        }
    }
    g_free(sb->req);
    g_free(sb->resp);
    g_free(sb);
}
