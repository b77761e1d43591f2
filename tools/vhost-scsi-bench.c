/*
 * vhost-scsi-bench: a load generator that plays the guest.  It drives a
 * vhost-scsi back-end (our vhost-user target or the kernel's
 * /dev/vhost-scsi) directly through the front-end library, so the numbers
 * measure the back-end and the virtqueue path without a VM in between:
 * IOPS, bandwidth, latency percentiles, interrupts and kicks per I/O and,
 * with --pid, the back-end's CPU time and context switches per I/O, over
 * split rings or (--packed) packed ones.  --verify writes a pattern and
 * reads it back, as a smoke test.  This file is the command line; the
 * run and its report are the bench layer's (hw/bench/).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <glib.h>

#include "bench-options.h"
#include "bench-report.h"
#include "bench-run.h"

#define EXIT_USAGE 2

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    interrupted = 1;
}

/*
 * The options, as getopt_long's table and the --help text both come from
 * (the same style as vhost-scsi-target and vhost-scsi-ctl, so --help, the
 * errors and the bash completion agree).
 */
enum {
    OPT_SOCKET = 256, OPT_KERNEL, OPT_RW, OPT_RWMIX, OPT_BS, OPT_IODEPTH, OPT_QUEUES,
    OPT_FIRST_QUEUE, OPT_TIME, OPT_IOS, OPT_LUN, OPT_PID, OPT_JSON, OPT_VERIFY, OPT_NO_EVENT_IDX,
    OPT_INDIRECT, OPT_POLL, OPT_QUEUE_SIZE, OPT_DIRTY_LOG, OPT_IDLE,
    OPT_FLUSH_FIRST, OPT_PACKED, OPT_RATE, OPT_INFLIGHT, OPT_VERSION,
};

static const struct bench_option {
    const char *name;
    int id;             /* getopt_long's val: OPT_* or the short option */
    const char *arg;    /* the value's name in --help; NULL: takes none */
    const char *help;
} bench_options[] = {
    { "socket", OPT_SOCKET, "PATH", "vhost-user socket" },
    { "kernel", OPT_KERNEL, "WWPN[,TPGT]", "kernel /dev/vhost-scsi target (TPGT 1)" },
    { "rw", OPT_RW, "MODE", "read|write|randread|randwrite|rw|hostile|aptpl|unmap (default randread; "
      "hostile: WRITE SAME, UNMAP of up to 1M blocks and --bs READ/WRITE in turn; aptpl: "
      "PR OUT REGISTER AND IGNORE EXISTING KEY, APTPL on, a new key each; unmap: UNMAP of "
      "--bs at random)" },
    { "rwmixread", OPT_RWMIX, "PCT", "read % for --rw rw (50)" },
    { "bs", OPT_BS, "SIZE", "block size, e.g. 4k (default 4k)" },
    { "iodepth", OPT_IODEPTH, "N", "requests in flight per queue (16)" },
    { "queues", OPT_QUEUES, "N", "request queues (1)" },
    { "first-queue", OPT_FIRST_QUEUE, "N", "use request queues N..N+queues-1 only (several "
      "bench processes on one target, one queue each)" },
    { "time", OPT_TIME, "SECS", "run time in seconds (10)" },
    { "ios", OPT_IOS, "N", "stop after N I/Os" },
    { "rate", OPT_RATE, "IOPS", "issue at most IOPS I/Os per second, evenly spaced: what the "
      "back-end (--pid) costs at a given load" },
    { "lun", OPT_LUN, "T:L", "target:lun (0:0; with --kernel TPGT:0)" },
    { "pid", OPT_PID, "PID", "back-end pid for CPU accounting" },
    { "json", OPT_JSON, NULL, "print the result as JSON" },
    { "verify", OPT_VERIFY, NULL, "write a pattern, read it back and compare" },
    { "quiet", 'q', NULL, "no progress line" },
    { "no-event-idx", OPT_NO_EVENT_IDX, NULL, "do not negotiate VIRTIO_RING_F_EVENT_IDX" },
    { "indirect", OPT_INDIRECT, NULL, "use indirect descriptors" },
    { "poll", OPT_POLL, NULL, "busy-poll the used rings: no call signals, no waiting "
      "(takes a core)" },
    { "packed", OPT_PACKED, NULL, "packed virtqueues (VIRTIO_F_RING_PACKED; vhost-user, "
      "and the back-end must offer them)" },
    { "inflight", OPT_INFLIGHT, NULL, "share an inflight-tracking area with the back-end "
      "(GET/SET_INFLIGHT_FD) when it offers one, as QEMU 8.2+ does: the bookkeeping a guest's "
      "I/O pays for back-end restarts (vhost-user)" },
    { "queue-size", OPT_QUEUE_SIZE, "N", "ring entries (auto)" },
    { "dirty-log", OPT_DIRTY_LOG, NULL, "run with dirty logging on, as during a live "
      "migration (vhost-user)" },
    { "idle", OPT_IDLE, NULL, "connect and issue nothing for --time seconds: what the "
      "back-end (--pid) costs with a front-end attached and no I/O" },
    { "flush-first", OPT_FLUSH_FIRST, NULL, "send one SYNCHRONIZE CACHE before measuring, as a "
      "guest's first fsync or fio's rbd engine does (librbd's cache stays write-through until "
      "the first flush)" },
    { "version", OPT_VERSION, NULL, "print the version and exit" },
    { "help", 'h', NULL, "this text" },
};

