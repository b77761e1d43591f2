/*
 * The check of a bench run's options (include/bench/bench-options.h): each
 * refusal names the option and what it accepts, since it is what a user
 * of vhost-scsi-bench reads; what the options imply (a ring large enough
 * for the queue depth, the kernel target's TPGT as the LUN's target) is
 * settled here once, so the run only reads it.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include "bench-options.h"

G_DEFINE_QUARK(vhost-scsi-bench-error-quark, bench_error)

static const char *const rw_names[] = { "read", "write", "randread", "randwrite", "rw",
                                        "hostile", "aptpl", "unmap" };

const char *bench_rw_name(enum bench_rw mode)
{
    return (unsigned)mode < G_N_ELEMENTS(rw_names) ? rw_names[mode] : "?";
}

void bench_opts_init(struct bench_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->iodepth = 16;
    o->queues = 1;
    o->time_s = 10;
    o->rwmix = 50;
}

void bench_opts_clear(struct bench_opts *o)
{
    g_clear_pointer(&o->wwpn, g_free);
}

static bool usage_error(GError **err, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static bool usage_error(GError **err, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    g_propagate_error(err, g_error_new_valist(BENCH_ERROR, BENCH_ERROR_USAGE, fmt, ap));
    va_end(ap);
    return false;
}

/* SIZE with an optional k or m: a multiple of 512 up to 16M. */
static bool parse_bs(const char *s, uint32_t *bs)
{
    char *end;
    guint64 v = g_ascii_strtoull(s, &end, 10);

    if (end == s) {
        return false;
    }
    if (*end == 'k' || *end == 'K') {
        v <<= 10, end++;
    } else if (*end == 'm' || *end == 'M') {
        v <<= 20, end++;
    }
    if (*end || v == 0 || v > (16u << 20) || v % 512) {
        return false;
    }
    *bs = (uint32_t)v;
    return true;
}

static bool parse_lun(const char *s, unsigned *target, unsigned *lun)
{
    g_auto(GStrv) parts = g_strsplit(s, ":", 3);
    guint64 t, l;

    if (g_strv_length(parts) != 2 ||
        !g_ascii_string_to_unsigned(parts[0], 10, 0, G_MAXUINT, &t, NULL) ||
        !g_ascii_string_to_unsigned(parts[1], 10, 0, G_MAXUINT, &l, NULL)) {
        return false;
    }
    *target = (unsigned)t;
    *lun = (unsigned)l;
    return true;
}

/* The ring entries: as given, or enough for the queue depth (a request takes 3 without indirect). */
static bool settle_queue_size(struct bench_opts *o, GError **err)
{
    unsigned depth = (unsigned)o->iodepth;

    if (o->queue_size < 0) {
        return usage_error(err, "--queue-size %d: expected a positive number", o->queue_size);
    }
    if (!o->queue_size) {
        unsigned qsize = 128;

        while (qsize < 3 * depth + 8 && qsize < 32768) {
            qsize <<= 1;
        }
        o->queue_size = (int)qsize;
    } else if ((unsigned)o->queue_size < (o->indirect ? 1 : 3) * depth) {
        return usage_error(err, "--queue-size %d cannot hold --iodepth %u", o->queue_size, depth);
    }
    return true;
}

bool bench_opts_check(struct bench_opts *o, GError **err)
{
    if (!!o->socket == !!o->kernel) {
        return usage_error(err, "give exactly one of --socket and --kernel");
    }
    if (o->idle && (o->verify || o->ios || o->rate)) {
        return usage_error(err, "--idle issues no I/O: not with --verify, --ios or --rate");
    }
    if (o->packed && o->kernel) {
        return usage_error(err, "--packed: the kernel's vhost has split rings only");
    }
    if (o->inflight && o->kernel) {
        return usage_error(err, "--inflight: the kernel's vhost has no inflight tracking");
    }
    o->mode = BENCH_RW_RANDREAD;
    if (o->rw) {
        unsigned i;

        for (i = 0; i < G_N_ELEMENTS(rw_names) && strcmp(o->rw, rw_names[i]); i++) {
        }
        if (i == G_N_ELEMENTS(rw_names)) {
            return usage_error(err, "unknown --rw %s", o->rw);
        }
        o->mode = (enum bench_rw)i;
    }
    o->bs = 4096;
    if (o->bs_str && !parse_bs(o->bs_str, &o->bs)) {
        return usage_error(err, "bad --bs %s (multiple of 512, <= 16M)", o->bs_str);
    }
    if (o->lun_str && !parse_lun(o->lun_str, &o->target, &o->lun)) {
        return usage_error(err, "bad --lun %s (want T:L)", o->lun_str);
    }
    if (o->target > 255 || o->lun > 16383) {
        return usage_error(err, "--lun out of range");
    }
    if (o->kernel) {
        const char *comma = strchr(o->kernel, ',');
        guint64 tpgt = 1;

        if (comma && !g_ascii_string_to_unsigned(comma + 1, 10, 0, 255, &tpgt, NULL)) {
            return usage_error(err, "bad --kernel %s (want WWPN[,TPGT], TPGT 0..255)",
                               o->kernel);
        }
        g_free(o->wwpn);
        o->wwpn = comma ? g_strndup(o->kernel, (gsize)(comma - o->kernel)) : g_strdup(o->kernel);
        o->tpgt = (unsigned)tpgt;
        /* the kernel addresses a LUN's target by its TPGT */
        if (!o->lun_str) {
            o->target = o->tpgt;
        }
    }
    if (o->first_queue < 0 || o->first_queue + o->queues > 64) {
        return usage_error(err, "--first-queue + --queues must be <= 64");
    }
    if (o->iodepth < 1 || o->iodepth > 4096 || o->queues < 1 || o->queues > 64 ||
        o->time_s < 1 || o->ios < 0 || o->rwmix < 0 || o->rwmix > 100) {
        return usage_error(err, "--iodepth 1..4096, --queues 1..64, --time >= 1");
    }
    return settle_queue_size(o, err);
}
