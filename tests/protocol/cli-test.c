/*
 * The daemon's command line, as QEMU's vhost-user back-end conventions
 * ask: --print-capabilities, an inherited listening socket (--fd, socket
 * activation), the embedded default (1 GiB RAM LUN on ./vhost-scsi.sock
 * with the QEMU command line printed), and clear errors with a non-zero
 * exit for bad arguments; each of the three programs' --version (in its
 * --help) prints its name and the project's version and exits 0.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "proto-util.h"

static const char *target_bin(void)
{
    const char *bin = g_getenv("VHOST_SCSI_TARGET");

    g_assert_nonnull(bin);
    return bin;
}

/* Runs the target to completion; returns its exit status and its output. */
static int run_sync(const char *const *argv, char **out, char **err)
{
    GError *e = NULL;
    int status = -1;

    g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, out,
                               err, &status, &e));
    g_assert_no_error(e);
    return status;
}

static void test_print_capabilities(void)
{
    const char *argv[] = { target_bin(), "--print-capabilities", NULL };
    char *out, *err;

    g_assert_cmpint(run_sync(argv, &out, &err), ==, 0);
    g_assert_nonnull(strstr(out, "\"type\": \"scsi\""));
    g_free(out);
    g_free(err);
}

/* argv (a program and its arguments): status 0, want on stdout, nothing on stderr. */
static void assert_prints(const char *const *argv, const char *want)
{
    g_autofree char *out = NULL, *err = NULL;

    g_assert_cmpint(run_sync(argv, &out, &err), ==, 0);
    g_assert_cmpstr(out, ==, want);
    g_assert_cmpstr(err, ==, "");
}

static void test_version(void)
{
    const char *version = g_getenv("VHOST_SCSI_VERSION");
    const char *progs[][2] = {
        { "vhost-scsi-target", target_bin() },
        { "vhost-scsi-ctl", g_getenv("VHOST_SCSI_CTL") },
        { "vhost-scsi-bench", g_getenv("VHOST_SCSI_BENCH") },
    };

    g_assert_nonnull(version);
    for (unsigned i = 0; i < G_N_ELEMENTS(progs); i++) {
        g_autofree char *want = g_strdup_printf("%s %s\n", progs[i][0], version);
        g_autofree char *help = NULL;
        const char *help_argv[] = { progs[i][1], "--help", NULL };

        g_assert_nonnull(progs[i][1]);
        assert_prints((const char *const[]){ progs[i][1], "--version", NULL }, want);
        g_assert_cmpint(run_sync(help_argv, &help, NULL), ==, 0);
        if (!strstr(help, "--version")) {
            g_error("%s --help does not name --version", progs[i][0]);
        }
    }
    /* vhost-scsi-ctl's as an option of either mode, too (the daemon's is `target version`). */
    {
        g_autofree char *want = g_strdup_printf("vhost-scsi-ctl %s\n", version);
        const char *ctl = g_getenv("VHOST_SCSI_CTL");

        assert_prints((const char *const[]){ ctl, "lio", "--version", NULL }, want);
        assert_prints((const char *const[]){ ctl, "target", "--version", NULL }, want);
    }
}

static void test_bad_arguments_fail_clearly(void)
{
    static const char *const cases[][3] = {
        { "--lun", "0=bogus:1G", "bogus" },
        { "--lun", "99999=ram:1M", "99999" },
        { "--queues", "0", "--queues" },
        { "--poll", "sometimes", "--poll" },
        { "--fd", "x", "--fd" },
    };

    for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
        const char *argv[] = { target_bin(), cases[i][0], cases[i][1], NULL };
        char *out, *err;
        int status = run_sync(argv, &out, &err);

        g_assert_true(WIFEXITED(status));
        g_assert_cmpint(WEXITSTATUS(status), !=, 0);
        if (!strstr(err, cases[i][2])) {
            g_error("'%s %s': error output does not name '%s': %s", cases[i][0], cases[i][1],
                    cases[i][2], err);
        }
        g_free(out);
        g_free(err);
    }
}

