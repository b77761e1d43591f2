/*
 * A hostile neighbour: tests of the real vhost-scsi-target against a
 * local process that is allowed to connect to its socket and uses that to
 * attack it, finding by finding as the security issue lists them (the
 * numbers in the test names are the issue's).  What every case asserts is
 * what docs/security.md promises: the daemon stays alive, drops or
 * refuses only the attacker, keeps serving every other front-end meanwhile,
 * says what happened (naming the connection and queue) a bounded number
 * of times, does not spin, and exits with status 0 on SIGTERM.
 *
 * The attacker plays a front-end with raw vhost-user messages
 * (raw-vu.h), on its own sockets or on a front-end-library connection
 * while the library is idle.  "Another front-end is served" is always a
 * well-behaved library front-end in a child process that connects,
 * negotiates and writes then reads back a pattern on LUN 1, within a
 * bound; the child is killed at the bound, so a daemon that stalls it
 * fails the case instead of hanging it.
 *
 * Each attack is written once and run twice: alone against a fresh
 * daemon (/hostile/N-...), and all of them one after the other against
 * one daemon while vhost-scsi-bench runs on it (/hostile/neighbour),
 * whose requests must keep completing (counted in the daemon's `stats`)
 * at every point where an attack holds something of the daemon's, and
 * which must end without an error.  /hostile/limits/... check
 * --max-connections, --max-connections-per-uid and --message-timeout-ms.
 * A slow peer is held for as long as a case needs by a daemon whose
 * message timeout is far longer than any bound here (HOLD_TIMEOUT_MS),
 * and is dropped, where that is the point, by a daemon with a short one
 * (DROP_TIMEOUT_MS), never by waiting out the 5 s default.
 *
 * Every case runs in a subprocess with a time limit
 * (g_test_trap_subprocess), so a daemon that dies or hangs fails that
 * case only, and the daemon (PR_SET_PDEATHSIG) dies with it.  The
 * daemon's output goes to a file in its directory, which some cases
 * read; when a case fails, the tail of each such log is printed.  Waits
 * are on fds, pidfds and inotify, each with a bound; the only polling is
 * of a ring's used index (memory, not an fd) and of the neighbour's
 * request count in `stats`, bounded too.  Times are bounds on events
 * that must happen, never speed assertions: no verdict compares a
 * latency or a rate, so none depends on the machine's speed or load;
 * CPU time is used only to tell a busy loop from idling.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <glib.h>
#include <glib/gstdio.h>
#include <linux/virtio_scsi.h>

#include "control-client.h"
#include "proto-util.h"
#include "raw-vu.h"

/* A well-behaved front-end's whole session: a bound, never a speed to reach. */
#define SERVE_MS 10000
/*
 * --message-timeout-ms of a daemon that must keep a slow peer while
 * another front-end is served: far beyond SERVE_MS, so the peer is still
 * there whatever the machine's load, and never waited out.
 */
#define HOLD_TIMEOUT_MS 120000
/*
 * --message-timeout-ms of a daemon that must drop a slow peer: waited out.
 * The drop is waited for within SERVE_MS, a bound against a hang: how long
 * after the timeout it comes is the machine's load; that it comes no
 * sooner, and for the timeout (the daemon's log line says so), are the
 * verdicts.
 */
#define DROP_TIMEOUT_MS 1000
/* The daemon's line when it drops a peer for DROP_TIMEOUT_MS (vu_dev_expired). */
#define DROPPED_PATTERN "within " G_STRINGIFY(DROP_TIMEOUT_MS) " ms; dropping the connection"
/* One reply to one message. */
#define REPLY_MS 3000
/* From SIGTERM to exit. */
#define EXIT_MS 5000
/*
 * From start-up to exiting on bad arguments: what is caught is a daemon
 * that serves (or spins) instead, so the bound is wide; LeakSanitizer's
 * scan at exit alone took 1.8 s of it at a load average of 13.
 */
#define REFUSE_MS 15000
/* A busy loop is told from idling over this window by this share of one CPU. */
#define CPU_WINDOW_MS 2000
#define CPU_SHARE_MAX 0.25
/* Log lines per episode that count as "a bounded number of times". */
#define LOG_LINES_MAX 20

/* The well-behaved front-ends use LUN 1; the bench uses LUN 0. */
#define VICTIM_LUN 1

/* Extra daemon arguments for the two message timeouts above. */
static const char *const hold_timeout_args[] = { "--message-timeout-ms",
                                                 G_STRINGIFY(HOLD_TIMEOUT_MS), NULL };
static const char *const drop_timeout_args[] = { "--message-timeout-ms",
                                                 G_STRINGIFY(DROP_TIMEOUT_MS), NULL };

/* ---- failing with a reason ------------------------------------------------ */

#define hfail(...)                                                                  \
    do {                                                                            \
        char *m_ = g_strdup_printf(__VA_ARGS__);                                    \
        g_assertion_message(G_LOG_DOMAIN, __FILE__, __LINE__, G_STRFUNC, m_);        \
        g_free(m_);                                                                 \
    } while (0)
#define hcheck(cond, ...)                                                           \
    do {                                                                            \
        if (!(cond)) {                                                              \
            hfail(__VA_ARGS__);                                                     \
        }                                                                           \
    } while (0)

static int64_t now_ms(void)
{
    return g_get_monotonic_time() / 1000;
}

static const char *err_str(int r)
{
    return r == 0 ? "success" : r == -EIO ? "refused" : g_strerror(-r);
}

static char *status_str(int status)
{
    if (WIFSIGNALED(status)) {
        return g_strdup_printf("killed by signal %d (%s)", WTERMSIG(status),
                               g_strsignal(WTERMSIG(status)));
    }
    return g_strdup_printf("exit status %d", WEXITSTATUS(status));
}

/* ---- the daemon ------------------------------------------------------------ */

/*
 * Starts the daemon (its directory made: pu_daemon_init) with LUN 0
 * (lun0, for the bench) and LUN 1 (for the well-behaved front-ends),
 * extra arguments, an open-file limit (0: ours) and its output in d->log.
 */
static void daemon_start_in(struct pu_daemon *d, const char *lun0, unsigned nofile,
                            const char *const *extra)
{
    GPtrArray *args = g_ptr_array_new();
    int status = 0;

    d->capture_log = true;
    d->nofile = nofile;
    g_ptr_array_add(args, "--lun");
    g_ptr_array_add(args, (char *)lun0);
    g_ptr_array_add(args, "--lun");
    g_ptr_array_add(args, "1=ram:16M");
    for (; extra && *extra; extra++) {
        g_ptr_array_add(args, (char *)*extra);
    }
    g_ptr_array_add(args, NULL);
    if (!pu_daemon_try_start(d, (const char *const *)args->pdata, &status)) {
        char *st = status_str(status), *joined = g_strjoinv(" ", (char **)args->pdata);

        hfail("the daemon did not start with %s: %s; it said: %s", joined, st,
              pu_daemon_log_read(d, 0, 2048));
        g_free(joined);
        g_free(st);
    }
    g_ptr_array_free(args, TRUE);
}

/* The same in a directory of its own. */
static void daemon_start(struct pu_daemon *d, const char *lun0, unsigned nofile,
                         const char *const *extra)
{
    pu_daemon_init(d);
    daemon_start_in(d, lun0, nofile, extra);
}

static void assert_alive(struct pu_daemon *d, int grace_ms, const char *after)
{
    if (pu_proc_exited(&d->proc, grace_ms)) {
        int status = 0;
        char *s;

        /* the attacker of /hostile/neighbour sees it die but is not its parent */
        s = waitpid(d->proc.pid, &status, 0) == d->proc.pid ? status_str(status)
                                                            : g_strdup("it exited");
        close(d->proc.pidfd);
        d->proc.pidfd = -1;
        hfail("the daemon died (%s) after %s", s, after);
        g_free(s);
    }
}

/* SIGTERM: the daemon must exit, with status 0, within EXIT_MS. */
static void assert_clean_exit(struct pu_daemon *d)
{
    int status = 0;
    char *s;

    assert_alive(d, 0, "the case (before SIGTERM)");
    kill(d->proc.pid, SIGTERM);
    hcheck(pu_proc_exited(&d->proc, EXIT_MS), "the daemon did not exit within %d ms of SIGTERM",
           EXIT_MS);
    waitpid(d->proc.pid, &status, 0);
    close(d->proc.pidfd);
    d->proc.pidfd = -1;
    s = status_str(status);
    hcheck(WIFEXITED(status) && WEXITSTATUS(status) == 0, "after SIGTERM the daemon ended with %s",
           s);
    g_free(s);
}

static void daemon_finish(struct pu_daemon *d)
{
    assert_clean_exit(d);
    pu_daemon_cleanup(d);
}

/*
 * The share of one CPU that the daemon's threads (but those named skip,
 * if not NULL) used over the next window_ms; it must stay alive meanwhile.
 */
static double cpu_share(struct pu_daemon *d, const char *skip, const char *while_what)
{
    long tck = sysconf(_SC_CLK_TCK);
    int64_t c0 = pu_proc_cpu_ticks(d->proc.pid, skip), t0 = g_get_monotonic_time();
    int64_t c1, t1;

    hcheck(!pu_proc_exited(&d->proc, CPU_WINDOW_MS), "the daemon died %s", while_what);
    c1 = pu_proc_cpu_ticks(d->proc.pid, skip);
    t1 = g_get_monotonic_time();
    return (double)(c1 - c0) / (double)tck / ((double)(t1 - t0) / 1e6);
}

