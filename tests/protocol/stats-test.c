/*
 * Statistics through the control socket (`stats`, `stats-prometheus`,
 * docs/control.md "Statistics"), against the real daemon and a real
 * front-end:
 *  - a backend's figures count exactly the commands sent to its LUN, by
 *    class, with their bytes; the controller's count every request of its
 *    connections, including those no LUN saw (an absent LUN); refusals
 *    are errors where they were refused; each call's interval holds what
 *    happened since the previous call and the totals keep growing;
 *  - intervals are per client: two clients' calls interleaved each see
 *    what happened since their own previous call, and a new client's
 *    first interval runs from the start;
 *  - latency quantiles are ordered and non-zero for classes that ran;
 *  - the Prometheus text is well formed (HELP and TYPE before samples,
 *    one sample per line), agrees with the JSON totals, and its histograms
 *    are cumulative with +Inf equal to the count;
 *  - bad parameters and unknown objects are JSON-RPC errors;
 *  - `vhost-scsi-ctl target stats` prints them for people and
 *    `--prometheus` prints the text as it came;
 *  - rate limits (`qos-set`), which the statistics make visible: a limited
 *    backend's reads complete no faster than its limit allows, all of them
 *    GOOD; the limits show in the backend object, survive config-save and
 *    a restart with --config, and bad limits are JSON-RPC errors.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <json-glib/json-glib.h>

#include "control-client.h"
#include "control-server.h"
#include "proto-util.h"
#include "scsi-cmd.h"

#define N_IO 64
#define IO_BYTES 8192

struct fx {
    struct pu_daemon d;
    char *ctl;
    int fd;
    struct vfe *fe;
};

/* The daemon with three LUNs, two queues on two threads, and extra options. */
static void fx_start_with(struct fx *x, const char *const *extra)
{
    g_autofree char *img = NULL, *lun2 = NULL;
    g_autoptr(GPtrArray) args = g_ptr_array_new();

    memset(x, 0, sizeof(*x));
    pu_daemon_init(&x->d);
    x->ctl = g_build_filename(x->d.dir, "control.sock", NULL);
    /* LUN 2 completes through io_uring, in a later loop iteration: latency > 0. */
    img = g_build_filename(x->d.dir, "disk.img", NULL);
    g_assert_true(g_file_set_contents(img, "", 0, NULL));
    g_assert_cmpint(truncate(img, 8 << 20), ==, 0);
    lun2 = g_strdup_printf("2=file:%s", img);
    {
        const char *base[] = { "--lun", "0=ram:16M", "--lun", "1=null:64M", "--lun", lun2,
                               "--control", x->ctl, "--queues", "2", "--threads", "2" };

        for (size_t i = 0; i < G_N_ELEMENTS(base); i++) {
            g_ptr_array_add(args, (gpointer)base[i]);
        }
        for (size_t i = 0; extra && extra[i]; i++) {
            g_ptr_array_add(args, (gpointer)extra[i]);
        }
        g_ptr_array_add(args, NULL);
        pu_daemon_start(&x->d, (const char **)args->pdata);
    }
    x->fd = ctl_client_connect(x->ctl);
    g_assert_cmpint(x->fd, >=, 0);
    x->fe = pu_connect(&x->d, 2);
    pu_make_ready(x->fe, 0);
    pu_make_ready(x->fe, 1);
    pu_make_ready(x->fe, 2);
}

static void fx_start(struct fx *x)
{
    fx_start_with(x, NULL);
}

static void fx_stop(struct fx *x)
{
    vfe_close(x->fe);
    close(x->fd);
    g_assert_true(WIFEXITED(pu_daemon_stop(&x->d, false)));
    pu_daemon_cleanup(&x->d);
    g_free(x->ctl);
}

static JsonNode *call(struct fx *x, const char *method, JsonNode *params)
{
    return pu_ctl_ok(x->fd, method, params);
}

/* A call that must fail with code. */
static void call_fails(struct fx *x, const char *method, JsonNode *params, int code)
{
    g_free(pu_ctl_err(x->fd, method, params, code));
}

