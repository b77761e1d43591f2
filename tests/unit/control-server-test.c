/*
 * Specification of the control socket's server (hw/control/control-server.c)
 * and client (control-client.c): JSON-RPC 2.0, one request per line —
 *  - a request is answered by its id (a number or a string, echoed as it
 *    came), a notification (no id) runs and gets no answer;
 *  - what is not JSON-RPC gets the standard error (parse error with id
 *    null, invalid request, method not found, invalid params) and the
 *    client stays connected; a line over the size limit is answered and
 *    the client dropped; deep nesting and invalid UTF-8 are parse errors;
 *  - a method may answer later: answers go out in the order they finish,
 *    matched by id, and an answer for a client that left, or after the
 *    server closed, goes nowhere;
 *  - a client that never reads its answers is dropped alone, past the
 *    output limit; clients past the limit are refused; a stale socket file
 *    is replaced, a live server's is not; the socket is mode 0600;
 *  - what a method keeps for a client is that client's alone, and goes
 *    with it; `method-list` names every method served, sorted.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "control-client.h"
#include "control-server.h"

#define TIMEOUT_MS 10000

struct fx {
    char *dir, *path;
    struct iothread *main;
    struct ctl_server *s;
    GError *start_err;          /* why s is NULL */
    unsigned notified;
    GPtrArray *held;            /* struct ctl_call *, for "later" */
    unsigned counts_freed;      /* "count"'s per-client state destroyed */
};

/* "count"'s state for one client. */
struct client_count {
    unsigned n;
    unsigned *freed;
};

static void client_count_free(void *p)
{
    struct client_count *c = p;

    (*c->freed)++;
    g_free(c);
}

static void m_echo(struct ctl_call *call, JsonObject *params, void *opaque)
{
    JsonNode *n = json_node_new(JSON_NODE_OBJECT);
    struct fx *x = opaque;

    x->notified++;
    json_node_set_object(n, params);
    ctl_call_reply(call, n);
}

static void m_later(struct ctl_call *call, JsonObject *params, void *opaque)
{
    g_ptr_array_add(((struct fx *)opaque)->held, call);
}

static void m_fail(struct ctl_call *call, JsonObject *params, void *opaque)
{
    ctl_call_fail(call, -ENOSPC, "no room");
}

static void m_big(struct ctl_call *call, JsonObject *params, void *opaque)
{
    g_autofree char *s = g_malloc(65537);

    memset(s, 'x', 65536);
    s[65536] = 0;
    ctl_call_reply(call, json_node_init_string(json_node_alloc(), s));
}

/* How many times the calling client has called it. */
static void m_count(struct ctl_call *call, JsonObject *params, void *opaque)
{
    struct client_count *c = ctl_call_client_data(call, "count");

    if (!c) {
        c = g_new0(struct client_count, 1);
        c->freed = &((struct fx *)opaque)->counts_freed;
        ctl_call_set_client_data(call, "count", c, client_count_free);
    }
    ctl_call_reply(call, json_node_init_int(json_node_alloc(), ++c->n));
}

static const struct ctl_method methods[] = {
    { "echo", m_echo }, { "later", m_later }, { "fail", m_fail }, { "big", m_big },
    { "count", m_count },
};

struct on_main {
    struct fx *x;
    unsigned i;
};

static void start_on_main(void *opaque)
{
    struct fx *x = opaque;
    struct ctl_server_config cfg = { .name = "ctl", .main = x->main, .methods = methods,
                                     .nmethods = G_N_ELEMENTS(methods), .opaque = x };

    x->s = ctl_server_new(&cfg, x->path, &x->start_err);
}

static void stop_on_main(void *opaque)
{
    struct fx *x = opaque;

    ctl_server_free(x->s);
    x->s = NULL;
}

static void fx_setup(struct fx *x)
{
    memset(x, 0, sizeof(*x));
    x->dir = g_dir_make_tmp("ctl-test-XXXXXX", NULL);
    g_assert_nonnull(x->dir);
    x->path = g_build_filename(x->dir, "ctl.sock", NULL);
    x->held = g_ptr_array_new();
    x->main = iothread_new("ctl-main", 0, 0);
    g_assert_cmpint(iothread_start(x->main), ==, 0);
    iothread_run_sync(x->main, start_on_main, x);
    g_assert_nonnull(x->s);
}

