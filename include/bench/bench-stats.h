/*
 * The bench's latency statistics: a log-linear histogram (16 sub-buckets
 * per power of two, so any latency is kept to within 1/16 of itself in
 * constant memory and constant time per I/O) and its percentiles, which
 * round up to the bucket's upper bound: a reported percentile never
 * understates latency.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_BENCH_STATS_H
#define VHOST_SCSI_BENCH_STATS_H

#include <stdint.h>

#define BENCH_HIST_SUB_BITS 4
#define BENCH_HIST_SUB (1u << BENCH_HIST_SUB_BITS)
#define BENCH_HIST_BUCKETS (64 * BENCH_HIST_SUB)

/* Zero-initialised is empty. */
struct bench_hist {
    uint64_t count[BENCH_HIST_BUCKETS];
    uint64_t total;
    uint64_t max;
};

void bench_hist_add(struct bench_hist *h, uint64_t v);

/* The pct-th percentile (0 < pct <= 100) of what was added, at most the maximum; 0 if empty. */
uint64_t bench_hist_pct(const struct bench_hist *h, double pct);

#endif
