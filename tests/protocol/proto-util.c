/*
 * See proto-util.h.  Children are forked and exec'd here rather than
 * through g_spawn: GLib closes a source fd equal to its target, so handing
 * it fd 2 for the child's stdout/stderr leaves the child without fd 2.
 * They get PR_SET_PDEATHSIG so an aborted test never leaves them behind,
 * and "listening" is established by connecting (bounded retries), never
 * by sleeping.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "control-client.h"
#include "control-server.h"
#include "proto-util.h"
#include "scsi-cmd.h"

/* iSCSI LUNs log in before the daemon listens: allow for a slow target. */
#define PU_LISTEN_MS 15000

void pu_spawn_opts(struct pu_proc *p, const char *const *argv, const struct pu_spawn_opts *o)
{
    p->pid = fork();
    g_assert_cmpint(p->pid, >=, 0);
    if (p->pid == 0) {
        if (o->run_as &&
            (setgroups(0, NULL) < 0 || setgid(o->run_as) < 0 || setuid(o->run_as) < 0)) {
            _exit(126);
        }
        if (o->nofile) {
            struct rlimit rl = { .rlim_cur = o->nofile, .rlim_max = o->nofile };

            if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
                _exit(126);
            }
        }
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (o->out_fd > 2) {
            dup2(o->out_fd, 2);
        }
        /* stdout carries TAP: the child's output goes to stderr. */
        dup2(2, 1);
        if (o->pass_fd > 2) {
            if (o->pass_fd == o->pass_as) {
                fcntl(o->pass_fd, F_SETFD, 0);
            } else if (dup2(o->pass_fd, o->pass_as) < 0) {
                _exit(126);
            }
        }
        /* nothing of ours (meson's pipes, other children's sockets) leaks into it */
        if (o->pass_fd > 2 && o->pass_as > 2) {
            if (o->pass_as > 3) {
                close_range(3, o->pass_as - 1, 0);
            }
            close_range(o->pass_as + 1, ~0u, 0);
        } else {
            close_range(3, ~0u, 0);
        }
        execv(argv[0], (char **)argv);
        _exit(127);
    }
    p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
    g_assert_cmpint(p->pidfd, >=, 0);
}

void pu_spawn(struct pu_proc *p, const char *const *argv)
{
    const struct pu_spawn_opts o = { 0 };

    pu_spawn_opts(p, argv, &o);
}

bool pu_proc_exited(struct pu_proc *p, int ms)
{
    struct pollfd pf = { .fd = p->pidfd, .events = POLLIN };

    return poll(&pf, 1, ms) == 1;
}

int pu_proc_stop(struct pu_proc *p, int sig)
{
    int status = -1;

    if (p->pidfd < 0) {
        return -1;
    }
    kill(p->pid, sig);
    if (!pu_proc_exited(p, PU_TIMEOUT_MS)) {
        g_printerr("pid %d ignored signal %d for %d ms\n", (int)p->pid, sig, PU_TIMEOUT_MS);
        kill(p->pid, SIGKILL);
    }
    waitpid(p->pid, &status, 0);
    close(p->pidfd);
    p->pidfd = -1;
    return status;
}

void pu_daemon_init(struct pu_daemon *d)
{
    memset(d, 0, sizeof(*d));
    d->dir = g_dir_make_tmp("vhost-scsi-proto-XXXXXX", NULL);
    g_assert_nonnull(d->dir);
    d->sock = g_build_filename(d->dir, "target.sock", NULL);
    d->log = g_build_filename(d->dir, "daemon.log", NULL);
    d->proc.pidfd = -1;
}

