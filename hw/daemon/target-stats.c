/*
 * The daemon's statistics as the control socket reports them (docs/control.md,
 * "Statistics"): per backend (its LUN's commands, whichever controllers map
 * it) and per controller (its connections' requests), as JSON with totals
 * since start and figures for the interval since the same control
 * client's previous `stats` call (each client keeps its own marks, so two
 * monitors do not cut each other's intervals short), and in Prometheus'
 * text exposition format, counters only, for a scrape job or
 * node-exporter's textfile collector to take rates from.  The data path's
 * counters are lock-free per-thread slots (io-stats.h); this file only
 * reads and formats them, on the main thread.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <inttypes.h>
#include <string.h>

#include <glib.h>

#include "scsi-disk.h"
#include "target.h"

static const char *const class_names[IO_CLASSES] = { "read", "write", "other" };

/* What a client's previous `stats` call reported of one object. */
struct stats_mark {
    uint64_t ns;
    struct io_stats_snapshot snap;
};

/*
 * By the objects' stats_id, never reused: an object removed and added
 * again under its name starts from zero, and so does its interval.
 */
struct stats_marks {
    GHashTable *by_id;          /* uint64_t * -> struct stats_mark * */
};

struct stats_marks *target_stats_marks_new(void)
{
    struct stats_marks *m = g_new0(struct stats_marks, 1);

    m->by_id = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
    return m;
}

void target_stats_marks_free(void *marks)
{
    struct stats_marks *m = marks;

    g_hash_table_unref(m->by_id);
    g_free(m);
}

static gboolean mark_gone(gpointer key, gpointer value, gpointer live)
{
    return !g_hash_table_contains(live, key);
}

/* Forgets the marks of objects removed since: a client that stays does not pile them up. */
static void marks_prune(struct stats_marks *m, struct target *tgt)
{
    g_autoptr(GHashTable) live = g_hash_table_new(g_int64_hash, g_int64_equal);
    GHashTableIter it;
    gpointer v;

    g_hash_table_iter_init(&it, tgt->backends);
    while (g_hash_table_iter_next(&it, NULL, &v)) {
        g_hash_table_add(live, &((struct target_backend *)v)->stats_id);
    }
    for (GList *l = tgt->controllers; l; l = l->next) {
        g_hash_table_add(live, &((struct controller *)l->data)->stats_id);
    }
    g_hash_table_foreach_remove(m->by_id, mark_gone, live);
}

static void add_double(JsonBuilder *b, const char *k, double v)
{
    json_builder_set_member_name(b, k);
    json_builder_add_double_value(b, v);
}

static void add_uint(JsonBuilder *b, const char *k, uint64_t v)
{
    json_builder_set_member_name(b, k);
    json_builder_add_int_value(b, (gint64)MIN(v, (uint64_t)G_MAXINT64));
}

/* One class: counts, latency quantiles in µs, and rates over secs (> 0). */
static void add_class(JsonBuilder *b, const struct io_class_counts *c, double secs)
{
    static const struct { const char *name; double q; } quantiles[] = {
        { "p50", 0.5 }, { "p99", 0.99 }, { "p99.9", 0.999 },
    };

    json_builder_begin_object(b);
    add_uint(b, "ops", c->ops);
    add_uint(b, "bytes", c->bytes);
    add_uint(b, "errors", c->errors);
    if (secs > 0) {
        add_double(b, "ops_per_s", (double)c->ops / secs);
        add_double(b, "bytes_per_s", (double)c->bytes / secs);
    }
    json_builder_set_member_name(b, "latency_us");
    json_builder_begin_object(b);
    add_double(b, "mean", c->ops ? (double)c->lat_ns_sum / (double)c->ops / 1e3 : 0);
    for (unsigned i = 0; i < G_N_ELEMENTS(quantiles); i++) {
        add_double(b, quantiles[i].name, (double)lat_hist_quantile(c->hist, quantiles[i].q) / 1e3);
    }
    json_builder_end_object(b);
    json_builder_end_object(b);
}

static void add_classes(JsonBuilder *b, const struct io_stats_snapshot *s, double secs)
{
    json_builder_begin_object(b);
    if (secs > 0) {
        add_double(b, "seconds", secs);
    }
    for (unsigned c = 0; c < IO_CLASSES; c++) {
        json_builder_set_member_name(b, class_names[c]);
        add_class(b, &s->c[c], secs);
    }
    json_builder_end_object(b);
}

