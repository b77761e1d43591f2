/*
 * LUNs that are Ceph RBD images, through librbd's asynchronous API
 * (hw/block/, docs/rbd.md).  The only layer that links librbd and librados.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_BACKEND_RBD_H
#define VHOST_SCSI_BACKEND_RBD_H

#include "backend.h"

struct backend_rbd_opts {
    const char *pool;
    const char *image;
    const char *snap;           /* NULL: the image itself; else read-only */
    const char *conf;           /* ceph.conf; NULL: librados's search (/etc/ceph/ceph.conf) */
    const char *client_id;      /* "admin" for client.admin; NULL: admin */
    const char *keyring;        /* NULL: what the configuration names */
    bool read_only;
    /*
     * Seconds of an outage (timeouts, no success) answered BUSY before NOT
     * READY; 0: 60.  The OSD operation timeout is half of it (at most 30 s)
     * unless the configuration sets rados_osd_op_timeout.
     */
    unsigned busy_timeout_s;
    int cancel_fd;              /* the open gives up (-ECANCELED) once it is readable; -1: none */
};

/*
 * Connects to the cluster, opens the image and reads its geometry and
 * identity, in the calling thread, which it holds for as long (the
 * connection is bounded by client_mount_timeout, 30 s unless the
 * configuration says otherwise).  A writable image with the exclusive-lock
 * feature is locked (exclusively, without transparent hand-over), and an
 * image whose lock another client holds is refused (-EBUSY).  Any thread
 * may call it.  0 and *out, or -errno with *err (VS_ERROR) saying why.
 */
int backend_rbd_open(const struct backend_rbd_opts *o, struct lun_backend **out, GError **err);

#endif
