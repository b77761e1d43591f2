/*
 * Parsing of "ID=SPEC" LUN arguments (and of a bare SPEC) into a struct
 * lun_spec.  The grammar (see include/lunspec/lun-spec.h) is small and
 * parsed by hand so every rejection can name the exact text at fault; a
 * path may contain a comma written as ",," (as in QEMU's option syntax).
 * Nothing here opens a backend or calls into a backend's layer: the checks
 * that need one come in as a struct lun_spec_checks.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <string.h>

#include <glib.h>

#include "lun-spec.h"
#include "size.h"
#include "vs-error.h"

enum {
    OPT_RO = 1 << 0,
    OPT_DIRECT = 1 << 1,
    OPT_BLOCK_SIZE = 1 << 2,
    OPT_SIZE = 1 << 3,
    OPT_QUEUE_DEPTH = 1 << 4,
    OPT_SESSIONS = 1 << 5,
    OPT_SECRET_FILE = 1 << 6,
    OPT_INITIATOR_NAME = 1 << 7,
    OPT_WHILE = 1 << 8,
    OPT_LOGIN_TIMEOUT = 1 << 9,
    OPT_CONF = 1 << 10,
    OPT_CLIENT_ID = 1 << 11,
    OPT_KEYRING = 1 << 12,
    OPT_FILL = 1 << 13,
    OPT_PHYS_BLOCK_SIZE = 1 << 14,
    OPT_SANITIZE = 1 << 15,
    OPT_BUSY_TIMEOUT = 1 << 16,
};

/* Bounds for the iSCSI options: beyond these a typo is likelier than intent. */
#define ISCSI_MAX_QUEUE_DEPTH 1024
#define ISCSI_MAX_SESSIONS 16
#define ISCSI_MAX_LOGIN_TIMEOUT_S 300
/* An RBD LUN's BUSY phase of an outage: beyond an hour initiators have long given up. */
#define RBD_MAX_BUSY_TIMEOUT_S 3600
/* Longest pool, image or snapshot name of an rbd: spec. */
#define RBD_MAX_NAME 255

static const struct {
    const char *key;
    unsigned bit;
    bool has_value;
} lun_opts[] = {
    { "ro", OPT_RO, false },
    { "direct", OPT_DIRECT, false },
    { "block-size", OPT_BLOCK_SIZE, true },
    { "size", OPT_SIZE, true },
    { "queue-depth", OPT_QUEUE_DEPTH, true },
    { "sessions", OPT_SESSIONS, true },
    { "secret-file", OPT_SECRET_FILE, true },
    { "initiator-name", OPT_INITIATOR_NAME, true },
    { "while", OPT_WHILE, true },
    { "login-timeout", OPT_LOGIN_TIMEOUT, true },
    { "conf", OPT_CONF, true },
    { "id", OPT_CLIENT_ID, true },
    { "keyring", OPT_KEYRING, true },
    { "fill", OPT_FILL, true },
    { "physical-block-size", OPT_PHYS_BLOCK_SIZE, true },
    { "sanitize", OPT_SANITIZE, true },
    { "busy-timeout", OPT_BUSY_TIMEOUT, true },
};

static const struct {
    const char *prefix;
    enum lun_spec_kind kind;
    unsigned allowed;
} lun_kinds[] = {
    { "file:", LUN_SPEC_FILE, OPT_RO | OPT_DIRECT | OPT_BLOCK_SIZE | OPT_SIZE |
                              OPT_PHYS_BLOCK_SIZE | OPT_SANITIZE },
    { "ram:", LUN_SPEC_RAM, OPT_RO | OPT_BLOCK_SIZE | OPT_PHYS_BLOCK_SIZE | OPT_SANITIZE },
    { "null:", LUN_SPEC_NULL, OPT_RO | OPT_BLOCK_SIZE | OPT_FILL | OPT_PHYS_BLOCK_SIZE |
                              OPT_SANITIZE },
    { "iscsi://", LUN_SPEC_ISCSI, OPT_RO | OPT_QUEUE_DEPTH | OPT_SESSIONS | OPT_SECRET_FILE |
                                  OPT_INITIATOR_NAME | OPT_LOGIN_TIMEOUT | OPT_SANITIZE },
    { "rbd:", LUN_SPEC_RBD, OPT_RO | OPT_CONF | OPT_CLIENT_ID | OPT_KEYRING | OPT_SANITIZE |
                            OPT_BUSY_TIMEOUT },
#ifdef VHOST_SCSI_TEST_HOOKS
    { "hold:", LUN_SPEC_HOLD, OPT_BLOCK_SIZE | OPT_WHILE },
#endif
};

