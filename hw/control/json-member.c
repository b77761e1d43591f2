/*
 * Optional object and array members without json-glib's CRITICAL for an
 * absent one (json-member.h).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "json-member.h"

static JsonNode *member(JsonObject *o, const char *name, JsonNodeType type)
{
    JsonNode *n = o ? json_object_get_member(o, name) : NULL;

    return n && JSON_NODE_TYPE(n) == type ? n : NULL;
}

JsonObject *json_object_member_or_null(JsonObject *o, const char *name)
{
    JsonNode *n = member(o, name, JSON_NODE_OBJECT);

    return n ? json_node_get_object(n) : NULL;
}

JsonArray *json_array_member_or_null(JsonObject *o, const char *name)
{
    JsonNode *n = member(o, name, JSON_NODE_ARRAY);

    return n ? json_node_get_array(n) : NULL;
}
