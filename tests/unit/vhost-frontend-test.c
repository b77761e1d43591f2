/*
 * Tests of the vhost front-end library against a scripted in-process
 * vhost-user back-end (a thread with a tiny RAM disk, serving split or
 * packed rings as the front-end negotiated), so the library's side of the
 * protocol is checked on its own: the handshake order and payloads,
 * REPLY_ACK, a back-end that rejects a step or never answers, request
 * layout and data integrity with many requests in flight, EVENT_IDX kick
 * and interrupt suppression, TMFs (waited for or not), stop/start ring
 * bases, a device that returns a descriptor it was never given, a
 * hang-up, and the data-buffer allocator; for packed rings also many laps
 * of a small ring with chains across its end, completions in reverse
 * order, the kick decision against each device event setting (off_wrap
 * in this lap, the last and the next), and the refusals when packed
 * rings cannot be had; and the inflight-tracking area's handshake (asked
 * for where QEMU asks, handed back, declined, not offered, broken).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>
#include <linux/virtio_scsi.h>

#include "scsi-cmd.h"
#include "vhost-frontend.h"
#include "vhost-user-proto.h"

#define MOCK_QUEUES 8
#define DISK_BLOCKS 2048          /* of 512 bytes */

/*
 * A packed ring uses the split ring's three pointers for its descriptor
 * ring, the driver's and the device's event suppression structures, and
 * last_avail and used_idx as ring slots with a wrap counter beside each
 * (as virtio 1.2 2.8 and vhost-user's ring base put them), not the
 * front-end's free-running indices.
 */
struct mock_vq {
    unsigned num;
    struct vring_desc *desc;
    struct vring_avail *avail;
    struct vring_used *used;
    uint16_t last_avail, used_idx, signalled;
    bool avail_wrap, used_wrap;
    int kick, call;
    bool enabled, running;
};

struct mock {
    /* script */
    unsigned queue_num;            /* reported by GET_QUEUE_NUM */
    uint32_t nack_request;         /* answer this request's REPLY_ACK with failure */
    uint32_t silent_request;       /* never answer this request */
    bool bogus_used;               /* return a descriptor id never posted */
    bool hangup_on_io;             /* close the socket on the first request */
    bool reverse;                  /* complete each batch of chains in reverse order */
    bool frozen;                   /* (atomic) take kicks, process nothing: mock_freeze */
    uint64_t features;
    enum { INFLIGHT_NOT_OFFERED, INFLIGHT_AREA, INFLIGHT_DECLINED, INFLIGHT_NO_FD,
           INFLIGHT_SHORT } inflight;

    /* observed */
    GArray *log;                   /* struct vhost_user_msg headers + payload */
    uint64_t acked_features, protocol_features;
    unsigned signals;
    unsigned wrapped_chains;       /* packed: chains that ran across the ring's end */
    unsigned reordered;            /* batches completed out of order */
    uint8_t *inflight_map;         /* the area GET_INFLIGHT_FD gave, mapped */
    size_t inflight_size;
    ino_t inflight_ino, set_inflight_ino;   /* the file given, and the one handed back */
    GMutex lock;                   /* held while the rings are processed */

    char *dir, *path;
    int listen_fd, conn;
    GThread *thread;
    int stop_pipe[2];

    uint8_t *mem;
    size_t mem_size;
    uint64_t gpa, uva;
    struct mock_vq vq[MOCK_QUEUES];
    uint8_t disk[DISK_BLOCKS * 512];
    bool ua_pending;
};

static void *gpa_ptr(struct mock *m, uint64_t gpa, uint64_t len)
{
    if (!m->mem || gpa < m->gpa || gpa - m->gpa > m->mem_size || len > m->mem_size - (gpa - m->gpa)) {
        return NULL;
    }
    return m->mem + (gpa - m->gpa);
}

static void *uva_ptr(struct mock *m, uint64_t uva)
{
    return m->mem && uva >= m->uva && uva - m->uva < m->mem_size ? m->mem + (uva - m->uva) : NULL;
}

static void mock_reply(struct mock *m, struct vhost_user_msg *msg, size_t size)
{
    msg->hdr.flags = VHOST_USER_VERSION | VHOST_USER_REPLY_MASK;
    msg->hdr.size = size;
    g_assert_cmpint(write(m->conn, msg, sizeof(msg->hdr) + size), ==, sizeof(msg->hdr) + size);
}

/* A reply carrying one fd (GET_INFLIGHT_FD's); fd < 0: none. */
static void mock_reply_fd(struct mock *m, struct vhost_user_msg *msg, size_t size, int fd)
{
    union {
        char b[CMSG_SPACE(sizeof(int))];
        struct cmsghdr a;
    } ctl;
    struct iovec iov = { msg, sizeof(msg->hdr) + size };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

    msg->hdr.flags = VHOST_USER_VERSION | VHOST_USER_REPLY_MASK;
    msg->hdr.size = size;
    if (fd >= 0) {
        mh.msg_control = ctl.b;
        mh.msg_controllen = sizeof(ctl.b);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    g_assert_cmpint(sendmsg(m->conn, &mh, 0), ==, sizeof(msg->hdr) + size);
}

/*
 * GET_INFLIGHT_FD as the script says: an area of a page per queue with
 * a mark at its start, size 0 (no tracking), a size with no fd, or a
 * size beyond the end of the file given.
 */
static void mock_get_inflight(struct mock *m, struct vhost_user_msg *msg)
{
    struct vhost_user_inflight in = msg->payload.inflight;
    struct stat st;
    int fd = -1;

    memset(&msg->payload.inflight, 0, sizeof(msg->payload.inflight));
    msg->payload.inflight.num_queues = in.num_queues;
    msg->payload.inflight.queue_size = in.queue_size;
    if (m->inflight != INFLIGHT_DECLINED) {
        msg->payload.inflight.mmap_size = (uint64_t)in.num_queues * 4096;
    }
    if (m->inflight == INFLIGHT_SHORT) {
        fd = memfd_create("mock-inflight-short", MFD_CLOEXEC);
        g_assert_cmpint(fd, >=, 0);
        g_assert_cmpint(ftruncate(fd, 4096), ==, 0);
    }
    if (m->inflight == INFLIGHT_AREA) {
        m->inflight_size = (size_t)in.num_queues * 4096;
        fd = memfd_create("mock-inflight", MFD_CLOEXEC);
        g_assert_cmpint(fd, >=, 0);
        g_assert_cmpint(ftruncate(fd, (off_t)m->inflight_size), ==, 0);
        g_assert_cmpint(fstat(fd, &st), ==, 0);
        m->inflight_ino = st.st_ino;
        m->inflight_map = mmap(NULL, m->inflight_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        g_assert_true(m->inflight_map != MAP_FAILED);
        memcpy(m->inflight_map, "mock", 4);
    }
    mock_reply_fd(m, msg, sizeof(msg->payload.inflight), fd);
    if (fd >= 0) {
        close(fd);
    }
}

/* Copies the in/out segments of one chain into flat buffers. */
struct chain {
    uint8_t *out[4];
    uint32_t out_len[4];
    unsigned nout;
    uint8_t *in[4];
    uint32_t in_len[4];
    unsigned nin;
};

static void add_seg(struct mock *m, struct chain *c, uint64_t addr, uint32_t len, bool write)
{
    uint8_t *p = gpa_ptr(m, addr, len);

    g_assert_nonnull(p);
    if (write) {
        g_assert_cmpuint(c->nin, <, 4);
        c->in[c->nin] = p;
        c->in_len[c->nin++] = len;
    } else {
        g_assert_cmpuint(c->nin, ==, 0);   /* out before in */
        g_assert_cmpuint(c->nout, <, 4);
        c->out[c->nout] = p;
        c->out_len[c->nout++] = len;
    }
}

static bool walk_chain(struct mock *m, struct mock_vq *q, uint16_t head, struct chain *c)
{
    struct vring_desc *table = q->desc;
    unsigned max = q->num;
    uint16_t i = head;
    memset(c, 0, sizeof(*c));
    if (table[i].flags & VRING_DESC_F_INDIRECT) {
        table = gpa_ptr(m, table[i].addr, table[i].len);
        max = q->desc[i].len / sizeof(struct vring_desc);
        i = 0;
        g_assert_nonnull(table);
    }
    for (unsigned n = 0; n < 8; n++) {
        g_assert_cmpuint(i, <, max);
        struct vring_desc *d = &table[i];
        add_seg(m, c, d->addr, d->len, d->flags & VRING_DESC_F_WRITE);
        if (!(d->flags & VRING_DESC_F_NEXT)) {
            return true;
        }
        i = d->next;
    }
    return false;
}

static bool mock_packed(struct mock *m)
{
    return m->acked_features & (1ull << VIRTIO_F_RING_PACKED);
}

static struct vring_packed_desc *packed_ring(struct mock_vq *q)
{
    return (struct vring_packed_desc *)q->desc;
}

/* The front-end's event suppression structure (where a split ring's avail ring is). */
static struct vring_packed_desc_event *driver_event(struct mock_vq *q)
{
    return (struct vring_packed_desc_event *)q->avail;
}

/* Ours (where a split ring's used ring is). */
static struct vring_packed_desc_event *device_event(struct mock_vq *q)
{
    return (struct vring_packed_desc_event *)q->used;
}

static uint16_t wrap_bits(bool wrap)
{
    return wrap ? 1u << VRING_PACKED_EVENT_F_WRAP_CTR : 0;
}

/* Whether the descriptor at last_avail is available: AVAIL is our wrap counter, USED is not. */
static bool packed_avail(struct mock_vq *q)
{
    uint16_t f = __atomic_load_n(&packed_ring(q)[q->last_avail].flags, __ATOMIC_ACQUIRE);

    return !!(f & 1u << VRING_PACKED_DESC_F_AVAIL) == q->avail_wrap &&
           !!(f & 1u << VRING_PACKED_DESC_F_USED) != q->avail_wrap;
}

/*
 * Takes the chain at last_avail: every descriptor must be available and
 * carry the head's buffer ID; an indirect one stands alone, its table's
 * entries consecutive without NEXT.  Returns the ID, and the ring slots
 * the chain took in *ndesc.
 */
static uint16_t walk_packed(struct mock *m, struct mock_vq *q, struct chain *c, uint16_t *ndesc)
{
    uint16_t id = packed_ring(q)[q->last_avail].id;

    memset(c, 0, sizeof(*c));
    for (*ndesc = 0;;) {
        g_assert_true(packed_avail(q));
        struct vring_packed_desc d = packed_ring(q)[q->last_avail];
        bool next = d.flags & VRING_DESC_F_NEXT;
        g_assert_cmpuint(d.id, ==, id);
        g_assert_cmpuint(++*ndesc, <=, 4);
        if (d.flags & VRING_DESC_F_INDIRECT) {
            const struct vring_packed_desc *t = gpa_ptr(m, d.addr, d.len);
            g_assert_nonnull(t);
            g_assert_false(next);
            g_assert_cmpuint(*ndesc, ==, 1);
            g_assert_cmpuint(d.len % sizeof(*t), ==, 0);
            for (unsigned i = 0; i < d.len / sizeof(*t); i++) {
                g_assert_cmpuint(t[i].flags & (VRING_DESC_F_NEXT | VRING_DESC_F_INDIRECT), ==, 0);
                add_seg(m, c, t[i].addr, t[i].len, t[i].flags & VRING_DESC_F_WRITE);
            }
        } else {
            add_seg(m, c, d.addr, d.len, d.flags & VRING_DESC_F_WRITE);
        }
        if (++q->last_avail == q->num) {
            q->last_avail = 0;
            q->avail_wrap = !q->avail_wrap;
            m->wrapped_chains += next;
        }
        if (!next) {
            return id;
        }
    }
}

/* Writes a used descriptor at used_idx, flags last; the used index skips the chain's slots. */
static void mock_push_packed(struct mock_vq *q, uint16_t id, uint32_t len, uint16_t ndesc)
{
    struct vring_packed_desc *d = &packed_ring(q)[q->used_idx];
    const uint16_t both = 1u << VRING_PACKED_DESC_F_AVAIL | 1u << VRING_PACKED_DESC_F_USED;

    d->id = id;
    d->len = len;
    __atomic_store_n(&d->flags, q->used_wrap ? both : 0, __ATOMIC_RELEASE);
    q->used_idx += ndesc;
    if (q->used_idx >= q->num) {
        q->used_idx -= q->num;
        q->used_wrap = !q->used_wrap;
    }
}

/*
 * Whether the front-end wants a signal for the used descriptors from
 * (old, old_wrap) up to used_idx (fewer than a lap: more always signals),
 * by its event suppression structure, as vhost's
 * vhost_vring_packed_need_event reads it.
 */
static bool mock_packed_need_signal(struct mock_vq *q, uint16_t old, bool old_wrap,
                                    unsigned advanced)
{
    struct vring_packed_desc_event ev = *driver_event(q);

    if (ev.flags == VRING_PACKED_EVENT_FLAG_DISABLE) {
        return false;
    }
    if (ev.flags != VRING_PACKED_EVENT_FLAG_DESC || advanced >= q->num) {
        return true;
    }
    uint16_t event = ev.off_wrap & ~wrap_bits(true);
    if (!!(ev.off_wrap & wrap_bits(true)) != q->used_wrap) {
        event -= q->num;
    }
    if (old_wrap != q->used_wrap) {
        old -= q->num;
    }
    return vring_need_event(event, q->used_idx, old);
}

static uint64_t be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++) {
        v = v << 8 | p[i];
    }
    return v;
}

