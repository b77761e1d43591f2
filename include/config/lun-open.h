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
#include "backend-uring.h"
#include "lun-spec.h"

/* lun_spec_parse() with the backends' checks; same results and messages. */
int lun_spec_parse_full(const char *arg, struct lun_spec *out, char **errmsg);

/* Opens the backend s describes (for iSCSI: connects to the target). */
int lun_spec_open(const struct lun_spec *s, struct lun_backend **out);

#endif
