/*
 * Live LUN changes through the control socket (vhost-scsi-target
 * --control, docs/control.md), against the real daemon:
 *  - a front-end connected before the change sees it: a LUN added answers
 *    with POWER ON and the LUNs it knew report REPORTED LUNS DATA HAS
 *    CHANGED; REPORT LUNS lists it; a LUN grown reports CAPACITY DATA HAS
 *    CHANGED and its new size; a LUN removed is BAD_TARGET to the next
 *    command and gone from REPORT LUNS; refusals (a duplicate, shrinking,
 *    an unknown LUN, bad params) are JSON-RPC errors and change nothing;
 *  - hundreds of add/resize/remove cycles on other LUNs while
 *    vhost-scsi-bench --verify runs on LUN 0 of another connection: every
 *    control call succeeds and the bench verifies every block (the daemon
 *    runs under ASan in `make check`);
 *  - READs waiting for a LUN's rate limit when it is removed complete
 *    GOOD, at the limit's pace, and the removal answers after them;
 *  - a named backend mapped at two LUNs is one disk through both (data
 *    written through one is read through the other; growing it is seen at
 *    both); it cannot be closed while mapped; connection-list shows the
 *    connected front-end with its pid and queues;
 *  - config-save writes the backends and mappings atomically (mode 0600)
 *    and a daemon started with --config on that file serves them again,
 *    data included; a config file that is wrong is refused at start with
 *    a message naming the element, and nothing is served;
 *  - the control socket is mode 0600, and a request a client sends in
 *    pieces, or a hostile one, is answered without disturbing the others.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <json-glib/json-glib.h>

#include "control-client.h"
#include "control-server.h"
#include "proto-util.h"
#include "scsi-cmd.h"

#define CYCLES 200
#define BENCH_IOS "40000"

/* The control socket of a daemon started by start(). */
static char *ctl_path(const struct pu_daemon *d)
{
    return g_build_filename(d->dir, "control.sock", NULL);
}

static void start(struct pu_daemon *d, const char *lun0)
{
    g_autofree char *ctl = NULL;

    pu_daemon_init(d);
    ctl = ctl_path(d);
    {
        const char *args[] = { "--lun", lun0, "--control", ctl, "--queues", "2", NULL };

        pu_daemon_start(d, args);
    }
}

static void lun_add(int fd, const char *arg)
{
    json_node_unref(pu_ctl_ok(fd, "lun-add", pu_jobj("lun", pu_jstr(arg), NULL)));
}

static void lun_remove(int fd, unsigned lun)
{
    JsonNode *r = pu_ctl_ok(fd, "lun-remove", pu_jobj("lun", pu_jint(lun), NULL));

    g_assert_true(JSON_NODE_HOLDS_NULL(r));
    json_node_unref(r);
}

static uint64_t lun_resize(int fd, unsigned lun, const char *size)
{
    JsonNode *r = pu_ctl_ok(fd, "lun-resize",
                            pu_jobj("lun", pu_jint(lun), "size", pu_jstr(size), NULL));
    uint64_t bytes = (uint64_t)json_object_get_int_member(json_node_get_object(r), "size");

    json_node_unref(r);
    return bytes;
}

static void assert_ua(struct vfe *fe, unsigned lun, unsigned code)
{
    struct vfe_req r = pu_tur(fe, 0, lun);

    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
    g_assert_cmpuint(r.resp.status, ==, 2);
    g_assert_cmphex(pu_sense_of(&r.resp).code, ==, code);
}

