/*
 * Specification of the per-connection limits of the real daemon
 * (docs/security.md, "Limits"), one case per limit, each at a small value
 * set by its option: memory regions (--max-mem-regions: announced by
 * GET_MAX_MEM_SLOTS, a table beyond refused, by ADD_MEM_REG and by
 * SET_MEM_TABLE alike), queues (--queues: GET_QUEUE_NUM says how many, a
 * request for a queue past them refused), requests in flight per queue
 * (--max-inflight: the rest of a fuller ring waits there and is served
 * once slots come back, nothing is refused or lost), bytes in flight per
 * queue (16 MiB of buffers, not an option: the same, without a log line),
 * the control socket's request size (--control-max-request: a longer line
 * is answered with an error and its client closed; others are served) and
 * the log lines one connection causes (a burst, then one a second, then a
 * count of those left out).  At every other limit the daemon logs once,
 * naming the connection (or the control socket and client), and other
 * front-ends are served as before.  Log lines are matched as GRegex
 * patterns.
 * Connections per uid are hostile-test's /hostile/limits/ cases.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>
#include <linux/virtio_scsi.h>

#include "control-client.h"
#include "control-server.h"
#include "log-limit.h"
#include "lun-spec.h"
#include "proto-util.h"
#include "raw-vu.h"
#include "test-hooks.h"

#define REPLY_MS 5000

static void start_daemon(struct pu_daemon *d, const char *const *args)
{
    pu_daemon_init(d);
    d->capture_log = true;   /* what each limit logs is checked */
    pu_daemon_start(d, args);
}

static void finish_daemon(struct pu_daemon *d)
{
    g_assert_cmpint(pu_daemon_stop(d, false), ==, 0);
    pu_daemon_cleanup(d);
}

/* Another front-end does I/O as before: the limit cost only its offender. */
static void others_served(struct pu_daemon *d)
{
    struct pu_rw_spec io = { .lun = 0, .queues = 1, .n_io = 16, .io_bytes = 4096, .seed = 5 };
    struct vfe *fe = pu_connect(d, 1);

    pu_make_ready(fe, 0);
    pu_write_read_compare(fe, &io);
    vfe_close(fe);
}

/* ---- memory regions ---------------------------------------------------- */

#define MEM_REGIONS 2

static struct vhost_user_mem_reg region(unsigned i)
{
    return (struct vhost_user_mem_reg){ .region = {
        .guest_phys_addr = 0x100000000ull + i * 4096ull, .memory_size = 4096,
        .userspace_addr = 0x200000000000ull + i * 4096ull, .mmap_offset = 0 } };
}

