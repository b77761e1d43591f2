/*
 * Specification of the guest memory table (hw/virtio/guest-mem.c): which
 * regions it accepts, how it translates guest physical and front-end
 * virtual addresses, and that no address arithmetic can overflow or step
 * outside a region.  Regions are plain host buffers (mmap_base NULL) except
 * where the mmap path itself is under test.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <glib.h>

#include "guest-mem.h"

static struct guest_mem_region region(uint64_t gpa, uint64_t size, uint64_t uva, void *host)
{
    return (struct guest_mem_region){
        .gpa = gpa, .size = size, .uva = uva, .host = host, .fd = -1,
    };
}

/* Adds a region that must be rejected; the rejection is logged. */
static int add_rejected(struct guest_mem *m, struct guest_mem_region r)
{
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "guest memory:*");
    int ret = guest_mem_add(m, &r);
    g_test_assert_expected_messages();
    return ret;
}

static void test_translate_inside_one_region(void)
{
    static uint8_t buf[4096];
    struct guest_mem m;
    struct guest_mem_region r = region(0x100000, sizeof(buf), 0x7f0000000000, buf);

    guest_mem_init(&m);
    g_assert_cmpint(guest_mem_add(&m, &r), ==, 0);
    g_assert_cmpuint(m.nregions, ==, 1);

    g_assert_true(guest_mem_gpa_ptr(&m, 0x100000, 4096) == buf);
    g_assert_true(guest_mem_gpa_ptr(&m, 0x100010, 16) == buf + 0x10);
    /* The last byte, and a zero-length lookup there, are inside. */
    g_assert_true(guest_mem_gpa_ptr(&m, 0x100fff, 1) == buf + 0xfff);
    g_assert_true(guest_mem_gpa_ptr(&m, 0x100fff, 0) == buf + 0xfff);
    /* One byte past the end, or just before the start, is not. */
    g_assert_null(guest_mem_gpa_ptr(&m, 0x100fff, 2));
    g_assert_null(guest_mem_gpa_ptr(&m, 0x101000, 0));
    g_assert_null(guest_mem_gpa_ptr(&m, 0xfffff, 1));
    g_assert_null(guest_mem_gpa_ptr(&m, 0x100000, 4097));
    /* A huge length must not wrap around into "fits". */
    g_assert_null(guest_mem_gpa_ptr(&m, 0x100010, UINT64_MAX));

    g_assert_true(guest_mem_uva_ptr(&m, 0x7f0000000000, 4096) == buf);
    g_assert_true(guest_mem_uva_ptr(&m, 0x7f0000000ffe, 2) == buf + 0xffe);
    g_assert_null(guest_mem_uva_ptr(&m, 0x7f0000000ffe, 3));
    g_assert_null(guest_mem_uva_ptr(&m, 0x100000, 1));
    guest_mem_clear(&m);
    g_assert_cmpuint(m.nregions, ==, 0);
    g_assert_null(guest_mem_gpa_ptr(&m, 0x100000, 1));
}

static void test_reject_zero_size_and_wrap(void)
{
    static uint8_t buf[4096];
    struct guest_mem m;

    guest_mem_init(&m);
    g_assert_cmpint(add_rejected(&m, region(0x1000, 0, 0x1000, buf)), ==, -EINVAL);
    /* The last byte would be past 2^64 - 1, in GPA or in UVA. */
    g_assert_cmpint(add_rejected(&m, region(UINT64_MAX - 0xffe, 0x1000, 0x1000, buf)), ==,
                    -EINVAL);
    g_assert_cmpint(add_rejected(&m, region(0x1000, 0x1000, UINT64_MAX, buf)), ==, -EINVAL);
    g_assert_cmpint(add_rejected(&m, region(0x1000, 0x1000, 0x1000, NULL)), ==, -EINVAL);
    g_assert_cmpuint(m.nregions, ==, 0);

    /* A region ending exactly at 2^64 - 1 is fine, and lookups there do not wrap. */
    g_assert_cmpint(guest_mem_add(&m, &(struct guest_mem_region){
        .gpa = UINT64_MAX - 0xfff, .size = 0x1000, .uva = 0x1000, .host = buf, .fd = -1,
    }), ==, 0);
    g_assert_true(guest_mem_gpa_ptr(&m, UINT64_MAX, 1) == buf + 0xfff);
    g_assert_null(guest_mem_gpa_ptr(&m, UINT64_MAX, 2));
    guest_mem_clear(&m);
}

