/*
 * The latency histogram (include/bench/bench-stats.h).  A value below 16
 * has a bucket of its own; above, a bucket is one sixteenth of the power
 * of two the value falls in, so adding is a count-leading-zeros and a
 * shift, cheap enough to do once per I/O.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "bench-stats.h"

static unsigned bucket_of(uint64_t v)
{
    if (v < BENCH_HIST_SUB) {
        return (unsigned)v;
    }
    unsigned e = 63 - (unsigned)__builtin_clzll(v);     /* e >= BENCH_HIST_SUB_BITS */
    unsigned m = (unsigned)(v >> (e - BENCH_HIST_SUB_BITS)) & (BENCH_HIST_SUB - 1);

    return (e - BENCH_HIST_SUB_BITS + 1) * BENCH_HIST_SUB + m;
}

/* Upper bound of bucket b. */
static uint64_t bucket_high(unsigned b)
{
    if (b < BENCH_HIST_SUB) {
        return b;
    }
    unsigned e = b / BENCH_HIST_SUB + BENCH_HIST_SUB_BITS - 1;
    uint64_t m = b % BENCH_HIST_SUB;
    uint64_t low = (1ull << e) | (m << (e - BENCH_HIST_SUB_BITS));

    return low + (1ull << (e - BENCH_HIST_SUB_BITS)) - 1;
}

void bench_hist_add(struct bench_hist *h, uint64_t v)
{
    h->count[bucket_of(v)]++;
    h->total++;
    if (v > h->max) {
        h->max = v;
    }
}

uint64_t bench_hist_pct(const struct bench_hist *h, double pct)
{
    if (!h->total) {
        return 0;
    }
    uint64_t want = (uint64_t)(pct / 100.0 * (double)h->total + 0.999999);
    uint64_t seen = 0;

    want = want ? want : 1;
    for (unsigned b = 0; b < BENCH_HIST_BUCKETS; b++) {
        seen += h->count[b];
        if (seen >= want) {
            uint64_t hi = bucket_high(b);

            return hi < h->max ? hi : h->max;
        }
    }
    return h->max;
}