/* Serves one SCSI command; returns bytes written to the in segments. */
static uint32_t mock_scsi(struct mock *m, struct chain *c)
{
    g_assert_cmpuint(c->out_len[0], ==, sizeof(struct virtio_scsi_cmd_req));
    g_assert_cmpuint(c->in_len[0], ==, sizeof(struct virtio_scsi_cmd_resp));
    struct virtio_scsi_cmd_req *req = (void *)c->out[0];
    struct virtio_scsi_cmd_resp *resp = (void *)c->in[0];
    uint8_t *data_in = c->nin > 1 ? c->in[1] : NULL;
    uint32_t in_len = c->nin > 1 ? c->in_len[1] : 0;
    uint8_t *data_out = c->nout > 1 ? c->out[1] : NULL;
    uint32_t out_len = c->nout > 1 ? c->out_len[1] : 0;
    uint32_t written = 0;

    memset(resp, 0, sizeof(*resp));
    if (req->lun[0] != 1 || req->lun[1] != 0 || (req->lun[2] & 0x3f) || req->lun[3]) {
        resp->response = VIRTIO_SCSI_S_BAD_TARGET;
        return sizeof(*resp);
    }
    if (m->ua_pending && req->cdb[0] != SCSI_OPCODE_INQUIRY) {
        m->ua_pending = false;
        resp->status = 2;
        resp->sense_len = 18;
        resp->sense[0] = SCSI_SENSE_FIXED_CURRENT;
        resp->sense[2] = SCSI_SENSE_UNIT_ATTENTION;
        resp->sense[12] = SCSI_SENSE_ASCQ_BUS_RESET >> 8;
        return sizeof(*resp);
    }
    switch (req->cdb[0]) {
    case SCSI_OPCODE_TESTUNITREADY:
        break;
    case SCSI_OPCODE_SERVICE_ACTION_IN: { /* READ CAPACITY(16) */
        uint8_t cap[32] = { 0 };
        uint64_t last = DISK_BLOCKS - 1;
        for (int i = 0; i < 8; i++) {
            cap[i] = last >> (56 - 8 * i);
        }
        cap[10] = 2;  /* 512 */
        written = MIN(in_len, sizeof(cap));
        memcpy(data_in, cap, written);
        break;
    }
    case SCSI_OPCODE_READ16:
    case SCSI_OPCODE_WRITE16: {
        uint64_t lba = be(&req->cdb[2], 8);
        uint32_t n = be(&req->cdb[10], 4);
        g_assert_cmpuint(lba + n, <=, DISK_BLOCKS);
        if (req->cdb[0] == SCSI_OPCODE_READ16) {
            g_assert_cmpuint(in_len, ==, n * 512);
            memcpy(data_in, m->disk + lba * 512, in_len);
            written = in_len;
        } else {
            g_assert_cmpuint(out_len, ==, n * 512);
            memcpy(m->disk + lba * 512, data_out, out_len);
        }
        break;
    }
    default:
        resp->status = 2;
        resp->sense_len = 18;
        resp->sense[0] = SCSI_SENSE_FIXED_CURRENT;
        resp->sense[2] = SCSI_SENSE_ILLEGAL_REQUEST;
        resp->sense[12] = SCSI_SENSE_ASCQ_INVALID_OPERATION_CODE >> 8;
        break;
    }
    return sizeof(*resp) + written;
}

static void mock_push(struct mock *m, struct mock_vq *q, uint16_t id, uint32_t len)
{
    q->used->ring[q->used_idx & (q->num - 1)] = (struct vring_used_elem){ id, len };
    q->used_idx++;
}