static void test_mem_regions(void)
{
    static const char *const args[] = { "--lun", "0=ram:16M", "--max-mem-regions",
                                        G_STRINGIFY(MEM_REGIONS), NULL };
    const char *refused = "conn[0-9]+: ADD_MEM_REG refused: 3 memory regions, more than the 2 slots";
    int mfd = memfd_create("limits-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    struct pu_daemon d;
    struct rv_fe f, g;
    uint64_t slots = 0;
    size_t off;

    g_assert_cmpint(mfd, >=, 0);
    g_assert_cmpint(ftruncate(mfd, 3 * 4096), ==, 0);
    start_daemon(&d, args);
    off = pu_daemon_log_size(&d);
    g_assert_cmpint(rv_fe_open(&f, d.sock, 1ull << VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS,
                               REPLY_MS), ==, 0);
    g_assert_cmpint(rv_get_u64(f.sock, VHOST_USER_GET_MAX_MEM_SLOTS, REPLY_MS, &slots), ==, 0);
    g_assert_cmpuint(slots, ==, MEM_REGIONS);
    for (unsigned i = 0; i < MEM_REGIONS; i++) {
        struct vhost_user_mem_reg r = region(i);

        g_assert_cmpint(rv_call(f.sock, VHOST_USER_ADD_MEM_REG, &r, sizeof(r), &mfd, 1,
                                REPLY_MS, NULL), ==, 0);
    }
    /* One past the slots is refused, and again; the log says so once. */
    for (unsigned i = MEM_REGIONS; i < MEM_REGIONS + 2; i++) {
        struct vhost_user_mem_reg r = region(i);

        g_assert_cmpint(rv_call(f.sock, VHOST_USER_ADD_MEM_REG, &r, sizeof(r), &mfd, 1,
                                REPLY_MS, NULL), ==, -EIO);
    }
    g_assert_true(rv_peer_open(f.sock));
    g_assert_cmpint(pu_daemon_log_wait(&d, off, refused, REPLY_MS), ==, 0);
    g_assert_cmpuint(pu_daemon_log_count(&d, off, "memory regions, more than"), ==, 1);

    /* SET_MEM_TABLE of more regions than the slots: refused the same way. */
    g_assert_cmpint(rv_fe_open(&g, d.sock, 0, REPLY_MS), ==, 0);
    struct vhost_user_memory m = { .nregions = MEM_REGIONS + 1 };
    int fds[MEM_REGIONS + 1];
    for (unsigned i = 0; i <= MEM_REGIONS; i++) {
        m.regions[i] = region(i).region;
        fds[i] = mfd;
    }
    g_assert_cmpint(rv_call(g.sock, VHOST_USER_SET_MEM_TABLE, &m, sizeof(m), fds,
                            MEM_REGIONS + 1, REPLY_MS, NULL), ==, -EIO);
    g_assert_cmpint(pu_daemon_log_wait(&d, off, "conn[0-9]+: SET_MEM_TABLE refused: 3 memory "
                                       "regions", REPLY_MS), ==, 0);
    others_served(&d);
    rv_fe_close(&g);
    rv_fe_close(&f);
    close(mfd);
    finish_daemon(&d);
}

/* ---- queues ------------------------------------------------------------ */

static void test_queues(void)
{
    /* Two request queues: virtqueues 0..3 with the control and event queues. */
    static const char *const args[] = { "--lun", "0=ram:16M", "--queues", "2", NULL };
    struct pu_daemon d;
    struct rv_fe f;
    uint64_t n = 0;
    size_t off;

    start_daemon(&d, args);
    off = pu_daemon_log_size(&d);
    g_assert_cmpint(rv_fe_open(&f, d.sock, 0, REPLY_MS), ==, 0);
    g_assert_cmpint(rv_get_u64(f.sock, VHOST_USER_GET_QUEUE_NUM, REPLY_MS, &n), ==, 0);
    g_assert_cmpuint(n, ==, 4);
    g_assert_cmpint(rv_set_state(f.sock, VHOST_USER_SET_VRING_NUM, 3, 64, REPLY_MS), ==, 0);
    g_assert_cmpint(rv_set_state(f.sock, VHOST_USER_SET_VRING_NUM, 4, 64, REPLY_MS), ==, -EIO);
    g_assert_cmpint(rv_set_state(f.sock, VHOST_USER_SET_VRING_ENABLE, 65, 1, REPLY_MS), ==,
                    -EIO);
    g_assert_cmpint(pu_daemon_log_wait(&d, off, "conn[0-9]+: SET_VRING_NUM for queue 4, but there "
                                       "are only 4 queues", REPLY_MS), ==, 0);
    g_assert_true(rv_peer_open(f.sock));
    others_served(&d);
    rv_fe_close(&f);
    finish_daemon(&d);
}

/* ---- requests in flight per queue -------------------------------------- */

#define INFLIGHT_LIMIT 4
#define INFLIGHT_POSTED 16
/* VSCSI_INFLIGHT_BYTES (hw/scsi/virtio-scsi-int.h): 16 MiB of buffers. */
#define INFLIGHT_BYTES_LIMIT (16u << 20)
#define BIG_READ (4u << 20)

/* The first connection's first request queue's requests in flight (connection-list). */
static gint64 queue0_in_flight(int cfd)
{
    JsonNode *r = pu_ctl_ok(cfd, "connection-list", NULL);
    JsonObject *c = json_array_get_object_element(json_node_get_array(r), 0);
    JsonArray *qs = json_object_get_array_member(c, "queues");
    gint64 n = json_object_get_int_member(json_array_get_object_element(qs, 0), "in_flight");

    json_node_unref(r);
    return n;
}

/*
 * INFLIGHT_POSTED reads of bytes each to a held LUN: want of them in
 * flight (the rest on the ring), all served once released.  With
 * max_inflight the pool runs out first, which is logged once.
 */
static void inflight_held(const char *max_inflight, size_t bytes, int want)
{
    struct pu_daemon d;
    struct pu_batch b = { 0 };
    struct vfe_req req[INFLIGHT_POSTED];
    struct vfe_config cfg = { .num_request_queues = 1, .event_idx = true,
                              .mem_size = (INFLIGHT_POSTED + 1) * bytes + (1u << 20) };
    struct vfe *fe;
    g_autofree char *gate = NULL, *hold = NULL, *ctl = NULL;
    size_t off;
    int cfd, fd;

    pu_daemon_init(&d);
    d.capture_log = true;
    gate = g_build_filename(d.dir, "hold", NULL);
    ctl = g_build_filename(d.dir, "control.sock", NULL);
    hold = g_strdup_printf("0=hold:%zu,while=%s", INFLIGHT_POSTED * bytes, gate);
    {
        const char *args[] = { "--lun", hold, "--queues", "1", "--control", ctl,
                               max_inflight ? "--max-inflight" : NULL, max_inflight, NULL };

        g_setenv(LUN_SPEC_TEST_BACKENDS_ENV, "1", TRUE);
        pu_daemon_start(&d, args);
    }
    fe = pu_connect_cfg(&d, &cfg);       /* rings of 128 entries */
    pu_make_ready(fe, 0);                /* TEST UNIT READY never reaches the backend */
    off = pu_daemon_log_size(&d);
    fd = open(gate, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    g_assert_cmpint(fd, >=, 0);
    close(fd);
    for (unsigned i = 0; i < INFLIGHT_POSTED; i++) {
        memset(&req[i], 0, sizeof(req[i]));
        vfe_lun(req[i].lun, 0, 0);
        req[i].tag = 0x100 + i;
        req[i].data = vfe_alloc(fe, bytes, 4096);
        g_assert_nonnull(req[i].data);
        req[i].data_len = bytes;
        req[i].data_in = true;
        req[i].opaque = &b;
        req[i].complete = pu_batch_done;
        pu_make_rw16(&req[i], false, i * (bytes / 512), bytes / 512);
        g_assert_cmpint(vfe_submit(fe, &req[i]), ==, 0);
    }
    cfd = ctl_client_connect(ctl);
    g_assert_cmpint(cfd, >=, 0);
    if (max_inflight) {
        /* Said once the slots ran out with requests left in the ring: popping has stopped. */
        g_assert_cmpint(pu_daemon_log_wait(&d, off, "conn[0-9]+:vq2: 4 requests in flight, "
                                           "the per-queue limit", PU_TIMEOUT_MS), ==, 0);
    } else {
        /* A turn pops one such read: they come in an iteration at a time. */
        gint64 deadline = g_get_monotonic_time() + PU_TIMEOUT_MS * 1000ll;

        while (queue0_in_flight(cfd) < want) {
            g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        }
    }
    /* Each reading is an iteration of the queue's thread: popping has stopped. */
    for (unsigned i = 0; i < 5; i++) {
        g_assert_cmpint(queue0_in_flight(cfd), ==, want);
    }
    g_assert_cmpint(vfe_poll(fe, 0), >=, 0);
    g_assert_cmpuint(b.done, ==, 0);

    /* Released, every request is served, the held ones and those that waited in the ring. */
    g_assert_cmpint(g_unlink(gate), ==, 0);
    pu_batch_wait(fe, &b, INFLIGHT_POSTED, PU_TIMEOUT_MS);
    for (unsigned i = 0; i < INFLIGHT_POSTED; i++) {
        g_assert_cmpuint(req[i].resp.response, ==, VIRTIO_SCSI_S_OK);
        g_assert_cmpuint(req[i].resp.status, ==, 0);
        vfe_free(fe, req[i].data);
    }
    g_assert_cmpuint(pu_daemon_log_count(&d, off, "per-queue limit"), ==, max_inflight ? 1 : 0);
    close(cfd);
    vfe_close(fe);
    finish_daemon(&d);
    g_unsetenv(LUN_SPEC_TEST_BACKENDS_ENV);
}

static void test_inflight_per_queue(void)
{
    inflight_held(G_STRINGIFY(INFLIGHT_LIMIT), 4096, INFLIGHT_LIMIT);
}

/*
 * Bytes in flight per queue: 4 MiB reads stop being popped once four
 * are in flight (their buffers are past 16 MiB), so a flood of large
 * requests does not fill the thread's io_uring and the device's queue
 * ahead of other queues; nothing is logged (it is no misbehaviour).
 */
static void test_inflight_bytes_per_queue(void)
{
    inflight_held(NULL, BIG_READ, INFLIGHT_BYTES_LIMIT / BIG_READ);
}

/* ---- control request size ---------------------------------------------- */

#define CONTROL_MAX 4096

/* A connection-list request padded with spaces to len bytes, newline included. */
static char *padded_request(size_t len)
{
    static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"connection-list\"";
    char *s = g_malloc(len + 1);

    g_assert_cmpuint(len, >, sizeof(head) + 2);
    memcpy(s, head, sizeof(head) - 1);
    memset(s + sizeof(head) - 1, ' ', len - sizeof(head) - 1);
    s[len - 2] = '}';
    s[len - 1] = '\n';
    s[len] = 0;
    return s;
}

static void send_all(int fd, const char *s)
{
    size_t n = strlen(s);

    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);

        g_assert_cmpint(w, >, 0);
        s += w;
        n -= (size_t)w;
    }
}

