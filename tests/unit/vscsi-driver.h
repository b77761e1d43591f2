/*
 * A virtio-scsi driver for unit tests of the device model: one front-end's
 * guest RAM (anonymous memory in one region), its split rings (control,
 * event and two request queues) with kick and call eventfds, and the
 * requests a guest driver posts on them — SCSI commands, task management
 * and AN queries — with bounded waits for their used entries.  The device
 * (vscsi_dev) runs its control queue on a "main" thread and its request
 * queues on I/O threads, as in the daemon; the target it serves is the
 * test's (real or fake).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef TESTS_UNIT_VSCSI_DRIVER_H
#define TESTS_UNIT_VSCSI_DRIVER_H

#include <stdbool.h>
#include <stdint.h>

#include <linux/virtio_ring.h>
#include <linux/virtio_scsi.h>

#include "guest-mem.h"
#include "iothread.h"
#include "virtio-scsi.h"
#include "virtqueue.h"

#define TIMEOUT_MS 10000
#define QSZ 256
#define NQ 4                    /* control, event, two request queues */
#define RAM_GPA 0x100000ull
#define RAM_SIZE (2u << 20)

/* Task management functions, by their SAM names. */
#define ABORT_TASK VIRTIO_SCSI_T_TMF_ABORT_TASK
#define ABORT_TASK_SET VIRTIO_SCSI_T_TMF_ABORT_TASK_SET
#define CLEAR_TASK_SET VIRTIO_SCSI_T_TMF_CLEAR_TASK_SET
#define LUN_RESET VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET
#define NEXUS_RESET VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET
#define QUERY_TASK VIRTIO_SCSI_T_TMF_QUERY_TASK
#define QUERY_TASK_SET VIRTIO_SCSI_T_TMF_QUERY_TASK_SET
#define FUNCTION_COMPLETE VIRTIO_SCSI_S_OK

struct tq {
    struct vring_desc *desc;
    struct vring_avail *avail;
    struct vring_used *used;
    uint16_t next_desc;
    struct virtqueue vq;
    char name[16];
};

struct fe {
    const char *name;
    struct iothread *main;      /* runs the device's hooks */
    struct vscsi_dev *dev;
    uint8_t *ram;
    struct guest_mem mem;
    size_t next_buf;
    struct tq q[NQ];
    struct io_stats stats;      /* the device's: a controller's statistics */
};

/* The daemon's threads as a device sees them: a main thread, two I/O threads. */
struct fe_threads {
    struct iothread *main;
    struct iothread *io[2];
};
void fe_threads_start(struct fe_threads *t);
/* The main thread last: it runs what was posted to it (orphaned TMFs' callbacks). */
void fe_threads_stop(struct fe_threads *t);

/* A device named name on target, its queues started (on main); io: two threads. */
void fe_open(struct fe *f, const char *name, struct scsi_target *target,
             struct iothread *main, struct iothread **io);
/* Frees the device (on main), if not done yet. */
void fe_free_dev(struct fe *f);
void fe_close(struct fe *f);

void *fe_gpa_host(struct fe *f, uint64_t gpa);
/* A buffer of guest RAM, 64-byte aligned; returns its guest address. */
uint64_t fe_alloc(struct fe *f, size_t len);

struct seg {
    uint64_t gpa;
    uint32_t len;
    bool write;
};

/* Posts a chain on queue qi and kicks; returns its head. */
uint16_t tq_post(struct fe *f, unsigned qi, const struct seg *segs, unsigned n);
/* True if head is on the used ring (published); tq_used_len: its used length. */
bool tq_used(struct fe *f, unsigned qi, uint16_t head);
uint32_t tq_used_len(struct fe *f, unsigned qi, uint16_t head);
unsigned tq_used_count(struct fe *f, unsigned qi);
/* The head of the i-th used entry. */
uint16_t tq_used_head(struct fe *f, unsigned qi, unsigned i);
/* Waits (bounded, on the call eventfd) until head is published. */
void tq_wait(struct fe *f, unsigned qi, uint16_t head);

/* A SCSI command: the header, the response, one data-in buffer if in_len. */
struct cmd {
    uint16_t head;
    unsigned qi;
    struct virtio_scsi_cmd_req *req;
    struct virtio_scsi_cmd_resp *resp;
    uint8_t *data_in;           /* the first data-in buffer */
};

/* Sets the single-level LUN address of (target, lun) (virtio 1.2 5.6.6.1). */
void fe_lun(uint8_t lun_field[8], unsigned target, unsigned lun);
/* A command to (target, lun) with one data-in buffer of in_len bytes (if any). */
struct cmd fe_cmd(struct fe *f, unsigned qi, unsigned target, unsigned lun,
                  uint64_t tag, const uint8_t *cdb, unsigned cdb_len, uint32_t in_len);
/*
 * A command with any LUN field and data buffers (guest RAM from fe_alloc;
 * write = device-writable, data-in), at most 8; the chain is laid out as a
 * driver must: header and data-out, then response and data-in.
 */
struct cmd fe_cmd_segs(struct fe *f, unsigned qi, const uint8_t lun[8], uint64_t tag,
                       const uint8_t *cdb, unsigned cdb_len, const struct seg *data, unsigned n);
void cmd_wait(struct fe *f, const struct cmd *c);
bool cmd_done(struct fe *f, const struct cmd *c);
/* TEST UNIT READY on the first request queue, waited for: its SAM status. */
uint8_t fe_tur(struct fe *f, unsigned target, unsigned lun, struct cmd *out);
/* The ASC/ASCQ of a CHECK CONDITION's sense, as 0xAAQQ (SCSI_SENSE_ASCQ_*). */
unsigned sense_code(const struct cmd *c);

struct tmf {
    uint16_t head;
    struct virtio_scsi_ctrl_tmf_resp *resp;
};

struct tmf fe_tmf(struct fe *f, uint32_t subtype, unsigned target, unsigned lun, uint64_t tag);
bool tmf_answered(struct fe *f, const struct tmf *t);
uint8_t tmf_wait(struct fe *f, const struct tmf *t);
/*
 * An AN query for target, waited for: its response.  The control queue is
 * served in ring order, so when the answer is there, every control request
 * posted before it has been looked at (a TMF unanswered then is waiting).
 */
uint8_t fe_an_query(struct fe *f, unsigned target);
/* fe_an_query of target 0, which must exist. */
void fe_ctrl_barrier(struct fe *f);

/* An event buffer posted on the event queue. */
struct evbuf {
    uint16_t head;
    struct virtio_scsi_event *ev;
};
struct evbuf fe_event_buf(struct fe *f, uint32_t len);

/* Runs fn(opaque) on the device's main thread and returns when it has. */
void fe_on_main(struct fe *f, void (*fn)(void *opaque), void *opaque);
/* Stops queue idx (on main). */
void fe_stop_queue(struct fe *f, unsigned idx);

#endif
