/*
 * The project's one error domain (hw/util/vs-error.c).  A library function
 * that fails where the cause is known fills a GError in VS_ERROR, whose
 * code is the positive errno the failure amounts to and whose message
 * names the cause in the user's words; each layer on the way up adds what
 * it knows (g_prefix_error: the LUN, the spec) and never logs it.  Only a
 * program logs or prints, once: the daemon's control socket answers with
 * the message and data.errno = the code (docs/control.md), a tool prints
 * it to stderr.  Functions that also return -errno return -code.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_VS_ERROR_H
#define VHOST_SCSI_VS_ERROR_H

#include <glib.h>

#define VS_ERROR (vs_error_quark())
GQuark vs_error_quark(void);

/*
 * Sets *err (if err is not NULL) in VS_ERROR with code -neg_errno and the
 * message, and returns neg_errno (-EIO for one that is not negative), so
 * that a failure reads "return vs_error_set(err, -EINVAL, "size %u ...", n);".
 */
int vs_error_set(GError **err, int neg_errno, const char *fmt, ...) G_GNUC_PRINTF(3, 4);

/* -errno of e: its code in VS_ERROR, -EIO for another domain's. */
int vs_error_errno(const GError *e);

#endif