static void mock_notify(struct mock *m, struct mock_vq *q, uint16_t old)
{
    __atomic_store_n(&q->used->idx, q->used_idx, __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    bool need;
    if (m->acked_features & (1ull << VIRTIO_RING_F_EVENT_IDX)) {
        need = vring_need_event(q->avail->ring[q->num], q->used_idx, old);
    } else {
        need = !(q->avail->flags & VRING_AVAIL_F_NO_INTERRUPT);
    }
    if (need && q->used_idx != old) {
        uint64_t one = 1;
        __atomic_fetch_add(&m->signals, 1, __ATOMIC_SEQ_CST);  /* before the reader can see the signal */
        g_assert_cmpint(write(q->call, &one, 8), ==, 8);
    }
}

/* A chain taken, to be completed (in reverse order with m->reverse). */
struct mock_done {
    uint16_t id, ndesc;
    uint32_t len;
};

/* Serves one chain; false when the connection should be dropped. */
static bool mock_serve(struct mock *m, unsigned idx, struct chain *c, uint32_t *len)
{
    if (idx == 0) {
        g_assert_cmpuint(c->out_len[0], ==, sizeof(struct virtio_scsi_ctrl_tmf_req));
        struct virtio_scsi_ctrl_tmf_req *t = (void *)c->out[0];
        g_assert_cmpuint(t->type, ==, VIRTIO_SCSI_T_TMF);
        c->in[0][0] = t->subtype == VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET ?
                      VIRTIO_SCSI_S_FUNCTION_SUCCEEDED : VIRTIO_SCSI_S_FUNCTION_REJECTED;
        *len = 1;
        return true;
    }
    if (m->hangup_on_io) {
        return false;
    }
    *len = mock_scsi(m, c);
    return true;
}

/* Takes every available chain of q into done[]; false when the connection should be dropped. */
static bool mock_take(struct mock *m, unsigned idx, struct mock_done *done, unsigned *n)
{
    struct mock_vq *q = &m->vq[idx];
    bool packed = mock_packed(m);

    for (;;) {
        uint16_t avail = packed ? 0 : __atomic_load_n(&q->avail->idx, __ATOMIC_ACQUIRE);
        while (packed ? packed_avail(q) : q->last_avail != avail) {
            struct chain c;
            struct mock_done d = { .ndesc = 1 };
            if (packed) {
                d.id = walk_packed(m, q, &c, &d.ndesc);
            } else {
                d.id = q->avail->ring[q->last_avail & (q->num - 1)];
                q->last_avail++;
                g_assert_true(walk_chain(m, q, d.id, &c));
            }
            if (idx == 1) {
                continue;   /* event buffers stay with the device */
            }
            if (!mock_serve(m, idx, &c, &d.len)) {
                return false;
            }
            if (m->bogus_used && idx >= 2) {
                d.id = (d.id + 1) % q->num;
            }
            g_assert_cmpuint(*n, <, q->num);
            done[(*n)++] = d;
        }
        if (!(m->acked_features & (1ull << VIRTIO_RING_F_EVENT_IDX))) {
            return true;
        }
        /* a kick for the next descriptor only, then recheck for a racing one */
        if (packed) {
            device_event(q)->off_wrap = q->last_avail | wrap_bits(q->avail_wrap);
            device_event(q)->flags = VRING_PACKED_EVENT_FLAG_DESC;
        } else {
            uint16_t ae = q->last_avail;
            memcpy(&q->used->ring[q->num], &ae, sizeof(ae));
        }
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        if (!(packed ? packed_avail(q) :
              __atomic_load_n(&q->avail->idx, __ATOMIC_ACQUIRE) != q->last_avail)) {
            return true;
        }
    }
}

/* Returns false when the connection should be dropped. */
static bool mock_process(struct mock *m, unsigned idx)
{
    struct mock_vq *q = &m->vq[idx];
    struct mock_done done[256];
    unsigned n = 0;
    uint64_t v;
    if (read(q->kick, &v, 8) < 0) {
        /* spurious wakeup */
    }
    g_assert_cmpuint(q->num, <=, G_N_ELEMENTS(done));
    g_mutex_lock(&m->lock);
    if (__atomic_load_n(&m->frozen, __ATOMIC_ACQUIRE)) {
        g_mutex_unlock(&m->lock);
        return true;
    }
    uint16_t old = q->used_idx;
    bool old_wrap = q->used_wrap;
    bool alive = mock_take(m, idx, done, &n);
    unsigned advanced = 0;
    for (unsigned i = 0; alive && i < n; i++) {
        const struct mock_done *d = &done[m->reverse ? n - 1 - i : i];
        if (mock_packed(m)) {
            mock_push_packed(q, d->id, d->len, d->ndesc);
        } else {
            mock_push(m, q, d->id, d->len);
        }
        advanced += d->ndesc;
    }
    m->reordered += m->reverse && n > 1;
    if (alive && !mock_packed(m)) {
        mock_notify(m, q, old);
    } else if (alive && n && mock_packed_need_signal(q, old, old_wrap, advanced)) {
        uint64_t one = 1;
        __atomic_fetch_add(&m->signals, 1, __ATOMIC_SEQ_CST);
        g_assert_cmpint(write(q->call, &one, 8), ==, 8);
    }
    g_mutex_unlock(&m->lock);
    return alive;
}

/* From now on kicks are taken and nothing is processed, until mock_thaw. */
static void mock_freeze(struct mock *m)
{
    g_mutex_lock(&m->lock);     /* a pass under way ends first, and none starts after */
    __atomic_store_n(&m->frozen, true, __ATOMIC_RELEASE);
    g_mutex_unlock(&m->lock);
}

/* Processes again; a kick of its own makes up for those that were taken. */
static void mock_thaw(struct mock *m, struct vfe *fe, unsigned queue)
{
    uint64_t one = 1;

    __atomic_store_n(&m->frozen, false, __ATOMIC_RELEASE);
    g_assert_cmpint(write(vfe_kick_fd(fe, queue), &one, 8), ==, 8);
}

static int recv_fds(int fd, void *buf, size_t len, int *fds, unsigned *nfds)
{
    union {
        char b[CMSG_SPACE(sizeof(int) * 8)];
        struct cmsghdr a;
    } ctl;
    struct iovec iov = { buf, len };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
                         .msg_controllen = sizeof(ctl.b) };
    ssize_t n = recvmsg(fd, &mh, MSG_WAITALL);
    *nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            *nfds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            memcpy(fds, CMSG_DATA(c), *nfds * sizeof(int));
        }
    }
    return (int)n;
}

/* Handles one message; false ends the connection. */
static bool mock_message(struct mock *m)
{
    struct vhost_user_msg msg = { 0 };
    int fds[8];
    unsigned nfds;
    int n = recv_fds(m->conn, &msg.hdr, sizeof(msg.hdr), fds, &nfds);
    if (n <= 0) {
        return false;
    }
    g_assert_cmpint(n, ==, sizeof(msg.hdr));
    g_assert_cmpuint(msg.hdr.size, <=, sizeof(msg.payload));
    if (msg.hdr.size) {
        g_assert_cmpint(recv(m->conn, &msg.payload, msg.hdr.size, MSG_WAITALL), ==, msg.hdr.size);
    }
    g_array_append_val(m->log, msg);
    if (msg.hdr.request == m->silent_request) {
        return true;
    }
    bool ok = true;
    unsigned idx = msg.payload.state.index;
    switch (msg.hdr.request) {
    case VHOST_USER_GET_FEATURES:
        msg.payload.u64 = m->features;
        mock_reply(m, &msg, 8);
        return true;
    case VHOST_USER_GET_PROTOCOL_FEATURES:
        msg.payload.u64 = (1ull << VHOST_USER_PROTOCOL_F_MQ) |
                          (1ull << VHOST_USER_PROTOCOL_F_REPLY_ACK) |
                          (1ull << VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS) |
                          (1ull << VHOST_USER_PROTOCOL_F_CONFIG) |
                          (m->inflight != INFLIGHT_NOT_OFFERED ?
                           1ull << VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD : 0);
        mock_reply(m, &msg, 8);
        return true;
    case VHOST_USER_GET_INFLIGHT_FD:
        mock_get_inflight(m, &msg);
        return true;
    case VHOST_USER_SET_INFLIGHT_FD: {
        struct stat st;

        g_assert_cmpuint(nfds, ==, 1);
        g_assert_cmpint(fstat(fds[0], &st), ==, 0);
        m->set_inflight_ino = st.st_ino;
        break;
    }
    case VHOST_USER_SET_PROTOCOL_FEATURES:
        m->protocol_features = msg.payload.u64;
        break;
    case VHOST_USER_GET_QUEUE_NUM:
        msg.payload.u64 = m->queue_num;
        mock_reply(m, &msg, 8);
        return true;
    case VHOST_USER_GET_MAX_MEM_SLOTS:
        msg.payload.u64 = 8;
        mock_reply(m, &msg, 8);
        return true;
    case VHOST_USER_SET_FEATURES:
        m->acked_features = msg.payload.u64;
        break;
    case VHOST_USER_SET_MEM_TABLE:
    case VHOST_USER_ADD_MEM_REG: {
        struct vhost_user_mem_region reg = msg.hdr.request == VHOST_USER_SET_MEM_TABLE ?
                                           msg.payload.memory.regions[0] :
                                           msg.payload.mem_reg.region;
        struct vhost_user_mem_region *r = &reg;
        g_assert_cmpuint(nfds, ==, 1);
        if (m->mem) {
            munmap(m->mem, m->mem_size);
        }
        m->mem = mmap(NULL, r->memory_size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0],
                      r->mmap_offset);
        g_assert_true(m->mem != MAP_FAILED);
        m->mem_size = r->memory_size;
        m->gpa = r->guest_phys_addr;
        m->uva = r->userspace_addr;
        close(fds[0]);
        nfds = 0;
        break;
    }
    case VHOST_USER_SET_VRING_NUM:
        g_assert_cmpuint(idx, <, MOCK_QUEUES);
        m->vq[idx].num = msg.payload.state.num;
        break;
    case VHOST_USER_SET_VRING_BASE:
        g_assert_cmpuint(idx, <, MOCK_QUEUES);
        if (mock_packed(m)) {
            uint32_t b = msg.payload.state.num;
            m->vq[idx].last_avail = b & 0x7fff;
            m->vq[idx].avail_wrap = b >> 15 & 1;
            m->vq[idx].used_idx = b >> 16 & 0x7fff;
            m->vq[idx].used_wrap = b >> 31;
            g_assert_cmpuint(m->vq[idx].last_avail, <, m->vq[idx].num);
            g_assert_cmpuint(m->vq[idx].used_idx, <, m->vq[idx].num);
        } else {
            m->vq[idx].last_avail = msg.payload.state.num;
        }
        break;
    case VHOST_USER_SET_VRING_ADDR:
        g_assert_cmpuint(msg.payload.addr.index, <, MOCK_QUEUES);
        idx = msg.payload.addr.index;
        m->vq[idx].desc = uva_ptr(m, msg.payload.addr.desc_user_addr);
        m->vq[idx].avail = uva_ptr(m, msg.payload.addr.avail_user_addr);
        m->vq[idx].used = uva_ptr(m, msg.payload.addr.used_user_addr);
        g_assert_nonnull(m->vq[idx].desc);
        g_assert_nonnull(m->vq[idx].avail);
        g_assert_nonnull(m->vq[idx].used);
        if (mock_packed(m)) {
            /* virtio 1.2 2.8.10's alignments: 16 for the ring, 4 for the event areas */
            g_assert_cmpuint(msg.payload.addr.desc_user_addr % 16, ==, 0);
            g_assert_cmpuint(msg.payload.addr.avail_user_addr % 4, ==, 0);
            g_assert_cmpuint(msg.payload.addr.used_user_addr % 4, ==, 0);
        } else {
            /* a packed ring's used index came with its base */
            m->vq[idx].used_idx = m->vq[idx].used->idx;
        }
        break;
    case VHOST_USER_SET_VRING_KICK:
    case VHOST_USER_SET_VRING_CALL:
        idx = msg.payload.u64 & VHOST_USER_VRING_IDX_MASK;
        g_assert_cmpuint(idx, <, MOCK_QUEUES);
        g_assert_cmpuint(nfds, ==, 1);
        if (msg.hdr.request == VHOST_USER_SET_VRING_KICK) {
            m->vq[idx].kick = fds[0];
            m->vq[idx].running = true;
        } else {
            m->vq[idx].call = fds[0];
        }
        nfds = 0;
        break;
    case VHOST_USER_SET_VRING_ENABLE:
        m->vq[idx].enabled = msg.payload.state.num;
        break;
    case VHOST_USER_GET_VRING_BASE:
        m->vq[idx].running = false;
        close(m->vq[idx].kick);
        close(m->vq[idx].call);
        m->vq[idx].kick = m->vq[idx].call = -1;
        msg.payload.state.num = m->vq[idx].last_avail;
        if (mock_packed(m)) {
            msg.payload.state.num |= (uint32_t)wrap_bits(m->vq[idx].avail_wrap) |
                                     (uint32_t)(m->vq[idx].used_idx |
                                                wrap_bits(m->vq[idx].used_wrap)) << 16;
        }
        mock_reply(m, &msg, sizeof(msg.payload.state));
        return true;
    case VHOST_USER_SET_OWNER:
        g_assert_cmpuint(msg.hdr.size, ==, 0);
        break;
    default:
        ok = false;
        break;
    }
    for (unsigned i = 0; i < nfds; i++) {
        close(fds[i]);
    }
    if (msg.hdr.flags & VHOST_USER_NEED_REPLY) {
        msg.payload.u64 = (!ok || msg.hdr.request == m->nack_request) ? 1 : 0;
        mock_reply(m, &msg, 8);
    }
    return true;
}

