/*
 * A bench run's figures (struct bench_result, filled by bench_run) and
 * their two forms: a few lines for people, or one JSON object per run for
 * scripts (scripts/bench.sh, scripts/bench-peer.sh read its members, so
 * their names and decimals stay as they are).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_BENCH_REPORT_H
#define VHOST_SCSI_BENCH_REPORT_H

#include <stdbool.h>
#include <stdint.h>

struct bench_result {
    bool idle;                      /* --idle: the fields marked (idle) instead of the I/O ones */
    const char *transport;          /* "vhost-user" or "vhost-kernel" */
    const char *rw;                 /* the mode's name, "verify" or "idle" */
    uint32_t bs;
    int iodepth;
    int64_t rate;
    int queues;
    bool packed, inflight, event_idx;   /* as negotiated, not as asked */
    double seconds;

    uint64_t ios, reads, writes;
    double iops, mb_per_s;
    double lat_us_p50, lat_us_p99, lat_us_p99_9, lat_us_max;
    double interrupts_per_io, kicks_per_io;
    uint64_t unit_attentions;       /* commands retried after one */
    bool verify;
    uint64_t verify_blocks, verify_errors;

    uint64_t interrupts;            /* (idle) */

    /* --pid, when both samples could be read */
    bool have_backend;
    int pid;
    double usr_us_per_io, sys_us_per_io, ctxsw_per_io;
    double cpu_cores, ctxsw_per_s;  /* (idle) */
};

/* The result as one line of JSON, with its newline (g_free). */
char *bench_report_json(const struct bench_result *r);

/* The result for people (g_free). */
char *bench_report_text(const struct bench_result *r);

#endif