static void fx_teardown(struct fx *x)
{
    if (x->s) {
        iothread_run_sync(x->main, stop_on_main, x);
    }
    iothread_free(x->main);
    g_assert_cmpuint(x->held->len, ==, 0);
    g_ptr_array_free(x->held, TRUE);
    g_rmdir(x->dir);
    g_free(x->path);
    g_free(x->dir);
}

/* ---- a raw client -------------------------------------------------------- */

static int raw_connect(struct fx *x)
{
    int fd = ctl_client_connect(x->path);

    g_assert_cmpint(fd, >=, 0);
    return fd;
}

static void raw_send(int fd, const char *s)
{
    size_t len = strlen(s);

    while (len) {
        ssize_t n = send(fd, s, len, MSG_NOSIGNAL);

        g_assert_cmpint(n, >, 0);
        s += n;
        len -= (size_t)n;
    }
}

/* The next line from fd (bounded wait), or NULL at end of stream. */
static char *raw_line(int fd)
{
    GString *line = g_string_new(NULL);
    gint64 deadline = g_get_monotonic_time() + TIMEOUT_MS * 1000;

    for (;;) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        char c;
        ssize_t n;

        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_assert_cmpint(poll(&p, 1, TIMEOUT_MS), ==, 1);
        n = recv(fd, &c, 1, 0);
        if (n <= 0) {
            g_string_free(line, TRUE);
            return NULL;
        }
        if (c == '\n') {
            return g_string_free(line, FALSE);
        }
        g_string_append_c(line, c);
    }
}

/* The next answer, parsed. */
static JsonObject *raw_answer(int fd, JsonParser *p)
{
    g_autofree char *line = raw_line(fd);

    g_assert_nonnull(line);
    g_assert_true(json_parser_load_from_data(p, line, -1, NULL));
    g_assert_true(JSON_NODE_HOLDS_OBJECT(json_parser_get_root(p)));
    return json_node_get_object(json_parser_get_root(p));
}

static gint64 error_code(JsonObject *o)
{
    g_assert_true(json_object_has_member(o, "error"));
    return json_object_get_int_member(json_object_get_object_member(o, "error"), "code");
}

/* ---- requests ------------------------------------------------------------ */

