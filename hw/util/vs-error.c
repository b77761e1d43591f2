/*
 * The project's error domain (include/util/vs-error.h): errno codes, so
 * that a GError maps onto the -errno a caller returns and the data.errno of
 * a JSON-RPC answer without a table.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdarg.h>

#include "vs-error.h"

G_DEFINE_QUARK(vhost-scsi-error-quark, vs_error)

int vs_error_set(GError **err, int neg_errno, const char *fmt, ...)
{
    /* A call that failed without an errno still fails. */
    if (neg_errno >= 0) {
        neg_errno = -EIO;
    }
    if (err) {
        g_autofree char *msg = NULL;
        va_list ap;

        va_start(ap, fmt);
        msg = g_strdup_vprintf(fmt, ap);
        va_end(ap);
        /* Over an error already set: GLib's warning, and the first one kept. */
        g_set_error_literal(err, VS_ERROR, -neg_errno, msg);
    }
    return neg_errno;
}

int vs_error_errno(const GError *e)
{
    return e->domain == VS_ERROR && e->code > 0 ? -e->code : -EIO;
}