/*
 * "POOL/IMAGE[@SNAP]" of rbd: into out->rbd_pool/rbd_image/rbd_snap.  Ceph
 * allows more in names than this, but '/' and '@' are the separators of
 * the rbd CLI's own image spec, so a name holding them could not be named
 * there either; control characters are refused as typos.  0 or -EINVAL.
 */
static int parse_rbd_image(const char *s, struct lun_spec *out)
{
    const char *slash = strchr(s, '/'), *at;
    char **parts[3] = { &out->rbd_pool, &out->rbd_image, &out->rbd_snap };
    const char *start[3], *end[3];
    unsigned n;

    if (!slash) {
        return -EINVAL;
    }
    at = strchr(slash + 1, '@');
    start[0] = s;
    end[0] = slash;
    start[1] = slash + 1;
    end[1] = at ? at : s + strlen(s);
    start[2] = at ? at + 1 : NULL;
    end[2] = at ? s + strlen(s) : NULL;
    n = at ? 3 : 2;
    for (unsigned i = 0; i < n; i++) {
        size_t len = (size_t)(end[i] - start[i]);

        if (len == 0 || len > RBD_MAX_NAME) {
            return -EINVAL;
        }
        for (size_t j = 0; j < len; j++) {
            if (start[i][j] == '/' || start[i][j] == '@' || g_ascii_iscntrl(start[i][j])) {
                return -EINVAL;
            }
        }
    }
    for (unsigned i = 0; i < n; i++) {
        *parts[i] = g_strndup(start[i], (size_t)(end[i] - start[i]));
    }
    return 0;
}

/* Parses the decimal number in s[0..len) (digits only) up to max. */
static bool parse_id_part(const char *s, size_t len, unsigned max, unsigned *out)
{
    unsigned v = 0;

    if (len == 0 || len > 5) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (!g_ascii_isdigit(s[i])) {
            return false;
        }
        v = v * 10 + (s[i] - '0');
    }
    if (v > max) {
        return false;
    }
    *out = v;
    return true;
}

static int spec_error(GError **err, const char *arg, struct lun_spec *out,
                      const char *fmt, ...) G_GNUC_PRINTF(4, 5);

static int spec_error(GError **err, const char *arg, struct lun_spec *out,
                      const char *fmt, ...)
{
    if (err) {
        va_list ap;
        g_autofree char *what = NULL;
        g_autofree char *shown = lun_spec_redact(arg);

        va_start(ap, fmt);
        what = g_strdup_vprintf(fmt, ap);
        va_end(ap);
        vs_error_set(err, -EINVAL, "LUN spec \"%s\": %s", shown, what);
    }
    lun_spec_clear(out);
    return -EINVAL;
}

/*
 * Copies the text from *p up to the next lone ',' (",," is a literal comma
 * when unescape is set) and leaves *p at that comma or the end.
 */
static char *take_field(const char **p, bool unescape)
{
    GString *s = g_string_new(NULL);
    const char *q = *p;

    while (*q) {
        if (*q == ',') {
            if (unescape && q[1] == ',') {
                g_string_append_c(s, ',');
                q += 2;
                continue;
            }
            break;
        }
        g_string_append_c(s, *q++);
    }
    *p = q;
    return g_string_free(s, FALSE);
}

/* "ID=" or "TARGET:LUN=" at the start of arg; *spec is left after the '='. */
static int parse_id(const char *arg, struct lun_spec *out, GError **err, const char **spec)
{
    const char *eq = strchr(arg, '='), *colon;

    if (!eq) {
        return spec_error(err, arg, out, "expected ID=SPEC, e.g. 0=file:disk.img");
    }
    colon = memchr(arg, ':', eq - arg);
    if (colon) {
        if (!parse_id_part(arg, colon - arg, LUN_SPEC_MAX_TARGET, &out->target)) {
            return spec_error(err, arg, out, "bad target \"%.*s\" (expected 0-%d)",
                              (int)(colon - arg), arg, LUN_SPEC_MAX_TARGET);
        }
        colon++;
    } else {
        colon = arg;
    }
    if (!parse_id_part(colon, eq - colon, LUN_SPEC_MAX_LUN, &out->lun)) {
        return spec_error(err, arg, out, "bad LUN \"%.*s\" (expected 0-%d)",
                          (int)(eq - colon), colon, LUN_SPEC_MAX_LUN);
    }
    *spec = eq + 1;
    return 0;
}

