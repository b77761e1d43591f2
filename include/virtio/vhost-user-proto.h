/*
 * The vhost-user wire protocol (QEMU docs/interop/vhost-user.rst): message
 * numbers, flags and payload layouts shared by our back-end (the target)
 * and our front-end library (bench, tests).  The kernel's uapi has no
 * vhost-user definitions; where a payload is laid out exactly like a
 * linux/vhost_types.h struct, that struct is used.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_VHOST_USER_PROTO_H
#define VHOST_SCSI_VHOST_USER_PROTO_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/vhost_types.h>

enum vhost_user_request {
    VHOST_USER_NONE = 0,
    VHOST_USER_GET_FEATURES = 1,
    VHOST_USER_SET_FEATURES = 2,
    VHOST_USER_SET_OWNER = 3,
    VHOST_USER_RESET_OWNER = 4,
    VHOST_USER_SET_MEM_TABLE = 5,
    VHOST_USER_SET_LOG_BASE = 6,
    VHOST_USER_SET_LOG_FD = 7,
    VHOST_USER_SET_VRING_NUM = 8,
    VHOST_USER_SET_VRING_ADDR = 9,
    VHOST_USER_SET_VRING_BASE = 10,
    VHOST_USER_GET_VRING_BASE = 11,
    VHOST_USER_SET_VRING_KICK = 12,
    VHOST_USER_SET_VRING_CALL = 13,
    VHOST_USER_SET_VRING_ERR = 14,
    VHOST_USER_GET_PROTOCOL_FEATURES = 15,
    VHOST_USER_SET_PROTOCOL_FEATURES = 16,
    VHOST_USER_GET_QUEUE_NUM = 17,
    VHOST_USER_SET_VRING_ENABLE = 18,
    VHOST_USER_SEND_RARP = 19,
    VHOST_USER_NET_SET_MTU = 20,
    VHOST_USER_SET_BACKEND_REQ_FD = 21,
    VHOST_USER_IOTLB_MSG = 22,
    VHOST_USER_SET_VRING_ENDIAN = 23,
    VHOST_USER_GET_CONFIG = 24,
    VHOST_USER_SET_CONFIG = 25,
    VHOST_USER_CREATE_CRYPTO_SESSION = 26,
    VHOST_USER_CLOSE_CRYPTO_SESSION = 27,
    VHOST_USER_POSTCOPY_ADVISE = 28,
    VHOST_USER_POSTCOPY_LISTEN = 29,
    VHOST_USER_POSTCOPY_END = 30,
    VHOST_USER_GET_INFLIGHT_FD = 31,
    VHOST_USER_SET_INFLIGHT_FD = 32,
    VHOST_USER_GPU_SET_SOCKET = 33,
    VHOST_USER_RESET_DEVICE = 34,
    VHOST_USER_VRING_KICK = 35,
    VHOST_USER_GET_MAX_MEM_SLOTS = 36,
    VHOST_USER_ADD_MEM_REG = 37,
    VHOST_USER_REM_MEM_REG = 38,
    VHOST_USER_SET_STATUS = 39,
    VHOST_USER_GET_STATUS = 40,
    VHOST_USER_GET_SHARED_OBJECT = 41,
    VHOST_USER_SET_DEVICE_STATE_FD = 42,
    VHOST_USER_CHECK_DEVICE_STATE = 43,
    VHOST_USER_MAX
};

enum vhost_user_protocol_feature {
    VHOST_USER_PROTOCOL_F_MQ = 0,
    VHOST_USER_PROTOCOL_F_LOG_SHMFD = 1,
    VHOST_USER_PROTOCOL_F_RARP = 2,
    VHOST_USER_PROTOCOL_F_REPLY_ACK = 3,
    VHOST_USER_PROTOCOL_F_NET_MTU = 4,
    VHOST_USER_PROTOCOL_F_BACKEND_REQ = 5,
    VHOST_USER_PROTOCOL_F_CROSS_ENDIAN = 6,
    VHOST_USER_PROTOCOL_F_CRYPTO_SESSION = 7,
    VHOST_USER_PROTOCOL_F_PAGEFAULT = 8,
    VHOST_USER_PROTOCOL_F_CONFIG = 9,
    VHOST_USER_PROTOCOL_F_BACKEND_SEND_FD = 10,
    VHOST_USER_PROTOCOL_F_HOST_NOTIFIER = 11,
    VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD = 12,
    VHOST_USER_PROTOCOL_F_RESET_DEVICE = 13,
    VHOST_USER_PROTOCOL_F_INBAND_NOTIFICATIONS = 14,
    VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS = 15,
    VHOST_USER_PROTOCOL_F_STATUS = 16,
};

/* Virtio feature bit 30 announces GET/SET_PROTOCOL_FEATURES support. */
#define VHOST_USER_F_PROTOCOL_FEATURES 30