static gpointer mock_thread(gpointer opaque)
{
    struct mock *m = opaque;
    for (;;) {
        struct pollfd p[2 + MOCK_QUEUES];
        unsigned map[2 + MOCK_QUEUES];
        unsigned n = 0;
        p[n++] = (struct pollfd){ .fd = m->stop_pipe[0], .events = POLLIN };
        p[n++] = (struct pollfd){ .fd = m->conn >= 0 ? m->conn : m->listen_fd, .events = POLLIN };
        for (unsigned i = 0; i < MOCK_QUEUES; i++) {
            if (m->vq[i].running && m->vq[i].enabled) {
                map[n] = i;
                p[n++] = (struct pollfd){ .fd = m->vq[i].kick, .events = POLLIN };
            }
        }
        g_assert_cmpint(poll(p, n, -1), >, 0);
        if (p[0].revents) {
            break;
        }
        if (p[1].revents && m->conn < 0) {
            m->conn = accept(m->listen_fd, NULL, NULL);
            m->ua_pending = true;
            continue;
        }
        bool alive = true;
        if (p[1].revents) {
            alive = mock_message(m);
        }
        for (unsigned i = 2; alive && i < n; i++) {
            if (p[i].revents && m->vq[map[i]].running) {
                alive = mock_process(m, map[i]);
            }
        }
        if (!alive) {
            close(m->conn);
            m->conn = -1;
            for (unsigned i = 0; i < MOCK_QUEUES; i++) {
                m->vq[i].running = false;
            }
        }
    }
    return NULL;
}

