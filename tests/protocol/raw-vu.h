/*
 * A raw vhost-user peer, for tests that play a hostile front-end.
 * Messages are built by hand (struct vhost_user_hdr + payload, optional
 * SCM_RIGHTS fds, optional VHOST_USER_NEED_REPLY) and sent on a socket of
 * our own or on vfe_conn_fd() of a front-end-library connection while the
 * library is idle; every wait for a reply or a hang-up is bounded.
 *
 * On top of that, struct rv_fe: a minimal front-end made of raw messages
 * that negotiates, shares one memfd as guest RAM and lays split rings out
 * in it, so a test can put whatever it likes in the rings and hand the
 * daemon whatever fds it likes for them.
 *
 * Return values: 0 when the message went out (and, where a status is
 * awaited, came back 0); -EIO when the daemon answered with a non-zero
 * status; -ETIMEDOUT when nothing came within the bound; -ECONNRESET when
 * the daemon hung up; other -errno from the socket.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_RAW_VU_H
#define VHOST_SCSI_RAW_VU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/virtio_ring.h>

#include "vhost-user-proto.h"

/*
 * Connects to a vhost-user socket, waiting at most timeout_ms for room in
 * its listen backlog (-EAGAIN after that: the daemon is not accepting).
 */
int rv_connect(const char *path, int timeout_ms);

/* Sends one message; flags is 0 or VHOST_USER_NEED_REPLY (the version is added). */
int rv_send(int sock, uint32_t request, uint32_t flags, const void *payload, uint32_t size,
            const int *fds, unsigned nfds);
/*
 * Sends the first n bytes of that message only (the rest never follows
 * unless the caller sends it with rv_send_bytes): a peer stalling mid-message.
 */
int rv_send_bytes(int sock, const void *bytes, size_t n);
/* Builds the wire bytes of a message into out (at most sizeof(struct vhost_user_msg)). */
size_t rv_build(void *out, uint32_t request, uint32_t flags, const void *payload, uint32_t size);

/*
 * Reads one whole message (header and payload) within timeout_ms.  The
 * first fd that came with it goes to *fd (-1 if none; pass NULL to close
 * it), any others are closed.
 */
int rv_recv(int sock, struct vhost_user_msg *msg, int *fd, int timeout_ms);

/*
 * Sends request with NEED_REPLY and waits up to timeout_ms for the
 * REPLY_ACK; the status goes to *status (may be NULL) and decides the
 * return value (0 or -EIO).
 */
int rv_call(int sock, uint32_t request, const void *payload, uint32_t size, const int *fds,
            unsigned nfds, int timeout_ms, uint64_t *status);
/* A request answered with a u64 (GET_FEATURES, GET_QUEUE_NUM, ...). */
int rv_get_u64(int sock, uint32_t request, int timeout_ms, uint64_t *out);
/* A u64 request (SET_VRING_KICK/CALL/ERR, SET_FEATURES, ...) with NEED_REPLY. */
int rv_set_u64(int sock, uint32_t request, uint64_t v, int fd, int timeout_ms, uint64_t *status);
/* A {index, num} request with NEED_REPLY. */
int rv_set_state(int sock, uint32_t request, unsigned index, unsigned num, int timeout_ms);

/* True while the daemon has not hung up on sock (nothing is read). */
bool rv_peer_open(int sock);
/* Waits up to timeout_ms for the daemon to hang up on sock: 0, or -ETIMEDOUT. */
int rv_wait_hangup(int sock, int timeout_ms);

/* ---- a front-end of raw messages ----------------------------------------- */

#define RV_MAX_VQS 8
#define RV_VQ_SPAN 16384u     /* guest RAM per virtqueue: rings and one request */

struct rv_ring {
    unsigned num;                 /* 0: not set up */
    struct vring_desc *desc;
    struct vring_avail *avail;
    struct vring_used *used;
    uint8_t *buf;                 /* room for one request and its response */
    int kick_fd;                  /* ours (-1 until rv_fe_kick) */
};

struct rv_fe {
    int sock;
    int timeout_ms;               /* bound on each reply */
    uint64_t features;            /* acked */
    uint64_t protocol;            /* acked */
    int mem_fd;                   /* -1 until rv_fe_set_mem */
    uint8_t *mem;
    size_t mem_size;
    struct rv_ring ring[RV_MAX_VQS];
};

/*
 * Connects and negotiates as QEMU does: GET_FEATURES, SET_FEATURES
 * (VERSION_1 and PROTOCOL_FEATURES), GET/SET_PROTOCOL_FEATURES
 * (REPLY_ACK, MQ and what extra_protocol adds, if offered), SET_OWNER.
 */
int rv_fe_open(struct rv_fe *f, const char *path, uint64_t extra_protocol, int timeout_ms);
/* An unsealed memfd of RV_MAX_VQS * RV_VQ_SPAN bytes as guest RAM (gpa 0), by SET_MEM_TABLE. */
int rv_fe_set_mem(struct rv_fe *f);
/*
 * Lays out a ring of num entries for virtqueue vq in guest RAM and gives
 * it to the daemon: SET_VRING_NUM, _BASE 0, _ADDR, _CALL (call_fd, or
 * none if -1), _ERR (err_fd, or none if -1), _ENABLE 1.  It runs once it
 * has a kick fd (rv_fe_kick).
 */
int rv_fe_ring(struct rv_fe *f, unsigned vq, unsigned num, int call_fd, int err_fd);
/* SET_VRING_KICK for vq with fd (our own eventfd if fd < 0); the daemon's status to *status. */
int rv_fe_kick(struct rv_fe *f, unsigned vq, int fd, uint64_t *status);
/* Posts a TEST UNIT READY to target:lun on vq's ring and kicks (vq >= 2). */
void rv_fe_post_tur(struct rv_fe *f, unsigned vq, unsigned target, unsigned lun);
/* The used index of vq's ring, as the daemon last published it. */
uint16_t rv_fe_used_idx(const struct rv_fe *f, unsigned vq);
void rv_fe_close(struct rv_fe *f);

#endif