bool pu_daemon_try_start(struct pu_daemon *d, const char *const *args, int *status)
{
    const char *bin = g_getenv("VHOST_SCSI_TARGET");
    GPtrArray *argv = g_ptr_array_new();
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    gint64 deadline = g_get_monotonic_time() + PU_LISTEN_MS * G_TIME_SPAN_MILLISECOND;
    struct pu_spawn_opts o = { 0 };

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
    o.run_as = d->run_as;
    o.nofile = d->nofile;
    if (d->capture_log) {
        o.out_fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        g_assert_cmpint(o.out_fd, >, 2);
    }
    pu_spawn_opts(&d->proc, (const char *const *)argv->pdata, &o);
    if (o.out_fd > 2) {
        close(o.out_fd);
    }
    g_ptr_array_free(argv, TRUE);

    g_strlcpy(sa.sun_path, d->sock, sizeof(sa.sun_path));
    while (g_get_monotonic_time() < deadline) {
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int r = connect(s, (struct sockaddr *)&sa, sizeof(sa));
        int e = errno;

        close(s);
        if (r == 0) {
            return true;    /* a probe: the daemon sees a front-end hang up at once */
        }
        g_assert_true(e == ENOENT || e == ECONNREFUSED);
        if (pu_proc_exited(&d->proc, 10)) {
            waitpid(d->proc.pid, status, 0);
            close(d->proc.pidfd);
            d->proc.pidfd = -1;
            return false;
        }
    }
    g_error("vhost-scsi-target did not listen on %s within %d s", d->sock, PU_LISTEN_MS / 1000);
}

void pu_daemon_start(struct pu_daemon *d, const char *const *args)
{
    int status;

    if (!pu_daemon_try_start(d, args, &status)) {
        g_error("vhost-scsi-target exited with status 0x%x before listening on %s", status,
                d->sock);
    }
}

int pu_daemon_stop(struct pu_daemon *d, bool kill9)
{
    return pu_proc_stop(&d->proc, kill9 ? SIGKILL : SIGTERM);
}

bool pu_daemon_alive(struct pu_daemon *d)
{
    return d->proc.pidfd >= 0 && !pu_proc_exited(&d->proc, 0);
}

int pu_wait_hangup(struct vfe *fe, int timeout_ms)
{
    int64_t deadline = g_get_monotonic_time() + (int64_t)timeout_ms * 1000;
    struct pollfd p = { .fd = vfe_conn_fd(fe), .events = POLLIN };

    for (;;) {
        int64_t left = (deadline - g_get_monotonic_time()) / 1000;
        char buf[256];
        ssize_t n;

        if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
            return -ETIMEDOUT;
        }
        n = recv(p.fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            return 0;
        }
    }
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
    g_free(d->log);
    g_free(d->dir);
}