static struct mock *mock_new(void)
{
    struct mock *m = g_new0(struct mock, 1);
    m->queue_num = MOCK_QUEUES;
    m->features = (1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_RING_F_EVENT_IDX) |
                  (1ull << VIRTIO_RING_F_INDIRECT_DESC) | (1ull << VHOST_USER_F_PROTOCOL_FEATURES) |
                  (1ull << VIRTIO_SCSI_F_HOTPLUG) | (1ull << VIRTIO_F_RING_PACKED);
    m->log = g_array_new(false, true, sizeof(struct vhost_user_msg));
    m->dir = g_dir_make_tmp("vfe-test-XXXXXX", NULL);
    m->path = g_build_filename(m->dir, "sock", NULL);
    m->conn = -1;
    g_mutex_init(&m->lock);
    for (unsigned i = 0; i < MOCK_QUEUES; i++) {
        m->vq[i].kick = m->vq[i].call = -1;
    }
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    g_strlcpy(sa.sun_path, m->path, sizeof(sa.sun_path));
    m->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    g_assert_cmpint(bind(m->listen_fd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
    g_assert_cmpint(listen(m->listen_fd, 1), ==, 0);
    g_assert_cmpint(pipe(m->stop_pipe), ==, 0);
    return m;
}

static void mock_start(struct mock *m)
{
    m->thread = g_thread_new("mock-backend", mock_thread, m);
}

static void mock_free(struct mock *m)
{
    if (m->thread) {
        g_assert_cmpint(write(m->stop_pipe[1], "x", 1), ==, 1);
        g_thread_join(m->thread);
    }
    for (unsigned i = 0; i < MOCK_QUEUES; i++) {
        if (m->vq[i].kick >= 0) {
            close(m->vq[i].kick);
        }
        if (m->vq[i].call >= 0) {
            close(m->vq[i].call);
        }
    }
    if (m->conn >= 0) {
        close(m->conn);
    }
    if (m->mem) {
        munmap(m->mem, m->mem_size);
    }
    if (m->inflight_map) {
        munmap(m->inflight_map, m->inflight_size);
    }
    close(m->listen_fd);
    close(m->stop_pipe[0]);
    close(m->stop_pipe[1]);
    g_unlink(m->path);
    g_rmdir(m->dir);
    g_free(m->path);
    g_free(m->dir);
    g_array_free(m->log, true);
    g_mutex_clear(&m->lock);
    g_free(m);
}

static struct vfe_config user_cfg(struct mock *m, unsigned nrq)
{
    return (struct vfe_config){
        .transport = VFE_VHOST_USER, .path = m->path, .num_request_queues = nrq,
        .queue_size = 64, .mem_size = 8 << 20, .event_idx = true, .timeout_ms = 2000,
    };
}

static const struct vhost_user_msg *log_at(struct mock *m, unsigned i)
{
    return &g_array_index(m->log, struct vhost_user_msg, i);
}

static void make_rw(struct vfe_req *r, bool write, uint64_t lba, uint32_t blocks)
{
    /* Block size 1: the builders' transfer length is xferlen / blocksize. */
    memset(r->cdb, 0, sizeof(r->cdb));
    sc_cdb(write ? scsi_cdb_write16(lba, blocks, 1, 0, 0, 0, 0, 0)
                 : scsi_cdb_read16(lba, blocks, 1, 0, 0, 0, 0, 0), r->cdb);
    r->data_in = !write;
}

/* ---- tests ----------------------------------------------------------- */

/* For tests that provoke the library's error messages on purpose. */
static void tolerate_warnings(void)
{
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
}

static void strict_warnings(void)
{
    g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_WARNING | G_LOG_LEVEL_CRITICAL);
}

static void test_handshake_order(void)
{
    struct mock *m = mock_new();
    mock_start(m);
    struct vfe_config cfg = user_cfg(m, 2);
    struct vfe *fe;
    g_assert_cmpint(vfe_open(&cfg, &fe), ==, 0);
    vfe_close(fe);
    mock_free(m);
    strict_warnings();
}

/* Tests whose data is whether the rings are packed. */
static void test_handshake(gconstpointer data)
{
    bool packed = GPOINTER_TO_INT(data);
    struct mock *m = mock_new();
    mock_start(m);
    struct vfe_config cfg = user_cfg(m, 2);
    cfg.packed = packed;
    struct vfe *fe;
    g_assert_cmpint(vfe_open(&cfg, &fe), ==, 0);

    /* negotiation, in QEMU's order, before any ring is touched */
    static const uint32_t setup[] = {
        VHOST_USER_GET_FEATURES, VHOST_USER_GET_PROTOCOL_FEATURES,
        VHOST_USER_SET_PROTOCOL_FEATURES, VHOST_USER_GET_QUEUE_NUM,
        VHOST_USER_GET_MAX_MEM_SLOTS, VHOST_USER_SET_OWNER, VHOST_USER_SET_FEATURES,
        VHOST_USER_SET_MEM_TABLE,
    };
    for (unsigned i = 0; i < G_N_ELEMENTS(setup); i++) {
        g_assert_cmpstr(vhost_user_request_name(log_at(m, i)->hdr.request), ==,
                        vhost_user_request_name(setup[i]));
    }
    g_assert_cmphex(m->protocol_features, ==,
                    (1ull << VHOST_USER_PROTOCOL_F_MQ) | (1ull << VHOST_USER_PROTOCOL_F_REPLY_ACK) |
                    (1ull << VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS));
    /* only what we understand and asked for is acked: not HOTPLUG, RING_PACKED if asked */
    g_assert_cmphex(m->acked_features, ==,
                    (1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_RING_F_EVENT_IDX) |
                    (1ull << VHOST_USER_F_PROTOCOL_FEATURES) |
                    (packed ? 1ull << VIRTIO_F_RING_PACKED : 0));
    const struct vhost_user_msg *mt = log_at(m, 7);
    g_assert_cmpuint(mt->payload.memory.nregions, ==, 1);
    g_assert_cmphex(mt->payload.memory.regions[0].guest_phys_addr, ==, 0x100000000ull);
    g_assert_cmpuint(mt->hdr.size, ==, 8 + sizeof(struct vhost_user_mem_region));

    /* then per queue NUM, BASE, ADDR, CALL, KICK, ENABLE for all 4 queues */
    static const uint32_t perq[] = {
        VHOST_USER_SET_VRING_NUM, VHOST_USER_SET_VRING_BASE, VHOST_USER_SET_VRING_ADDR,
        VHOST_USER_SET_VRING_CALL, VHOST_USER_SET_VRING_KICK, VHOST_USER_SET_VRING_ENABLE,
    };
    unsigned at = G_N_ELEMENTS(setup);
    for (unsigned q = 0; q < 4; q++) {
        for (unsigned i = 0; i < G_N_ELEMENTS(perq); i++, at++) {
            const struct vhost_user_msg *msg = log_at(m, at);
            g_assert_cmpuint(msg->hdr.request, ==, perq[i]);
            unsigned idx = (perq[i] == VHOST_USER_SET_VRING_CALL ||
                            perq[i] == VHOST_USER_SET_VRING_KICK) ?
                           (unsigned)(msg->payload.u64 & 0xff) : msg->payload.state.index;
            g_assert_cmpuint(idx, ==, q);
            if (perq[i] == VHOST_USER_SET_VRING_ADDR && packed) {
                /* a packed ring's three areas apart (the mock checks their alignment) */
                struct vhost_vring_addr a = msg->payload.addr;
                g_assert_cmpuint(a.avail_user_addr, >=, a.desc_user_addr + 16 * 64);
                g_assert_cmpuint(a.used_user_addr, >=, a.avail_user_addr + 4);
            }
        }
    }
    /* every message without its own reply asked for an ACK, once REPLY_ACK was agreed */
    g_assert_cmpuint(log_at(m, 2)->hdr.flags & VHOST_USER_NEED_REPLY, ==, 0);
    for (unsigned i = 3; i < m->log->len; i++) {
        uint32_t rq = log_at(m, i)->hdr.request;
        bool explicit = rq == VHOST_USER_GET_FEATURES || rq == VHOST_USER_GET_PROTOCOL_FEATURES ||
                        rq == VHOST_USER_GET_QUEUE_NUM || rq == VHOST_USER_GET_MAX_MEM_SLOTS;
        g_assert_cmpint(!!(log_at(m, i)->hdr.flags & VHOST_USER_NEED_REPLY), ==, !explicit);
    }
    unsigned before = m->log->len;
    vfe_close(fe);
    /* stopping reads back every ring base */
    for (unsigned q = 0; q < 4; q++) {
        g_assert_cmpuint(log_at(m, before + q)->hdr.request, ==, VHOST_USER_GET_VRING_BASE);
        g_assert_cmpuint(log_at(m, before + q)->payload.state.index, ==, q);
    }
    mock_free(m);
    strict_warnings();
}

static void test_too_few_queues(void)
{
    struct mock *m = mock_new();
    m->queue_num = 3;   /* control, event, one request queue */
    mock_start(m);
    struct vfe_config cfg = user_cfg(m, 2);
    struct vfe *fe;
    tolerate_warnings();
    g_assert_cmpint(vfe_open(&cfg, &fe), ==, -ERANGE);
    g_assert_null(fe);
    mock_free(m);
    strict_warnings();
}

static void test_rejected_step(void)
{
    struct mock *m = mock_new();
    m->nack_request = VHOST_USER_SET_MEM_TABLE;
    mock_start(m);
    struct vfe_config cfg = user_cfg(m, 1);
    struct vfe *fe;
    tolerate_warnings();
    g_assert_cmpint(vfe_open(&cfg, &fe), ==, -EIO);
    g_assert_null(fe);
    mock_free(m);
    strict_warnings();
}

static void test_silent_backend(void)
{
    struct mock *m = mock_new();
    m->silent_request = VHOST_USER_GET_FEATURES;
    mock_start(m);
    struct vfe_config cfg = user_cfg(m, 1);
    cfg.timeout_ms = 200;
    struct vfe *fe;
    tolerate_warnings();
    g_assert_cmpint(vfe_open(&cfg, &fe), ==, -ETIMEDOUT);
    mock_free(m);
    strict_warnings();
}

struct counter {
    unsigned done;
};

static void count_done(struct vfe_req *r)
{
    ((struct counter *)r->opaque)->done++;
}

/* A configuration of the I/O tests, as their test data. */
struct io_opts {
    bool event_idx, indirect, add_mem_reg, packed;
};

static void test_write_read(gconstpointer data)
{
    const struct io_opts *o = data;
    struct mock *m = mock_new();
    mock_start(m);
    struct vfe_config cfg = user_cfg(m, 2);
    cfg.event_idx = o->event_idx;
    cfg.indirect = o->indirect;
    cfg.batch = true;
    cfg.add_mem_reg = o->add_mem_reg;
    cfg.packed = o->packed;
    struct vfe *fe;
    g_assert_cmpint(vfe_open(&cfg, &fe), ==, 0);
    g_assert_cmpint(!!(vfe_features(fe) & (1ull << VIRTIO_RING_F_EVENT_IDX)), ==, o->event_idx);
    g_assert_cmpint(!!(vfe_features(fe) & (1ull << VIRTIO_F_RING_PACKED)), ==, o->packed);

    /* the power-on unit attention comes first */
    struct vfe_req tur = { 0 };
    vfe_lun(tur.lun, 0, 0);
    g_assert_cmpint(vfe_exec(fe, &tur, 2000), ==, 0);
    g_assert_cmpuint(tur.resp.status, ==, 2);
    g_assert_cmpuint(sc_sense_of(tur.resp.sense, tur.resp.sense_len).key, ==,
                     SCSI_SENSE_UNIT_ATTENTION);
    g_assert_cmpint(vfe_exec(fe, &tur, 2000), ==, 0);
    g_assert_cmpuint(tur.resp.status, ==, 0);

    enum { N = 40, BLK = 8 };   /* 40 x 4 KiB, 20 in flight per queue */
    struct vfe_req reqs[N];
    struct counter cnt = { 0 };
    struct vfe_stats st0, st1;
    vfe_get_stats(fe, &st0);
    for (int pass = 0; pass < 2; pass++) {
        bool write = pass == 0;
        cnt.done = 0;
        for (int i = 0; i < N; i++) {
            struct vfe_req *r = &reqs[i];
            if (write) {
                memset(r, 0, sizeof(*r));
                vfe_lun(r->lun, 0, 0);
                r->data = vfe_alloc(fe, BLK * 512, 4096);
                g_assert_nonnull(r->data);
                r->data_len = BLK * 512;
                r->queue = i % 2;
                r->opaque = &cnt;
                r->complete = count_done;
                r->tag = i;
                for (unsigned j = 0; j < BLK * 512; j++) {
                    ((uint8_t *)r->data)[j] = (uint8_t)(i * 7 + j / 512);
                }
            } else {
                memset(r->data, 0, BLK * 512);
            }
            make_rw(r, write, (uint64_t)i * BLK, BLK);
            g_assert_cmpint(vfe_submit(fe, r), ==, 0);
        }
        vfe_kick(fe);
        while (cnt.done < N) {
            g_assert_cmpint(vfe_poll(fe, 2000), >, 0);
        }
        for (int i = 0; i < N; i++) {
            g_assert_cmpuint(reqs[i].resp.response, ==, VIRTIO_SCSI_S_OK);
            g_assert_cmpuint(reqs[i].resp.status, ==, 0);
            g_assert_cmpuint(reqs[i].used_len, ==,
                             sizeof(struct virtio_scsi_cmd_resp) + (write ? 0 : BLK * 512));
        }
    }
    for (int i = 0; i < N; i++) {
        for (unsigned j = 0; j < BLK * 512; j += 511) {
            g_assert_cmpuint(((uint8_t *)reqs[i].data)[j], ==, (uint8_t)(i * 7 + j / 512));
        }
        vfe_free(fe, reqs[i].data);
    }
    vfe_get_stats(fe, &st1);
    g_assert_cmpuint(st1.completions - st0.completions, ==, 2 * N);
    /* batching: one kick per queue per pass at most */
    g_assert_cmpuint(st1.kicks - st0.kicks, <=, 4);
    g_assert_cmpuint(st1.calls - st0.calls, <=, m->signals);
    g_assert_cmpuint(st1.calls - st0.calls, >=, 1);
    vfe_close(fe);
    mock_free(m);
    strict_warnings();
}

/*
 * Many laps of a ring of 16: LAP_IOS one-block writes, then reads checked,
 * LAP_DEPTH in flight; every fourth request a TEST UNIT READY, so chains
 * of two and three descriptors mix, 11 descriptors a round (on a packed
 * ring they run across the ring's end, and completed in reverse order
 * their used descriptors land inside other chains' slots).
 */
#define LAP_RING 16
#define LAP_DEPTH 5                /* 15 descriptors at most */
#define LAP_IOS 600u               /* over 100 laps of the ring */

struct laps {
    struct vfe *fe;
    bool write;
    unsigned next, done;
};

static uint8_t lap_byte(unsigned i, unsigned j)
{
    return (uint8_t)(i * 13 + j + 1);
}

static void lap_submit(struct laps *l, struct vfe_req *r)
{
    unsigned i = l->next++;

    r->tag = i;
    if (i % 4 == 3) {
        memset(r->cdb, 0, sizeof(r->cdb));      /* TEST UNIT READY */
        r->data_len = 0;
    } else {
        r->data_len = 512;
        for (unsigned j = 0; j < 512; j++) {
            ((uint8_t *)r->data)[j] = l->write ? lap_byte(i, j) : 0;
        }
        make_rw(r, l->write, i % DISK_BLOCKS, 1);
    }
    g_assert_cmpint(vfe_submit(l->fe, r), ==, 0);
}

static void lap_done(struct vfe_req *r)
{
    struct laps *l = r->opaque;

    g_assert_cmpuint(r->resp.response, ==, VIRTIO_SCSI_S_OK);
    g_assert_cmpuint(r->resp.status, ==, 0);
    for (unsigned j = 0; !l->write && r->data_len && j < 512; j++) {
        g_assert_cmpuint(((uint8_t *)r->data)[j], ==, lap_byte(r->tag, j));
    }
    l->done++;
    if (l->next < LAP_IOS) {
        lap_submit(l, r);
    }
}

struct lap_opts {
    bool packed, event_idx, indirect, poll, reverse;
};

static void test_laps(gconstpointer data)
{
    const struct lap_opts *o = data;
    struct mock *m = mock_new();
    m->reverse = o->reverse;
    mock_start(m);
    struct vfe_config cfg = user_cfg(m, 1);
    cfg.queue_size = LAP_RING;
    cfg.event_idx = o->event_idx;
    cfg.indirect = o->indirect;
    cfg.poll = o->poll;
    cfg.packed = o->packed;
    cfg.batch = true;
    struct vfe *fe;
    g_assert_cmpint(vfe_open(&cfg, &fe), ==, 0);
    struct vfe_req tur = { 0 };
    vfe_lun(tur.lun, 0, 0);
    g_assert_cmpint(vfe_exec(fe, &tur, 2000), ==, 0);      /* the unit attention */

    struct vfe_req reqs[LAP_DEPTH];
    struct laps l = { .fe = fe };
    unsigned signals0 = __atomic_load_n(&m->signals, __ATOMIC_SEQ_CST);
    memset(reqs, 0, sizeof(reqs));
    for (unsigned i = 0; i < LAP_DEPTH; i++) {
        vfe_lun(reqs[i].lun, 0, 0);
        reqs[i].data = vfe_alloc(fe, 512, 512);
        reqs[i].opaque = &l;
        reqs[i].complete = lap_done;
    }
    for (int pass = 0; pass < 2; pass++) {
        l.write = pass == 0;
        l.next = l.done = 0;
        for (unsigned i = 0; i < LAP_DEPTH; i++) {
            lap_submit(&l, &reqs[i]);
        }
        vfe_kick(fe);
        while (l.done < LAP_IOS) {
            g_assert_cmpint(vfe_poll(fe, 2000), >, 0);
            vfe_kick(fe);
        }
    }
    unsigned signals = __atomic_load_n(&m->signals, __ATOMIC_SEQ_CST) - signals0;
    if (o->packed && !o->indirect) {
        g_assert_cmpuint(m->wrapped_chains, >, 0);
    }
    if (o->reverse) {
        g_assert_cmpuint(m->reordered, >, 0);
    }
    if (o->poll) {
        /* at most the signals for what completed before the first reap asked for none */
        g_assert_cmpuint(signals, <=, LAP_DEPTH);
    }
    if (o->packed) {
        /* what the front-end asks of the device now that everything is reaped */
        struct mock_vq *q = &m->vq[2];
        g_mutex_lock(&m->lock);
        struct vring_packed_desc_event ev = *driver_event(q);
        uint16_t next_used = q->used_idx | wrap_bits(q->used_wrap);
        g_mutex_unlock(&m->lock);
        g_assert_cmpuint(ev.flags, ==, o->poll ? VRING_PACKED_EVENT_FLAG_DISABLE :
                                       o->event_idx ? VRING_PACKED_EVENT_FLAG_DESC :
                                       VRING_PACKED_EVENT_FLAG_ENABLE);
        if (!o->poll && o->event_idx) {
            g_assert_cmphex(ev.off_wrap, ==, next_used);
        }
    }
    for (unsigned i = 0; i < LAP_DEPTH; i++) {
        vfe_free(fe, reqs[i].data);
    }
    vfe_close(fe);
    mock_free(m);
    strict_warnings();
}

/*
 * The kicks the front-end gives for n TEST UNIT READYs (two descriptors
 * each) posted at once from slot 12 of an odd lap (wrap counter 0) of a
 * packed ring of 16, with the device's event suppression structure set
 * to off_wrap and flags meanwhile.
 */
static unsigned packed_kicks(struct mock *m, struct vfe *fe, uint16_t off_wrap, uint16_t flags,
                             unsigned n)
{
    struct mock_vq *q = &m->vq[2];
    struct vfe_req tur = { 0 }, reqs[3];
    struct counter cnt = { 0 };
    struct vfe_stats st0, st1;

    vfe_lun(tur.lun, 0, 0);
    for (;;) {
        g_mutex_lock(&m->lock);
        bool there = q->last_avail == 12 && !q->avail_wrap;
        g_mutex_unlock(&m->lock);
        if (there) {
            break;
        }
        g_assert_cmpint(vfe_exec(fe, &tur, 2000), ==, 0);
    }
    mock_freeze(m);
    *device_event(q) = (struct vring_packed_desc_event){ .off_wrap = off_wrap, .flags = flags };
    vfe_get_stats(fe, &st0);
    g_assert_cmpuint(n, <=, G_N_ELEMENTS(reqs));
    for (unsigned i = 0; i < n; i++) {
        reqs[i] = (struct vfe_req){ .opaque = &cnt, .complete = count_done };
        vfe_lun(reqs[i].lun, 0, 0);
        g_assert_cmpint(vfe_submit(fe, &reqs[i]), ==, 0);
    }
    vfe_kick(fe);
    vfe_get_stats(fe, &st1);
    mock_thaw(m, fe, 2);
    while (cnt.done < n) {
        g_assert_cmpint(vfe_poll(fe, 2000), >, 0);
    }
    return st1.kicks - st0.kicks;
}

static void test_packed_kick(void)
{
    struct mock *m = mock_new();
    mock_start(m);
    struct vfe_config cfg = user_cfg(m, 1);
    cfg.queue_size = 16;
    cfg.packed = true;
    cfg.batch = true;
    struct vfe *fe;
    g_assert_cmpint(vfe_open(&cfg, &fe), ==, 0);
    uint16_t w0 = wrap_bits(false), w1 = wrap_bits(true);

    g_assert_cmpuint(packed_kicks(m, fe, 0, VRING_PACKED_EVENT_FLAG_DISABLE, 1), ==, 0);
    g_assert_cmpuint(packed_kicks(m, fe, 0, VRING_PACKED_EVENT_FLAG_ENABLE, 1), ==, 1);
    /* posted 12-13, then 12-15: a kick once slot 14 of this lap is */
    g_assert_cmpuint(packed_kicks(m, fe, 14 | w0, VRING_PACKED_EVENT_FLAG_DESC, 1), ==, 0);
    g_assert_cmpuint(packed_kicks(m, fe, 14 | w0, VRING_PACKED_EVENT_FLAG_DESC, 2), ==, 1);
    /* slot 1 of the next lap: not for 12-15, but for 12-15 and 0-1 */
    g_assert_cmpuint(packed_kicks(m, fe, 1 | w1, VRING_PACKED_EVENT_FLAG_DESC, 2), ==, 0);
    g_assert_cmpuint(packed_kicks(m, fe, 1 | w1, VRING_PACKED_EVENT_FLAG_DESC, 3), ==, 1);
    /*
     * Decided with the ring in its next lap: a wrap counter not ours puts
     * off_wrap in the lap before, where slot 14 was posted and slot 10
     * was not (that was before the last kick).
     */
    g_assert_cmpuint(packed_kicks(m, fe, 14 | w0, VRING_PACKED_EVENT_FLAG_DESC, 3), ==, 1);
    g_assert_cmpuint(packed_kicks(m, fe, 10 | w0, VRING_PACKED_EVENT_FLAG_DESC, 3), ==, 0);
    vfe_close(fe);
    mock_free(m);
    strict_warnings();
}

static void test_bad_lun_and_tmf(gconstpointer packed)
{
    struct mock *m = mock_new();
    mock_start(m);
    struct vfe_config cfg = user_cfg(m, 1);
    cfg.packed = GPOINTER_TO_INT(packed);
    struct vfe *fe;
    g_assert_cmpint(vfe_open(&cfg, &fe), ==, 0);
    struct vfe_req r = { 0 };
    vfe_lun(r.lun, 3, 0);
    g_assert_cmpint(vfe_exec(fe, &r, 2000), ==, 0);
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_BAD_TARGET);

