/*
 * Protocol tests of the real vhost-scsi-target daemon, driven through the
 * front-end library as a guest would drive it: the daemon is started once
 * on a socket in a temporary directory with a RAM, a null and a file LUN,
 * and every test connects, checks one behaviour (unit attention first,
 * unit attentions per front-end, a front-end truncating its guest RAM,
 * INQUIRY, READ CAPACITY(16), data integrity with many requests in flight
 * on two queues, missing LUNs, TMFs, stop/start, reconnect, indirect
 * descriptors with ADD_MEM_REG, a full ring, a front-end that dies with
 * requests in flight, the inflight-tracking area kept for a front-end that
 * asks for one) and disconnects; the daemon must keep listening
 * throughout and exit cleanly on SIGTERM at the end.  The packed-ring
 * tests repeat those that depend on the ring format (data integrity,
 * indirect descriptors, stop/start, a full ring) with VIRTIO_F_RING_PACKED,
 * which the daemon must offer: they fail, not skip, without it.  The last
 * tests run vhost-scsi-bench --verify against the same daemon, with split
 * rings and packed ones.  Binaries come from the environment
 * (VHOST_SCSI_TARGET, VHOST_SCSI_BENCH), set by meson.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <glib.h>
#include <linux/virtio_config.h>
#include <linux/virtio_scsi.h>

#include "proto-util.h"
#include "scsi-cmd.h"
#include "vhost-user-proto.h"

#define RAM_BYTES (64ull << 20)
#define NULL_BYTES (1ull << 30)
#define FILE_BYTES (16ull << 20)

static struct pu_daemon d;

static void daemon_start(void)
{
    pu_daemon_init(&d);
    char *file = g_build_filename(d.dir, "lun2.img", NULL);
    int fd = open(file, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, FILE_BYTES), ==, 0);
    close(fd);

    char *lun2 = g_strdup_printf("2=file:%s", file);
    const char *args[] = { "--lun", "0=ram:64M", "--lun", "1=null:1G", "--lun", lun2,
                           "--queues", "4", NULL };
    pu_daemon_start(&d, args);
    g_free(lun2);
    g_free(file);
}

static struct vfe *connect_ring(unsigned nrq, bool event_idx, bool packed)
{
    struct vfe_config cfg = { .num_request_queues = nrq, .queue_size = 256,
                              .mem_size = 32 << 20, .event_idx = event_idx, .packed = packed };
    struct vfe *fe = pu_connect_cfg(&d, &cfg);

    g_assert_cmpint(!!(vfe_features(fe) & (1ull << VIRTIO_F_RING_PACKED)), ==, packed);
    return fe;
}

static struct vfe *connect_fe(unsigned nrq, bool event_idx)
{
    return connect_ring(nrq, event_idx, false);
}

/* ---- tests ----------------------------------------------------------- */

static void test_unit_attention_first(void)
{
    struct vfe *fe = connect_fe(1, true);
    struct vfe_req r = pu_tur(fe, 0, 0);
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
    g_assert_cmpuint(r.resp.status, ==, 2);      /* CHECK CONDITION */
    struct pu_sense s = pu_sense_of(&r.resp);
    g_assert_cmpuint(s.key, ==, SCSI_SENSE_UNIT_ATTENTION);
    g_assert_cmphex(s.asc, ==, SCSI_SENSE_ASCQ_BUS_RESET >> 8);   /* power on, reset or BDR */
    r = pu_tur(fe, 0, 0);
    g_assert_cmpuint(r.resp.status, ==, 0);      /* consumed: now GOOD */
    vfe_close(fe);
}

/*
 * Each connection is its own initiator (I_T nexus): a second front-end gets
 * its own power-on unit attention though the first consumed its own, and
 * an I_T NEXUS RESET from one is reported to that one only.
 */
