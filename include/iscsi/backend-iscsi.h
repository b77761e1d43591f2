/*
 * LUNs of a remote iSCSI target, through libiscsi (hw/block/backend-iscsi.c,
 * docs/iscsi.md).  The only layer that links libiscsi in production code.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_BACKEND_ISCSI_H
#define VHOST_SCSI_BACKEND_ISCSI_H

#include "backend.h"

/* A LUN of a remote iSCSI target (hw/block/backend-iscsi.c, docs/iscsi.md). */
struct backend_iscsi_opts {
    const char *url;            /* iscsi://[USER[%PASSWORD]@]HOST[:PORT]/IQN/LUN */
    bool read_only;
    unsigned queue_depth;       /* tasks in flight per session; 0: default (64) */
    unsigned sessions;          /* sessions per I/O thread; 0: 1 */
    const char *secret_file;    /* CHAP "USER:PASSWORD" or "PASSWORD"; mode 0600 */
    const char *initiator_name; /* NULL: iqn.2026-12.org.vhost-scsi:<hostname> */
    unsigned login_timeout_s;   /* a login's bound, the open's and each reconnection's; 0: 10 */
    int cancel_fd;              /* the open gives up (-ECANCELED) once it is readable; -1: none */
};
/*
 * Connects once to read the LUN's geometry and identity, in the calling
 * thread, which it holds for as long (at most login_timeout_s for the
 * whole open: connect, login, the reads; -ETIMEDOUT past it).  Any thread
 * may call it: it touches nothing but its own context.  0, or -errno with
 * *err (VS_ERROR) saying why, without the URL (it may hold a password).
 */
int backend_iscsi_open(const struct backend_iscsi_opts *o, struct lun_backend **out,
                       GError **err);

/*
 * The highest LUN an iscsi:// URL may name.  libiscsi sends the number as
 * the first two bytes of the 8-byte LUN field; up to 16383 the two
 * address-method bits stay 00b (peripheral device addressing), and it is
 * the range of our own LUN IDs; above, they would select another method.
 */
#define BACKEND_ISCSI_MAX_LUN 16383

/*
 * The LUN of an iscsi:// URL: its last field, found as libiscsi's
 * iscsi_parse_full_url() finds it (after the first '@' and HOST/IQN/, before
 * a "?" query).  libiscsi reads that field with strtol() into an int, so
 * "-1" and "+1" pass and 4294967296 becomes LUN 0; here it must be plain
 * decimal 0..BACKEND_ISCSI_MAX_LUN.  Returns 0 and sets *lun, or -EINVAL.
 * If field is not NULL, *field is set to a g_malloc'd copy of the LUN's
 * text, or to NULL when the URL has no /IQN/LUN part.
 */
int backend_iscsi_url_lun(const char *url, unsigned *lun, char **field);

#endif