    uint8_t lun[8], resp = 0xee;
    vfe_lun(lun, 0, 0);
    g_assert_cmpint(vfe_tmf(fe, lun, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0, &resp, 2000), ==, 0);
    g_assert_cmpuint(resp, ==, VIRTIO_SCSI_S_FUNCTION_SUCCEEDED);
    g_assert_cmpint(vfe_tmf(fe, lun, VIRTIO_SCSI_T_TMF_CLEAR_ACA, 0, &resp, 2000), ==, 0);
    g_assert_cmpuint(resp, ==, VIRTIO_SCSI_S_FUNCTION_REJECTED);

    /* Without waiting: both outstanding, answered through vfe_poll only. */
    struct vfe_tmf reset, aca;
    g_assert_cmpint(vfe_tmf_submit(fe, lun, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0, &reset),
                    ==, 0);
    g_assert_cmpint(vfe_tmf_submit(fe, lun, VIRTIO_SCSI_T_TMF_CLEAR_ACA, 0, &aca), ==, 0);
    g_assert_false(reset.done);
    g_assert_false(aca.done);
    for (int i = 0; i < 100 && !(reset.done && aca.done); i++) {
        g_assert_cmpint(vfe_poll(fe, 2000), >=, 0);
    }
    g_assert_true(reset.done && aca.done);
    g_assert_cmpuint(reset.response, ==, VIRTIO_SCSI_S_FUNCTION_SUCCEEDED);
    g_assert_cmpuint(aca.response, ==, VIRTIO_SCSI_S_FUNCTION_REJECTED);
    vfe_close(fe);
    mock_free(m);
    strict_warnings();
}

