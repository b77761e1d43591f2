/*
 * Specification of the data path's I/O statistics (hw/util/io-stats.c):
 * the latency histogram's buckets and quantiles, and counters that stay
 * exact when several I/O threads count into one object at once.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>

#include "io-stats.h"

/* Buckets tile the line: each starts one past the previous one's end. */
static void test_buckets_tile(void)
{
    uint64_t lo = 0;

    for (unsigned b = 0; b + 1 < LAT_HIST_BUCKETS; b++) {
        uint64_t hi = lat_hist_bucket_max(b);

        g_assert_cmpuint(hi, >=, lo);
        g_assert_cmpuint(lat_hist_bucket(lo), ==, b);
        g_assert_cmpuint(lat_hist_bucket(hi), ==, b);
        lo = hi + 1;
    }
    g_assert_cmpuint(lat_hist_bucket(lo), ==, LAT_HIST_BUCKETS - 1);
    g_assert_cmpuint(lat_hist_bucket(UINT64_MAX), ==, LAT_HIST_BUCKETS - 1);
    g_assert_cmpuint(lat_hist_bucket_max(LAT_HIST_BUCKETS - 1), ==, UINT64_MAX);
}

/* Within the range a bucket is never wider than 1/8 of its lower edge. */
static void test_buckets_precise(void)
{
    for (unsigned b = LAT_HIST_LINEAR; b + 1 < LAT_HIST_BUCKETS; b++) {
        uint64_t lo = lat_hist_bucket_max(b - 1) + 1, hi = lat_hist_bucket_max(b);

        g_assert_cmpuint((hi - lo + 1) * 8, <=, lo);
    }
    for (uint64_t ns = 0; ns < LAT_HIST_LINEAR; ns++) {
        g_assert_cmpuint(lat_hist_bucket_max(lat_hist_bucket(ns)), ==, ns);
    }
    /* Powers of two open a bucket: Prometheus' le edges are exact. */
    for (unsigned e = 4; e <= LAT_HIST_MAX_EXP; e++) {
        unsigned b = lat_hist_bucket((uint64_t)1 << e);

        g_assert_cmpuint(lat_hist_bucket_max(b - 1), ==, ((uint64_t)1 << e) - 1);
    }
}

/* A quantile is the upper edge of the bucket of the ceil(q*n)-th value. */
static void test_quantiles(void)
{
    uint64_t hist[LAT_HIST_BUCKETS] = { 0 };

    g_assert_cmpuint(lat_hist_quantile(hist, 0.5), ==, 0);
    /* 1..1000 µs, one each. */
    for (uint64_t us = 1; us <= 1000; us++) {
        hist[lat_hist_bucket(us * 1000)]++;
    }
    static const struct { double q; uint64_t value; } want[] = {
        { 0.5, 500000 }, { 0.99, 990000 }, { 0.999, 999000 }, { 1.0, 1000000 }, { 0.001, 1000 },
    };
    for (unsigned i = 0; i < G_N_ELEMENTS(want); i++) {
        uint64_t got = lat_hist_quantile(hist, want[i].q);

        /* Never below the true value, at most one bucket (12.5%) above it. */
        g_assert_cmpuint(got, >=, want[i].value);
        g_assert_cmpuint(got, <=, want[i].value + want[i].value / 8);
        g_assert_cmpuint(got, ==, lat_hist_bucket_max(lat_hist_bucket(want[i].value)));
    }
}

struct counter_thread {
    struct io_stats *s;
    unsigned id;
    unsigned n;
};

static gpointer count_many(gpointer opaque)
{
    struct counter_thread *c = opaque;

    for (unsigned i = 0; i < c->n; i++) {
        io_stats_add(c->s, c->id, i % 2 ? IO_WRITE : IO_READ, 4096, i % 10 == 0,
                     1000 + i % 5000);
    }
    return NULL;
}

/*
 * Threads with distinct ids own their slots; threads with id 0 (or past
 * the last slot) share one with atomic additions.  Nothing is lost either
 * way.
 */
