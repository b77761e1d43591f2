/*
 * What the files of the vhost-user server share: the connection and queue
 * state and the functions one file's requests need from another's.  Only
 * hw/virtio/vhost-user-*.c include it; the interface is
 * include/virtio/vhost-user-server.h.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_VHOST_USER_INT_H
#define VHOST_SCSI_VHOST_USER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <linux/vhost_types.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "log-limit.h"
#include "vhost-log.h"
#include "vhost-user-server.h"

/*
 * A front-end that stops sending in the middle of a message (or stops
 * reading our reply) loses its connection after this long.
 */
#define VU_DEFAULT_TIMEOUT_MS 5000

/* Messages handled per wake-up, so one chatty front-end cannot starve the others. */
#define VU_DISPATCH_BUDGET 32

/* process(): the message waits for quiesced queues (see "holding"). */
#define VU_HELD 1

#define VU_MAX_RING_SIZE 32768u

/*
 * Inflight tracking for rings up to QEMU's largest (VIRTQUEUE_MAX_SIZE):
 * at most 66 queues x 32 KiB (the packed layout's slice), about 2 MiB per
 * connection.  Larger rings run untracked, rather than let each front-end
 * make us commit 66 MiB.
 */
#define VU_INFLIGHT_MAX_QUEUE_SIZE 1024u

#define VU_RING_FEATURES ((1ull << VIRTIO_F_VERSION_1) |            \
                          (1ull << VIRTIO_RING_F_INDIRECT_DESC) |   \
                          (1ull << VIRTIO_RING_F_EVENT_IDX) |       \
                          (1ull << VIRTIO_F_NOTIFY_ON_EMPTY) |      \
                          (1ull << VIRTIO_F_RING_PACKED) |          \
                          (1ull << VHOST_F_LOG_ALL) |               \
                          (1ull << VHOST_USER_F_PROTOCOL_FEATURES))

#define VU_PROTOCOL_DEFAULT ((1ull << VHOST_USER_PROTOCOL_F_MQ) |                  \
                             (1ull << VHOST_USER_PROTOCOL_F_LOG_SHMFD) |           \
                             (1ull << VHOST_USER_PROTOCOL_F_REPLY_ACK) |           \
                             (1ull << VHOST_USER_PROTOCOL_F_BACKEND_REQ) |         \
                             (1ull << VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD) |      \
                             (1ull << VHOST_USER_PROTOCOL_F_RESET_DEVICE) |        \
                             (1ull << VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS))
/* What this server implements; a configuration may offer less. */
#define VU_PROTOCOL_SUPPORTED (VU_PROTOCOL_DEFAULT | (1ull << VHOST_USER_PROTOCOL_F_STATUS))

struct vu_queue {
    struct virtqueue vq;
    char name[48];
    unsigned num;                /* 0 until SET_VRING_NUM */
    struct vhost_vring_addr addr;
    bool addr_set;
    uint32_t base;               /* where the next start resumes (vq_setup's encoding) */
    uint32_t stop_base;          /* where the last stop left the ring */
    bool started;                /* kick fd or polling given since the last stop */
    bool enabled;                /* SET_VRING_ENABLE (matters with PROTOCOL_FEATURES) */
    bool running;                /* between queue_start and queue_stop */
    bool quiesced;               /* ops->queue_quiesce called, not stopped or resumed yet */
    bool inflight_attached;      /* this connection tracked the ring in the inflight area ... */
    bool inflight_was_packed;    /* ... in this layout */
    int kick_fd;
    int call_fd;
    int err_fd;
};

struct vu_inflight {
    void *map;                   /* what to munmap */
    size_t map_size;
    uint8_t *area;               /* first queue region */
    size_t stride;               /* bytes from one queue's region to the next */
    uint16_t num_queues;
    uint16_t queue_size;
    int guard;                   /* guest-mem-guard handle */
};

/* The dirty log: the shared bitmap and our mapping of it. */
struct vu_log {
    struct vhost_log log;        /* bits == NULL: none */
    void *map;                   /* what to munmap */
    size_t map_size;
    int guard;                   /* guest-mem-guard handle */
};

/* One received message and the fds that came with it (-1 once taken). */
struct vu_msg {
    struct vhost_user_hdr hdr;
    union vhost_user_payload p;
    int fds[VHOST_USER_MAX_FDS];
    unsigned nfds;
};

