/*
 * End-to-end tests of RBD LUNs against a real Ceph cluster: the throwaway
 * single-host cluster of tests/ceph/ceph-cluster.sh (its ceph.conf in
 * CEPH_CONF, its directory in CEPH_CLUSTER_DIR, set by rbd-test.sh), an
 * image per test made with the rbd CLI, and vhost-scsi-target serving it
 * to the front-end library, which drives it as a guest would.  The tests
 * check that the LUN reports the image's identity (serial from the pool
 * and image ids, the object size as optimal transfer granularity) and
 * capacity, that data written through the daemon is in the image (read
 * back with `rbd export`) and passes vhost-scsi-bench --verify, that FLUSH
 * and FUA writes succeed, that a snapshot LUN refuses writes with DATA
 * PROTECT and keeps its contents while the image changes, that a second
 * writer of an exclusively locked image is refused with a clear message,
 * that `rbd resize` elsewhere reaches the initiator as a capacity change,
 * and that an OSD killed and restarted in the middle of writes loses no
 * acknowledged write, with the daemon alive throughout.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <glib.h>
#include <json-glib/json-glib.h>
#include <linux/virtio_scsi.h>

#include "proto-util.h"

#define IMAGE_MB 64
#define SENSE_DATA_PROTECT 0x7
#define SENSE_UNIT_ATTENTION 0x6

static struct {
    const char *conf;         /* the cluster's ceph.conf */
    const char *cluster_dir;
    const char *cluster_sh;
    char *work;               /* our scratch directory */
} g;

/* ---- the cluster's command-line tools ---------------------------------- */

static void child_setup(gpointer unused)
{
    /* an aborted test must not leave a child behind */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
}

/* Runs argv (NULL-terminated) to completion, bounded; its stdout in *out if out. */
static int run_argv(const char *const *argv, char **out)
{
    g_autoptr(GPtrArray) a = g_ptr_array_new();
    g_autofree char *err = NULL;
    GError *e = NULL;
    int status = -1;

    g_ptr_array_add(a, "timeout");
    g_ptr_array_add(a, "60");
    for (unsigned i = 0; argv[i]; i++) {
        g_ptr_array_add(a, (char *)argv[i]);
    }
    g_ptr_array_add(a, NULL);
    g_assert_true(g_spawn_sync(NULL, (char **)a->pdata, NULL, G_SPAWN_SEARCH_PATH, child_setup,
                               NULL, out, &err, &status, &e));
    g_assert_no_error(e);
    if (!g_spawn_check_wait_status(status, NULL)) {
        g_test_message("%s failed: %s", argv[0], err);
    }
    return status;
}

/* rbd -c CONF ARGS..., which must succeed; its stdout (g_free) or NULL. */
static char *rbd(const char *a1, const char *a2, const char *a3, const char *a4,
                 const char *a5)
{
    const char *argv[] = { "rbd", "-c", g.conf, a1, a2, a3, a4, a5, NULL };
    char *out = NULL;

    g_assert_cmpint(run_argv(argv, &out), ==, 0);
    return out;
}

static void image_create(const char *name, unsigned mb)
{
    g_autofree char *size = g_strdup_printf("%uM", mb);
    g_autofree char *img = g_strdup_printf("rbd/%s", name);

    g_free(rbd("create", img, "--size", size, NULL));
}

/* A field of `rbd info --format json`, as text. */
static char *image_info(const char *img, const char *field)
{
    g_autofree char *json = rbd("info", img, "--format", "json", NULL);
    g_autoptr(JsonParser) p = json_parser_new();
    JsonObject *o;
    JsonNode *n;

    g_assert_true(json_parser_load_from_data(p, json, -1, NULL));
    o = json_node_get_object(json_parser_get_root(p));
    n = json_object_get_member(o, field);
    g_assert_nonnull(n);
    if (json_node_get_value_type(n) == G_TYPE_STRING) {
        return g_strdup(json_node_get_string(n));
    }
    return g_strdup_printf("%" G_GINT64_FORMAT, json_node_get_int(n));
}

