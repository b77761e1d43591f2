/*
 * The sandbox layer (hw/sandbox): each case forks a child that installs
 * the filter the daemon installs and then makes one call; the parent
 * checks how the child ended.  An allowed call must let the child carry
 * on (files, threads, block-device queries, exit); a dangerous one
 * (execve, fork, ptrace, mount, unshare, keyctl, bpf, io_uring_setup, a
 * packet or raw IP socket, an executable mapping without the sets that
 * load code, TIOCSTI, also from a thread started before the filter) must
 * kill it with SIGSYS rather than run; any other call outside the sets
 * (a socket the sets do not need, an unknown ioctl or prctl) must fail
 * with ENOSYS, the child carrying on, and be reported: one log line per
 * report however many refusals, none sooner than the interval after the
 * last.  Also: every name in the tables is a system call libseccomp knows
 * (a misspelt one would be skipped, and the daemon refused a call it
 * needs), no new privileges and seccomp mode 2 on every thread, group
 * look-ups under the filter read /etc/group without NSS, and
 * --sandbox-user's drop leaves no capability.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/fs.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <seccomp.h>

#include "sandbox.h"
#include "vs-error.h"

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

static int wait_child(pid_t pid)
{
    int status;

    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    return status;
}

/* Forks; the child runs fn (which installs a filter itself), exiting with its result. */
static int run_child(child_fn *fn)
{
    pid_t pid = fork();

    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        _exit(fn());
    }
    return wait_child(pid);
}

/* Forks; the child (0 returned in it) has installed sets, or exited. */
static pid_t fork_confined(unsigned sets)
{
    pid_t pid = fork();
    struct sandbox *sb;

    g_assert_cmpint(pid, >=, 0);
    if (pid == 0 && sandbox_install(sets, &sb, NULL) < 0) {
        _exit(CHILD_NO_FILTER);
    }
    return pid;
}