struct vu_dev {
    int fd;
    char *name;
    const struct vu_dev_ops *ops;
    void *opaque;
    unsigned num_queues;
    unsigned max_mem_slots;
    bool mem_limit_logged;       /* a table beyond max_mem_slots was refused */
    uint64_t offered_features;
    uint64_t features;           /* acked by SET_FEATURES */
    uint64_t offered_protocol;
    uint64_t protocol;           /* acked by SET_PROTOCOL_FEATURES */
    int backend_fd;
    uint8_t status;
    struct guest_mem mem;
    struct vu_inflight inflight;
    struct vu_log log;
    bool log_skip_data_in;       /* test hook, see vu_dev_config */
    /* Every line this connection's messages or queues cause goes through it. */
    struct log_limit log_limit;
    unsigned timeout_ms;         /* for one whole message, or for a reply to be taken */
    int64_t deadline;            /* monotonic µs; 0 while no message is under way */
    struct vu_msg in;            /* the message being received */
    size_t in_got;               /* its bytes so far (header, then payload) */
    bool in_extra_fds;           /* it carried more fds than a message may */
    uint8_t out[sizeof(struct vhost_user_hdr) + sizeof(union vhost_user_payload)];
    size_t out_len, out_done;    /* a reply the peer has not taken yet */
    int out_fd;                  /* sent with its first byte, then closed */
    bool held;                   /* dev->in waits for quiesced queues (see "holding") */
    bool replaying;              /* dev->in is being handled after being held */
    bool closing;                /* vu_dev_quiesce_all: served no more */
    unsigned quiesce_pending;    /* quiesced queues with I/O still in flight */
    struct vu_queue q[];
};

/* A reply that a handler prepared; fd (if >= 0) is closed after sending. */
struct vu_reply {
    bool send;
    uint32_t size;
    union vhost_user_payload p;
    int fd;
};

/*
 * The files call one way: vhost-user-server.c (the connection) calls the
 * request handlers of vhost-user-mem.c and vhost-user-log.c, which stop
 * and restart queues through vhost-user-rings.c; the rings read the log
 * and inflight state through the helpers below and call none of them.
 */

/* Takes fd i of msg over (-1 when the message has none there). */
static inline int vu_take_fd(struct vu_msg *msg, unsigned i)
{
    int fd;

    if (i >= msg->nfds) {
        return -1;
    }
    fd = msg->fds[i];
    msg->fds[i] = -1;
    return fd;
}

static inline void vu_close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/* Whether the queues must mark what they write (VHOST_F_LOG_ALL). */
static inline bool vu_log_wanted(const struct vu_dev *dev)
{
    return dev->features & (1ull << VHOST_F_LOG_ALL);
}

/* Whether a queue may run: no log wanted, or one covering the memory table. */
static inline bool vu_log_ready(const struct vu_dev *dev)
{
    return !vu_log_wanted(dev) || vhost_log_covers(&dev->log.log, &dev->mem);
}

/* A packed ring's record in the inflight area, for queue_size entries. */
static inline size_t vu_inflight_packed_bytes(unsigned queue_size)
{
    return sizeof(struct vhost_user_inflight_queue_packed) +
           (size_t)queue_size * sizeof(struct vhost_user_inflight_desc_packed);
}

/* Queue idx's slice of the inflight area. */
static inline void *vu_inflight_slice(const struct vu_dev *dev, unsigned idx)
{
    return dev->inflight.area + idx * dev->inflight.stride;
}

/* vhost-user-rings.c: queue lifecycle and the vring requests */
void vu_memory_changed(struct vu_dev *dev);
int vu_handle_vring_fd(struct vu_dev *dev, struct vu_msg *msg);
int vu_handle_set_vring_addr(struct vu_dev *dev, struct vu_msg *msg);
void vu_reset_device(struct vu_dev *dev);
void vu_queue_refresh(struct vu_dev *dev, unsigned idx);
int vu_handle_set_vring_num(struct vu_dev *dev, struct vu_msg *msg);
int vu_handle_set_vring_enable(struct vu_dev *dev, struct vu_msg *msg);
int vu_handle_get_vring_base(struct vu_dev *dev, struct vu_msg *msg,
                             struct vu_reply *reply);
void vu_hang_up_hostile(struct vu_dev *dev, const char *name, const char *what);
int vu_handle_set_vring_base(struct vu_dev *dev, struct vu_msg *msg);
void vu_queue_stop(struct vu_dev *dev, struct vu_queue *q);
void vu_stop_all(struct vu_dev *dev);
void vu_refresh_all(struct vu_dev *dev);

/* vhost-user-mem.c: the memory table and the inflight area */
int vu_handle_get_inflight_fd(struct vu_dev *dev, struct vu_msg *msg,
                              struct vu_reply *reply);
int vu_handle_rem_mem_reg(struct vu_dev *dev, struct vu_msg *msg);
int vu_handle_add_mem_reg(struct vu_dev *dev, struct vu_msg *msg);
int vu_handle_set_mem_table(struct vu_dev *dev, struct vu_msg *msg);
void vu_inflight_unmap(struct vu_inflight *inf);
bool vu_mem_lost(const struct vu_dev *dev);
int vu_handle_set_inflight_fd(struct vu_dev *dev, struct vu_msg *msg);

/* vhost-user-log.c: the dirty log */
void vu_log_unmap(struct vu_log *l);
int vu_handle_set_log_base(struct vu_dev *dev, struct vu_msg *msg, struct vu_reply *reply);

#endif
