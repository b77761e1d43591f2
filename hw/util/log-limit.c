/*
 * Log rate limits (include/util/log-limit.h): a token bucket kept in
 * microseconds of credit, so that refilling is one subtraction of clock
 * readings and needs no timer.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdarg.h>

#include "log-limit.h"

void log_limit_init(struct log_limit *l, const char *name, unsigned burst, unsigned per_sec)
{
    *l = (struct log_limit){ 0 };
    g_mutex_init(&l->lock);
    l->name = g_strdup(name);
    /* Without a refill, a line still costs one unit: the burst is all. */
    l->refills = per_sec > 0;
    l->cost_us = per_sec ? MAX(G_USEC_PER_SEC / per_sec, 1) : 1;
    l->cap_us = l->cost_us * burst;
    l->credit_us = l->cap_us;
}

static void say_suppressed(const char *name, uint64_t n)
{
    g_warning("%s: %" G_GUINT64_FORMAT " message%s suppressed (rate limit)", name, n,
              n == 1 ? "" : "s");
}

void log_limit_end(struct log_limit *l)
{
    if (l->suppressed) {
        say_suppressed(l->name, l->suppressed);
    }
    g_mutex_clear(&l->lock);
    g_free(l->name);
    l->name = NULL;
}

bool log_limit_admit(struct log_limit *l, int64_t now_us, uint64_t *suppressed)
{
    bool ok;

    g_mutex_lock(&l->lock);
    if (!l->started) {
        l->started = true;
        l->last_us = now_us;
    } else if (l->refills && now_us > l->last_us) {
        l->credit_us = MIN(l->cap_us, l->credit_us + (now_us - l->last_us));
        l->last_us = now_us;
    }
    ok = l->credit_us >= l->cost_us;
    if (ok) {
        l->credit_us -= l->cost_us;
        *suppressed = l->suppressed;
        l->suppressed = 0;
    } else {
        l->suppressed++;
    }
    g_mutex_unlock(&l->lock);
    return ok;
}

void log_limit_log(struct log_limit *l, GLogLevelFlags level, const char *fmt, ...)
{
    uint64_t suppressed = 0;
    va_list ap;

    if (l) {
        if (!log_limit_admit(l, g_get_monotonic_time(), &suppressed)) {
            return;
        }
        if (suppressed) {
            say_suppressed(l->name, suppressed);
        }
    }
    va_start(ap, fmt);
    g_logv(G_LOG_DOMAIN, level, fmt, ap);
    va_end(ap);
}