static void test_changes_seen_by_a_front_end(void)
{
    struct pu_daemon d = { 0 };
    g_autofree char *ctl = NULL;
    uint16_t ids[8];
    uint64_t blocks;
    uint32_t bsize;
    struct vfe *fe;
    struct vfe_req r;
    g_autofree char *e1 = NULL, *e2 = NULL, *e3 = NULL, *e4 = NULL;
    int fd;

    start(&d, "0=ram:16M");
    ctl = ctl_path(&d);
    fe = pu_connect(&d, 1);
    pu_make_ready(fe, 0);
    fd = ctl_client_connect(ctl);
    g_assert_cmpint(fd, >=, 0);

    lun_add(fd, "1=null:64M");
    /* The new LUN has just powered on; the one already known says the list changed. */
    assert_ua(fe, 1, 0x2900);
    pu_make_ready(fe, 1);
    assert_ua(fe, 0, 0x3f0e);
    pu_make_ready(fe, 0);
    g_assert_cmpuint(pu_report_luns(fe, ids, G_N_ELEMENTS(ids)), ==, 2);
    g_assert_cmpuint(ids[1], ==, 1);

    g_assert_cmpuint(lun_resize(fd, 1, "128M"), ==, 128u << 20);
    assert_ua(fe, 1, SCSI_SENSE_ASCQ_CAPACITY_DATA_HAS_CHANGED);
    pu_read_capacity16(fe, 1, &blocks, &bsize);
    g_assert_cmpuint(blocks * bsize, ==, 128u << 20);

    /* Refused, and nothing changes. */
    e1 = pu_ctl_err(fd, "lun-add", pu_jobj("lun", pu_jstr("1=null:8M"), NULL), CTL_E_FAILED);
    g_assert_nonnull(strstr(e1, "already mapped"));
    e2 = pu_ctl_err(fd, "lun-resize", pu_jobj("lun", pu_jint(1), "size", pu_jstr("64M"), NULL),
                    CTL_E_FAILED);
    g_assert_nonnull(strstr(e2, "smaller"));
    e3 = pu_ctl_err(fd, "lun-remove", pu_jobj("lun", pu_jint(7), NULL), CTL_E_FAILED);
    g_assert_nonnull(strstr(e3, "no LUN"));
    e4 = pu_ctl_err(fd, "lun-remove", pu_jobj("lun", pu_jstr("1"), NULL), CTL_E_INVALID_PARAMS);
    g_assert_nonnull(strstr(e4, "\"lun\""));
    pu_read_capacity16(fe, 1, &blocks, &bsize);
    g_assert_cmpuint(blocks * bsize, ==, 128u << 20);

    lun_remove(fd, 1);
    r = pu_tur(fe, 0, 1);
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_BAD_TARGET);
    assert_ua(fe, 0, 0x3f0e);
    g_assert_cmpuint(pu_report_luns(fe, ids, G_N_ELEMENTS(ids)), ==, 1);
    g_assert_cmpuint(ids[0], ==, 0);
    close(fd);
    vfe_close(fe);
    g_assert_cmpint(pu_daemon_stop(&d, false), ==, 0);
    pu_daemon_cleanup(&d);
}

/* ---- cycles under verified I/O ----------------------------------------- */

/* The bench prints its result as one JSON object on its last line starting with '{'. */
static JsonNode *bench_json(const char *out)
{
    g_auto(GStrv) lines = g_strsplit(out, "\n", -1);
    g_autoptr(JsonParser) p = json_parser_new();
    const char *last = NULL;

    for (char **l = lines; *l; l++) {
        if ((*l)[0] == '{') {
            last = *l;
        }
    }
    g_assert_nonnull(last);
    g_assert_true(json_parser_load_from_data(p, last, -1, NULL));
    return json_node_copy(json_parser_get_root(p));
}

/* LUN 0's completed reads and writes so far, from the daemon's statistics. */
static int64_t lun0_io_done(int fd)
{
    JsonNode *r = pu_ctl_ok(fd, "stats", pu_jobj("backend", pu_jstr("lun0:0"), NULL));
    JsonArray *bs = json_object_get_array_member(json_node_get_object(r), "backends");
    JsonObject *total = json_object_get_object_member(json_array_get_object_element(bs, 0),
                                                      "total");
    int64_t n = json_object_get_int_member(json_object_get_object_member(total, "read"), "ops") +
                json_object_get_int_member(json_object_get_object_member(total, "write"), "ops");

    json_node_unref(r);
    return n;
}

