/*
 * The SIGBUS guard.  Guest memory is a shared mapping of a file the
 * front-end owns; if the front-end truncates it, the next access to a lost
 * page raises SIGBUS in whichever thread touched it (an I/O thread reading
 * a ring, io_uring's completion path does not fault: it gets -EFAULT).
 * The handler looks the faulting address up among the guarded mappings,
 * maps private zero pages over the whole mapping so the faulting access
 * completes harmlessly on retry, and shuts the owning connection's socket
 * down, so the main loop drops that front-end as if it had hung up; the
 * other front-ends never notice.  A fault anywhere else is a real bug and
 * gets the handler that was installed before ours (the default: a core).
 *
 * A signal handler cannot be handed a context, so the table of guarded
 * mappings is this file's static state, the one piece of process-wide
 * state outside a program's main(); it is written under a mutex and read
 * by the handler with atomics only.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib.h>

#include "guest-mem-guard.h"

/* 32 regions per connection at most; 1024 covers 32 full tables. */
#define GUARD_SLOTS 1024

struct guard_slot {
    atomic_uintptr_t base;     /* 0: free */
    atomic_size_t len;
    atomic_int owner_fd;
    atomic_bool tripped;
};

static struct guard_slot slots[GUARD_SLOTS];
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction previous;
static atomic_bool installed;

static void guard_handler(int sig, siginfo_t *si, void *uctx)
{
    static const char msg[] = "vhost-scsi: a front-end truncated the file behind a mapping it "
                              "shared (SIGBUS); dropping that connection\n";
    uintptr_t a = (uintptr_t)si->si_addr;

    /* si_code > 0: raised by the kernel for an access, not sent by kill(). */
    for (unsigned i = 0; si->si_code > 0 && i < GUARD_SLOTS; i++) {
        uintptr_t base = atomic_load_explicit(&slots[i].base, memory_order_acquire);
        size_t len;
        int fd;

        if (!base) {
            continue;
        }
        len = atomic_load_explicit(&slots[i].len, memory_order_relaxed);
        if (a - base >= len) {
            continue;
        }
        fd = atomic_load_explicit(&slots[i].owner_fd, memory_order_relaxed);
        /* Whole mapping: a hugetlbfs VMA cannot be split at a small page. */
        if (mmap((void *)base, len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED) {
            break;
        }
        atomic_store(&slots[i].tripped, true);
        if (fd >= 0) {
            shutdown(fd, SHUT_RDWR);
        }
        if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
            /* nothing more a signal handler can do */
        }
        return;
    }
    /* Not ours: put the previous disposition back; the access faults again. */
    sigaction(SIGBUS, &previous, NULL);
    if (si->si_code <= 0) {
        raise(sig);
    }
    (void)uctx;
}

int guest_mem_guard_install(void)
{
    struct sigaction sa;

    pthread_mutex_lock(&slots_lock);
    if (atomic_load(&installed)) {
        pthread_mutex_unlock(&slots_lock);
        return 0;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = guard_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &previous) < 0) {
        int err = errno;

        pthread_mutex_unlock(&slots_lock);
        g_warning("guest memory guard: sigaction(SIGBUS): %s", g_strerror(err));
        return -err;
    }
    atomic_store(&installed, true);
    pthread_mutex_unlock(&slots_lock);
    return 0;
}

int guest_mem_guard_add(void *base, size_t len, int owner_fd)
{
    int handle = 0;

    if (!base || !len) {
        return 0;
    }
    pthread_mutex_lock(&slots_lock);
    for (unsigned i = 0; i < GUARD_SLOTS; i++) {
        if (!atomic_load_explicit(&slots[i].base, memory_order_relaxed)) {
            atomic_store_explicit(&slots[i].len, len, memory_order_relaxed);
            atomic_store_explicit(&slots[i].owner_fd, owner_fd, memory_order_relaxed);
            atomic_store_explicit(&slots[i].tripped, false, memory_order_relaxed);
            /* Published last: the handler trusts len and fd once base is set. */
            atomic_store_explicit(&slots[i].base, (uintptr_t)base, memory_order_release);
            handle = (int)i + 1;
            break;
        }
    }
    pthread_mutex_unlock(&slots_lock);
    if (!handle) {
        g_warning("guest memory guard: all %u slots in use; a mapping of %zu bytes stays "
                  "unguarded", GUARD_SLOTS, len);
    }
    return handle;
}

void guest_mem_guard_remove(int handle)
{
    if (handle <= 0 || handle > GUARD_SLOTS) {
        return;
    }
    pthread_mutex_lock(&slots_lock);
    atomic_store_explicit(&slots[handle - 1].base, 0, memory_order_release);
    pthread_mutex_unlock(&slots_lock);
}

int guest_mem_guard_tripped(int handle)
{
    if (handle <= 0 || handle > GUARD_SLOTS) {
        return 0;
    }
    return atomic_load(&slots[handle - 1].tripped);
}
