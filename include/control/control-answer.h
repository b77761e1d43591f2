/*
 * A control method's answer as `vhost-scsi-ctl target` prints it: lists
 * one line per LUN, backend, connection or controller; statistics a block
 * per backend and controller; a single object after the word its command
 * stands for ("added 1:0 …"); or the server's JSON result as it came.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_CONTROL_ANSWER_H
#define VHOST_SCSI_CONTROL_ANSWER_H

#include <json-glib/json-glib.h>

/* result (of method) for people, what heading a single object (ctl_request's what); g_free. */
char *ctl_answer_text(const char *method, JsonNode *result, const char *what);

/* result as indented JSON with a newline (g_free). */
char *ctl_answer_json(JsonNode *result);

#endif