/* The ring base each queue was started with after message `from` of the log. */
static void started_bases(struct mock *m, unsigned from, uint32_t base[3])
{
    unsigned seen = 0;

    for (unsigned i = from; i < m->log->len; i++) {
        const struct vhost_user_msg *msg = log_at(m, i);
        if (msg->hdr.request == VHOST_USER_SET_VRING_BASE && msg->payload.state.index < 3) {
            base[msg->payload.state.index] = msg->payload.state.num;
            seen |= 1u << msg->payload.state.index;
        }
    }
    g_assert_cmpuint(seen, ==, 7);
}

/*
 * 13 TEST UNIT READYs on a ring of 16, a stop and a start: each queue
 * resumes from the base the device reported.  On a packed ring that is
 * the request queue's slot 10 of its second lap (26 descriptors) for
 * both indices, wrap counters 0; the event queue's 8 buffers are taken
 * and not used (avail slot 8, used slot 0, wrap counters 1).
 */
static void test_stop_start(gconstpointer data)
{
    bool packed = GPOINTER_TO_INT(data);
    struct mock *m = mock_new();
    mock_start(m);
    struct vfe_config cfg = user_cfg(m, 1);
    cfg.queue_size = 16;
    cfg.packed = packed;
    struct vfe *fe;
    uint32_t base[3];
    g_assert_cmpint(vfe_open(&cfg, &fe), ==, 0);
    started_bases(m, 0, base);
    for (unsigned i = 0; i < 3; i++) {
        g_assert_cmphex(base[i], ==, packed ? 0x80008000 : 0);   /* a fresh ring */
    }
    struct vfe_req r = { 0 };
    vfe_lun(r.lun, 0, 0);
    for (int i = 0; i < 13; i++) {
        g_assert_cmpint(vfe_exec(fe, &r, 2000), ==, 0);
    }
    g_assert_cmpint(vfe_stop(fe), ==, 0);
    g_assert_cmpint(vfe_stop(fe), ==, 0);         /* idempotent */
    g_assert_cmpint(vfe_submit(fe, &r), ==, -ENOTCONN);
    unsigned n = m->log->len;
    g_assert_cmpuint(log_at(m, n - 1)->hdr.request, ==, VHOST_USER_GET_VRING_BASE);
    g_assert_cmpuint(log_at(m, n - 1)->payload.state.index, ==, 2);

    g_assert_cmpint(vfe_start(fe), ==, 0);
    started_bases(m, n, base);
    g_assert_cmphex(base[0], ==, packed ? 0x80008000 : 0);
    g_assert_cmphex(base[1], ==, packed ? 0x80008008 : 8);
    g_assert_cmphex(base[2], ==, packed ? 0x000a000a : 13);
    /* and goes on from there, a lap and more */
    for (int i = 0; i < 10; i++) {
        g_assert_cmpint(vfe_exec(fe, &r, 2000), ==, 0);
        g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
    }
    vfe_close(fe);
    mock_free(m);
    strict_warnings();
}

static void test_packed_not_offered(void)
{
    struct mock *m = mock_new();
    m->features &= ~(1ull << VIRTIO_F_RING_PACKED);
    mock_start(m);
    struct vfe_config cfg = user_cfg(m, 1);
    cfg.packed = true;
    struct vfe *fe;
    tolerate_warnings();
    g_assert_cmpint(vfe_open(&cfg, &fe), ==, -ENOTSUP);
    g_assert_null(fe);
    /* nothing was agreed: the refusal comes before SET_FEATURES */
    for (unsigned i = 0; i < m->log->len; i++) {
        g_assert_cmpuint(log_at(m, i)->hdr.request, !=, VHOST_USER_SET_FEATURES);
    }
    mock_free(m);
    strict_warnings();
}

/* Where in the mock's log the first message of a kind is; -1: none. */
static int log_find(struct mock *m, uint32_t request)
{
    for (unsigned i = 0; i < m->log->len; i++) {
        if (log_at(m, i)->hdr.request == request) {
            return (int)i;
        }
    }
    return -1;
}

/* Opens with cfg.inflight against the mock as scripted, and sees the LUN answer. */
static struct vfe *open_inflight(struct mock *m, bool want)
{
    struct vfe_config cfg = user_cfg(m, 2);
    struct vfe_req tur = { 0 };
    struct vfe *fe;

    cfg.inflight = want;
    g_assert_cmpint(vfe_open(&cfg, &fe), ==, 0);
    vfe_lun(tur.lun, 0, 0);
    g_assert_cmpint(vfe_exec(fe, &tur, 2000), ==, 0);      /* the unit attention */
    g_assert_cmpint(vfe_exec(fe, &tur, 2000), ==, 0);
    g_assert_cmpuint(tur.resp.status, ==, 0);
    return fe;
}

/*
 * With cfg.inflight and a back-end offering INFLIGHT_SHMFD, the area is
 * asked for and handed back where QEMU's vhost-user-scsi does it: after
 * SET_OWNER, before SET_FEATURES and the memory table, for every queue
 * (control, event, requests) at the ring size; the fd handed back is the
 * file the back-end gave, and the library's view of it is the back-end's
 * memory (the mark written before and a change made after both show).
 */
static void test_inflight_handshake(void)
{
    struct mock *m = mock_new();
    m->inflight = INFLIGHT_AREA;
    mock_start(m);
    struct vfe *fe = open_inflight(m, true);
    int get = log_find(m, VHOST_USER_GET_INFLIGHT_FD);
    int set = log_find(m, VHOST_USER_SET_INFLIGHT_FD);

    g_assert_true(m->protocol_features & (1ull << VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD));
    g_assert_cmpint(get, >, log_find(m, VHOST_USER_SET_OWNER));
    g_assert_cmpint(set, ==, get + 1);
    g_assert_cmpint(log_find(m, VHOST_USER_SET_FEATURES), ==, set + 1);
    g_assert_cmpint(log_find(m, VHOST_USER_SET_MEM_TABLE), >, set);
    g_assert_cmpuint(log_at(m, get)->payload.inflight.num_queues, ==, 4);
    g_assert_cmpuint(log_at(m, get)->payload.inflight.queue_size, ==, 64);
    g_assert_cmpuint(log_at(m, set)->payload.inflight.mmap_size, ==, m->inflight_size);
    g_assert_cmpuint(log_at(m, set)->payload.inflight.mmap_offset, ==, 0);
    g_assert_cmpuint(log_at(m, set)->payload.inflight.num_queues, ==, 4);
    g_assert_cmpuint(log_at(m, set)->payload.inflight.queue_size, ==, 64);
    g_assert_cmpuint(m->set_inflight_ino, ==, m->inflight_ino);

    size_t size = 0;
    const uint8_t *area = vfe_inflight_area(fe, &size);
    g_assert_nonnull(area);
    g_assert_cmpuint(size, ==, m->inflight_size);
    g_assert_cmpmem(area, 4, "mock", 4);
    m->inflight_map[size - 1] = 0x5a;
    g_assert_cmphex(area[size - 1], ==, 0x5a);
    vfe_close(fe);
    mock_free(m);
}

/*
 * Runs without an area, I/O as usual: a back-end answering size 0 (it
 * tracks nothing: asked, never handed back), and one not asked (the
 * default) or not offering INFLIGHT_SHMFD (the feature not acked, nothing
 * asked).
 */
struct inflight_case {
    int script;                /* the mock's INFLIGHT_* */
    bool want;                 /* cfg.inflight */
    bool asked;                /* GET_INFLIGHT_FD expected */
};

static void test_inflight_without_area(gconstpointer data)
{
    const struct inflight_case *c = data;
    struct mock *m = mock_new();
    m->inflight = c->script;
    mock_start(m);
    struct vfe *fe = open_inflight(m, c->want);
    size_t size = 1;

    g_assert_cmpint(!!(m->protocol_features & (1ull << VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD)),
                    ==, c->asked);
    g_assert_cmpint(log_find(m, VHOST_USER_GET_INFLIGHT_FD) >= 0, ==, c->asked);
    g_assert_cmpint(log_find(m, VHOST_USER_SET_INFLIGHT_FD), ==, -1);
    g_assert_null(vfe_inflight_area(fe, &size));
    g_assert_cmpuint(size, ==, 0);
    vfe_close(fe);
    mock_free(m);
}