int pu_free_tcp_port(void)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof(sa);
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    g_assert_cmpint(bind(s, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
    g_assert_cmpint(getsockname(s, (struct sockaddr *)&sa, &len), ==, 0);
    close(s);
    return ntohs(sa.sin_port);
}

size_t pu_daemon_log_size(const struct pu_daemon *d)
{
    struct stat st;

    return stat(d->log, &st) == 0 ? (size_t)st.st_size : 0;
}

char *pu_daemon_log_read(const struct pu_daemon *d, size_t from, size_t max)
{
    int fd = open(d->log, O_RDONLY | O_CLOEXEC);
    char *buf = g_malloc(max + 1);
    ssize_t n = fd < 0 ? 0 : pread(fd, buf, max, (off_t)from);

    buf[n > 0 ? n : 0] = 0;
    if (fd >= 0) {
        close(fd);
    }
    return buf;
}

/* Calls fn on each complete line from offset from on; stops early when it returns true. */
static bool log_scan(const struct pu_daemon *d, size_t from,
                     bool (*fn)(const char *line, void *opaque), void *opaque)
{
    int fd = open(d->log, O_RDONLY | O_CLOEXEC);
    GString *line = g_string_new(NULL);
    char buf[65536];
    bool stop = false;
    ssize_t n;

    if (fd < 0) {
        g_string_free(line, TRUE);
        return false;
    }
    while (!stop && (n = pread(fd, buf, sizeof(buf), (off_t)from)) > 0) {
        from += (size_t)n;
        for (ssize_t i = 0; i < n && !stop; i++) {
            if (buf[i] == '\n') {
                stop = fn(line->str, opaque);
                g_string_truncate(line, 0);
            } else {
                g_string_append_c(line, buf[i]);
            }
        }
    }
    close(fd);
    g_string_free(line, TRUE);
    return stop;
}

struct log_match {
    GRegex *re;
    unsigned count;
    char *found;        /* group 1 (or the whole match) of a matching line */
};

static struct log_match *log_match_new(const char *pattern)
{
    struct log_match *m = g_new0(struct log_match, 1);

    m->re = g_regex_new(pattern, G_REGEX_OPTIMIZE, 0, NULL);
    g_assert_nonnull(m->re);
    return m;
}

static void log_match_free(struct log_match *m)
{
    g_regex_unref(m->re);
    g_free(m->found);
    g_free(m);
}

static bool count_line(const char *line, void *opaque)
{
    struct log_match *m = opaque;

    m->count += g_regex_match(m->re, line, 0, NULL);
    return false;
}

/* Keeps the match of the latest matching line; stops at the first when stop_at_first. */
static bool match_line(struct log_match *m, const char *line, bool stop_at_first)
{
    GMatchInfo *mi;
    bool found = g_regex_match(m->re, line, 0, &mi);

    if (found) {
        g_free(m->found);
        m->found = g_match_info_fetch(mi, g_regex_get_capture_count(m->re) ? 1 : 0);
    }
    g_match_info_free(mi);
    return found && stop_at_first;
}

static bool find_first(const char *line, void *opaque)
{
    return match_line(opaque, line, true);
}

static bool find_last(const char *line, void *opaque)
{
    return match_line(opaque, line, false);
}

unsigned pu_daemon_log_count(const struct pu_daemon *d, size_t from, const char *pattern)
{
    struct log_match *m = log_match_new(pattern);
    unsigned n;

    log_scan(d, from, count_line, m);
    n = m->count;
    log_match_free(m);
    return n;
}

char *pu_daemon_log_find(const struct pu_daemon *d, size_t from, const char *pattern)
{
    struct log_match *m = log_match_new(pattern);
    char *s;

    log_scan(d, from, find_last, m);
    s = g_steal_pointer(&m->found);
    log_match_free(m);
    return s;
}

int pu_daemon_log_wait(const struct pu_daemon *d, size_t from, const char *pattern,
                       int timeout_ms)
{
    int64_t deadline = g_get_monotonic_time() + (int64_t)timeout_ms * 1000;
    struct log_match *m = log_match_new(pattern);
    int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    int ret = -ETIMEDOUT;

    g_assert_cmpint(in, >=, 0);
    /* Watched before each look, so a line written in between still wakes us. */
    g_assert_cmpint(inotify_add_watch(in, d->log, IN_MODIFY), >=, 0);
    for (;;) {
        struct pollfd p = { .fd = in, .events = POLLIN };
        int64_t left = (deadline - g_get_monotonic_time()) / 1000;
        char ev[4096];

        if (log_scan(d, from, find_first, m)) {
            ret = 0;
            break;
        }
        if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
            break;
        }
        while (read(in, ev, sizeof(ev)) > 0) {
        }
    }
    close(in);
    log_match_free(m);
    return ret;
}

/* utime + stime from a /proc stat line; its comm (between the parentheses) to comm. */
static int64_t stat_ticks(const char *path, char *comm, size_t comm_len)
{
    char *text = NULL, *open_paren, *p;
    unsigned long long ut, st;
    int64_t ret = -1;

    /* pid (comm) state ppid ... : utime and stime are fields 14 and 15 */
    if (g_file_get_contents(path, &text, NULL, NULL) && (open_paren = strchr(text, '(')) &&
        (p = strrchr(text, ')')) &&
        sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
               &st) == 2) {
        ret = (int64_t)(ut + st);
        *p = 0;
        g_strlcpy(comm, open_paren + 1, comm_len);
    }
    g_free(text);
    return ret;
}

int64_t pu_proc_cpu_ticks(pid_t pid, const char *skip)
{
    char *path = g_strdup_printf("/proc/%d/task", (int)pid);
    GDir *dir = g_dir_open(path, 0, NULL);
    const char *tid;
    int64_t sum = 0;

    if (!skip) {
        /* The process's own line also counts threads that have exited. */
        char *stat = g_strdup_printf("/proc/%d/stat", (int)pid);
        char comm[32];

        sum = stat_ticks(stat, comm, sizeof(comm));
        g_free(stat);
        if (dir) {
            g_dir_close(dir);
        }
        g_free(path);
        return sum;
    }
    if (!dir) {
        g_free(path);
        return -1;
    }
    while ((tid = g_dir_read_name(dir))) {
        char *stat = g_build_filename(path, tid, "stat", NULL);
        char comm[32] = "";
        int64_t t = stat_ticks(stat, comm, sizeof(comm));

        if (t > 0 && !(skip && g_str_has_prefix(comm, skip))) {
            sum += t;
        }
        g_free(stat);
    }
    g_dir_close(dir);
    g_free(path);
    return sum;
}

