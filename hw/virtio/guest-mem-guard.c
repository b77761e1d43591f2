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
 * by the handler with atomics only.  It grows in chunks that are never
 * freed (the handler may be reading one), up to GUARD_MAX_SLOTS mappings;
 * a mapping that finds the table full is refused by its caller rather
 * than left unguarded, so one front-end cannot spend the guard for all.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib.h>

#include "guest-mem-guard.h"

/*
 * 33 guarded mappings per connection at most (32 regions and an inflight
 * area); the daemon's connection limit keeps it well below the maximum.
 */
#define GUARD_CHUNK_SLOTS 1024
#define GUARD_CHUNKS 64
#define GUARD_MAX_SLOTS (GUARD_CHUNK_SLOTS * GUARD_CHUNKS)

struct guard_slot {
    atomic_uintptr_t base;     /* 0: free */
    atomic_size_t len;
    atomic_int owner_fd;
    atomic_bool tripped;
};

static _Atomic(struct guard_slot *) chunks[GUARD_CHUNKS];
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned first_free;    /* no free slot below it; under slots_lock */
static struct sigaction previous;
static atomic_bool installed;

/* Slot i, or NULL if its chunk was never allocated; async-signal-safe. */
static struct guard_slot *slot_at(unsigned i)
{
    struct guard_slot *chunk;

    if (i >= GUARD_MAX_SLOTS) {
        return NULL;
    }
    chunk = atomic_load_explicit(&chunks[i / GUARD_CHUNK_SLOTS], memory_order_acquire);
    return chunk ? &chunk[i % GUARD_CHUNK_SLOTS] : NULL;
}

static void guard_handler(int sig, siginfo_t *si, void *uctx)
{
    static const char msg[] = "vhost-scsi: a front-end truncated the file behind a mapping it "
                              "shared (SIGBUS); dropping that connection\n";
    uintptr_t a = (uintptr_t)si->si_addr;

    /* si_code > 0: raised by the kernel for an access, not sent by kill(). */
    for (unsigned i = 0; si->si_code > 0 && i < GUARD_MAX_SLOTS; i++) {
        struct guard_slot *slot = slot_at(i);
        uintptr_t base;
        size_t len;
        int fd;

        if (!slot) {
            break;
        }
        base = atomic_load_explicit(&slot->base, memory_order_acquire);

        if (!base) {
            continue;
        }
        len = atomic_load_explicit(&slot->len, memory_order_relaxed);
        if (a - base >= len) {
            continue;
        }
        fd = atomic_load_explicit(&slot->owner_fd, memory_order_relaxed);
        /* Whole mapping: a hugetlbfs VMA cannot be split at a small page. */
        if (mmap((void *)base, len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED) {
            break;
        }
        atomic_store(&slot->tripped, true);
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
    for (unsigned i = first_free; i < GUARD_MAX_SLOTS && !handle; i++) {
        struct guard_slot *slot = slot_at(i);

        if (!slot) {
            /* Zeroed chunk: every slot free.  Published before any slot in it is. */
            struct guard_slot *chunk = calloc(GUARD_CHUNK_SLOTS, sizeof(*chunk));

            if (!chunk) {
                break;
            }
            atomic_store_explicit(&chunks[i / GUARD_CHUNK_SLOTS], chunk, memory_order_release);
            slot = slot_at(i);
        }
        if (!atomic_load_explicit(&slot->base, memory_order_relaxed)) {
            atomic_store_explicit(&slot->len, len, memory_order_relaxed);
            atomic_store_explicit(&slot->owner_fd, owner_fd, memory_order_relaxed);
            atomic_store_explicit(&slot->tripped, false, memory_order_relaxed);
            /* Published last: the handler trusts len and fd once base is set. */
            atomic_store_explicit(&slot->base, (uintptr_t)base, memory_order_release);
            handle = (int)i + 1;
            first_free = i + 1;
        }
    }
    pthread_mutex_unlock(&slots_lock);
    if (!handle) {
        g_warning("guest memory guard: all %u slots in use; a mapping of %zu bytes cannot "
                  "be guarded", GUARD_MAX_SLOTS, len);
    }
    return handle;
}

int guest_mem_guard_fd_mapping(int fd, void *base, size_t len, int owner_fd)
{
    int seals = fcntl(fd, F_GET_SEALS);

    if (seals >= 0 && (seals & F_SEAL_SHRINK)) {
        return 0;
    }
    return guest_mem_guard_add(base, len, owner_fd) ?: -ENOSPC;
}

void guest_mem_guard_remove(int handle)
{
    struct guard_slot *slot = handle > 0 ? slot_at((unsigned)handle - 1) : NULL;

    if (!slot) {
        return;
    }
    pthread_mutex_lock(&slots_lock);
    atomic_store_explicit(&slot->base, 0, memory_order_release);
    if ((unsigned)handle - 1 < first_free) {
        first_free = (unsigned)handle - 1;
    }
    pthread_mutex_unlock(&slots_lock);
}

int guest_mem_guard_tripped(int handle)
{
    struct guard_slot *slot = handle > 0 ? slot_at((unsigned)handle - 1) : NULL;

    return slot ? atomic_load(&slot->tripped) : 0;
}
