/*
 * Protocol tests of the real vhost-scsi-target daemon, driven through the
 * front-end library as a guest would drive it: the daemon is started once
 * on a socket in a temporary directory with a RAM, a null and a file LUN,
 * and every test connects, checks one behaviour (unit attention first,
 * INQUIRY, READ CAPACITY(16), data integrity with many requests in flight
 * on two queues, missing LUNs, TMFs, stop/start, reconnect, indirect
 * descriptors with ADD_MEM_REG, a full ring, a front-end that dies with
 * requests in flight) and disconnects; the daemon must keep listening
 * throughout and exit cleanly on SIGTERM at the end.  The last test
 * runs vhost-scsi-bench --verify against the same daemon.  Binaries come
 * from the environment (VHOST_SCSI_TARGET, VHOST_SCSI_BENCH), set by meson.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <linux/virtio_scsi.h>

#include "vhost-frontend.h"

#define TIMEOUT_MS 10000
#define RAM_BYTES (64ull << 20)
#define NULL_BYTES (1ull << 30)
#define FILE_BYTES (16ull << 20)

struct daemon {
    char *dir, *sock, *file;
    GPid pid;
    int pidfd;
};

static struct daemon d;

/* ---- daemon lifecycle ------------------------------------------------ */

static void child_setup(gpointer unused)
{
    /* an aborted test must not leave the daemon holding meson's pipes */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
}

/* Waits up to ms for the daemon to exit; true if it did. */
static bool daemon_wait_exit(int ms)
{
    struct pollfd p = { .fd = d.pidfd, .events = POLLIN };
    return poll(&p, 1, ms) == 1;
}

static void daemon_start(void)
{
    const char *bin = g_getenv("VHOST_SCSI_TARGET");
    g_assert_nonnull(bin);
    d.dir = g_dir_make_tmp("vhost-scsi-proto-XXXXXX", NULL);
    g_assert_nonnull(d.dir);
    d.sock = g_build_filename(d.dir, "target.sock", NULL);
    d.file = g_build_filename(d.dir, "lun2.img", NULL);
    int fd = open(d.file, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, FILE_BYTES), ==, 0);
    close(fd);

    char *lun2 = g_strdup_printf("2=file:%s", d.file);
    const char *argv[] = { bin, "--socket-path", d.sock, "--lun", "0=ram:64M",
                           "--lun", "1=null:1G", "--lun", lun2, "--queues", "4", NULL };
    GError *err = NULL;
    /* the daemon's stdout goes to our stderr: stdout carries TAP */
    /*
     * A duplicate of fd 2, not 2 itself: GLib closes the source fds it
     * moves into place, and handing it 2 for stderr leaves the child with
     * no fd 2 at all (its logs would land in whatever reuses the number).
     */
    int errfd = dup(2);
    gboolean ok = g_spawn_async_with_fds(NULL, (char **)argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD,
                                         child_setup, NULL, &d.pid, -1, errfd, errfd, &err);
    close(errfd);
    g_assert_no_error(err);
    g_assert_true(ok);
    g_free(lun2);
    d.pidfd = syscall(SYS_pidfd_open, d.pid, 0);
    g_assert_cmpint(d.pidfd, >=, 0);

    /* the socket appears once the daemon listens; give up if it dies or after 10 s */
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    g_strlcpy(sa.sun_path, d.sock, sizeof(sa.sun_path));
    for (int i = 0; i < 1000; i++) {
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int r = connect(s, (struct sockaddr *)&sa, sizeof(sa));
        int e = errno;
        close(s);
        if (r == 0) {
            return;   /* a probe connection: the daemon sees a front-end hang up at once */
        }
        g_assert_true(e == ENOENT || e == ECONNREFUSED);
        g_assert_false(daemon_wait_exit(10));
    }
    g_error("vhost-scsi-target did not listen on %s within 10 s", d.sock);
}

static int daemon_stop(void)
{
    int status = -1;
    kill(d.pid, SIGTERM);
    if (!daemon_wait_exit(TIMEOUT_MS)) {
        g_printerr("vhost-scsi-target ignored SIGTERM for %d ms\n", TIMEOUT_MS);
        kill(d.pid, SIGKILL);
    }
    waitpid(d.pid, &status, 0);
    close(d.pidfd);
    g_unlink(d.file);
    g_unlink(d.sock);
    g_rmdir(d.dir);
    g_free(d.file);
    g_free(d.sock);
    g_free(d.dir);
    return status;
}