int64_t pu_proc_status_kb(pid_t pid, const char *field)
{
    char *path = g_strdup_printf("/proc/%d/status", (int)pid);
    char *text = NULL;
    int64_t ret = -1;

    if (g_file_get_contents(path, &text, NULL, NULL)) {
        char **lines = g_strsplit(text, "\n", -1);
        size_t flen = strlen(field);

        for (char **l = lines; *l && ret < 0; l++) {
            long long v;

            if (!strncmp(*l, field, flen) && (*l)[flen] == ':' &&
                sscanf(*l + flen + 1, "%lld", &v) == 1) {
                ret = v;
            }
        }
        g_strfreev(lines);
    }
    g_free(text);
    g_free(path);
    return ret;
}

bool pu_proc_in_fifo_open(pid_t pid)
{
    g_autofree char *tasks = g_strdup_printf("/proc/%d/task", (int)pid);
    g_autoptr(GDir) dir = g_dir_open(tasks, 0, NULL);
    const char *tid;

    while (dir && (tid = g_dir_read_name(dir))) {
        g_autofree char *wchan_path = g_strdup_printf("%s/%s/wchan", tasks, tid);
        g_autofree char *sys_path = g_strdup_printf("%s/%s/syscall", tasks, tid);
        g_autofree char *wchan = NULL, *sys = NULL;
        g_autofree char *openat = g_strdup_printf("%d ", SYS_openat);

        if (!g_file_get_contents(wchan_path, &wchan, NULL, NULL)) {
            continue;
        }
        if (!strcmp(wchan, "wait_for_partner")) {
            return true;
        }
        /* Without kernel symbols wchan says 0: a thread blocked in openat is the one. */
        if (!strcmp(wchan, "0") && g_file_get_contents(sys_path, &sys, NULL, NULL) &&
            g_str_has_prefix(sys, openat)) {
            return true;
        }
    }
    return false;
}

int pu_proc_fd_count(pid_t pid)
{
    char *path = g_strdup_printf("/proc/%d/fd", (int)pid);
    GDir *dir = g_dir_open(path, 0, NULL);
    int n = 0;

    g_free(path);
    if (!dir) {
        return -1;
    }
    while (g_dir_read_name(dir)) {
        n++;
    }
    g_dir_close(dir);
    return n;
}

static struct vfe *connect_path(const char *path, struct vfe_config *cfg)
{
    struct vfe *fe = NULL;

    cfg->transport = VFE_VHOST_USER;
    cfg->path = path;
    if (!cfg->timeout_ms) {
        cfg->timeout_ms = PU_TIMEOUT_MS;
    }
    g_assert_cmpint(vfe_open(cfg, &fe), ==, 0);
    g_assert_nonnull(fe);
    return fe;
}

struct vfe *pu_connect_cfg(const struct pu_daemon *d, struct vfe_config *cfg)
{
    return connect_path(d->sock, cfg);
}

struct vfe *pu_connect_at(const char *path, unsigned nrq)
{
    struct vfe_config cfg = {
        .num_request_queues = nrq, .queue_size = 128, .mem_size = 32 << 20, .event_idx = true,
    };

    return connect_path(path, &cfg);
}

struct vfe *pu_connect(const struct pu_daemon *d, unsigned nrq)
{
    return pu_connect_at(d->sock, nrq);
}

struct pu_sense pu_sense_of(const struct virtio_scsi_cmd_resp *r)
{
    struct sc_sense s = sc_sense_of(r->sense, MIN(r->sense_len, sizeof(r->sense)));

    return (struct pu_sense){ s.key, s.asc, s.ascq, s.code };
}

void pu_req_prep(struct vfe_req *out, unsigned target, unsigned lun, const uint8_t *cdb,
                 unsigned cdb_len, void *buf, uint32_t len, bool data_in)
{
    memset(out, 0, sizeof(*out));
    vfe_lun(out->lun, target, lun);
    memcpy(out->cdb, cdb, cdb_len);
    out->data = buf;
    out->data_len = len;
    out->data_in = data_in;
}

