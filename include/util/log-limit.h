/*
 * Rate limits for log lines that someone outside the host's control can
 * cause: a front-end's messages, a guest's requests.  Each source (a
 * connection, a logical unit) holds one token bucket: a burst of lines,
 * then a steady trickle; lines beyond it are counted, not written, and the
 * count is logged once ("N messages suppressed") before the next line that
 * goes out, or when the source ends.  One source cannot then fill the
 * host's journal, or slow the daemon down writing it, however fast it
 * repeats what makes us log.  Safe to use from several threads at once.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_LOG_LIMIT_H
#define VHOST_SCSI_LOG_LIMIT_H

#include <stdbool.h>
#include <stdint.h>

#include <glib.h>

/* A normal session logs a handful of lines; a flood gets this many, then one a second. */
#define LOG_LIMIT_BURST 20
#define LOG_LIMIT_PER_SEC 1

struct log_limit {
    GMutex lock;
    char *name;                 /* who the suppressed lines came from */
    bool refills;               /* per_sec > 0 */
    int64_t cost_us;            /* credit one line takes */
    int64_t cap_us;             /* credit of a full burst */
    int64_t credit_us;
    int64_t last_us;            /* when credit was last brought up to date */
    bool started;
    uint64_t suppressed;        /* lines refused since the last one written */
};

/* burst lines at once, then per_sec a second (0: none after the burst). */
void log_limit_init(struct log_limit *l, const char *name, unsigned burst, unsigned per_sec);

/*
 * Logs the count of lines still suppressed, if any, and frees what init
 * took.  l is then unused until the next init.
 */
void log_limit_end(struct log_limit *l);

/*
 * Whether a line may be written at now_us (a monotonic clock, µs); when
 * it may, *suppressed is the number of lines refused since the last one
 * written, for the caller to say first.  The clock is a parameter so that
 * tests can drive it.
 */
bool log_limit_admit(struct log_limit *l, int64_t now_us, uint64_t *suppressed);

/*
 * g_log through the limit (l NULL: no limit), with the suppressed count
 * first when there is one.
 */
void log_limit_log(struct log_limit *l, GLogLevelFlags level, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);

#define log_limit_warning(l, ...) log_limit_log((l), G_LOG_LEVEL_WARNING, __VA_ARGS__)
#define log_limit_message(l, ...) log_limit_log((l), G_LOG_LEVEL_MESSAGE, __VA_ARGS__)

#endif
