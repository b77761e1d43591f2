/*
 * Protocol tests of task management isolation in the real daemon: one
 * front-end's TMF that waits for I/O never holds up the daemon's main
 * thread, so other front-ends connect, negotiate, do I/O and task
 * management of their own meanwhile.  LUN 0 is the "hold" test backend
 * (VHOST_SCSI_TEST_BACKENDS=1): every request to it waits while a file in
 * the daemon's directory exists, standing in for an iSCSI remote that
 * stopped answering, and removing the file releases them all.  LUN 1 is
 * RAM.  The assertions are orderings: B's whole session (negotiation
 * included) completes while A's TMF is still unanswered, and A's TMF is
 * answered FUNCTION COMPLETE only after its I/O was released, with that
 * I/O's completion published first.  Stopping a queue with I/O held
 * (GET_VRING_BASE, a disconnect) is held up the same way and holds up
 * nobody else.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <linux/virtio_scsi.h>

#include "lun-spec.h"
#include "proto-util.h"
#include "test-hooks.h"

#define HOLD_LUN 0
#define RAM_LUN 1
#define FUNCTION_COMPLETE VIRTIO_SCSI_S_OK

static struct pu_daemon d;
static char *gate;        /* while it exists, LUN 0 holds every request */

static void gate_close(void)
{
    int fd = open(gate, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);

    g_assert_cmpint(fd, >=, 0);
    close(fd);
}

static void gate_open(void)
{
    g_assert_cmpint(g_unlink(gate), ==, 0);
}

static void daemon_start(void)
{
    g_autofree char *hold = NULL;

    pu_daemon_init(&d);
    d.capture_log = true;   /* the orderings below are read from it */
    gate = g_build_filename(d.dir, "hold", NULL);
    hold = g_strdup_printf("%u=hold:16M,while=%s", HOLD_LUN, gate);
    g_autofree char *ram = g_strdup_printf("%u=ram:16M", RAM_LUN);
    const char *args[] = { "--lun", hold, "--lun", ram, "--queues", "2", "--threads", "2",
                           NULL };

    /* The daemon inherits it: without it, hold: is refused. */
    g_setenv(LUN_SPEC_TEST_BACKENDS_ENV, "1", TRUE);
    pu_daemon_start(&d, args);
}

/* A READ(16) of 8 blocks at lba of LUN 0, submitted, not waited for. */
static void submit_held_read(struct vfe *fe, struct vfe_req *r, struct pu_batch *b,
                             uint64_t lba, uint64_t tag)
{
    memset(r, 0, sizeof(*r));
    vfe_lun(r->lun, 0, HOLD_LUN);
    r->tag = tag;
    r->data = vfe_alloc(fe, 4096, 4096);
    g_assert_nonnull(r->data);
    r->data_len = 4096;
    r->opaque = b;
    r->complete = pu_batch_done;
    pu_make_rw16(r, false, lba, 8);
    g_assert_cmpint(vfe_submit(fe, r), ==, 0);
}

/* Nothing of fe's has been answered since: reaps without waiting. */
static void assert_still_pending(struct vfe *fe, const struct vfe_tmf *t, const struct pu_batch *b)
{
    g_assert_cmpint(vfe_poll(fe, 0), >=, 0);
    g_assert_false(t->done);
    g_assert_cmpuint(b->done, ==, 0);
}

/*
 * Front-end A's LOGICAL UNIT RESET waits for A's held read; meanwhile B
 * connects, negotiates, runs verified I/O and a TMF of its own on the RAM
 * LUN and disconnects.  Then the read is released and A's reset answers.
 */