static void assert_no_busy_loop(struct pu_daemon *d, const char *skip, const char *while_what)
{
    double share = cpu_share(d, skip, while_what);

    g_printerr("# daemon%s CPU %s: %.0f%% of one CPU\n", skip ? " (but its I/O threads)" : "",
               while_what, share * 100);
    hcheck(share < CPU_SHARE_MAX, "the daemon used %.0f%% of a CPU over %d ms %s: a busy loop",
           share * 100, CPU_WINDOW_MS, while_what);
}

/* RssAnon + RssShmem, in kB. */
static int64_t daemon_mem_kb(struct pu_daemon *d)
{
    int64_t anon = pu_proc_status_kb(d->proc.pid, "RssAnon");
    int64_t shmem = pu_proc_status_kb(d->proc.pid, "RssShmem");

    g_assert_cmpint(anon, >=, 0);
    g_assert_cmpint(shmem, >=, 0);
    return anon + shmem;
}

/*
 * The name ("connN") the daemon gave the connection it accepted after
 * offset from, from its "connN: front-end connected" line; when the log
 * has no such line, a pattern that matches any connection name.
 */
static char *conn_name_since(struct pu_daemon *d, size_t from)
{
    char *name = pu_daemon_log_find(d, from, "(conn[0-9]+): front-end connected");

    return name ? name : g_strdup("conn[0-9]+");
}

/* Asserts a log line after offset from names connection conn and queue vqN. */
static void assert_logged_conn_queue(struct pu_daemon *d, size_t from, const char *conn,
                                     unsigned vq, const char *what)
{
    char *pattern = g_strdup_printf("\\b%s\\b.*\\bvq%u\\b", conn, vq);

    hcheck(pu_daemon_log_count(d, from, pattern) > 0,
           "%s: no log line names the connection (%s) and the queue (vq%u)", what, conn, vq);
    g_free(pattern);
}

/* ---- a well-behaved front-end ---------------------------------------------- */

struct victim {
    struct pu_proc proc;
    const struct pu_daemon *d;
    int64_t t0;
    int bound_ms;
    gint64 bench_ops0;  /* the neighbour's requests done when it started; -1: no neighbour */
};

/* ---- the neighbour's progress ----------------------------------------------------------- */

/* The backend of the bench of /hostile/neighbour (LUN 0 of target 0) in `stats`. */
#define NEIGHBOUR_BACKEND "lun0:0"
/*
 * Requests of the bench that must complete while another front-end is
 * served during an attack: a count, not a rate, so that it does not
 * depend on the machine's speed.  A daemon stalled by the attack
 * completes none.
 */
#define NEIGHBOUR_OPS 64
/* Between two looks at the count: the bound is SERVE_MS, this only paces the looks. */
#define NEIGHBOUR_LOOK_MS 10

/* Only the daemon of /hostile/neighbour has a control socket, at DIR/control.sock. */
static char *control_path(const struct pu_daemon *d)
{
    return g_build_filename(d->dir, "control.sock", NULL);
}

/* The requests the bench's LUN has completed (`stats` totals); -1 without a neighbour. */
static gint64 bench_ops(const struct pu_daemon *d)
{
    g_autofree char *path = control_path(d);
    JsonNode *res;
    JsonArray *backends;
    gint64 ops = -1;
    int fd;

    if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
        return -1;
    }
    fd = ctl_client_connect(path);
    hcheck(fd >= 0, "the control socket %s: %s", path, g_strerror(fd < 0 ? -fd : 0));
    res = pu_ctl_ok(fd, "stats", NULL);
    backends = json_object_get_array_member(json_node_get_object(res), "backends");
    for (guint i = 0; backends && i < json_array_get_length(backends); i++) {
        JsonObject *b = json_array_get_object_element(backends, i);
        JsonObject *total = json_object_get_object_member(b, "total");

        if (!g_strcmp0(json_object_get_string_member(b, "name"), NEIGHBOUR_BACKEND)) {
            ops = 0;
            for (const char *const *c = (const char *const[]){ "read", "write", "other", NULL };
                 *c; c++) {
                ops += json_object_get_int_member(json_object_get_object_member(total, *c),
                                                  "ops");
            }
        }
    }
    json_node_unref(res);
    close(fd);
    hcheck(ops >= 0, "no backend %s in the daemon's stats", NEIGHBOUR_BACKEND);
    return ops;
}

/* The neighbour completes NEIGHBOUR_OPS requests after ops0 (within SERVE_MS). */
static void bench_progressed(const struct pu_daemon *d, gint64 ops0, const char *while_what)
{
    int64_t deadline = now_ms() + SERVE_MS;
    gint64 ops;

    while ((ops = bench_ops(d)) < ops0 + NEIGHBOUR_OPS) {
        hcheck(now_ms() < deadline, "the neighbour completed %" G_GINT64_FORMAT " requests "
               "within %d ms %s (%d wanted)", ops - ops0, SERVE_MS, while_what, NEIGHBOUR_OPS);
        g_usleep(NEIGHBOUR_LOOK_MS * 1000);
    }
    g_printerr("# the neighbour completed %" G_GINT64_FORMAT " requests meanwhile\n", ops - ops0);
}

/*
 * In a child: connects, negotiates, starts one request queue, consumes
 * the unit attention and writes then reads back a pattern on LUN 1.
 */
static void victim_start(struct victim *v, const struct pu_daemon *d, int bound_ms)
{
    static uint64_t seed = 1000;

    seed++;
    v->d = d;
    v->bound_ms = bound_ms;
    v->bench_ops0 = bench_ops(d);
    v->t0 = now_ms();
    v->proc.pid = fork();
    g_assert_cmpint(v->proc.pid, >=, 0);
    if (v->proc.pid == 0) {
        struct vfe_config cfg = { .num_request_queues = 1, .queue_size = 64,
                                  .mem_size = 4 << 20, .event_idx = true,
                                  .timeout_ms = bound_ms };
        struct pu_rw_spec io = { .lun = VICTIM_LUN, .queues = 1, .n_io = 16,
                                 .io_bytes = 4096, .seed = seed, .timeout_ms = bound_ms };
        struct vfe *fe;

        prctl(PR_SET_PDEATHSIG, SIGKILL);
        fe = pu_connect_cfg(d, &cfg);
        pu_make_ready(fe, VICTIM_LUN);
        pu_write_read_compare(fe, &io);
        vfe_close(fe);
        _exit(0);
    }
    v->proc.pidfd = (int)syscall(SYS_pidfd_open, v->proc.pid, 0);
    g_assert_cmpint(v->proc.pidfd, >=, 0);
}

/* Milliseconds the victim has left of its bound. */
static int victim_left(const struct victim *v)
{
    int64_t left = v->t0 + v->bound_ms - now_ms();

    return left > 0 ? (int)left : 0;
}

/* Waits for the victim (what is left of its bound); it must have been served. */
static int64_t victim_finish(struct victim *v, const char *while_what)
{
    bool done = pu_proc_exited(&v->proc, victim_left(v));
    int64_t ms = now_ms() - v->t0;
    int status = 0;
    char *s;

    if (!done) {
        kill(v->proc.pid, SIGKILL);
    }
    waitpid(v->proc.pid, &status, 0);
    close(v->proc.pidfd);
    v->proc.pidfd = -1;
    hcheck(done, "a well-behaved front-end was not served within %d ms %s", v->bound_ms,
           while_what);
    s = status_str(status);
    hcheck(WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "a well-behaved front-end failed (%s, after %" G_GINT64_FORMAT " ms) %s", s, ms,
           while_what);
    g_free(s);
    g_printerr("# a well-behaved front-end was served in %" G_GINT64_FORMAT " ms %s\n", ms,
               while_what);
    if (v->bench_ops0 >= 0) {
        /* and the neighbour's requests complete, while the attack still holds */
        bench_progressed(v->d, v->bench_ops0, while_what);
    }
    return ms;
}

static int64_t served(const struct pu_daemon *d, int bound_ms, const char *while_what)
{
    struct victim v;

    victim_start(&v, d, bound_ms);
    return victim_finish(&v, while_what);
}

/* ---- fds that misbehave ------------------------------------------------------ */

/* A blocking eventfd one short of its maximum count: a write(2) of 1 blocks. */
static int full_blocking_eventfd(void)
{
    uint64_t v = 0xfffffffffffffffeull;
    int fd = eventfd(0, EFD_CLOEXEC);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(write(fd, &v, sizeof(v)), ==, sizeof(v));
    return fd;
}

static int plain_eventfd(void)
{
    int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

    g_assert_cmpint(fd, >=, 0);
    return fd;
}

/* A raw front-end with guest RAM, past negotiation. */
static void raw_fe_open(struct rv_fe *f, struct pu_daemon *d, uint64_t extra_protocol)
{
    int r = rv_fe_open(f, d->sock, extra_protocol, REPLY_MS);

    hcheck(r == 0, "a front-end could not connect and negotiate: %s", err_str(r));
    r = rv_fe_set_mem(f);
    hcheck(r == 0, "SET_MEM_TABLE of one memfd region: %s", err_str(r));
}

/* Until vq's used index reaches idx: ring memory, so looked at every 5 ms, within bound_ms. */
static void wait_used(struct pu_daemon *d, const struct rv_fe *f, unsigned vq, uint16_t idx,
                      int bound_ms)
{
    int64_t deadline = now_ms() + bound_ms;

    while (rv_fe_used_idx(f, vq) != idx) {
        hcheck(now_ms() < deadline, "vq%u: the daemon did not complete a TEST UNIT READY "
               "within %d ms", vq, bound_ms);
        assert_alive(d, 5, "a request was posted");
    }
}