static void test_unit_attention_per_front_end(void)
{
    struct vfe *a = connect_fe(1, true), *b;
    struct vfe_req r;
    uint8_t lun[8], resp = 0xee;

    pu_make_ready(a, 0);
    b = connect_fe(1, true);
    r = pu_tur(b, 0, 0);
    g_assert_cmpuint(r.resp.status, ==, 2);
    g_assert_cmpuint(pu_sense_of(&r.resp).key, ==, SCSI_SENSE_UNIT_ATTENTION);
    g_assert_cmphex(pu_sense_of(&r.resp).code, ==, SCSI_SENSE_ASCQ_BUS_RESET);
    r = pu_tur(b, 0, 0);
    g_assert_cmpuint(r.resp.status, ==, 0);

    vfe_lun(lun, 0, 0);
    g_assert_cmpint(vfe_tmf(b, lun, VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET, 0, &resp, PU_TIMEOUT_MS),
                    ==, 0);
    g_assert_cmpuint(resp, ==, VIRTIO_SCSI_S_OK);     /* FUNCTION COMPLETE */
    r = pu_tur(a, 0, 0);
    g_assert_cmpuint(r.resp.status, ==, 0);
    r = pu_tur(b, 0, 0);
    g_assert_cmpuint(r.resp.status, ==, 2);
    g_assert_cmphex(pu_sense_of(&r.resp).code, ==, SCSI_SENSE_ASCQ_NEXUS_LOSS);
    r = pu_tur(b, 0, 0);
    g_assert_cmpuint(r.resp.status, ==, 0);
    vfe_close(b);
    vfe_close(a);
}

/*
 * A front-end that truncates the memfd behind its guest RAM and then kicks
 * makes the daemon fault on the lost pages: that connection is dropped,
 * the daemon lives, and another front-end's I/O goes on undisturbed.
 */
static void test_truncated_guest_memory_drops_only_that_front_end(void)
{
    struct vfe *a = connect_fe(1, true), *b = connect_fe(1, true), *c;
    struct pu_rw_spec io = { .lun = 0, .queues = 1, .n_io = 16, .io_bytes = 4096, .seed = 77 };
    uint64_t one = 1;
    struct stat st;

    pu_make_ready(a, 0);
    pu_make_ready(b, 0);
    /* Until it is grown back, b's memory is gone for us too: only fds are touched. */
    g_assert_cmpint(fstat(vfe_mem_fd(b), &st), ==, 0);
    g_assert_cmpint(ftruncate(vfe_mem_fd(b), 0), ==, 0);
    g_assert_cmpint(write(vfe_kick_fd(b, 2), &one, sizeof(one)), ==, sizeof(one));
    /* The daemon hangs up on b (its socket is shut down) ... */
    g_assert_cmpint(pu_wait_hangup(b, PU_TIMEOUT_MS), ==, 0);
    g_assert_true(pu_daemon_alive(&d));
    /* ... while a, and a new front-end, are served as before. */
    pu_write_read_compare(a, &io);
    c = connect_fe(1, true);
    pu_make_ready(c, 0);
    io.verify_only = true;
    pu_write_read_compare(c, &io);
    vfe_close(c);
    vfe_close(a);
    /* Closing b reads its rings (now zeros) and finds its socket gone. */
    g_assert_cmpint(ftruncate(vfe_mem_fd(b), st.st_size), ==, 0);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "vhost front-end:*GET_VRING_BASE*");
    vfe_close(b);
    g_test_assert_expected_messages();
}

static void test_inquiry(void)
{
    struct vfe *fe = connect_fe(1, true);
    pu_make_ready(fe, 0);
    uint8_t cdb[SC_CDB_MAX];
    unsigned cdb_len = sc_cdb(scsi_cdb_inquiry(0, 0, 96), cdb);
    uint8_t *buf = vfe_alloc(fe, 96, 64);
    struct sc_datain d;
    struct scsi_inquiry_standard *inq;
    struct vfe_req r;
    pu_cmd(fe, 0, cdb, cdb_len, buf, 96, true, &r);
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
    g_assert_cmpuint(r.resp.status, ==, 0);
    inq = sc_datain_decode(&d, cdb, cdb_len, buf, 96);
    g_assert_nonnull(inq);
    g_assert_cmpint(inq->qualifier, ==, SCSI_INQUIRY_PERIPHERAL_QUALIFIER_CONNECTED);
    g_assert_cmpint(inq->device_type, ==, SCSI_INQUIRY_PERIPHERAL_DEVICE_TYPE_DIRECT_ACCESS);
    g_assert_cmpuint(buf[4] + 5u, >=, 36);       /* standard data has vendor, product, revision */
    for (int i = 8; i < 36; i++) {               /* vendor, product, revision: no NULs */
        g_assert_true(g_ascii_isprint(buf[i]));
    }
    sc_datain_free(&d);
    /* the device wrote the response plus (96 - resid) data bytes */
    g_assert_cmpuint(r.used_len, ==, sizeof(struct virtio_scsi_cmd_resp) + 96 - r.resp.resid);

    /* a hole in an existing target's LUN space: peripheral qualifier 011b */
    memset(buf, 0xff, 96);
    pu_cmd(fe, 9, cdb, cdb_len, buf, 96, true, &r);
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
    inq = sc_datain_decode(&d, cdb, cdb_len, buf, 96);
    g_assert_nonnull(inq);
    g_assert_cmpint(inq->qualifier, ==, SCSI_INQUIRY_PERIPHERAL_QUALIFIER_NOT_SUPPORTED);
    sc_datain_free(&d);
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
        pu_make_ready(fe, luns[i].lun);
        uint64_t blocks;
        uint32_t bsize;
        pu_read_capacity16(fe, luns[i].lun, &blocks, &bsize);
        g_assert_true(bsize == 512 || bsize == 4096);
        g_assert_cmpuint(blocks * bsize, ==, luns[i].bytes);
    }
    vfe_close(fe);
}