static void test_answered_by_id(void)
{
    struct fx x;
    g_autoptr(JsonParser) p = json_parser_new();
    JsonNode *result = NULL;
    g_autofree char *err = NULL;
    JsonObject *o;
    int fd, code;

    fx_setup(&x);
    fd = raw_connect(&x);
    raw_send(fd, "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":{\"a\":1},\"id\":41}\n");
    o = raw_answer(fd, p);
    g_assert_cmpstr(json_object_get_string_member(o, "jsonrpc"), ==, "2.0");
    g_assert_cmpint(json_object_get_int_member(o, "id"), ==, 41);
    g_assert_cmpint(json_object_get_int_member(json_object_get_object_member(o, "result"), "a"),
                    ==, 1);
    /* A string id comes back as a string; CRLF line ends are fine. */
    raw_send(fd, "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":\"x-1\"}\r\n");
    o = raw_answer(fd, p);
    g_assert_cmpstr(json_object_get_string_member(o, "id"), ==, "x-1");
    /* A notification runs and is not answered: the next answer is the call's. */
    raw_send(fd, "{\"jsonrpc\":\"2.0\",\"method\":\"echo\"}\n"
                 "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":2}\n");
    o = raw_answer(fd, p);
    g_assert_cmpint(json_object_get_int_member(o, "id"), ==, 2);
    g_assert_cmpuint(x.notified, ==, 4);
    /* The client library: a result, and a failure with its errno. */
    g_assert_cmpint(ctl_client_call(fd, "echo", NULL, TIMEOUT_MS, &result, &code, &err), ==, 0);
    g_assert_true(JSON_NODE_HOLDS_OBJECT(result));
    json_node_unref(result);
    g_assert_cmpint(ctl_client_call(fd, "fail", NULL, TIMEOUT_MS, &result, &code, &err), ==,
                    -EREMOTEIO);
    g_assert_cmpint(code, ==, CTL_E_FAILED);
    g_assert_cmpstr(err, ==, "no room");
    close(fd);
    fx_teardown(&x);
}

static void test_errors_keep_the_client(void)
{
    static const struct {
        const char *line;
        int code;
        bool has_id;
    } cases[] = {
        { "{not json", CTL_E_PARSE, false },
        { "[1,2]", CTL_E_PARSE, false },                      /* a batch: not an object */
        { "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":1} {}", CTL_E_PARSE, false },
        { "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":1,\"id\":2}", CTL_E_PARSE, false },
        { "{\"method\":\"echo\",\"id\":3}", CTL_E_INVALID_REQUEST, true },
        { "{\"jsonrpc\":\"1.0\",\"method\":\"echo\",\"id\":4}", CTL_E_INVALID_REQUEST, true },
        { "{\"jsonrpc\":\"2.0\",\"method\":7,\"id\":5}", CTL_E_INVALID_REQUEST, true },
        { "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[1],\"id\":6}",
          CTL_E_INVALID_REQUEST, true },
        { "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"extra\":1,\"id\":7}",
          CTL_E_INVALID_REQUEST, true },
        { "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":true}", CTL_E_INVALID_REQUEST, false },
        { "{\"jsonrpc\":\"2.0\",\"method\":\"nope\",\"id\":8}", CTL_E_NO_METHOD, true },
    };
    struct fx x;
    g_autoptr(JsonParser) p = json_parser_new();
    int fd;

    fx_setup(&x);
    fd = raw_connect(&x);
    for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *line = g_strdup_printf("%s\n", cases[i].line);
        JsonObject *o;

        raw_send(fd, line);
        o = raw_answer(fd, p);
        g_assert_cmpint(error_code(o), ==, cases[i].code);
        g_assert_cmpint(JSON_NODE_HOLDS_NULL(json_object_get_member(o, "id")), ==,
                        !cases[i].has_id);
    }
    /* Not UTF-8; nested past the bound (json-glib alone would recurse until it crashed). */
    raw_send(fd, "{\"jsonrpc\":\"2.0\",\"method\":\"\xff\",\"id\":9}\n");
    g_assert_cmpint(error_code(raw_answer(fd, p)), ==, CTL_E_PARSE);
    {
        GString *deep = g_string_new("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":");

        for (int i = 0; i < 200000; i++) {
            g_string_append(deep, "{\"a\":");
        }
        g_string_append_c(deep, '\n');
        raw_send(fd, deep->str);
        g_string_free(deep, TRUE);
    }
    g_assert_cmpint(error_code(raw_answer(fd, p)), ==, CTL_E_PARSE);
    /* Still served. */
    raw_send(fd, "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":10}\n");
    g_assert_cmpint(json_object_get_int_member(raw_answer(fd, p), "id"), ==, 10);
    close(fd);
    fx_teardown(&x);
}

static void test_too_long_line_drops_that_client(void)
{
    struct fx x;
    g_autoptr(JsonParser) p = json_parser_new();
    g_autofree char *junk = g_malloc(CTL_MAX_REQUEST + 2);
    g_autofree char *end = NULL;
    int fd, other;

    fx_setup(&x);
    fd = raw_connect(&x);
    other = raw_connect(&x);
    memset(junk, ' ', CTL_MAX_REQUEST + 1);
    junk[CTL_MAX_REQUEST + 1] = 0;
    raw_send(fd, junk);
    g_assert_cmpint(error_code(raw_answer(fd, p)), ==, CTL_E_INVALID_REQUEST);
    end = raw_line(fd);
    g_assert_null(end);
    raw_send(other, "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":1}\n");
    g_assert_cmpint(json_object_get_int_member(raw_answer(other, p), "id"), ==, 1);
    close(fd);
    close(other);
    fx_teardown(&x);
}

/* ---- answers that come later --------------------------------------------- */

static void finish_on_main(void *opaque)
{
    struct on_main *m = opaque;
    struct ctl_call *call = g_ptr_array_steal_index(m->x->held, m->i);

    ctl_call_reply(call, json_node_init_int(json_node_alloc(), 100 + m->i));
}

static void count_on_main(void *opaque)
{
}

static void test_later_answers_in_finishing_order(void)
{
    struct fx x;
    g_autoptr(JsonParser) p = json_parser_new();
    struct on_main m = { &x, 1 };
    JsonObject *o;
    int fd;

    fx_setup(&x);
    fd = raw_connect(&x);
    raw_send(fd, "{\"jsonrpc\":\"2.0\",\"method\":\"later\",\"id\":1}\n"
                 "{\"jsonrpc\":\"2.0\",\"method\":\"later\",\"id\":2}\n"
                 "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":3}\n");
    /* The quick one is not held up by the two waiting. */
    o = raw_answer(fd, p);
    g_assert_cmpint(json_object_get_int_member(o, "id"), ==, 3);
    g_assert_cmpuint(x.held->len, ==, 2);
    iothread_run_sync(x.main, finish_on_main, &m);
    o = raw_answer(fd, p);
    g_assert_cmpint(json_object_get_int_member(o, "id"), ==, 2);
    g_assert_cmpint(json_object_get_int_member(o, "result"), ==, 101);
    m.i = 0;
    iothread_run_sync(x.main, finish_on_main, &m);
    o = raw_answer(fd, p);
    g_assert_cmpint(json_object_get_int_member(o, "id"), ==, 1);
    close(fd);
    fx_teardown(&x);
}

/* A call that outlived its client has no client state; what it sets is destroyed at once. */
static void set_state_on_main(void *opaque)
{
    struct on_main *m = opaque;
    struct ctl_call *call = m->x->held->pdata[m->i];
    struct client_count *c = g_new0(struct client_count, 1);

    g_assert_null(ctl_call_client_data(call, "count"));
    c->freed = &m->x->counts_freed;
    ctl_call_set_client_data(call, "count", c, client_count_free);
    g_assert_null(ctl_call_client_data(call, "count"));
    g_assert_cmpuint(m->x->counts_freed, ==, 1);
}

static void test_later_answer_for_a_client_that_left(void)
{
    struct fx x;
    g_autoptr(JsonParser) p = json_parser_new();
    struct on_main m = { &x, 0 };
    int fd, other;

    fx_setup(&x);
    fd = raw_connect(&x);
    raw_send(fd, "{\"jsonrpc\":\"2.0\",\"method\":\"later\",\"id\":1}\n");
    other = raw_connect(&x);
    raw_send(other, "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":1}\n");
    raw_answer(other, p);      /* the held call has arrived: the loop serves in order */
    g_assert_cmpuint(x.held->len, ==, 1);
    close(fd);
    /* The server has seen the hang-up once it answers another request. */
    raw_send(other, "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":2}\n");
    raw_answer(other, p);
    iothread_run_sync(x.main, count_on_main, NULL);
    iothread_run_sync(x.main, set_state_on_main, &m);
    /* Answered into nowhere: nothing touches the freed client (ASan). */
    iothread_run_sync(x.main, finish_on_main, &m);
    close(other);
    fx_teardown(&x);
}

/*
 * A call outlives the server (the daemon answers an iSCSI open it called
 * off after closing the control socket): the client sees the socket
 * close, and the late answer touches nothing freed (ASan).
 */
static void test_later_answer_after_the_server_closed(void)
{
    struct fx x;
    g_autoptr(JsonParser) p = json_parser_new();
    struct on_main m = { &x, 0 };
    JsonObject *o;
    char *line;
    int fd;

    fx_setup(&x);
    fd = raw_connect(&x);
    raw_send(fd, "{\"jsonrpc\":\"2.0\",\"method\":\"later\",\"id\":1}\n"
                 "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":2}\n");
    o = raw_answer(fd, p);
    g_assert_cmpint(json_object_get_int_member(o, "id"), ==, 2);
    g_assert_cmpuint(x.held->len, ==, 1);
    iothread_run_sync(x.main, stop_on_main, &x);
    line = raw_line(fd);
    g_assert_null(line);
    iothread_run_sync(x.main, finish_on_main, &m);
    close(fd);
    fx_teardown(&x);
}

/* ---- limits ------------------------------------------------------------- */

static void test_reader_that_never_reads_is_dropped_alone(void)
{
    struct fx x;
    g_autoptr(JsonParser) p = json_parser_new();
    int fd, other;
    bool dropped = false;

    fx_setup(&x);
    fd = raw_connect(&x);
    other = raw_connect(&x);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*does not read its answers*");
    /* 64 KiB answers, never read: the server buffers up to its limit, then drops it. */
    for (unsigned i = 0; i < 4 * (CTL_MAX_OUTPUT >> 16) && !dropped; i++) {
        static const char req[] = "{\"jsonrpc\":\"2.0\",\"method\":\"big\",\"id\":1}\n";
        ssize_t n = send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL);

        dropped = n < 0;
        if (i % 16 == 15) {
            raw_send(other, "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":5}\n");
            g_assert_cmpint(json_object_get_int_member(raw_answer(other, p), "id"), ==, 5);
        }
    }
    /* Either the send failed already or reading now ends at its end of stream. */
    if (!dropped) {
        char buf[65536];
        ssize_t n;

        while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
        }
        g_assert_cmpint(n, ==, 0);
    }
    raw_send(other, "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":6}\n");
    g_assert_cmpint(json_object_get_int_member(raw_answer(other, p), "id"), ==, 6);
    g_test_assert_expected_messages();
    close(fd);
    close(other);
    fx_teardown(&x);
}

