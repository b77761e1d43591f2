/*
 * Dirty logging against the real daemon, as QEMU drives it while it
 * migrates a VM (docs/migration.md): the front-end hands over a bitmap
 * (SET_LOG_BASE) and turns VHOST_F_LOG_ALL on; then
 *  - every page a verified read wrote into "guest" memory is marked, for
 *    RAM, buffered-file and O_DIRECT-file LUNs (where io_uring, not the
 *    daemon, writes the pages), and the pages writes only read are not;
 *  - with logging turned off again, verified reads and writes set no bit;
 *  - at the hand-over (GET_VRING_BASE) reads still held in a slow backend
 *    are completed, marked and published before the reply, each exactly
 *    once, with the data they read;
 *  - the test hook that leaves data-in buffers unmarked
 *    (VHOST_SCSI_TEST_FAULT=log-skip-data-in) is caught: the check can fail.
 * The first and the third again over packed rings, where the device
 * writes its used descriptors into the descriptor ring and the hand-over's
 * ring base carries its used index.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "lun-spec.h"

#include "proto-util.h"
#include "test-hooks.h"

#define N_IO 48
#define IO_BYTES (64 * 1024)

struct fx {
    struct pu_daemon d;
    struct vfe *fe;
};

static void fx_start(struct fx *x, bool fault, bool packed)
{
    g_autofree char *img = NULL, *direct = NULL, *lun1 = NULL, *lun2 = NULL;
    struct vfe_config cfg = {
        .num_request_queues = 2, .queue_size = 128, .mem_size = 32 << 20,
        .event_idx = true, .dirty_log = true, .packed = packed,
    };

    memset(x, 0, sizeof(*x));
    pu_daemon_init(&x->d);
    img = g_build_filename(x->d.dir, "disk.img", NULL);
    direct = g_build_filename(x->d.dir, "direct.img", NULL);
    for (const char *f = img; f; f = f == img ? direct : NULL) {
        g_assert_true(g_file_set_contents(f, "", 0, NULL));
        g_assert_cmpint(truncate(f, 16 << 20), ==, 0);
    }
    lun1 = g_strdup_printf("1=file:%s", img);
    lun2 = g_strdup_printf("2=file:%s,direct", direct);
    {
        const char *args[] = { "--lun", "0=ram:16M", "--lun", lun1, "--lun", lun2, NULL };

        if (fault) {
            g_setenv("VHOST_SCSI_TEST_FAULT", "log-skip-data-in", TRUE);
        }
        pu_daemon_start(&x->d, args);
        g_unsetenv("VHOST_SCSI_TEST_FAULT");
    }
    x->fe = pu_connect_cfg(&x->d, &cfg);
    for (unsigned lun = 0; lun < 3; lun++) {
        pu_make_ready(x->fe, lun);
    }
}

static void fx_stop(struct fx *x)
{
    vfe_close(x->fe);
    g_assert_cmpint(pu_daemon_stop(&x->d, false), ==, 0);
    pu_daemon_cleanup(&x->d);
}

static struct pu_log_counts rw(struct fx *x, unsigned lun, uint64_t seed)
{
    struct pu_log_counts c = { 0 };
    struct pu_rw_spec s = {
        .lun = lun, .queues = 2, .n_io = N_IO, .io_bytes = IO_BYTES, .seed = seed, .log = &c,
    };

    pu_write_read_compare(x->fe, &s);
    return c;
}

static void run_reads_mark_every_page(bool packed)
{
    struct fx x;

    fx_start(&x, false, packed);
    g_assert_cmpint(vfe_log_start(x.fe), ==, 0);
    for (unsigned lun = 0; lun < 3; lun++) {
        struct pu_log_counts c = rw(&x, lun, 100 + lun);

        g_test_message("LUN %u: %zu read pages, %zu unmarked; %zu written pages marked", lun,
                       c.read_pages, c.read_pages_unmarked, c.write_pages_marked);
        g_assert_cmpuint(c.read_pages, ==, N_IO * IO_BYTES / 4096);
        g_assert_cmpuint(c.read_pages_unmarked, ==, 0);
        g_assert_cmpuint(c.write_pages_marked, ==, 0);
    }
    /* The rings and response headers were written as well. */
    vfe_log_clear(x.fe);
    pu_make_ready(x.fe, 0);
    g_assert_cmpuint(vfe_log_count(x.fe), >, 0);
    fx_stop(&x);
}

static void test_reads_mark_every_page(void)
{
    run_reads_mark_every_page(false);
}

static void test_packed_reads_mark_every_page(void)
{
    run_reads_mark_every_page(true);
}

static void test_logging_off_sets_no_bit(void)
{
    struct fx x;

    fx_start(&x, false, false);
    g_assert_cmpint(vfe_log_start(x.fe), ==, 0);
    g_assert_cmpint(vfe_log_stop(x.fe), ==, 0);
    vfe_log_clear(x.fe);
    for (unsigned lun = 0; lun < 3; lun++) {
        struct pu_rw_spec s = {
            .lun = lun, .queues = 2, .n_io = N_IO, .io_bytes = IO_BYTES, .seed = 7 + lun,
        };

        pu_write_read_compare(x.fe, &s);
    }
    g_assert_cmpuint(vfe_log_count(x.fe), ==, 0);
    fx_stop(&x);
}

static void test_missing_data_in_marks_are_caught(void)
{
    struct fx x;

    fx_start(&x, true, false);
    g_assert_cmpint(vfe_log_start(x.fe), ==, 0);
    for (unsigned lun = 0; lun < 3; lun++) {
        struct pu_log_counts c = rw(&x, lun, 300 + lun);

        /* Every page the reads wrote is missing: this check would fail. */
        g_assert_cmpuint(c.read_pages_unmarked, ==, c.read_pages);
    }
    fx_stop(&x);
}