/* The id of pool rbd. */
static char *pool_id(void)
{
    const char *argv[] = { "ceph", "-c", g.conf, "osd", "pool", "ls", "detail", "--format",
                           "json", NULL };
    g_autofree char *json = NULL;
    g_autoptr(JsonParser) p = json_parser_new();
    JsonArray *a;

    g_assert_cmpint(run_argv(argv, &json), ==, 0);
    g_assert_true(json_parser_load_from_data(p, json, -1, NULL));
    a = json_node_get_array(json_parser_get_root(p));
    return g_strdup_printf("%" G_GINT64_FORMAT,
                           json_object_get_int_member(json_array_get_object_element(a, 0),
                                                      "pool_id"));
}

/* The image's bytes [offset, offset + len), through `rbd export`. */
static uint8_t *image_read(const char *img, uint64_t offset, size_t len)
{
    g_autofree char *file = g_build_filename(g.work, "export.img", NULL);
    uint8_t *buf = g_malloc(len);
    int fd;

    unlink(file);
    g_free(rbd("export", img, file, "--no-progress", NULL));
    fd = open(file, O_RDONLY | O_CLOEXEC);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(pread(fd, buf, len, (off_t)offset), ==, (ssize_t)len);
    close(fd);
    unlink(file);
    return buf;
}

/* ---- the daemon -------------------------------------------------------- */

static char *spec_of(const char *img_spec, const char *extra)
{
    return g_strdup_printf("0=rbd:%s,conf=%s%s", img_spec, g.conf, extra ? extra : "");
}

/* Starts a daemon serving rbd:IMG_SPEC as LUN 0; false if it refused (status in *status). */
static bool serve(struct pu_daemon *d, const char *img_spec, const char *extra, int *status)
{
    g_autofree char *lun = spec_of(img_spec, extra);
    const char *args[] = { "--lun", lun, "--queues", "2", "--threads", "2", NULL };
    int st;

    pu_daemon_init(d);
    d->capture_log = true;
    return pu_daemon_try_start(d, args, status ? status : &st);
}

static struct vfe *connect_fe(const struct pu_daemon *d)
{
    struct vfe_config cfg = { .num_request_queues = 2, .queue_size = 256,
                              .mem_size = 32 << 20, .event_idx = true };
    struct vfe *fe = pu_connect_cfg(d, &cfg);

    pu_make_ready(fe, 0);
    /* librbd's threads run under the daemon's seccomp filter, with the rbd set. */
    g_assert_cmpuint(pu_daemon_log_count(d, 0, "sandbox: seccomp filter on every thread "
                                         "\\(base, files, uring, vhost-user, rbd\\)$"), ==, 1);
    return fe;
}

/* One command to LUN 0; a cluster may take longer than a local disk. */
static void cmd(struct vfe *fe, const uint8_t *cdb, unsigned cdb_len, void *buf, uint32_t len,
                bool in, struct vfe_req *out)
{
    pu_req_prep(out, 0, 0, cdb, cdb_len, buf, len, in);
    g_assert_cmpint(vfe_exec(fe, out, 6 * PU_TIMEOUT_MS), ==, 0);
    g_assert_cmpuint(out->resp.response, ==, VIRTIO_SCSI_S_OK);
}

/* READ(16) / WRITE(16) of 4 KiB at lba (FUA if asked); returns the SCSI status. */
static unsigned rw_4k(struct vfe *fe, bool write, bool fua, uint64_t lba, void *buf,
                      struct vfe_req *r)
{
    memset(r, 0, sizeof(*r));
    r->data = buf;
    r->data_len = 4096;
    vfe_lun(r->lun, 0, 0);
    pu_make_rw16(r, write, lba, 8);
    if (fua) {
        r->cdb[1] |= 0x08;
    }
    g_assert_cmpint(vfe_exec(fe, r, 6 * PU_TIMEOUT_MS), ==, 0);
    g_assert_cmpuint(r->resp.response, ==, VIRTIO_SCSI_S_OK);
    return r->resp.status;
}

