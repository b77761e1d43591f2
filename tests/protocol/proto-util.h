/*
 * Helpers for protocol tests that run the real vhost-scsi-target: spawn
 * it on a private socket with given arguments, wait until it listens,
 * stop or kill it, and issue SCSI commands through the front-end library.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_PROTO_UTIL_H
#define VHOST_SCSI_PROTO_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/virtio_scsi.h>

#include "vhost-frontend.h"

#define PU_TIMEOUT_MS 10000

struct pu_daemon {
    char *dir;      /* private temporary directory, removed by pu_daemon_cleanup */
    char *sock;     /* DIR/target.sock */
    pid_t pid;
    int pidfd;
    uid_t run_as;   /* 0: as ourselves; else drop to this uid/gid before exec */
};

/* Makes the temporary directory (before the LUN files are created in it). */
void pu_daemon_init(struct pu_daemon *d);
/* Starts VHOST_SCSI_TARGET --socket-path SOCK ARGS... and waits until it listens. */
void pu_daemon_start(struct pu_daemon *d, const char *const *args);
/* SIGTERM (or SIGKILL when kill9) and reap; returns the wait status. */
int pu_daemon_stop(struct pu_daemon *d, bool kill9);
bool pu_daemon_alive(struct pu_daemon *d);
/* Removes the directory and everything in it. */
void pu_daemon_cleanup(struct pu_daemon *d);

struct vfe *pu_connect(const struct pu_daemon *d, unsigned nrq);

struct pu_sense {
    unsigned key, asc, ascq;
};
struct pu_sense pu_sense_of(const struct virtio_scsi_cmd_resp *r);

/* One command on request queue 0, waited for; buf must come from vfe_alloc. */
void pu_cmd(struct vfe *fe, unsigned lun, const uint8_t *cdb, unsigned cdb_len, void *buf,
            uint32_t len, bool data_in, struct vfe_req *out);
/* TEST UNIT READY until the pending unit attentions are consumed. */
void pu_make_ready(struct vfe *fe, unsigned lun);
void pu_put_be(uint8_t *p, uint64_t v, int n);
uint64_t pu_get_be(const uint8_t *p, int n);

#endif