/* Starts request queue vq2 (8 entries) with these call and err fds, kicked by eventfd. */
static void run_vq2(struct rv_fe *f, int call, int err, const char *what)
{
    int r = rv_fe_ring(f, 2, 8, call, err);

    hcheck(r == 0, "setting up vq2%s: %s", what, err_str(r));
    r = rv_fe_kick(f, 2, -1, NULL);
    hcheck(r == 0, "SET_VRING_KICK: %s", err_str(r));
}

/* ---- finding 1: SIGBUS guard exhaustion ------------------------------------------ */

#define GUARD_FILLERS 32

/*
 * Fills the SIGBUS guard (1024 slots in the daemon before the fix) with
 * 32 connections of 32 unsealed 4 KiB memfd regions each (ADD_MEM_REG),
 * then connects a library front-end whose guest RAM (an unsealed memfd)
 * is the next region, truncates that memfd and kicks a request queue
 * whose rings live in it.  The daemon must have guarded that region or
 * refused it: it lives, drops or refuses only that front-end, and keeper
 * (a front-end connected before, if any) still does verified I/O.
 */
static void attack_guard_exhaustion(struct pu_daemon *d, struct vfe *keeper)
{
    struct rv_fe fill[GUARD_FILLERS];
    unsigned added = 0, refused = 0;
    int extra = memfd_create("hostile-extra-region", MFD_CLOEXEC);
    struct vfe_config cfg = { .transport = VFE_VHOST_USER, .path = d->sock,
                              .num_request_queues = 1, .queue_size = 64, .mem_size = 1 << 20,
                              .event_idx = true, .timeout_ms = REPLY_MS };
    struct vfe *fe = NULL;
    int r;

    g_assert_cmpint(extra, >=, 0);
    g_assert_cmpint(ftruncate(extra, 4096), ==, 0);
    for (unsigned i = 0; i < GUARD_FILLERS; i++) {
        uint64_t slots = 0;

        r = rv_fe_open(&fill[i], d->sock, 1ull << VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS,
                       REPLY_MS);
        hcheck(r == 0, "filler front-end %u could not connect and negotiate: %s", i,
               err_str(r));
        r = rv_get_u64(fill[i].sock, VHOST_USER_GET_MAX_MEM_SLOTS, REPLY_MS, &slots);
        hcheck(r == 0, "GET_MAX_MEM_SLOTS: %s", err_str(r));
        for (unsigned j = 0; j < slots; j++) {
            struct vhost_user_mem_reg reg = { .region = {
                .guest_phys_addr = 0x100000000ull + j * 4096ull, .memory_size = 4096,
                .userspace_addr = 0x200000000000ull + j * 4096ull, .mmap_offset = 0 } };

            r = rv_call(fill[i].sock, VHOST_USER_ADD_MEM_REG, &reg, sizeof(reg), &extra, 1,
                        REPLY_MS, NULL);
            hcheck(r == 0 || r == -EIO || r == -ECONNRESET,
                   "ADD_MEM_REG %u of filler %u: %s", j, i, err_str(r));
            if (r == -ECONNRESET) {
                refused++;
                break;
            }
            r == 0 ? added++ : refused++;
        }
    }
    g_printerr("# guard fillers: %u regions added, %u refused\n", added, refused);

    r = vfe_open(&cfg, &fe);
    if (r < 0) {
        g_printerr("# the front-end after the fillers was refused (%s)\n", g_strerror(-r));
    } else {
        uint64_t one = 1;
        struct stat st;

        g_assert_cmpint(fstat(vfe_mem_fd(fe), &st), ==, 0);
        /* Until it is grown back, that memory is gone for us too: only fds are touched. */
        g_assert_cmpint(ftruncate(vfe_mem_fd(fe), 0), ==, 0);
        g_assert_cmpint(write(vfe_kick_fd(fe, 2), &one, sizeof(one)), ==, sizeof(one));
        r = rv_wait_hangup(vfe_conn_fd(fe), SERVE_MS);
        assert_alive(d, 100, "a front-end beyond the guard's slots truncated its guest RAM "
                     "and kicked");
        hcheck(r == 0, "the daemon neither refused nor dropped, within %d ms, a front-end that "
               "truncated its guest RAM and kicked", SERVE_MS);
        g_assert_cmpint(ftruncate(vfe_mem_fd(fe), st.st_size), ==, 0);
        vfe_close(fe);
    }
    if (keeper) {
        struct pu_rw_spec io = { .lun = VICTIM_LUN, .queues = 1, .n_io = 16, .io_bytes = 4096,
                                 .seed = 11, .timeout_ms = SERVE_MS };

        pu_write_read_compare(keeper, &io);
    }
    for (unsigned i = 0; i < GUARD_FILLERS; i++) {
        rv_fe_close(&fill[i]);
    }
    close(extra);
    assert_alive(d, 0, "the guard-exhaustion attack");
    served(d, SERVE_MS, "after the guard-exhaustion attack");
}

/* ---- finding 2: blocking notify fds ------------------------------------------- */

/*
 * A request queue whose call fd is a full blocking eventfd, then a
 * request on it: the daemon completes it (the used ring shows it before
 * the call is signalled) and the signal must not block its I/O thread.
 */
static void attack_full_call_fd(struct pu_daemon *d)
{
    struct rv_fe f;
    int call = full_blocking_eventfd();

    raw_fe_open(&f, d, 0);
    run_vq2(&f, call, -1, " with a full blocking call eventfd");
    rv_fe_post_tur(&f, 2, 0, VICTIM_LUN);
    wait_used(d, &f, 2, 1, SERVE_MS);
    served(d, SERVE_MS, "after signalling a full blocking call eventfd");
    rv_fe_close(&f);
    close(call);
}

/* Replacing the call fd of a running queue (the daemon signals a new one once). */
static void attack_replace_call_fd(struct pu_daemon *d)
{
    struct rv_fe f;
    int call = plain_eventfd(), full = full_blocking_eventfd();
    int r;

    raw_fe_open(&f, d, 0);
    run_vq2(&f, call, -1, "");
    r = rv_set_u64(f.sock, VHOST_USER_SET_VRING_CALL, 2, full, REPLY_MS, NULL);
    hcheck(r == 0 || r == -EIO, "SET_VRING_CALL with a full blocking eventfd for a running "
           "queue: %s (no reply within %d ms: the main thread is blocked?)", err_str(r),
           REPLY_MS);
    served(d, SERVE_MS, "after a running queue's call fd became a full blocking eventfd");
    rv_fe_close(&f);
    close(call);
    close(full);
}

/*
 * The call fd is handed over non-blocking, as it must be, and made
 * blocking again (the flag is on the open file the two share) and filled
 * once the queue runs: the daemon's next call signal would sleep in the
 * kernel.  Its notify watchdog interrupts it: the request still
 * completes, this front-end is dropped with a log line saying why, the
 * daemon and everybody else carry on.
 */
static void attack_call_fd_made_blocking_later(struct pu_daemon *d)
{
    struct rv_fe f;
    int call = plain_eventfd();
    size_t from = pu_daemon_log_size(d);
    uint64_t v = 0xfffffffffffffffeull;
    struct pollfd pfd;
    char buf[256];
    int64_t deadline;

    raw_fe_open(&f, d, 0);
    run_vq2(&f, call, -1, "");
    g_assert_cmpint(fcntl(call, F_SETFL, fcntl(call, F_GETFL) & ~O_NONBLOCK), ==, 0);
    g_assert_cmpint(write(call, &v, sizeof(v)), ==, sizeof(v));
    rv_fe_post_tur(&f, 2, 0, VICTIM_LUN);
    wait_used(d, &f, 2, 1, SERVE_MS);
    /* The daemon hangs up on us: the end of the stream, within the bound. */
    deadline = now_ms() + SERVE_MS;
    pfd = (struct pollfd){ .fd = f.sock, .events = POLLIN };
    for (;;) {
        int left = (int)(deadline - now_ms());

        hcheck(left > 0, "the daemon did not drop the front-end whose call fd blocked "
               "within %d ms", SERVE_MS);
        if (poll(&pfd, 1, left) == 1 && recv(f.sock, buf, sizeof(buf), MSG_DONTWAIT) <= 0) {
            break;
        }
    }
    hcheck(pu_daemon_log_count(d, from, "call eventfd blocked") > 0,
           "no log line says the call eventfd blocked");
    assert_alive(d, 0, "a call signal blocked");
    served(d, SERVE_MS, "after a call signal blocked on a front-end's eventfd");
    rv_fe_close(&f);
    close(call);
}

/*
 * A ring the daemon finds malformed (the avail index jumps by more than
 * the ring size) and an err fd that is a full blocking eventfd.
 */
static void attack_full_err_fd(struct pu_daemon *d)
{
    struct rv_fe f;
    int call = plain_eventfd(), err = full_blocking_eventfd();
    uint64_t one = 1;
    size_t off = pu_daemon_log_size(d);
    char *conn, *pattern;
    int r;

    raw_fe_open(&f, d, 0);
    conn = conn_name_since(d, off);
    run_vq2(&f, call, err, " with a full blocking err eventfd");
    off = pu_daemon_log_size(d);
    __atomic_store_n(&f.ring[2].avail->idx, (uint16_t)(8 + 5), __ATOMIC_RELEASE);
    g_assert_cmpint(write(f.ring[2].kick_fd, &one, sizeof(one)), ==, sizeof(one));
    /* The daemon reports the broken ring, then signals the err fd. */
    pattern = g_strdup_printf("\\b%s\\b.*\\bvq2\\b", conn);
    r = pu_daemon_log_wait(d, off, pattern, SERVE_MS);
    hcheck(r == 0, "no log line about %s vq2 within %d ms of an avail index jumping by 13 "
           "in a ring of 8", conn, SERVE_MS);
    served(d, SERVE_MS, "after a broken ring's err fd was a full blocking eventfd");
    rv_fe_close(&f);
    close(call);
    close(err);
    g_free(pattern);
    g_free(conn);
}