/*
 * Waits until the bench has completed `more` further I/Os on LUN 0, or has
 * exited.  Each cycle owes the bench's nexus a unit attention, which one of
 * its commands takes and retries; a cycle per completed I/O or faster would
 * let one unlucky command meet a unit attention on every retry (the bench,
 * like Linux, gives up after a few), which is no longer the test's question.
 */
static void wait_bench_progress(int fd, struct pu_proc *bench, int64_t *mark, int64_t more)
{
    gint64 end = g_get_monotonic_time() + PU_TIMEOUT_MS * (gint64)1000;
    int64_t n;

    while ((n = lun0_io_done(fd)) < *mark + more && !pu_proc_exited(bench, 1)) {
        g_assert_cmpint(g_get_monotonic_time(), <, end);
    }
    *mark = n;
}

static void test_cycles_under_verified_io(void)
{
    struct pu_daemon d = { 0 };
    g_autofree char *ctl = NULL;
    const char *bin = g_getenv("VHOST_SCSI_BENCH");
    struct pu_spawn_opts o = { 0 };
    struct pu_proc bench;
    g_autoptr(JsonNode) res = NULL;
    char out[8192];
    size_t got = 0;
    ssize_t n;
    int p[2], fd, status;
    unsigned cycles = 0;
    int64_t mark = 0;
    JsonObject *ro;

    g_assert_nonnull(bin);
    start(&d, "0=ram:256M");
    ctl = ctl_path(&d);
    fd = ctl_client_connect(ctl);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(pipe2(p, O_CLOEXEC), ==, 0);
    o.out_fd = p[1];
    {
        const char *argv[] = { bin, "--socket", d.sock, "--verify", "--ios", BENCH_IOS,
                               "--bs", "4k", "--iodepth", "8", "--queues", "2", "--quiet",
                               "--json", NULL };

        pu_spawn_opts(&bench, argv, &o);
    }
    close(p[1]);
    /*
     * Cycles on other LUNs for as long as the bench runs, at least CYCLES of
     * them, one per 16 of the bench's completed I/Os while it runs.
     */
    while (cycles < CYCLES || !pu_proc_exited(&bench, 0)) {
        g_autofree char *a = g_strdup_printf("%u=null:64M", 1 + cycles % 3);

        wait_bench_progress(fd, &bench, &mark, 16);

        lun_add(fd, a);
        g_assert_cmpuint(lun_resize(fd, 1 + cycles % 3, "96M"), ==, 96u << 20);
        lun_remove(fd, 1 + cycles % 3);
        cycles++;
        g_assert_cmpuint(cycles, <, 1000000);
    }
    g_assert_true(pu_proc_exited(&bench, PU_TIMEOUT_MS));
    g_assert_cmpint(waitpid(bench.pid, &status, 0), ==, bench.pid);
    close(bench.pidfd);
    while ((n = read(p[0], out + got, sizeof(out) - 1 - got)) > 0) {
        got += (size_t)n;
    }
    out[got] = 0;
    close(p[0]);
    g_printerr("# %u add/resize/remove cycles during the bench: %s", cycles, out);
    g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    res = bench_json(out);
    ro = json_node_get_object(res);
    g_assert_cmpint(json_object_get_int_member(ro, "verify_errors"), ==, 0);
    g_assert_cmpint(json_object_get_int_member(ro, "reads"), ==, atoi(BENCH_IOS));
    close(fd);
    g_assert_cmpint(pu_daemon_stop(&d, false), ==, 0);
    pu_daemon_cleanup(&d);
}

/* ---- removal under a rate limit ----------------------------------------- */

#define LIMITED_READS 9

/*
 * READs waiting for their LUN's rate limit when it is removed: they run
 * after the removal's grace period, at the limit's pace, and complete
 * GOOD; the removal answers after them, and the daemon (under ASan in
 * `make check`) goes on serving.
 */