static void test_clients_past_the_limit_refused(void)
{
    struct fx x;
    g_autoptr(JsonParser) p = json_parser_new();
    int fds[CTL_MAX_CLIENTS + 1];
    g_autofree char *none = NULL;

    fx_setup(&x);
    for (unsigned i = 0; i < CTL_MAX_CLIENTS; i++) {
        fds[i] = raw_connect(&x);
        /* Accepted once it is answered. */
        raw_send(fds[i], "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":1}\n");
        raw_answer(fds[i], p);
    }
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*refused a client*");
    fds[CTL_MAX_CLIENTS] = raw_connect(&x);
    none = raw_line(fds[CTL_MAX_CLIENTS]);
    g_assert_null(none);
    g_test_assert_expected_messages();
    for (unsigned i = 0; i <= CTL_MAX_CLIENTS; i++) {
        close(fds[i]);
    }
    fx_teardown(&x);
}

/* ---- state per client ------------------------------------------------------ */

static gint64 count_call(int fd)
{
    JsonNode *result = NULL;
    g_autofree char *err = NULL;
    gint64 n;
    int code;

    g_assert_cmpint(ctl_client_call(fd, "count", NULL, TIMEOUT_MS, &result, &code, &err), ==, 0);
    n = json_node_get_int(result);
    json_node_unref(result);
    return n;
}