static bool daemon_alive(void)
{
    return !daemon_wait_exit(0);
}

/* ---- SCSI helpers ---------------------------------------------------- */

static struct vfe *connect_fe(unsigned nrq, bool event_idx)
{
    struct vfe_config cfg = {
        .transport = VFE_VHOST_USER, .path = d.sock, .num_request_queues = nrq,
        .queue_size = 256, .mem_size = 32 << 20, .event_idx = event_idx,
        .timeout_ms = TIMEOUT_MS,
    };
    struct vfe *fe = NULL;
    g_assert_cmpint(vfe_open(&cfg, &fe), ==, 0);
    g_assert_nonnull(fe);
    return fe;
}

static void put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) {
        p[i] = v >> (8 * (n - 1 - i));
    }
}

static uint64_t get_be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++) {
        v = v << 8 | p[i];
    }
    return v;
}

struct sense {
    unsigned key, asc, ascq;
};

static struct sense sense_of(const struct virtio_scsi_cmd_resp *r)
{
    struct sense s = { 0 };
    const uint8_t *b = r->sense;
    if (r->sense_len >= 14 && (b[0] & 0x7e) == 0x70) {
        s = (struct sense){ b[2] & 0xf, b[12], b[13] };
    } else if (r->sense_len >= 4 && (b[0] & 0x7e) == 0x72) {
        s = (struct sense){ b[1] & 0xf, b[2], b[3] };
    }
    return s;
}

/* One synchronous command on request queue q. */
static void cmd(struct vfe *fe, unsigned q, unsigned target, unsigned lun, const uint8_t *cdb,
                unsigned cdb_len, void *buf, uint32_t len, bool in, struct vfe_req *out)
{
    memset(out, 0, sizeof(*out));
    out->queue = q;
    vfe_lun(out->lun, target, lun);
    memcpy(out->cdb, cdb, cdb_len);
    out->data = buf;
    out->data_len = len;
    out->data_in = in;
    g_assert_cmpint(vfe_exec(fe, out, TIMEOUT_MS), ==, 0);
}

static struct vfe_req tur(struct vfe *fe, unsigned target, unsigned lun)
{
    static const uint8_t cdb[6] = { 0x00 };
    struct vfe_req r;
    cmd(fe, 0, target, lun, cdb, sizeof(cdb), NULL, 0, false, &r);
    return r;
}

/* Consumes pending unit attentions; the LUN must then be ready. */
static void make_ready(struct vfe *fe, unsigned target, unsigned lun)
{
    for (int i = 0; i < 4; i++) {
        struct vfe_req r = tur(fe, target, lun);
        g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
        if (r.resp.status == 0) {
            return;
        }
        g_assert_cmpuint(r.resp.status, ==, 2);
        g_assert_cmpuint(sense_of(&r.resp).key, ==, 6);
    }
    g_assert_not_reached();
}

static void read_capacity16(struct vfe *fe, unsigned lun, uint64_t *blocks, uint32_t *bsize)
{
    uint8_t cdb[16] = { 0x9e, 0x10 };
    put_be(&cdb[10], 32, 4);
    uint8_t *buf = vfe_alloc(fe, 32, 64);
    struct vfe_req r;
    cmd(fe, 0, 0, lun, cdb, sizeof(cdb), buf, 32, true, &r);
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
    g_assert_cmpuint(r.resp.status, ==, 0);
    *blocks = get_be(buf, 8) + 1;
    *bsize = get_be(buf + 8, 4);
    vfe_free(fe, buf);
}

static void make_rw(struct vfe_req *r, bool write, uint64_t lba, uint32_t blocks)
{
    memset(r->cdb, 0, sizeof(r->cdb));
    r->cdb[0] = write ? 0x8a : 0x88;
    put_be(&r->cdb[2], lba, 8);
    put_be(&r->cdb[10], blocks, 4);
    r->data_in = !write;
}

static uint8_t pattern(uint64_t seed, uint64_t byte)
{
    uint64_t x = (seed + byte / 8) * 0x9e3779b97f4a7c15ull;
    return (uint8_t)(x >> (56 - 8 * (byte % 8)));
}

struct batch {
    unsigned done;
};

static void batch_done(struct vfe_req *r)
{
    ((struct batch *)r->opaque)->done++;
}