static void test_reject_overlap(void)
{
    static uint8_t a[0x2000], b[0x2000];
    struct guest_mem m;
    struct guest_mem_region r = region(0x10000, 0x2000, 0x50000, a);

    guest_mem_init(&m);
    g_assert_cmpint(guest_mem_add(&m, &r), ==, 0);

    /* GPA overlap: same, contained, straddling either end, containing. */
    g_assert_cmpint(add_rejected(&m, region(0x10000, 0x2000, 0x90000, b)), ==, -EINVAL);
    g_assert_cmpint(add_rejected(&m, region(0x11000, 0x100, 0x90000, b)), ==, -EINVAL);
    g_assert_cmpint(add_rejected(&m, region(0xf000, 0x1001, 0x90000, b)), ==, -EINVAL);
    g_assert_cmpint(add_rejected(&m, region(0x11fff, 0x2000, 0x90000, b)), ==, -EINVAL);
    g_assert_cmpint(add_rejected(&m, region(0x0, 0x100000, 0x90000, b)), ==, -EINVAL);
    /* UVA overlap with distinct GPAs is rejected too. */
    g_assert_cmpint(add_rejected(&m, region(0x40000, 0x2000, 0x51fff, b)), ==, -EINVAL);
    g_assert_cmpuint(m.nregions, ==, 1);

    /* Touching but not overlapping (both ends) is accepted. */
    r = region(0x12000, 0x1000, 0x52000, b);
    g_assert_cmpint(guest_mem_add(&m, &r), ==, 0);
    r = region(0xf000, 0x1000, 0x4f000, b + 0x1000);
    g_assert_cmpint(guest_mem_add(&m, &r), ==, 0);
    g_assert_cmpuint(m.nregions, ==, 3);
    guest_mem_clear(&m);
}

static void test_table_full(void)
{
    static uint8_t buf[GUEST_MEM_MAX_REGIONS + 1][64];
    struct guest_mem m;

    guest_mem_init(&m);
    for (unsigned i = 0; i < GUEST_MEM_MAX_REGIONS; i++) {
        struct guest_mem_region r = region(i * 0x1000, 64, i * 0x1000, buf[i]);
        g_assert_cmpint(guest_mem_add(&m, &r), ==, 0);
    }
    g_assert_cmpint(add_rejected(&m, region(0x100000, 64, 0x100000,
                                            buf[GUEST_MEM_MAX_REGIONS])), ==, -ENOSPC);
    g_assert_cmpuint(m.nregions, ==, GUEST_MEM_MAX_REGIONS);
    guest_mem_clear(&m);
}

static bool fd_is_open(int fd)
{
    return fcntl(fd, F_GETFD) >= 0;
}

static void test_rejected_region_fd_is_closed(void)
{
    static uint8_t buf[64];
    struct guest_mem m;
    int fd = memfd_create("gm-test", MFD_CLOEXEC);
    struct guest_mem_region r = region(0, 0, 0, buf);

    g_assert_cmpint(fd, >=, 0);
    r.fd = fd;
    guest_mem_init(&m);
    g_assert_cmpint(add_rejected(&m, r), ==, -EINVAL);
    g_assert_false(fd_is_open(fd));
}