static void run_write_read_ram(bool packed)
{
    struct vfe *fe = connect_ring(2, true, packed);
    pu_make_ready(fe, 0);
    /* 128 requests of 8 KiB in flight, 64 on each of two queues */
    struct pu_rw_spec io = { .lun = 0, .queues = 2, .n_io = 128, .io_bytes = 8192,
                             .seed = packed ? 11 : 1 };
    pu_write_read_compare(fe, &io);
    vfe_close(fe);
}

static void test_write_read_ram(void)
{
    run_write_read_ram(false);
}

static void run_write_read_file(bool packed)
{
    struct vfe *fe = connect_ring(2, false, packed);   /* also without EVENT_IDX */
    pu_make_ready(fe, 2);
    struct pu_rw_spec io = { .lun = 2, .queues = 2, .n_io = 64, .io_bytes = 64 << 10,
                             .seed = packed ? 12 : 2 };
    pu_write_read_compare(fe, &io);
    vfe_close(fe);
}

static void test_write_read_file(void)
{
    run_write_read_file(false);
}

static void test_packed_write_read_ram(void)
{
    run_write_read_ram(true);
}

static void test_packed_write_read_file(void)
{
    run_write_read_file(true);
}

static void test_null_lun(void)
{
    struct vfe *fe = connect_fe(1, true);
    pu_make_ready(fe, 1);
    uint8_t *buf = vfe_alloc(fe, 4096, 4096);
    struct vfe_req r = { .data = buf, .data_len = 4096 };
    vfe_lun(r.lun, 0, 1);
    pu_make_rw16(&r, true, 1000, 4096 / 512);
    g_assert_cmpint(vfe_exec(fe, &r, PU_TIMEOUT_MS), ==, 0);
    g_assert_cmpuint(r.resp.status, ==, 0);
    pu_make_rw16(&r, false, (NULL_BYTES / 512) - 8, 8);   /* the last 4 KiB */
    g_assert_cmpint(vfe_exec(fe, &r, PU_TIMEOUT_MS), ==, 0);
    g_assert_cmpuint(r.resp.status, ==, 0);
    pu_make_rw16(&r, false, NULL_BYTES / 512, 8);          /* past the end */
    g_assert_cmpint(vfe_exec(fe, &r, PU_TIMEOUT_MS), ==, 0);
    g_assert_cmpuint(r.resp.status, ==, 2);
    g_assert_cmpuint(pu_sense_of(&r.resp).key, ==, SCSI_SENSE_ILLEGAL_REQUEST);
    g_assert_cmphex(pu_sense_of(&r.resp).asc, ==, SCSI_SENSE_ASCQ_LBA_OUT_OF_RANGE >> 8);
    vfe_free(fe, buf);
    vfe_close(fe);
}

static void test_missing_lun(void)
{
    struct vfe *fe = connect_fe(1, true);
    struct vfe_req r = pu_tur(fe, 5, 0);              /* a target that doesn't exist */
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_BAD_TARGET);
    r = pu_tur(fe, 0, 7);                             /* a LUN that doesn't exist */
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_BAD_TARGET);
    uint8_t lun[8], resp = 0xee;
    vfe_lun(lun, 5, 0);
    g_assert_cmpint(vfe_tmf(fe, lun, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0, &resp, PU_TIMEOUT_MS),
                    ==, 0);
    g_assert_cmpuint(resp, ==, VIRTIO_SCSI_S_BAD_TARGET);
    /* the connection is still fine */
    pu_make_ready(fe, 0);
    vfe_close(fe);
}

