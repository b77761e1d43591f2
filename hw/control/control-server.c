/*
 * The control socket's server (include/control/control-server.h): accepts
 * clients, frames their bytes into lines, parses each line as a JSON-RPC
 * 2.0 request, dispatches it to the method table and writes the answers
 * back, buffering what a slow client has not read yet.  Everything runs
 * on the main thread's loop and never blocks: sockets are non-blocking,
 * and a client that sends more than the limits allow is answered with an
 * error or dropped, alone.  Each client carries the state methods keep
 * for it between its calls; `method-list` is answered here, from the
 * table the server serves.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <glib.h>

#include "control-server.h"
#include "json-strict.h"
#include "log-limit.h"

/* Requests are small objects: params with a few members. */
static const struct json_limits request_limits = { .max_depth = 8, .max_members = 32 };

struct ctl_client;

struct ctl_server {
    char *name;
    char *path;                /* the socket file we made */
    struct iothread *main;
    const struct ctl_method *methods;
    unsigned nmethods;
    void *opaque;
    size_t max_request;
    int fd;
    GList *clients;
    unsigned nclients;
    unsigned next_id;
    /*
     * The lines a client causes at will (refused, too long, not reading):
     * a client connecting in a loop fills no journal.
     */
    struct log_limit log;
};

struct ctl_client {
    struct ctl_server *s;
    char name[32];
    int fd;
    GByteArray *in;
    GString *out;
    uint32_t events;
    bool closing;              /* close once out is written */
    GList *calls;              /* struct ctl_call *, not answered yet */
    bool *gone;                /* set when freed while a request is handled */
    GData *data;               /* the methods' state for this client (ctl_call_client_data) */
};

struct ctl_call {
    struct ctl_client *c;      /* NULL once the client went away */
    JsonNode *id;              /* NULL: a notification, nothing is sent */
    char *method;
};

static void client_free(struct ctl_client *c);

/* ---- writing answers -------------------------------------------------- */

static void client_watch(struct ctl_client *c)
{
    uint32_t want = (c->closing ? 0 : EPOLLIN) | (c->out->len ? EPOLLOUT : 0);

    if (want != c->events) {
        c->events = want;
        iothread_mod_fd(c->s->main, c->fd, want ? want : EPOLLHUP);
    }
}

/* Writes what can be written now; false if the client had to be dropped. */
static bool client_flush(struct ctl_client *c)
{
    while (c->out->len) {
        ssize_t n = send(c->fd, c->out->str, c->out->len, MSG_NOSIGNAL | MSG_DONTWAIT);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno == EAGAIN) {
            break;
        }
        if (n <= 0) {
            client_free(c);
            return false;
        }
        g_string_erase(c->out, 0, n);
    }
    if (!c->out->len && c->closing) {
        client_free(c);
        return false;
    }
    client_watch(c);
    return true;
}

static void client_send(struct ctl_client *c, JsonNode *msg)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();
    gsize len;
    g_autofree char *text = NULL;

    json_generator_set_root(gen, msg);
    text = json_generator_to_data(gen, &len);
    if (c->out->len + len + 1 > CTL_MAX_OUTPUT) {
        log_limit_warning(&c->s->log, "%s: %s does not read its answers; dropped", c->s->name,
                          c->name);
        client_free(c);
        return;
    }
    g_string_append_len(c->out, text, (gssize)len);
    g_string_append_c(c->out, '\n');
    client_flush(c);
}

static JsonNode *response_new(JsonNode *id)
{
    JsonNode *n = json_node_new(JSON_NODE_OBJECT);
    JsonObject *o = json_object_new();

    json_object_set_string_member(o, "jsonrpc", "2.0");
    json_object_set_member(o, "id", id ? json_node_copy(id) : json_node_new(JSON_NODE_NULL));
    json_node_take_object(n, o);
    return n;
}

static void call_free(struct ctl_call *call)
{
    if (call->c) {
        call->c->calls = g_list_remove(call->c->calls, call);
    }
    if (call->id) {
        json_node_unref(call->id);
    }
    g_free(call->method);
    g_free(call);
}

void ctl_call_reply(struct ctl_call *call, JsonNode *result)
{
    if (call->c && call->id) {
        JsonNode *r = response_new(call->id);

        json_object_set_member(json_node_get_object(r), "result",
                               result ? result : json_node_new(JSON_NODE_NULL));
        result = NULL;
        client_send(call->c, r);
        json_node_unref(r);
    }
    if (result) {
        json_node_unref(result);
    }
    call_free(call);
}