static void test_control_request_size(void)
{
    struct pu_daemon d;
    g_autofree char *ctl = NULL, *ok = padded_request(CONTROL_MAX),
                    *big = padded_request(CONTROL_MAX + 100);
    JsonNode *a;
    size_t off;
    int fd, other;

    pu_daemon_init(&d);
    d.capture_log = true;
    ctl = g_build_filename(d.dir, "control.sock", NULL);
    {
        const char *args[] = { "--lun", "0=ram:16M", "--control", ctl, "--control-max-request",
                               G_STRINGIFY(CONTROL_MAX), NULL };

        pu_daemon_start(&d, args);
    }
    off = pu_daemon_log_size(&d);
    fd = ctl_client_connect(ctl);
    other = ctl_client_connect(ctl);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(other, >=, 0);

    /* At the limit (the newline not counted): answered. */
    send_all(fd, ok);
    a = pu_ctl_answer(fd, PU_TIMEOUT_MS);
    g_assert_nonnull(a);
    g_assert_true(json_object_has_member(json_node_get_object(a), "result"));
    json_node_unref(a);

    /* Past it: an Invalid Request error, then the end of the stream. */
    send_all(fd, big);
    a = pu_ctl_answer(fd, PU_TIMEOUT_MS);
    g_assert_nonnull(a);
    JsonObject *err = json_object_get_object_member(json_node_get_object(a), "error");
    g_assert_nonnull(err);
    g_assert_cmpint(json_object_get_int_member(err, "code"), ==, CTL_E_INVALID_REQUEST);
    json_node_unref(a);
    g_assert_null(pu_ctl_answer(fd, PU_TIMEOUT_MS));
    g_assert_cmpint(pu_daemon_log_wait(&d, off, "request longer than 4096 bytes; closing the "
                                       "client", PU_TIMEOUT_MS), ==, 0);
    g_assert_cmpuint(pu_daemon_log_count(&d, off, "request longer than"), ==, 1);

    /* The other client, connected all along, is served. */
    json_node_unref(pu_ctl_ok(other, "connection-list", NULL));
    close(fd);
    close(other);
    finish_daemon(&d);
}