static void test_client_state_is_per_client(void)
{
    struct fx x;
    int a, b, c;

    fx_setup(&x);
    a = raw_connect(&x);
    b = raw_connect(&x);
    g_assert_cmpint(count_call(a), ==, 1);
    g_assert_cmpint(count_call(a), ==, 2);
    /* B's calls neither see nor change A's. */
    g_assert_cmpint(count_call(b), ==, 1);
    g_assert_cmpint(count_call(a), ==, 3);
    g_assert_cmpint(count_call(b), ==, 2);
    /*
     * A's goes with A, B's stays.  A's end of stream is in the kernel
     * before B's call is sent, but the loop may serve B's call first and
     * see A's end only in a later turn: each run_sync is one more turn of
     * the loop (its wake-up makes the loop look at every fd again), so A's
     * end is seen within a few; a bound on turns, not on time.
     */
    close(a);
    g_assert_cmpint(count_call(b), ==, 3);
    for (unsigned turn = 0; turn < 100 && x.counts_freed == 0; turn++) {
        iothread_run_sync(x.main, count_on_main, NULL);
    }
    g_assert_cmpuint(x.counts_freed, ==, 1);
    /* A new client starts afresh. */
    c = raw_connect(&x);
    g_assert_cmpint(count_call(c), ==, 1);
    close(b);
    close(c);
    fx_teardown(&x);
    g_assert_cmpuint(x.counts_freed, ==, 3);
}