/* The mapping honours mmap_offset: host points at that offset of the fd. */
static void test_map_fd_with_offset(void)
{
    struct guest_mem m;
    int fd = memfd_create("gm-test", MFD_CLOEXEC);
    const char msg[] = "at offset 8192";
    char *p;

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, 0x4000), ==, 0);
    g_assert_cmpint(pwrite(fd, msg, sizeof(msg), 0x2000), ==, sizeof(msg));

    guest_mem_init(&m);
    /* The table takes ownership of the fd it is given: hand it a duplicate. */
    g_assert_cmpint(guest_mem_map_fd(&m, dup(fd), 0x80000000, 0x2000, 0x7000000, 0x2000), ==,
                    0);
    g_assert_cmpuint(m.nregions, ==, 1);
    g_assert_nonnull(m.r[0].mmap_base);

    p = guest_mem_gpa_ptr(&m, 0x80000000, sizeof(msg));
    g_assert_nonnull(p);
    g_assert_cmpstr(p, ==, msg);
    /* Writes through the mapping reach the shared file. */
    p[0] = 'A';
    char c = 0;
    g_assert_cmpint(pread(fd, &c, 1, 0x2000), ==, 1);
    g_assert_cmpint(c, ==, 'A');
    g_assert_null(guest_mem_gpa_ptr(&m, 0x80002000, 1));

    g_assert_cmpint(guest_mem_remove(&m, 0x80000000, 0x2000), ==, 0);
    g_assert_cmpuint(m.nregions, ==, 0);
    close(fd);
}

static void test_map_fd_errors(void)
{
    struct guest_mem m;
    int fd = memfd_create("gm-test", MFD_CLOEXEC);

    guest_mem_init(&m);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "guest memory:*");
    g_assert_cmpint(guest_mem_map_fd(&m, fd, 0, 0x1000, 0, UINT64_MAX - 0x10), ==, -EINVAL);
    g_test_assert_expected_messages();
    g_assert_false(fd_is_open(fd));

    /* A file shorter than offset + size would SIGBUS on access: refused. */
    fd = memfd_create("gm-test", MFD_CLOEXEC);
    g_assert_cmpint(ftruncate(fd, 0x2000), ==, 0);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "guest memory: fd*holds 0x2000*");
    g_assert_cmpint(guest_mem_map_fd(&m, fd, 0, 0x2000, 0, 0x1000), ==, -EINVAL);
    g_test_assert_expected_messages();
    g_assert_false(fd_is_open(fd));

    /*
     * Memory we may not write (a read-only fd, a write-sealed memfd) cannot
     * hold a used ring or device-writable buffers: refused at mapping, so
     * no ring can ever be set up in it.
     */
    fd = memfd_create("gm-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    g_assert_cmpint(ftruncate(fd, 0x1000), ==, 0);
    g_assert_cmpint(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), ==, 0);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "guest memory: mmap*");
    g_assert_cmpint(guest_mem_map_fd(&m, fd, 0, 0x1000, 0, 0), <, 0);
    g_test_assert_expected_messages();
    g_assert_false(fd_is_open(fd));
    {
        char path[] = "/tmp/gm-test-ro-XXXXXX";
        int wfd = mkstemp(path);

        g_assert_cmpint(ftruncate(wfd, 0x1000), ==, 0);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        close(wfd);
        unlink(path);
        g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "guest memory: mmap*");
        g_assert_cmpint(guest_mem_map_fd(&m, fd, 0, 0x1000, 0, 0), ==, -EACCES);
        g_test_assert_expected_messages();
    }
    g_assert_cmpuint(m.nregions, ==, 0);

    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "guest memory: mmap*");
    g_assert_cmpint(guest_mem_map_fd(&m, 1000000, 0, 0x1000, 0, 0), ==, -EBADF);
    g_test_assert_expected_messages();
    g_assert_cmpuint(m.nregions, ==, 0);
}

static void test_remove_needs_exact_match(void)
{
    static uint8_t a[0x1000], b[0x1000], c[0x1000];
    struct guest_mem m;
    struct guest_mem_region r;

    guest_mem_init(&m);
    r = region(0x0, 0x1000, 0x0, a);
    g_assert_cmpint(guest_mem_add(&m, &r), ==, 0);
    r = region(0x1000, 0x1000, 0x1000, b);
    g_assert_cmpint(guest_mem_add(&m, &r), ==, 0);
    r = region(0x2000, 0x1000, 0x2000, c);
    g_assert_cmpint(guest_mem_add(&m, &r), ==, 0);

    g_assert_cmpint(guest_mem_remove(&m, 0x1000, 0x800), ==, -ENOENT);
    g_assert_cmpint(guest_mem_remove(&m, 0x1800, 0x800), ==, -ENOENT);
    g_assert_cmpint(guest_mem_remove(&m, 0x1000, 0x1000), ==, 0);
    g_assert_cmpuint(m.nregions, ==, 2);
    g_assert_null(guest_mem_gpa_ptr(&m, 0x1000, 1));
    /* The others still translate after the table was compacted. */
    g_assert_true(guest_mem_gpa_ptr(&m, 0x0, 1) == a);
    g_assert_true(guest_mem_gpa_ptr(&m, 0x2fff, 1) == c + 0xfff);
    g_assert_cmpint(guest_mem_remove(&m, 0x1000, 0x1000), ==, -ENOENT);
    guest_mem_clear(&m);
}