static void test_inherited_listening_socket(void)
{
    struct pu_daemon d;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int lfd;
    pid_t pid;
    struct vfe *fe;

    pu_daemon_init(&d);
    g_strlcpy(sa.sun_path, d.sock, sizeof(sa.sun_path));
    lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    g_assert_cmpint(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
    g_assert_cmpint(listen(lfd, 4), ==, 0);
    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        char fdarg[16];

        dup2(lfd, 3);
        snprintf(fdarg, sizeof(fdarg), "%d", 3);
        dup2(2, 1);
        execl(target_bin(), target_bin(), "--fd", fdarg, "--lun", "0=ram:4M", NULL);
        _exit(127);
    }
    close(lfd);
    /* The socket already listens: connecting works before the daemon even runs. */
    fe = pu_connect(&d, 1);
    pu_make_ready(fe, 0);
    vfe_close(fe);
    kill(pid, SIGTERM);
    int status;
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    pu_daemon_cleanup(&d);
}

static void test_embedded_default(void)
{
    char *dir = g_dir_make_tmp("vhost-scsi-cli-XXXXXX", NULL);
    char *sock = g_build_filename(dir, "vhost-scsi.sock", NULL);
    int pipefd[2];
    pid_t pid;
    char buf[4096];
    size_t got = 0;
    struct pu_daemon d = { .sock = sock };
    struct vfe *fe;
    uint64_t blocks;
    uint32_t bsize;

    g_assert_cmpint(pipe(pipefd), ==, 0);
    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        if (chdir(dir) < 0) {
            _exit(126);
        }
        dup2(pipefd[1], 1);
        execl(target_bin(), target_bin(), NULL);
        _exit(127);
    }
    close(pipefd[1]);
    /* The hint is printed once the socket listens; read until it is complete. */
    while (got < sizeof(buf) - 1 && !strstr(buf, "vhost-user-scsi-pci")) {
        struct pollfd p = { .fd = pipefd[0], .events = POLLIN };
        ssize_t n;

        g_assert_cmpint(poll(&p, 1, PU_TIMEOUT_MS), ==, 1);
        n = read(pipefd[0], buf + got, sizeof(buf) - 1 - got);
        g_assert_cmpint(n, >, 0);
        got += (size_t)n;
        buf[got] = 0;
    }
    g_assert_nonnull(strstr(buf, sock));
    g_assert_nonnull(strstr(buf, "memory-backend-memfd"));
    g_assert_nonnull(strstr(buf, "share=on"));

    fe = pu_connect(&d, 1);
    pu_make_ready(fe, 0);
    pu_read_capacity16(fe, 0, &blocks, &bsize);
    g_assert_cmpuint(blocks * bsize, ==, 1ull << 30);
    vfe_close(fe);
    kill(pid, SIGINT);
    int status;
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    /* A clean exit removes the socket it created. */
    g_assert_false(g_file_test(sock, G_FILE_TEST_EXISTS));
    close(pipefd[0]);
    g_rmdir(dir);
    g_free(sock);
    g_free(dir);
}

/*
 * Busy polling changes who turns notifications on and off; each mode must
 * still serve every request correctly (the bench verifies what it wrote),
 * with the bench itself polling or sleeping on the call eventfd.
 */
static void test_poll_modes_serve_correctly(void)
{
    static const char *const modes[] = { "on", "adaptive", "off" };
    const char *bench = g_getenv("VHOST_SCSI_BENCH");

    g_assert_nonnull(bench);
    for (unsigned i = 0; i < G_N_ELEMENTS(modes); i++) {
        const char *args[] = { "--lun", "0=ram:16M", "--queues", "2", "--threads", "1",
                               "--poll", modes[i], NULL };
        struct pu_daemon d;

        pu_daemon_init(&d);
        pu_daemon_start(&d, args);
        for (int bench_polls = 0; bench_polls < 2; bench_polls++) {
            const char *argv[] = { bench, "--socket", d.sock, "--verify", "--ios", "3000",
                                   "--iodepth", "16", "--queues", "2", "--quiet", "--json",
                                   bench_polls ? "--poll" : NULL, NULL };
            char *out, *err;

            g_assert_cmpint(run_sync(argv, &out, &err), ==, 0);
            if (!strstr(out, "\"verify_errors\":0")) {
                g_error("--poll %s%s: %s", modes[i], bench_polls ? " (bench polling)" : "", out);
            }
            g_free(out);
            g_free(err);
        }
        g_assert_true(pu_daemon_alive(&d));
        pu_daemon_stop(&d, false);
        pu_daemon_cleanup(&d);
    }
}