/*
 * "total" and "interval" of one object (*id), whose figures are now; its
 * mark in marks is what this client's previous call saw (none: the
 * start), and becomes now.
 */
static void add_figures(JsonBuilder *b, struct target *tgt, struct stats_marks *marks,
                        uint64_t *id, const struct io_stats_snapshot *now)
{
    g_autofree struct io_stats_snapshot *delta = g_new0(struct io_stats_snapshot, 1);
    uint64_t t = io_stats_now_ns(), since;
    struct stats_mark *mark;

    if (!*id) {
        *id = ++tgt->stats_ids;
    }
    mark = g_hash_table_lookup(marks->by_id, id);
    since = mark ? mark->ns : tgt->start_ns;
    if (mark) {
        io_stats_diff(now, &mark->snap, delta);
    } else {
        *delta = *now;
        mark = g_new0(struct stats_mark, 1);
        g_hash_table_insert(marks->by_id, g_memdup2(id, sizeof(*id)), mark);
    }
    json_builder_set_member_name(b, "total");
    add_classes(b, now, 0);
    json_builder_set_member_name(b, "interval");
    /* At least a nanosecond: two calls inside one clock tick still divide. */
    add_classes(b, delta, (double)MAX(t - since, 1u) / 1e9);
    mark->ns = t;
    mark->snap = *now;
}

static gint by_name(gconstpointer a, gconstpointer b)
{
    const struct target_backend *x = *(struct target_backend *const *)a;
    const struct target_backend *y = *(struct target_backend *const *)b;

    return strcmp(x->name, y->name);
}

/* The backends, sorted by name so that output is stable. */
static GPtrArray *sorted_backends(struct target *tgt)
{
    GPtrArray *a = g_ptr_array_new();
    GHashTableIter it;
    gpointer v;

    g_hash_table_iter_init(&it, tgt->backends);
    while (g_hash_table_iter_next(&it, NULL, &v)) {
        g_ptr_array_add(a, v);
    }
    g_ptr_array_sort(a, by_name);
    return a;
}

static void backend_stats_json(JsonBuilder *b, struct target *tgt, struct stats_marks *marks,
                               struct target_backend *tb)
{
    g_autofree struct io_stats_snapshot *now = g_new0(struct io_stats_snapshot, 1);

    scsi_lun_stats(tb->lun, now);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, tb->name);
    add_uint(b, "in_flight", scsi_lun_inflight(tb->lun));
    add_figures(b, tgt, marks, &tb->stats_id, now);
    json_builder_end_object(b);
}

static void controller_stats_json(JsonBuilder *b, struct target *tgt, struct stats_marks *marks,
                                  struct controller *ctrl)
{
    g_autofree struct io_stats_snapshot *now = g_new0(struct io_stats_snapshot, 1);
    unsigned in_flight, conns = target_controller_connections(tgt, ctrl, &in_flight);

    io_stats_read(&ctrl->stats, now);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, ctrl->name);
    add_uint(b, "connections", conns);
    add_uint(b, "in_flight", in_flight);
    add_figures(b, tgt, marks, &ctrl->stats_id, now);
    json_builder_end_object(b);
}

/*
 * The I/O threads' loop counters, read racily as the thread writes them
 * (plain 64-bit stores: a reading is at worst one iteration old).
 */
static void threads_stats_json(JsonBuilder *b, struct target *tgt)
{
    json_builder_set_member_name(b, "threads");
    json_builder_begin_array(b);
    for (unsigned i = 0; i < tgt->nthreads; i++) {
        struct iothread_stats st;

        iothread_get_stats(tgt->threads[i], &st);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "name");
        json_builder_add_string_value(b, iothread_name(tgt->threads[i]));
        add_uint(b, "loops", st.loops);
        add_uint(b, "wakeups", st.wakeups);
        add_uint(b, "wakeups_kick", st.wakeups_kick);
        add_uint(b, "wakeups_uring", st.wakeups_uring);
        add_uint(b, "max_iteration_work_bytes", st.max_iteration_work);
        add_uint(b, "poll_window_ns", st.poll_window_ns);
        add_uint(b, "poll_window_uring_ns", st.poll_window_uring_ns);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}

