/*
 * The sandbox layer (lib/sandbox): each case forks a child that installs
 * the filter the daemon installs and then makes one call; the parent
 * checks how the child ended.  An allowed call must let the child carry
 * on (files, threads, exit); a forbidden one (execve, fork, ptrace, a
 * packet socket, a TCP socket or an executable mapping without the sets
 * that need them, a call from a thread started before the filter) must
 * kill it with SIGSYS rather than run.  Also: every name in the tables is
 * a system call libseccomp knows (a misspelt one would be skipped, and the
 * daemon killed for a call it needs), no new privileges and seccomp mode 2
 * on every thread, and --sandbox-user's drop leaves no capability.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <seccomp.h>

#include "sandbox.h"

/* What the daemon allows with a control socket, and without anything but local LUNs. */
#define ALL_SETS (SANDBOX_BASE | SANDBOX_FILES | SANDBOX_URING | SANDBOX_VHOST_USER | \
                  SANDBOX_CONTROL | SANDBOX_NET | SANDBOX_RBD)
#define LOCAL_SETS (SANDBOX_BASE | SANDBOX_FILES | SANDBOX_URING | SANDBOX_VHOST_USER)

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZER_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZER_BUILD 1
#endif
#endif
#ifndef SANITIZER_BUILD
#define SANITIZER_BUILD 0
#endif

/* Child exit codes: the call returned (it was allowed), or a step before it failed. */
enum { CHILD_RAN = 0, CHILD_NO_FILTER = 90, CHILD_CHECK_FAILED = 91 };

typedef int child_fn(void);

/* Forks; the child installs sets and runs fn, exiting with its result. The wait status. */
static int run_confined(unsigned sets, child_fn *fn)
{
    pid_t pid = fork();
    int status;

    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        if (sandbox_install(sets) < 0) {
            _exit(CHILD_NO_FILTER);
        }
        _exit(fn());
    }
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    return status;
}

static void assert_killed(int status)
{
    if (WIFEXITED(status)) {
        g_test_message("child exited %d", WEXITSTATUS(status));
    }
    g_assert_true(WIFSIGNALED(status));
    g_assert_cmpint(WTERMSIG(status), ==, SIGSYS);
}

static void assert_ran(int status)
{
    if (WIFSIGNALED(status)) {
        g_test_message("child killed by signal %d", WTERMSIG(status));
    }
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, CHILD_RAN);
}

static void test_names_known(void)
{
#ifdef __x86_64__
    for (unsigned bit = 1; bit <= SANDBOX_RBD; bit <<= 1) {
        const char *const *calls = sandbox_set_calls(bit);

        g_assert_nonnull(calls);
        g_assert_nonnull(sandbox_set_name(bit));
        for (; *calls; calls++) {
            if (seccomp_syscall_resolve_name(*calls) == __NR_SCMP_ERROR) {
                g_test_message("set %s: %s is no system call", sandbox_set_name(bit), *calls);
                g_test_fail();
            }
        }
    }
    g_assert_null(sandbox_set_calls(1u << 20));
    g_assert_null(sandbox_set_name(1u << 20));
#else
    g_test_skip("the tables are checked on x86_64, where every name exists");
#endif
}

/* A field of /proc/self/task/TID/status, as the daemon's test reads the daemon's. */
static bool status_has(const char *path, const char *line)
{
    g_autofree char *text = NULL;

    return g_file_get_contents(path, &text, NULL, NULL) && strstr(text, line);
}

static void *thread_status_ok(void *arg)
{
    g_autofree char *path = g_strdup_printf("/proc/self/task/%d/status", gettid());

    *(bool *)arg = status_has(path, "\nSeccomp:\t2\n") && status_has(path, "\nNoNewPrivs:\t1\n");
    return NULL;
}

/* Files, a thread (clone3 refused, glibc falls back to clone), its status, stdio. */
static int child_allowed(void)
{
    char buf[16];
    pthread_t t;
    bool ok = false;
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

    if (fd < 0 || read(fd, buf, sizeof(buf)) <= 0 || close(fd) < 0) {
        return CHILD_CHECK_FAILED;
    }
    if (pthread_create(&t, NULL, thread_status_ok, &ok) != 0 || pthread_join(t, NULL) != 0) {
        return CHILD_CHECK_FAILED;
    }
    fprintf(stderr, "# confined child: thread status %s\n", ok ? "confined" : "NOT confined");
    return ok ? CHILD_RAN : CHILD_CHECK_FAILED;
}

static void test_allowed(void)
{
    assert_ran(run_confined(LOCAL_SETS, child_allowed));
    assert_ran(run_confined(ALL_SETS, child_allowed));
}

static int child_execve(void)
{
    char *const argv[] = { "true", NULL };

    execve("/bin/true", argv, environ);
    return CHILD_RAN;
}

static int child_fork(void)
{
    pid_t pid = fork();

    if (pid == 0) {
        _exit(0);
    }
    return CHILD_RAN;
}

static int child_ptrace(void)
{
    ptrace(PTRACE_TRACEME, 0, NULL, NULL);
    return CHILD_RAN;
}

static void test_forbidden_process_calls(void)
{
    if (SANITIZER_BUILD) {
        /* The sanitizer's leak check and symbolizer need them (lib/sandbox/sandbox.c). */
        g_test_skip("a sanitizer build allows execve, fork and ptrace");
        return;
    }
    assert_killed(run_confined(ALL_SETS, child_execve));
    assert_killed(run_confined(ALL_SETS, child_fork));
    assert_killed(run_confined(ALL_SETS, child_ptrace));
}