static void test_lun_reset(void)
{
    struct vfe *fe = connect_fe(1, true);
    pu_make_ready(fe, 0);
    uint8_t lun[8], resp = 0xee;
    vfe_lun(lun, 0, 0);
    g_assert_cmpint(vfe_tmf(fe, lun, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0, &resp, PU_TIMEOUT_MS),
                    ==, 0);
    g_assert_true(resp == VIRTIO_SCSI_S_OK || resp == VIRTIO_SCSI_S_FUNCTION_SUCCEEDED);
    /* the reset is reported once to the initiator */
    struct vfe_req r = pu_tur(fe, 0, 0);
    g_assert_cmpuint(r.resp.status, ==, 2);
    g_assert_cmpuint(pu_sense_of(&r.resp).key, ==, SCSI_SENSE_UNIT_ATTENTION);
    g_assert_cmphex(pu_sense_of(&r.resp).asc, ==, 0x29);
    r = pu_tur(fe, 0, 0);
    g_assert_cmpuint(r.resp.status, ==, 0);
    /* an unsupported TMF is rejected, not ignored */
    g_assert_cmpint(vfe_tmf(fe, lun, VIRTIO_SCSI_T_TMF_CLEAR_ACA, 0, &resp, PU_TIMEOUT_MS), ==, 0);
    g_assert_cmpuint(resp, ==, VIRTIO_SCSI_S_FUNCTION_REJECTED);
    vfe_close(fe);
}

static void run_stop_start(bool packed)
{
    struct vfe *fe = connect_ring(2, true, packed);
    pu_make_ready(fe, 0);
    struct pu_rw_spec io = { .lun = 0, .queues = 2, .n_io = 32, .io_bytes = 4096,
                             .seed = packed ? 13 : 3 };
    pu_write_read_compare(fe, &io);
    g_assert_cmpint(vfe_stop(fe), ==, 0);
    g_assert_cmpint(vfe_start(fe), ==, 0);
    /* same rings, resumed at the reported bases: data still reads back */
    io.verify_only = true;
    pu_write_read_compare(fe, &io);
    vfe_close(fe);
}

static void test_stop_start(void)
{
    run_stop_start(false);
}

/* A packed ring's base carries the device's used index too: a lost one would stall here. */
static void test_packed_stop_start(void)
{
    run_stop_start(true);
}

static void test_reconnect(void)
{
    for (int round = 0; round < 3; round++) {
        struct vfe *fe = connect_fe(round + 1, round != 1);
        pu_make_ready(fe, 0);
        /* the RAM LUN belongs to the daemon: what round 0 wrote survives */
        struct pu_rw_spec io = { .lun = 0, .queues = round + 1, .n_io = 16, .io_bytes = 4096,
                                 .seed = 42, .verify_only = round > 0 };
        pu_write_read_compare(fe, &io);
        vfe_close(fe);
        g_assert_true(pu_daemon_alive(&d));
    }
}

static void run_indirect_add_mem_reg(bool packed)
{
    /* indirect descriptors, and the region given with ADD_MEM_REG */
    struct vfe_config cfg = { .num_request_queues = 2, .queue_size = 128, .mem_size = 32 << 20,
                              .event_idx = true, .indirect = true, .add_mem_reg = true,
                              .packed = packed };
    struct vfe *fe = pu_connect_cfg(&d, &cfg);
    pu_make_ready(fe, 0);
    /* 200 requests in flight fit a ring of 128 only as one descriptor each */
    struct pu_rw_spec io = { .lun = 0, .queues = 2, .n_io = 200, .io_bytes = 4096,
                             .seed = packed ? 14 : 4 };
    pu_write_read_compare(fe, &io);
    vfe_close(fe);
}

static void test_indirect_add_mem_reg(void)
{
    run_indirect_add_mem_reg(false);
}

static void test_packed_indirect_add_mem_reg(void)
{
    run_indirect_add_mem_reg(true);
}