/* The object named name in result's array member (backends, controllers). */
static JsonObject *find(JsonNode *result, const char *member, const char *name)
{
    JsonArray *a = json_object_get_array_member(json_node_get_object(result), member);

    for (guint i = 0; a && i < json_array_get_length(a); i++) {
        JsonObject *o = json_array_get_object_element(a, i);

        if (!g_strcmp0(json_object_get_string_member(o, "name"), name)) {
            return o;
        }
    }
    g_error("no %s named %s in the stats", member, name);
    return NULL;
}

/* A figure of one class: which "total" or "interval", class, field. */
static gint64 fig(JsonObject *o, const char *when, const char *cls, const char *field)
{
    JsonObject *w = json_object_get_object_member(o, when);
    JsonObject *c = json_object_get_object_member(w, cls);

    return json_object_get_int_member(c, field);
}

static double lat(JsonObject *o, const char *when, const char *cls, const char *q)
{
    JsonObject *c = json_object_get_object_member(json_object_get_object_member(o, when), cls);

    return json_object_get_double_member(json_object_get_object_member(c, "latency_us"), q);
}

static void assert_interval(JsonObject *o, gint64 r, gint64 rb, gint64 re, gint64 w, gint64 wb,
                            gint64 ot, gint64 oe)
{
    g_assert_cmpint(fig(o, "interval", "read", "ops"), ==, r);
    g_assert_cmpint(fig(o, "interval", "read", "bytes"), ==, rb);
    g_assert_cmpint(fig(o, "interval", "read", "errors"), ==, re);
    g_assert_cmpint(fig(o, "interval", "write", "ops"), ==, w);
    g_assert_cmpint(fig(o, "interval", "write", "bytes"), ==, wb);
    g_assert_cmpint(fig(o, "interval", "write", "errors"), ==, 0);
    g_assert_cmpint(fig(o, "interval", "other", "ops"), ==, ot);
    g_assert_cmpint(fig(o, "interval", "other", "errors"), ==, oe);
}