#define VHOST_USER_VERSION        0x1u
#define VHOST_USER_VERSION_MASK   0x3u
#define VHOST_USER_REPLY_MASK     (1u << 2)
#define VHOST_USER_NEED_REPLY     (1u << 3)

/* u64 payload of SET_VRING_KICK/CALL/ERR: low byte queue index, bit 8 no fd. */
#define VHOST_USER_VRING_IDX_MASK  0xffull
#define VHOST_USER_VRING_NOFD_MASK (1ull << 8)

#define VHOST_USER_MAX_FDS        8   /* SET_MEM_TABLE carries at most 8 regions */
#define VHOST_USER_MEM_REGIONS    8

struct vhost_user_hdr {
    uint32_t request;
    uint32_t flags;
    uint32_t size;        /* payload bytes following the header */
} __attribute__((packed));

struct vhost_user_mem_region {
    uint64_t guest_phys_addr;
    uint64_t memory_size;
    uint64_t userspace_addr;
    uint64_t mmap_offset;
};

struct vhost_user_memory {
    uint32_t nregions;
    uint32_t padding;
    struct vhost_user_mem_region regions[VHOST_USER_MEM_REGIONS];
};

/* ADD_MEM_REG / REM_MEM_REG */
struct vhost_user_mem_reg {
    uint64_t padding;
    struct vhost_user_mem_region region;
};

struct vhost_user_log {
    uint64_t mmap_size;
    uint64_t mmap_offset;
};

struct vhost_user_inflight {
    uint64_t mmap_size;
    uint64_t mmap_offset;
    uint16_t num_queues;
    uint16_t queue_size;
};

struct vhost_user_config {
    uint32_t offset;
    uint32_t size;
    uint32_t flags;
    uint8_t region[256];
};

union vhost_user_payload {
    uint64_t u64;
    struct vhost_vring_state state;   /* {index, num} */
    struct vhost_vring_addr addr;     /* {index, flags, desc, used, avail, log} */
    struct vhost_user_memory memory;
    struct vhost_user_mem_reg mem_reg;
    struct vhost_user_log log;
    struct vhost_user_inflight inflight;
    struct vhost_user_config config;
};

struct vhost_user_msg {
    struct vhost_user_hdr hdr;
    union vhost_user_payload payload;
} __attribute__((packed));

/*
 * The inflight-I/O tracking area shared with the front-end
 * (INFLIGHT_SHMFD, "split virtqueue" layout of vhost-user.rst): one of
 * these per queue, each followed by desc_num descriptors.
 */
struct vhost_user_inflight_desc {
    uint8_t inflight;
    uint8_t padding[5];
    uint16_t next;
    uint64_t counter;
};

struct vhost_user_inflight_queue {
    uint64_t features;
    uint16_t version;
    uint16_t desc_num;
    uint16_t last_batch_head;
    uint16_t used_idx;
    struct vhost_user_inflight_desc desc[];
};

