/*
 * Specification of the bench's latency statistics (hw/bench/bench-stats.c):
 *  - below 16 every value is exact; above, a percentile is the upper
 *    bound of the value's bucket (one sixteenth of its power of two), so
 *    it never understates and overstates by less than 1/16;
 *  - a percentile is the smallest value at or below which that share of
 *    the values lies (the nearest-rank definition), and never above the
 *    largest value added;
 *  - an empty histogram reports 0.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>

#include "bench-stats.h"

static void test_small_values_are_exact(void)
{
    struct bench_hist h = { 0 };

    /* 1..10: the median is 5, the 90th percentile 9, the 100th the maximum */
    for (uint64_t v = 1; v <= 10; v++) {
        bench_hist_add(&h, v);
    }
    g_assert_cmpuint(h.total, ==, 10);
    g_assert_cmpuint(bench_hist_pct(&h, 50), ==, 5);
    g_assert_cmpuint(bench_hist_pct(&h, 90), ==, 9);
    g_assert_cmpuint(bench_hist_pct(&h, 91), ==, 10);
    g_assert_cmpuint(bench_hist_pct(&h, 100), ==, 10);
    g_assert_cmpuint(bench_hist_pct(&h, 0.001), ==, 1);
}

static void test_large_values_round_up_within_a_sixteenth(void)
{
    struct bench_hist h = { 0 };

    /* 99 I/Os of 100 us and one of 5 ms, in ns */
    for (int i = 0; i < 99; i++) {
        bench_hist_add(&h, 100000);
    }
    bench_hist_add(&h, 5000000);
    uint64_t p50 = bench_hist_pct(&h, 50), p99 = bench_hist_pct(&h, 99);

    g_assert_cmpuint(p50, ==, p99);
    g_assert_cmpuint(p50, >=, 100000);
    g_assert_cmpuint(p50, <, 100000 + 100000 / 16);
    /* the one slow I/O is the 99.9th percentile and the maximum, exactly */
    g_assert_cmpuint(bench_hist_pct(&h, 99.9), ==, 5000000);
    g_assert_cmpuint(h.max, ==, 5000000);
}

static void test_percentile_never_exceeds_the_maximum(void)
{
    struct bench_hist h = { 0 };

    /* 1000 is in a bucket whose upper bound is above it */
    bench_hist_add(&h, 1000);
    g_assert_cmpuint(bench_hist_pct(&h, 50), ==, 1000);
    g_assert_cmpuint(bench_hist_pct(&h, 100), ==, 1000);
}

static void test_every_power_of_two_is_bounded(void)
{
    for (unsigned e = 4; e < 64; e++) {
        struct bench_hist h = { 0 };
        uint64_t v = (1ull << e) + 1;

        bench_hist_add(&h, v);
        bench_hist_add(&h, UINT64_MAX);
        uint64_t p = bench_hist_pct(&h, 50);

        if (p < v || p - v >= v / 16) {
            g_error("value %" G_GUINT64_FORMAT " reported as %" G_GUINT64_FORMAT, v, p);
        }
    }
}

static void test_empty_is_zero(void)
{
    struct bench_hist h = { 0 };

    g_assert_cmpuint(bench_hist_pct(&h, 50), ==, 0);
    g_assert_cmpuint(bench_hist_pct(&h, 99.9), ==, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/bench-stats/small-values-are-exact", test_small_values_are_exact);
    g_test_add_func("/bench-stats/large-values-round-up-within-a-sixteenth",
                    test_large_values_round_up_within_a_sixteenth);
    g_test_add_func("/bench-stats/percentile-never-exceeds-the-maximum",
                    test_percentile_never_exceeds_the_maximum);
    g_test_add_func("/bench-stats/every-power-of-two-is-bounded", test_every_power_of_two_is_bounded);
    g_test_add_func("/bench-stats/empty-is-zero", test_empty_is_zero);
    return g_test_run();
}