static void test_counts_by_object_and_class(void)
{
    struct fx x;
    struct pu_rw_spec spec = { .lun = 0, .queues = 2, .n_io = N_IO, .io_bytes = IO_BYTES,
                               .seed = 7 };
    g_autoptr(JsonNode) s0 = NULL, s1 = NULL, s2 = NULL, s3 = NULL, s4 = NULL;
    JsonObject *b0, *b1, *c;
    struct vfe_req r;
    uint64_t blocks;
    uint32_t bs;

    fx_start(&x);
    pu_read_capacity16(x.fe, 0, &blocks, &bs);
    s0 = call(&x, "stats", NULL);
    g_assert_cmpuint(json_array_get_length(json_object_get_array_member(
                         json_node_get_object(s0), "backends")), ==, 3);
    /* The set-up's TURs and READ CAPACITY were counted as other, without errors. */
    g_assert_cmpint(fig(find(s0, "backends", "lun0:0"), "total", "other", "ops"), >=, 2);
    g_assert_cmpint(fig(find(s0, "backends", "lun0:0"), "total", "other", "errors"), ==, 0);

    pu_write_read_compare(x.fe, &spec);   /* READ CAPACITY, then the writes and reads */
    s1 = call(&x, "stats", NULL);
    b0 = find(s1, "backends", "lun0:0");
    b1 = find(s1, "backends", "lun0:1");
    c = find(s1, "controllers", "default");
    assert_interval(b0, N_IO, N_IO * IO_BYTES, 0, N_IO, N_IO * IO_BYTES, 1, 0);
    assert_interval(b1, 0, 0, 0, 0, 0, 0, 0);
    assert_interval(c, N_IO, N_IO * IO_BYTES, 0, N_IO, N_IO * IO_BYTES, 1, 0);
    g_assert_cmpint(json_object_get_int_member(b0, "in_flight"), ==, 0);
    g_assert_cmpint(json_object_get_int_member(c, "connections"), ==, 1);
    g_assert_cmpint(fig(b0, "total", "write", "ops"), ==, N_IO);
    g_assert_cmpfloat(lat(b0, "interval", "read", "p50"), <=, lat(b0, "interval", "read", "p99"));
    g_assert_cmpfloat(lat(b0, "interval", "read", "p99"), <=,
                      lat(b0, "interval", "read", "p99.9"));
    /*
     * RAM completes inside the loop iteration that started the command,
     * which is the clock's resolution; a file's reads complete later.
     */
    {
        struct pu_rw_spec fspec = { .lun = 2, .queues = 2, .n_io = 16, .io_bytes = 4096,
                                    .seed = 3 };
        g_autoptr(JsonNode) sf = NULL;
        JsonObject *b2;

        pu_write_read_compare(x.fe, &fspec);
        sf = call(&x, "stats", pu_jobj("backend", pu_jstr("lun0:2"), NULL));
        b2 = find(sf, "backends", "lun0:2");
        g_assert_cmpint(fig(b2, "total", "read", "ops"), ==, 16);
        g_assert_cmpfloat(lat(b2, "total", "read", "p50"), >, 0);
        g_assert_cmpfloat(lat(b2, "total", "read", "mean"), >, 0);
        g_assert_cmpfloat(lat(b2, "total", "read", "p50"), <=, lat(b2, "total", "read", "p99.9"));
    }

    /* Nothing happened since: an empty interval, the same totals. */
    s2 = call(&x, "stats", NULL);
    assert_interval(find(s2, "backends", "lun0:0"), 0, 0, 0, 0, 0, 0, 0);
    g_assert_cmpint(fig(find(s2, "backends", "lun0:0"), "total", "read", "ops"), ==,
                    fig(b0, "total", "read", "ops"));

    /* A LUN that is not there: the controller's error; no backend saw it. */
    r = pu_tur(x.fe, 0, 5);
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_BAD_TARGET);
    /* A read past the end: an error of the backend's and the controller's reads. */
    {
        uint8_t *buf = vfe_alloc(x.fe, bs, 64);
        struct vfe_req rd;

        pu_req_prep(&rd, 0, 0, (const uint8_t[1]){ 0 }, 1, buf, bs, true);
        pu_make_rw16(&rd, false, blocks, 1);
        g_assert_cmpint(vfe_exec(x.fe, &rd, PU_TIMEOUT_MS), ==, 0);
        g_assert_cmpuint(rd.resp.status, ==, 2);
    }
    s3 = call(&x, "stats", NULL);
    assert_interval(find(s3, "backends", "lun0:0"), 1, 0, 1, 0, 0, 0, 0);
    assert_interval(find(s3, "backends", "lun0:1"), 0, 0, 0, 0, 0, 0, 0);
    assert_interval(find(s3, "controllers", "default"), 1, 0, 1, 0, 0, 1, 1);

    /* Narrowed to one backend: only it, and no controller. */
    {
        JsonNode *p = json_node_new(JSON_NODE_OBJECT);
        JsonObject *root;

        json_node_take_object(p, json_object_new());
        json_object_set_string_member(json_node_get_object(p), "backend", "lun0:1");
        s4 = call(&x, "stats", p);
        root = json_node_get_object(s4);
        g_assert_cmpuint(json_array_get_length(json_object_get_array_member(root, "backends")),
                         ==, 1);
        g_assert_cmpuint(json_array_get_length(json_object_get_array_member(root, "controllers")),
                         ==, 0);
        find(s4, "backends", "lun0:1");
    }
    fx_stop(&x);
}

/* The value of the sample line "name{labels} value" in text; -1 if absent. */
static double prom_value(const char *text, const char *series)
{
    g_autofree char *needle = g_strdup_printf("\n%s ", series);
    const char *p = strstr(text, needle);

    return p ? g_ascii_strtod(p + strlen(needle), NULL) : -1;
}

/*
 * Two monitors on two connections, their calls interleaved: neither cuts
 * the other's interval short (each sees everything since its own last
 * call), and a third client's first interval is the totals.
 */
