/*
 * Reading optional members of a JSON object that was already checked
 * (json_check_object() in json-strict.h, or a server's answer checked by
 * its shape).  json-glib's json_object_get_object_member() and
 * json_object_get_array_member() log a CRITICAL for a member that is
 * absent, so "no qos limits" in a saved configuration would print a
 * warning on every start; these return NULL for it instead.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_JSON_MEMBER_H
#define VHOST_SCSI_JSON_MEMBER_H

#include <json-glib/json-glib.h>

/* o[name] if it is an object; NULL if o is NULL, or it is absent, null or not an object. */
JsonObject *json_object_member_or_null(JsonObject *o, const char *name);
/* o[name] if it is an array; NULL otherwise (as above). */
JsonArray *json_array_member_or_null(JsonObject *o, const char *name);

#endif
