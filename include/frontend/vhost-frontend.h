/*
 * A vhost front-end: the "host device" side of vhost that QEMU's
 * vhost-scsi and vhost-user-scsi devices implement, as a library.  It owns
 * a memfd region that stands in for guest RAM, builds split rings in it (or
 * packed ones, over vhost-user), creates kick and call eventfds (the call
 * eventfd is what an irqfd would be in a VM), and drives a back-end over
 * one of two transports:
 *   - the kernel's /dev/vhost-scsi (ioctls from linux/vhost.h, SET_ENDPOINT
 *     with a wwpn and tpgt), or
 *   - a vhost-user socket (the same steps as vhost-user messages).
 * On top it offers a small virtio-scsi API: submit a CDB with data buffers,
 * submit TMFs, reap completions.  Used by vhost-scsi-bench and the tests,
 * and installed as libvhost-scsi-frontend.so.0 (pkg-config
 * vhost-scsi-frontend; Debian: libvhost-scsi-frontend-dev), which exports
 * the functions declared here and nothing else.  The header needs only
 * the C library's and the kernel's (linux-libc-dev) headers.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_VHOST_FRONTEND_H
#define VHOST_SCSI_VHOST_FRONTEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/virtio_scsi.h>

enum vfe_transport { VFE_VHOST_USER, VFE_VHOST_KERNEL };

struct vfe_config {
    enum vfe_transport transport;
    const char *path;          /* socket path, or /dev/vhost-scsi (default) */
    const char *wwpn;          /* kernel: SET_ENDPOINT target */
    unsigned tpgt;             /* kernel: target portal group tag */
    unsigned num_request_queues;   /* >= 1 */
    unsigned queue_size;       /* ring entries, power of two (default 128) */
    size_t mem_size;           /* shared "guest RAM" bytes (default 64 MiB) */
    bool event_idx;            /* negotiate VIRTIO_RING_F_EVENT_IDX if offered */
    bool indirect;             /* use indirect descriptors when offered */
    bool batch;                /* vfe_submit only posts; the caller calls vfe_kick */
    bool add_mem_reg;          /* vhost-user: ADD_MEM_REG instead of SET_MEM_TABLE
                                  when CONFIGURE_MEM_SLOTS is negotiated */
    unsigned timeout_ms;       /* vhost-user reply timeout (default 10000) */
    bool poll;                 /* the caller busy-polls the used rings: ask the
                                  device for no call signals (used_event kept
                                  far ahead, NO_INTERRUPT), and vfe_poll spins
                                  instead of sleeping in poll(2) */
    bool dirty_log;            /* vhost-user: negotiate LOG_SHMFD, so that
                                  vfe_log_start can turn dirty logging on */
    bool packed;               /* packed rings (VIRTIO_F_RING_PACKED, virtio 1.2
                                  2.8): vfe_open fails with -ENOTSUP if the
                                  back-end does not offer them (the kernel's
                                  never does).  Last, in what was the struct's
                                  tail padding: its size, and so soname 0's
                                  ABI, is unchanged */
    bool inflight;             /* vhost-user: share an inflight-tracking area
                                  (GET/SET_INFLIGHT_FD) when the back-end offers
                                  INFLIGHT_SHMFD, as QEMU 8.2+'s vhost-user-scsi
                                  does; also in the tail padding */
};

struct vfe;

/* A request as the caller sees it; buffers live in the front-end's memory. */
struct vfe_req {
    unsigned queue;            /* request queue index, 0-based (virtqueue 2+queue) */
    uint8_t lun[8];
    uint64_t tag;
    uint8_t cdb[VIRTIO_SCSI_CDB_SIZE];
    void *data;                /* from vfe_alloc(); NULL if no data */
    uint32_t data_len;
    bool data_in;              /* true: device writes data (READ) */
    /* completion */
    struct virtio_scsi_cmd_resp resp;
    uint32_t used_len;         /* used ring len: bytes the device says it wrote
                                  (the kernel's vhost-scsi always says 0) */
    void *opaque;
    void (*complete)(struct vfe_req *req);
    /* private */
    uint16_t head;
    void *hdr;
    bool done;
};

/* The library's version, "MAJOR.MINOR.PATCH" (the project's). */
const char *vfe_version(void);