/*
 * Writes n_io blocks of io_bytes at scattered offsets of lun with nrq
 * queues and everything in flight at once, reads them all back the same
 * way and compares.
 */
static void write_read_compare(struct vfe *fe, unsigned nrq, unsigned lun, uint64_t seed,
                               unsigned n_io, uint32_t io_bytes, bool reuse_pattern_only)
{
    uint64_t blocks;
    uint32_t bsize;
    read_capacity16(fe, lun, &blocks, &bsize);
    uint32_t nb = io_bytes / bsize;
    uint64_t slots = blocks / nb;
    g_assert_cmpuint(slots, >=, n_io);

    struct vfe_req *reqs = g_new0(struct vfe_req, n_io);
    struct batch b = { 0 };
    for (unsigned i = 0; i < n_io; i++) {
        reqs[i].data = vfe_alloc(fe, io_bytes, 4096);
        g_assert_nonnull(reqs[i].data);
        reqs[i].data_len = io_bytes;
        reqs[i].queue = i % nrq;
        reqs[i].opaque = &b;
        reqs[i].complete = batch_done;
        reqs[i].tag = i + 1;
        vfe_lun(reqs[i].lun, 0, lun);
    }
    for (int pass = reuse_pattern_only ? 1 : 0; pass < 2; pass++) {
        bool write = pass == 0;
        b.done = 0;
        for (unsigned i = 0; i < n_io; i++) {
            /* stride across the LUN so requests land far apart */
            uint64_t lba = (i * (slots / n_io)) * nb;
            uint8_t *p = reqs[i].data;
            for (uint32_t j = 0; j < io_bytes; j++) {
                p[j] = write ? pattern(seed, lba * bsize + j) : 0xa5;
            }
            make_rw(&reqs[i], write, lba, nb);
            g_assert_cmpint(vfe_submit(fe, &reqs[i]), ==, 0);
        }
        while (b.done < n_io) {
            g_assert_cmpint(vfe_poll(fe, TIMEOUT_MS), >, 0);
        }
        for (unsigned i = 0; i < n_io; i++) {
            g_assert_cmpuint(reqs[i].resp.response, ==, VIRTIO_SCSI_S_OK);
            g_assert_cmpuint(reqs[i].resp.status, ==, 0);
            if (!write) {
                uint64_t lba = (i * (slots / n_io)) * nb;
                const uint8_t *p = reqs[i].data;
                for (uint32_t j = 0; j < io_bytes; j++) {
                    if (p[j] != pattern(seed, lba * bsize + j)) {
                        g_error("LUN %u lba %" G_GUINT64_FORMAT " byte %u: read 0x%02x, wrote 0x%02x",
                                lun, lba, j, p[j], pattern(seed, lba * bsize + j));
                    }
                }
            }
        }
    }
    for (unsigned i = 0; i < n_io; i++) {
        vfe_free(fe, reqs[i].data);
    }
    g_free(reqs);
}

/* ---- tests ----------------------------------------------------------- */

static void test_unit_attention_first(void)
{
    struct vfe *fe = connect_fe(1, true);
    struct vfe_req r = tur(fe, 0, 0);
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
    g_assert_cmpuint(r.resp.status, ==, 2);      /* CHECK CONDITION */
    struct sense s = sense_of(&r.resp);
    g_assert_cmpuint(s.key, ==, 6);              /* UNIT ATTENTION */
    g_assert_cmphex(s.asc, ==, 0x29);            /* power on, reset or bus device reset */
    r = tur(fe, 0, 0);
    g_assert_cmpuint(r.resp.status, ==, 0);      /* consumed: now GOOD */
    vfe_close(fe);
}

static void test_inquiry(void)
{
    struct vfe *fe = connect_fe(1, true);
    make_ready(fe, 0, 0);
    uint8_t cdb[6] = { 0x12, 0, 0, 0, 96, 0 };
    uint8_t *buf = vfe_alloc(fe, 96, 64);
    struct vfe_req r;
    cmd(fe, 0, 0, 0, cdb, sizeof(cdb), buf, 96, true, &r);
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
    g_assert_cmpuint(r.resp.status, ==, 0);
    g_assert_cmphex(buf[0], ==, 0x00);           /* connected direct-access block device */
    g_assert_cmpuint(buf[4] + 5u, >=, 36);       /* standard data has vendor, product, revision */
    for (int i = 8; i < 36; i++) {
        g_assert_true(g_ascii_isprint(buf[i]));
    }
    /* the device wrote the response plus (96 - resid) data bytes */
    g_assert_cmpuint(r.used_len, ==, sizeof(struct virtio_scsi_cmd_resp) + 96 - r.resp.resid);

    /* a hole in an existing target's LUN space: peripheral qualifier 011b */
    memset(buf, 0xff, 96);
    cmd(fe, 0, 0, 9, cdb, sizeof(cdb), buf, 96, true, &r);
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
    g_assert_cmphex(buf[0] >> 5, ==, 3);
    vfe_free(fe, buf);
    vfe_close(fe);
}

