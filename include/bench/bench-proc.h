/*
 * What the back-end process costs (vhost-scsi-bench --pid): its CPU time
 * and context switches, summed over its threads, read from /proc before
 * and after a run.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_BENCH_PROC_H
#define VHOST_SCSI_BENCH_PROC_H

#include <stdbool.h>
#include <stdint.h>

struct bench_proc_sample {
    uint64_t utime, stime;      /* clock ticks, all threads */
    uint64_t vcsw, nvcsw;       /* summed over /proc/PID/task/ */
    bool ok;                    /* false: no pid, or it could not be read */
};

/* Samples pid (<= 0: none, s->ok false). */
void bench_proc_sample(int pid, struct bench_proc_sample *s);

#endif