/* ---- finding 3: slow-loris -------------------------------------------------------- */

enum loris_mode { LORIS_HALF_HEADER, LORIS_TRICKLE, LORIS_FLOOD };

static const char *const loris_what[] = {
    [LORIS_HALF_HEADER] = "holds half a message header",
    [LORIS_TRICKLE] = "trickles a message a byte every 500 ms",
    [LORIS_FLOOD] = "floods GET_FEATURES and never reads a reply",
};

#define TRICKLE_MS 500

struct loris {
    enum loris_mode mode;
    int sock;
    uint8_t msg[sizeof(struct vhost_user_msg)];
    size_t len, sent;
    int64_t first_byte;     /* ms */
    int64_t next_byte;      /* ms, trickle */
    int64_t dropped_at;     /* ms, 0 while connected */
};

static void loris_push(struct loris *l)
{
    if (l->dropped_at) {
        return;
    }
    if (l->mode == LORIS_TRICKLE && now_ms() >= l->next_byte && l->sent < l->len) {
        if (rv_send_bytes(l->sock, l->msg + l->sent, 1) == 0) {
            l->sent++;
        }
        l->next_byte += TRICKLE_MS;
    } else if (l->mode == LORIS_FLOOD) {
        /* as many requests as the socket takes, replies never read */
        while (rv_send(l->sock, VHOST_USER_GET_FEATURES, 0, NULL, 0, NULL, 0) == 0) {
        }
    }
}

static void loris_open(struct loris *l, struct pu_daemon *d, enum loris_mode mode)
{
    struct vhost_vring_addr a = { .index = 2 };

    memset(l, 0, sizeof(*l));
    l->mode = mode;
    l->sock = rv_connect(d->sock, REPLY_MS);
    hcheck(l->sock >= 0, "connect: %s", err_str(l->sock));
    /* the flood sends as much as the socket takes, never waiting */
    g_assert_cmpint(fcntl(l->sock, F_SETFL, O_NONBLOCK), ==, 0);
    l->first_byte = now_ms();
    switch (mode) {
    case LORIS_HALF_HEADER:
        l->len = rv_build(l->msg, VHOST_USER_GET_FEATURES, 0, NULL, 0);
        l->sent = sizeof(struct vhost_user_hdr) / 2;
        g_assert_cmpint(rv_send_bytes(l->sock, l->msg, l->sent), ==, 0);
        break;
    case LORIS_TRICKLE:
        /* 52 bytes: whole only after 25 s, far beyond any message timeout */
        l->len = rv_build(l->msg, VHOST_USER_SET_VRING_ADDR, 0, &a, sizeof(a));
        l->next_byte = l->first_byte;
        loris_push(l);
        break;
    case LORIS_FLOOD:
        loris_push(l);
        break;
    }
}

/* Pushes bytes as due and notes hang-ups until until_ms or until stop (a pidfd) fires. */
static void loris_run(struct loris *l, unsigned n, int stop_fd, int64_t until_ms)
{
    for (;;) {
        struct pollfd p[4];
        int64_t wake = until_ms;
        unsigned np = 0, live = 0;

        for (unsigned i = 0; i < n; i++) {
            if (!l[i].dropped_at && !rv_peer_open(l[i].sock)) {
                l[i].dropped_at = now_ms();
            }
            if (l[i].dropped_at) {
                continue;
            }
            live++;
            p[np++] = (struct pollfd){ .fd = l[i].sock,
                                       .events = POLLRDHUP |
                                                 (l[i].mode == LORIS_FLOOD ? POLLOUT : 0) };
            if (l[i].mode == LORIS_TRICKLE && l[i].next_byte < wake) {
                wake = l[i].next_byte;
            }
        }
        if (stop_fd >= 0) {
            p[np++] = (struct pollfd){ .fd = stop_fd, .events = POLLIN };
        }
        if ((stop_fd < 0 && !live) || now_ms() >= until_ms) {
            return;
        }
        if (poll(p, np, (int)MAX(wake - now_ms(), 0)) > 0 && stop_fd >= 0 &&
            (p[np - 1].revents & POLLIN)) {
            return;
        }
        for (unsigned i = 0; i < n; i++) {
            loris_push(&l[i]);
        }
    }
}

/* "while a peer ... and another ...", for messages (g_string_free). */
static GString *loris_open_all(struct loris *l, struct pu_daemon *d, const enum loris_mode *modes,
                               unsigned n)
{
    GString *what = g_string_new("while a peer ");

    for (unsigned i = 0; i < n; i++) {
        loris_open(&l[i], d, modes[i]);
        g_string_append_printf(what, "%s%s", i ? " and another " : "", loris_what[modes[i]]);
    }
    return what;
}

/*
 * Slow peers of the given modes connect to d, whose message timeout
 * (HOLD_TIMEOUT_MS) keeps them far longer than this takes; while they
 * hold the daemon's attention, a well-behaved front-end must be served
 * (within SERVE_MS) with all of them still connected.  The order is the
 * verdict (served while they hold), not how fast: a daemon that waits on
 * a slow peer serves nobody else until it gives up on it.
 */
static void attack_slowloris_held(struct pu_daemon *d, const enum loris_mode *modes, unsigned n)
{
    struct loris l[3];
    struct victim v;
    GString *what;

    g_assert_cmpuint(n, <=, G_N_ELEMENTS(l));
    what = loris_open_all(l, d, modes, n);
    victim_start(&v, d, SERVE_MS);
    loris_run(l, n, v.proc.pidfd, v.t0 + SERVE_MS);
    victim_finish(&v, what->str);
    for (unsigned i = 0; i < n; i++) {
        hcheck(!l[i].dropped_at && rv_peer_open(l[i].sock),
               "the peer that %s was dropped %" G_GINT64_FORMAT " ms after its first byte, "
               "before the other front-end was done, with a message timeout of %d ms",
               loris_what[l[i].mode], l[i].dropped_at - l[i].first_byte, HOLD_TIMEOUT_MS);
        close(l[i].sock);
    }
    assert_alive(d, 0, what->str);
    g_string_free(what, TRUE);
}

/*
 * Slow peers of the given modes connect to d, whose message timeout is
 * DROP_TIMEOUT_MS: each must be dropped for it, no sooner than that after
 * its message's first byte, and another front-end served after.
 */
static void attack_slowloris_dropped(struct pu_daemon *d, const enum loris_mode *modes,
                                     unsigned n)
{
    struct loris l[3];
    int64_t last_first = 0;
    GString *what;

    size_t off = pu_daemon_log_size(d);
    unsigned lines;

    g_assert_cmpuint(n, <=, G_N_ELEMENTS(l));
    what = loris_open_all(l, d, modes, n);
    for (unsigned i = 0; i < n; i++) {
        last_first = MAX(last_first, l[i].first_byte);
    }
    loris_run(l, n, -1, last_first + SERVE_MS);
    for (unsigned i = 0; i < n; i++) {
        int64_t after = (l[i].dropped_at ? l[i].dropped_at : now_ms()) - l[i].first_byte;

        hcheck(l[i].dropped_at, "the peer that %s was still connected %" G_GINT64_FORMAT
               " ms after its first byte (message timeout %d ms)", loris_what[l[i].mode],
               after, DROP_TIMEOUT_MS);
        hcheck(after >= DROP_TIMEOUT_MS, "the peer that %s was dropped %" G_GINT64_FORMAT
               " ms after its first byte, before the message timeout (%d ms)",
               loris_what[l[i].mode], after, DROP_TIMEOUT_MS);
        g_printerr("# the peer that %s was dropped %" G_GINT64_FORMAT " ms after its first "
                   "byte\n", loris_what[l[i].mode], after);
        close(l[i].sock);
    }
    /* Logged before the socket closes: the lines are there by now. */
    lines = pu_daemon_log_count(d, off, DROPPED_PATTERN);
    hcheck(lines == n, "%u slow peers were dropped, %u log lines say it was for the message "
           "timeout (\"%s\")", n, lines, DROPPED_PATTERN);
    assert_alive(d, 0, what->str);
    served(d, SERVE_MS, "after slow peers were dropped for a message timeout");
    g_string_free(what, TRUE);
}

/* ---- finding 4: EMFILE ------------------------------------------------------------- */

/* How the daemon may put running out of fds (g_strerror(EMFILE) is the first). */
#define EMFILE_PATTERN "Too many open files|EMFILE|ENFILE|(?i:file descriptors)"
/* How long a connect waits for backlog room before the daemon counts as not accepting. */
#define BACKLOG_WAIT_MS 1000
/* Connections beyond the point where the daemon ran out of fds. */
#define EMFILE_BEYOND 6

/*
 * Connections (up to max_conns) bring the daemon, started with a low
 * open-file limit, to the point where accept(2) fails with EMFILE, and a
 * few more wait beyond it; the daemon must say so a bounded number of
 * times and not spin (skip: threads left out of the CPU measure), and
 * serve a new front-end once they are gone.
 */
