/*
 * JSON from untrusted bytes, through json-glib: a strict RFC 8259 parse
 * with bounds (nesting depth, members per object), duplicate member names
 * refused, and a check that an object has exactly the members a schema
 * names, of the types it names.  json-glib 1.6 (Debian 12) alone parses
 * leniently and without bounds (see json-strict.c); every JSON that comes
 * from outside the daemon (a control request, a configuration file) goes
 * through here first.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_JSON_STRICT_H
#define VHOST_SCSI_JSON_STRICT_H

#include <stdbool.h>
#include <stddef.h>

#include <json-glib/json-glib.h>

struct json_limits {
    unsigned max_depth;      /* objects and arrays nested */
    unsigned max_members;    /* members of one object */
};

/*
 * Parses len bytes holding exactly one JSON object.  Returns the root node
 * (json_node_unref() it), or NULL with *err (g_free) saying what is wrong
 * and *at the byte it is at (JSON_AT_NONE when json-glib found it, its
 * message then naming line and column).
 */
#define JSON_AT_NONE ((size_t)-1)
JsonNode *json_strict_parse(const char *s, size_t len, const struct json_limits *lim,
                            char **err, size_t *at);

/* JSON_M_ANY: any value; the caller checks it. */
enum json_member_type { JSON_M_INT, JSON_M_STR, JSON_M_ARR, JSON_M_OBJ, JSON_M_BOOL, JSON_M_ANY };

struct json_member {
    const char *name;
    enum json_member_type type;
    bool optional;
};

/*
 * NULL if n is an object whose members are among spec (each required one
 * present), each of its type, strings valid UTF-8; else a message naming
 * the member at fault (g_free).
 */
char *json_check_object(JsonNode *n, const struct json_member *spec, unsigned count);

#endif
