/*
 * Fuzz target for the control protocol (hw/control/control-server.c): the
 * input is what one client sends down the control socket (any bytes: lines
 * of JSON-RPC or not, invalid UTF-8, a line past the server's 2 KiB limit),
 * then it half-closes.  The server runs on its own thread as in the daemon,
 * with a method table that serves a scsi_target holding a RAM and a null
 * LUN: lun-list and lun-resize (scsi_lun_resize, as the daemon's does: the
 * null LUN grows, the RAM LUN refuses), echo, fail, and later (answered only after the client left, so
 * answers that go nowhere are covered).  The daemon's own method bodies
 * (hw/daemon/target-control.c) open backends from specs (files, iSCSI portals)
 * and are not driven here; their params parsing is json-member's and their
 * specs are fuzz-lun-spec's.  Oracle: every line the server sends is a
 * JSON-RPC 2.0 response (an id, exactly one of result and error, an error
 * with an integer code and a message), there are no more of them than the
 * requests sent plus one, the server closes within 10 s, and nothing leaks.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "control-client.h"
#include "control-server.h"
#include "fuzz-common.h"
#include "json-strict.h"
#include "scsi-disk.h"

#define FUZZ_CTL_MAX_REQUEST 2048
#define FUZZ_CTL_TIMEOUT_MS 10000
#define FUZZ_RAM_MAX (8u << 20)

struct fuzz_ctl {
    char *dir, *path;
    struct iothread *main;
    struct ctl_server *s;
    struct scsi_target *t;
    GPtrArray *held;            /* struct ctl_call *, answered after the client left */
};

static struct scsi_lun *lun_param(struct ctl_call *call, struct fuzz_ctl *x, JsonObject *p)
{
    static const struct json_member spec[] = {
        { "target", JSON_M_INT, true }, { "lun", JSON_M_INT }, { "size", JSON_M_INT, true },
    };
    g_autoptr(JsonNode) n = json_node_init_object(json_node_alloc(), p);
    g_autofree char *err = json_check_object(n, spec, G_N_ELEMENTS(spec));
    gint64 port, lun;
    struct scsi_lun *l;

    if (err) {
        ctl_call_error(call, CTL_E_INVALID_PARAMS, 0, "%s", err);
        return NULL;
    }
    port = json_object_get_int_member_with_default(p, "target", 0);
    lun = json_object_get_int_member(p, "lun");
    l = port >= 0 && port <= SCSI_TARGET_MAX_PORT && lun >= 0 && lun <= SCSI_TARGET_MAX_LUN
            ? scsi_target_lun(x->t, (unsigned)port, (unsigned)lun) : NULL;
    if (!l) {
        ctl_call_fail(call, -ENOENT, "no LUN is mapped there");
    }
    return l;
}

static JsonNode *lun_json(struct scsi_lun *l)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, scsi_lun_name(l));
    json_builder_set_member_name(b, "size");
    json_builder_add_int_value(b, (gint64)backend_size(scsi_lun_backend(l)));
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static void m_lun_list(struct ctl_call *call, JsonObject *params, void *opaque)
{
    struct fuzz_ctl *x = opaque;
    JsonArray *a = json_array_new();
    JsonNode *n = json_node_alloc();

    for (unsigned i = 0; i < scsi_target_lun_count(x->t); i++) {
        json_array_add_element(a, lun_json(scsi_target_lun_at(x->t, i)));
    }
    ctl_call_reply(call, json_node_init_array(n, a));
    json_array_unref(a);
}

static void m_lun_resize(struct ctl_call *call, JsonObject *params, void *opaque)
{
    struct scsi_lun *l = lun_param(call, opaque, params);
    g_autoptr(GError) err = NULL;
    gint64 size;
    int ret;

    if (!l) {
        return;
    }
    size = json_object_get_int_member_with_default(params, "size", 0);
    /* The RAM LUN's memory is real: bounded, so the fuzzer does not run out. */
    if (size < 0 || (!strcmp(scsi_lun_name(l), "fuzz-ram") && size > FUZZ_RAM_MAX)) {
        ctl_call_error(call, CTL_E_INVALID_PARAMS, 0, "size out of range");
        return;
    }
    ret = scsi_lun_resize(l, (uint64_t)size, &err);
    if (ret < 0) {
        ctl_call_fail_error(call, err);
        return;
    }
    ctl_call_reply(call, lun_json(l));
}

static void m_echo(struct ctl_call *call, JsonObject *params, void *opaque)
{
    ctl_call_reply(call, json_node_init_object(json_node_alloc(), params));
}

static void m_fail(struct ctl_call *call, JsonObject *params, void *opaque)
{
    ctl_call_fail(call, -ENOSPC, NULL);
}

static void m_later(struct ctl_call *call, JsonObject *params, void *opaque)
{
    g_ptr_array_add(((struct fuzz_ctl *)opaque)->held, call);
}

static const struct ctl_method methods[] = {
    { "lun-list", m_lun_list }, { "lun-resize", m_lun_resize }, { "echo", m_echo },
    { "fail", m_fail }, { "later", m_later },
};