static void attack_emfile(struct pu_daemon *d, unsigned max_conns, const char *skip)
{
    int *socks = g_new(int, max_conns);
    unsigned n = 0, beyond = 0, lines;
    size_t off = pu_daemon_log_size(d);
    bool at_limit = false;
    int r;

    while (n < max_conns && beyond < EMFILE_BEYOND) {
        r = rv_connect(d->sock, BACKLOG_WAIT_MS);
        hcheck(r >= 0 || r == -EAGAIN, "connect: %s", err_str(r));
        if (r < 0) {
            break;      /* the backlog stays full: the daemon takes no more */
        }
        socks[n++] = r;
        if (!at_limit) {
            char *seen = pu_daemon_log_find(d, off, EMFILE_PATTERN);

            at_limit = seen != NULL;
            g_free(seen);
        } else {
            beyond++;
        }
    }
    g_printerr("# %u connections made, the daemon has %d fds open\n", n,
               pu_proc_fd_count(d->proc.pid));
    r = pu_daemon_log_wait(d, off, EMFILE_PATTERN, SERVE_MS);
    hcheck(r == 0, "with %u connections the daemon (%d fds open) never logged running out of "
           "fds", n, pu_proc_fd_count(d->proc.pid));
    assert_no_busy_loop(d, skip, "at its open-file limit");
    lines = pu_daemon_log_count(d, off, EMFILE_PATTERN);
    hcheck(lines < LOG_LINES_MAX, "%u lines about running out of fds in one episode (fewer than "
           "%d wanted)", lines, LOG_LINES_MAX);
    for (unsigned i = 0; i < n; i++) {
        close(socks[i]);
    }
    g_free(socks);
    served(d, SERVE_MS, "after the connections that exhausted its fds closed");
}

/* ---- finding 5: kick fds that never drain ------------------------------------------- */

/* The control queue's kick fd is a pipe whose writer is closed: readable forever. */
static void attack_pipe_kick(struct pu_daemon *d, const char *skip)
{
    struct rv_fe f;
    size_t off = pu_daemon_log_size(d);
    uint64_t status = 0;
    char *conn;
    int p[2], r;

    g_assert_cmpint(pipe2(p, O_CLOEXEC), ==, 0);
    close(p[1]);
    raw_fe_open(&f, d, 0);
    conn = conn_name_since(d, off);
    r = rv_fe_ring(&f, 0, 8, -1, -1);
    hcheck(r == 0, "setting up vq0: %s", err_str(r));
    off = pu_daemon_log_size(d);
    r = rv_fe_kick(&f, 0, p[0], &status);
    hcheck(r == -EIO, "SET_VRING_KICK with a pipe (not an eventfd) for the control queue: %s",
           r == 0 ? "acknowledged" : err_str(r));
    assert_logged_conn_queue(d, off, conn, 0, "refusing a pipe as a kick fd");
    assert_no_busy_loop(d, skip, "after a pipe at EOF was offered as a kick fd");
    served(d, SERVE_MS, "after a pipe at EOF was offered as a kick fd");
    rv_fe_close(&f);
    close(p[0]);
    g_free(conn);
}

/* The control queue's kick fd is a semaphore eventfd at its maximum count. */
static void attack_semaphore_kick(struct pu_daemon *d, const char *skip)
{
    struct rv_fe f;
    uint64_t v = 0xfffffffffffffffeull;
    int k = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE);
    int r;

    g_assert_cmpint(k, >=, 0);
    g_assert_cmpint(write(k, &v, sizeof(v)), ==, sizeof(v));
    raw_fe_open(&f, d, 0);
    r = rv_fe_ring(&f, 0, 8, -1, -1);
    hcheck(r == 0, "setting up vq0: %s", err_str(r));
    r = rv_fe_kick(&f, 0, k, NULL);
    hcheck(r == 0 || r == -EIO, "SET_VRING_KICK with a semaphore eventfd: %s", err_str(r));
    assert_no_busy_loop(d, skip, "with a semaphore eventfd at its maximum as a kick fd");
    served(d, SERVE_MS, "with a semaphore eventfd at its maximum as a kick fd");
    rv_fe_close(&f);
    close(k);
}

/* ---- finding 6: inflight memory --------------------------------------------------------- */

#define INFLIGHT_CONNS 20
#define INFLIGHT_GROWTH_MAX_KB (64 << 10)

/*
 * Connections that each ask for an inflight area for every queue at the
 * largest ring size (GET_INFLIGHT_FD) and then reset the device, which
 * makes the daemon write all of it: together they must not grow the
 * daemon's memory by more than 64 MB.
 */
static void attack_inflight_memory(struct pu_daemon *d)
{
    struct rv_fe f[INFLIGHT_CONNS];
    int64_t before = daemon_mem_kb(d), after;
    uint64_t nq = 0, total = 0;

    for (unsigned i = 0; i < INFLIGHT_CONNS; i++) {
        struct vhost_user_inflight in = { .queue_size = 32768 };
        struct vhost_user_msg rep;
        int fd = -1, r;

        r = rv_fe_open(&f[i], d->sock, (1ull << VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD) |
                                       (1ull << VHOST_USER_PROTOCOL_F_RESET_DEVICE), REPLY_MS);
        hcheck(r == 0, "front-end %u could not connect and negotiate: %s", i, err_str(r));
        r = rv_get_u64(f[i].sock, VHOST_USER_GET_QUEUE_NUM, REPLY_MS, &nq);
        hcheck(r == 0, "GET_QUEUE_NUM: %s", err_str(r));
        in.num_queues = (uint16_t)nq;
        r = rv_send(f[i].sock, VHOST_USER_GET_INFLIGHT_FD, 0, &in, sizeof(in), NULL, 0);
        if (r == 0) {
            r = rv_recv(f[i].sock, &rep, &fd, REPLY_MS);
        }
        hcheck(r == 0 || r == -ECONNRESET, "GET_INFLIGHT_FD for %u queues of 32768: %s",
               in.num_queues, err_str(r));
        if (fd >= 0) {
            close(fd);
        }
        if (r == 0) {
            total += rep.payload.inflight.mmap_size;
            r = rv_call(f[i].sock, VHOST_USER_RESET_DEVICE, NULL, 0, NULL, 0, REPLY_MS, NULL);
            hcheck(r == 0 || r == -EIO || r == -ECONNRESET, "RESET_DEVICE: %s", err_str(r));
        }
    }
    after = daemon_mem_kb(d);
    g_printerr("# %u inflight requests for %" G_GUINT64_FORMAT " queues: %" G_GUINT64_FORMAT
               " MB granted, daemon memory %" G_GINT64_FORMAT " -> %" G_GINT64_FORMAT " MB\n",
               INFLIGHT_CONNS, nq, total >> 20, before >> 10, after >> 10);
    hcheck(after - before < INFLIGHT_GROWTH_MAX_KB, "%u connections with inflight areas for %"
           G_GUINT64_FORMAT " queues of 32768 entries grew the daemon's memory by %"
           G_GINT64_FORMAT " MB (at most %d MB wanted)", INFLIGHT_CONNS, nq,
           (after - before) >> 10, INFLIGHT_GROWTH_MAX_KB >> 10);
    for (unsigned i = 0; i < INFLIGHT_CONNS; i++) {
        rv_fe_close(&f[i]);
    }
    assert_alive(d, 0, "the inflight-memory attack");
}

/* ---- finding 7: --fd is not checked ----------------------------------------------------- */

enum bad_listen_fd { PIPE_ON_STDIN, UDP_SOCKET, SOCKETPAIR_END };

static const char *const bad_listen_fd_what[] = {
    [PIPE_ON_STDIN] = "a pipe on stdin",
    [UDP_SOCKET] = "a UDP socket",
    [SOCKETPAIR_END] = "one end of a socketpair",
};

/* Starts the daemon on an inherited fd (--fd as), output to d->log. */
static void daemon_start_fd(struct pu_daemon *d, int fd, int as)
{
    const char *bin = g_getenv("VHOST_SCSI_TARGET");
    char *fdarg = g_strdup_printf("%d", as);
    const char *argv[] = { bin, "--fd", fdarg, "--lun", "0=ram:16M", "--lun", "1=ram:16M",
                           NULL };
    struct pu_spawn_opts o = { .pass_fd = fd, .pass_as = as };

    g_assert_nonnull(bin);
    d->capture_log = true;
    o.out_fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    g_assert_cmpint(o.out_fd, >, 2);
    pu_spawn_opts(&d->proc, argv, &o);
    close(o.out_fd);
    g_free(fdarg);
}

/*
 * The daemon given an --fd that is not a listening stream UNIX socket
 * must refuse it at start-up: exit non-zero promptly, saying why.
 */
static void attack_bad_listen_fd(enum bad_listen_fd kind)
{
    const char *what = bad_listen_fd_what[kind];
    struct pu_daemon d;
    int fds[2] = { -1, -1 }, status = 0, as = kind == PIPE_ON_STDIN ? 0 : 3;
    char *s, *pattern;

    pu_daemon_init(&d);
    switch (kind) {
    case PIPE_ON_STDIN:
        /* as in `true | vhost-scsi-target --fd 0`: the writer is gone */
        g_assert_cmpint(pipe2(fds, O_CLOEXEC), ==, 0);
        close(fds[1]);
        fds[1] = -1;
        break;
    case UDP_SOCKET:
        fds[0] = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        g_assert_cmpint(fds[0], >=, 0);
        break;
    case SOCKETPAIR_END:
        g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), ==, 0);
        break;
    }
    daemon_start_fd(&d, fds[0], as);
    hcheck(pu_proc_exited(&d.proc, REFUSE_MS), "with --fd %d on %s the daemon was still running "
           "after %d ms (and had logged %zu bytes)", as, what, REFUSE_MS, pu_daemon_log_size(&d));
    waitpid(d.proc.pid, &status, 0);
    close(d.proc.pidfd);
    d.proc.pidfd = -1;
    s = status_str(status);
    hcheck(WIFEXITED(status) && WEXITSTATUS(status) != 0, "with --fd %d on %s the daemon ended "
           "with %s, not a failure", as, what, s);
    pattern = g_strdup_printf("--fd|\\bfd %d\\b", as);
    hcheck(pu_daemon_log_count(&d, 0, pattern) > 0, "with --fd %d on %s the daemon's error "
           "output does not name the fd: %s", as, what, pu_daemon_log_read(&d, 0, 2048));
    for (unsigned i = 0; i < 2; i++) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    g_free(pattern);
    g_free(s);
    pu_daemon_cleanup(&d);
}