void pu_cmd(struct vfe *fe, unsigned lun, const uint8_t *cdb, unsigned cdb_len, void *buf,
            uint32_t len, bool data_in, struct vfe_req *out)
{
    pu_req_prep(out, 0, lun, cdb, cdb_len, buf, len, data_in);
    g_assert_cmpint(vfe_exec(fe, out, PU_TIMEOUT_MS), ==, 0);
}

struct vfe_req pu_run(struct vfe *fe, unsigned target, unsigned lun, const uint8_t *cdb,
                      unsigned cdb_len, void *buf, uint32_t len, bool data_in)
{
    struct vfe_req r;

    pu_req_prep(&r, target, lun, cdb, cdb_len, buf, len, data_in);
    g_assert_cmpint(vfe_exec(fe, &r, PU_TIMEOUT_MS), ==, 0);
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
    return r;
}

struct vfe_req pu_tur(struct vfe *fe, unsigned target, unsigned lun)
{
    uint8_t cdb[SC_CDB_MAX];
    unsigned cdb_len = sc_cdb(scsi_cdb_testunitready(), cdb);
    struct vfe_req r;

    pu_req_prep(&r, target, lun, cdb, cdb_len, NULL, 0, false);
    g_assert_cmpint(vfe_exec(fe, &r, PU_TIMEOUT_MS), ==, 0);
    return r;
}

void pu_make_ready(struct vfe *fe, unsigned lun)
{
    for (int i = 0; i < 4; i++) {
        struct vfe_req r = pu_tur(fe, 0, lun);

        g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
        if (r.resp.status == 0) {
            return;
        }
        g_assert_cmpuint(r.resp.status, ==, 2);
        g_assert_cmpuint(pu_sense_of(&r.resp).key, ==, SCSI_SENSE_UNIT_ATTENTION);
    }
    g_assert_not_reached();
}

unsigned pu_report_luns(struct vfe *fe, uint16_t *ids, unsigned max)
{
    uint8_t cdb[SC_CDB_MAX];
    unsigned cdb_len = sc_cdb(scsi_reportluns_cdb(0, 256), cdb);
    uint8_t *buf = vfe_alloc(fe, 256, 64);
    struct sc_datain d = { 0 };
    struct scsi_reportluns_list *list;
    struct vfe_req r;
    unsigned n;

    pu_cmd(fe, 0, cdb, cdb_len, buf, 256, true, &r);
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
    g_assert_cmpuint(r.resp.status, ==, 0);
    list = sc_datain_decode(&d, cdb, cdb_len, buf, 256 - r.resp.resid);
    g_assert_nonnull(list);
    n = MIN(list->num, max);
    for (unsigned i = 0; i < n; i++) {
        ids[i] = list->luns[i];
    }
    sc_datain_free(&d);
    vfe_free(fe, buf);
    return n;
}

int pu_inquiry_qualifier(struct vfe *fe, unsigned lun)
{
    uint8_t cdb[SC_CDB_MAX];
    unsigned cdb_len = sc_cdb(scsi_cdb_inquiry(0, 0, 36), cdb);
    uint8_t *buf = vfe_alloc(fe, 36, 64);
    struct scsi_inquiry_standard *inq;
    struct sc_datain d;
    struct vfe_req r;
    int q;

    pu_cmd(fe, lun, cdb, cdb_len, buf, 36, true, &r);
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
    g_assert_cmpuint(r.resp.status, ==, 0);
    inq = sc_datain_decode(&d, cdb, cdb_len, buf, 36);
    g_assert_nonnull(inq);
    q = inq->qualifier;
    if (q == SCSI_INQUIRY_PERIPHERAL_QUALIFIER_CONNECTED) {
        g_assert_cmpint(inq->device_type, ==, SCSI_INQUIRY_PERIPHERAL_DEVICE_TYPE_DIRECT_ACCESS);
    }
    sc_datain_free(&d);
    vfe_free(fe, buf);
    return q;
}

void pu_read_capacity16(struct vfe *fe, unsigned lun, uint64_t *blocks, uint32_t *bsize)
{
    uint8_t cdb[SC_CDB_MAX];
    unsigned cdb_len = sc_cdb(scsi_cdb_readcapacity16(), cdb);   /* allocation length 32 */
    uint8_t *buf = vfe_alloc(fe, 32, 64);
    struct sc_datain d;
    struct scsi_readcapacity16 *rc;
    struct vfe_req r;

    g_assert_nonnull(buf);
    pu_cmd(fe, lun, cdb, cdb_len, buf, 32, true, &r);
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
    g_assert_cmpuint(r.resp.status, ==, 0);
    rc = sc_datain_decode(&d, cdb, cdb_len, buf, 32);
    g_assert_nonnull(rc);
    *blocks = rc->returned_lba + 1;
    *bsize = rc->block_length;
    sc_datain_free(&d);
    vfe_free(fe, buf);
}