/* An error answer for a request whose id is id (NULL: unknown, null). */
static void send_error(struct ctl_client *c, JsonNode *id, int code, int err, const char *msg)
{
    JsonNode *r = response_new(id);
    JsonObject *e = json_object_new();

    json_object_set_int_member(e, "code", code);
    json_object_set_string_member(e, "message", msg);
    if (err) {
        JsonObject *data = json_object_new();

        json_object_set_int_member(data, "errno", err);
        json_object_set_object_member(e, "data", data);
    }
    json_object_set_object_member(json_node_get_object(r), "error", e);
    client_send(c, r);
    json_node_unref(r);
}

void ctl_call_error(struct ctl_call *call, int code, int err, const char *fmt, ...)
{
    if (call->c && call->id) {
        g_autofree char *msg = NULL;
        va_list ap;

        va_start(ap, fmt);
        msg = g_strdup_vprintf(fmt, ap);
        va_end(ap);
        send_error(call->c, call->id, code, err, msg);
    }
    call_free(call);
}

void ctl_call_fail(struct ctl_call *call, int neg_errno, const char *msg)
{
    ctl_call_error(call, CTL_E_FAILED, -neg_errno, "%s", msg ? msg : g_strerror(-neg_errno));
}

void ctl_call_fail_error(struct ctl_call *call, const GError *err)
{
    ctl_call_fail(call, vs_error_errno(err), err->message);
}


void *ctl_call_client_data(struct ctl_call *call, const char *key)
{
    return call->c ? g_datalist_get_data(&call->c->data, key) : NULL;
}

void ctl_call_set_client_data(struct ctl_call *call, const char *key, void *data,
                              GDestroyNotify destroy)
{
    if (call->c) {
        g_datalist_set_data_full(&call->c->data, key, data, destroy);
    } else if (data && destroy) {
        destroy(data);
    }
}

/* ---- method-list ---------------------------------------------------------- */

static gint by_name(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The names the server answers to, sorted: its table's and this one. */
static void m_method_list(struct ctl_call *call, JsonObject *params, void *opaque)
{
    const struct ctl_server *s = call->c->s;
    g_autoptr(JsonNode) node = json_node_init_object(json_node_alloc(), params);
    g_autofree char *err = json_check_object(node, NULL, 0);
    g_autoptr(GPtrArray) names = g_ptr_array_new();
    g_autoptr(JsonBuilder) b = json_builder_new();

    if (err) {
        ctl_call_error(call, CTL_E_INVALID_PARAMS, 0, "%s", err);
        return;
    }
    g_ptr_array_add(names, (gpointer)CTL_METHOD_LIST);
    for (unsigned i = 0; i < s->nmethods; i++) {
        if (strcmp(s->methods[i].name, CTL_METHOD_LIST)) {
            g_ptr_array_add(names, (gpointer)s->methods[i].name);
        }
    }
    g_ptr_array_sort(names, by_name);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "methods");
    json_builder_begin_array(b);
    for (guint i = 0; i < names->len; i++) {
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "name");
        json_builder_add_string_value(b, names->pdata[i]);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    ctl_call_reply(call, json_builder_get_root(b));
}

static const struct ctl_method method_list = { CTL_METHOD_LIST, m_method_list };

/* ---- reading requests -------------------------------------------------- */

