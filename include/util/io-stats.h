/*
 * I/O statistics that the data path keeps without a lock or a locked
 * instruction: counts of commands, bytes and errors and a latency
 * histogram per class (read, write, other), in slots that each have one
 * writer — an I/O thread, named by its iothread id — and that any thread
 * may read at any time.  A reader sums the slots into a snapshot; two
 * snapshots subtract into the figures for the time between them, and a
 * snapshot's histogram gives quantiles.  The histogram is log-linear
 * (HdrHistogram's idea at three significant bits): exact below 16 ns, then
 * eight buckets per power of two, so a quantile is within 12.5% of the
 * true value from nanoseconds to a minute, in a fixed 2 KiB per class.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_IO_STATS_H
#define VHOST_SCSI_IO_STATS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum io_class { IO_READ, IO_WRITE, IO_OTHER, IO_CLASSES };

/* Buckets 0..15 hold 0..15 ns; then 8 per power of two up to 2^36 ns (68 s). */
#define LAT_HIST_LINEAR   16u
#define LAT_HIST_SUB      8u
#define LAT_HIST_MAX_EXP  36u
#define LAT_HIST_BUCKETS  (LAT_HIST_LINEAR + (LAT_HIST_MAX_EXP - 3u) * LAT_HIST_SUB)

/* The bucket a latency of ns falls in; longer than the range: the last one. */
unsigned lat_hist_bucket(uint64_t ns);
/* The largest latency bucket b holds (inclusive); UINT64_MAX for the last. */
uint64_t lat_hist_bucket_max(unsigned b);
/*
 * The latency at quantile q (0 < q <= 1) of hist's total observations:
 * the upper bound of the bucket holding the ceil(q * total)-th smallest,
 * so never below the true value; 0 when hist is empty.
 */
uint64_t lat_hist_quantile(const uint64_t hist[LAT_HIST_BUCKETS], double q);

/* One class's figures, summed (a snapshot) or kept by one writer (a slot). */
struct io_class_counts {
    uint64_t ops;
    uint64_t bytes;
    uint64_t errors;
    uint64_t lat_ns_sum;
    uint64_t hist[LAT_HIST_BUCKETS];
};

struct io_stats_snapshot {
    struct io_class_counts c[IO_CLASSES];
};

/*
 * Slot 0 is shared (commands run without an I/O thread, or on one whose
 * id is past the last slot) and updated with atomic additions; slots
 * 1..IO_STATS_SLOTS-1 belong to the I/O thread with that id and are
 * updated with plain relaxed stores.  So figures are exact as long as no
 * two threads with the same id run commands on one object at once, which
 * the daemon ensures by numbering its I/O threads 1..N.
 */
#define IO_STATS_SLOTS 65u

struct io_stats_slot;

struct io_stats {
    /* Allocated by the slot's writer on its first command, freed with the stats. */
    struct io_stats_slot *_Atomic slot[IO_STATS_SLOTS];
};

void io_stats_init(struct io_stats *s);
void io_stats_destroy(struct io_stats *s);
/* Counts one command that took lat_ns, moved bytes and failed or not. */
void io_stats_add(struct io_stats *s, unsigned thread_id, enum io_class c, uint64_t bytes,
                  bool error, uint64_t lat_ns);
/* Adds what s holds now to out (so several objects sum into one snapshot). */
void io_stats_read(const struct io_stats *s, struct io_stats_snapshot *out);
/* out = now - then, class by class and bucket by bucket. */
void io_stats_diff(const struct io_stats_snapshot *now, const struct io_stats_snapshot *then,
                   struct io_stats_snapshot *out);

/* CLOCK_MONOTONIC in nanoseconds (vDSO: no system call). */
uint64_t io_stats_now_ns(void);

#endif