static void test_intervals_per_client(void)
{
    struct fx x;
    struct pu_rw_spec spec = { .lun = 0, .queues = 2, .n_io = N_IO, .io_bytes = IO_BYTES,
                               .seed = 11 };
    int b, c;

    fx_start(&x);
    b = ctl_client_connect(x.ctl);
    g_assert_cmpint(b, >=, 0);
    json_node_unref(pu_ctl_ok(x.fd, "stats", NULL));
    json_node_unref(pu_ctl_ok(b, "stats", NULL));
    pu_write_read_compare(x.fe, &spec);   /* READ CAPACITY, then the writes and reads */
    {
        g_autoptr(JsonNode) a1 = pu_ctl_ok(x.fd, "stats", NULL);
        g_autoptr(JsonNode) b1 = pu_ctl_ok(b, "stats", NULL);

        assert_interval(find(a1, "backends", "lun0:0"), N_IO, N_IO * IO_BYTES, 0, N_IO,
                        N_IO * IO_BYTES, 1, 0);
        /* B's interval still holds what A's call just reported. */
        assert_interval(find(b1, "backends", "lun0:0"), N_IO, N_IO * IO_BYTES, 0, N_IO,
                        N_IO * IO_BYTES, 1, 0);
        assert_interval(find(b1, "controllers", "default"), N_IO, N_IO * IO_BYTES, 0, N_IO,
                        N_IO * IO_BYTES, 1, 0);
    }
    g_assert_cmpuint(pu_tur(x.fe, 0, 0).resp.status, ==, 0);
    {
        /* Narrowed calls keep the marks of the objects they report, per client too. */
        g_autoptr(JsonNode) b2 = pu_ctl_ok(b, "stats", pu_jobj("backend", pu_jstr("lun0:0"), NULL));
        g_autoptr(JsonNode) a2 = pu_ctl_ok(x.fd, "stats", NULL);

        assert_interval(find(b2, "backends", "lun0:0"), 0, 0, 0, 0, 0, 1, 0);
        assert_interval(find(a2, "backends", "lun0:0"), 0, 0, 0, 0, 0, 1, 0);
        assert_interval(find(a2, "controllers", "default"), 0, 0, 0, 0, 0, 1, 0);
    }
    close(b);
    c = ctl_client_connect(x.ctl);
    g_assert_cmpint(c, >=, 0);
    {
        g_autoptr(JsonNode) c1 = pu_ctl_ok(c, "stats", NULL);
        JsonObject *b0 = find(c1, "backends", "lun0:0");

        g_assert_cmpint(fig(b0, "interval", "read", "ops"), ==, fig(b0, "total", "read", "ops"));
        g_assert_cmpint(fig(b0, "interval", "other", "ops"), ==,
                        fig(b0, "total", "other", "ops"));
        g_assert_cmpint(fig(b0, "interval", "write", "ops"), ==, N_IO);
    }
    close(c);
    fx_stop(&x);
}