/* ---- log lines --------------------------------------------------------- */

#define FLOOD_MESSAGES 10000

/*
 * A front-end repeating messages that we refuse and log (a SET_INFLIGHT_FD
 * without its fd, a SET_VRING_KICK with a pipe for an eventfd) gets the
 * burst of lines, then one a second of the time the flood took by our own
 * clock, and a count of the rest when it goes; each message is still
 * answered.  A few lines more are allowed for connecting and closing.
 */
static void test_log_lines_per_connection(void)
{
    static const char *const args[] = { "--lun", "0=ram:16M", NULL };
    const struct vhost_user_inflight no_fd = { .mmap_size = 4096, .num_queues = 1,
                                               .queue_size = 128 };
    struct pu_daemon d;
    struct rv_fe f;
    uint64_t features = 0;
    int64_t t0, secs;
    unsigned lines, bound;
    char *conn, *conn_lines, *suppressed;
    size_t off;
    int pfd[2];

    g_assert_cmpint(pipe(pfd), ==, 0);
    start_daemon(&d, args);
    off = pu_daemon_log_size(&d);
    g_assert_cmpint(rv_fe_open(&f, d.sock, 1ull << VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD,
                               REPLY_MS), ==, 0);
    g_assert_cmpint(pu_daemon_log_wait(&d, off, "conn[0-9]+: front-end connected", REPLY_MS),
                    ==, 0);
    conn = pu_daemon_log_find(&d, off, "(conn[0-9]+): front-end connected");
    t0 = g_get_monotonic_time();
    for (unsigned i = 0; i < FLOOD_MESSAGES; i++) {
        if (i % 2) {
            g_assert_cmpint(rv_set_u64(f.sock, VHOST_USER_SET_VRING_KICK, 0, pfd[0], REPLY_MS,
                                       NULL), ==, -EIO);
        } else {
            g_assert_cmpint(rv_call(f.sock, VHOST_USER_SET_INFLIGHT_FD, &no_fd, sizeof(no_fd),
                                    NULL, 0, REPLY_MS, NULL), ==, -EIO);
        }
    }
    secs = (g_get_monotonic_time() - t0) / G_USEC_PER_SEC + 1;
    /* Each line is written before its message is answered: all are in the log now. */
    conn_lines = g_strdup_printf("\\b%s\\b", conn);
    lines = pu_daemon_log_count(&d, off, conn_lines);
    bound = LOG_LIMIT_BURST + LOG_LIMIT_PER_SEC * (unsigned)secs + 4;
    g_printerr("# %u messages in %" G_GINT64_FORMAT " s: %u log lines name %s (at most %u)\n",
               FLOOD_MESSAGES, secs, lines, conn, bound);
    g_assert_cmpuint(lines, <=, bound);
    g_assert_cmpint(rv_get_u64(f.sock, VHOST_USER_GET_FEATURES, REPLY_MS, &features), ==, 0);
    g_assert_cmpuint(features, !=, 0);
    rv_fe_close(&f);

    suppressed = g_strdup_printf("\\b%s: [0-9]+ messages suppressed \\(rate limit\\)", conn);
    g_assert_cmpint(pu_daemon_log_wait(&d, off, suppressed, REPLY_MS), ==, 0);
    others_served(&d);
    g_free(conn_lines);
    g_free(suppressed);
    g_free(conn);
    close(pfd[0]);
    close(pfd[1]);
    finish_daemon(&d);
}