static void stop(struct pu_daemon *d)
{
    int status = pu_daemon_stop(d, false);

    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    pu_daemon_cleanup(d);
}

/* ---- tests --------------------------------------------------------------- */

/* VPD 0x80 is "POOLID.IMAGEID"; VPD 0xb0's granularity the 4 MiB objects. */
static void test_identity_from_image(void)
{
    struct pu_daemon d = { 0 };
    g_autofree char *id = NULL, *pool = NULL, *want = NULL;
    uint8_t inq80[] = { 0x12, 0x01, 0x80, 0x00, 0xff, 0x00 };
    uint8_t inq0[] = { 0x12, 0x00, 0x00, 0x00, 0x60, 0x00 };
    uint8_t inqb0[] = { 0x12, 0x01, 0xb0, 0x00, 0x40, 0x00 };
    struct vfe_req r;
    struct vfe *fe;
    uint8_t *buf;

    image_create("ident", IMAGE_MB);
    id = image_info("rbd/ident", "id");
    pool = pool_id();
    want = g_strdup_printf("%s.%s", pool, id);
    g_assert_true(serve(&d, "rbd/ident", NULL, NULL));
    fe = connect_fe(&d);
    buf = vfe_alloc(fe, 4096, 4096);

    cmd(fe, inq80, 6, buf, 255, true, &r);
    g_assert_cmpuint(r.resp.status, ==, 0);
    g_assert_cmpuint(buf[3], ==, strlen(want));
    g_assert_cmpmem(buf + 4, buf[3], want, strlen(want));

    cmd(fe, inq0, 6, buf, 0x60, true, &r);
    g_assert_cmpuint(r.resp.status, ==, 0);
    g_assert_cmpmem(buf + 16, 8, "RBD DISK", 8);

    cmd(fe, inqb0, 6, buf, 0x40, true, &r);
    g_assert_cmpuint(r.resp.status, ==, 0);
    g_assert_cmpuint(pu_get_be(buf + 6, 2), ==, (4u << 20) / 512);
    vfe_close(fe);
    stop(&d);
}

static void test_capacity_is_image_size(void)
{
    struct pu_daemon d = { 0 };
    struct vfe *fe;
    uint64_t blocks;
    uint32_t bs;

    image_create("capacity", 48);
    g_assert_true(serve(&d, "rbd/capacity", NULL, NULL));
    fe = connect_fe(&d);
    pu_read_capacity16(fe, 0, &blocks, &bs);
    g_assert_cmpuint(bs, ==, 512);
    g_assert_cmpuint(blocks * bs, ==, 48ull << 20);
    vfe_close(fe);
    stop(&d);
}

/* Writes with many in flight read back, and are in the image once the daemon is gone. */
static void test_writes_reach_the_image(void)
{
    struct pu_daemon d = { 0 };
    struct pu_rw_spec s = { .queues = 2, .n_io = 64, .io_bytes = 16384, .seed = 0x4bd1,
                            .timeout_ms = 6 * PU_TIMEOUT_MS };
    struct vfe *fe;
    uint64_t dist;

    image_create("data", IMAGE_MB);
    g_assert_true(serve(&d, "rbd/data", NULL, NULL));
    fe = connect_fe(&d);
    dist = pu_write_read_compare(fe, &s);
    vfe_close(fe);
    stop(&d);
    for (unsigned i = 0; i < s.n_io; i += 9) {
        uint64_t off = i * dist * 512;
        g_autofree uint8_t *b = image_read("rbd/data", off, s.io_bytes);

        g_assert_cmpuint(pu_pattern_mismatch(b, s.io_bytes, s.seed, off), ==, s.io_bytes);
    }
}