/* arg is what messages quote; p the SPEC in it (after any "ID="). */
static int parse(const char *arg, bool with_id, const struct lun_spec_checks *checks,
                 struct lun_spec *out, GError **err)
{
    const char *p = arg;
    unsigned allowed = 0, seen = 0;
    g_autofree char *first = NULL;
    size_t k;
    int ret;

    memset(out, 0, sizeof(*out));
    if (with_id && (ret = parse_id(arg, out, err, &p)) < 0) {
        return ret;
    }
    for (k = 0; k < G_N_ELEMENTS(lun_kinds); k++) {
        if (g_str_has_prefix(p, lun_kinds[k].prefix)) {
            break;
        }
    }
    if (k == G_N_ELEMENTS(lun_kinds)) {
        g_autofree char *kind = take_field(&p, false);
        return spec_error(err, arg, out, "unknown backend \"%s\" (expected file:, "
                          "ram:, null:, iscsi:// or rbd:)", kind);
    }
    out->kind = lun_kinds[k].kind;
    allowed = lun_kinds[k].allowed;
#ifdef VHOST_SCSI_TEST_HOOKS
    if (out->kind == LUN_SPEC_HOLD && g_strcmp0(g_getenv(LUN_SPEC_TEST_BACKENDS_ENV), "1")) {
        return spec_error(err, arg, out, "hold: is a test backend (set %s=1 to use it)",
                          LUN_SPEC_TEST_BACKENDS_ENV);
    }
#endif

    switch (out->kind) {
    case LUN_SPEC_FILE:
        p += strlen(lun_kinds[k].prefix);
        out->path = take_field(&p, true);
        if (!out->path[0]) {
            return spec_error(err, arg, out, "file: needs a path");
        }
        break;
    case LUN_SPEC_ISCSI: {
        g_autofree char *lun = NULL;

        /*
         * The iSCSI backend parses the URL itself, but a bad LUN is caught
         * here (by the checks), before any backend is opened (and libiscsi
         * would take "-1").
         */
        out->path = take_field(&p, false);
        if (!out->path[strlen(lun_kinds[k].prefix)]) {
            return spec_error(err, arg, out, "iscsi:// needs a portal and target");
        }
        /* libiscsi copies at most 255 bytes of it, without a terminating NUL. */
        if (strlen(out->path) - strlen(lun_kinds[k].prefix) > 255) {
            return spec_error(err, arg, out, "iscsi:// URL longer than 255 characters after "
                              "\"iscsi://\"");
        }
        if (checks && checks->iscsi_url_lun &&
            checks->iscsi_url_lun(out->path, &out->iscsi_lun, &lun) < 0) {
            if (!lun) {
                return spec_error(err, arg, out, "iscsi:// URL without /IQN/LUN (expected "
                                  "iscsi://[USER[%%PASSWORD]@]HOST[:PORT]/IQN/LUN)");
            }
            return spec_error(err, arg, out, "bad LUN \"%s\" at the end of the iscsi:// URL "
                              "(expected 0-%u)", lun, checks->iscsi_max_lun);
        }
        break;
    }
    case LUN_SPEC_RBD:
        p += strlen(lun_kinds[k].prefix);
        first = take_field(&p, false);
        if ((ret = parse_rbd_image(first, out)) < 0) {
            return spec_error(err, arg, out, "bad RBD image \"%s\" (expected "
                              "POOL/IMAGE[@SNAP], each part 1-%d characters without '/', "
                              "'@' or ',')", first, RBD_MAX_NAME);
        }
        break;
    case LUN_SPEC_RAM:
    case LUN_SPEC_NULL:
    case LUN_SPEC_HOLD:
        p += strlen(lun_kinds[k].prefix);
        first = take_field(&p, false);
        if (size_parse(first, &out->size) < 0 || out->size == 0) {
            return spec_error(err, arg, out, "bad size \"%s\" (expected bytes with an "
                              "optional K, M, G or T suffix, not 0)", first);
        }
        break;
    }