static void handle_request(struct ctl_client *c, const char *line, size_t len)
{
    static const struct json_member request_members[] = {
        { "jsonrpc", JSON_M_STR }, { "method", JSON_M_STR },
        { "params", JSON_M_OBJ, true }, { "id", JSON_M_ANY, true },
    };
    g_autofree char *err = NULL;
    JsonNode *root, *id = NULL;
    size_t at;
    JsonObject *o, *params;
    const struct ctl_method *m = NULL;
    const char *method;
    struct ctl_call *call;

    if (!g_utf8_validate(line, (gssize)len, NULL)) {
        send_error(c, NULL, CTL_E_PARSE, 0, "request is not valid UTF-8");
        return;
    }
    root = json_strict_parse(line, len, &request_limits, &err, &at);
    if (!root) {
        g_autofree char *msg = at == JSON_AT_NONE ? g_strdup(err)
                                                  : g_strdup_printf("byte %zu: %s", at, err);

        send_error(c, NULL, CTL_E_PARSE, 0, msg);
        return;
    }
    o = json_node_get_object(root);
    /* An id is a number or a string (JSON-RPC 2.0 4.); it is echoed as it came. */
    if (json_object_has_member(o, "id")) {
        JsonNode *n = json_object_get_member(o, "id");

        if (!JSON_NODE_HOLDS_VALUE(n) || (json_node_get_value_type(n) != G_TYPE_INT64 &&
                                          json_node_get_value_type(n) != G_TYPE_STRING)) {
            send_error(c, NULL, CTL_E_INVALID_REQUEST, 0, "id must be an integer or a string");
            goto out;
        }
        id = json_node_copy(n);
    }
    err = json_check_object(root, request_members, G_N_ELEMENTS(request_members));
    if (err || strcmp(json_object_get_string_member(o, "jsonrpc"), "2.0")) {
        send_error(c, id, CTL_E_INVALID_REQUEST, 0, err ? err : "jsonrpc must be \"2.0\"");
        goto out;
    }
    method = json_object_get_string_member(o, "method");
    for (unsigned i = 0; i < c->s->nmethods && !m; i++) {
        if (!strcmp(c->s->methods[i].name, method)) {
            m = &c->s->methods[i];
        }
    }
    if (!m && !strcmp(method, CTL_METHOD_LIST)) {
        m = &method_list;
    }
    if (!m) {
        send_error(c, id, CTL_E_NO_METHOD, 0, "no such method");
        goto out;
    }
    if (g_list_length(c->calls) >= CTL_MAX_CALLS) {
        send_error(c, id, CTL_E_FAILED, EBUSY, "too many calls in flight");
        goto out;
    }
    call = g_new0(struct ctl_call, 1);
    call->c = c;
    call->id = id;
    id = NULL;
    call->method = g_strdup(method);
    c->calls = g_list_prepend(c->calls, call);
    params = json_object_has_member(o, "params") ? json_object_get_object_member(o, "params")
                                                   : NULL;
    if (params) {
        m->fn(call, params, c->s->opaque);
    } else {
        g_autoptr(JsonObject) empty = json_object_new();

        m->fn(call, empty, c->s->opaque);
    }
out:
    if (id) {
        json_node_unref(id);
    }
    json_node_unref(root);
}

/* The line under way is past the limit: say so, once, and close after the answer. */
static void request_too_long(struct ctl_client *c)
{
    log_limit_message(&c->s->log, "%s: %s: request longer than %zu bytes; closing the client",
                      c->s->name, c->name, c->s->max_request);
    send_error(c, NULL, CTL_E_INVALID_REQUEST, 0, "request too long");
    c->closing = true;
    client_flush(c);
}

static void client_read(struct ctl_client *c)
{
    uint8_t buf[16384];
    ssize_t n;

    for (;;) {
        n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno == EAGAIN) {
            return;
        }
        if (n <= 0) {
            /* Gone; what it asked for still runs, answered nowhere. */
            client_free(c);
            return;
        }
        g_byte_array_append(c->in, buf, (guint)n);
        for (;;) {
            uint8_t *nl = c->in->len ? memchr(c->in->data, '\n', c->in->len) : NULL;
            size_t len;

            len = nl ? (size_t)(nl - c->in->data) : c->in->len;
            if (len > c->s->max_request) {
                request_too_long(c);
                return;
            }
            if (!nl) {
                break;
            }
            if (len && c->in->data[len - 1] == '\r') {
                len--;
            }
            /* An answer may drop the client (it reads none): stop reading then. */
            {
                g_autofree char *line = g_strndup((const char *)c->in->data, len);
                bool gone = false;

                g_byte_array_remove_range(c->in, 0, (guint)(nl - c->in->data) + 1);
                if (len) {
                    c->gone = &gone;
                    handle_request(c, line, len);
                    if (gone) {
                        return;
                    }
                    c->gone = NULL;
                }
            }
        }
    }
}

static void client_cb(void *opaque, uint32_t events)
{
    struct ctl_client *c = opaque;

    if (events & EPOLLOUT) {
        if (!client_flush(c)) {
            return;
        }
    }
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        if (c->closing) {
            client_free(c);
            return;
        }
        client_read(c);
    }
}

static void client_free(struct ctl_client *c)
{
    struct ctl_server *s = c->s;

    if (c->gone) {
        *c->gone = true;
    }
    for (GList *l = c->calls; l; l = l->next) {
        ((struct ctl_call *)l->data)->c = NULL;
    }
    g_list_free(c->calls);
    g_datalist_clear(&c->data);
    iothread_del_fd(s->main, c->fd);
    close(c->fd);
    g_byte_array_unref(c->in);
    g_string_free(c->out, TRUE);
    s->clients = g_list_remove(s->clients, c);
    s->nclients--;
    g_debug("%s: %s closed", s->name, c->name);
    g_free(c);
}

/* ---- accepting ---------------------------------------------------------- */