#define RECONNECTS 2000
/* The daemon's CONTROLLER_LOG_BURST: two lines for each of 128 connections. */
#define CONTROLLER_LOG_BURST 256

/*
 * A local process connecting to a controller's socket and hanging up in a
 * loop (each connection a "connected" and a "disconnected" line) gets the
 * controller's burst of lines (every connection of a full house once),
 * then one a second of the time the loop took, and the count of the rest
 * in a "suppressed" line; the daemon serves on.
 */
static void test_log_lines_per_controller_socket(void)
{
    static const char *const args[] = { "--lun", "0=ram:16M", NULL };
    struct pu_daemon d;
    int64_t t0, secs;
    unsigned lines, bound;
    size_t off;

    start_daemon(&d, args);
    off = pu_daemon_log_size(&d);
    t0 = g_get_monotonic_time();
    for (unsigned i = 0; i < RECONNECTS; i++) {
        int sock = rv_connect(d.sock, REPLY_MS);

        g_assert_cmpint(sock, >=, 0);
        close(sock);
    }
    others_served(&d);
    /* Stopped, it has written every line, and the count of the rest when the controller went. */
    g_assert_cmpint(pu_daemon_stop(&d, false), ==, 0);
    secs = (g_get_monotonic_time() - t0) / G_USEC_PER_SEC + 1;
    lines = pu_daemon_log_count(&d, off, "conn[0-9]+: (front-end connected|disconnected)");
    bound = CONTROLLER_LOG_BURST + LOG_LIMIT_PER_SEC * (unsigned)secs + 4;
    g_printerr("# %u reconnects in %" G_GINT64_FORMAT " s: %u connect/disconnect lines "
               "(at most %u)\n", RECONNECTS, secs, lines, bound);
    g_assert_cmpuint(lines, <=, bound);
    g_assert_cmpuint(lines, >=, CONTROLLER_LOG_BURST);
    g_assert_cmpuint(pu_daemon_log_count(&d, off, "controller default's connections: [0-9]+ "
                                         "messages suppressed \\(rate limit\\)"), >=, 1);
    pu_daemon_cleanup(&d);
}