static void test_prometheus_text(void)
{
    struct fx x;
    struct pu_rw_spec spec = { .lun = 0, .queues = 2, .n_io = N_IO, .io_bytes = IO_BYTES,
                               .seed = 9 };
    g_autoptr(JsonNode) res = NULL, js = NULL;
    g_autoptr(GRegex) sample = g_regex_new(
        "^vhost_scsi_[a-z_]+(\\{([a-z]+=\"([^\"\\\\\\n]|\\\\.)*\",?)+\\})? [0-9.e+-]+$", 0, 0, NULL);
    g_autoptr(GHashTable) typed = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    const char *text;
    g_auto(GStrv) lines = NULL;
    unsigned samples = 0;

    fx_start(&x);
    pu_write_read_compare(x.fe, &spec);
    res = call(&x, "stats-prometheus", NULL);
    text = json_object_get_string_member(json_node_get_object(res), "text");
    g_assert_nonnull(text);
    g_assert_true(g_str_has_suffix(text, "\n"));
    lines = g_strsplit(text, "\n", -1);
    for (unsigned i = 0; lines[i] && lines[i][0]; i++) {
        const char *l = lines[i];

        if (g_str_has_prefix(l, "# TYPE ")) {
            g_auto(GStrv) f = g_strsplit(l + 7, " ", 2);

            g_assert_false(g_hash_table_contains(typed, f[0]));   /* one TYPE per family */
            g_hash_table_add(typed, g_strdup(f[0]));
            continue;
        }
        if (g_str_has_prefix(l, "# HELP ")) {
            continue;
        }
        if (!g_regex_match(sample, l, 0, NULL)) {
            g_error("not a sample line: %s", l);
        }
        /* Its family was typed before it (histograms: name without the suffix). */
        {
            g_autofree char *name = g_strndup(l, strcspn(l, "{ "));
            char *suffix = NULL;

            if (!g_hash_table_contains(typed, name)) {
                if ((suffix = g_strrstr(name, "_bucket")) || (suffix = g_strrstr(name, "_sum")) ||
                    (suffix = g_strrstr(name, "_count"))) {
                    *suffix = '\0';
                }
                g_assert_true(g_hash_table_contains(typed, name));
            }
        }
        samples++;
    }
    g_assert_cmpuint(samples, >, 50);
    /* It agrees with the JSON totals. */
    js = call(&x, "stats", NULL);
    g_assert_cmpfloat(prom_value(text, "vhost_scsi_backend_commands_total{backend=\"lun0:0\","
                                       "class=\"write\"}"), ==, N_IO);
    g_assert_cmpfloat(prom_value(text, "vhost_scsi_backend_bytes_total{backend=\"lun0:0\","
                                       "class=\"read\"}"), ==, N_IO * IO_BYTES);
    g_assert_cmpfloat(prom_value(text, "vhost_scsi_controller_commands_total{controller="
                                       "\"default\",class=\"read\"}"),
                      ==, fig(find(js, "controllers", "default"), "total", "read", "ops"));
    g_assert_cmpfloat(prom_value(text, "vhost_scsi_controller_connections{controller="
                                       "\"default\"}"), ==, 1);
    g_assert_cmpfloat(prom_value(text, "vhost_scsi_backend_in_flight{backend=\"lun0:1\"}"), ==, 0);
    /* Cumulative buckets, +Inf equal to the count. */
    {
        double prev = 0, v;
        const char *p = text;
        const char *prefix = "vhost_scsi_backend_latency_seconds_bucket{backend=\"lun0:0\","
                             "class=\"read\",le=\"";
        unsigned n = 0;

        while ((p = strstr(p, prefix))) {
            p += strlen(prefix);
            v = g_ascii_strtod(strchr(p, ' ') + 1, NULL);
            g_assert_cmpfloat(v, >=, prev);
            prev = v;
            n++;
        }
        g_assert_cmpuint(n, >, 10);
        g_assert_cmpfloat(prom_value(text, "vhost_scsi_backend_latency_seconds_bucket{backend="
                                           "\"lun0:0\",class=\"read\",le=\"+Inf\"}"), ==, N_IO);
        g_assert_cmpfloat(prev, ==, N_IO);
        g_assert_cmpfloat(prom_value(text, "vhost_scsi_backend_latency_seconds_count{backend="
                                           "\"lun0:0\",class=\"read\"}"), ==, N_IO);
        g_assert_cmpfloat(prom_value(text, "vhost_scsi_backend_latency_seconds_sum{backend="
                                           "\"lun0:0\",class=\"read\"}"), >, 0);
    }
    fx_stop(&x);
}

static void test_bad_requests(void)
{
    static const char *const bad[][2] = {
        { "{\"backend\":\"nope\"}", "failed" },
        { "{\"controller\":\"nope\"}", "failed" },
        { "{\"backend\":7}", "params" },
        { "{\"colour\":\"red\"}", "params" },
    };
    struct fx x;

    fx_start(&x);
    for (unsigned i = 0; i < G_N_ELEMENTS(bad); i++) {
        call_fails(&x, "stats", json_from_string(bad[i][0], NULL),
                   !strcmp(bad[i][1], "failed") ? CTL_E_FAILED : CTL_E_INVALID_PARAMS);
    }
    call_fails(&x, "stats-prometheus", json_from_string("{\"x\":1}", NULL),
               CTL_E_INVALID_PARAMS);
    /* The daemon still serves I/O and statistics. */
    pu_make_ready(x.fe, 0);
    json_node_unref(call(&x, "stats", NULL));
    fx_stop(&x);
}