static void test_remove_with_reads_waiting_for_a_rate_limit(void)
{
    struct pu_daemon d = { 0 };
    g_autofree char *ctl = NULL;
    struct vfe_req reqs[LIMITED_READS] = { 0 };
    struct pu_batch b = { 0 };
    struct vfe *fe;
    struct vfe_req r;
    JsonNode *answer;
    int fd, rm;

    start(&d, "0=ram:16M");
    ctl = ctl_path(&d);
    fd = ctl_client_connect(ctl);
    rm = ctl_client_connect(ctl);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(rm, >=, 0);
    lun_add(fd, "1=null:64M");
    /* Four a second, a burst of one: the first READ runs, the others wait up to 2 s. */
    json_node_unref(pu_ctl_ok(fd, "qos-set",
                              pu_jobj("backend", pu_jstr("lun0:1"), "iops", pu_jint(4), NULL)));
    fe = pu_connect(&d, 1);
    pu_make_ready(fe, 1);
    for (unsigned i = 0; i < LIMITED_READS; i++) {
        reqs[i].data = vfe_alloc(fe, 512, 512);
        reqs[i].data_len = 512;
        reqs[i].tag = i + 1;
        reqs[i].opaque = &b;
        reqs[i].complete = pu_batch_done;
        vfe_lun(reqs[i].lun, 0, 1);
        pu_make_rw16(&reqs[i], false, i, 1);
        g_assert_cmpint(vfe_submit(fe, &reqs[i]), ==, 0);
    }
    /* The last is in the daemon (so are those before it): the LUN has taken them all. */
    pu_wait_task_running(fe, 1, LIMITED_READS);
    pu_ctl_send(rm, 1, "lun-remove", pu_jobj("lun", pu_jint(1), NULL));
    pu_batch_wait(fe, &b, LIMITED_READS, PU_TIMEOUT_MS);
    for (unsigned i = 0; i < LIMITED_READS; i++) {
        g_assert_cmpuint(reqs[i].resp.response, ==, VIRTIO_SCSI_S_OK);
        g_assert_cmpuint(reqs[i].resp.status, ==, 0);
        vfe_free(fe, reqs[i].data);
    }
    answer = pu_ctl_answer(rm, PU_TIMEOUT_MS);
    g_assert_nonnull(answer);
    g_assert_true(json_object_has_member(json_node_get_object(answer), "result"));
    json_node_unref(answer);
    r = pu_tur(fe, 0, 1);
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_BAD_TARGET);
    pu_make_ready(fe, 0);                    /* and LUN 0 is still served */
    g_assert_true(pu_daemon_alive(&d));
    vfe_close(fe);
    close(rm);
    close(fd);
    g_assert_cmpint(pu_daemon_stop(&d, false), ==, 0);
    pu_daemon_cleanup(&d);
}

/* ---- named backends --------------------------------------------------- */

/* One block at lba of LUN lun, written (from buf) or read (into buf). */
static void rw_block(struct vfe *fe, unsigned lun, bool write, uint64_t lba, uint8_t *buf)
{
    struct vfe_req r = { .data = buf, .data_len = 512 };

    vfe_lun(r.lun, 0, lun);
    pu_make_rw16(&r, write, lba, 1);
    g_assert_cmpint(vfe_exec(fe, &r, PU_TIMEOUT_MS), ==, 0);
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
    g_assert_cmpuint(r.resp.status, ==, 0);
}