static void test_pending_lun_reset_does_not_stall_other_front_ends(void)
{
    struct vfe *a = pu_connect(&d, 1), *b;
    struct pu_rw_spec io = { .lun = RAM_LUN, .queues = 1, .n_io = 32, .io_bytes = 4096,
                             .seed = 12 };
    struct pu_batch held = { 0 };
    struct vfe_req read, tur;
    struct vfe_tmf reset;
    uint8_t lun[8], resp = 0xee;

    pu_make_ready(a, HOLD_LUN);          /* TEST UNIT READY never reaches the backend */
    gate_close();
    submit_held_read(a, &read, &held, 0, 0xa1);
    pu_wait_task_running(a, HOLD_LUN, 0xa1);
    vfe_lun(lun, 0, HOLD_LUN);
    g_assert_cmpint(vfe_tmf_submit(a, lun, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0, &reset),
                    ==, 0);
    /* Answered after the reset was looked at: the reset is waiting. */
    pu_wait_task_running(a, HOLD_LUN, 0xa1);
    assert_still_pending(a, &reset, &held);

    /* B's whole session, negotiation included, while A's reset waits. */
    b = pu_connect(&d, 1);
    assert_still_pending(a, &reset, &held);
    pu_make_ready(b, RAM_LUN);
    pu_write_read_compare(b, &io);
    vfe_lun(lun, 0, RAM_LUN);
    g_assert_cmpint(vfe_tmf(b, lun, VIRTIO_SCSI_T_TMF_ABORT_TASK_SET, 0, &resp, PU_TIMEOUT_MS),
                    ==, 0);
    g_assert_cmpuint(resp, ==, FUNCTION_COMPLETE);
    vfe_close(b);
    assert_still_pending(a, &reset, &held);

    gate_open();
    while (!reset.done) {
        g_assert_cmpint(vfe_poll(a, PU_TIMEOUT_MS), >, 0);
        /* The read the reset waited for is on the used ring before the answer. */
        g_assert_true(!reset.done || held.done == 1);
    }
    g_assert_cmpuint(reset.response, ==, FUNCTION_COMPLETE);
    g_assert_cmpuint(read.resp.response, ==, VIRTIO_SCSI_S_OK);
    g_assert_cmpuint(read.resp.status, ==, 0);
    vfe_free(a, read.data);
    /* The reset happened: A is told once. */
    tur = pu_tur(a, 0, HOLD_LUN);
    g_assert_cmpuint(tur.resp.status, ==, 2);
    g_assert_cmphex(pu_sense_of(&tur.resp).asc, ==, 0x29);
    g_assert_cmphex(pu_sense_of(&tur.resp).ascq, ==, 0x03);
    g_assert_cmpuint(pu_tur(a, 0, HOLD_LUN).resp.status, ==, 0);
    vfe_close(a);
    g_assert_true(pu_daemon_alive(&d));
}

/*
 * A front-end leaves while its LOGICAL UNIT RESET waits for another
 * front-end's held I/O: its reset is answered (FAILURE) as its queues
 * stop, the disconnect does not wait for the I/O, and the I/O completing
 * later finds nothing of the departed front-end to touch (the daemon runs
 * under the same sanitizers as the tests).
 */
static void test_front_end_leaves_with_its_reset_pending(void)
{
    struct vfe *a = pu_connect(&d, 1), *b = pu_connect(&d, 1), *c;
    struct pu_batch held = { 0 };
    struct vfe_req read;
    struct vfe_tmf reset;
    uint8_t lun[8];

    pu_make_ready(a, HOLD_LUN);
    pu_make_ready(b, HOLD_LUN);
    gate_close();
    submit_held_read(b, &read, &held, 64, 0xb1);
    pu_wait_task_running(b, HOLD_LUN, 0xb1);
    vfe_lun(lun, 0, HOLD_LUN);
    g_assert_cmpint(vfe_tmf_submit(a, lun, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0, &reset),
                    ==, 0);
    pu_wait_task_running(b, HOLD_LUN, 0xb1);
    g_assert_cmpint(vfe_poll(a, 0), >=, 0);
    g_assert_false(reset.done);
    vfe_close(a);                        /* returns with b's read still held */
    g_assert_cmpuint(held.done, ==, 0);

    gate_open();
    pu_batch_wait(b, &held, 1, PU_TIMEOUT_MS);
    g_assert_cmpuint(read.resp.status, ==, 0);
    vfe_free(b, read.data);
    /* The reset was not carried out: b sees no unit attention for it. */
    g_assert_cmpuint(pu_tur(b, 0, HOLD_LUN).resp.status, ==, 0);
    vfe_close(b);
    g_assert_true(pu_daemon_alive(&d));
    c = pu_connect(&d, 1);
    pu_make_ready(c, HOLD_LUN);
    vfe_close(c);
}

/* B's whole session on the RAM LUN: connect, negotiate, verified I/O, leave. */
static void other_front_end_session(unsigned seed)
{
    struct vfe *b = pu_connect(&d, 1);
    struct pu_rw_spec io = { .lun = RAM_LUN, .queues = 1, .n_io = 32, .io_bytes = 4096,
                             .seed = seed };

    pu_make_ready(b, RAM_LUN);
    pu_write_read_compare(b, &io);
    vfe_close(b);
}

struct stopper {
    struct vfe *fe;
    int ret;
    gint done;
};

static gpointer stopper_run(gpointer opaque)
{
    struct stopper *s = opaque;

    s->ret = vfe_stop(s->fe);
    g_atomic_int_set(&s->done, 1);
    return NULL;
}

/*
 * A's GET_VRING_BASE for a queue whose read is held is answered only once
 * the read has completed, with the read on the used ring first; B's
 * session, negotiation included, runs meanwhile.  Then A starts again from
 * the base it was given and its I/O works.
 */