/* Runs vhost-scsi-ctl target ARGS, which must succeed; its stdout. */
static char *ctl_run(struct fx *x, const char *const *args)
{
    int code;
    char *out = pu_ctl_tool(x->ctl, args, &code, NULL);

    g_assert_cmpint(code, ==, 0);
    return out;
}

static void test_ctl_prints_them(void)
{
    struct fx x;
    g_autofree char *human = NULL, *prom = NULL;

    if (!g_getenv("VHOST_SCSI_CTL")) {
        g_test_skip("VHOST_SCSI_CTL is not set (run through meson test)");
        return;
    }
    fx_start(&x);
    human = ctl_run(&x, (const char *const[]){ "stats", NULL });
    g_assert_nonnull(strstr(human, "backend lun0:0:"));
    g_assert_nonnull(strstr(human, "controller default:"));
    g_assert_nonnull(strstr(human, "latency us p50"));
    prom = ctl_run(&x, (const char *const[]){ "stats", "--prometheus", NULL });
    g_assert_true(g_str_has_prefix(prom, "# HELP vhost_scsi_backend_commands_total"));
    g_assert_nonnull(strstr(prom, "\nvhost_scsi_uptime_seconds "));
    fx_stop(&x);
}

/* Commands of class other the bench sends to LUN 0 in one run with extra_arg. */
static gint64 bench_others(struct fx *x, const char *extra_arg)
{
    const char *bench = g_getenv("VHOST_SCSI_BENCH");
    const char *argv[] = { bench, "--socket", x->d.sock, "--rw", "read", "--ios", "1",
                           "--iodepth", "1", "--quiet", extra_arg, NULL };
    g_autoptr(JsonNode) before = call(x, "stats", NULL);
    g_autoptr(JsonNode) after = NULL;
    g_autofree char *out = NULL, *err = NULL;
    int status = -1;

    g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
                               &err, &status, NULL));
    if (!g_spawn_check_wait_status(status, NULL)) {
        g_error("vhost-scsi-bench %s: %s", extra_arg ? extra_arg : "", err);
    }
    after = call(x, "stats", NULL);
    g_assert_cmpint(fig(find(after, "backends", "lun0:0"), "total", "other", "errors"), ==, 0);
    return fig(find(after, "backends", "lun0:0"), "total", "other", "ops") -
           fig(find(before, "backends", "lun0:0"), "total", "other", "ops");
}

/*
 * The bench's --flush-first sends exactly one SYNCHRONIZE CACHE before it
 * measures (what a flushing guest or fio's rbd engine does first, which
 * takes librbd's cache out of write-through): one more command of class
 * other than the same run without it, whose count two runs pin down.
 */
static void test_bench_flush_first(void)
{
    struct fx x;
    gint64 plain;

    g_assert_nonnull(g_getenv("VHOST_SCSI_BENCH"));
    fx_start(&x);
    plain = bench_others(&x, NULL);
    g_assert_cmpint(plain, >=, 2);      /* TEST UNIT READY, READ CAPACITY */
    g_assert_cmpint(bench_others(&x, NULL), ==, plain);
    g_assert_cmpint(bench_others(&x, "--flush-first"), ==, plain + 1);
    fx_stop(&x);
}

/* The widest poll window (of a kind: poll_window_ns...) the two I/O threads report. */
static gint64 poll_window_max(struct fx *x, const char *member)
{
    g_autoptr(JsonNode) st = call(x, "stats", NULL);
    JsonArray *a = json_object_get_array_member(json_node_get_object(st), "threads");
    gint64 max = 0;

    g_assert_cmpuint(json_array_get_length(a), ==, 2);
    for (guint i = 0; i < json_array_get_length(a); i++) {
        max = MAX(max, json_object_get_int_member(json_array_get_object_element(a, i),
                                                  member));
    }
    return max;
}

/*
 * Each thread says what woke it: a thread that does not poll was woken by
 * the bench's kicks (its requests went to a RAM LUN, no io_uring), and
 * neither kind is more than its wake-ups.
 */
