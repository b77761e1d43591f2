/*
 * One vhost-scsi-bench run: the front-end opened on the device the
 * options name, the LUN prepared, the requests kept in flight at the
 * queue depth (or paced by --rate) until the time, the I/O count or a
 * signal ends it, and the figures gathered for the report
 * (bench-report.h).  --verify writes the pattern and reads it back;
 * --idle issues nothing and measures what an attached front-end costs.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_BENCH_RUN_H
#define VHOST_SCSI_BENCH_RUN_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include <glib.h>

#include "bench-options.h"
#include "bench-report.h"

/* Once a second: the seconds since the start, the last second's IOPS, the I/Os done. */
typedef void (*bench_progress_fn)(uint64_t secs, double iops, uint64_t done, void *opaque);

struct bench_hooks {
    volatile sig_atomic_t *stop;    /* non-zero (a signal handler's word): end the run now */
    bench_progress_fn progress;     /* NULL: none */
    void *opaque;
};

struct bench;

/*
 * Connects to the device o names (o checked by bench_opts_check(), and
 * outliving the bench), prepares the LUN and the requests; NULL with a
 * BENCH_ERROR if any of it fails.
 */
struct bench *bench_open(const struct bench_opts *o, GError **err);

/*
 * Runs the I/O (or --idle).  *have_result says whether the run got as far
 * as its figures (*res); false with a BENCH_ERROR if anything failed, a
 * command, a verify mismatch or the device, even when the figures are
 * there.  A run that gave up on requests in flight leaves them to
 * bench_close().
 */
bool bench_run(struct bench *b, const struct bench_hooks *h, struct bench_result *res,
               bool *have_result, GError **err);

/* Stops the queues, which waits for requests still in flight, and frees b (NULL: nothing). */
void bench_close(struct bench *b);

#endif