/* vhost-scsi-bench --verify through the daemon: a pattern over the LUN reads back. */
static void test_bench_verify(void)
{
    struct pu_daemon d = { 0 };
    const char *argv[] = { g_getenv("VHOST_SCSI_BENCH"), "--socket", NULL, "--verify",
                           "--iodepth", "32", "--queues", "2", "--time", "3", "-q", NULL };
    g_autofree char *out = NULL;

    image_create("bench", 32);
    g_assert_true(serve(&d, "rbd/bench", NULL, NULL));
    argv[2] = d.sock;
    g_assert_cmpint(run_argv(argv, &out), ==, 0);
    g_assert_nonnull(strstr(out, " 0 mismatches"));
    stop(&d);
}

/* SYNCHRONIZE CACHE(16) and a FUA write answer GOOD; the FUA data reads back. */
static void test_flush_and_fua(void)
{
    struct pu_daemon d = { 0 };
    uint8_t sync16[16] = { 0x91 };
    struct vfe_req r;
    struct vfe *fe;
    uint8_t *buf;

    image_create("flush", 16);
    g_assert_true(serve(&d, "rbd/flush", NULL, NULL));
    fe = connect_fe(&d);
    buf = vfe_alloc(fe, 4096, 4096);
    pu_pattern_fill(buf, 4096, 0xf0a, 8 * 512);
    g_assert_cmpuint(rw_4k(fe, true, true, 8, buf, &r), ==, 0);
    cmd(fe, sync16, 16, NULL, 0, false, &r);
    g_assert_cmpuint(r.resp.status, ==, 0);
    memset(buf, 0, 4096);
    g_assert_cmpuint(rw_4k(fe, false, false, 8, buf, &r), ==, 0);
    g_assert_cmpuint(pu_pattern_mismatch(buf, 4096, 0xf0a, 8 * 512), ==, 4096);
    vfe_close(fe);
    stop(&d);
}

/*
 * A LUN on a snapshot: writes get DATA PROTECT, and what it reads is the
 * snapshot's even after the image itself is overwritten.
 */
static void test_snapshot_read_only_and_stable(void)
{
    struct pu_daemon d = { 0 };
    struct pu_rw_spec s = { .queues = 1, .n_io = 16, .io_bytes = 4096, .seed = 0x5a9,
                            .timeout_ms = 6 * PU_TIMEOUT_MS };
    struct vfe_req r;
    struct vfe *fe;
    uint8_t *buf;
    struct pu_sense sense;

    image_create("snap", 16);
    g_assert_true(serve(&d, "rbd/snap", NULL, NULL));
    fe = connect_fe(&d);
    pu_write_read_compare(fe, &s);
    vfe_close(fe);
    stop(&d);
    g_free(rbd("snap", "create", "rbd/snap@s1", NULL, NULL));

    g_assert_true(serve(&d, "rbd/snap@s1", NULL, NULL));
    fe = connect_fe(&d);
    buf = vfe_alloc(fe, 4096, 4096);
    g_assert_cmpuint(rw_4k(fe, true, false, 0, buf, &r), ==, 2);
    sense = pu_sense_of(&r.resp);
    g_assert_cmpuint(sense.key, ==, SENSE_DATA_PROTECT);
    g_assert_cmpuint(sense.asc, ==, 0x27);

    /* Overwrite the whole image elsewhere while the snapshot LUN is served. */
    g_free(rbd("bench", "rbd/snap", "--io-type", "write", "--io-total=16M"));
    s.verify_only = true;
    pu_write_read_compare(fe, &s);
    vfe_close(fe);
    stop(&d);
}

