/*
 * See proto-util.h.  The daemon is started with PR_SET_PDEATHSIG so an
 * aborted test never leaves it behind, and "listening" is established by
 * connecting (bounded retries), never by sleeping.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "proto-util.h"

void pu_daemon_init(struct pu_daemon *d)
{
    memset(d, 0, sizeof(*d));
    d->dir = g_dir_make_tmp("vhost-scsi-proto-XXXXXX", NULL);
    g_assert_nonnull(d->dir);
    d->sock = g_build_filename(d->dir, "target.sock", NULL);
    d->pidfd = -1;
}

static bool wait_exit(struct pu_daemon *d, int ms)
{
    struct pollfd p = { .fd = d->pidfd, .events = POLLIN };

    return poll(&p, 1, ms) == 1;
}

void pu_daemon_start(struct pu_daemon *d, const char *const *args)
{
    const char *bin = g_getenv("VHOST_SCSI_TARGET");
    GPtrArray *argv = g_ptr_array_new();
    struct sockaddr_un sa = { .sun_family = AF_UNIX };

    g_assert_nonnull(bin);
    g_ptr_array_add(argv, (char *)bin);
    g_ptr_array_add(argv, "--socket-path");
    g_ptr_array_add(argv, d->sock);
    for (; args && *args; args++) {
        g_ptr_array_add(argv, (char *)*args);
    }
    g_ptr_array_add(argv, NULL);

    if (d->run_as) {
        g_assert_cmpint(chown(d->dir, d->run_as, d->run_as), ==, 0);
    }
    d->pid = fork();
    g_assert_cmpint(d->pid, >=, 0);
    if (d->pid == 0) {
        if (d->run_as && (setgroups(0, NULL) < 0 || setgid(d->run_as) < 0 ||
                          setuid(d->run_as) < 0)) {
            _exit(126);
        }
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* stdout carries TAP: the daemon's output goes to stderr. */
        dup2(2, 1);
        execv(bin, (char **)argv->pdata);
        _exit(127);
    }
    g_ptr_array_free(argv, TRUE);
    d->pidfd = (int)syscall(SYS_pidfd_open, d->pid, 0);
    g_assert_cmpint(d->pidfd, >=, 0);

    g_strlcpy(sa.sun_path, d->sock, sizeof(sa.sun_path));
    for (int i = 0; i < 1000; i++) {
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int r = connect(s, (struct sockaddr *)&sa, sizeof(sa));
        int e = errno;

        close(s);
        if (r == 0) {
            return;
        }
        g_assert_true(e == ENOENT || e == ECONNREFUSED);
        g_assert_false(wait_exit(d, 10));
    }
    g_error("vhost-scsi-target did not listen on %s within 10 s", d->sock);
}

int pu_daemon_stop(struct pu_daemon *d, bool kill9)
{
    int status = -1;

    if (d->pidfd < 0) {
        return -1;
    }
    kill(d->pid, kill9 ? SIGKILL : SIGTERM);
    if (!wait_exit(d, PU_TIMEOUT_MS)) {
        g_printerr("vhost-scsi-target ignored SIGTERM for %d ms\n", PU_TIMEOUT_MS);
        kill(d->pid, SIGKILL);
    }
    waitpid(d->pid, &status, 0);
    close(d->pidfd);
    d->pidfd = -1;
    return status;
}

bool pu_daemon_alive(struct pu_daemon *d)
{
    return d->pidfd >= 0 && !wait_exit(d, 0);
}

void pu_daemon_cleanup(struct pu_daemon *d)
{
    GDir *dir = g_dir_open(d->dir, 0, NULL);
    const char *name;

    while (dir && (name = g_dir_read_name(dir))) {
        char *p = g_build_filename(d->dir, name, NULL);

        g_unlink(p);
        g_free(p);
    }
    if (dir) {
        g_dir_close(dir);
    }
    g_rmdir(d->dir);
    g_free(d->sock);
    g_free(d->dir);
}

struct vfe *pu_connect(const struct pu_daemon *d, unsigned nrq)
{
    struct vfe_config cfg = {
        .transport = VFE_VHOST_USER, .path = d->sock, .num_request_queues = nrq,
        .queue_size = 128, .mem_size = 32 << 20, .event_idx = true,
        .timeout_ms = PU_TIMEOUT_MS,
    };
    struct vfe *fe = NULL;

    g_assert_cmpint(vfe_open(&cfg, &fe), ==, 0);
    return fe;
}

struct pu_sense pu_sense_of(const struct virtio_scsi_cmd_resp *r)
{
    struct pu_sense s = { 0 };
    const uint8_t *b = r->sense;

    if (r->sense_len >= 14 && (b[0] & 0x7e) == 0x70) {
        s = (struct pu_sense){ b[2] & 0xf, b[12], b[13] };
    } else if (r->sense_len >= 4 && (b[0] & 0x7e) == 0x72) {
        s = (struct pu_sense){ b[1] & 0xf, b[2], b[3] };
    }
    return s;
}

void pu_cmd(struct vfe *fe, unsigned lun, const uint8_t *cdb, unsigned cdb_len, void *buf,
            uint32_t len, bool data_in, struct vfe_req *out)
{
    memset(out, 0, sizeof(*out));
    vfe_lun(out->lun, 0, lun);
    memcpy(out->cdb, cdb, cdb_len);
    out->data = buf;
    out->data_len = len;
    out->data_in = data_in;
    g_assert_cmpint(vfe_exec(fe, out, PU_TIMEOUT_MS), ==, 0);
}

void pu_make_ready(struct vfe *fe, unsigned lun)
{
    static const uint8_t cdb[6] = { 0 };

    for (int i = 0; i < 4; i++) {
        struct vfe_req r;

        pu_cmd(fe, lun, cdb, sizeof(cdb), NULL, 0, false, &r);
        g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
        if (r.resp.status == 0) {
            return;
        }
        g_assert_cmpuint(pu_sense_of(&r.resp).key, ==, 6);
    }
    g_assert_not_reached();
}

void pu_put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) {
        p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
    }
}

uint64_t pu_get_be(const uint8_t *p, int n)
{
    uint64_t v = 0;

    for (int i = 0; i < n; i++) {
        v = v << 8 | p[i];
    }
    return v;
}