/*
 * The same area's "packed virtqueue" layout (DescStatePacked and
 * QueueRegionPacked of vhost-user.rst): a packed ring's popped descriptors
 * are copied into entries taken from a free list, because the ring slots
 * they came from may be overwritten by used descriptors written out of
 * order.  A chain's first entry holds its state (inflight, num, last,
 * counter), and every entry one descriptor (id, flags, len, addr).  The
 * old_* fields are the state after the last completed batch, so a batch
 * interrupted halfway is rolled back or committed whole on reconnection.
 * Both layouts start with features, version and desc_num.
 */
struct vhost_user_inflight_desc_packed {
    uint8_t inflight;
    uint8_t padding;
    uint16_t next;          /* the next free entry, or the chain's next entry */
    uint16_t last;          /* head entry: the chain's last entry */
    uint16_t num;           /* head entry: the chain's descriptors (ring slots) */
    uint64_t counter;       /* head entry: pop order */
    uint16_t id;
    uint16_t flags;
    uint32_t len;
    uint64_t addr;
};

struct vhost_user_inflight_queue_packed {
    uint64_t features;
    uint16_t version;
    uint16_t desc_num;
    uint16_t free_head;
    uint16_t old_free_head;
    uint16_t used_idx;
    uint16_t old_used_idx;
    uint8_t used_wrap_counter;
    uint8_t old_used_wrap_counter;
    uint8_t padding[7];
    struct vhost_user_inflight_desc_packed desc[];
};

/* Another back-end reads what we write there: the layouts are the spec's, byte for byte. */
_Static_assert(sizeof(struct vhost_user_inflight_queue) == 16, "QueueRegionSplit header");
_Static_assert(sizeof(struct vhost_user_inflight_desc) == 16, "DescStateSplit");
_Static_assert(sizeof(struct vhost_user_inflight_queue_packed) == 32, "QueueRegionPacked header");
_Static_assert(sizeof(struct vhost_user_inflight_desc_packed) == 32, "DescStatePacked");

/* The request table (vhost-user-proto.c). */
#define VHOST_USER_SIZE_ANY (-1)        /* not checked: a request we do not interpret */
#define VHOST_USER_SIZE_MEM_TABLE (-2)  /* depends on nregions: see the server */
struct vhost_user_request_info {
    const char *name;
    int size;        /* payload bytes, or VHOST_USER_SIZE_* */
    bool replies;    /* answered even without NEED_REPLY */
};
const char *vhost_user_request_name(uint32_t req);
int vhost_user_request_size(uint32_t req);
bool vhost_user_request_replies(uint32_t req);

/*
 * sendmsg(2) of len bytes of buf with nfds fds attached (SCM_RIGHTS; they
 * travel with the first byte sent), MSG_NOSIGNAL added to flags, EINTR
 * retried.  Returns the bytes sent (possibly fewer than len) or -errno.
 * Tests may attach more fds than a message may carry, up to this many.
 */
#define VHOST_USER_SENDMSG_MAX_FDS 64
ssize_t vhost_user_sendmsg(int sock, const void *buf, size_t len, const int *fds, unsigned nfds,
                           int flags);
/*
 * recvmsg(2) of up to len bytes into buf, MSG_CMSG_CLOEXEC added to
 * flags, EINTR retried: the fds that came with them are appended to
 * fds[*nfds..max_fds) (*nfds advanced); any beyond max_fds are closed, and
 * those the kernel dropped (MSG_CTRUNC) are lost, both setting *fds_lost.
 * Returns the bytes read (0 at the end of the stream) or -errno (-EAGAIN
 * for EWOULDBLOCK too).  One receive side for the server, the front-end
 * and the tests' raw client.
 */
ssize_t vhost_user_recvmsg(int sock, void *buf, size_t len, int *fds, unsigned max_fds,
                           unsigned *nfds, bool *fds_lost, int flags);

#endif