/* A second daemon writing an image whose exclusive lock the first holds is refused. */
static void test_second_writer_refused(void)
{
    struct pu_daemon a = { 0 }, b = { 0 };
    g_autofree char *log = NULL;
    int status;

    image_create("locked", 16);
    g_assert_true(serve(&a, "rbd/locked", NULL, NULL));
    g_assert_false(serve(&b, "rbd/locked", NULL, &status));
    g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    log = pu_daemon_log_read(&b, 0, 1 << 16);
    g_assert_nonnull(strstr(log, "exclusive lock is held by another client"));
    pu_daemon_cleanup(&b);

    /* Read-only beside the writer is fine. */
    g_assert_true(serve(&b, "rbd/locked", ",ro", NULL));
    stop(&b);
    stop(&a);
}

/* An image that does not exist: the daemon says so and exits. */
static void test_missing_image_refused(void)
{
    struct pu_daemon d = { 0 };
    g_autofree char *log = NULL;
    int status;

    g_assert_false(serve(&d, "rbd/no-such-image", NULL, &status));
    log = pu_daemon_log_read(&d, 0, 1 << 16);
    g_assert_nonnull(strstr(log, "cannot open the image"));
    pu_daemon_cleanup(&d);
}

/* `rbd resize` elsewhere: CAPACITY DATA HAS CHANGED, then the new size. */
static void test_resize_noticed(void)
{
    struct pu_daemon d = { 0 };
    struct vfe_req r;
    struct pu_sense sense;
    struct vfe *fe;
    uint64_t blocks;
    uint32_t bs;

    image_create("grow", 16);
    g_assert_true(serve(&d, "rbd/grow", NULL, NULL));
    fe = connect_fe(&d);
    g_free(rbd("resize", "rbd/grow", "--size", "40M", NULL));
    g_assert_cmpint(pu_daemon_log_wait(&d, 0, "resized from 16777216 to 41943040",
                                       6 * PU_TIMEOUT_MS), ==, 0);
    r = pu_tur(fe, 0, 0);
    g_assert_cmpuint(r.resp.status, ==, 2);
    sense = pu_sense_of(&r.resp);
    g_assert_cmpuint(sense.key, ==, SENSE_UNIT_ATTENTION);
    g_assert_cmphex(sense.code, ==, 0x2a09);
    pu_make_ready(fe, 0);
    pu_read_capacity16(fe, 0, &blocks, &bs);
    g_assert_cmpuint(blocks * bs, ==, 40ull << 20);
    vfe_close(fe);
    stop(&d);
}

/*
 * The cluster's only OSD is SIGKILLed with writes in flight and restarted:
 * the writes wait (or come back BUSY and are sent again, as an initiator
 * does), every one completes GOOD in the end, the daemon lives, and every
 * acknowledged write is in the image.
 */
struct osd_run {
    struct vfe *fe;
    struct vfe_req *r;
    unsigned n, acked, busy, inflight;
};

static void osd_submit(struct osd_run *o, unsigned i)
{
    memset(&o->r[i].resp, 0, sizeof(o->r[i].resp));
    pu_make_rw16(&o->r[i], true, i * 8ull, 8);
    g_assert_cmpint(vfe_submit(o->fe, &o->r[i]), ==, 0);
    o->inflight++;
}

static void osd_done(struct vfe_req *r)
{
    struct osd_run *o = r->opaque;

    o->inflight--;
    g_assert_cmpuint(r->resp.response, ==, VIRTIO_SCSI_S_OK);
    if (r->resp.status == 0x08) {
        o->busy++;
        osd_submit(o, (unsigned)(r - o->r));
        return;
    }
    g_assert_cmpuint(r->resp.status, ==, 0);
    o->acked++;
}

static void osd_cluster(const char *what)
{
    const char *argv[] = { g.cluster_sh, what, g.cluster_dir, "0", NULL };

    g_assert_cmpint(run_argv(argv, NULL), ==, 0);
}