static void test_threads_exact(void)
{
    enum { N = 200000 };
    static const unsigned ids[] = { 1, 2, 3, 0, 0, IO_STATS_SLOTS + 7 };
    struct io_stats s;
    struct counter_thread c[G_N_ELEMENTS(ids)];
    GThread *t[G_N_ELEMENTS(ids)];
    struct io_stats_snapshot snap = { 0 };
    uint64_t hist_total = 0, lat_sum = 0;

    io_stats_init(&s);
    for (unsigned i = 0; i < G_N_ELEMENTS(ids); i++) {
        c[i] = (struct counter_thread){ &s, ids[i], N };
        t[i] = g_thread_new("count", count_many, &c[i]);
    }
    for (unsigned i = 0; i < G_N_ELEMENTS(ids); i++) {
        g_thread_join(t[i]);
    }
    io_stats_read(&s, &snap);
    g_assert_cmpuint(snap.c[IO_READ].ops, ==, G_N_ELEMENTS(ids) * N / 2);
    g_assert_cmpuint(snap.c[IO_WRITE].ops, ==, G_N_ELEMENTS(ids) * N / 2);
    g_assert_cmpuint(snap.c[IO_OTHER].ops, ==, 0);
    g_assert_cmpuint(snap.c[IO_READ].bytes, ==, (uint64_t)G_N_ELEMENTS(ids) * N / 2 * 4096);
    g_assert_cmpuint(snap.c[IO_READ].errors, ==, G_N_ELEMENTS(ids) * N / 10);
    g_assert_cmpuint(snap.c[IO_WRITE].errors, ==, 0);
    for (unsigned i = 0; i < N; i++) {
        lat_sum += 1000 + i % 5000;
    }
    for (unsigned b = 0; b < LAT_HIST_BUCKETS; b++) {
        hist_total += snap.c[IO_READ].hist[b] + snap.c[IO_WRITE].hist[b];
    }
    g_assert_cmpuint(hist_total, ==, G_N_ELEMENTS(ids) * N);
    g_assert_cmpuint(snap.c[IO_READ].lat_ns_sum + snap.c[IO_WRITE].lat_ns_sum, ==,
                     G_N_ELEMENTS(ids) * lat_sum);
    io_stats_destroy(&s);
}

/* Two snapshots subtract into what happened between them. */
static void test_interval(void)
{
    struct io_stats s;
    struct io_stats_snapshot a = { 0 }, b = { 0 }, d;

    io_stats_init(&s);
    io_stats_add(&s, 1, IO_READ, 512, false, 100);
    io_stats_read(&s, &a);
    io_stats_add(&s, 1, IO_READ, 1024, true, 5000);
    io_stats_add(&s, 2, IO_OTHER, 0, false, 7);
    io_stats_read(&s, &b);
    io_stats_diff(&b, &a, &d);
    g_assert_cmpuint(d.c[IO_READ].ops, ==, 1);
    g_assert_cmpuint(d.c[IO_READ].bytes, ==, 1024);
    g_assert_cmpuint(d.c[IO_READ].errors, ==, 1);
    g_assert_cmpuint(d.c[IO_READ].lat_ns_sum, ==, 5000);
    g_assert_cmpuint(d.c[IO_READ].hist[lat_hist_bucket(5000)], ==, 1);
    g_assert_cmpuint(d.c[IO_READ].hist[lat_hist_bucket(100)], ==, 0);
    g_assert_cmpuint(lat_hist_quantile(d.c[IO_READ].hist, 0.5), ==,
                     lat_hist_bucket_max(lat_hist_bucket(5000)));
    g_assert_cmpuint(d.c[IO_OTHER].ops, ==, 1);
    g_assert_cmpuint(d.c[IO_WRITE].ops, ==, 0);
    io_stats_destroy(&s);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/io-stats/histogram/buckets-tile-the-range", test_buckets_tile);
    g_test_add_func("/io-stats/histogram/buckets-within-an-eighth", test_buckets_precise);
    g_test_add_func("/io-stats/histogram/quantile-is-bucket-upper-edge", test_quantiles);
    g_test_add_func("/io-stats/counters/exact-with-concurrent-threads", test_threads_exact);
    g_test_add_func("/io-stats/counters/snapshots-subtract-into-interval", test_interval);
    return g_test_run();
}