/* Forks; the child installs sets and runs fn, exiting with its result. The wait status. */
static int run_confined(unsigned sets, child_fn *fn)
{
    pid_t pid = fork_confined(sets);

    if (pid == 0) {
        _exit(fn());
    }
    return wait_child(pid);
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
        /* The sanitizer's leak check and symbolizer need them (hw/sandbox/sandbox.c). */
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

/* A call the sets do not need fails with ENOSYS: the child carries on. */
static int refused(long r)
{
    return r < 0 && errno == ENOSYS ? CHILD_RAN : CHILD_CHECK_FAILED;
}

static int child_raw_ip_socket(void)
{
    socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
    return CHILD_RAN;
}

static int child_tcp_socket(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    return fd >= 0 ? CHILD_RAN : CHILD_CHECK_FAILED;
}

static int child_tcp_socket_refused(void)
{
    return refused(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
}

static int child_unix_socket(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    return fd >= 0 ? CHILD_RAN : CHILD_CHECK_FAILED;
}

static int child_unix_socket_refused(void)
{
    return refused(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
}

static void test_sockets(void)
{
    /* Never a packet socket nor a raw IP one, whatever is allowed. */
    assert_killed(run_confined(ALL_SETS, child_packet_socket));
    assert_killed(run_confined(ALL_SETS, child_raw_ip_socket));
    assert_killed(run_confined(LOCAL_SETS, child_raw_ip_socket));
    /* No socket at all with local LUNs only; TCP with the net sets, UNIX with control. */
    assert_ran(run_confined(LOCAL_SETS, child_unix_socket_refused));
    assert_ran(run_confined(LOCAL_SETS | SANDBOX_CONTROL, child_tcp_socket_refused));
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
    struct sandbox *sb;
    pthread_t t;

    /* Started and then the filter loaded here, as the daemon's I/O threads are. */
    if (pipe(e.go) < 0 || pthread_create(&t, NULL, early_thread_main, &e) != 0) {
        return CHILD_CHECK_FAILED;
    }
    if (sandbox_install(ALL_SETS, &sb, NULL) < 0) {
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
    assert_killed(run_child(child_early_thread));
}

static int child_drop_user(void)
{
    g_autoptr(GError) err = NULL;

    if (sandbox_drop_user(65534, 65534, NULL) < 0) {
        return CHILD_CHECK_FAILED;
    }
    if (!status_has("/proc/self/status", "\nUid:\t65534\t65534\t65534\t65534\n") ||
        !status_has("/proc/self/status", "\nGid:\t65534\t65534\t65534\t65534\n") ||
        !status_has("/proc/self/status", "\nGroups:\t \n") ||
        !status_has("/proc/self/status", "\nCapEff:\t0000000000000000\n") ||
        !status_has("/proc/self/status", "\nCapPrm:\t0000000000000000\n")) {
        return CHILD_CHECK_FAILED;
    }
    /*
     * And there is no way back; asked to, it says which step refused
     * (the first: the groups), as an error, with nothing logged.
     */
    if (sandbox_drop_user(0, 0, &err) != -EPERM || !g_error_matches(err, VS_ERROR, EPERM) ||
        strcmp(err->message, "setgroups: Operation not permitted") != 0) {
        return CHILD_CHECK_FAILED;
    }
    return setresuid(0, 0, 0) < 0 ? CHILD_RAN : CHILD_CHECK_FAILED;
}

static void test_drop_user(void)
{
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
    assert_ran(run_child(child_drop_user));
}

/* The file backend's queries of a block device get the kernel's answer (here ENOTTY). */
static int child_block_queries(void)
{
    const unsigned long req[] = { BLKGETSIZE64, BLKSSZGET, BLKPBSZGET };
    uint64_t buf = 0;
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

    for (size_t i = 0; i < G_N_ELEMENTS(req); i++) {
        if (fd < 0 || ioctl(fd, req[i], &buf) == 0 || errno != ENOTTY) {
            return CHILD_CHECK_FAILED;
        }
    }
    return CHILD_RAN;
}

static void test_block_device_queries(void)
{
    assert_ran(run_confined(LOCAL_SETS, child_block_queries));
}

/* Forks; the child installs sets and makes call nr with zero arguments. The wait status. */
static int run_confined_call(unsigned sets, long nr)
{
    pid_t pid = fork_confined(sets);

    if (pid == 0) {
        syscall(nr, 0, 0, 0, 0, 0, 0);
        _exit(CHILD_RAN);
    }
    return wait_child(pid);
}

static void test_fatal_classes(void)
{
    /* Namespaces, mounts, keys, modules, kexec, eBPF, rings, identities: even in a sanitizer build. */
    const long calls[] = {
        SYS_unshare, SYS_setns, SYS_mount, SYS_keyctl, SYS_add_key, SYS_bpf, SYS_init_module,
        SYS_finit_module, SYS_kexec_load, SYS_io_uring_setup, SYS_setuid, SYS_setresuid,
        SYS_capset, SYS_chroot, SYS_open_by_handle_at, SYS_process_vm_writev,
    };

    for (size_t i = 0; i < G_N_ELEMENTS(calls); i++) {
        g_test_message("system call %ld", calls[i]);
        assert_killed(run_confined_call(ALL_SETS, calls[i]));
    }
    g_assert_true(sandbox_fatal_calls()[0] != NULL);
}

static int child_tiocsti(void)
{
    char c = 'x';

    ioctl(0, TIOCSTI, &c);
    return CHILD_RAN;
}

static void test_tiocsti(void)
{
    assert_killed(run_confined(ALL_SETS, child_tiocsti));
}

/* The log lines a confined child writes, kept instead of printed. */
static GLogWriterOutput keep_line(GLogLevelFlags level, const GLogField *fields, gsize n,
                                  gpointer opaque)
{
    for (gsize i = 0; i < n; i++) {
        if (!strcmp(fields[i].key, "MESSAGE")) {
            g_ptr_array_add(opaque, g_strdup(fields[i].value));
        }
    }
    return G_LOG_WRITER_HANDLED;
}

static bool report_fd_readable(struct sandbox *sb)
{
    struct pollfd p = { .fd = sandbox_refusals_fd(sb), .events = POLLIN };

    return poll(&p, 1, 0) == 1;
}

#define T0 (1000 * SANDBOX_REPORT_INTERVAL_NS)

/*
 * 1000 refusals of one call and three others, reported at T0 in one line;
 * 500 more, not reported a second later but at the end of the interval,
 * in one line: the child exits 0 only if all of it held.
 */
static int child_refusals(void)
{
    g_autoptr(GPtrArray) lines = g_ptr_array_new_with_free_func(g_free);
    struct sandbox *sb;
    int fd;

    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    g_log_set_writer_func(keep_line, lines, NULL);
    fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || sandbox_install(LOCAL_SETS, &sb, NULL) < 0) {
        return CHILD_NO_FILTER;
    }
    if (report_fd_readable(sb) || sandbox_report_refusals(sb, T0) != 0 || lines->len) {
        return 1;   /* nothing refused, nothing to report */
    }
    for (int i = 0; i < 1000; i++) {
        if (refused(syscall(SYS_getpgid, 0)) != CHILD_RAN) {
            return 2;
        }
    }
    /* An unknown ioctl, an unknown prctl, a socket of a set not installed. */
    if (refused(ioctl(fd, FIOCLEX)) != CHILD_RAN ||
        (!SANITIZER_BUILD && refused(prctl(PR_GET_DUMPABLE)) != CHILD_RAN) ||
        child_unix_socket_refused() != CHILD_RAN) {
        return 3;
    }
    if (!report_fd_readable(sb) || sandbox_report_refusals(sb, T0) != 0 || lines->len != 1 ||
        !strstr(lines->pdata[0], "(getpgid) 1000 times") ||
        !strstr(lines->pdata[0], "(ioctl) 1 times") || !strstr(lines->pdata[0], "(socket) 1 times") ||
        report_fd_readable(sb)) {
        return 4;
    }
    for (int i = 0; i < 500; i++) {
        syscall(SYS_getpgid, 0);
    }
    /* Too soon: told how long to wait, nothing logged, the counts kept. */
    if (sandbox_report_refusals(sb, T0 + 1000000000ull) != SANDBOX_REPORT_INTERVAL_NS - 1000000000ull ||
        lines->len != 1) {
        return 5;
    }
    if (sandbox_report_refusals(sb, T0 + SANDBOX_REPORT_INTERVAL_NS) != 0 || lines->len != 2 ||
        !strstr(lines->pdata[1], "refused 500 system calls with ENOSYS: ") ||
        !strstr(lines->pdata[1], "(getpgid) 500 times")) {
        return 6;
    }
    /* Ends with its answerer: the rest is logged, later refusals still fail, unlogged. */
    syscall(SYS_getpgid, 0);
    sandbox_free(sb);
    if (lines->len != 3 || refused(syscall(SYS_getpgid, 0)) != CHILD_RAN || lines->len != 3) {
        return 7;
    }
    return CHILD_RAN;
}

static void test_refusals_reported(void)
{
    assert_ran(run_child(child_refusals));
}

/* Under the filter, names come from /etc/group itself: no NSS module, nothing refused. */
static int child_groups(void)
{
    struct sandbox *sb;
    gid_t gid = 1;

    if (sandbox_install(ALL_SETS, &sb, NULL) < 0) {
        return CHILD_NO_FILTER;
    }
    if (sandbox_lookup_group("root", &gid) != 0 || gid != 0 ||
        sandbox_lookup_group("no-such-group-vhost-scsi", &gid) != -ENOENT ||
        sandbox_lookup_group("4321", &gid) != 0 || gid != 4321 || report_fd_readable(sb)) {
        return CHILD_CHECK_FAILED;
    }
    return CHILD_RAN;
}

static void test_lookup_group(void)
{
    gid_t gid = 1;

    /* Before the filter: by every NSS source; numbers as they are. */
    g_assert_cmpint(sandbox_lookup_group("root", &gid), ==, 0);
    g_assert_cmpuint(gid, ==, 0);
    g_assert_cmpint(sandbox_lookup_group("4321", &gid), ==, 0);
    g_assert_cmpuint(gid, ==, 4321);
    g_assert_cmpint(sandbox_lookup_group("no-such-group-vhost-scsi", &gid), ==, -ENOENT);
    g_assert_cmpint(sandbox_lookup_group("99999999999999999999", &gid), ==, -EINVAL);
    assert_ran(run_child(child_groups));
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
    g_test_add_func("/sandbox/forbidden/fatal-classes", test_fatal_classes);
    g_test_add_func("/sandbox/forbidden/tiocsti", test_tiocsti);
    g_test_add_func("/sandbox/allowed/block-device-queries", test_block_device_queries);
    g_test_add_func("/sandbox/refused/reported", test_refusals_reported);
    g_test_add_func("/sandbox/lookup-group", test_lookup_group);
    g_test_add_func("/sandbox/drop-user", test_drop_user);
    return g_test_run();
}