static void test_named_backend_shared_at_two_luns(void)
{
    struct pu_daemon d = { 0 };
    g_autofree char *ctl = NULL, *busy = NULL;
    uint8_t *buf;
    struct vfe *fe;
    JsonNode *r;
    JsonArray *a;
    JsonObject *c;
    int fd;

    start(&d, "0=null:1G");
    ctl = ctl_path(&d);
    fd = ctl_client_connect(ctl);
    g_assert_cmpint(fd, >=, 0);
    json_node_unref(pu_ctl_ok(fd, "backend-add",
                              pu_jobj("name", pu_jstr("shared"), "spec", pu_jstr("ram:8M"), NULL)));
    json_node_unref(pu_ctl_ok(fd, "lun-map",
                              pu_jobj("lun", pu_jint(1), "backend", pu_jstr("shared"), NULL)));
    json_node_unref(pu_ctl_ok(fd, "lun-map",
                              pu_jobj("lun", pu_jint(2), "backend", pu_jstr("shared"), NULL)));
    fe = pu_connect(&d, 1);
    pu_make_ready(fe, 1);
    pu_make_ready(fe, 2);
    buf = vfe_alloc(fe, 512, 512);
    for (unsigned i = 0; i < 512; i++) {
        buf[i] = (uint8_t)(i * 13 + 7);
    }
    rw_block(fe, 1, true, 5, buf);
    memset(buf, 0, 512);
    rw_block(fe, 2, false, 5, buf);
    for (unsigned i = 0; i < 512; i++) {
        g_assert_cmpuint(buf[i], ==, (uint8_t)(i * 13 + 7));
    }

    /* Listed with both addresses; not closed while mapped. */
    r = pu_ctl_ok(fd, "backend-list", NULL);
    a = json_node_get_array(r);
    g_assert_cmpuint(json_array_get_length(a), ==, 2);     /* lun0:0 and shared */
    c = json_array_get_object_element(a, 1);
    g_assert_cmpstr(json_object_get_string_member(c, "name"), ==, "shared");
    g_assert_cmpuint(json_array_get_length(json_object_get_array_member(c, "mapped_at")), ==, 2);
    json_node_unref(r);
    busy = pu_ctl_err(fd, "backend-remove", pu_jobj("name", pu_jstr("shared"), NULL), CTL_E_FAILED);
    g_assert_nonnull(strstr(busy, "mapped 2 time"));

    /* The connected front-end, its pid, the daemon's two queues of which it runs one. */
    r = pu_ctl_ok(fd, "connection-list", NULL);
    a = json_node_get_array(r);
    g_assert_cmpuint(json_array_get_length(a), ==, 1);
    c = json_array_get_object_element(a, 0);
    g_assert_cmpint(json_object_get_int_member(c, "pid"), ==, getpid());
    g_assert_cmpstr(json_object_get_string_member(c, "state"), ==, "connected");
    a = json_object_get_array_member(c, "queues");
    g_assert_cmpuint(json_array_get_length(a), ==, 2);
    g_assert_true(json_object_get_boolean_member(json_array_get_object_element(a, 0), "running"));
    g_assert_cmpint(json_object_get_int_member(json_array_get_object_element(a, 0), "in_flight"),
                    ==, 0);
    g_assert_false(json_object_get_boolean_member(json_array_get_object_element(a, 1), "running"));
    json_node_unref(r);

    /* Unmapped at both, it can go; an implicit backend goes with its LUN. */
    lun_remove(fd, 1);
    pu_make_ready(fe, 2);                    /* REPORTED LUNS DATA HAS CHANGED */
    rw_block(fe, 2, false, 5, buf);          /* still served at the other address */
    lun_remove(fd, 2);
    json_node_unref(pu_ctl_ok(fd, "backend-remove", pu_jobj("name", pu_jstr("shared"), NULL)));
    lun_remove(fd, 0);
    r = pu_ctl_ok(fd, "backend-list", NULL);
    g_assert_cmpuint(json_array_get_length(json_node_get_array(r)), ==, 0);
    json_node_unref(r);
    vfe_free(fe, buf);
    vfe_close(fe);
    close(fd);
    g_assert_cmpint(pu_daemon_stop(&d, false), ==, 0);
    pu_daemon_cleanup(&d);
}

/* ---- saved configuration ------------------------------------------------ */

/* The LUN list, as "T:L=backend" words. */
static char *lun_list_words(int fd)
{
    JsonNode *r = pu_ctl_ok(fd, "lun-list", NULL);
    JsonArray *a = json_node_get_array(r);
    GString *s = g_string_new(NULL);

    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonObject *o = json_array_get_object_element(a, i);

        g_string_append_printf(s, "%s%" G_GINT64_FORMAT ":%" G_GINT64_FORMAT "=%s", i ? " " : "",
                               json_object_get_int_member(o, "target"),
                               json_object_get_int_member(o, "lun"),
                               json_object_get_string_member(o, "backend"));
    }
    json_node_unref(r);
    return g_string_free(s, FALSE);
}