static int child_packet_socket(void)
{
    socket(AF_PACKET, SOCK_RAW, 0);
    return CHILD_RAN;
}

static int child_tcp_socket(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    return fd >= 0 ? CHILD_RAN : CHILD_CHECK_FAILED;
}

static int child_unix_socket(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    return fd >= 0 ? CHILD_RAN : CHILD_CHECK_FAILED;
}

static void test_sockets(void)
{
    /* Never a packet socket, whatever is allowed. */
    assert_killed(run_confined(ALL_SETS, child_packet_socket));
    /* No socket at all with local LUNs only; TCP with the net sets, UNIX with control. */
    assert_killed(run_confined(LOCAL_SETS, child_unix_socket));
    assert_killed(run_confined(LOCAL_SETS | SANDBOX_CONTROL, child_tcp_socket));
    assert_ran(run_confined(LOCAL_SETS | SANDBOX_CONTROL, child_unix_socket));
    assert_ran(run_confined(LOCAL_SETS | SANDBOX_NET, child_tcp_socket));
}

static int child_exec_mapping(void)
{
    void *p = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    return p != MAP_FAILED ? CHILD_RAN : CHILD_CHECK_FAILED;
}

static int child_make_executable(void)
{
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (p == MAP_FAILED) {
        return CHILD_CHECK_FAILED;
    }
    return mprotect(p, 4096, PROT_READ | PROT_EXEC) == 0 ? CHILD_RAN : CHILD_CHECK_FAILED;
}

static void test_exec_mappings(void)
{
    if (SANITIZER_BUILD) {
        g_test_skip("a sanitizer build allows executable mappings");
        return;
    }
    assert_killed(run_confined(LOCAL_SETS | SANDBOX_CONTROL, child_exec_mapping));
    assert_killed(run_confined(LOCAL_SETS, child_make_executable));
    /* NSS modules and librados plugins are loaded after set-up. */
    assert_ran(run_confined(LOCAL_SETS | SANDBOX_NET, child_exec_mapping));
}

/* A thread that exists before the filter is loaded, and makes a forbidden call after. */
struct early_thread {
    int go[2];
};

static void *early_thread_main(void *arg)
{
    struct early_thread *e = arg;
    char c;

    if (read(e->go[0], &c, 1) == 1) {
        socket(AF_PACKET, SOCK_RAW, 0);
    }
    return NULL;
}

static int child_early_thread(void)
{
    struct early_thread e;
    pthread_t t;

    /* Started and then the filter loaded here, as the daemon's I/O threads are. */
    if (pipe(e.go) < 0 || pthread_create(&t, NULL, early_thread_main, &e) != 0) {
        return CHILD_CHECK_FAILED;
    }
    if (sandbox_install(ALL_SETS) < 0) {
        return CHILD_NO_FILTER;
    }
    if (write(e.go[1], "x", 1) != 1) {
        return CHILD_CHECK_FAILED;
    }
    pthread_join(t, NULL);
    return CHILD_RAN;
}

static void test_threads_before_filter(void)
{
    pid_t pid = fork();
    int status;

    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        _exit(child_early_thread());
    }
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    assert_killed(status);
}

static int child_drop_user(void)
{
    if (sandbox_drop_user(65534, 65534) < 0) {
        return CHILD_CHECK_FAILED;
    }
    if (!status_has("/proc/self/status", "\nUid:\t65534\t65534\t65534\t65534\n") ||
        !status_has("/proc/self/status", "\nGid:\t65534\t65534\t65534\t65534\n") ||
        !status_has("/proc/self/status", "\nGroups:\t \n") ||
        !status_has("/proc/self/status", "\nCapEff:\t0000000000000000\n") ||
        !status_has("/proc/self/status", "\nCapPrm:\t0000000000000000\n")) {
        return CHILD_CHECK_FAILED;
    }
    /* And there is no way back. */
    return setresuid(0, 0, 0) < 0 ? CHILD_RAN : CHILD_CHECK_FAILED;
}

static void test_drop_user(void)
{
    pid_t pid;
    int status;
    uid_t uid;
    gid_t gid;

    g_assert_cmpint(sandbox_lookup_user("0", &uid, &gid), ==, 0);
    g_assert_cmpuint(uid, ==, 0);
    g_assert_cmpint(sandbox_lookup_user("no-such-user-vhost-scsi", &uid, &gid), ==, -ENOENT);
    g_assert_cmpint(sandbox_lookup_user("99999999999999999999", &uid, &gid), ==, -EINVAL);
    if (geteuid() != 0) {
        g_test_skip("dropping to another user needs root");
        return;
    }
    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        _exit(child_drop_user());
    }
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    assert_ran(status);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/sandbox/names-known", test_names_known);
    g_test_add_func("/sandbox/allowed", test_allowed);
    g_test_add_func("/sandbox/forbidden/process-calls", test_forbidden_process_calls);
    g_test_add_func("/sandbox/forbidden/sockets", test_sockets);
    g_test_add_func("/sandbox/forbidden/exec-mappings", test_exec_mappings);
    g_test_add_func("/sandbox/forbidden/thread-started-before", test_threads_before_filter);
    g_test_add_func("/sandbox/drop-user", test_drop_user);
    return g_test_run();
}
