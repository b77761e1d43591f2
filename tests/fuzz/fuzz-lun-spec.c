/*
 * Fuzz target for the LUN SPEC grammar (hw/block/lun-spec.c), as the
 * daemon parses --lun and the control socket's lun-add/backend-add specs
 * (lun_spec_parse_full: the grammar plus the iSCSI URL's LUN check), as
 * vhost-scsi-ctl parses a bare SPEC, and as logs redact one.  The input's
 * first byte picks the entry point, the rest is the text (NUL-terminated
 * where the input has none).  Oracle: a spec is accepted with an ID and
 * sizes in range and no error, or refused with -EINVAL, a GError in
 * VS_ERROR with code EINVAL and a message, and a cleared result; the redacted copy never contains the password of an
 * iscsi:// URL; nothing leaks.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-common.h"
#include "lun-open.h"
#include "lun-spec.h"

static void check_result(int ret, const struct lun_spec *s, GError *err)
{
    if (ret == 0) {
        if (err || s->target > LUN_SPEC_MAX_TARGET || s->lun > LUN_SPEC_MAX_LUN ||
            s->size % (s->block_size ? s->block_size : 512) ||
            (s->kind != LUN_SPEC_FILE && s->kind != LUN_SPEC_ISCSI &&
             s->kind != LUN_SPEC_RBD && s->size == 0) ||
            ((s->kind == LUN_SPEC_FILE || s->kind == LUN_SPEC_ISCSI ||
              s->kind == LUN_SPEC_HOLD) && !s->path)) {
            abort();
        }
    } else if (ret != -EINVAL || !err || !g_error_matches(err, VS_ERROR, EINVAL) ||
               !err->message[0] || s->path || s->secret_file || s->initiator_name ||
               s->rbd_pool || s->rbd_image) {
        abort();
    }
    g_clear_error(&err);
}

static unsigned count(const char *hay, const char *needle)
{
    unsigned n = 0;

    for (const char *p = hay; (p = strstr(p, needle)); p++) {
        n++;
    }
    return n;
}

/*
 * The password of "iscsi://USER%PASSWORD@" (the first URL, its '@' before
 * any ','): the redacted copy holds it fewer times than the argument.
 */
static void check_redacted(const char *arg)
{
    const char *url = strstr(arg, "iscsi://");
    g_autofree char *red = lun_spec_redact(arg);
    g_autofree char *pw = NULL;
    const char *auth, *at, *pct;
    size_t end;

    if (!red) {
        abort();
    }
    if (!url) {
        return;
    }
    auth = url + strlen("iscsi://");
    end = strcspn(auth, ",");
    at = memchr(auth, '@', end);
    pct = at ? memchr(auth, '%', (size_t)(at - auth)) : NULL;
    if (!pct || at == pct + 1) {
        return;
    }
    pw = g_strndup(pct + 1, (size_t)(at - pct - 1));
    if (!strchr(pw, '*') && count(red, pw) >= count(arg, pw)) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autofree char *text = NULL;
    struct lun_spec s;
    GError *err = NULL;
    int ret;

    fuzz_quiet_logs();
    if (size < 1) {
        return 0;
    }
    /* hold: is a test backend; the daemon refuses it without this. */
    g_setenv(LUN_SPEC_TEST_BACKENDS_ENV, (data[0] & 4) ? "1" : "0", TRUE);
    text = g_strndup((const char *)data + 1, size - 1);
    memset(&s, 0, sizeof(s));
    switch (data[0] & 3) {
    case 0:
        ret = lun_spec_parse_full(text, &s, &err);
        break;
    case 1:
        ret = lun_spec_parse(text, &s, &err);
        break;
    case 2:
        ret = lun_spec_parse_backend(text, &s, &err);
        break;
    default:
        check_redacted(text);
        return 0;
    }
    check_result(ret, &s, err);
    lun_spec_clear(&s);
    return 0;
}