void pu_make_rw16(struct vfe_req *r, bool write, uint64_t lba, uint32_t blocks)
{
    /* Block size 1: the builders' transfer length is xferlen / blocksize. */
    memset(r->cdb, 0, sizeof(r->cdb));
    sc_cdb(write ? scsi_cdb_write16(lba, blocks, 1, 0, 0, 0, 0, 0)
                 : scsi_cdb_read16(lba, blocks, 1, 0, 0, 0, 0, 0), r->cdb);
    r->data_in = !write;
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

uint8_t pu_pattern(uint64_t seed, uint64_t offset)
{
    uint64_t x = (seed + offset / 8) * 0x9e3779b97f4a7c15ull;

    return (uint8_t)(x >> (56 - 8 * (offset % 8)));
}

void pu_pattern_fill(uint8_t *p, size_t len, uint64_t seed, uint64_t offset)
{
    for (size_t j = 0; j < len; j++) {
        p[j] = pu_pattern(seed, offset + j);
    }
}

size_t pu_pattern_mismatch(const uint8_t *p, size_t len, uint64_t seed, uint64_t offset)
{
    for (size_t j = 0; j < len; j++) {
        if (p[j] != pu_pattern(seed, offset + j)) {
            return j;
        }
    }
    return len;
}

void pu_batch_done(struct vfe_req *r)
{
    ((struct pu_batch *)r->opaque)->done++;
}

void pu_batch_wait(struct vfe *fe, const struct pu_batch *b, unsigned n, int timeout_ms)
{
    while (b->done < n) {
        g_assert_cmpint(vfe_poll(fe, timeout_ms), >, 0);
    }
}

uint64_t pu_write_read_compare(struct vfe *fe, const struct pu_rw_spec *s)
{
    int timeout_ms = s->timeout_ms ? s->timeout_ms : PU_TIMEOUT_MS;
    uint64_t blocks, slots, distance;
    uint32_t bsize, nb;
    struct vfe_req *reqs;
    struct pu_batch b = { 0 };

    pu_read_capacity16(fe, s->lun, &blocks, &bsize);
    g_assert_cmpuint(s->io_bytes % bsize, ==, 0);
    nb = s->io_bytes / bsize;
    slots = blocks / nb;
    g_assert_cmpuint(slots, >=, s->n_io);
    /* stride across the LUN so requests land far apart */
    distance = slots / s->n_io * nb;

    reqs = g_new0(struct vfe_req, s->n_io);
    for (unsigned i = 0; i < s->n_io; i++) {
        reqs[i].data = vfe_alloc(fe, s->io_bytes, 4096);
        g_assert_nonnull(reqs[i].data);
        reqs[i].data_len = s->io_bytes;
        reqs[i].queue = i % s->queues;
        reqs[i].opaque = &b;
        reqs[i].complete = pu_batch_done;
        reqs[i].tag = i + 1;
        vfe_lun(reqs[i].lun, 0, s->lun);
    }
    for (int pass = s->verify_only ? 1 : 0; pass < 2; pass++) {
        bool write = pass == 0;

        b.done = 0;
        if (s->log) {
            vfe_log_clear(fe);
        }
        for (unsigned i = 0; i < s->n_io; i++) {
            uint64_t lba = i * distance;

            if (write) {
                pu_pattern_fill(reqs[i].data, s->io_bytes, s->seed, lba * bsize);
            } else {
                memset(reqs[i].data, 0xa5, s->io_bytes);
            }
            memset(&reqs[i].resp, 0, sizeof(reqs[i].resp));
            pu_make_rw16(&reqs[i], write, lba, nb);
            g_assert_cmpint(vfe_submit(fe, &reqs[i]), ==, 0);
        }
        pu_batch_wait(fe, &b, s->n_io, timeout_ms);
        for (unsigned i = 0; s->log && i < s->n_io; i++) {
            size_t pages = (s->io_bytes + 4095) / 4096, unmarked;

            unmarked = vfe_log_unmarked(fe, reqs[i].data, s->io_bytes);
            if (write) {
                s->log->write_pages_marked += pages - unmarked;
            } else {
                s->log->read_pages_unmarked += unmarked;
                s->log->read_pages += pages;
            }
        }
        for (unsigned i = 0; i < s->n_io; i++) {
            uint64_t lba = i * distance;
            size_t j;

            g_assert_cmpuint(reqs[i].resp.response, ==, VIRTIO_SCSI_S_OK);
            g_assert_cmpuint(reqs[i].resp.status, ==, 0);
            j = write ? s->io_bytes
                      : pu_pattern_mismatch(reqs[i].data, s->io_bytes, s->seed, lba * bsize);
            if (j < s->io_bytes) {
                g_error("LUN %u lba %" G_GUINT64_FORMAT " byte %zu: read 0x%02x, wrote 0x%02x",
                        s->lun, lba, j, ((const uint8_t *)reqs[i].data)[j],
                        pu_pattern(s->seed, lba * bsize + j));
            }
        }
    }
    for (unsigned i = 0; i < s->n_io; i++) {
        vfe_free(fe, reqs[i].data);
    }
    g_free(reqs);
    return distance;
}

JsonNode *pu_ctl_ok(int fd, const char *method, JsonNode *params)
{
    JsonNode *result = NULL;
    g_autofree char *err = NULL;
    int code = 0;

    if (ctl_client_call(fd, method, params, PU_TIMEOUT_MS, &result, &code, &err) < 0) {
        g_error("%s: %s (%d)", method, err, code);
    }
    return result;
}

char *pu_ctl_err(int fd, const char *method, JsonNode *params, int want_code)
{
    JsonNode *result = NULL;
    char *err = NULL;
    int code = 0;
    int ret = ctl_client_call(fd, method, params, PU_TIMEOUT_MS, &result, &code, &err);

    if (ret == 0) {
        g_autofree char *got = json_to_string(result, FALSE);

        g_error("%s: expected error %d, got the result %s", method, want_code, got);
    }
    g_assert_cmpint(ret, ==, -EREMOTEIO);
    g_assert_cmpint(code, ==, want_code);
    g_assert_null(result);
    return err;
}

void pu_ctl_send(int fd, gint64 id, const char *method, JsonNode *params)
{
    g_autoptr(JsonNode) req = pu_jobj("jsonrpc", pu_jstr("2.0"), "method", pu_jstr(method),
                                      "id", pu_jint(id), NULL);
    g_autofree char *body = NULL, *text = NULL;
    const char *p;
    size_t len;

    if (params) {
        json_object_set_member(json_node_get_object(req), "params", params);
    }
    body = json_to_string(req, FALSE);
    text = g_strconcat(body, "\n", NULL);
    for (p = text, len = strlen(text); len;) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

        g_assert_cmpint(n, >, 0);
        p += n;
        len -= (size_t)n;
    }
}