JsonNode *target_stats_json(struct target *tgt, struct stats_marks *marks,
                            struct controller *ctrl, struct target_backend *tb)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    bool all = !ctrl && !tb;

    json_builder_begin_object(b);
    add_double(b, "uptime_s", (double)(io_stats_now_ns() - tgt->start_ns) / 1e9);
    json_builder_set_member_name(b, "backends");
    json_builder_begin_array(b);
    if (tb) {
        backend_stats_json(b, tgt, marks, tb);
    } else if (all) {
        g_autoptr(GPtrArray) bs = sorted_backends(tgt);

        for (guint i = 0; i < bs->len; i++) {
            backend_stats_json(b, tgt, marks, bs->pdata[i]);
        }
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "controllers");
    json_builder_begin_array(b);
    for (GList *l = tgt->controllers; l; l = l->next) {
        if (all || l->data == ctrl) {
            controller_stats_json(b, tgt, marks, l->data);
        }
    }
    json_builder_end_array(b);
    if (all) {
        threads_stats_json(b, tgt);
    }
    json_builder_end_object(b);
    marks_prune(marks, tgt);
    return json_builder_get_root(b);
}

/* ---- Prometheus text exposition format (version 0.0.4) ------------------ */

/* A label value: backslash, double quote and newline escaped. */
static void put_label(GString *out, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"') {
            g_string_append_c(out, '\\');
            g_string_append_c(out, *v);
        } else if (*v == '\n') {
            g_string_append(out, "\\n");
        } else {
            g_string_append_c(out, *v);
        }
    }
}

/*
 * Histogram buckets every 2^k ns from about 1 µs to about 69 s: edges of
 * the log-linear histogram, so each cumulative count is exact (it counts
 * the latencies below 2^k ns), and few enough that a scrape of hundreds
 * of LUNs stays small.
 */
#define PROM_LE_FIRST 10u
#define PROM_LE_LAST  LAT_HIST_MAX_EXP

/* The metric families of one kind of object ("backend", "controller"). */
struct prom_family {
    const char *kind;
    GString *part[4];            /* commands, bytes, errors, latency */
};

enum { P_COMMANDS, P_BYTES, P_ERRORS, P_LATENCY };

static void family_init(struct prom_family *f, const char *kind)
{
    static const struct { const char *metric, *type, *help; } heads[] = {
        { "commands_total", "counter", "SCSI commands completed, by class." },
        { "bytes_total", "counter", "Bytes transferred by completed commands." },
        { "errors_total", "counter",
          "Commands completed with a status other than GOOD (unit attentions excepted)." },
        { "latency_seconds", "histogram", "Command latency, from received to completed." },
    };

    f->kind = kind;
    for (unsigned i = 0; i < G_N_ELEMENTS(f->part); i++) {
        f->part[i] = g_string_new(NULL);
        g_string_append_printf(f->part[i], "# HELP vhost_scsi_%s_%s %s\n# TYPE vhost_scsi_%s_%s %s\n",
                               kind, heads[i].metric, heads[i].help, kind, heads[i].metric,
                               heads[i].type);
    }
}

/* One sample line: metric{kind="name",class="cls"[,le="le"]} value. */
static void sample(struct prom_family *f, unsigned part, const char *metric, const char *name,
                   const char *cls, const char *le, const char *value)
{
    GString *out = f->part[part];

    g_string_append_printf(out, "vhost_scsi_%s_%s{%s=\"", f->kind, metric, f->kind);
    put_label(out, name);
    g_string_append_printf(out, "\",class=\"%s\"", cls);
    if (le) {
        g_string_append_printf(out, ",le=\"%s\"", le);
    }
    g_string_append_printf(out, "} %s\n", value);
}

