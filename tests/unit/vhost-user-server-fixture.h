/*
 * The front-end the vhost-user server's unit tests play
 * (vhost-user-server-fixture.c, compiled into each of them): one end of
 * a socketpair to a server connection (hw/virtio/vhost-user-server.c)
 * whose device is a fake that records what the server asks of it (queue
 * starts and stops, memory changes, resets) and, on start, pops and
 * completes what the guest posted; a memfd of guest RAM; hand-built
 * messages with fds as ancillary data, and their replies; and the steps
 * QEMU takes to bring a queue up.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_VHOST_USER_SERVER_FIXTURE_H
#define VHOST_SCSI_VHOST_USER_SERVER_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "vhost-user-server.h"

#define NUM_QUEUES 3
#define RING_SIZE 256u
#define MEM_SIZE (1u << 20)
#define MEM_GPA 0x100000ull
#define MEM_UVA 0x7f1200000000ull
/* Where the test puts queue i's ring inside guest memory. */
#define RING_OFF(i) (0x10000ull * ((i) + 1))
#define DESC_OFF(i) RING_OFF(i)
#define AVAIL_OFF(i) (RING_OFF(i) + 0x1000)
#define USED_OFF(i) (RING_OFF(i) + 0x2000)

/* ---- a fake device that records what the server asks of it ------------ */

struct fake_dev {
    unsigned starts[VU_MAX_QUEUES];
    unsigned stops[VU_MAX_QUEUES];
    uint16_t start_base[VU_MAX_QUEUES];
    int start_kick_fd[VU_MAX_QUEUES];
    struct virtqueue *started_vq[VU_MAX_QUEUES];
    bool inflight_at_start[VU_MAX_QUEUES];
    unsigned resets;
    unsigned mem_changes;
    int start_result;
    /* Serving: on start, pop up to `pop` chains and complete the first `complete`. */
    unsigned pop, complete;
    unsigned popped;
    uint16_t heads[8];
    char first_bytes[8][16];     /* start of each chain's first buffer */
    unsigned resubmit_at_start;
};

/* ---- the test's front-end ------------------------------------------------ */

struct fixture {
    struct fake_dev fake;
    struct vu_dev *dev;
    int sock;            /* our end */
    int memfd;           /* guest RAM */
    uint8_t *ram;        /* our mapping of it */
    int eventfds[64];    /* the front-end's kick/call fds, closed at the end */
    unsigned neventfds;
};

/*
 * A connection offering device_features on NUM_QUEUES queues, its fake
 * device and guest RAM; warnings are fatal until a test relaxes that.
 */
void fixture_init(struct fixture *fx, uint64_t device_features);

/* Frees the connection (if the test has not) and closes everything. */
void fixture_fini(struct fixture *fx);

/*
 * A new back-end instance serves the same front-end: a new connection on
 * the same guest memory.  The fake device's stop completes nothing, so
 * whatever was in flight stays marked, as after a crash.
 */
void fixture_reconnect(struct fixture *fx);

/* One message, header and payload, with nfds fds, in one sendmsg. */
void send_msg_fds(int sock, uint32_t req, uint32_t flags, const void *payload,
                  uint32_t size, const int *fds, unsigned nfds);

/* send_msg_fds() without fds. */
void send_msg(int sock, uint32_t req, uint32_t flags, const void *payload,
              uint32_t size);

/* A reply as the front-end sees it. */
struct reply {
    struct vhost_user_hdr hdr;
    union vhost_user_payload p;
    int fd;
};

/* The next reply, which must come within REPLY_TIMEOUT_MS and be well formed. */
struct reply recv_reply(int sock);

/* No reply is waiting on the socket. */
void assert_no_reply(int sock);

/* Sends a request without NEED_REPLY that has no reply; the server accepts it. */
void request(struct fixture *fx, uint32_t req, const void *payload, uint32_t size,
             const int *fds, unsigned nfds);

/* Sends a request with NEED_REPLY and returns the REPLY_ACK status. */
uint64_t request_ack(struct fixture *fx, uint32_t req, const void *payload,
                     uint32_t size, const int *fds, unsigned nfds);

/* A request answered with a u64 (GET_FEATURES, GET_QUEUE_NUM, ...): the value. */
uint64_t get_u64(struct fixture *fx, uint32_t req);

/* A request carrying a u64, which the server must accept. */
void set_u64(struct fixture *fx, uint32_t req, uint64_t v);

/* A request carrying a vring state (index, num), which the server must accept. */
void set_state(struct fixture *fx, uint32_t req, unsigned idx, unsigned num);

/* SET_VRING_KICK, _CALL or _ERR of queue idx with fd (< 0: NOFD), accepted. */
void set_vring_fd(struct fixture *fx, uint32_t req, unsigned idx, int fd);

/* SET_VRING_ADDR of queue idx at its place in guest RAM mapped at uva_base. */
void set_vring_addr(struct fixture *fx, unsigned idx, uint64_t uva_base);

/* SET_MEM_TABLE of one MEM_SIZE region of memfd at gpa and uva, accepted. */
void set_mem_table(struct fixture *fx, int memfd, uint64_t gpa, uint64_t uva);

/* GET_VRING_BASE of queue idx: its reply. */
struct vhost_vring_state get_vring_base(struct fixture *fx, unsigned idx);

/* Sends a message the server must refuse by ending the connection. */
int request_fatal(struct fixture *fx, uint32_t req, uint32_t flags, const void *payload,
                  uint32_t size);

/* The fds this process has open. */
unsigned count_open_fds(void);

/* A non-blocking eventfd the caller closes. */
int new_eventfd(void);

/* An eventfd the fixture closes at the end. */
int fx_eventfd(struct fixture *fx);

/* Reads and resets the eventfd's counter (0 when not signalled). */
uint64_t eventfd_count(int fd);

/* The ring features the server offers, and VHOST_USER_F_PROTOCOL_FEATURES. */
extern const uint64_t ring_features;
extern const uint64_t proto_bit;

/*
 * What QEMU's vhost_dev_start sends for queue idx (after SET_FEATURES and
 * the memory table), minus the final SET_VRING_ENABLE.
 */
void configure_queue(struct fixture *fx, unsigned idx, uint32_t base, int kick,
                     int call);

/* Protocol features, SET_FEATURES with bit 30 and a one-region memory table. */
void negotiate(struct fixture *fx, uint64_t extra_features);

/* Lays out chain heads 0..n-1 (one 16-byte readable buffer each) in queue idx's ring. */
void guest_post_requests(struct fixture *fx, unsigned idx, unsigned n);

/* The used index of queue idx, as the guest reads it. */
uint16_t guest_used_idx(struct fixture *fx, unsigned idx);

/* A packed ring's base where both sides start: slot 0, wrap counters 1. */
#define PACKED_FRESH_BASE 0x80008000u

/*
 * guest_post_requests for a packed ring in its first lap: ids first ..
 * first+n-1 (request i's buffer says "request i") in slots first onwards.
 */
void guest_post_packed_requests(struct fixture *fx, unsigned idx, unsigned first, unsigned n);

/* The id the device wrote at a slot of queue idx's packed ring in lap 1, or -1: none. */
int guest_packed_used_id(struct fixture *fx, unsigned idx, unsigned slot);

#endif