    while (*p == ',') {
        g_autofree char *opt = NULL;
        const char *val;
        size_t keylen;
        unsigned o;

        p++;
        opt = take_field(&p, false);
        val = strchr(opt, '=');
        keylen = val ? (size_t)(val - opt) : strlen(opt);
        if (keylen == 0) {
            return spec_error(err, arg, out, "empty option \"%s\"", opt);
        }
        for (o = 0; o < G_N_ELEMENTS(lun_opts); o++) {
            if (strlen(lun_opts[o].key) == keylen &&
                !strncmp(lun_opts[o].key, opt, keylen)) {
                break;
            }
        }
        if (o == G_N_ELEMENTS(lun_opts) || !(allowed & lun_opts[o].bit)) {
            return spec_error(err, arg, out, "unknown option \"%.*s\" for %s",
                              (int)keylen, opt, lun_kinds[k].prefix);
        }
        if (seen & lun_opts[o].bit) {
            return spec_error(err, arg, out, "option \"%s\" given twice",
                              lun_opts[o].key);
        }
        seen |= lun_opts[o].bit;
        if (lun_opts[o].has_value != (val != NULL)) {
            return spec_error(err, arg, out, lun_opts[o].has_value ?
                              "option \"%s\" needs a value" :
                              "option \"%s\" takes no value", lun_opts[o].key);
        }
        switch (lun_opts[o].bit) {
        case OPT_RO:
            out->ro = true;
            break;
        case OPT_DIRECT:
            out->direct = true;
            break;
        case OPT_BLOCK_SIZE: {
            uint64_t bs;

            if (size_parse(val + 1, &bs) < 0 || (bs != 512 && bs != 4096)) {
                return spec_error(err, arg, out, "bad block size \"%s\" (expected "
                                  "512 or 4096)", val + 1);
            }
            out->block_size = bs;
            break;
        }
        case OPT_PHYS_BLOCK_SIZE: {
            uint64_t pbs;

            /* READ CAPACITY (16) says it as a power of two of blocks, up to 2^15. */
            if (size_parse(val + 1, &pbs) < 0 || pbs < 512 || pbs > (1u << 24) ||
                (pbs & (pbs - 1))) {
                return spec_error(err, arg, out, "bad physical block size \"%s\" "
                                  "(expected a power of two from 512 to 16M)", val + 1);
            }
            out->phys_block_size = (uint32_t)pbs;
            break;
        }
        case OPT_SIZE:
            if (size_parse(val + 1, &out->size) < 0 || out->size == 0) {
                return spec_error(err, arg, out, "bad size \"%s\" (expected bytes "
                                  "with an optional K, M, G or T suffix, not 0)", val + 1);
            }
            break;
        case OPT_QUEUE_DEPTH:
        case OPT_SESSIONS:
        case OPT_LOGIN_TIMEOUT:
        case OPT_BUSY_TIMEOUT: {
            unsigned max = lun_opts[o].bit == OPT_SESSIONS        ? ISCSI_MAX_SESSIONS
                           : lun_opts[o].bit == OPT_LOGIN_TIMEOUT ? ISCSI_MAX_LOGIN_TIMEOUT_S
                           : lun_opts[o].bit == OPT_BUSY_TIMEOUT  ? RBD_MAX_BUSY_TIMEOUT_S
                                                                  : ISCSI_MAX_QUEUE_DEPTH;
            unsigned id;

            /* parse_id_part: plain decimal digits, no suffix, bounded. */
            if (!parse_id_part(val + 1, strlen(val + 1), max, &id) || id == 0) {
                return spec_error(err, arg, out, "bad %s \"%s\" (expected 1-%u)",
                                  lun_opts[o].key, val + 1, max);
            }
            if (lun_opts[o].bit == OPT_SESSIONS) {
                out->sessions = id;
            } else if (lun_opts[o].bit == OPT_LOGIN_TIMEOUT) {
                out->login_timeout = id;
            } else if (lun_opts[o].bit == OPT_BUSY_TIMEOUT) {
                out->busy_timeout = id;
            } else {
                out->queue_depth = id;
            }
            break;
        }
        case OPT_SECRET_FILE:
        case OPT_INITIATOR_NAME:
            if (!val[1]) {
                return spec_error(err, arg, out, "option \"%s\" needs a value",
                                  lun_opts[o].key);
            }
            if (lun_opts[o].bit == OPT_SECRET_FILE) {
                out->secret_file = g_strdup(val + 1);
            } else {
                out->initiator_name = g_strdup(val + 1);
            }
            break;
        case OPT_CONF:
        case OPT_CLIENT_ID:
        case OPT_KEYRING: {
            char **dst = lun_opts[o].bit == OPT_CONF        ? &out->rbd_conf
                         : lun_opts[o].bit == OPT_CLIENT_ID ? &out->rbd_id
                                                            : &out->rbd_keyring;

            if (!val[1] || strlen(val + 1) > PATH_MAX) {
                return spec_error(err, arg, out, "option \"%s\" needs a value (at most "
                                  "%d characters)", lun_opts[o].key, PATH_MAX);
            }
            *dst = g_strdup(val + 1);
            break;
        }
        case OPT_FILL:
            if (strcmp(val + 1, "zero") && strcmp(val + 1, "none")) {
                return spec_error(err, arg, out, "bad fill \"%s\" (expected zero or none)",
                                  val + 1);
            }
            out->null_no_fill = !strcmp(val + 1, "none");
            break;
        case OPT_SANITIZE:
            if (strcmp(val + 1, "on") && strcmp(val + 1, "off")) {
                return spec_error(err, arg, out, "bad sanitize \"%s\" (expected on or off)",
                                  val + 1);
            }
            out->sanitize = !strcmp(val + 1, "on");
            break;
        case OPT_WHILE:
            if (!val[1]) {
                return spec_error(err, arg, out, "option \"while\" needs a value");
            }
            out->path = g_strdup(val + 1);
            break;
        }
    }
    g_assert(*p == '\0');
    if (out->kind == LUN_SPEC_HOLD && !out->path) {
        return spec_error(err, arg, out, "hold: needs while=PATH");
    }