static void usage(FILE *f)
{
    fprintf(f, "Usage: vhost-scsi-bench --socket PATH | --kernel WWPN[,TPGT] [OPTIONS]\n"
               "A vhost-scsi load generator: plays the guest of a vhost-scsi back-end.\n\n");
    for (size_t i = 0; i < G_N_ELEMENTS(bench_options); i++) {
        const struct bench_option *b = &bench_options[i];
        /* Entries with a short option have it as their id (-q, -h). */
        g_autofree char *opt = b->id < 256 ? g_strdup_printf("-%c, --%s", b->id, b->name)
                                           : g_strdup_printf("--%s", b->name);
        g_autofree char *head = g_strdup_printf("%s%s%s", opt, b->arg ? " " : "",
                                                b->arg ? b->arg : "");

        fprintf(f, "  %-24s %s\n", head, b->help);
    }
}

/* An integer option's value in [min, max]; false (said) if it is not one. */
static bool int_arg(const char *name, const char *s, gint64 min, gint64 max, gint64 *out)
{
    if (!g_ascii_string_to_signed(s, 10, min, max, out, NULL)) {
        fprintf(stderr, "vhost-scsi-bench: --%s '%s': expected a whole number\n", name, s);
        return false;
    }
    return true;
}

/* getopt_long over argv into o; false (said) on a usage error. */
static bool parse_opts(int argc, char **argv, struct bench_opts *o)
{
    struct option longopts[G_N_ELEMENTS(bench_options) + 1] = { { 0 } };
    int c, idx;

    for (size_t i = 0; i < G_N_ELEMENTS(bench_options); i++) {
        longopts[i] = (struct option){ bench_options[i].name,
                                       bench_options[i].arg ? required_argument : no_argument,
                                       NULL, bench_options[i].id };
    }
    while ((c = getopt_long(argc, argv, "qh", longopts, &idx)) != -1) {
        const char *name = c >= 256 ? longopts[idx].name : "";
        gint64 v;

        switch (c) {
        case OPT_SOCKET:
            o->socket = optarg;
            break;
        case OPT_KERNEL:
            o->kernel = optarg;
            break;
        case OPT_RW:
            o->rw = optarg;
            break;
        case OPT_BS:
            o->bs_str = optarg;
            break;
        case OPT_LUN:
            o->lun_str = optarg;
            break;
        case OPT_RWMIX: case OPT_IODEPTH: case OPT_QUEUES: case OPT_FIRST_QUEUE: case OPT_TIME:
        case OPT_PID: case OPT_QUEUE_SIZE:
            if (!int_arg(name, optarg, INT_MIN, INT_MAX, &v)) {
                return false;
            }
            *(c == OPT_RWMIX ? &o->rwmix : c == OPT_IODEPTH ? &o->iodepth :
              c == OPT_QUEUES ? &o->queues : c == OPT_FIRST_QUEUE ? &o->first_queue :
              c == OPT_TIME ? &o->time_s : c == OPT_PID ? &o->pid : &o->queue_size) = (int)v;
            break;
        case OPT_IOS:
            if (!int_arg(name, optarg, G_MININT64, G_MAXINT64, &o->ios)) {
                return false;
            }
            break;
        case OPT_RATE:
            if (!int_arg(name, optarg, 1, 1000000000, &o->rate)) {
                return false;
            }
            break;
        case OPT_VERSION:
            printf("vhost-scsi-bench %s\n", VHOST_SCSI_VERSION);
            exit(0);
        case 'h':
            usage(stdout);
            exit(0);
        default: {
            /* the options without a value: each sets its flag */
            bool *flag = c == OPT_JSON ? &o->json : c == OPT_VERIFY ? &o->verify :
                         c == 'q' ? &o->quiet : c == OPT_NO_EVENT_IDX ? &o->no_event_idx :
                         c == OPT_INDIRECT ? &o->indirect : c == OPT_POLL ? &o->poll :
                         c == OPT_PACKED ? &o->packed : c == OPT_INFLIGHT ? &o->inflight :
                         c == OPT_DIRTY_LOG ? &o->dirty_log : c == OPT_IDLE ? &o->idle :
                         c == OPT_FLUSH_FIRST ? &o->flush_first : NULL;

            if (!flag) {
                /* getopt_long said what was wrong. */
                fprintf(stderr, "(vhost-scsi-bench --help for usage)\n");
                return false;
            }
            *flag = true;
        }
        }
    }
    if (optind < argc) {
        fprintf(stderr, "vhost-scsi-bench: unexpected argument '%s'\n", argv[optind]);
        return false;
    }
    return true;
}