static void thread_wakeups_check(struct fx *x)
{
    g_autoptr(JsonNode) st = call(x, "stats", NULL);
    JsonArray *a = json_object_get_array_member(json_node_get_object(st), "threads");
    gint64 kicks = 0;

    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonObject *t = json_array_get_object_element(a, i);
        gint64 all = json_object_get_int_member(t, "wakeups");

        g_assert_cmpint(json_object_get_int_member(t, "wakeups_kick"), <=, all);
        g_assert_cmpint(json_object_get_int_member(t, "wakeups_uring"), <=, all);
        kicks += json_object_get_int_member(t, "wakeups_kick");
    }
    g_assert_cmpint(kicks, >=, 1);
}

/*
 * `--poll adaptive` tunes its spin window and reports it: with the
 * longest window one second, a bench's requests (each within a second of
 * the thread going to sleep) open the window of the thread that served
 * them; a thread that does not poll reports none.  The window for io_uring
 * completions stays shut: RAM LUNs submit nothing to the ring.
 */
static void test_poll_window_reported(void)
{
    static const char *const adaptive[] = { "--poll", "adaptive", "--poll-us", "1000000", NULL };
    struct fx x;
    gint64 widest;

    g_assert_nonnull(g_getenv("VHOST_SCSI_BENCH"));
    fx_start(&x);
    bench_others(&x, NULL);
    g_assert_cmpint(poll_window_max(&x, "poll_window_ns"), ==, 0);
    thread_wakeups_check(&x);
    fx_stop(&x);

    fx_start_with(&x, adaptive);
    for (int i = 0; i < 3; i++) {
        bench_others(&x, NULL);
    }
    widest = poll_window_max(&x, "poll_window_ns");
    g_assert_cmpint(widest, >=, 4000);
    g_assert_cmpint(widest, <=, 1000000000);
    g_assert_cmpint(poll_window_max(&x, "poll_window_uring_ns"), ==, 0);
    fx_stop(&x);
}

static JsonNode *qos_params(const char *backend, const char *json_limits)
{
    JsonNode *p = json_from_string(json_limits, NULL);

    json_object_set_string_member(json_node_get_object(p), "backend", backend);
    return p;
}

static void test_qos_limits_reads(void)
{
    struct fx x;
    g_autoptr(JsonNode) set = NULL, s1 = NULL, s2 = NULL, list = NULL;
    JsonObject *q;
    double secs, ops;
    const int iops = 400;

    fx_start(&x);
    set = call(&x, "qos-set", qos_params("lun0:1", "{\"iops\": 400}"));
    q = json_object_get_object_member(json_node_get_object(set), "qos");
    g_assert_cmpint(json_object_get_int_member(q, "iops"), ==, iops);
    g_assert_cmpint(json_object_get_int_member(q, "bandwidth"), ==, 0);
    s1 = call(&x, "stats", NULL);
    /* 200 reads of 4 KiB on LUN 1, 32 at a time over 2 queues. */
    {
        struct pu_batch b = { 0 };
        struct vfe_req *r = g_new0(struct vfe_req, 200);
        uint8_t *buf = vfe_alloc(x.fe, 4096, 4096);

        for (unsigned i = 0; i < 200; i++) {
            pu_req_prep(&r[i], 0, 1, (const uint8_t[1]){ 0 }, 1, buf, 4096, true);
            pu_make_rw16(&r[i], false, i * 8, 8);
            r[i].queue = i % 2;
            r[i].complete = pu_batch_done;
            r[i].opaque = &b;
            if (i >= 32) {
                pu_batch_wait(x.fe, &b, i - 31, PU_TIMEOUT_MS);
            }
            g_assert_cmpint(vfe_submit(x.fe, &r[i]), ==, 0);
            vfe_kick(x.fe);
        }
        pu_batch_wait(x.fe, &b, 200, PU_TIMEOUT_MS);
        for (unsigned i = 0; i < 200; i++) {
            g_assert_cmpuint(r[i].resp.response, ==, VIRTIO_SCSI_S_OK);
            g_assert_cmpuint(r[i].resp.status, ==, 0);
        }
        vfe_free(x.fe, buf);
        g_free(r);
    }
    s2 = call(&x, "stats", NULL);
    {
        JsonObject *b1 = find(s2, "backends", "lun0:1");
        JsonObject *iv = json_object_get_object_member(b1, "interval");

        secs = json_object_get_double_member(iv, "seconds");
        ops = (double)fig(b1, "interval", "read", "ops");
        g_assert_cmpfloat(ops, ==, 200);
        g_assert_cmpint(fig(b1, "interval", "read", "errors"), ==, 0);
        /* Upper bound only: the burst (a tenth of a second) plus the rate. */
        if (ops > iops / 10.0 + 2 + iops * secs) {
            g_error("%.0f reads in %.3f s through a limit of %d IOPS", ops, secs, iops);
        }
    }
    list = call(&x, "backend-list", NULL);
    fx_stop(&x);
}

