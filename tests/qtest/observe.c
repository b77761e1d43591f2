/*
 * Watching QEMU without waking it.  Every qtest or QMP command is work
 * for QEMU's main thread, so a test that asks "did QEMU's threads take
 * part in this interrupt?" must look from outside: guest RAM through
 * QEMU's own memfd (the suite's RAM is a shared memfd backend, mapped here
 * read-only), and the threads' context switches from /proc.  A thread that
 * sleeps in poll() and is woken by an eventfd counts one voluntary switch,
 * so the sum over QEMU's non-vCPU threads tells whether the main loop or
 * any helper thread ran.  vCPU threads ("CPU n/KVM") are left out: KVM
 * wakes them to deliver the interrupt whoever injected it.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "libqt.h"
#include "irq-count.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

const volatile uint8_t *qt_ram_map(struct qts *s)
{
    g_autofree char *fds = g_strdup_printf("/proc/%d/fd", (int)qts_pid(s));
    g_autoptr(GDir) dir = g_dir_open(fds, 0, NULL);
    const char *name;
    g_assert_nonnull(dir);
    while ((name = g_dir_read_name(dir))) {
        g_autofree char *path = g_build_filename(fds, name, NULL);
        g_autofree char *target = g_file_read_link(path, NULL);
        /* QEMU names a backend's memfd after its type; the suite has one (qtest.c). */
        if (!target || !g_str_has_prefix(target, "/memfd:memory-backend-memfd ")) {
            continue;
        }
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        g_assert_cmpint(fd, >=, 0);
        void *p = mmap(NULL, QT_RAM_SIZE, PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        g_assert(p != MAP_FAILED);
        return p;
    }
    g_error("QEMU %d has no memory-backend-memfd open", (int)qts_pid(s));
}

void qt_ram_unmap(const volatile uint8_t *ram)
{
    munmap((void *)ram, QT_RAM_SIZE);
}

/* voluntary + nonvoluntary context switches of one thread, from its status file. */
static uint64_t thread_switches(const char *task)
{
    g_autofree char *path = g_build_filename(task, "status", NULL);
    g_autofree char *text = NULL;
    uint64_t sum = 0;
    if (!g_file_get_contents(path, &text, NULL, NULL)) {
        return 0;      /* the thread has just exited */
    }
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; *l; l++) {
        unsigned long long n;
        if (sscanf(*l, "voluntary_ctxt_switches: %llu", &n) == 1 ||
            sscanf(*l, "nonvoluntary_ctxt_switches: %llu", &n) == 1) {
            sum += n;
        }
    }
    return sum;
}

uint64_t qts_wakeups(struct qts *s)
{
    g_autofree char *tasks = g_strdup_printf("/proc/%d/task", (int)qts_pid(s));
    g_autoptr(GDir) dir = g_dir_open(tasks, 0, NULL);
    const char *name;
    uint64_t sum = 0;
    g_assert_nonnull(dir);
    while ((name = g_dir_read_name(dir))) {
        g_autofree char *task = g_build_filename(tasks, name, NULL);
        g_autofree char *comm_path = g_build_filename(task, "comm", NULL);
        g_autofree char *comm = NULL;
        if (!g_file_get_contents(comm_path, &comm, NULL, NULL) ||
            g_str_has_prefix(comm, "CPU ")) {
            continue;
        }
        sum += thread_switches(task);
    }
    return sum;
}

const volatile uint32_t *qt_ram_irq_counter(const volatile uint8_t *ram, unsigned vector)
{
    g_assert_cmpuint(vector, <, 256);
    return (const volatile uint32_t *)(ram + QT_FW_COUNTERS + 4ull * vector);
}

/* The state letter of /proc/PID/task/PID/stat (after the parenthesised name). */
static char main_thread_state(struct qts *s)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/task/%d/stat", (int)qts_pid(s),
                                            (int)qts_pid(s));
    g_autofree char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL)) {
        return '?';
    }
    const char *end = strrchr(text, ')');
    return end && end[1] == ' ' ? end[2] : '?';
}

void qts_wait_asleep(struct qts *s)
{
    gint64 deadline = g_get_monotonic_time() + QT_TIMEOUT_US;
    while (main_thread_state(s) != 'S') {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_thread_yield();
    }
}