JsonNode *pu_ctl_answer(int fd, int timeout_ms)
{
    g_autoptr(GString) line = g_string_new(NULL);
    gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
    g_autoptr(GError) err = NULL;
    JsonNode *node;

    for (;;) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        gint64 left = (deadline - g_get_monotonic_time()) / 1000;
        char c;
        ssize_t n;

        if (left <= 0) {
            g_error("no control answer within %d ms", timeout_ms);
        }
        if (poll(&p, 1, (int)left) <= 0) {
            continue;
        }
        /* A byte at a time: nothing of the next answer is read ahead and lost. */
        n = recv(fd, &c, 1, 0);
        if (n <= 0) {
            g_assert_cmpuint(line->len, ==, 0);
            return NULL;
        }
        if (c == '\n') {
            break;
        }
        g_string_append_c(line, c);
    }
    node = json_from_string(line->str, &err);
    g_assert_no_error(err);
    g_assert_true(JSON_NODE_HOLDS_OBJECT(node));
    return node;
}

bool pu_ctl_answer_waiting(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };

    return poll(&p, 1, 0) == 1;
}

char *pu_ctl_answer_failed(JsonNode *answer, gint64 id, int want_errno)
{
    JsonObject *o, *e;

    g_assert_nonnull(answer);
    o = json_node_get_object(answer);
    g_assert_cmpint(json_object_get_int_member(o, "id"), ==, id);
    if (!json_object_has_member(o, "error")) {
        g_autofree char *got = json_to_string(answer, FALSE);

        g_error("expected the error errno %d, got %s", want_errno, got);
    }
    e = json_object_get_object_member(o, "error");
    g_assert_cmpint(json_object_get_int_member(e, "code"), ==, CTL_E_FAILED);
    g_assert_cmpint(json_object_get_int_member(json_object_get_object_member(e, "data"),
                                               "errno"), ==, want_errno);
    return g_strdup(json_object_get_string_member(e, "message"));
}

