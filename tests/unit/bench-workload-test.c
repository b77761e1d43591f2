/*
 * Specification of the commands the bench sends (hw/bench/bench-workload.c):
 *  - READ(16)/WRITE(16) carry the LBA and block count big-endian, data in
 *    for a read, out for a write, of blocks x block size;
 *  - the hostile commands, taken in turn, cover at most 1M blocks from
 *    LBA 0: WRITE SAME of a block, WRITE SAME UNMAP without data, UNMAP,
 *    then a READ and a WRITE of the I/O size;
 *  - UNMAP and PERSISTENT RESERVE OUT carry their 24-byte parameter lists;
 *  - the verify pattern depends on the byte address only, and a check
 *    names the first byte that differs.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include <glib.h>

#include "bench-workload.h"

static uint64_t be(const uint8_t *p, int n)
{
    uint64_t v = 0;

    for (int i = 0; i < n; i++) {
        v = v << 8 | p[i];
    }
    return v;
}

static void test_read_write(void)
{
    uint8_t data[4096];
    struct vfe_req req = { .data = data };

    bench_build_rw(&req, 0x123456789aull, 8, 512, false);
    g_assert_cmphex(req.cdb[0], ==, 0x88);              /* READ(16) */
    g_assert_cmphex(be(&req.cdb[2], 8), ==, 0x123456789aull);
    g_assert_cmpuint(be(&req.cdb[10], 4), ==, 8);
    g_assert_true(req.data_in);
    g_assert_cmpuint(req.data_len, ==, 4096);
    bench_build_rw(&req, 7, 1, 4096, true);
    g_assert_cmphex(req.cdb[0], ==, 0x8a);              /* WRITE(16) */
    g_assert_false(req.data_in);
    g_assert_cmpuint(req.data_len, ==, 4096);
}

static void test_hostile_in_turn(void)
{
    uint8_t data[4096];
    struct vfe_req req = { .data = data };
    uint64_t lun_blocks = 4ull << 20;       /* more than one command takes */

    bench_build_hostile(&req, 0, lun_blocks, 8, 512);
    g_assert_cmphex(req.cdb[0], ==, 0x93);              /* WRITE SAME(16) */
    g_assert_cmphex(req.cdb[1], ==, 0);
    g_assert_cmpuint(be(&req.cdb[10], 4), ==, BENCH_HOSTILE_MAX_BLOCKS);
    g_assert_cmpuint(req.data_len, ==, 512);
    bench_build_hostile(&req, 1, lun_blocks, 8, 512);
    g_assert_cmphex(req.cdb[1], ==, 0x09);              /* UNMAP, NDOB */
    g_assert_cmpuint(req.data_len, ==, 0);
    bench_build_hostile(&req, 2, 1000, 8, 512);
    g_assert_cmphex(req.cdb[0], ==, 0x42);              /* UNMAP of the whole small LUN */
    g_assert_cmpuint(be(data + 8, 8), ==, 0);
    g_assert_cmpuint(be(data + 16, 4), ==, 1000);
    bench_build_hostile(&req, 3, lun_blocks, 8, 512);
    g_assert_cmphex(req.cdb[0], ==, 0x88);
    g_assert_cmpuint(be(&req.cdb[10], 4), ==, 8);
    bench_build_hostile(&req, 4, lun_blocks, 8, 512);
    g_assert_cmphex(req.cdb[0], ==, 0x8a);
}

static void test_parameter_lists(void)
{
    uint8_t data[64];
    struct vfe_req req = { .data = data };

    bench_build_unmap(&req, 0x1000, 16);
    g_assert_cmpuint(be(&req.cdb[7], 2), ==, 24);       /* parameter list length */
    g_assert_cmpuint(be(data, 2), ==, 22);
    g_assert_cmpuint(be(data + 2, 2), ==, 16);
    g_assert_cmpuint(be(data + 8, 8), ==, 0x1000);
    g_assert_cmpuint(be(data + 16, 4), ==, 16);
    g_assert_cmpuint(req.data_len, ==, 24);
    g_assert_false(req.data_in);

    bench_build_aptpl(&req, 0xabcdef);
    g_assert_cmphex(req.cdb[0], ==, 0x5f);              /* PERSISTENT RESERVE OUT */
    g_assert_cmphex(req.cdb[1], ==, 0x06);              /* REGISTER AND IGNORE EXISTING KEY */
    g_assert_cmpuint(be(&req.cdb[5], 4), ==, 24);
    g_assert_cmphex(be(data, 8), ==, 0);                /* reservation key: ignored */
    g_assert_cmphex(be(data + 8, 8), ==, 0xabcdef);     /* the new key */
    g_assert_cmphex(data[20], ==, 0x01);                /* APTPL */
}

static void test_pattern(void)
{
    uint8_t a[1024], b[512];

    bench_pattern_fill(a, 4096, sizeof(a));
    /* the second half of a is the pattern of the byte address it stands for */
    bench_pattern_fill(b, 4096 + 512, sizeof(b));
    g_assert_cmpmem(a + 512, 512, b, 512);
    g_assert_cmpuint(bench_pattern_check(a, 4096, sizeof(a)), ==, 0);
    a[100] ^= 1;
    g_assert_cmpuint(bench_pattern_check(a, 4096, sizeof(a)), ==, 4096 + 96 + 1);
    g_assert_cmpuint(bench_pattern_check(b, 4096, sizeof(b)), ==, 4096 + 1);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/bench-workload/read-write", test_read_write);
    g_test_add_func("/bench-workload/hostile-in-turn", test_hostile_in_turn);
    g_test_add_func("/bench-workload/parameter-lists", test_parameter_lists);
    g_test_add_func("/bench-workload/pattern", test_pattern);
    return g_test_run();
}