static void test_read_capacity(void)
{
    struct vfe *fe = connect_fe(1, true);
    static const struct { unsigned lun; uint64_t bytes; } luns[] = {
        { 0, RAM_BYTES }, { 1, NULL_BYTES }, { 2, FILE_BYTES },
    };
    for (unsigned i = 0; i < G_N_ELEMENTS(luns); i++) {
        make_ready(fe, 0, luns[i].lun);
        uint64_t blocks;
        uint32_t bsize;
        read_capacity16(fe, luns[i].lun, &blocks, &bsize);
        g_assert_true(bsize == 512 || bsize == 4096);
        g_assert_cmpuint(blocks * bsize, ==, luns[i].bytes);
    }
    vfe_close(fe);
}

static void test_write_read_ram(void)
{
    struct vfe *fe = connect_fe(2, true);
    make_ready(fe, 0, 0);
    /* 128 requests of 8 KiB in flight, 64 on each of two queues */
    write_read_compare(fe, 2, 0, 1, 128, 8192, false);
    vfe_close(fe);
}

static void test_write_read_file(void)
{
    struct vfe *fe = connect_fe(2, false);   /* also without EVENT_IDX */
    make_ready(fe, 0, 2);
    write_read_compare(fe, 2, 2, 2, 64, 64 << 10, false);
    vfe_close(fe);
}

static void test_null_lun(void)
{
    struct vfe *fe = connect_fe(1, true);
    make_ready(fe, 0, 1);
    uint8_t *buf = vfe_alloc(fe, 4096, 4096);
    struct vfe_req r = { .data = buf, .data_len = 4096 };
    vfe_lun(r.lun, 0, 1);
    make_rw(&r, true, 1000, 4096 / 512);
    g_assert_cmpint(vfe_exec(fe, &r, TIMEOUT_MS), ==, 0);
    g_assert_cmpuint(r.resp.status, ==, 0);
    make_rw(&r, false, (NULL_BYTES / 512) - 8, 8);   /* the last 4 KiB */
    g_assert_cmpint(vfe_exec(fe, &r, TIMEOUT_MS), ==, 0);
    g_assert_cmpuint(r.resp.status, ==, 0);
    make_rw(&r, false, NULL_BYTES / 512, 8);          /* past the end */
    g_assert_cmpint(vfe_exec(fe, &r, TIMEOUT_MS), ==, 0);
    g_assert_cmpuint(r.resp.status, ==, 2);
    g_assert_cmpuint(sense_of(&r.resp).key, ==, 5);  /* ILLEGAL REQUEST */
    g_assert_cmphex(sense_of(&r.resp).asc, ==, 0x21); /* LBA out of range */
    vfe_free(fe, buf);
    vfe_close(fe);
}

static void test_missing_lun(void)
{
    struct vfe *fe = connect_fe(1, true);
    struct vfe_req r = tur(fe, 5, 0);              /* a target that doesn't exist */
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_BAD_TARGET);
    r = tur(fe, 0, 7);                             /* a LUN that doesn't exist */
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_BAD_TARGET);
    uint8_t lun[8], resp = 0xee;
    vfe_lun(lun, 5, 0);
    g_assert_cmpint(vfe_tmf(fe, lun, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0, &resp, TIMEOUT_MS),
                    ==, 0);
    g_assert_cmpuint(resp, ==, VIRTIO_SCSI_S_BAD_TARGET);
    /* the connection is still fine */
    make_ready(fe, 0, 0);
    vfe_close(fe);
}