static void test_qos_saved_and_checked(void)
{
    struct fx x;
    g_autofree char *cfg = NULL, *text = NULL;
    static const char *const bad[] = {
        "{\"iops\": -1}", "{\"iops\": \"fast\"}", "{\"bandwidth\": \"1Q\"}",
        "{\"bandwidth\": true}", "{\"burst\": 5}",
    };

    fx_start(&x);
    json_node_unref(call(&x, "qos-set", qos_params("lun0:0", "{\"bandwidth\": \"10M\"}")));
    json_node_unref(call(&x, "qos-set", qos_params("lun0:0", "{\"iops\": 1000}")));
    for (unsigned i = 0; i < G_N_ELEMENTS(bad); i++) {
        call_fails(&x, "qos-set", qos_params("lun0:0", bad[i]), CTL_E_INVALID_PARAMS);
    }
    call_fails(&x, "qos-set", qos_params("nope", "{\"iops\": 1}"), CTL_E_FAILED);
    cfg = g_build_filename(x.d.dir, "saved.json", NULL);
    {
        JsonNode *p = json_from_string("{}", NULL);

        json_object_set_string_member(json_node_get_object(p), "file", cfg);
        json_node_unref(call(&x, "config-save", p));
    }
    g_assert_true(g_file_get_contents(cfg, &text, NULL, NULL));
    g_assert_nonnull(strstr(text, "\"qos\""));
    vfe_close(x.fe);
    close(x.fd);
    g_assert_true(WIFEXITED(pu_daemon_stop(&x.d, false)));
    /* The same directory, a new daemon on the saved file: the limits are back. */
    {
        const char *args[] = { "--config", cfg, "--control", x.ctl, NULL };
        g_autoptr(JsonNode) list = NULL;
        JsonArray *a;
        bool seen = false;

        pu_daemon_start(&x.d, args);
        x.fd = ctl_client_connect(x.ctl);
        g_assert_cmpint(x.fd, >=, 0);
        list = call(&x, "backend-list", NULL);
        a = json_node_get_array(list);
        for (guint i = 0; i < json_array_get_length(a); i++) {
            JsonObject *b = json_array_get_object_element(a, i);
            JsonObject *q = json_object_get_object_member(b, "qos");

            if (!strcmp(json_object_get_string_member(b, "name"), "lun0:0")) {
                g_assert_cmpint(json_object_get_int_member(q, "iops"), ==, 1000);
                g_assert_cmpint(json_object_get_int_member(q, "bandwidth"), ==, 10 << 20);
                seen = true;
            }
        }
        g_assert_true(seen);
    }
    x.fe = pu_connect(&x.d, 2);
    fx_stop(&x);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/stats/counts-by-object-and-class", test_counts_by_object_and_class);
    g_test_add_func("/stats/intervals-per-client", test_intervals_per_client);
    g_test_add_func("/stats/prometheus-text-agrees", test_prometheus_text);
    g_test_add_func("/stats/bad-requests-are-errors", test_bad_requests);
    g_test_add_func("/stats/ctl-prints-them", test_ctl_prints_them);
    g_test_add_func("/stats/bench-flush-first-sends-one-flush", test_bench_flush_first);
    g_test_add_func("/stats/poll-window-reported", test_poll_window_reported);
    g_test_add_func("/qos/limits-reads", test_qos_limits_reads);
    g_test_add_func("/qos/saved-and-checked", test_qos_saved_and_checked);
    return g_test_run();
}
