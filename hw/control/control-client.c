/*
 * One control call (include/control/control-client.h): the request as one
 * line, then lines read until the one answering its id, each parsed with
 * json-strict's bounds so a misbehaving server cannot hurt the client.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <glib.h>

#include "control-client.h"
#include "json-strict.h"

#define MAX_ANSWER (16u << 20)

static const struct json_limits answer_limits = { .max_depth = 16, .max_members = 256 };

int ctl_client_connect(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        return -ENAMETOOLONG;
    }
    memcpy(sa.sun_path, path, strlen(path));
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int ret = -errno;

        close(fd);
        return ret;
    }
    return fd;
}

static int send_all(int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return n < 0 ? -errno : -EPIPE;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads one line (without its newline) within the deadline. */
static int read_line(int fd, GByteArray *buf, gint64 deadline, char **line)
{
    for (;;) {
        uint8_t *nl = buf->len ? memchr(buf->data, '\n', buf->len) : NULL;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        uint8_t chunk[16384];
        gint64 left;
        ssize_t n;

        if (nl) {
            *line = g_strndup((const char *)buf->data, (gsize)(nl - buf->data));
            g_byte_array_remove_range(buf, 0, (guint)(nl - buf->data) + 1);
            return 0;
        }
        if (buf->len > MAX_ANSWER) {
            return -EMSGSIZE;
        }
        left = (deadline - g_get_monotonic_time()) / 1000;
        if (left <= 0) {
            return -ETIMEDOUT;
        }
        if (poll(&p, 1, (int)MIN(left, G_MAXINT)) < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        if (!p.revents) {
            continue;
        }
        n = recv(fd, chunk, sizeof(chunk), 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return n < 0 ? -errno : -ECONNRESET;
        }
        g_byte_array_append(buf, chunk, (guint)n);
    }
}

int ctl_client_call(int fd, const char *method, JsonNode *params, int timeout_ms,
                    JsonNode **result, int *code, char **errmsg)
{
    static gint64 next_id;
    gint64 id = ++next_id, deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(GByteArray) buf = g_byte_array_new();
    g_autoptr(JsonNode) req = NULL;
    g_autofree char *text = NULL;
    int ret;

    *result = NULL;
    *errmsg = NULL;
    *code = 0;
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "jsonrpc");
    json_builder_add_string_value(b, "2.0");
    json_builder_set_member_name(b, "method");
    json_builder_add_string_value(b, method);
    if (params) {
        json_builder_set_member_name(b, "params");
        json_builder_add_value(b, params);
    }
    json_builder_set_member_name(b, "id");
    json_builder_add_int_value(b, id);
    json_builder_end_object(b);
    req = json_builder_get_root(b);
    json_generator_set_root(gen, req);
    text = json_generator_to_data(gen, NULL);
    ret = send_all(fd, text, strlen(text));
    if (ret == 0) {
        ret = send_all(fd, "\n", 1);
    }
    if (ret < 0) {
        *errmsg = g_strdup_printf("cannot send: %s", g_strerror(-ret));
        return ret;
    }
    for (;;) {
        g_autofree char *line = NULL;
        g_autofree char *perr = NULL;
        g_autoptr(JsonNode) ans = NULL;
        JsonObject *o;
        size_t at;

        ret = read_line(fd, buf, deadline, &line);
        if (ret < 0) {
            *errmsg = g_strdup_printf("no answer: %s", g_strerror(-ret));
            return ret;
        }
        ans = json_strict_parse(line, strlen(line), &answer_limits, &perr, &at);
        if (!ans) {
            *errmsg = g_strdup_printf("answer is not JSON: %s", perr);
            return -EPROTO;
        }
        o = json_node_get_object(ans);
        if (!json_object_has_member(o, "id") ||
            json_node_get_value_type(json_object_get_member(o, "id")) != G_TYPE_INT64 ||
            json_object_get_int_member(o, "id") != id) {
            /* An answer to an older call that timed out, or an id-less error. */
            if (json_object_has_member(o, "error") && !json_object_has_member(o, "id")) {
                continue;
            }
            if (json_object_has_member(o, "id") &&
                JSON_NODE_HOLDS_NULL(json_object_get_member(o, "id")) &&
                json_object_has_member(o, "error")) {
                JsonObject *e = json_object_get_object_member(o, "error");

                *code = (int)json_object_get_int_member_with_default(e, "code", 0);
                *errmsg = g_strdup(json_object_get_string_member_with_default(e, "message",
                                                                              "error"));
                return -EREMOTEIO;
            }
            continue;
        }
        if (json_object_has_member(o, "error")) {
            JsonNode *en = json_object_get_member(o, "error");
            JsonObject *e = JSON_NODE_HOLDS_OBJECT(en) ? json_node_get_object(en) : NULL;

            *code = e ? (int)json_object_get_int_member_with_default(e, "code", 0) : 0;
            *errmsg = g_strdup(e ? json_object_get_string_member_with_default(e, "message",
                                                                              "error")
                                 : "error");
            return -EREMOTEIO;
        }
        if (!json_object_has_member(o, "result")) {
            *errmsg = g_strdup("answer has neither result nor error");
            return -EPROTO;
        }
        *result = json_node_copy(json_object_get_member(o, "result"));
        return 0;
    }
}