static void test_lun_reset(void)
{
    struct vfe *fe = connect_fe(1, true);
    make_ready(fe, 0, 0);
    uint8_t lun[8], resp = 0xee;
    vfe_lun(lun, 0, 0);
    g_assert_cmpint(vfe_tmf(fe, lun, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0, &resp, TIMEOUT_MS),
                    ==, 0);
    g_assert_true(resp == VIRTIO_SCSI_S_OK || resp == VIRTIO_SCSI_S_FUNCTION_SUCCEEDED);
    /* the reset is reported once to the initiator */
    struct vfe_req r = tur(fe, 0, 0);
    g_assert_cmpuint(r.resp.status, ==, 2);
    g_assert_cmpuint(sense_of(&r.resp).key, ==, 6);
    g_assert_cmphex(sense_of(&r.resp).asc, ==, 0x29);
    r = tur(fe, 0, 0);
    g_assert_cmpuint(r.resp.status, ==, 0);
    /* an unsupported TMF is rejected, not ignored */
    g_assert_cmpint(vfe_tmf(fe, lun, VIRTIO_SCSI_T_TMF_CLEAR_ACA, 0, &resp, TIMEOUT_MS), ==, 0);
    g_assert_cmpuint(resp, ==, VIRTIO_SCSI_S_FUNCTION_REJECTED);
    vfe_close(fe);
}

static void test_stop_start(void)
{
    struct vfe *fe = connect_fe(2, true);
    make_ready(fe, 0, 0);
    write_read_compare(fe, 2, 0, 3, 32, 4096, false);
    g_assert_cmpint(vfe_stop(fe), ==, 0);
    g_assert_cmpint(vfe_start(fe), ==, 0);
    /* same rings, resumed at the reported bases: data still reads back */
    write_read_compare(fe, 2, 0, 3, 32, 4096, true);
    vfe_close(fe);
}

static void test_reconnect(void)
{
    for (int round = 0; round < 3; round++) {
        struct vfe *fe = connect_fe(round + 1, round != 1);
        make_ready(fe, 0, 0);
        /* the RAM LUN belongs to the daemon: what round 0 wrote survives */
        write_read_compare(fe, round + 1, 0, 42, 16, 4096, round > 0);
        vfe_close(fe);
        g_assert_true(daemon_alive());
    }
}

static struct vfe *connect_cfg(struct vfe_config *cfg)
{
    cfg->transport = VFE_VHOST_USER;
    cfg->path = d.sock;
    cfg->timeout_ms = TIMEOUT_MS;
    struct vfe *fe = NULL;
    g_assert_cmpint(vfe_open(cfg, &fe), ==, 0);
    return fe;
}

static void test_indirect_add_mem_reg(void)
{
    /* indirect descriptors, and the region given with ADD_MEM_REG */
    struct vfe_config cfg = { .num_request_queues = 2, .queue_size = 128, .mem_size = 32 << 20,
                              .event_idx = true, .indirect = true, .add_mem_reg = true };
    struct vfe *fe = connect_cfg(&cfg);
    make_ready(fe, 0, 0);
    /* 200 requests in flight fit a ring of 128 only as one descriptor each */
    write_read_compare(fe, 2, 0, 4, 200, 4096, false);
    vfe_close(fe);
}

static void test_ring_full(void)
{
    struct vfe_config cfg = { .num_request_queues = 1, .queue_size = 16, .mem_size = 8 << 20,
                              .event_idx = true, .batch = true };
    struct vfe *fe = connect_cfg(&cfg);
    make_ready(fe, 0, 1);
    struct vfe_req reqs[16];
    struct batch b = { 0 };
    unsigned n = 0;
    for (;; n++) {
        g_assert_cmpuint(n, <, G_N_ELEMENTS(reqs));
        struct vfe_req *r = &reqs[n];
        memset(r, 0, sizeof(*r));
        vfe_lun(r->lun, 0, 1);
        r->data = vfe_alloc(fe, 4096, 4096);
        r->data_len = 4096;
        r->opaque = &b;
        r->complete = batch_done;
        make_rw(r, false, n * 8, 8);
        int ret = vfe_submit(fe, r);
        if (ret == -EAGAIN) {
            vfe_free(fe, r->data);
            break;
        }
        g_assert_cmpint(ret, ==, 0);
    }
    /* 3 descriptors per request in a ring of 16 */
    g_assert_cmpuint(n, ==, 16 / 3);
    vfe_kick(fe);
    while (b.done < n) {
        g_assert_cmpint(vfe_poll(fe, TIMEOUT_MS), >, 0);
    }
    for (unsigned i = 0; i < n; i++) {
        g_assert_cmpuint(reqs[i].resp.status, ==, 0);
        vfe_free(fe, reqs[i].data);
    }
    vfe_close(fe);
}