char *pu_ctl_fail(int fd, const char *method, JsonNode *params, int want_errno)
{
    /* Apart from the ids a test gives pu_ctl_send. */
    static gint64 next_id = 1000000;
    gint64 id = ++next_id;
    g_autoptr(JsonNode) answer = NULL;

    pu_ctl_send(fd, id, method, params);
    answer = pu_ctl_answer(fd, PU_TIMEOUT_MS);
    return pu_ctl_answer_failed(answer, id, want_errno);
}

bool pu_ctl_lun_listed(int fd, unsigned lun)
{
    g_autoptr(JsonNode) r = pu_ctl_ok(fd, "lun-list", NULL);
    JsonArray *a = json_node_get_array(r);

    for (guint i = 0; i < json_array_get_length(a); i++) {
        if (json_object_get_int_member(json_array_get_object_element(a, i), "lun") == lun) {
            return true;
        }
    }
    return false;
}

char *pu_ctl_tool(const char *control, const char *const *args, int *exit_code, char **err)
{
    g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GError) error = NULL;
    const char *tool = g_getenv("VHOST_SCSI_CTL");
    char *out = NULL, *errout = NULL;
    int status;

    g_assert_nonnull(tool);
    g_ptr_array_add(argv, g_strdup(tool));
    g_ptr_array_add(argv, g_strdup("target"));
    g_ptr_array_add(argv, g_strdup("--control"));
    g_ptr_array_add(argv, g_strdup(control));
    g_ptr_array_add(argv, g_strdup_printf("--timeout-ms=%d", PU_TIMEOUT_MS));
    for (; *args; args++) {
        g_ptr_array_add(argv, g_strdup(*args));
    }
    g_ptr_array_add(argv, NULL);
    if (!g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
                      &errout, &status, &error)) {
        g_error("%s: %s", tool, error->message);
    }
    g_assert_true(WIFEXITED(status));
    *exit_code = WEXITSTATUS(status);
    if (err) {
        *err = errout;
    } else {
        g_free(errout);
    }
    return out;
}

JsonNode *pu_jobj(const char *name, ...)
{
    JsonObject *o = json_object_new();
    JsonNode *n = json_node_new(JSON_NODE_OBJECT);
    va_list ap;

    va_start(ap, name);
    for (; name; name = va_arg(ap, const char *)) {
        json_object_set_member(o, name, va_arg(ap, JsonNode *));
    }
    va_end(ap);
    json_node_take_object(n, o);
    return n;
}

JsonNode *pu_jstr(const char *s)
{
    return json_node_init_string(json_node_alloc(), s);
}

JsonNode *pu_jint(gint64 v)
{
    return json_node_init_int(json_node_alloc(), v);
}

void pu_wait_task_running(struct vfe *fe, unsigned lun, uint64_t tag)
{
    gint64 deadline = g_get_monotonic_time() + PU_TIMEOUT_MS * G_TIME_SPAN_MILLISECOND;
    uint8_t l[8];

    vfe_lun(l, 0, lun);
    for (;;) {
        uint8_t resp = 0xee;

        g_assert_cmpint(vfe_tmf(fe, l, VIRTIO_SCSI_T_TMF_QUERY_TASK, tag, &resp, PU_TIMEOUT_MS),
                        ==, 0);
        if (resp == VIRTIO_SCSI_S_FUNCTION_SUCCEEDED) {
            return;
        }
        /* FUNCTION COMPLETE (VIRTIO_SCSI_S_OK): not (yet) there. */
        g_assert_cmpuint(resp, ==, VIRTIO_SCSI_S_OK);
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
    }
}