struct stopper {
    struct vfe *fe;
    int ret;
};

static gpointer stop_thread(gpointer p)
{
    struct stopper *s = p;

    s->ret = vfe_stop(s->fe);
    return NULL;
}

#define HELD 16

static void run_hand_over_completes_held_reads(bool packed)
{
    struct vfe_config cfg = {
        .num_request_queues = 1, .queue_size = 128, .mem_size = 32 << 20,
        .event_idx = true, .dirty_log = true, .packed = packed,
    };
    g_autofree char *gate = NULL, *hold = NULL;
    struct pu_rw_spec w = { .lun = 0, .queues = 1, .n_io = HELD, .io_bytes = 4096, .seed = 9 };
    struct vfe_req reqs[HELD];
    struct pu_batch b = { 0 };
    struct stopper st;
    struct pu_daemon d;
    uint64_t distance;
    GThread *th;
    size_t from;
    int fd;

    pu_daemon_init(&d);
    d.capture_log = true;
    gate = g_build_filename(d.dir, "hold", NULL);
    hold = g_strdup_printf("0=hold:16M,while=%s", gate);
    {
        const char *args[] = { "--lun", hold, "--queues", "1", NULL };

        g_setenv(LUN_SPEC_TEST_BACKENDS_ENV, "1", TRUE);
        pu_daemon_start(&d, args);
        g_unsetenv(LUN_SPEC_TEST_BACKENDS_ENV);
    }
    st.fe = pu_connect_cfg(&d, &cfg);
    pu_make_ready(st.fe, 0);
    distance = pu_write_read_compare(st.fe, &w);
    g_assert_cmpint(vfe_log_start(st.fe), ==, 0);

    /* While the gate file exists, the backend holds every request. */
    fd = open(gate, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    g_assert_cmpint(fd, >=, 0);
    close(fd);
    vfe_log_clear(st.fe);
    for (unsigned i = 0; i < HELD; i++) {
        memset(&reqs[i], 0, sizeof(reqs[i]));
        vfe_lun(reqs[i].lun, 0, 0);
        reqs[i].tag = 0x100 + i;
        reqs[i].data = vfe_alloc(st.fe, 4096, 4096);
        memset(reqs[i].data, 0xa5, 4096);
        reqs[i].data_len = 4096;
        reqs[i].opaque = &b;
        reqs[i].complete = pu_batch_done;
        pu_make_rw16(&reqs[i], false, i * distance, 8);
        g_assert_cmpint(vfe_submit(st.fe, &reqs[i]), ==, 0);
    }
    for (unsigned i = 0; i < HELD; i++) {
        pu_wait_task_running(st.fe, 0, 0x100 + i);
    }
    g_assert_cmpuint(b.done, ==, 0);

    /* QEMU's hand-over: GET_VRING_BASE must wait for them, not drop them. */
    from = pu_daemon_log_size(&d);
    th = g_thread_new("stop", stop_thread, &st);
    g_assert_cmpint(pu_daemon_log_wait(&d, from, "GET_VRING_BASE waits for the requests in "
                                       "flight", PU_TIMEOUT_MS), ==, 0);
    g_assert_cmpint(g_unlink(gate), ==, 0);
    g_thread_join(th);
    g_assert_cmpint(st.ret, ==, 0);

    g_assert_cmpuint(b.done, ==, HELD);
    for (unsigned i = 0; i < HELD; i++) {
        g_assert_cmpuint(reqs[i].resp.response, ==, VIRTIO_SCSI_S_OK);
        g_assert_cmpuint(reqs[i].resp.status, ==, 0);
        g_assert_cmpuint(pu_pattern_mismatch(reqs[i].data, 4096, 9, i * distance * 512), ==,
                         4096);
        g_assert_cmpuint(vfe_log_unmarked(st.fe, reqs[i].data, 4096), ==, 0);
    }
    /* Restarted where it stopped: nothing is completed a second time. */
    g_assert_cmpint(vfe_start(st.fe), ==, 0);
    pu_make_ready(st.fe, 0);
    g_assert_cmpint(vfe_poll(st.fe, 0), ==, 0);
    g_assert_cmpuint(b.done, ==, HELD);
    for (unsigned i = 0; i < HELD; i++) {
        vfe_free(st.fe, reqs[i].data);
    }
    vfe_close(st.fe);
    g_assert_cmpint(pu_daemon_stop(&d, false), ==, 0);
    pu_daemon_cleanup(&d);
}

static void test_hand_over_completes_held_reads(void)
{
    run_hand_over_completes_held_reads(false);
}

static void test_packed_hand_over_completes_held_reads(void)
{
    run_hand_over_completes_held_reads(true);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/dirty-log/reads-mark-every-page", test_reads_mark_every_page);
    g_test_add_func("/dirty-log/logging-off-sets-no-bit", test_logging_off_sets_no_bit);
    g_test_add_func("/dirty-log/hand-over-completes-held-reads",
                    TEST_HOOKED(test_hand_over_completes_held_reads));
    g_test_add_func("/dirty-log/missing-data-in-marks-are-caught",
                    TEST_HOOKED(test_missing_data_in_marks_are_caught));
    g_test_add_func("/dirty-log/packed/reads-mark-every-page",
                    test_packed_reads_mark_every_page);
    g_test_add_func("/dirty-log/packed/hand-over-completes-held-reads",
                    TEST_HOOKED(test_packed_hand_over_completes_held_reads));
    return g_test_run();
}