/*
 * A front-end that dies with requests in flight (QEMU killed): the daemon
 * must drain them, forget the connection and serve the next one with the
 * data written before intact.
 */
static void test_frontend_crash(void)
{
    struct vfe *fe = connect_fe(2, true);
    make_ready(fe, 0, 0);
    write_read_compare(fe, 2, 0, 77, 16, 4096, false);
    vfe_close(fe);

    pid_t child = fork();
    g_assert_cmpint(child, >=, 0);
    if (child == 0) {
        struct vfe_config cfg = { .transport = VFE_VHOST_USER, .path = d.sock,
                                  .num_request_queues = 2, .queue_size = 256,
                                  .mem_size = 16 << 20, .event_idx = true,
                                  .timeout_ms = TIMEOUT_MS, .batch = true };
        struct vfe *cfe;
        if (vfe_open(&cfg, &cfe) < 0) {
            _exit(2);
        }
        /* 64 large reads of the null LUN in flight, then die without a word */
        for (unsigned i = 0; i < 64; i++) {
            struct vfe_req *r = g_new0(struct vfe_req, 1);
            vfe_lun(r->lun, 0, 1);
            r->queue = i % 2;
            r->data = vfe_alloc(cfe, 128 << 10, 4096);
            r->data_len = 128 << 10;
            make_rw(r, false, (uint64_t)i * 256, 256);
            if (!r->data || vfe_submit(cfe, r) < 0) {
                _exit(3);
            }
        }
        vfe_kick(cfe);
        _exit(0);
    }
    int status;
    g_assert_cmpint(waitpid(child, &status, 0), ==, child);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    g_assert_true(daemon_alive());

    fe = connect_fe(2, true);
    make_ready(fe, 0, 0);
    write_read_compare(fe, 2, 0, 77, 16, 4096, true);
    vfe_close(fe);
}

static void test_bench_verify(void)
{
    const char *bench = g_getenv("VHOST_SCSI_BENCH");
    g_assert_nonnull(bench);
    const char *argv[] = { bench, "--socket", d.sock, "--verify", "--ios", "4000",
                           "--iodepth", "32", "--queues", "2", "--bs", "4k", "--quiet",
                           "--json", "--pid", NULL, NULL };
    char *pid = g_strdup_printf("%d", d.pid);
    argv[G_N_ELEMENTS(argv) - 2] = pid;
    char *out = NULL;
    int status;
    GError *err = NULL;
    g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_CHILD_INHERITS_STDERR,
                               NULL, NULL, &out, NULL, &status, &err));
    g_assert_no_error(err);
    g_test_message("bench: %s", out);
    g_assert_true(g_spawn_check_wait_status(status, NULL));
    g_assert_nonnull(strstr(out, "\"verify_errors\":0"));
    g_assert_nonnull(strstr(out, "\"reads\":4000"));
    g_assert_nonnull(strstr(out, "\"writes\":4000"));
    g_free(out);
    g_free(pid);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    signal(SIGPIPE, SIG_IGN);
    g_test_add_func("/target/unit-attention-first", test_unit_attention_first);
    g_test_add_func("/target/inquiry", test_inquiry);
    g_test_add_func("/target/read-capacity-16", test_read_capacity);
    g_test_add_func("/target/write-read-ram-2-queues", test_write_read_ram);
    g_test_add_func("/target/write-read-file-no-event-idx", test_write_read_file);
    g_test_add_func("/target/null-lun", test_null_lun);
    g_test_add_func("/target/missing-lun", test_missing_lun);
    g_test_add_func("/target/lun-reset", test_lun_reset);
    g_test_add_func("/target/stop-start", test_stop_start);
    g_test_add_func("/target/reconnect", test_reconnect);
    g_test_add_func("/target/indirect-add-mem-reg", test_indirect_add_mem_reg);
    g_test_add_func("/target/ring-full", test_ring_full);
    g_test_add_func("/target/frontend-crash", test_frontend_crash);
    g_test_add_func("/target/bench-verify", test_bench_verify);
    daemon_start();
    int ret = g_test_run();
    g_assert_true(daemon_alive());
    int status = daemon_stop();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        g_printerr("vhost-scsi-target exited with status 0x%x after SIGTERM\n", status);
        ret = ret ? ret : 1;
    }
    return ret;
}
