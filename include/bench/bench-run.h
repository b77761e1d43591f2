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

/*
 * Runs o, checked by bench_opts_check().  *have_result says whether the
 * run got as far as its figures (*res); false with a BENCH_ERROR if
 * anything failed, a command, a verify mismatch or the device, even
 * when the figures are there.
 */
bool bench_run(const struct bench_opts *o, const struct bench_hooks *h, struct bench_result *res,
               bool *have_result, GError **err);

#endif
