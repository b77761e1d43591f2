/*
 * Private state of the vhost front-end library, shared between the
 * transport-independent core (vhost-frontend.c: memory, rings, virtio-scsi
 * requests) and the two transports (vhost-frontend-user.c for a
 * vhost-user socket, vhost-frontend-kernel.c for /dev/vhost-scsi).  A
 * transport only moves the setup steps to the back-end; it never touches
 * the rings.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_VHOST_FRONTEND_INT_H
#define VHOST_SCSI_VHOST_FRONTEND_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/virtio_ring.h>
#include <linux/virtio_scsi.h>

#include "vhost-frontend.h"

/* Where our "guest RAM" sits in the guest-physical space we describe. */
#define VFE_GPA_BASE 0x100000000ull

/*
 * Per-chain scratch in shared memory, indexed like struct vfe_slot: header,
 * response, indirect table.
 */
struct vfe_slot_mem {
    union {                            /* first: descriptor tables are 16-byte aligned */
        struct vring_desc split[4];
        struct vring_packed_desc packed[4];
    } indirect;
    union {
        struct virtio_scsi_cmd_req cmd;
        struct virtio_scsi_ctrl_tmf_req tmf;
    } req;
    union {
        struct virtio_scsi_cmd_resp cmd;
        struct virtio_scsi_ctrl_tmf_resp tmf;
        struct virtio_scsi_event event;
    } resp;
} __attribute__((aligned(16)));

/*
 * Private bookkeeping for one in-flight chain, indexed by its head
 * descriptor (split) or its buffer ID (packed).
 */
struct vfe_slot {
    struct vfe_req *req;     /* request queues; NULL for control/event */
    uint16_t ndesc;          /* ring descriptors the chain uses */
    bool busy;
    struct vfe_tmf *tmf;     /* control queue: the TMF waiting for this answer */
    uint32_t len;
    uint32_t in_len;         /* device-writable bytes we posted */
};

/*
 * One virtqueue, split or packed (VIRTIO_F_RING_PACKED).  A packed ring
 * lives in the split ring's three areas: the descriptor ring where the
 * descriptor table is, the driver's event suppression structure where the
 * available ring is, the device's where the used ring is (the order of
 * SET_VRING_ADDR's three addresses, as QEMU gives them).  Its indices are
 * kept free-running like the split ones, so that the kick and reap
 * arithmetic is the same: the ring slot is idx & (num - 1) and the wrap
 * counter is 1 on even laps, 0 on odd ones (!(idx & num)); num is a power
 * of two of at most 0x8000, so 65536 is a whole, even number of laps.
 */
struct vfe_queue {
    unsigned index;              /* virtqueue index: 0 control, 1 event, 2+ requests */
    char name[16];
    unsigned num;
    bool packed;
    union {
        struct vring_desc *desc;
        struct vring_packed_desc *pdesc;
    };
    union {
        struct vring_avail *avail;
        struct vring_packed_desc_event *driver_event;   /* ours: do signal / don't */
    };
    union {
        struct vring_used *used;
        struct vring_packed_desc_event *device_event;   /* the device's: do kick / don't */
    };
    struct vfe_slot_mem *slot_mem;
    struct vfe_slot *slots;
    /*
     * Split: private descriptor chaining (free list and chains).  Packed:
     * the free buffer IDs, one per chain, whatever ring slots it takes.
     */
    uint16_t *next;
    uint16_t free_head;
    unsigned num_free;           /* free descriptors (split) or ring slots (packed) */
    uint16_t avail_idx;          /* split: our copy of avail->idx; packed: descriptors made
                                    available, so the next ring slot and wrap counter */
    uint16_t kick_old;           /* avail idx at the last kick decision */
    uint16_t last_used;          /* next used entry we will read (packed: ring slot and
                                    wrap counter, as avail_idx) */
    uint16_t used_event;         /* what we last wrote to the ring's used_event (packed: off_wrap) */
    uint16_t driver_flags;       /* packed: what we last wrote to driver_event->flags */
    /*
     * The ring base to give the back-end on start: split, its next avail
     * index; packed, vhost-user's 32 bits (the next avail slot in 0-14,
     * the avail wrap counter in 15, the used slot and wrap counter in
     * 16-30 and 31), which carry its used index across a stop, where a
     * split ring's is in the used ring.
     */
    uint32_t base;
    unsigned inflight;
    bool broken;
    int kick_fd;
    int call_fd;
};

struct vfe;

struct vfe_transport_ops {
    const char *name;
    /* Opens the connection and negotiates; sets fe->features and checks the queue count. */
    int (*connect)(struct vfe *fe);
    int (*set_mem)(struct vfe *fe);
    int (*start_queue)(struct vfe *fe, struct vfe_queue *q);
    int (*start_done)(struct vfe *fe);      /* optional: after all queues */
    int (*stop_begin)(struct vfe *fe);      /* optional: before GET_VRING_BASE */
    int (*get_base)(struct vfe *fe, struct vfe_queue *q, uint32_t *base);
    void (*disconnect)(struct vfe *fe);
    /* fd that turns readable/hung-up when the back-end goes away; -1 if none */
    int (*watch_fd)(struct vfe *fe);
    /* optional: hands over the dirty log (fd of size bytes), then sets features */
    int (*set_log)(struct vfe *fe, int fd, uint64_t size);
    int (*set_features)(struct vfe *fe, uint64_t features);
};

struct vfe_extent {
    size_t off;
    size_t len;
};

struct vfe {
    struct vfe_config cfg;
    char *path;
    char *wwpn;
    const struct vfe_transport_ops *ops;
    int fd;                      /* socket or /dev/vhost-scsi */
    uint64_t features;           /* negotiated virtio features */
    uint64_t protocol_features;  /* vhost-user: negotiated */
    bool reply_ack;
    bool connected;
    bool started;
    bool split_started;          /* started, with split rings: vfe_submit's fast path */
    bool dead;                   /* the back-end went away: no more messages */
    bool mem_added;              /* vhost-user: ADD_MEM_REG done on this connection */

    int mem_fd;
    uint8_t *mem;
    size_t mem_size;

    unsigned num_queues;         /* 2 + num_request_queues */
    struct vfe_queue *queues;

    /* data heap: sorted free extents and a map of live allocations */
    size_t heap_off;
    struct vfe_extent *free_ext;
    unsigned n_free_ext, cap_free_ext;
    void *allocs;                /* GHashTable: offset -> length */

    struct vfe_stats stats;
    struct pollfd *pfds;

    /* dirty log (vfe_log_start): a memfd bitmap, one bit per page of our GPA space */
    int log_fd;
    uint8_t *log;
    size_t log_size;

    /* vhost-user inflight-tracking area (cfg.inflight, offered): read-only view */
    void *inflight_map;
    size_t inflight_map_size;
    const uint8_t *inflight_area;
    size_t inflight_size;
};

static inline uint64_t vfe_gpa(const struct vfe *fe, const void *p)
{
    return VFE_GPA_BASE + (uint64_t)((const uint8_t *)p - fe->mem);
}

static inline bool vfe_has(const struct vfe *fe, unsigned bit)
{
    return fe->features & (1ull << bit);
}

/* vhost-frontend-log.c: unmaps the dirty log (vfe_close). */
void vfe_log_free(struct vfe *fe);

extern const struct vfe_transport_ops vfe_user_ops;
extern const struct vfe_transport_ops vfe_kernel_ops;

#endif
