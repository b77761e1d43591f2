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
    va_list ap;

    g_assert(neg_errno < 0);
    if (err) {
        va_start(ap, fmt);
        g_assert(!*err);
        *err = g_error_new_valist(VS_ERROR, -neg_errno, fmt, ap);
        va_end(ap);
    }
    return neg_errno;
}

int vs_error_errno(const GError *e)
{
    return e->domain == VS_ERROR && e->code > 0 ? -e->code : -EIO;
}