/* The progress line on stderr, rewritten in place once a second. */
static void progress(uint64_t secs, double iops, uint64_t done, void *opaque)
{
    bool *shown = opaque;

    fprintf(stderr, "\r[%3" PRIu64 "s] %8.0f IOPS  %" PRIu64 " done   ", secs, iops, done);
    *shown = true;
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    struct bench_result res;
    g_autoptr(GError) err = NULL;
    bool shown = false, have_result = false, ok;
    struct bench *b;
    struct bench_hooks hooks = { .stop = &interrupted, .opaque = &shown };

    bench_opts_init(&o);
    if (!parse_opts(argc, argv, &o)) {
        return EXIT_USAGE;
    }
    if (!bench_opts_check(&o, &err)) {
        fprintf(stderr, "vhost-scsi-bench: %s\n", err->message);
        bench_opts_clear(&o);
        return EXIT_USAGE;
    }
    hooks.progress = o.quiet ? NULL : progress;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    b = bench_open(&o, &err);
    ok = b && bench_run(b, &hooks, &res, &have_result, &err);
    if (shown) {
        fprintf(stderr, "\n");
    }
    if (have_result) {
        g_autofree char *text = o.json ? bench_report_json(&res) : bench_report_text(&res);

        fputs(text, stdout);
    }
    if (!ok) {
        fprintf(stderr, "vhost-scsi-bench: %s\n", err->message);
    }
    /* the words first: the stop waits for what a run that gave up left in flight */
    fflush(stdout);
    bench_close(b);
    bench_opts_clear(&o);
    return ok ? 0 : 1;
}