static void test_get_vring_base_waits_for_held_io_alone(void)
{
    struct vfe *a = pu_connect(&d, 1);
    struct pu_rw_spec io = { .lun = RAM_LUN, .queues = 1, .n_io = 8, .io_bytes = 4096,
                             .seed = 31 };
    struct stopper st = { .fe = a };
    struct pu_batch held = { 0 };
    struct vfe_req read;
    size_t log_at;
    GThread *t;

    pu_make_ready(a, HOLD_LUN);
    gate_close();
    submit_held_read(a, &read, &held, 128, 0xc1);
    pu_wait_task_running(a, HOLD_LUN, 0xc1);
    log_at = pu_daemon_log_size(&d);
    t = g_thread_new("stopper", stopper_run, &st);
    g_assert_cmpint(pu_daemon_log_wait(&d, log_at, "GET_VRING_BASE waits for the requests in "
                                       "flight on 1 queue", PU_TIMEOUT_MS), ==, 0);

    other_front_end_session(32);
    g_assert_cmpint(g_atomic_int_get(&st.done), ==, 0);
    g_assert_cmpuint(held.done, ==, 0);

    gate_open();
    g_thread_join(t);
    g_assert_cmpint(st.ret, ==, 0);
    g_assert_cmpuint(held.done, ==, 1);     /* reaped by vfe_stop: it was published first */
    g_assert_cmpuint(read.resp.response, ==, VIRTIO_SCSI_S_OK);
    g_assert_cmpuint(read.resp.status, ==, 0);
    vfe_free(a, read.data);

    g_assert_cmpint(vfe_start(a), ==, 0);
    pu_make_ready(a, RAM_LUN);
    pu_write_read_compare(a, &io);
    vfe_close(a);
    g_assert_true(pu_daemon_alive(&d));
}

/*
 * A front-end that hangs up with a read held: the daemon lets go of its
 * connection (and the guest memory the read points into) only when the
 * read has completed, and serves B meanwhile; the late completion touches
 * nothing freed (the daemon runs under the tests' sanitizers).
 */
static void test_disconnect_with_held_io_frees_later(void)
{
    struct vfe *a = pu_connect(&d, 1);
    struct pu_batch held = { 0 };
    struct vfe_req read;
    size_t log_at;
    g_autofree char *conn = NULL;
    g_autofree char *pattern = NULL;

    pu_make_ready(a, HOLD_LUN);
    gate_close();
    submit_held_read(a, &read, &held, 256, 0xd1);
    pu_wait_task_running(a, HOLD_LUN, 0xd1);
    log_at = pu_daemon_log_size(&d);
    g_assert_cmpint(shutdown(vfe_conn_fd(a), SHUT_RDWR), ==, 0);
    g_assert_cmpint(pu_daemon_log_wait(&d, log_at, "waiting for its requests in flight "
                                       "before letting go", PU_TIMEOUT_MS), ==, 0);
    conn = pu_daemon_log_find(&d, log_at, "(conn[0-9]+): waiting for its requests in flight");
    g_assert_nonnull(conn);
    pattern = g_strdup_printf("%s: disconnected", conn);

    other_front_end_session(41);
    g_assert_cmpuint(pu_daemon_log_count(&d, log_at, pattern), ==, 0);

    gate_open();
    g_assert_cmpint(pu_daemon_log_wait(&d, log_at, pattern, PU_TIMEOUT_MS), ==, 0);
    /* Our side still thinks it runs: its GET_VRING_BASEs meet the hang-up and warn. */
    GLogLevelFlags fatal = g_log_set_always_fatal(G_LOG_FATAL_MASK);
    vfe_close(a);
    g_log_set_always_fatal(fatal);
    g_assert_true(pu_daemon_alive(&d));
    other_front_end_session(42);
}

/*
 * A hangs up while its GET_VRING_BASE is held for a read: the daemon
 * takes the hang-up at once (it says it waits for the read before letting
 * go, rather than spinning on the hung-up socket until the read ends),
 * serves B, and frees A once the read is released.
 */
static void test_hang_up_while_get_vring_base_is_held(void)
{
    struct vfe *a = pu_connect(&d, 1);
    struct stopper st = { .fe = a };
    struct pu_batch held = { 0 };
    struct vfe_req read;
    size_t log_at;
    GThread *t;
    g_autofree char *conn = NULL;
    g_autofree char *gone = NULL;
    GLogLevelFlags fatal;

    pu_make_ready(a, HOLD_LUN);
    gate_close();
    submit_held_read(a, &read, &held, 384, 0xe1);
    pu_wait_task_running(a, HOLD_LUN, 0xe1);
    log_at = pu_daemon_log_size(&d);
    /* Our stop meets the hang-up below and warns: not a failure here. */
    fatal = g_log_set_always_fatal(G_LOG_FATAL_MASK);
    t = g_thread_new("stopper", stopper_run, &st);
    g_assert_cmpint(pu_daemon_log_wait(&d, log_at, "GET_VRING_BASE waits for the requests in "
                                       "flight on 1 queue", PU_TIMEOUT_MS), ==, 0);
    conn = pu_daemon_log_find(&d, log_at, "(conn[0-9]+): GET_VRING_BASE waits");
    g_assert_nonnull(conn);
    g_assert_cmpint(shutdown(vfe_conn_fd(a), SHUT_RDWR), ==, 0);
    g_thread_join(t);
    g_assert_cmpint(st.ret, <, 0);
    g_assert_cmpint(pu_daemon_log_wait(&d, log_at, "waiting for its requests in flight "
                                       "before letting go", PU_TIMEOUT_MS), ==, 0);
    gone = g_strdup_printf("%s: disconnected", conn);
    other_front_end_session(51);
    g_assert_cmpuint(pu_daemon_log_count(&d, log_at, gone), ==, 0);

    gate_open();
    g_assert_cmpint(pu_daemon_log_wait(&d, log_at, gone, PU_TIMEOUT_MS), ==, 0);
    vfe_close(a);
    g_log_set_always_fatal(fatal);
    g_assert_true(pu_daemon_alive(&d));
}