static void run_ring_full(bool packed)
{
    struct vfe_config cfg = { .num_request_queues = 1, .queue_size = 16, .mem_size = 8 << 20,
                              .event_idx = true, .batch = true, .packed = packed };
    struct vfe *fe = pu_connect_cfg(&d, &cfg);
    pu_make_ready(fe, 1);
    struct vfe_req reqs[16];
    struct pu_batch b = { 0 };
    unsigned n = 0;
    for (;; n++) {
        g_assert_cmpuint(n, <, G_N_ELEMENTS(reqs));
        struct vfe_req *r = &reqs[n];
        memset(r, 0, sizeof(*r));
        vfe_lun(r->lun, 0, 1);
        r->data = vfe_alloc(fe, 4096, 4096);
        r->data_len = 4096;
        r->opaque = &b;
        r->complete = pu_batch_done;
        pu_make_rw16(r, false, n * 8, 8);
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
    pu_batch_wait(fe, &b, n, PU_TIMEOUT_MS);
    for (unsigned i = 0; i < n; i++) {
        g_assert_cmpuint(reqs[i].resp.status, ==, 0);
        vfe_free(fe, reqs[i].data);
    }
    vfe_close(fe);
}

static void test_ring_full(void)
{
    run_ring_full(false);
}

static void test_packed_ring_full(void)
{
    run_ring_full(true);
}

/*
 * A front-end that dies with requests in flight (QEMU killed): the daemon
 * must drain them, forget the connection and serve the next one with the
 * data written before intact.
 */
static void test_frontend_crash(void)
{
    struct vfe *fe = connect_fe(2, true);
    pu_make_ready(fe, 0);
    struct pu_rw_spec io = { .lun = 0, .queues = 2, .n_io = 16, .io_bytes = 4096, .seed = 77 };
    pu_write_read_compare(fe, &io);
    vfe_close(fe);

    pid_t child = fork();
    g_assert_cmpint(child, >=, 0);
    if (child == 0) {
        struct vfe_config cfg = { .transport = VFE_VHOST_USER, .path = d.sock,
                                  .num_request_queues = 2, .queue_size = 256,
                                  .mem_size = 16 << 20, .event_idx = true,
                                  .timeout_ms = PU_TIMEOUT_MS, .batch = true };
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
            pu_make_rw16(r, false, (uint64_t)i * 256, 256);
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
    g_assert_true(pu_daemon_alive(&d));

    fe = connect_fe(2, true);
    pu_make_ready(fe, 0);
    io.verify_only = true;
    pu_write_read_compare(fe, &io);
    vfe_close(fe);
}

/* vhost-scsi-bench --verify ... --json --pid DAEMON ARGS...: its JSON, having succeeded. */
static char *bench_verify(const char *const *args)
{
    const char *bench = g_getenv("VHOST_SCSI_BENCH");
    g_assert_nonnull(bench);
    GPtrArray *argv = g_ptr_array_new_with_free_func(g_free);
    const char *fixed[] = { bench, "--socket", d.sock, "--verify", "--quiet", "--json", "--pid" };
    for (unsigned i = 0; i < G_N_ELEMENTS(fixed); i++) {
        g_ptr_array_add(argv, g_strdup(fixed[i]));
    }
    g_ptr_array_add(argv, g_strdup_printf("%d", d.proc.pid));
    for (unsigned i = 0; args[i]; i++) {
        g_ptr_array_add(argv, g_strdup(args[i]));
    }
    g_ptr_array_add(argv, NULL);
    char *out = NULL;
    int status;
    GError *err = NULL;
    g_assert_true(g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_CHILD_INHERITS_STDERR,
                               NULL, NULL, &out, NULL, &status, &err));
    g_assert_no_error(err);
    g_test_message("bench: %s", out);
    g_assert_true(g_spawn_check_wait_status(status, NULL));
    g_assert_nonnull(strstr(out, "\"verify_errors\":0"));
    g_ptr_array_free(argv, true);
    return out;
}

/*
 * With the front-end asking for inflight tracking (cfg.inflight, as QEMU
 * 8.2+ does), the daemon gives an area with a slice per queue and keeps
 * the request queue's split-layout record (vhost-user.rst) as it serves:
 * started (version 1) for its ring size, its used index where the ring's
 * is, nothing left marked in flight once every request has completed.
 * Data still verifies through it.
 */
static void test_inflight_tracked(void)
{
    struct vfe_config cfg = { .num_request_queues = 1, .queue_size = 256, .mem_size = 32 << 20,
                              .event_idx = true, .inflight = true };
    struct vfe *fe = pu_connect_cfg(&d, &cfg);
    struct vfe_stats st;
    size_t size = 0;
    const uint8_t *area = vfe_inflight_area(fe, &size);

    g_assert_nonnull(area);
    g_assert_cmpuint(size % 3, ==, 0);           /* control, event, one request queue */
    pu_make_ready(fe, 0);
    struct pu_rw_spec io = { .lun = 0, .queues = 1, .n_io = 64, .io_bytes = 4096, .seed = 21 };
    pu_write_read_compare(fe, &io);
    vfe_get_stats(fe, &st);

    const struct vhost_user_inflight_queue *rq = (const void *)(area + 2 * (size / 3));
    g_assert_cmpuint(rq->version, ==, 1);
    g_assert_cmpuint(rq->desc_num, ==, 256);
    g_assert_cmpuint(rq->used_idx, ==, (uint16_t)st.completions);
    for (unsigned i = 0; i < 256; i++) {
        g_assert_cmpuint(rq->desc[i].inflight, ==, 0);
    }
    vfe_close(fe);
    g_assert_true(pu_daemon_alive(&d));
}

static void test_bench_verify(void)
{
    const char *args[] = { "--ios", "4000", "--iodepth", "32", "--queues", "2", "--bs", "4k",
                           NULL };
    char *out = bench_verify(args);
    g_assert_nonnull(strstr(out, "\"packed\":false"));
    g_assert_nonnull(strstr(out, "\"reads\":4000"));
    g_assert_nonnull(strstr(out, "\"writes\":4000"));
    g_free(out);
}

/*
 * --rate paces the bench: 4000 I/Os (2000 written, 2000 read back) at
 * 8000 a second cannot take less than half a second, whatever the speed
 * of the machine, and the data still verifies.
 */
static void test_bench_rate(void)
{
    const char *args[] = { "--ios", "2000", "--iodepth", "16", "--rate", "8000", NULL };
    char *out = bench_verify(args);
    const char *secs = strstr(out, "\"seconds\":");

    g_assert_nonnull(strstr(out, "\"rate\":8000"));
    g_assert_nonnull(strstr(out, "\"reads\":2000"));
    g_assert_nonnull(secs);
    g_assert_cmpfloat(g_ascii_strtod(secs + strlen("\"seconds\":"), NULL), >=, 0.49);
    g_free(out);
}

/*
 * Packed, on rings of 16 with 5 requests in flight: 3 descriptors a
 * request, so chains run across the ring's end, for 8000 requests (750
 * laps of each of two rings); then with indirect descriptors and without
 * EVENT_IDX, polling.
 */
static void test_packed_bench_verify(void)
{
    const char *laps[] = { "--packed", "--ios", "4000", "--iodepth", "5", "--queue-size", "16",
                           "--queues", "2", "--bs", "4k", NULL };
    const char *other[] = { "--packed", "--ios", "4000", "--iodepth", "16", "--queue-size", "16",
                            "--indirect", "--no-event-idx", "--poll", "--bs", "8k", NULL };
    for (const char *const *args = laps; args; args = args == laps ? other : NULL) {
        char *out = bench_verify(args);
        g_assert_nonnull(strstr(out, "\"packed\":true"));
        g_assert_nonnull(strstr(out, "\"reads\":4000"));
        g_assert_nonnull(strstr(out, "\"writes\":4000"));
        g_free(out);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    signal(SIGPIPE, SIG_IGN);
    g_test_add_func("/target/unit-attention-first", test_unit_attention_first);
    g_test_add_func("/target/unit-attention-per-front-end", test_unit_attention_per_front_end);
    g_test_add_func("/target/truncated-guest-memory-drops-only-that-front-end",
                    test_truncated_guest_memory_drops_only_that_front_end);
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
    g_test_add_func("/target/bench-rate", test_bench_rate);
    g_test_add_func("/target/inflight/tracked", test_inflight_tracked);
    g_test_add_func("/target/packed/write-read-ram-2-queues", test_packed_write_read_ram);
    g_test_add_func("/target/packed/write-read-file-no-event-idx", test_packed_write_read_file);
    g_test_add_func("/target/packed/stop-start", test_packed_stop_start);
    g_test_add_func("/target/packed/indirect-add-mem-reg", test_packed_indirect_add_mem_reg);
    g_test_add_func("/target/packed/ring-full", test_packed_ring_full);
    g_test_add_func("/target/packed/bench-verify", test_packed_bench_verify);
    daemon_start();
    int ret = g_test_run();
    g_assert_true(pu_daemon_alive(&d));
    int status = pu_daemon_stop(&d, false);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        g_printerr("vhost-scsi-target exited with status 0x%x after SIGTERM\n", status);
        ret = ret ? ret : 1;
    }
    pu_daemon_cleanup(&d);
    return ret;
}
