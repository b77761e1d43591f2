/*
 * The client side of the control socket (control-server.h), for
 * vhost-scsi-ctl and the tests: one JSON-RPC 2.0 call at a time over a
 * connected socket, waiting a bounded time for its answer.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_CONTROL_CLIENT_H
#define VHOST_SCSI_CONTROL_CLIENT_H

#include <json-glib/json-glib.h>

/* Connects to the control socket at path: the fd, or -errno. */
int ctl_client_connect(const char *path);

/*
 * Sends method with params (an object, taken; NULL: none) and waits up to
 * timeout_ms for the answer.  0: *result is the result (json_node_unref).
 * -EREMOTEIO: the server answered an error, *errmsg (g_free) its message
 * and *code its code.  Other -errno: the socket failed or timed out
 * (-ETIMEDOUT), or the answer was not JSON-RPC (-EPROTO); *errmsg says so.
 */
int ctl_client_call(int fd, const char *method, JsonNode *params, int timeout_ms,
                    JsonNode **result, int *code, char **errmsg);

#endif
