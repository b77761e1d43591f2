/*
 * Strict, bounded JSON through json-glib (include/json/json-strict.h).
 *
 * json-glib 1.6 (Debian 12) parses leniently and without bounds: it takes
 * comments, single-quoted strings, hex and octal numbers, unknown escapes
 * and a second top-level value, stops at a NUL byte, cuts strings at
 * \u0000, recurses until the stack overflows on deep nesting (a 200 kB
 * document of '[' is enough), and each repeat of a member name walks the
 * object's member list.  One pass over the bytes refuses all of that
 * first, so json-glib only ever gets RFC 8259 JSON of bounded depth and
 * object size; its signals then catch repeated member names.
 * JsonParser:strict (json-glib 1.10) would cover the lexical part, not
 * the bounds.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <glib.h>

#include "json-strict.h"

static bool in_set(char c, const char *set)
{
    return c && strchr(set, c);
}

/* Bound messages name the bound; they are written into msg. */
static const char *precheck(const char *s, size_t len, const struct json_limits *lim,
                            size_t *at, char msg[64])
{
    static const char *const words[] = { "true", "false", "null" };
    g_autofree bool *is_object = g_new0(bool, lim->max_depth);
    g_autofree unsigned *members = g_new0(unsigned, lim->max_depth);
    unsigned depth = 0;
    bool opened = false;

    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        *at = i;
        if (in_set(c, " \t\n\r")) {
            continue;
        }
        if (c == 0) {
            return "NUL byte in the document";
        }
        if (depth == 0) {
            if (opened) {
                return "trailing data after the top-level object";
            }
            if (c != '{') {
                return "the top level must be an object";
            }
        }
        if (c == '{' || c == '[') {
            if (depth == lim->max_depth) {
                snprintf(msg, 64, "nested deeper than %u", lim->max_depth);
                return msg;
            }
            is_object[depth] = c == '{';
            members[depth++] = 0;
            opened = true;
        } else if (c == '}' || c == ']') {
            if (depth == 0 || is_object[--depth] != (c == '}')) {
                return "mismatched bracket";
            }
        } else if (c == ':') {
            if (depth == 0) {
                return "unexpected character";
            }
            if (is_object[depth - 1] && ++members[depth - 1] > lim->max_members) {
                snprintf(msg, 64, "object with more than %u members", lim->max_members);
                return msg;
            }
        } else if (c == '"') {
            for (i++; i < len && s[i] != '"'; i++) {
                *at = i;
                if (s[i] == 0) {
                    return "NUL byte in the document";
                }
                if ((unsigned char)s[i] < 0x20) {
                    return "control character in a string";
                }
                if (s[i] != '\\') {
                    continue;
                }
                if (++i < len && in_set(s[i], "\"\\/bfnrt")) {
                    continue;
                }
                if (i >= len || s[i] != 'u' || len - i < 5 || !g_ascii_isxdigit(s[i + 1]) ||
                    !g_ascii_isxdigit(s[i + 2]) || !g_ascii_isxdigit(s[i + 3]) ||
                    !g_ascii_isxdigit(s[i + 4])) {
                    return "invalid escape in a string";
                }
                if (!memcmp(s + i + 1, "0000", 4)) {
                    return "\\u0000 in a string";
                }
                i += 4;
            }
            if (i >= len) {
                *at = len;
                return "unterminated string";
            }
        } else if (c == '-' || g_ascii_isdigit(c)) {
            size_t d = i + (c == '-');
            if (d + 1 < len && s[d] == '0' && g_ascii_isdigit(s[d + 1])) {
                return "number with a leading zero";
            }
            size_t start = i;

            while (i + 1 < len && (g_ascii_isdigit(s[i + 1]) || in_set(s[i + 1], ".eE+-"))) {
                i++;
            }
            /*
             * Past a double's range json-glib reads infinity, which no JSON
             * writer can write back: what we keep must survive a rewrite.
             */
            {
                g_autofree char *num = g_strndup(s + start, i + 1 - start);

                if (!isfinite(g_ascii_strtod(num, NULL))) {
                    *at = start;
                    return "number out of range";
                }
            }
        } else if (c != ',') {
            size_t w = 0;
            for (size_t k = 0; k < G_N_ELEMENTS(words) && !w; k++) {
                size_t n = strlen(words[k]);
                if (len - i >= n && !memcmp(s + i, words[k], n) &&
                    (len - i == n || !g_ascii_isalnum(s[i + n]))) {
                    w = n;
                }
            }
            if (!w) {
                return "unexpected character";
            }
            i += w - 1;
        }
    }
    *at = len;
    return depth || !opened ? "unexpected end of the document" : NULL;
}