static void test_config_save_and_restart(void)
{
    struct pu_daemon d = { 0 };
    g_autofree char *ctl = NULL, *conf = NULL, *img = NULL, *spec = NULL, *before = NULL;
    g_autofree char *after = NULL;
    struct stat st;
    struct vfe *fe;
    uint8_t *buf;
    int fd;

    pu_daemon_init(&d);
    ctl = ctl_path(&d);
    conf = g_build_filename(d.dir, "target.json", NULL);
    img = g_build_filename(d.dir, "data.img", NULL);
    g_assert_true(g_file_set_contents(conf, "{\"version\": 1, \"backends\": [], \"controllers\":"
                                            " [{\"name\": \"default\", \"luns\": []}]}", -1,
                                      NULL));
    {
        const char *args[] = { "--config", conf, "--lun", "0=null:1G", "--control", ctl, NULL };

        pu_daemon_start(&d, args);
    }
    fd = ctl_client_connect(ctl);
    g_assert_cmpint(fd, >=, 0);
    /* An empty file that size= extends (the file backend does not create files). */
    g_assert_true(g_file_set_contents(img, "", 0, NULL));
    spec = g_strdup_printf("file:%s,size=8M", img);
    json_node_unref(pu_ctl_ok(fd, "backend-add",
                              pu_jobj("name", pu_jstr("data"), "spec", pu_jstr(spec), NULL)));
    json_node_unref(pu_ctl_ok(fd, "lun-map",
                              pu_jobj("lun", pu_jint(3), "backend", pu_jstr("data"), NULL)));
    fe = pu_connect(&d, 1);
    pu_make_ready(fe, 3);
    buf = vfe_alloc(fe, 512, 512);
    memset(buf, 0x5c, 512);
    rw_block(fe, 3, true, 9, buf);
    vfe_free(fe, buf);
    vfe_close(fe);
    /* Grown before the save: it must come back at its new size, not size=8M. */
    json_node_unref(pu_ctl_ok(fd, "backend-resize",
                              pu_jobj("name", pu_jstr("data"), "size", pu_jstr("16M"), NULL)));
    before = lun_list_words(fd);
    g_assert_cmpstr(before, ==, "0:0=lun0:0 0:3=data");
    json_node_unref(pu_ctl_ok(fd, "config-save", NULL));
    close(fd);
    g_assert_cmpint(stat(conf, &st), ==, 0);
    g_assert_cmpuint(st.st_mode & 0777, ==, 0600);
    g_assert_cmpint(pu_daemon_stop(&d, false), ==, 0);

    /* The same file alone brings it all back. */
    {
        const char *args[] = { "--config", conf, "--control", ctl, NULL };

        pu_daemon_start(&d, args);
    }
    fd = ctl_client_connect(ctl);
    g_assert_cmpint(fd, >=, 0);
    after = lun_list_words(fd);
    g_assert_cmpstr(after, ==, before);
    fe = pu_connect(&d, 1);
    pu_make_ready(fe, 3);
    {
        uint64_t blocks;
        uint32_t bsize;

        pu_read_capacity16(fe, 3, &blocks, &bsize);
        g_assert_cmpuint(blocks * bsize, ==, 16u << 20);
    }
    buf = vfe_alloc(fe, 512, 512);
    rw_block(fe, 3, false, 9, buf);
    for (unsigned i = 0; i < 512; i++) {
        g_assert_cmphex(buf[i], ==, 0x5c);
    }
    vfe_free(fe, buf);
    vfe_close(fe);
    close(fd);
    g_assert_cmpint(pu_daemon_stop(&d, false), ==, 0);

    /* A wrong file: refused at start, naming what is wrong. */
    g_assert_true(g_file_set_contents(conf, "{\"version\": 1, \"backends\": [{\"name\": \"x\","
                                            " \"spec\": \"ram:1M\"}], \"controllers\": [{\"name\":"
                                            " \"default\", \"luns\": [{\"target\": 0, \"lun\": 1,"
                                            " \"backend\": \"nope\"}]}]}", -1, NULL));
    {
        const char *args[] = { "--config", conf, NULL };
        int status;

        d.capture_log = true;
        g_assert_false(pu_daemon_try_start(&d, args, &status));
        g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
        g_assert_cmpint(pu_daemon_log_count(&d, 0, "luns\\[0\\]: no backend named 'nope'"),
                        ==, 1);
    }
    pu_daemon_cleanup(&d);
}