/* Connects, negotiates, sets the memory table and starts all queues. */
int vfe_open(const struct vfe_config *cfg, struct vfe **out);
/* Stops the queues and disconnects; harmless to call twice or after a failed start. */
void vfe_close(struct vfe *fe);
int vfe_stop(struct vfe *fe);
int vfe_start(struct vfe *fe);

/* Allocates from the shared region (for data buffers); NULL when full. */
void *vfe_alloc(struct vfe *fe, size_t len, size_t align);
void vfe_free(struct vfe *fe, void *p);

/* Makes a single-level LUN address (target 0..255, lun 0..16383). */
void vfe_lun(uint8_t out[8], unsigned target, unsigned lun);

/* Posts req on its queue (kicks unless batching); -EAGAIN if the ring is full. */
int vfe_submit(struct vfe *fe, struct vfe_req *req);
/* Kicks all queues with posted, not yet kicked requests. */
void vfe_kick(struct vfe *fe);
/*
 * Reaps completions (calls req->complete for each); waits up to
 * timeout_ms for the call eventfd when none is ready (-1: forever,
 * 0: poll).  Returns the number reaped or -errno.
 */
int vfe_poll(struct vfe *fe, int timeout_ms);
/* Submits and waits for one request: a convenience for tests. */
int vfe_exec(struct vfe *fe, struct vfe_req *req, int timeout_ms);

/* Task management on the control queue, waited for. */
int vfe_tmf(struct vfe *fe, const uint8_t lun[8], uint32_t subtype, uint64_t tag,
            uint8_t *response, int timeout_ms);

/*
 * The same without waiting: posts the TMF and kicks; vfe_poll sets
 * t->done and t->response when the answer arrives (t must live until
 * then).  Several may be outstanding.  -EAGAIN if the control ring is full.
 */
struct vfe_tmf {
    bool done;
    uint8_t response;
    uint16_t head;             /* private */
};
int vfe_tmf_submit(struct vfe *fe, const uint8_t lun[8], uint32_t subtype, uint64_t tag,
                   struct vfe_tmf *t);

struct vfe_stats {
    uint64_t kicks;            /* kick eventfd writes */
    uint64_t calls;            /* call eventfd signals received (reads with count) */
    uint64_t completions;
    uint64_t events;           /* event queue buffers returned by the device */
};
void vfe_get_stats(struct vfe *fe, struct vfe_stats *st);
/* Call eventfd of virtqueue `queue` (0 control, 1 event, 2+ request queues). */
int vfe_call_fd(struct vfe *fe, unsigned queue);
/*
 * For tests that play a hostile front-end: the kick eventfd of a queue
 * (a kick with no ring update) and the memfd standing in for guest RAM
 * (which such a test may truncate).
 */
int vfe_kick_fd(struct vfe *fe, unsigned queue);
int vfe_mem_fd(struct vfe *fe);
/* The vhost-user socket or /dev/vhost-scsi fd (to watch for a hang-up). */
int vfe_conn_fd(struct vfe *fe);
uint64_t vfe_features(struct vfe *fe);
/*
 * The inflight-tracking area the back-end keeps (cfg.inflight, and the
 * back-end offered it and gave one), read-only, and its size; NULL if
 * there is none.  Its layout is the back-end's (vhost-user.rst describes
 * the one QEMU's and ours use).
 */
const void *vfe_inflight_area(struct vfe *fe, size_t *size);

/*
 * Dirty logging as QEMU drives it during a live migration (needs
 * cfg.dirty_log and a back-end offering VHOST_F_LOG_ALL): vfe_log_start
 * hands the back-end a bitmap of one bit per 4 KiB page of our memory
 * (SET_LOG_BASE) and turns VHOST_F_LOG_ALL on; vfe_log_stop turns it off
 * (the bitmap stays readable).  -ENOTSUP when the back-end cannot log.
 */
int vfe_log_start(struct vfe *fe);
int vfe_log_stop(struct vfe *fe);
/* Pages of [p, p + len) (inside our memory) whose bit is not set; 0: all marked. */
size_t vfe_log_unmarked(struct vfe *fe, const void *p, size_t len);
/* Bits set in the whole bitmap, and clearing it (as QEMU's sync does). */
size_t vfe_log_count(struct vfe *fe);
void vfe_log_clear(struct vfe *fe);

#endif
