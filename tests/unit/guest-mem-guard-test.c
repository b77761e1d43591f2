/*
 * Specification of the SIGBUS guard (hw/virtio/guest-mem-guard.c): when the
 * file behind a guarded guest-memory mapping is truncated, an access to the
 * lost pages completes (reading zeros) instead of killing the process, the
 * owning connection's socket is shut down so its peer sees the end of the
 * stream, and the mapping reports itself tripped; a memfd sealed against
 * shrinking is not guarded at all; a mapping that can no longer be
 * guarded is refused, never left unguarded; and a fault in memory nobody
 * guards still ends the process.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib.h>

#include "guest-mem.h"
#include "guest-mem-guard.h"

#define REGION (64 * 1024)

static int memfd_of(size_t size, unsigned flags)
{
    int fd = memfd_create("guard-test", MFD_CLOEXEC | flags);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, size), ==, 0);
    return fd;
}

static void test_truncated_region_costs_the_connection_only(void)
{
    struct guest_mem m;
    int sv[2], fd = memfd_of(REGION, 0);
    volatile uint8_t *p;
    char c;

    g_assert_cmpint(guest_mem_guard_install(), ==, 0);
    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
    guest_mem_init(&m);
    m.owner_fd = sv[0];
    g_assert_cmpint(guest_mem_map_fd(&m, dup(fd), 0x100000, REGION, 0, 0), ==, 0);
    g_assert_cmpint(m.r[0].guard, >, 0);
    p = guest_mem_gpa_ptr(&m, 0x100000, REGION);
    g_assert_nonnull(p);
    memset((void *)p, 0xa5, REGION);
    g_assert_false(guest_mem_guard_tripped(m.r[0].guard));

    /* The front-end takes the memory away under us. */
    g_assert_cmpint(ftruncate(fd, 0), ==, 0);
    g_assert_cmpuint(p[REGION / 2], ==, 0);       /* would have been SIGBUS */
    p[REGION - 1] = 1;                            /* and stays writable */
    g_assert_true(guest_mem_guard_tripped(m.r[0].guard));
    /* The owner's peer sees the connection end. */
    g_assert_cmpint(recv(sv[1], &c, 1, 0), ==, 0);

    guest_mem_clear(&m);
    close(sv[0]);
    close(sv[1]);
    close(fd);
}

static void test_memfd_sealed_against_shrinking_is_not_guarded(void)
{
    struct guest_mem m;
    int fd = memfd_of(REGION, MFD_ALLOW_SEALING);

    g_assert_cmpint(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), ==, 0);
    guest_mem_init(&m);
    g_assert_cmpint(guest_mem_map_fd(&m, fd, 0, REGION, 0, 0), ==, 0);
    g_assert_cmpint(m.r[0].guard, ==, 0);
    guest_mem_clear(&m);
}

/*
 * Once every guard slot is taken, an unsealed region is refused (it could
 * kill the process), a sealed one still maps, and a freed slot is reused.
 */
static void test_full_guard_refuses_unguardable_region(void)
{
    GArray *handles = g_array_new(FALSE, FALSE, sizeof(int));
    struct guest_mem m;
    int fd, h, sealed;

    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "guest memory guard: all * slots "
                          "in use*");
    /* Addresses nobody touches: the guard only compares them on a SIGBUS. */
    while ((h = guest_mem_guard_add((void *)(uintptr_t)((handles->len + 1) * 4096ull), 4096,
                                    -1)) > 0) {
        g_array_append_val(handles, h);
    }
    g_test_assert_expected_messages();
    g_assert_cmpuint(handles->len, >=, 65536 - 64);

    guest_mem_init(&m);
    fd = memfd_of(REGION, 0);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "guest memory guard: all * slots "
                          "in use*");
    g_assert_cmpint(guest_mem_map_fd(&m, fd, 0, REGION, 0, 0), ==, -ENOSPC);
    g_test_assert_expected_messages();
    g_assert_cmpuint(m.nregions, ==, 0);
    sealed = memfd_of(REGION, MFD_ALLOW_SEALING);
    g_assert_cmpint(fcntl(sealed, F_ADD_SEALS, F_SEAL_SHRINK), ==, 0);
    g_assert_cmpint(guest_mem_map_fd(&m, sealed, 0, REGION, 0, 0), ==, 0);
    guest_mem_guard_remove(g_array_index(handles, int, 0));
    fd = memfd_of(REGION, 0);
    g_assert_cmpint(guest_mem_map_fd(&m, fd, 0x100000, REGION, 0x100000, 0), ==, 0);
    g_assert_cmpint(m.r[1].guard, ==, g_array_index(handles, int, 0));
    guest_mem_clear(&m);
    for (guint i = 1; i < handles->len; i++) {
        guest_mem_guard_remove(g_array_index(handles, int, i));
    }
    g_array_free(handles, TRUE);
}

static void test_unguarded_fault_still_kills(void)
{
    if (g_test_subprocess()) {
        int fd = memfd_of(REGION, 0);
        volatile uint8_t *p;

        g_assert_cmpint(guest_mem_guard_install(), ==, 0);
        p = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        g_assert_true(p != MAP_FAILED);
        g_assert_cmpint(ftruncate(fd, 0), ==, 0);
        (void)p[0];
        g_print("survived\n");
        return;
    }
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_failed();
    g_test_trap_assert_stdout_unmatched("*survived*");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/guest-mem-guard/truncated-region-costs-the-connection-only",
                    test_truncated_region_costs_the_connection_only);
    g_test_add_func("/guest-mem-guard/memfd-sealed-against-shrinking-is-not-guarded",
                    test_memfd_sealed_against_shrinking_is_not_guarded);
    g_test_add_func("/guest-mem-guard/full-guard-refuses-unguardable-region",
                    test_full_guard_refuses_unguardable_region);
    g_test_add_func("/guest-mem-guard/unguarded-fault-still-kills",
                    test_unguarded_fault_still_kills);
    return g_test_run();
}
