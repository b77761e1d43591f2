/*
 * Fuzz target for the reader of targetcli-fb's saveconfig.json
 * (hw/lio/lio-targetcli.c) and of our own saved format (lio-config.c),
 * the two formats `vhost-scsi-ctl lio restore` takes from a file: the
 * first input byte picks --partial, the rest is the file.  Each must be
 * accepted with a well-formed model (every LUN of a target in range, its
 * strings present) and no error, or refused with -EINVAL and a VS_ERROR
 * EINVAL saying why; it never touches configfs.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdlib.h>

#include "fuzz-common.h"
#include "lio-configfs.h"
#include "vs-error.h"

static void check_targets(GPtrArray *targets)
{
    for (guint i = 0; i < targets->len; i++) {
        struct lio_target *t = targets->pdata[i];
        if (!t->wwpn || !t->nexus || t->tpgt > LIO_TPGT_MAX) {
            abort();
        }
        for (guint j = 0; j < t->luns->len; j++) {
            struct lio_lun *l = t->luns->pdata[j];
            if (l->lun > LIO_LUN_MAX || !l->path || !l->backstore || l->type >= LIO_LUN_OTHER) {
                abort();
            }
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet_logs();
    if (size < 1) {
        return 0;
    }
    bool partial = data[0] & 1;
    const char *json = (const char *)data + 1;
    size_t len = size - 1;
    GPtrArray *targets = NULL;
    GError *err = NULL;
    int ret = lio_targetcli_detect(json, len) ?
              lio_targetcli_parse(json, len, partial, &targets, &err) :
              lio_config_parse(json, len, &targets, &err);
    if (ret != 0 && ret != -EINVAL) {
        abort();
    }
    /* A refusal is its error, and only a refusal has one. */
    if ((ret == 0) != (err == NULL) ||
        (err && (!g_error_matches(err, VS_ERROR, EINVAL) || !err->message[0]))) {
        abort();
    }
    g_clear_error(&err);
    if (ret == 0) {
        check_targets(targets);
        g_ptr_array_unref(targets);
    }
    return 0;
}