    if (out->phys_block_size &&
        out->phys_block_size < (out->block_size ? out->block_size : 512)) {
        return spec_error(err, arg, out, "physical block size %" PRIu32 " is smaller than "
                          "the block size %" PRIu32, out->phys_block_size,
                          out->block_size ? out->block_size : 512);
    }
    if (out->size) {
        uint32_t bs = out->block_size ? out->block_size : 512;

        if (out->size % bs) {
            return spec_error(err, arg, out, "size %" PRIu64 " is not a multiple of "
                              "the block size %" PRIu32, out->size, bs);
        }
    }
    return 0;
}

int lun_spec_parse(const char *arg, struct lun_spec *out, GError **err)
{
    return parse(arg, true, NULL, out, err);
}

int lun_spec_parse_checked(const char *arg, const struct lun_spec_checks *checks,
                           struct lun_spec *out, GError **err)
{
    return parse(arg, true, checks, out, err);
}

int lun_spec_parse_backend(const char *spec, struct lun_spec *out, GError **err)
{
    return parse(spec, false, NULL, out, err);
}

char *lun_spec_redact(const char *arg)
{
    const char *url = strstr(arg, "iscsi://");
    const char *auth, *at, *end, *pct;

    if (!url) {
        return g_strdup(arg);
    }
    /*
     * Erring on the side of hiding: a '%' before any '@' of the URL (up to
     * its first ',') may start a password, even one holding a '/'.
     */
    auth = url + strlen("iscsi://");
    end = auth + strcspn(auth, ",");
    at = memchr(auth, '@', end - auth);
    pct = at ? memchr(auth, '%', at - auth) : NULL;
    if (!pct) {
        return g_strdup(arg);
    }
    return g_strdup_printf("%.*s%%***%s", (int)(pct - arg), arg, at);
}

void lun_spec_clear(struct lun_spec *s)
{
    g_free(s->path);
    g_free(s->secret_file);
    g_free(s->initiator_name);
    g_free(s->rbd_pool);
    g_free(s->rbd_image);
    g_free(s->rbd_snap);
    g_free(s->rbd_conf);
    g_free(s->rbd_id);
    g_free(s->rbd_keyring);
    memset(s, 0, sizeof(*s));
}