/*
 * An area with a size but no fd to map it by, or a file shorter than the
 * area (reading the view would SIGBUS): the back-end is broken, the open
 * fails and nothing is handed back.
 */
static void test_inflight_broken(gconstpointer data)
{
    struct mock *m = mock_new();
    m->inflight = GPOINTER_TO_INT(data);
    mock_start(m);
    struct vfe_config cfg = user_cfg(m, 1);
    struct vfe *fe;

    cfg.inflight = true;
    tolerate_warnings();
    g_assert_cmpint(vfe_open(&cfg, &fe), ==, -EPROTO);
    g_assert_null(fe);
    g_assert_cmpint(log_find(m, VHOST_USER_SET_INFLIGHT_FD), ==, -1);
    mock_free(m);
    strict_warnings();
}

/* The kernel's vhost has no packed rings: refused before the device is even opened. */
static void test_packed_kernel_refused(void)
{
    struct vfe_config cfg = {
        .transport = VFE_VHOST_KERNEL, .path = "/nonexistent/vhost-scsi",
        .wwpn = "naa.5001405000000001", .tpgt = 1, .num_request_queues = 1, .packed = true,
    };
    struct vfe *fe;
    tolerate_warnings();
    g_assert_cmpint(vfe_open(&cfg, &fe), ==, -ENOTSUP);
    g_assert_null(fe);
    strict_warnings();
}

static void test_bogus_used_id(gconstpointer packed)
{
    struct mock *m = mock_new();
    m->bogus_used = true;
    mock_start(m);
    struct vfe_config cfg = user_cfg(m, 1);
    cfg.packed = GPOINTER_TO_INT(packed);
    struct vfe *fe;
    g_assert_cmpint(vfe_open(&cfg, &fe), ==, 0);
    struct vfe_req r = { 0 };
    vfe_lun(r.lun, 0, 0);
    tolerate_warnings();
    g_assert_cmpint(vfe_exec(fe, &r, 2000), ==, -EIO);
    g_assert_false(r.done);
    /* the queue stays broken rather than reusing state the device corrupted */
    g_assert_cmpint(vfe_submit(fe, &r), ==, -EIO);
    vfe_close(fe);
    mock_free(m);
    strict_warnings();
}

static void test_hangup(void)
{
    struct mock *m = mock_new();
    m->hangup_on_io = true;
    mock_start(m);
    struct vfe_config cfg = user_cfg(m, 1);
    struct vfe *fe;
    g_assert_cmpint(vfe_open(&cfg, &fe), ==, 0);
    struct vfe_req r = { 0 };
    vfe_lun(r.lun, 0, 0);
    tolerate_warnings();
    g_assert_cmpint(vfe_exec(fe, &r, 5000), ==, -ECONNRESET);
    vfe_close(fe);      /* GET_VRING_BASE on a dead socket fails quietly enough */
    vfe_close(NULL);
    mock_free(m);
    strict_warnings();
}

static void test_allocator(void)
{
    struct mock *m = mock_new();
    mock_start(m);
    struct vfe_config cfg = user_cfg(m, 1);
    struct vfe *fe;
    g_assert_cmpint(vfe_open(&cfg, &fe), ==, 0);

    void *a = vfe_alloc(fe, 1000, 4096);
    void *b = vfe_alloc(fe, 1, 64);
    void *c = vfe_alloc(fe, 5000, 512);
    g_assert_nonnull(a);
    g_assert_nonnull(b);
    g_assert_nonnull(c);
    g_assert_cmpuint((uintptr_t)a % 4096, ==, 0);
    g_assert_cmpuint((uintptr_t)b % 64, ==, 0);
    g_assert_cmpuint((uintptr_t)c % 512, ==, 0);
    g_assert_true((uint8_t *)b >= (uint8_t *)a + 1000 || (uint8_t *)b + 8 <= (uint8_t *)a);
    g_assert_null(vfe_alloc(fe, 64 << 20, 8));      /* larger than the region */
    /* fill the heap with 64 KiB blocks until it is full, then free all */
    GPtrArray *blocks = g_ptr_array_new();
    void *p;
    while ((p = vfe_alloc(fe, 64 << 10, 4096))) {
        g_ptr_array_add(blocks, p);
    }
    g_assert_cmpuint(blocks->len, >, 64);           /* most of 8 MiB */
    for (unsigned i = 0; i < blocks->len; i += 2) {
        vfe_free(fe, blocks->pdata[i]);
    }
    for (unsigned i = 1; i < blocks->len; i += 2) {
        vfe_free(fe, blocks->pdata[i]);
    }
    vfe_free(fe, a);
    vfe_free(fe, b);
    vfe_free(fe, c);
    /* coalesced: one big block fits again */
    void *big = vfe_alloc(fe, (size_t)blocks->len * (64 << 10), 4096);
    g_assert_nonnull(big);
    vfe_free(fe, big);
    g_ptr_array_free(blocks, true);
    vfe_close(fe);
    mock_free(m);
    strict_warnings();
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/vhost-frontend/open-close", test_handshake_order);
    g_test_add_func("/vhost-frontend/too-few-queues", test_too_few_queues);
    g_test_add_func("/vhost-frontend/rejected-step", test_rejected_step);
    g_test_add_func("/vhost-frontend/silent-backend", test_silent_backend);
    /* split rings, then the same over packed ones (under /vhost-frontend/packed/) */
    static const struct { const char *name; GTestDataFunc fn; } by_ring[] = {
        { "handshake", test_handshake }, { "bad-lun-and-tmf", test_bad_lun_and_tmf },
        { "stop-start", test_stop_start }, { "bogus-used-id", test_bogus_used_id },
    };
    for (int packed = 0; packed < 2; packed++) {
        for (unsigned i = 0; i < G_N_ELEMENTS(by_ring); i++) {
            g_autofree char *path = g_strdup_printf("/vhost-frontend%s/%s",
                                                    packed ? "/packed" : "", by_ring[i].name);
            g_test_add_data_func(path, GINT_TO_POINTER(packed), by_ring[i].fn);
        }
    }
    static const struct { const char *name; struct io_opts o; } io[] = {
        { "io/event-idx", { .event_idx = true } },
        { "io/no-event-idx", { .event_idx = false } },
        { "io/indirect-add-mem-reg", { .event_idx = true, .indirect = true, .add_mem_reg = true } },
        { "packed/io/event-idx", { .event_idx = true, .packed = true } },
        { "packed/io/no-event-idx", { .packed = true } },
        { "packed/io/indirect-add-mem-reg",
          { .event_idx = true, .indirect = true, .add_mem_reg = true, .packed = true } },
    };
    for (unsigned i = 0; i < G_N_ELEMENTS(io); i++) {
        g_autofree char *path = g_strdup_printf("/vhost-frontend/%s", io[i].name);
        g_test_add_data_func(path, &io[i].o, test_write_read);
    }
    static const struct { const char *name; struct lap_opts o; } laps[] = {
        { "io/laps", { .event_idx = true } },
        { "io/out-of-order", { .event_idx = true, .reverse = true } },
        { "packed/laps/event-idx", { .packed = true, .event_idx = true } },
        { "packed/laps/no-event-idx", { .packed = true } },
        { "packed/laps/indirect", { .packed = true, .event_idx = true, .indirect = true } },
        { "packed/laps/poll", { .packed = true, .event_idx = true, .poll = true } },
        { "packed/out-of-order", { .packed = true, .event_idx = true, .reverse = true } },
        { "packed/out-of-order-indirect", { .packed = true, .indirect = true, .reverse = true } },
    };
    for (unsigned i = 0; i < G_N_ELEMENTS(laps); i++) {
        g_autofree char *path = g_strdup_printf("/vhost-frontend/%s", laps[i].name);
        g_test_add_data_func(path, &laps[i].o, test_laps);
    }
    g_test_add_func("/vhost-frontend/hangup", test_hangup);
    g_test_add_func("/vhost-frontend/allocator", test_allocator);
    g_test_add_func("/vhost-frontend/packed/not-offered", test_packed_not_offered);
    g_test_add_func("/vhost-frontend/packed/kernel-refused", test_packed_kernel_refused);
    g_test_add_func("/vhost-frontend/packed/kick", test_packed_kick);
    g_test_add_func("/vhost-frontend/inflight/handshake", test_inflight_handshake);
    static const struct {
        const char *name;
        struct inflight_case c;
    } no_area[] = {
        { "declined", { INFLIGHT_DECLINED, true, true } },
        { "not-asked", { INFLIGHT_AREA, false, false } },
        { "not-offered", { INFLIGHT_NOT_OFFERED, true, false } },
    };
    for (unsigned i = 0; i < G_N_ELEMENTS(no_area); i++) {
        g_autofree char *path = g_strdup_printf("/vhost-frontend/inflight/%s", no_area[i].name);
        g_test_add_data_func(path, &no_area[i].c, test_inflight_without_area);
    }
    g_test_add_data_func("/vhost-frontend/inflight/no-fd", GINT_TO_POINTER(INFLIGHT_NO_FD),
                         test_inflight_broken);
    g_test_add_data_func("/vhost-frontend/inflight/short-file", GINT_TO_POINTER(INFLIGHT_SHORT),
                         test_inflight_broken);
    return g_test_run();
}