/* Guest RAM split around a hole: [0, 0x2000) and [0x2000, 0x3000), hole, [0x8000, ...). */
static void setup_split_ram(struct guest_mem *m, uint8_t *lo, uint8_t *hi, uint8_t *far)
{
    struct guest_mem_region r;

    guest_mem_init(m);
    r = region(0x0, 0x2000, 0x10000, lo);
    g_assert_cmpint(guest_mem_add(m, &r), ==, 0);
    r = region(0x2000, 0x1000, 0x40000, hi);
    g_assert_cmpint(guest_mem_add(m, &r), ==, 0);
    r = region(0x8000, 0x1000, 0x80000, far);
    g_assert_cmpint(guest_mem_add(m, &r), ==, 0);
}

static void test_gpa_iov(void)
{
    static uint8_t lo[0x2000], hi[0x1000], far[0x1000];
    struct guest_mem m;
    struct iovec iov[4];

    setup_split_ram(&m, lo, hi, far);

    g_assert_cmpint(guest_mem_gpa_iov(&m, 0x10, 0x100, iov, 4), ==, 1);
    g_assert_true(iov[0].iov_base == lo + 0x10);
    g_assert_cmpuint(iov[0].iov_len, ==, 0x100);

    /* Straddling the boundary of two adjacent regions: two pieces. */
    g_assert_cmpint(guest_mem_gpa_iov(&m, 0x1ff0, 0x20, iov, 4), ==, 2);
    g_assert_true(iov[0].iov_base == lo + 0x1ff0);
    g_assert_cmpuint(iov[0].iov_len, ==, 0x10);
    g_assert_true(iov[1].iov_base == hi);
    g_assert_cmpuint(iov[1].iov_len, ==, 0x10);

    /* Only one iovec available for a two-piece buffer. */
    g_assert_cmpint(guest_mem_gpa_iov(&m, 0x1ff0, 0x20, iov, 1), ==, -ENOBUFS);
    /* Running into the hole, starting in it, or wrapping the address space. */
    g_assert_cmpint(guest_mem_gpa_iov(&m, 0x2ff0, 0x20, iov, 4), ==, -EFAULT);
    g_assert_cmpint(guest_mem_gpa_iov(&m, 0x4000, 0x10, iov, 4), ==, -EFAULT);
    g_assert_cmpint(guest_mem_gpa_iov(&m, 0x10, UINT64_MAX, iov, 4), ==, -EFAULT);
    /* Zero length needs no iovec. */
    g_assert_cmpint(guest_mem_gpa_iov(&m, 0x4000, 0, iov, 4), ==, 0);
    /* A single-region lookup refuses what the iov split accepts. */
    g_assert_null(guest_mem_gpa_ptr(&m, 0x1ff0, 0x20));
    guest_mem_clear(&m);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/guest-mem/translate/inside-one-region", test_translate_inside_one_region);
    g_test_add_func("/guest-mem/add/rejects-zero-size-and-wrap", test_reject_zero_size_and_wrap);
    g_test_add_func("/guest-mem/add/rejects-overlap-in-gpa-and-uva", test_reject_overlap);
    g_test_add_func("/guest-mem/add/table-full", test_table_full);
    g_test_add_func("/guest-mem/add/rejected-region-fd-is-closed",
                    test_rejected_region_fd_is_closed);
    g_test_add_func("/guest-mem/map-fd/honours-mmap-offset", test_map_fd_with_offset);
    g_test_add_func("/guest-mem/map-fd/errors", test_map_fd_errors);
    g_test_add_func("/guest-mem/remove/exact-match-only", test_remove_needs_exact_match);
    g_test_add_func("/guest-mem/gpa-iov/splits-at-region-boundaries", test_gpa_iov);
    return g_test_run();
}