/* ---- method-list ------------------------------------------------------------ */

static void test_method_list(void)
{
    static const char *const want[] = { "big", "count", "echo", "fail", "later", "method-list" };
    g_autoptr(JsonParser) p = json_parser_new();
    struct fx x;
    JsonArray *a;
    int fd;

    fx_setup(&x);
    fd = raw_connect(&x);
    raw_send(fd, "{\"jsonrpc\":\"2.0\",\"method\":\"method-list\",\"id\":1}\n");
    a = json_object_get_array_member(json_object_get_object_member(raw_answer(fd, p), "result"),
                                     "methods");
    g_assert_cmpuint(json_array_get_length(a), ==, G_N_ELEMENTS(want));
    for (unsigned i = 0; i < G_N_ELEMENTS(want); i++) {
        JsonObject *o = json_array_get_object_element(a, i);

        g_assert_cmpstr(json_object_get_string_member(o, "name"), ==, want[i]);
    }
    /* It takes no params. */
    raw_send(fd, "{\"jsonrpc\":\"2.0\",\"method\":\"method-list\",\"params\":{\"all\":true},"
                 "\"id\":2}\n");
    g_assert_cmpint(error_code(raw_answer(fd, p)), ==, CTL_E_INVALID_PARAMS);
    close(fd);
    fx_teardown(&x);
}

/* ---- the socket file ------------------------------------------------------ */

static void test_socket_file(void)
{
    struct fx x;
    struct fx y;
    struct stat st;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    g_autofree char *why = NULL;
    int stale;

    fx_setup(&x);
    g_assert_cmpint(stat(x.path, &st), ==, 0);
    g_assert_cmpuint(st.st_mode & 0777, ==, 0600);
    /* A second server on a live socket is refused, saying why, and logs nothing. */
    y = x;
    y.s = NULL;
    iothread_run_sync(x.main, start_on_main, &y);
    g_assert_null(y.s);
    g_assert_error(y.start_err, VS_ERROR, EADDRINUSE);
    why = g_strdup_printf("cannot listen on control socket %s: another daemon is listening there",
                          x.path);
    g_assert_cmpstr(y.start_err->message, ==, why);
    g_clear_error(&y.start_err);
    iothread_run_sync(x.main, stop_on_main, &x);
    /* Gone with its server. */
    g_assert_cmpint(stat(x.path, &st), ==, -1);

    /* A socket file nobody listens on (a daemon that died) is replaced. */
    stale = socket(AF_UNIX, SOCK_STREAM, 0);
    memcpy(sa.sun_path, x.path, strlen(x.path));
    g_assert_cmpint(bind(stale, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
    close(stale);
    iothread_run_sync(x.main, start_on_main, &x);
    g_assert_nonnull(x.s);
    fx_teardown(&x);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/control/request/answered-by-id", test_answered_by_id);
    g_test_add_func("/control/request/errors-keep-the-client", test_errors_keep_the_client);
    g_test_add_func("/control/request/too-long-line-drops-that-client",
                    test_too_long_line_drops_that_client);
    g_test_add_func("/control/later/answers-in-finishing-order",
                    test_later_answers_in_finishing_order);
    g_test_add_func("/control/later/answer-for-a-client-that-left",
                    test_later_answer_for_a_client_that_left);
    g_test_add_func("/control/later/answer-after-the-server-closed",
                    test_later_answer_after_the_server_closed);
    g_test_add_func("/control/limits/reader-that-never-reads-is-dropped-alone",
                    test_reader_that_never_reads_is_dropped_alone);
    g_test_add_func("/control/limits/clients-past-the-limit-refused",
                    test_clients_past_the_limit_refused);
    g_test_add_func("/control/client-state/per-client", test_client_state_is_per_client);
    g_test_add_func("/control/method-list", test_method_list);
    g_test_add_func("/control/socket-file", test_socket_file);
    return g_test_run();
}
