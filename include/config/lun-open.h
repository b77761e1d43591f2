/*
 * The daemon's side of LUN specs: parsing with every check (the grammar of
 * include/lunspec/lun-spec.h plus what only a backend's layer can judge,
 * an iscsi:// URL's LUN), and opening the backend a spec describes.  This
 * is the one place that knows every backend; parsing and opening are
 * separate steps so a tool can check all its arguments before it touches
 * any file.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_LUN_OPEN_H
#define VHOST_SCSI_LUN_OPEN_H

#include "backend-iscsi.h"
#include "backend-rbd.h"
#include "backend-uring.h"
#include "lun-spec.h"

/* lun_spec_parse() with the backends' checks; same results and messages. */
int lun_spec_parse_full(const char *arg, struct lun_spec *out, GError **err);

/*
 * Opens the backend s describes (for iSCSI: connects to the target): 0,
 * or -errno with *err (VS_ERROR, include/util/vs-error.h) giving the cause
 * in the backend's words, without the spec (the caller names it).
 * Nothing is logged.
 */
int lun_spec_open(const struct lun_spec *s, struct lun_backend **out, GError **err);
/*
 * The same, given up with -ECANCELED once cancel_fd is readable (for an
 * open on a thread of its own that its owner may have to call off).
 */
int lun_spec_open_cancellable(const struct lun_spec *s, int cancel_fd, struct lun_backend **out,
                              GError **err);
/*
 * Whether opening s may wait on the network, bounded only by a timeout
 * (iSCSI: connect and log in; RBD: reach the monitors and OSDs), rather than take a moment (files, RAM).
 */
bool lun_spec_opens_slowly(const struct lun_spec *s);

#endif