/*
 * vhost-scsi-bench giving up on I/O that does not complete ("no completion
 * for 5 s") stops its queues before it frees its requests: the stop waits
 * for the held I/O, whose completions land in live requests.  It used to
 * free them first, a use-after-free the soak run found (scripts/soak.sh, a
 * hostile bench against a slow iSCSI LUN); the sanitized build catches it
 * here.  The bench fails (status 1), cleanly, once the gate opens.
 */
static void test_bench_gives_up_on_held_io_cleanly(void)
{
    const char *bench = g_getenv("VHOST_SCSI_BENCH");
    g_autofree char *out = g_build_filename(d.dir, "bench.out", NULL);
    g_autofree char *lun = g_strdup_printf("0:%u", HOLD_LUN);
    const char *argv[] = { bench, "--socket", d.sock, "--rw", "randwrite", "--iodepth", "8",
                           "--time", "30", "--lun", lun, "-q", NULL };
    struct pu_spawn_opts o = { 0 };
    g_autofree char *text = NULL;
    struct pu_proc p;
    int status;

    g_assert_nonnull(bench);
    o.out_fd = open(out, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
    g_assert_cmpint(o.out_fd, >, 2);
    gate_close();
    pu_spawn_opts(&p, argv, &o);
    close(o.out_fd);
    /* Bounded: the bench gives up 5 s after its last completion. */
    for (int i = 0; i < 400 && !(text && strstr(text, "no completion")); i++) {
        g_free(text);
        text = NULL;
        g_assert_false(pu_proc_exited(&p, 50));
        g_file_get_contents(out, &text, NULL, NULL);
    }
    g_assert_nonnull(strstr(text, "no completion for 5 s, 8 requests in flight"));
    gate_open();
    g_assert_true(pu_proc_exited(&p, PU_TIMEOUT_MS));
    status = pu_proc_stop(&p, SIGKILL);
    g_free(text);
    text = NULL;
    g_assert_true(g_file_get_contents(out, &text, NULL, NULL));
    g_assert_null(strstr(text, "Sanitizer"));
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 1);
    g_assert_true(pu_daemon_alive(&d));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    signal(SIGPIPE, SIG_IGN);
    g_test_add_func("/tmf-isolation/pending-lun-reset-does-not-stall-other-front-ends",
                    TEST_HOOKED(test_pending_lun_reset_does_not_stall_other_front_ends));
    g_test_add_func("/tmf-isolation/front-end-leaves-with-its-reset-pending",
                    TEST_HOOKED(test_front_end_leaves_with_its_reset_pending));
    g_test_add_func("/tmf-isolation/get-vring-base-waits-for-held-io-alone",
                    TEST_HOOKED(test_get_vring_base_waits_for_held_io_alone));
    g_test_add_func("/tmf-isolation/disconnect-with-held-io-frees-later",
                    TEST_HOOKED(test_disconnect_with_held_io_frees_later));
    g_test_add_func("/tmf-isolation/hang-up-while-get-vring-base-is-held",
                    TEST_HOOKED(test_hang_up_while_get_vring_base_is_held));
    g_test_add_func("/tmf-isolation/bench-gives-up-on-held-io-cleanly",
                    TEST_HOOKED(test_bench_gives_up_on_held_io_cleanly));
    if (!TEST_HOOKS_BUILT) {
        return g_test_run();    /* every case needs the hold: LUN */
    }
    daemon_start();
    int ret = g_test_run();
    g_assert_true(pu_daemon_alive(&d));
    int status = pu_daemon_stop(&d, false);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        g_printerr("vhost-scsi-target exited with status 0x%x after SIGTERM\n", status);
        ret = ret ? ret : 1;
    }
    g_unlink(gate);
    g_free(gate);
    pu_daemon_cleanup(&d);
    return ret;
}