/*
 * The control socket likewise: with CTL_MAX_CLIENTS clients connected,
 * 2000 more that connect and hang up are refused, in the server's burst of
 * lines, one a second of the loop's time, and a "suppressed" count; the
 * clients connected are still answered.
 */
static void test_log_lines_per_control_socket(void)
{
    struct pu_daemon d;
    g_autofree char *ctl = NULL;
    int clients[CTL_MAX_CLIENTS];
    int64_t t0, secs;
    unsigned lines, bound;
    size_t off;

    pu_daemon_init(&d);
    d.capture_log = true;
    ctl = g_build_filename(d.dir, "control.sock", NULL);
    {
        const char *args[] = { "--lun", "0=ram:16M", "--control", ctl, NULL };

        pu_daemon_start(&d, args);
    }
    for (unsigned i = 0; i < CTL_MAX_CLIENTS; i++) {
        clients[i] = ctl_client_connect(ctl);
        g_assert_cmpint(clients[i], >=, 0);
        /* Answered: accepted, so the next one counts it. */
        json_node_unref(pu_ctl_ok(clients[i], "version", NULL));
    }
    off = pu_daemon_log_size(&d);
    t0 = g_get_monotonic_time();
    for (unsigned i = 0; i < RECONNECTS; i++) {
        int fd = ctl_client_connect(ctl);

        g_assert_cmpint(fd, >=, 0);
        close(fd);
    }
    /* A connected client answered after the loop: every refusal before it was logged or counted. */
    json_node_unref(pu_ctl_ok(clients[0], "version", NULL));
    for (unsigned i = 0; i < CTL_MAX_CLIENTS; i++) {
        close(clients[i]);
    }
    g_assert_cmpint(pu_daemon_stop(&d, false), ==, 0);
    secs = (g_get_monotonic_time() - t0) / G_USEC_PER_SEC + 1;
    lines = pu_daemon_log_count(&d, off, "refused a client");
    bound = LOG_LIMIT_BURST + LOG_LIMIT_PER_SEC * (unsigned)secs + 4;
    g_printerr("# %u refused control clients in %" G_GINT64_FORMAT " s: %u lines (at most %u)\n",
               RECONNECTS, secs, lines, bound);
    g_assert_cmpuint(lines, <=, bound);
    g_assert_cmpuint(lines, >=, LOG_LIMIT_BURST);
    g_assert_cmpuint(pu_daemon_log_count(&d, off, "[0-9]+ messages suppressed \\(rate limit\\)"),
                     >=, 1);
    pu_daemon_cleanup(&d);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/limits/mem-regions", test_mem_regions);
    g_test_add_func("/limits/queues", test_queues);
    g_test_add_func("/limits/inflight-per-queue", TEST_HOOKED(test_inflight_per_queue));
    g_test_add_func("/limits/inflight-bytes-per-queue",
                    TEST_HOOKED(test_inflight_bytes_per_queue));
    g_test_add_func("/limits/control-request-size", test_control_request_size);
    g_test_add_func("/limits/log-lines-per-connection", test_log_lines_per_connection);
    g_test_add_func("/limits/log-lines-per-controller-socket",
                    test_log_lines_per_controller_socket);
    g_test_add_func("/limits/log-lines-per-control-socket", test_log_lines_per_control_socket);
    return g_test_run();
}
