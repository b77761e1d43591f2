/*
 * What one vhost-scsi-bench run is asked to do: the options as the command
 * line gives them (struct bench_opts) and their check, which settles what
 * follows from them (the mode, the I/O size, the LUN, the ring size) and
 * refuses what cannot run, in the words the user sees.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_BENCH_OPTIONS_H
#define VHOST_SCSI_BENCH_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include <glib.h>

#define BENCH_ERROR (bench_error_quark())
GQuark bench_error_quark(void);

enum bench_error {
    BENCH_ERROR_USAGE,      /* the options cannot run (exit status 2) */
    BENCH_ERROR_FAILED,     /* the device, a command or the run failed */
};

/*
 * BENCH_RW_HOSTILE: the most expensive commands a guest can send, in turn:
 * WRITE SAME of a pattern and of zeros (UNMAP) over as much of the LUN as
 * the daemon takes in one command (1M blocks), an UNMAP of as much, and a
 * READ and a WRITE of --bs: the load of a hostile neighbour
 * (scripts/neighbour-bench.sh), not a figure of its own.  BENCH_RW_APTPL:
 * PERSISTENT RESERVE OUT, REGISTER AND IGNORE EXISTING KEY with APTPL on
 * and a new key each time (every one a change of the LUN's state file);
 * BENCH_RW_UNMAP: an UNMAP of --bs at a random place.  Loads of a
 * neighbour too.
 */
enum bench_rw {
    BENCH_RW_READ, BENCH_RW_WRITE, BENCH_RW_RANDREAD, BENCH_RW_RANDWRITE, BENCH_RW_RW,
    BENCH_RW_HOSTILE, BENCH_RW_APTPL, BENCH_RW_UNMAP,
};

/* --rw's word for mode. */
const char *bench_rw_name(enum bench_rw mode);

/*
 * The strings point into the caller's argv (or wherever it keeps them);
 * bench_opts_check() fills the fields below "settled", which own nothing
 * but wwpn (bench_opts_clear).
 */
struct bench_opts {
    const char *socket;
    const char *kernel;         /* WWPN[,TPGT] */
    const char *rw;
    const char *bs_str;
    const char *lun_str;
    int iodepth;
    int queues;
    int first_queue;
    int time_s;
    gint64 ios;
    gint64 rate;                /* I/Os per second at most (0: as fast as it goes) */
    int pid;
    bool json;
    bool verify;
    bool quiet;
    bool no_event_idx;
    bool indirect;
    bool poll;
    bool packed;
    bool inflight;
    bool dirty_log;
    bool idle;
    bool flush_first;
    int queue_size;             /* 0: chosen by the check */
    int rwmix;                  /* read percentage for --rw rw */

    /* settled by bench_opts_check() */
    enum bench_rw mode;
    uint32_t bs;
    unsigned target, lun;
    char *wwpn;                 /* --kernel's WWPN */
    unsigned tpgt;
};

/* The defaults a command line starts from. */
void bench_opts_init(struct bench_opts *o);

/* Checks o and settles what follows from it; false with a BENCH_ERROR_USAGE if it cannot run. */
bool bench_opts_check(struct bench_opts *o, GError **err);

void bench_opts_clear(struct bench_opts *o);

#endif