static void family_add(struct prom_family *f, const char *name, const struct io_stats_snapshot *s)
{
    char v[32], le[32];

    for (unsigned c = 0; c < IO_CLASSES; c++) {
        const struct io_class_counts *k = &s->c[c];
        const char *cls = class_names[c];
        uint64_t below = 0;
        unsigned b = 0;

        g_snprintf(v, sizeof(v), "%" PRIu64, k->ops);
        sample(f, P_COMMANDS, "commands_total", name, cls, NULL, v);
        g_snprintf(v, sizeof(v), "%" PRIu64, k->bytes);
        sample(f, P_BYTES, "bytes_total", name, cls, NULL, v);
        g_snprintf(v, sizeof(v), "%" PRIu64, k->errors);
        sample(f, P_ERRORS, "errors_total", name, cls, NULL, v);
        for (unsigned e = PROM_LE_FIRST; e <= PROM_LE_LAST; e++) {
            uint64_t edge = (uint64_t)1 << e;

            for (; b < LAT_HIST_BUCKETS && lat_hist_bucket_max(b) < edge; b++) {
                below += k->hist[b];
            }
            g_snprintf(le, sizeof(le), "%.9g", (double)edge / 1e9);
            g_snprintf(v, sizeof(v), "%" PRIu64, below);
            sample(f, P_LATENCY, "latency_seconds_bucket", name, cls, le, v);
        }
        /* +Inf is the count: a reader of the slots may see ops before the bucket. */
        g_snprintf(v, sizeof(v), "%" PRIu64, k->ops);
        sample(f, P_LATENCY, "latency_seconds_bucket", name, cls, "+Inf", v);
        g_snprintf(v, sizeof(v), "%.9f", (double)k->lat_ns_sum / 1e9);
        sample(f, P_LATENCY, "latency_seconds_sum", name, cls, NULL, v);
        g_snprintf(v, sizeof(v), "%" PRIu64, k->ops);
        sample(f, P_LATENCY, "latency_seconds_count", name, cls, NULL, v);
    }
}

/* Appends the family's parts to out (each metric's samples together) and frees them. */
static void family_finish(struct prom_family *f, GString *out)
{
    for (unsigned i = 0; i < G_N_ELEMENTS(f->part); i++) {
        g_string_append_len(out, f->part[i]->str, (gssize)f->part[i]->len);
        g_string_free(f->part[i], TRUE);
    }
}

char *target_stats_prometheus(struct target *tgt)
{
    GString *out = g_string_new(NULL);
    g_autofree struct io_stats_snapshot *snap = g_new(struct io_stats_snapshot, 1);
    g_autoptr(GPtrArray) bs = sorted_backends(tgt);
    struct prom_family fb, fc;
    GString *gauges = g_string_new(NULL), *conns = g_string_new(NULL);

    family_init(&fb, "backend");
    family_init(&fc, "controller");
    g_string_append(gauges, "# HELP vhost_scsi_backend_in_flight Commands started and not "
                            "completed.\n# TYPE vhost_scsi_backend_in_flight gauge\n");
    for (guint i = 0; i < bs->len; i++) {
        struct target_backend *tb = bs->pdata[i];

        memset(snap, 0, sizeof(*snap));
        scsi_lun_stats(tb->lun, snap);
        family_add(&fb, tb->name, snap);
        g_string_append(gauges, "vhost_scsi_backend_in_flight{backend=\"");
        put_label(gauges, tb->name);
        g_string_append_printf(gauges, "\"} %u\n", scsi_lun_inflight(tb->lun));
    }
    g_string_append(gauges, "# HELP vhost_scsi_controller_in_flight Requests taken from the "
                            "rings and not answered.\n"
                            "# TYPE vhost_scsi_controller_in_flight gauge\n");
    g_string_append(conns, "# HELP vhost_scsi_controller_connections Front-ends connected.\n"
                           "# TYPE vhost_scsi_controller_connections gauge\n");
    for (GList *l = tgt->controllers; l; l = l->next) {
        struct controller *ctrl = l->data;
        unsigned in_flight, n = target_controller_connections(tgt, ctrl, &in_flight);

        memset(snap, 0, sizeof(*snap));
        io_stats_read(&ctrl->stats, snap);
        family_add(&fc, ctrl->name, snap);
        g_string_append(gauges, "vhost_scsi_controller_in_flight{controller=\"");
        put_label(gauges, ctrl->name);
        g_string_append_printf(gauges, "\"} %u\n", in_flight);
        g_string_append(conns, "vhost_scsi_controller_connections{controller=\"");
        put_label(conns, ctrl->name);
        g_string_append_printf(conns, "\"} %u\n", n);
    }
    family_finish(&fb, out);
    family_finish(&fc, out);
    g_string_append_len(out, gauges->str, (gssize)gauges->len);
    g_string_append_len(out, conns->str, (gssize)conns->len);
    g_string_free(gauges, TRUE);
    g_string_free(conns, TRUE);
    g_string_append_printf(out, "# HELP vhost_scsi_uptime_seconds Time since the daemon started.\n"
                                "# TYPE vhost_scsi_uptime_seconds gauge\n"
                                "vhost_scsi_uptime_seconds %.3f\n",
                           (double)(io_stats_now_ns() - tgt->start_ns) / 1e9);
    return g_string_free(out, FALSE);
}