/*
 * The bench's --idle attaches, issues nothing for --time seconds and
 * reports the back-end's CPU over that time (the idle row of the SPDK
 * peer comparison is measured with it); with --verify or --ios it refuses, saying why.
 */
static void test_bench_idle_reports_the_back_end(void)
{
    const char *bench = g_getenv("VHOST_SCSI_BENCH");
    const char *args[] = { "--lun", "0=null:16M", "--poll", "adaptive", NULL };
    struct pu_daemon d;
    char pid[16], *out, *err;

    g_assert_nonnull(bench);
    pu_daemon_init(&d);
    pu_daemon_start(&d, args);
    snprintf(pid, sizeof(pid), "%d", (int)d.proc.pid);
    const char *argv[] = { bench, "--socket", d.sock, "--idle", "--time", "1", "--pid", pid,
                           "--json", NULL };
    g_assert_cmpint(run_sync(argv, &out, &err), ==, 0);
    g_assert_nonnull(strstr(out, "\"rw\":\"idle\""));
    g_assert_nonnull(strstr(out, "\"interrupts\":0"));
    g_assert_nonnull(strstr(out, "\"cpu_cores\":"));
    g_free(out);
    g_free(err);

    const char *bad[] = { bench, "--socket", d.sock, "--idle", "--verify", NULL };
    g_assert_cmpint(run_sync(bad, &out, &err), !=, 0);
    g_assert_nonnull(strstr(err, "--idle issues no I/O"));
    g_free(out);
    g_free(err);
    g_assert_true(pu_daemon_alive(&d));
    pu_daemon_stop(&d, false);
    pu_daemon_cleanup(&d);
}

/* Runs the bench on d's LUN lun with extra; its stderr, after checking it failed (status 1). */
static char *bench_failure(struct pu_daemon *d, const char *lun, const char *extra)
{
    const char *argv[] = { g_getenv("VHOST_SCSI_BENCH"), "--socket", d->sock, "--lun", lun,
                           "--ios", "10", "--quiet", extra, NULL };
    char *out, *err;
    int status = run_sync(argv, &out, &err);

    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 1);
    g_free(out);
    return err;
}

/*
 * What failed, in words: a LUN the daemon does not have by the
 * virtio-scsi response's name; a command the LUN refused by its sense
 * key and ASC/ASCQ (a write to a read-only LUN).
 */
static void test_bench_says_what_failed(void)
{
    struct pu_daemon d;
    g_autofree char *img = NULL, *ro = NULL, *missing = NULL, *refused = NULL;

    g_assert_nonnull(g_getenv("VHOST_SCSI_BENCH"));
    pu_daemon_init(&d);
    img = g_build_filename(d.dir, "ro.img", NULL);
    g_assert_true(g_file_set_contents(img, "", 0, NULL));
    g_assert_cmpint(truncate(img, 16 << 20), ==, 0);
    ro = g_strdup_printf("1=file:%s,ro", img);
    const char *args[] = { "--lun", "0=null:16M", "--lun", ro, NULL };
    pu_daemon_start(&d, args);
    missing = bench_failure(&d, "0:3", NULL);
    g_assert_nonnull(strstr(missing, "vhost-scsi-bench: LUN 0:3: bad target "
                            "(VIRTIO_SCSI_S_BAD_TARGET)\n"));
    refused = bench_failure(&d, "0:1", "--rw=randwrite");
    g_assert_nonnull(strstr(refused, " failed: CHECK CONDITION: DATA PROTECTION (sense key 0x7), "
                            "WRITE_PROTECTED (ASC/ASCQ 0x27/0x00)\n"));
    g_assert_true(pu_daemon_alive(&d));
    pu_daemon_stop(&d, false);
    pu_daemon_cleanup(&d);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/cli/print-capabilities", test_print_capabilities);
    g_test_add_func("/cli/version", test_version);
    g_test_add_func("/cli/bad-arguments-fail-clearly", test_bad_arguments_fail_clearly);
    g_test_add_func("/cli/inherited-listening-socket", test_inherited_listening_socket);
    g_test_add_func("/cli/embedded-default", test_embedded_default);
    g_test_add_func("/cli/poll-modes-serve-correctly", test_poll_modes_serve_correctly);
    g_test_add_func("/cli/bench-idle-reports-the-back-end", test_bench_idle_reports_the_back_end);
    g_test_add_func("/cli/bench-says-what-failed", test_bench_says_what_failed);
    return g_test_run();
}