static void test_osd_restart_during_writes(void)
{
    enum { N = 160, FIRST = 64 };    /* the second batch fits the rings at once */
    const uint64_t seed = 0x05d;
    struct pu_daemon d = { 0 };
    struct osd_run o = { .n = N };
    g_autofree uint8_t *img = NULL;

    image_create("osd", 16);
    g_assert_true(serve(&d, "rbd/osd", NULL, NULL));
    o.fe = connect_fe(&d);
    o.r = g_new0(struct vfe_req, N);
    for (unsigned i = 0; i < N; i++) {
        o.r[i].data = vfe_alloc(o.fe, 4096, 4096);
        o.r[i].data_len = 4096;
        o.r[i].queue = i % 2;
        o.r[i].opaque = &o;
        o.r[i].complete = osd_done;
        vfe_lun(o.r[i].lun, 0, 0);
        pu_pattern_fill(o.r[i].data, 4096, seed, i * 4096ull);
    }
    for (unsigned i = 0; i < FIRST; i++) {
        osd_submit(&o, i);
    }
    while (o.acked < FIRST) {
        g_assert_cmpint(vfe_poll(o.fe, 6 * PU_TIMEOUT_MS), >, 0);
    }
    osd_cluster("osd-stop");
    for (unsigned i = FIRST; i < N; i++) {
        osd_submit(&o, i);          /* in flight with the OSD gone */
    }
    g_assert_cmpuint(o.inflight, >, 0);
    osd_cluster("osd-start");
    while (o.acked < N) {
        /* Bounded: the OSD's boot, peering and the client's resend, or a BUSY round. */
        g_assert_cmpint(vfe_poll(o.fe, 12 * PU_TIMEOUT_MS), >, 0);
    }
    g_assert_true(pu_daemon_alive(&d));
    vfe_close(o.fe);
    stop(&d);
    img = image_read("rbd/osd", 0, N * 4096);
    for (unsigned i = 0; i < N; i++) {
        if (pu_pattern_mismatch(img + i * 4096ull, 4096, seed, i * 4096ull) != 4096) {
            g_error("write %u was acknowledged but is not in the image", i);
        }
    }
    g_test_message("%u writes acknowledged, %u BUSY retries across the OSD restart", o.acked,
                   o.busy);
    g_free(o.r);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g.conf = g_getenv("CEPH_CONF");
    g.cluster_dir = g_getenv("CEPH_CLUSTER_DIR");
    g.cluster_sh = g_getenv("CEPH_CLUSTER_SH");
    if (!g.conf || !g.cluster_dir || !g.cluster_sh) {
        g_print("1..0 # SKIP run through tests/ceph/rbd-test.sh (it starts the cluster)\n");
        return 0;
    }
    g_assert_nonnull(g_getenv("VHOST_SCSI_TARGET"));
    g_assert_nonnull(g_getenv("VHOST_SCSI_BENCH"));
    signal(SIGPIPE, SIG_IGN);
    g.work = g_dir_make_tmp("vhost-scsi-rbd-XXXXXX", NULL);
    g_assert_nonnull(g.work);

    g_test_add_func("/rbd/identity-from-image", test_identity_from_image);
    g_test_add_func("/rbd/capacity-is-image-size", test_capacity_is_image_size);
    g_test_add_func("/rbd/writes-reach-the-image", test_writes_reach_the_image);
    g_test_add_func("/rbd/bench-verify", test_bench_verify);
    g_test_add_func("/rbd/flush-and-fua", test_flush_and_fua);
    g_test_add_func("/rbd/snapshot-read-only-and-stable", test_snapshot_read_only_and_stable);
    g_test_add_func("/rbd/second-writer-refused", test_second_writer_refused);
    g_test_add_func("/rbd/missing-image-refused", test_missing_image_refused);
    g_test_add_func("/rbd/resize-noticed", test_resize_noticed);
    g_test_add_func("/rbd/fault/osd-restart-during-writes", test_osd_restart_during_writes);
    return g_test_run();
}