static void accept_cb(void *opaque, uint32_t events)
{
    struct ctl_server *s = opaque;
    struct ucred cred;
    socklen_t len = sizeof(cred);
    struct ctl_client *c;
    int fd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

    if (fd < 0) {
        if (errno != EAGAIN && errno != EINTR) {
            log_limit_warning(&s->log, "%s: accept: %s", s->name, g_strerror(errno));
        }
        return;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
        (cred.uid != 0 && cred.uid != geteuid())) {
        log_limit_warning(&s->log, "%s: refused a client of uid %d: only root and uid %d may "
                          "control", s->name, len == sizeof(cred) ? (int)cred.uid : -1,
                          (int)geteuid());
        close(fd);
        return;
    }
    if (s->nclients >= CTL_MAX_CLIENTS) {
        log_limit_warning(&s->log, "%s: refused a client: %u are connected", s->name,
                          s->nclients);
        close(fd);
        return;
    }
    c = g_new0(struct ctl_client, 1);
    c->s = s;
    c->fd = fd;
    snprintf(c->name, sizeof(c->name), "client%u (pid %d)", ++s->next_id, (int)cred.pid);
    c->in = g_byte_array_new();
    c->out = g_string_new(NULL);
    c->events = EPOLLIN;
    g_datalist_init(&c->data);
    if (iothread_add_fd(s->main, fd, EPOLLIN, client_cb, c) < 0) {
        g_byte_array_unref(c->in);
        g_string_free(c->out, TRUE);
        g_free(c);
        close(fd);
        return;
    }
    s->clients = g_list_prepend(s->clients, c);
    s->nclients++;
    g_debug("%s: %s connected", s->name, c->name);
}

/* A socket file left by a daemon that died is replaced; a live one is not. */
static int clear_stale(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    struct stat st;
    int fd, ret;

    if (lstat(path, &st) < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    if (!S_ISSOCK(st.st_mode)) {
        return -EEXIST;
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    memcpy(sa.sun_path, path, strlen(path));
    ret = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    close(fd);
    if (ret == 0) {
        return -EADDRINUSE;
    }
    return unlink(path) < 0 ? -errno : 0;
}

/* NULL, with *err saying why the control socket at path does not listen. */
static struct ctl_server *not_listening(GError **err, int neg_errno, const char *path,
                                        const char *why)
{
    vs_error_set(err, neg_errno, "cannot listen on control socket %s: %s", path, why);
    return NULL;
}

struct ctl_server *ctl_server_new(const struct ctl_server_config *cfg, const char *path,
                                  GError **err)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    struct ctl_server *s;
    mode_t old;
    int fd, ret;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        return not_listening(err, -ENAMETOOLONG, path, "the path is too long");
    }
    ret = clear_stale(path);
    if (ret < 0) {
        return not_listening(err, ret, path,
                             ret == -EADDRINUSE ? "another daemon is listening there"
                             : ret == -EEXIST   ? "a file that is not a socket is in the way"
                                                : g_strerror(-ret));
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return not_listening(err, -errno, path, g_strerror(errno));
    }
    memcpy(sa.sun_path, path, strlen(path));
    /* Created 0600 from the start: there is no moment when others may connect. */
    old = umask(0177);
    ret = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    if (ret < 0 || listen(fd, 8) < 0) {
        ret = -errno;
        close(fd);
        return not_listening(err, ret, path, g_strerror(-ret));
    }
    s = g_new0(struct ctl_server, 1);
    s->name = g_strdup(cfg->name ? cfg->name : path);
    s->path = g_strdup(path);
    s->main = cfg->main;
    s->methods = cfg->methods;
    s->nmethods = cfg->nmethods;
    s->opaque = cfg->opaque;
    s->max_request = cfg->max_request ? cfg->max_request : CTL_MAX_REQUEST;
    s->fd = fd;
    log_limit_init(&s->log, s->name, LOG_LIMIT_BURST, LOG_LIMIT_PER_SEC);
    if (iothread_add_fd(s->main, fd, EPOLLIN, accept_cb, s) < 0) {
        not_listening(err, -EIO, path, "cannot watch the socket");
        unlink(path);
        close(fd);
        log_limit_end(&s->log);
        g_free(s->name);
        g_free(s->path);
        g_free(s);
        return NULL;
    }
    return s;
}

void ctl_server_free(struct ctl_server *s)
{
    if (!s) {
        return;
    }
    while (s->clients) {
        client_free(s->clients->data);
    }
    iothread_del_fd(s->main, s->fd);
    close(s->fd);
    unlink(s->path);
    log_limit_end(&s->log);
    g_free(s->path);
    g_free(s->name);
    g_free(s);
}
