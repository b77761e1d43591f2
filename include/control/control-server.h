/*
 * The daemon's control socket: JSON-RPC 2.0 over a UNIX stream socket, one
 * request per line (a JSON object, no newline inside; UTF-8) and one
 * response per line, on the main thread's loop.  Requests are parsed with
 * json-strict.h's bounds; a request that is too long, too deep, not UTF-8
 * or not JSON-RPC gets an error response (or, past the size limit, the
 * connection is closed after it), never disturbs another client or I/O.
 * Methods answer by calling ctl_call_reply or ctl_call_error exactly once,
 * inside the method or later (an operation that waits for I/O to drain,
 * or for a remote LUN to open): a client may have several calls in
 * flight, answered in the order they finish, matched by id.  A call may
 * outlive its client and the server itself; its answer then goes nowhere.
 * A method may keep state for the client that called it, from one of its
 * calls to the next (ctl_call_client_data).  The server itself answers
 * `method-list`: the names of its table's methods and its own, sorted.
 * Only the daemon's own user and root may connect (SO_PEERCRED), and the
 * socket is created mode 0600.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_CONTROL_SERVER_H
#define VHOST_SCSI_CONTROL_SERVER_H

#include <stdarg.h>
#include <stddef.h>

#include <json-glib/json-glib.h>

#include "iothread.h"
#include "vs-error.h"

/* JSON-RPC 2.0 error codes, and the one for a failed operation. */
#define CTL_E_PARSE            -32700
#define CTL_E_INVALID_REQUEST  -32600
#define CTL_E_NO_METHOD        -32601
#define CTL_E_INVALID_PARAMS   -32602
#define CTL_E_FAILED           -32000   /* data.errno says which errno */

/* Limits on what a client may send. */
#define CTL_MAX_REQUEST   (1u << 20)    /* bytes per line, unless configured */
#define CTL_MAX_CLIENTS   16
#define CTL_MAX_CALLS     64            /* in flight per client */
#define CTL_MAX_OUTPUT    (8u << 20)    /* unread responses before the client is dropped */

/* The method the server answers itself: {"methods": [{"name"}, ...]}, sorted by name. */
#define CTL_METHOD_LIST "method-list"

struct ctl_server;
struct ctl_call;

/* params is the request's "params" object (an empty one if it had none). */
typedef void ctl_method_fn(struct ctl_call *call, JsonObject *params, void *opaque);

struct ctl_method {
    const char *name;
    ctl_method_fn *fn;
};

struct ctl_server_config {
    const char *name;                  /* for log lines: the socket path */
    struct iothread *main;
    const struct ctl_method *methods;
    unsigned nmethods;
    void *opaque;                      /* passed to every method */
    size_t max_request;                /* bytes per line; 0: CTL_MAX_REQUEST */
};

/*
 * Listens on path (a stale socket there is replaced; a live one or any
 * other file is an error) and serves on cfg->main.  NULL on failure, with
 * *err ("cannot listen on control socket PATH: why"; the errno as code).
 */
struct ctl_server *ctl_server_new(const struct ctl_server_config *cfg, const char *path,
                                  GError **err);
/* Closes every client (their calls still pending answer nowhere) and the socket. */
void ctl_server_free(struct ctl_server *s);

/* Answers call with result (taken; NULL is JSON null) and frees it. */
void ctl_call_reply(struct ctl_call *call, JsonNode *result);
/* Answers call with an error (code, message; for CTL_E_FAILED, err is the errno). */
void ctl_call_error(struct ctl_call *call, int code, int err, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);
/* A JSON-RPC error for -errno from an operation, with msg (or strerror). */
void ctl_call_fail(struct ctl_call *call, int neg_errno, const char *msg);
/*
 * The same for a GError (include/util/vs-error.h): its message, and its
 * code as data.errno (EIO for another domain's error).
 */
void ctl_call_fail_error(struct ctl_call *call, const GError *err);

/*
 * What a method keeps under key for the client that made call, from one
 * of that client's calls to the next (what it was told last, say), so that
 * clients do not disturb each other: NULL until set, and for a call whose
 * client has gone.  Setting replaces (destroying) the previous data; the
 * data is destroyed when the client goes, or at once for a call whose
 * client has gone.
 */
void *ctl_call_client_data(struct ctl_call *call, const char *key);
void ctl_call_set_client_data(struct ctl_call *call, const char *key, void *data,
                              GDestroyNotify destroy);

#endif