static void start_on_main(void *opaque)
{
    struct fuzz_ctl *x = opaque;
    struct ctl_server_config cfg = {
        .name = "fuzz-ctl", .main = x->main, .methods = methods,
        .nmethods = G_N_ELEMENTS(methods), .opaque = x, .max_request = FUZZ_CTL_MAX_REQUEST,
    };

    x->s = ctl_server_new(&cfg, x->path, NULL);
}

/* The calls held by "later", answered now that their client is gone. */
static void answer_held(void *opaque)
{
    struct fuzz_ctl *x = opaque;

    for (guint i = 0; i < x->held->len; i++) {
        ctl_call_reply(g_ptr_array_index(x->held, i), NULL);
    }
    g_ptr_array_set_size(x->held, 0);
}

static struct fuzz_ctl x;

static void stop_on_main(void *opaque)
{
    ctl_server_free(((struct fuzz_ctl *)opaque)->s);
}

/* At exit: the socket file and its directory go, so runs leave nothing in /tmp. */
static void fuzz_ctl_cleanup(void)
{
    iothread_run_sync(x.main, stop_on_main, &x);
    iothread_free(x.main);
    g_rmdir(x.dir);
}

static struct fuzz_ctl *fuzz_ctl_get(void)
{

    if (!x.s) {
        x.dir = g_dir_make_tmp("fuzz-ctl-XXXXXX", NULL);
        x.path = x.dir ? g_build_filename(x.dir, "ctl.sock", NULL) : NULL;
        x.held = g_ptr_array_new();
        x.t = fuzz_target_new();
        x.main = iothread_new("fuzz-ctl-main", 0, 0);
        if (!x.path || iothread_start(x.main) < 0) {
            abort();
        }
        iothread_run_sync(x.main, start_on_main, &x);
        if (!x.s) {
            abort();
        }
        atexit(fuzz_ctl_cleanup);
    }
    return &x;
}

/* One line the server sent: a JSON-RPC 2.0 response, or abort. */
static void check_response(const char *line, size_t len)
{
    g_autoptr(JsonParser) p = json_parser_new();
    JsonObject *o, *e;

    if (!json_parser_load_from_data(p, line, (gssize)len, NULL) ||
        !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(p))) {
        abort();
    }
    o = json_node_get_object(json_parser_get_root(p));
    if (g_strcmp0(json_object_get_string_member_with_default(o, "jsonrpc", NULL), "2.0") ||
        !json_object_has_member(o, "id") ||
        json_object_has_member(o, "result") == json_object_has_member(o, "error")) {
        abort();
    }
    if (json_object_has_member(o, "error")) {
        e = json_object_get_object_member(o, "error");
        if (!e || !json_object_has_member(e, "code") || !json_object_has_member(e, "message") ||
            json_node_get_value_type(json_object_get_member(e, "code")) != G_TYPE_INT64) {
            abort();
        }
    }
}

/* Everything the server sends until it closes, as lines; how many there were. */
static unsigned read_answers(int fd)
{
    g_autoptr(GByteArray) in = g_byte_array_new();
    gint64 deadline = g_get_monotonic_time() + FUZZ_CTL_TIMEOUT_MS * 1000ll;
    unsigned lines = 0;
    uint8_t buf[16384];
    uint8_t *nl;

    for (;;) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        gint64 left = (deadline - g_get_monotonic_time()) / 1000;
        ssize_t n;
        int ready;

        if (left <= 0) {
            abort();            /* the server neither answered nor closed: a hang */
        }
        /* libFuzzer's -timeout alarm interrupts the wait: not an answer. */
        ready = poll(&pfd, 1, (int)left);
        if (ready < 0 && errno == EINTR) {
            continue;
        }
        if (ready <= 0) {
            abort();
        }
        n = recv(fd, buf, sizeof(buf), 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        g_byte_array_append(in, buf, (guint)n);
        while ((nl = memchr(in->data, '\n', in->len))) {
            check_response((const char *)in->data, (size_t)(nl - in->data));
            lines++;
            g_byte_array_remove_range(in, 0, (guint)(nl - in->data) + 1);
        }
    }
    if (in->len) {
        abort();                /* half a response */
    }
    return lines;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_ctl *x;
    unsigned requests = 1;
    size_t off = 0;
    int fd;

    fuzz_quiet_logs();
    x = fuzz_ctl_get();
    fd = ctl_client_connect(x->path);
    if (fd < 0) {
        abort();
    }
    for (size_t i = 0; i < size; i++) {
        requests += data[i] == '\n';
    }
    while (off < size) {
        ssize_t n = send(fd, data + off, size - off, MSG_NOSIGNAL);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;              /* dropped (a line too long): what it said is read below */
        }
        off += (size_t)n;
    }
    shutdown(fd, SHUT_WR);
    if (read_answers(fd) > requests) {
        abort();
    }
    close(fd);
    iothread_run_sync(x->main, answer_held, x);
    return 0;
}
