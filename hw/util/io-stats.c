/*
 * Lock-free I/O statistics (include/util/io-stats.h).  The data path adds
 * to its own thread's slot with relaxed loads and stores, which compile to
 * plain moves: no locked instruction, no shared cache line; readers may
 * see a slot mid-update, so a snapshot may lag a command behind, never
 * tear a 64-bit count.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <time.h>

#include <glib.h>

#include "io-stats.h"

enum { F_OPS, F_BYTES, F_ERRORS, F_LAT_SUM, F_HIST };

struct io_stats_slot {
    _Atomic uint64_t v[IO_CLASSES][F_HIST + LAT_HIST_BUCKETS];
};

unsigned lat_hist_bucket(uint64_t ns)
{
    unsigned e;

    if (ns < LAT_HIST_LINEAR) {
        return (unsigned)ns;
    }
    e = 63u - (unsigned)__builtin_clzll(ns);   /* >= 4 */
    if (e > LAT_HIST_MAX_EXP) {
        return LAT_HIST_BUCKETS - 1;
    }
    return LAT_HIST_LINEAR + (e - 4u) * LAT_HIST_SUB + (unsigned)((ns >> (e - 3u)) & 7u);
}

uint64_t lat_hist_bucket_max(unsigned b)
{
    unsigned e, sub;

    if (b < LAT_HIST_LINEAR) {
        return b;
    }
    if (b >= LAT_HIST_BUCKETS - 1) {
        return UINT64_MAX;
    }
    e = 4u + (b - LAT_HIST_LINEAR) / LAT_HIST_SUB;
    sub = (b - LAT_HIST_LINEAR) % LAT_HIST_SUB;
    return ((uint64_t)(8u + sub + 1u) << (e - 3u)) - 1u;
}

uint64_t lat_hist_quantile(const uint64_t hist[LAT_HIST_BUCKETS], double q)
{
    uint64_t total = 0, rank, seen = 0;

    for (unsigned b = 0; b < LAT_HIST_BUCKETS; b++) {
        total += hist[b];
    }
    if (total == 0) {
        return 0;
    }
    q = q <= 0 ? 0 : q > 1 ? 1 : q;
    /* The ceil(q * total)-th smallest observation, at least the first. */
    rank = (uint64_t)(q * (double)total);
    if ((double)rank < q * (double)total) {
        rank++;
    }
    if (rank == 0) {
        rank = 1;
    }
    for (unsigned b = 0; b < LAT_HIST_BUCKETS; b++) {
        seen += hist[b];
        if (seen >= rank) {
            return lat_hist_bucket_max(b);
        }
    }
    return lat_hist_bucket_max(LAT_HIST_BUCKETS - 1);
}

void io_stats_init(struct io_stats *s)
{
    for (unsigned i = 0; i < IO_STATS_SLOTS; i++) {
        atomic_init(&s->slot[i], NULL);
    }
}

void io_stats_destroy(struct io_stats *s)
{
    for (unsigned i = 0; i < IO_STATS_SLOTS; i++) {
        g_free(atomic_load(&s->slot[i]));
        atomic_store(&s->slot[i], NULL);
    }
}

/*
 * A slot's first use, out of line, reached from io_stats_add by a tail
 * call that starts the add over: inlined, or with the add carrying on
 * after a call, it made every io_stats_add (two per command) save and
 * restore five or six registers.
 */
static G_GNUC_NO_INLINE struct io_stats_slot *slot_alloc(struct io_stats *s, unsigned i)
{
    struct io_stats_slot *expected = NULL, *p;

    /* Slot 0 may have several first writers at once: one allocation wins. */
    p = g_new0(struct io_stats_slot, 1);
    if (!atomic_compare_exchange_strong_explicit(&s->slot[i], &expected, p,
                                                 memory_order_acq_rel, memory_order_acquire)) {
        g_free(p);
        p = expected;
    }
    return p;
}

static inline void own_add(_Atomic uint64_t *x, uint64_t n)
{
    atomic_store_explicit(x, atomic_load_explicit(x, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

/* Slot i (a valid index, which io_stats_add maps to itself) made, then the add. */
static G_GNUC_NO_INLINE void add_first(struct io_stats *s, unsigned i, enum io_class c,
                                        uint64_t bytes, bool error, uint64_t lat_ns)
{
    slot_alloc(s, i);
    io_stats_add(s, i, c, bytes, error, lat_ns);
}

void io_stats_add(struct io_stats *s, unsigned thread_id, enum io_class c, uint64_t bytes,
                  bool error, uint64_t lat_ns)
{
    unsigned i = thread_id < IO_STATS_SLOTS ? thread_id : 0;
    struct io_stats_slot *slot = atomic_load_explicit(&s->slot[i], memory_order_acquire);
    _Atomic uint64_t *v;

    if (G_UNLIKELY(!slot)) {
        add_first(s, i, c, bytes, error, lat_ns);   /* a tail call */
        return;
    }
    v = slot->v[c];

    if (i == 0) {
        atomic_fetch_add_explicit(&v[F_OPS], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&v[F_BYTES], bytes, memory_order_relaxed);
        atomic_fetch_add_explicit(&v[F_ERRORS], error, memory_order_relaxed);
        atomic_fetch_add_explicit(&v[F_LAT_SUM], lat_ns, memory_order_relaxed);
        atomic_fetch_add_explicit(&v[F_HIST + lat_hist_bucket(lat_ns)], 1,
                                  memory_order_relaxed);
        return;
    }
    own_add(&v[F_OPS], 1);
    own_add(&v[F_BYTES], bytes);
    if (error) {
        own_add(&v[F_ERRORS], 1);
    }
    own_add(&v[F_LAT_SUM], lat_ns);
    own_add(&v[F_HIST + lat_hist_bucket(lat_ns)], 1);
}

void io_stats_read(const struct io_stats *s, struct io_stats_snapshot *out)
{
    for (unsigned i = 0; i < IO_STATS_SLOTS; i++) {
        struct io_stats_slot *p = atomic_load_explicit(&s->slot[i], memory_order_acquire);

        if (!p) {
            continue;
        }
        for (unsigned c = 0; c < IO_CLASSES; c++) {
            struct io_class_counts *o = &out->c[c];

            o->ops += atomic_load_explicit(&p->v[c][F_OPS], memory_order_relaxed);
            o->bytes += atomic_load_explicit(&p->v[c][F_BYTES], memory_order_relaxed);
            o->errors += atomic_load_explicit(&p->v[c][F_ERRORS], memory_order_relaxed);
            o->lat_ns_sum += atomic_load_explicit(&p->v[c][F_LAT_SUM], memory_order_relaxed);
            for (unsigned b = 0; b < LAT_HIST_BUCKETS; b++) {
                o->hist[b] += atomic_load_explicit(&p->v[c][F_HIST + b], memory_order_relaxed);
            }
        }
    }
}

void io_stats_diff(const struct io_stats_snapshot *now, const struct io_stats_snapshot *then,
                   struct io_stats_snapshot *out)
{
    for (unsigned c = 0; c < IO_CLASSES; c++) {
        const struct io_class_counts *a = &now->c[c], *b = &then->c[c];
        struct io_class_counts *o = &out->c[c];

        o->ops = a->ops - b->ops;
        o->bytes = a->bytes - b->bytes;
        o->errors = a->errors - b->errors;
        o->lat_ns_sum = a->lat_ns_sum - b->lat_ns_sum;
        for (unsigned k = 0; k < LAT_HIST_BUCKETS; k++) {
            o->hist[k] = a->hist[k] - b->hist[k];
        }
    }
}

uint64_t io_stats_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
