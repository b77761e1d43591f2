/*
 * The system calls each concern of the confined daemon needs after
 * set-up, as tables (include/sandbox/sandbox.h): what an io_uring loop, a
 * vhost-user conversation, the control socket, an iSCSI session or librbd
 * still calls once everything the command line asked for is open and
 * running.  They were found with `strace -f -c` and the seccomp log on the
 * test suites (docs/security.md, "Sandbox"); a call is here because a
 * suite needs it, never "just in case".  Calls allowed only with some
 * arguments (socket domains, clone flags, ioctl requests, prctl options,
 * executable mappings, signals to other processes) are filtered by
 * sandbox.c instead and are not listed here.  Last, the calls whose very
 * attempt kills the process (sandbox_fatal_calls): what no library the
 * daemon uses makes by accident, only a subverted thread.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stddef.h>

#include "sandbox.h"

/* Every thread: memory, locks, clocks, event loops, signals, exit, stderr. */
static const char *const base_calls[] = {
    "read", "write", "readv", "writev", "close", "close_range", "dup", "dup3", "fcntl",
    "pipe2", "lseek",
    "brk", "munmap", "mremap", "madvise", "membarrier",
    "futex", "set_robust_list", "rseq", "set_tid_address",
    "sched_yield", "sched_getaffinity",
    "getpid", "gettid", "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid",
    "getrusage", "getrandom", "uname", "sysinfo", "prlimit64",
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday",
    "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2",
    "poll", "ppoll",
    "eventfd2", "timerfd_create", "timerfd_settime", "timerfd_gettime", "signalfd4",
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack",
    "restart_syscall",
    "fstat", "newfstatat", "statx",
    "exit", "exit_group",
    NULL,
};

/* Files opened and changed after set-up (LUN hot-add, APTPL state, config-save). */
static const char *const files_calls[] = {
    "openat", "pread64", "pwrite64", "preadv", "pwritev",
    "fsync", "fdatasync", "fallocate", "ftruncate", "fadvise64",
    "rename", "renameat", "renameat2", "unlink", "unlinkat",
    "access", "faccessat", "faccessat2", "readlink", "readlinkat", "getcwd",
    "fchmod", "umask",
    NULL,
};

/* The I/O threads' rings, all made at start: no io_uring_setup afterwards. */
static const char *const uring_calls[] = {
    "io_uring_enter",
    NULL,
};

/*
 * Front-end connections: accepted, messages with fds, guest memory mapped,
 * the inflight area (GET_INFLIGHT_FD: a sealed memfd of our own).
 */
static const char *const vhost_user_calls[] = {
    "accept4", "recvmsg", "sendmsg", "recvfrom", "sendto", "getsockopt", "shutdown",
    "getsockname", "memfd_create",
    NULL,
};

/* The control socket and the listening sockets controller-add makes. */
static const char *const control_calls[] = {
    "bind", "listen", "connect", "chmod", "fchmodat", "chown", "fchown", "fchownat",
    NULL,
};

/* iSCSI sessions: TCP connects and name resolution (NSS, DNS over UDP, netlink). */
static const char *const net_calls[] = {
    "connect", "bind", "setsockopt", "getpeername", "sendmmsg", "recvmmsg",
    NULL,
};

/*
 * librbd / librados: messengers, the admin socket (its thread accept()s),
 * plugins.  epoll_create: Ceph's EpollDriver makes each new cluster
 * handle's event loops with the old call, so an RBD LUN added live (after
 * the filter is on) needs it (ceph test blocklisted-fenced-then-re-added).
 */
static const char *const rbd_calls[] = {
    "connect", "bind", "listen", "accept", "setsockopt", "getpeername", "sendmmsg",
    "recvmmsg", "epoll_create",
    NULL,
};

/*
 * Never allowed, and fatal rather than refused: running programs, other
 * processes' memory or fds, code in the kernel, keys, privileges and
 * identities, namespaces and mounts, new io_uring instances (whose
 * operations seccomp does not see), eBPF, perf, userfaultfd and file
 * handles (the ways out of a sandbox that exploits use).
 */
static const char *const fatal_calls[] = {
    "execve", "execveat", "fork", "vfork",
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "add_key", "request_key", "keyctl",
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid",
    "setfsgid", "setgroups", "capset",
    "mount", "umount2", "mount_setattr", "move_mount", "open_tree", "fsopen", "fsconfig",
    "fsmount", "fspick", "pivot_root", "chroot", "unshare", "setns",
    "io_uring_setup", "io_uring_register", "bpf", "perf_event_open", "userfaultfd",
    "name_to_handle_at", "open_by_handle_at",
    "iopl", "ioperm", "reboot", "swapon", "swapoff",
    NULL,
};

const char *const *sandbox_fatal_calls(void)
{
    return fatal_calls;
}

static const struct {
    enum sandbox_set set;
    const char *name;
    const char *const *calls;
} sets[] = {
    { SANDBOX_BASE, "base", base_calls },
    { SANDBOX_FILES, "files", files_calls },
    { SANDBOX_URING, "uring", uring_calls },
    { SANDBOX_VHOST_USER, "vhost-user", vhost_user_calls },
    { SANDBOX_CONTROL, "control", control_calls },
    { SANDBOX_NET, "net", net_calls },
    { SANDBOX_RBD, "rbd", rbd_calls },
};

const char *const *sandbox_set_calls(enum sandbox_set set)
{
    for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
        if (sets[i].set == set) {
            return sets[i].calls;
        }
    }
    return NULL;
}

const char *sandbox_set_name(enum sandbox_set set)
{
    for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
        if (sets[i].set == set) {
            return sets[i].name;
        }
    }
    return NULL;
}