/*
 * json-glib keeps the last of repeated members; a member that did not make
 * its object grow is a repeat.  One counter per open object, innermost last
 * (a member is announced after its value, so after any inner object ended).
 */
struct repeat_check {
    GArray *counts;
    char *err;
};

static void on_object_start(JsonParser *parser, gpointer data)
{
    struct repeat_check *rc = data;
    guint zero = 0;

    g_array_append_val(rc->counts, zero);
}

static void on_object_member(JsonParser *parser, JsonObject *object, const char *name,
                             gpointer data)
{
    struct repeat_check *rc = data;
    guint *seen = &g_array_index(rc->counts, guint, rc->counts->len - 1);

    if (++*seen > json_object_get_size(object) && !rc->err) {
        rc->err = g_strdup_printf("line %u column %u: duplicate member name \"%s\"",
                                  json_parser_get_current_line(parser),
                                  json_parser_get_current_pos(parser), name);
    }
}

static void on_object_end(JsonParser *parser, JsonObject *object, gpointer data)
{
    struct repeat_check *rc = data;

    g_array_set_size(rc->counts, rc->counts->len - 1);
}

JsonNode *json_strict_parse(const char *s, size_t len, const struct json_limits *lim,
                            char **err, size_t *at)
{
    g_autoptr(JsonParser) parser = NULL;
    g_autoptr(GError) gerr = NULL;
    struct repeat_check rc;
    const char *bad;
    char msg[64];
    bool parsed;

    bad = precheck(s, len, lim, at, msg);
    if (bad) {
        *err = g_strdup(bad);
        return NULL;
    }
    *at = JSON_AT_NONE;
    parser = json_parser_new();
    rc = (struct repeat_check){ .counts = g_array_new(FALSE, FALSE, sizeof(guint)) };
    g_signal_connect(parser, "object-start", G_CALLBACK(on_object_start), &rc);
    g_signal_connect(parser, "object-member", G_CALLBACK(on_object_member), &rc);
    g_signal_connect(parser, "object-end", G_CALLBACK(on_object_end), &rc);
    parsed = json_parser_load_from_data(parser, s, (gssize)len, &gerr);
    g_array_unref(rc.counts);
    if (!parsed || rc.err) {
        *err = parsed ? rc.err : g_strdup(gerr->message);
        if (!parsed) {
            g_free(rc.err);
        }
        return NULL;
    }
    return json_node_copy(json_parser_get_root(parser));
}

static bool node_is(JsonNode *n, enum json_member_type t)
{
    switch (t) {
    case JSON_M_ANY:
        return true;
    case JSON_M_ARR:
        return JSON_NODE_HOLDS_ARRAY(n);
    case JSON_M_OBJ:
        return JSON_NODE_HOLDS_OBJECT(n);
    case JSON_M_BOOL:
        return JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_BOOLEAN;
    case JSON_M_INT:
        return JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_INT64;
    case JSON_M_STR:
        return JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING;
    }
    return false;
}

char *json_check_object(JsonNode *n, const struct json_member *spec, unsigned count)
{
    g_autoptr(GList) names = NULL;
    JsonObject *o;

    if (!n || !JSON_NODE_HOLDS_OBJECT(n)) {
        return g_strdup("expected an object");
    }
    o = json_node_get_object(n);
    for (unsigned i = 0; i < count; i++) {
        JsonNode *m = json_object_get_member(o, spec[i].name);

        if (!m) {
            if (spec[i].optional) {
                continue;
            }
            return g_strdup_printf("missing member \"%s\"", spec[i].name);
        }
        if (!node_is(m, spec[i].type)) {
            return g_strdup_printf("member \"%s\" has the wrong type", spec[i].name);
        }
        /* An escaped lone surrogate comes out of json-glib as invalid UTF-8. */
        if (spec[i].type == JSON_M_STR && !g_utf8_validate(json_node_get_string(m), -1, NULL)) {
            return g_strdup_printf("member \"%s\" is not valid UTF-8", spec[i].name);
        }
    }
    names = json_object_get_members(o);
    for (GList *l = names; l; l = l->next) {
        unsigned i = 0;

        while (i < count && strcmp(spec[i].name, l->data)) {
            i++;
        }
        if (i == count) {
            return g_strdup_printf("unknown member \"%s\"", (const char *)l->data);
        }
    }
    return NULL;
}