static void attack_bad_listen_fds(void)
{
    attack_bad_listen_fd(PIPE_ON_STDIN);
    attack_bad_listen_fd(UDP_SOCKET);
    attack_bad_listen_fd(SOCKETPAIR_END);
}

/* ---- the daemon's new limits ------------------------------------------------------- */

/* A raw front-end that has negotiated, or fails the case. */
static void negotiated(struct rv_fe *f, struct pu_daemon *d, const char *which)
{
    int r = rv_fe_open(f, d->sock, 0, REPLY_MS);

    hcheck(r == 0, "%s could not connect and negotiate: %s", which, err_str(r));
}

/*
 * With a limit of `limit` connections (overall, or per uid: all of ours
 * have one uid), that many negotiate; the next is accepted and closed at
 * once, with a log line; once one of the first closes, a new front-end
 * is served again.
 */
static void connection_limit_case(const char *option, unsigned limit)
{
    char *n = g_strdup_printf("%u", limit);
    const char *args[] = { option, n, NULL };
    struct rv_fe f[8];
    struct pu_daemon d;
    size_t off;
    int extra, r;

    g_assert_cmpuint(limit, <, G_N_ELEMENTS(f));
    daemon_start(&d, "0=ram:16M", 0, args);
    for (unsigned i = 0; i < limit; i++) {
        char *which = g_strdup_printf("front-end %u of %u allowed by %s", i + 1, limit, option);

        negotiated(&f[i], &d, which);
        g_free(which);
    }
    off = pu_daemon_log_size(&d);
    extra = rv_connect(d.sock, REPLY_MS);
    hcheck(extra >= 0, "connect: %s", err_str(extra));
    r = rv_wait_hangup(extra, REPLY_MS);
    hcheck(r == 0, "a connection beyond %s %u was not closed within %d ms", option, limit,
           REPLY_MS);
    hcheck(pu_daemon_log_size(&d) > off, "the daemon closed a connection beyond %s %u without "
           "a log line", option, limit);
    close(extra);
    /* one of them leaves: once the daemon has hung up on it too, it no longer counts */
    shutdown(f[0].sock, SHUT_WR);
    hcheck(rv_wait_hangup(f[0].sock, REPLY_MS) == 0, "the daemon did not close a connection "
           "whose front-end left");
    rv_fe_close(&f[0]);
    served(&d, SERVE_MS, "once a connection within the limit closed");
    for (unsigned i = 1; i < limit; i++) {
        rv_fe_close(&f[i]);
    }
    g_free(n);
    daemon_finish(&d);
}

static void test_max_connections(void)
{
    connection_limit_case("--max-connections", 3);
}

static void test_max_connections_per_uid(void)
{
    connection_limit_case("--max-connections-per-uid", 2);
}

/*
 * --message-timeout-ms N: with N = HOLD_TIMEOUT_MS, a message whose
 * halves come 400 ms apart is answered; with N = DROP_TIMEOUT_MS, a peer
 * whose second half never comes is dropped no sooner than N after its
 * first byte (the daemon's clock starts when the byte arrives, after we
 * sent it), and for that (its log line).  Neither verdict depends on how
 * fast this process or the daemon runs: N is either far beyond the pause
 * or waited out, and the drop is waited for within a bound against a hang.
 */
static void test_message_timeout(void)
{
    uint8_t msg[sizeof(struct vhost_user_msg)];
    size_t len = rv_build(msg, VHOST_USER_GET_FEATURES, 0, NULL, 0), half = len / 2;
    struct vhost_user_msg rep;
    struct pu_daemon d;
    int64_t t0, after;
    size_t off;
    int s, r;

    daemon_start(&d, "0=ram:16M", 0, hold_timeout_args);
    s = rv_connect(d.sock, REPLY_MS);
    hcheck(s >= 0, "connect: %s", err_str(s));
    g_assert_cmpint(rv_send_bytes(s, msg, half), ==, 0);
    /* waiting for the daemon to hang up is also the pause between the halves */
    hcheck(rv_wait_hangup(s, 400) == -ETIMEDOUT, "the daemon dropped a peer 400 ms into a "
           "message, with --message-timeout-ms %d", HOLD_TIMEOUT_MS);
    g_assert_cmpint(rv_send_bytes(s, msg + half, len - half), ==, 0);
    r = rv_recv(s, &rep, NULL, REPLY_MS);
    hcheck(r == 0 && rep.hdr.request == VHOST_USER_GET_FEATURES, "no reply to a GET_FEATURES "
           "whose halves came 400 ms apart, with --message-timeout-ms %d: %s", HOLD_TIMEOUT_MS,
           err_str(r));
    close(s);
    daemon_finish(&d);

    daemon_start(&d, "0=ram:16M", 0, drop_timeout_args);
    s = rv_connect(d.sock, REPLY_MS);
    hcheck(s >= 0, "connect: %s", err_str(s));
    off = pu_daemon_log_size(&d);
    t0 = now_ms();
    g_assert_cmpint(rv_send_bytes(s, msg, half), ==, 0);
    r = rv_wait_hangup(s, SERVE_MS);
    after = now_ms() - t0;
    hcheck(r == 0, "a peer holding half a header was still connected %d ms after its first "
           "byte, with --message-timeout-ms %d", SERVE_MS, DROP_TIMEOUT_MS);
    hcheck(after >= DROP_TIMEOUT_MS, "a peer holding half a header was dropped %" G_GINT64_FORMAT
           " ms after its first byte, before --message-timeout-ms %d", after, DROP_TIMEOUT_MS);
    hcheck(pu_daemon_log_count(&d, off, DROPPED_PATTERN) == 1, "a peer holding half a header "
           "was dropped, but no log line says it was for the message timeout (\"%s\")",
           DROPPED_PATTERN);
    g_printerr("# with --message-timeout-ms %d a peer holding half a header was dropped after "
               "%" G_GINT64_FORMAT " ms\n", DROP_TIMEOUT_MS, after);
    close(s);
    served(&d, SERVE_MS, "after a peer was dropped for a message timeout");
    daemon_finish(&d);
}

/* ---- the cases, one per finding ----------------------------------------------------------- */

static void test_1_guard_exhaustion(void)
{
    struct pu_daemon d;
    struct vfe *keeper;

    daemon_start(&d, "0=ram:16M", 0, NULL);
    keeper = pu_connect(&d, 1);
    pu_make_ready(keeper, VICTIM_LUN);
    attack_guard_exhaustion(&d, keeper);
    vfe_close(keeper);
    daemon_finish(&d);
}

static void test_2_full_call_fd(void)
{
    struct pu_daemon d;

    daemon_start(&d, "0=ram:16M", 0, NULL);
    attack_full_call_fd(&d);
    daemon_finish(&d);
}

static void test_2_replace_call_fd(void)
{
    struct pu_daemon d;

    daemon_start(&d, "0=ram:16M", 0, NULL);
    attack_replace_call_fd(&d);
    daemon_finish(&d);
}

static void test_2_call_fd_made_blocking_later(void)
{
    struct pu_daemon d;

    daemon_start(&d, "0=ram:16M", 0, NULL);
    attack_call_fd_made_blocking_later(&d);
    daemon_finish(&d);
}

static void test_2_full_err_fd(void)
{
    struct pu_daemon d;

    daemon_start(&d, "0=ram:16M", 0, NULL);
    attack_full_err_fd(&d);
    daemon_finish(&d);
}

/* Served while the slow peer holds (one daemon), and the peer dropped (another). */
static void slowloris_case(enum loris_mode mode)
{
    struct pu_daemon d;

    daemon_start(&d, "0=ram:16M", 0, hold_timeout_args);
    attack_slowloris_held(&d, &mode, 1);
    daemon_finish(&d);
    daemon_start(&d, "0=ram:16M", 0, drop_timeout_args);
    attack_slowloris_dropped(&d, &mode, 1);
    daemon_finish(&d);
}

static void test_3_half_header(void)
{
    slowloris_case(LORIS_HALF_HEADER);
}

static void test_3_trickle(void)
{
    slowloris_case(LORIS_TRICKLE);
}

static void test_3_flood(void)
{
    slowloris_case(LORIS_FLOOD);
}

static void test_4_emfile(void)
{
    struct pu_daemon d;

    /* as in the issue: 64 fds (prlimit --nofile=64:64), 70 connections */
    daemon_start(&d, "0=ram:16M", 64, NULL);
    attack_emfile(&d, 70, NULL);
    daemon_finish(&d);
}

static void test_5_pipe_kick(void)
{
    struct pu_daemon d;

    daemon_start(&d, "0=ram:16M", 0, NULL);
    attack_pipe_kick(&d, NULL);
    daemon_finish(&d);
}

static void test_5_semaphore_kick(void)
{
    struct pu_daemon d;

    daemon_start(&d, "0=ram:16M", 0, NULL);
    attack_semaphore_kick(&d, NULL);
    daemon_finish(&d);
}

static void test_6_inflight_memory(void)
{
    static const char *const args[] = { "--queues", "64", NULL };
    struct pu_daemon d;

    daemon_start(&d, "0=ram:16M", 0, args);
    /* one ordinary session first, so its allocations are not counted as growth */
    served(&d, SERVE_MS, "before the inflight-memory attack");
    attack_inflight_memory(&d);
    daemon_finish(&d);
}

static void test_7_pipe(void)
{
    attack_bad_listen_fd(PIPE_ON_STDIN);
}