/* ---- the socket itself ------------------------------------------------- */

static void test_socket_is_private_and_robust(void)
{
    struct pu_daemon d = { 0 };
    g_autofree char *ctl = NULL;
    struct stat st;
    char line[512];
    int raw, fd;
    ssize_t n;

    start(&d, "0=null:1G");
    ctl = ctl_path(&d);
    g_assert_cmpint(stat(ctl, &st), ==, 0);
    g_assert_cmpuint(st.st_mode & 0777, ==, 0600);

    /* A client that sends a request in pieces, with garbage before it. */
    raw = ctl_client_connect(ctl);
    g_assert_cmpint(raw, >=, 0);
    fd = ctl_client_connect(ctl);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(write(raw, "{\"jsonrpc\":\"2.0\",\"me", 20), ==, 20);
    /* Meanwhile another client is served. */
    json_node_unref(pu_ctl_ok(fd, "version", NULL));
    g_assert_cmpint(write(raw, "thod\":\"version\",\"id\":7}\n", 24), ==, 24);
    n = read(raw, line, sizeof(line) - 1);
    g_assert_cmpint(n, >, 0);
    line[n] = 0;
    g_assert_nonnull(strstr(line, "\"id\":7"));
    g_assert_nonnull(strstr(line, "vhost-scsi-target"));
    /* Deep nesting, not UTF-8, not an object: errors, and the client stays. */
    {
        GString *deep = g_string_new("{\"jsonrpc\":\"2.0\",\"method\":\"version\",\"params\":");

        for (int i = 0; i < 100000; i++) {
            g_string_append(deep, "{\"a\":");
        }
        g_string_append(deep, "\n");
        g_assert_cmpint(write(raw, deep->str, deep->len), ==, (ssize_t)deep->len);
        g_string_free(deep, TRUE);
    }
    n = read(raw, line, sizeof(line) - 1);
    g_assert_cmpint(n, >, 0);
    line[n] = 0;
    g_assert_nonnull(strstr(line, "-32700"));
    g_assert_cmpint(write(raw, "\xff\xfe\n", 3), ==, 3);
    n = read(raw, line, sizeof(line) - 1);
    g_assert_cmpint(n, >, 0);
    line[n] = 0;
    g_assert_nonnull(strstr(line, "UTF-8"));
    close(raw);
    json_node_unref(pu_ctl_ok(fd, "lun-list", NULL));
    close(fd);
    g_assert_cmpint(pu_daemon_stop(&d, false), ==, 0);
    /* Removed at exit. */
    g_assert_cmpint(stat(ctl, &st), ==, -1);
    pu_daemon_cleanup(&d);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    signal(SIGPIPE, SIG_IGN);
    g_test_add_func("/live-lun/changes-seen-by-a-front-end", test_changes_seen_by_a_front_end);
    g_test_add_func("/live-lun/cycles-under-verified-io", test_cycles_under_verified_io);
    g_test_add_func("/live-lun/remove-with-reads-waiting-for-a-rate-limit",
                    test_remove_with_reads_waiting_for_a_rate_limit);
    g_test_add_func("/live-lun/named-backend-shared-at-two-luns",
                    test_named_backend_shared_at_two_luns);
    g_test_add_func("/live-lun/config-save-and-restart", test_config_save_and_restart);
    g_test_add_func("/live-lun/socket-is-private-and-robust", test_socket_is_private_and_robust);
    return g_test_run();
}