static void test_7_udp(void)
{
    attack_bad_listen_fd(UDP_SOCKET);
}

static void test_7_socketpair(void)
{
    attack_bad_listen_fd(SOCKETPAIR_END);
}

/* The one --fd that must work: a listening AF_UNIX stream socket. */
static void test_7_listening_socket(void)
{
    struct pu_daemon d;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    pu_daemon_init(&d);
    g_strlcpy(sa.sun_path, d.sock, sizeof(sa.sun_path));
    g_assert_cmpint(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
    g_assert_cmpint(listen(lfd, 16), ==, 0);
    daemon_start_fd(&d, lfd, 3);
    close(lfd);
    served(&d, SERVE_MS, "through an inherited listening socket");
    daemon_finish(&d);
}

/* SET_MEM_TABLE with more fds than VHOST_USER_MAX_FDS must be refused, not half-applied. */
static void test_13_extra_fds(void)
{
    struct pu_daemon d;
    struct rv_fe f;
    struct vhost_user_memory m = { .nregions = 1 };
    int fds[VHOST_USER_MAX_FDS + 1];
    int mem = memfd_create("hostile-13", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    void *p;
    int r;

    daemon_start(&d, "0=ram:16M", 0, NULL);
    r = rv_fe_open(&f, d.sock, 0, REPLY_MS);
    hcheck(r == 0, "connect and negotiate: %s", err_str(r));
    g_assert_cmpint(mem, >=, 0);
    g_assert_cmpint(ftruncate(mem, 1 << 20), ==, 0);
    g_assert_cmpint(fcntl(mem, F_ADD_SEALS, F_SEAL_SHRINK), ==, 0);
    p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, mem, 0);
    g_assert_true(p != MAP_FAILED);
    m.regions[0] = (struct vhost_user_mem_region){ .guest_phys_addr = 0, .memory_size = 1 << 20,
                                                   .userspace_addr = (uintptr_t)p };
    fds[0] = mem;
    for (unsigned i = 1; i < G_N_ELEMENTS(fds); i++) {
        fds[i] = plain_eventfd();
    }
    r = rv_call(f.sock, VHOST_USER_SET_MEM_TABLE, &m,
                offsetof(struct vhost_user_memory, regions) + sizeof(m.regions[0]), fds,
                G_N_ELEMENTS(fds), REPLY_MS, NULL);
    hcheck(r == -EIO || r == -ECONNRESET, "SET_MEM_TABLE with one region and %zu fds (at most "
           "%d): %s", G_N_ELEMENTS(fds), VHOST_USER_MAX_FDS,
           r == 0 ? "acknowledged as a success" : err_str(r));
    rv_fe_close(&f);
    for (unsigned i = 0; i < G_N_ELEMENTS(fds); i++) {
        close(fds[i]);
    }
    munmap(p, 1 << 20);
    served(&d, SERVE_MS, "after a SET_MEM_TABLE with too many fds");
    daemon_finish(&d);
}

/* A request queue's kick fd that epoll cannot watch (/dev/null) must be refused, and said so. */
static void test_14_unwatchable_kick_fd(void)
{
    struct pu_daemon d;
    struct rv_fe f;
    int call = plain_eventfd(), devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    size_t off;
    char *conn;
    int r;

    daemon_start(&d, "0=ram:16M", 0, NULL);
    g_assert_cmpint(devnull, >=, 0);
    off = pu_daemon_log_size(&d);
    raw_fe_open(&f, &d, 0);
    conn = conn_name_since(&d, off);
    r = rv_fe_ring(&f, 2, 8, call, -1);
    hcheck(r == 0, "setting up vq2: %s", err_str(r));
    off = pu_daemon_log_size(&d);
    r = rv_fe_kick(&f, 2, devnull, NULL);
    hcheck(r == -EIO, "SET_VRING_KICK with /dev/null for request queue vq2: %s",
           r == 0 ? "acknowledged (and the queue is dead)" : err_str(r));
    assert_logged_conn_queue(&d, off, conn, 2, "refusing /dev/null as a kick fd");
    rv_fe_close(&f);
    close(call);
    close(devnull);
    g_free(conn);
    served(&d, SERVE_MS, "after /dev/null was offered as a kick fd");
    daemon_finish(&d);
}

/* ---- the hostile neighbour ---------------------------------------------------------------- */

/*
 * The neighbour's fd limit: enough for the bench and the attacks (33
 * connections for finding 1), and reachable by opening connections below
 * the default --max-connections (128) for finding 4.
 */
#define NEIGHBOUR_NOFILE 128
#define NEIGHBOUR_LUN0 "0=ram:64M"
/*
 * vhost-scsi-bench on LUN 0: random reads and writes, one request in
 * flight, for as long as the attacks last (--time is only an upper
 * bound: it is stopped with SIGINT once they are done, and must then end
 * cleanly); then --verify alone, to show the data path intact after them.
 */
#define BENCH_BS "512"
#define BENCH_TIME_S "3600"
#define BENCH_VERIFY_IOS 20000u
/* The attacks together, the bench's drain after SIGINT, and the verify run, within these. */
#define ATTACKS_MS 150000
#define BENCH_MS 60000

struct bench {
    struct pu_proc proc;
    int out;             /* its stdout and stderr (the JSON line, or why not) */
};

struct bench_result {
    uint64_t ios, reads, writes, verify_errors;
};

/* The bench on d: --verify of ios blocks, or (ios 0) random I/O until SIGINT. */
static void bench_start(struct bench *b, struct pu_daemon *d, unsigned ios)
{
    const char *bin = g_getenv("VHOST_SCSI_BENCH");
    char *ios_s = g_strdup_printf("%u", ios);
    const char *verify[] = { bin, "--socket", d->sock, "--verify", "--ios", ios_s, "--bs",
                             BENCH_BS, "--iodepth", "1", "--quiet", "--json", NULL };
    const char *mixed[] = { bin, "--socket", d->sock, "--rw", "rw", "--time", BENCH_TIME_S,
                            "--bs", BENCH_BS, "--iodepth", "1", "--quiet", "--json", NULL };
    struct pu_spawn_opts o = { 0 };
    int p[2];

    g_assert_nonnull(bin);
    g_assert_cmpint(pipe2(p, O_CLOEXEC), ==, 0);
    b->out = p[0];
    o.out_fd = p[1];
    pu_spawn_opts(&b->proc, ios ? verify : mixed, &o);
    close(p[1]);
    g_free(ios_s);
}

static double json_number(const char *json, const char *key)
{
    char *k = g_strdup_printf("\"%s\":", key);
    const char *p = strstr(json, k);

    g_free(k);
    return p ? g_ascii_strtod(p + strlen(key) + 3, NULL) : -1;
}

/* The bench must end within bound_ms with status 0 and its JSON line. */
static struct bench_result bench_finish(struct bench *b, int bound_ms, const char *what)
{
    struct bench_result res = { 0 };
    bool done = pu_proc_exited(&b->proc, bound_ms);
    char buf[4096];
    ssize_t n;
    int status = 0;
    char *s;

    if (!done) {
        kill(b->proc.pid, SIGKILL);
    }
    waitpid(b->proc.pid, &status, 0);
    close(b->proc.pidfd);
    b->proc.pidfd = -1;
    n = read(b->out, buf, sizeof(buf) - 1);
    buf[n > 0 ? n : 0] = 0;
    close(b->out);
    hcheck(done, "the bench (%s) did not finish within %d ms", what, bound_ms);
    s = status_str(status);
    hcheck(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the bench (%s) ended with %s: %s",
           what, s, buf);
    g_free(s);
    g_printerr("# bench %s: %s", what, buf);
    res.ios = (uint64_t)json_number(buf, "ios");
    res.reads = (uint64_t)json_number(buf, "reads");
    res.writes = (uint64_t)json_number(buf, "writes");
    res.verify_errors = (uint64_t)json_number(buf, "verify_errors");
    return res;
}

static void prefill_lun0(struct pu_daemon *d)
{
    struct vfe_config cfg = { .num_request_queues = 1, .queue_size = 64, .mem_size = 4 << 20,
                              .event_idx = true };
    struct vfe *fe = pu_connect_cfg(d, &cfg);
    uint8_t *buf = vfe_alloc(fe, 1 << 20, 4096);
    uint64_t blocks;
    uint32_t bsize;

    g_assert_nonnull(buf);
    pu_make_ready(fe, 0);
    pu_read_capacity16(fe, 0, &blocks, &bsize);
    memset(buf, 0x5a, 1 << 20);
    for (uint64_t lba = 0; lba < blocks; lba += (1 << 20) / bsize) {
        struct vfe_req r = { .data = buf, .data_len = 1 << 20 };

        vfe_lun(r.lun, 0, 0);
        pu_make_rw16(&r, true, lba, (1 << 20) / bsize);
        g_assert_cmpint(vfe_exec(fe, &r, SERVE_MS), ==, 0);
        g_assert_cmpuint(r.resp.status, ==, 0);
    }
    vfe_free(fe, buf);
    vfe_close(fe);
}

/*
 * The attacker: a process of its own (a local peer allowed to connect),
 * at nice 19 so that its own CPU use does not count against the daemon
 * (what the daemon does for it does), running findings 1-6 one after the
 * other against the daemon and finding 7 against daemons of its own.
 * Slow peers are only held here (the neighbour's daemon keeps them for
 * HOLD_TIMEOUT_MS); their dropping is /hostile/3-slow-loris/'s.
 */
static void attacker(struct pu_daemon *d)
{
    static const enum loris_mode all_loris[] = { LORIS_HALF_HEADER, LORIS_TRICKLE,
                                                 LORIS_FLOOD };
    int64_t t0 = now_ms();

    prctl(PR_SET_PDEATHSIG, SIGKILL);
    g_assert_cmpint(setpriority(PRIO_PROCESS, 0, 19), ==, 0);
    attack_guard_exhaustion(d, NULL);
    attack_full_call_fd(d);
    attack_replace_call_fd(d);
    attack_call_fd_made_blocking_later(d);
    attack_full_err_fd(d);
    attack_slowloris_held(d, all_loris, G_N_ELEMENTS(all_loris));
    /* the bench keeps the I/O threads busy: they are left out of the CPU measure */
    attack_emfile(d, NEIGHBOUR_NOFILE + 6, "vs-io");
    attack_pipe_kick(d, "vs-io");
    attack_semaphore_kick(d, "vs-io");
    attack_inflight_memory(d);
    attack_bad_listen_fds();
    g_printerr("# the attacks took %" G_GINT64_FORMAT " ms\n", now_ms() - t0);
}

/*
 * One daemon (with a control socket, for `stats`), its LUN 0 written all
 * over; the bench runs on it while the attacker runs every attack against
 * it.  Wherever an attack has a well-behaved front-end served while it
 * holds something of the daemon's, the bench must also complete
 * NEIGHBOUR_OPS requests meanwhile (victim_finish): counted, not timed,
 * so a loaded machine slows the case down but cannot fail it, and a
 * daemon that an attack stalls fails it.  The bench then ends cleanly
 * (no failed command), a --verify run passes, and the daemon is alive
 * and exits cleanly.
 */
static void test_neighbour(void)
{
    struct pu_daemon d;
    g_autofree char *ctl = NULL;
    struct bench b;
    struct bench_result r;
    struct pu_proc att;
    int status = 0;
    bool done;
    char *s;

    pu_daemon_init(&d);
    ctl = control_path(&d);
    {
        const char *args[] = { "--queues", "64", "--control", ctl, "--message-timeout-ms",
                               G_STRINGIFY(HOLD_TIMEOUT_MS), NULL };

        daemon_start_in(&d, NEIGHBOUR_LUN0, NEIGHBOUR_NOFILE, args);
    }
    /*
     * The RAM LUN's pages are the daemon's anonymous memory: written once
     * all over first, they do not count as growth in finding 6 while the
     * bench writes them again.
     */
    prefill_lun0(&d);
    bench_start(&b, &d, 0);
    att.pid = fork();
    g_assert_cmpint(att.pid, >=, 0);
    if (att.pid == 0) {
        attacker(&d);
        _exit(0);
    }
    att.pidfd = (int)syscall(SYS_pidfd_open, att.pid, 0);
    g_assert_cmpint(att.pidfd, >=, 0);
    done = pu_proc_exited(&att, ATTACKS_MS);
    if (!done) {
        kill(att.pid, SIGKILL);
    }
    waitpid(att.pid, &status, 0);
    close(att.pidfd);
    s = status_str(status);
    hcheck(done, "the attacks did not finish within %d ms", ATTACKS_MS);
    hcheck(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the attacker failed (%s): see its "
           "message above", s);
    g_free(s);
    hcheck(!pu_proc_exited(&b.proc, 0), "the bench ended during the attacks");
    kill(b.proc.pid, SIGINT);
    r = bench_finish(&b, BENCH_MS, "during the attacks");
    hcheck(r.ios > 0 && r.ios == r.reads + r.writes, "the bench's counts during the attacks "
           "do not add up: %" G_GUINT64_FORMAT " I/Os, %" G_GUINT64_FORMAT " reads, %"
           G_GUINT64_FORMAT " writes", r.ios, r.reads, r.writes);
    assert_alive(&d, 0, "the attacks");

    bench_start(&b, &d, BENCH_VERIFY_IOS);
    r = bench_finish(&b, BENCH_MS, "--verify after the attacks");
    hcheck(r.verify_errors == 0 && r.reads == BENCH_VERIFY_IOS && r.writes == BENCH_VERIFY_IOS,
           "the bench did not verify %u blocks after the attacks", BENCH_VERIFY_IOS);
    daemon_finish(&d);
}

/* ---- harness ----------------------------------------------------------------------------- */

struct hcase {
    const char *path;
    void (*fn)(void);
    unsigned timeout_s;
};

/* Calls fn on each DIR/NAME/daemon.log under dir. */
static void each_daemon_dir(const char *dir, void (*fn)(const char *path, bool is_dir))
{
    GDir *top = g_dir_open(dir, 0, NULL);
    const char *name;

    while (top && (name = g_dir_read_name(top))) {
        char *sub = g_build_filename(dir, name, NULL);
        GDir *d = g_dir_open(sub, 0, NULL);
        const char *f;

        while (d && (f = g_dir_read_name(d))) {
            char *path = g_build_filename(sub, f, NULL);

            fn(path, false);
            g_free(path);
        }
        if (d) {
            g_dir_close(d);
        }
        fn(sub, true);
        g_free(sub);
    }
    if (top) {
        g_dir_close(top);
    }
}

static void print_log_tail(const char *path, bool is_dir)
{
    char *text = NULL;
    gsize len = 0;

    if (is_dir || !g_str_has_suffix(path, "daemon.log") ||
        !g_file_get_contents(path, &text, &len, NULL)) {
        return;
    }
    g_printerr("---- %s (last 8 KiB of %" G_GSIZE_FORMAT " bytes):\n%s\n", path, len,
               len > 8192 ? text + len - 8192 : text);
    g_free(text);
}

static void remove_path(const char *path, bool is_dir)
{
    is_dir ? g_rmdir(path) : g_unlink(path);
}

/*
 * The case runs in a subprocess with TMPDIR set to a directory of its
 * own, so that the daemons' directories (and logs) it leaves behind when
 * it fails or runs out of time are found, printed and removed here.
 */
static void run_case(gconstpointer data)
{
    const struct hcase *c = data;
    char *dir, *old_tmp;

    if (g_test_subprocess()) {
        /* and everything it started dies with it (PR_SET_PDEATHSIG, in turn) */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        c->fn();
        return;
    }
    dir = g_dir_make_tmp("vhost-scsi-hostile-XXXXXX", NULL);
    g_assert_nonnull(dir);
    old_tmp = g_strdup(g_getenv("TMPDIR"));
    g_setenv("TMPDIR", dir, TRUE);
    g_test_trap_subprocess(NULL, (guint64)c->timeout_s * G_USEC_PER_SEC,
                           G_TEST_SUBPROCESS_INHERIT_STDERR);
    old_tmp ? g_setenv("TMPDIR", old_tmp, TRUE) : g_unsetenv("TMPDIR");
    if (!g_test_trap_has_passed()) {
        each_daemon_dir(dir, print_log_tail);
    }
    each_daemon_dir(dir, remove_path);
    g_rmdir(dir);
    g_free(old_tmp);
    g_free(dir);
    g_test_trap_assert_passed();
}

int main(int argc, char **argv)
{
    static const struct hcase cases[] = {
        { "/hostile/1-guard-exhaustion/unguarded-region-truncated", test_1_guard_exhaustion, 60 },
        { "/hostile/2-blocking-notify-fds/call-fd-of-running-queue", test_2_full_call_fd, 30 },
        { "/hostile/2-blocking-notify-fds/replacing-running-call-fd", test_2_replace_call_fd,
          30 },
        { "/hostile/2-blocking-notify-fds/call-fd-made-blocking-after-hand-over",
          test_2_call_fd_made_blocking_later, 30 },
        { "/hostile/2-blocking-notify-fds/err-fd-of-broken-ring", test_2_full_err_fd, 30 },
        { "/hostile/3-slow-loris/half-header", test_3_half_header, 60 },
        { "/hostile/3-slow-loris/trickle", test_3_trickle, 60 },
        { "/hostile/3-slow-loris/flood-without-reading", test_3_flood, 60 },
        { "/hostile/4-emfile/no-busy-loop-at-fd-limit", test_4_emfile, 30 },
        { "/hostile/5-undrainable-kick/pipe-refused", test_5_pipe_kick, 30 },
        { "/hostile/5-undrainable-kick/semaphore-eventfd-at-max", test_5_semaphore_kick, 30 },
        { "/hostile/6-inflight-memory/bounded", test_6_inflight_memory, 60 },
        { "/hostile/7-listen-fd/pipe-refused", test_7_pipe, 20 },
        { "/hostile/7-listen-fd/udp-socket-refused", test_7_udp, 20 },
        { "/hostile/7-listen-fd/socketpair-refused", test_7_socketpair, 20 },
        { "/hostile/7-listen-fd/listening-unix-socket-works", test_7_listening_socket, 30 },
        { "/hostile/13-extra-fds/set-mem-table-refused", test_13_extra_fds, 30 },
        { "/hostile/14-unwatchable-kick-fd/refused-and-named", test_14_unwatchable_kick_fd, 30 },
        { "/hostile/limits/max-connections", test_max_connections, 30 },
        { "/hostile/limits/max-connections-per-uid", test_max_connections_per_uid, 30 },
        { "/hostile/limits/message-timeout-ms", test_message_timeout, 45 },
        { "/hostile/neighbour", test_neighbour, 360 },
    };

    g_test_init(&argc, &argv, NULL);
    signal(SIGPIPE, SIG_IGN);
    /*
     * Warnings are not fatal here: the front-end library warns when the
     * daemon refuses or drops it, which is what these cases make it do.
     */
    g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
    if (!g_test_subprocess()) {
        /* a failed case (its subprocess) is reported, and the next one runs */
        g_test_set_nonfatal_assertions();
    }
    for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_test_add_data_func(cases[i].path, &cases[i], run_case);
    }
    return g_test_run();
}
