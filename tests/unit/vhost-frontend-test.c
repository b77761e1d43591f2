/*
 * Tests of the vhost front-end library against a scripted in-process
 * vhost-user back-end (a thread with a tiny RAM disk), so the library's
 * side of the protocol is checked on its own: the handshake order and
 * payloads, REPLY_ACK, a back-end that rejects a step or never answers,
 * request layout and data integrity with many requests in flight,
 * EVENT_IDX kick and interrupt suppression, TMFs (waited for or not),
 * stop/start ring bases, a device that returns a descriptor it was never
 * given, a hang-up, and the data-buffer allocator.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>
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

struct mock_vq {
    unsigned num;
    struct vring_desc *desc;
    struct vring_avail *avail;
    struct vring_used *used;
    uint16_t last_avail, used_idx, signalled;
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
    uint64_t features;

    /* observed */
    GArray *log;                   /* struct vhost_user_msg headers + payload */
    uint64_t acked_features, protocol_features;
    unsigned signals;

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

/* Copies the in/out segments of one chain into flat buffers. */
struct chain {
    uint8_t *out[4];
    uint32_t out_len[4];
    unsigned nout;
    uint8_t *in[4];
    uint32_t in_len[4];
    unsigned nin;
};

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
        uint8_t *p = gpa_ptr(m, d->addr, d->len);
        g_assert_nonnull(p);
        if (d->flags & VRING_DESC_F_WRITE) {
            g_assert_cmpuint(c->nin, <, 4);
            c->in[c->nin] = p;
            c->in_len[c->nin++] = d->len;
        } else {
            g_assert_cmpuint(c->nin, ==, 0);   /* out before in */
            g_assert_cmpuint(c->nout, <, 4);
            c->out[c->nout] = p;
            c->out_len[c->nout++] = d->len;
        }
        if (!(d->flags & VRING_DESC_F_NEXT)) {
            return true;
        }
        i = d->next;
    }
    return false;
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

/* Returns false when the connection should be dropped. */
static bool mock_process(struct mock *m, unsigned idx)
{
    struct mock_vq *q = &m->vq[idx];
    uint64_t v;
    if (read(q->kick, &v, 8) < 0) {
        /* spurious wakeup */
    }
    uint16_t old = q->used_idx;
    for (;;) {
        uint16_t avail = __atomic_load_n(&q->avail->idx, __ATOMIC_ACQUIRE);
        while (q->last_avail != avail) {
            uint16_t head = q->avail->ring[q->last_avail & (q->num - 1)];
            q->last_avail++;
            struct chain c;
            g_assert_true(walk_chain(m, q, head, &c));
            uint32_t len = 0;
            if (idx == 0) {
                g_assert_cmpuint(c.out_len[0], ==, sizeof(struct virtio_scsi_ctrl_tmf_req));
                struct virtio_scsi_ctrl_tmf_req *t = (void *)c.out[0];
                g_assert_cmpuint(t->type, ==, VIRTIO_SCSI_T_TMF);
                c.in[0][0] = t->subtype == VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET ?
                             VIRTIO_SCSI_S_FUNCTION_SUCCEEDED : VIRTIO_SCSI_S_FUNCTION_REJECTED;
                len = 1;
            } else if (idx == 1) {
                continue;   /* event buffers stay with the device */
            } else {
                if (m->hangup_on_io) {
                    return false;
                }
                len = mock_scsi(m, &c);
            }
            mock_push(m, q, m->bogus_used && idx >= 2 ? (head + 1) % q->num : head, len);
        }
        if (m->acked_features & (1ull << VIRTIO_RING_F_EVENT_IDX)) {
            uint16_t ae = q->last_avail;
            memcpy(&q->used->ring[q->num], &ae, sizeof(ae));
            __atomic_thread_fence(__ATOMIC_SEQ_CST);
            if (__atomic_load_n(&q->avail->idx, __ATOMIC_ACQUIRE) != q->last_avail) {
                continue;
            }
        }
        break;
    }
    mock_notify(m, q, old);
    return true;
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
                          (1ull << VHOST_USER_PROTOCOL_F_CONFIG);
        mock_reply(m, &msg, 8);
        return true;
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
        m->vq[idx].last_avail = msg.payload.state.num;
        break;
    case VHOST_USER_SET_VRING_ADDR:
        g_assert_cmpuint(msg.payload.addr.index, <, MOCK_QUEUES);
        idx = msg.payload.addr.index;
        m->vq[idx].desc = uva_ptr(m, msg.payload.addr.desc_user_addr);
        m->vq[idx].avail = uva_ptr(m, msg.payload.addr.avail_user_addr);
        m->vq[idx].used = uva_ptr(m, msg.payload.addr.used_user_addr);
        g_assert_nonnull(m->vq[idx].desc);
        m->vq[idx].used_idx = m->vq[idx].used->idx;
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
                  (1ull << VIRTIO_SCSI_F_HOTPLUG);
    m->log = g_array_new(false, true, sizeof(struct vhost_user_msg));
    m->dir = g_dir_make_tmp("vfe-test-XXXXXX", NULL);
    m->path = g_build_filename(m->dir, "sock", NULL);
    m->conn = -1;
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
    close(m->listen_fd);
    close(m->stop_pipe[0]);
    close(m->stop_pipe[1]);
    g_unlink(m->path);
    g_rmdir(m->dir);
    g_free(m->path);
    g_free(m->dir);
    g_array_free(m->log, true);
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

static void test_handshake(void)
{
    struct mock *m = mock_new();
    mock_start(m);
    struct vfe_config cfg = user_cfg(m, 2);
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
    /* only what we understand is acked: not HOTPLUG, but EVENT_IDX and VERSION_1 */
    g_assert_cmphex(m->acked_features, ==,
                    (1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_RING_F_EVENT_IDX) |
                    (1ull << VHOST_USER_F_PROTOCOL_FEATURES));
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

static void run_write_read(bool event_idx, bool indirect, bool add_mem_reg)
{
    struct mock *m = mock_new();
    mock_start(m);
    struct vfe_config cfg = user_cfg(m, 2);
    cfg.event_idx = event_idx;
    cfg.indirect = indirect;
    cfg.batch = true;
    cfg.add_mem_reg = add_mem_reg;
    struct vfe *fe;
    g_assert_cmpint(vfe_open(&cfg, &fe), ==, 0);
    g_assert_cmpint(!!(vfe_features(fe) & (1ull << VIRTIO_RING_F_EVENT_IDX)), ==, event_idx);

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

static void test_io_event_idx(void)
{
    run_write_read(true, false, false);
}

static void test_io_no_event_idx(void)
{
    run_write_read(false, false, false);
}

static void test_io_indirect_add_mem_reg(void)
{
    run_write_read(true, true, true);
}

static void test_bad_lun_and_tmf(void)
{
    struct mock *m = mock_new();
    mock_start(m);
    struct vfe_config cfg = user_cfg(m, 1);
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

static void test_stop_start(void)
{
    struct mock *m = mock_new();
    mock_start(m);
    struct vfe_config cfg = user_cfg(m, 1);
    struct vfe *fe;
    g_assert_cmpint(vfe_open(&cfg, &fe), ==, 0);
    struct vfe_req r = { 0 };
    vfe_lun(r.lun, 0, 0);
    for (int i = 0; i < 5; i++) {
        g_assert_cmpint(vfe_exec(fe, &r, 2000), ==, 0);
    }
    g_assert_cmpint(vfe_stop(fe), ==, 0);
    g_assert_cmpint(vfe_stop(fe), ==, 0);         /* idempotent */
    g_assert_cmpint(vfe_submit(fe, &r), ==, -ENOTCONN);
    unsigned n = m->log->len;
    g_assert_cmpuint(log_at(m, n - 1)->hdr.request, ==, VHOST_USER_GET_VRING_BASE);
    g_assert_cmpuint(log_at(m, n - 1)->payload.state.index, ==, 2);

    g_assert_cmpint(vfe_start(fe), ==, 0);
    /* the request queue resumes at the base the device reported: 5 */
    bool seen = false;
    for (unsigned i = n; i < m->log->len; i++) {
        const struct vhost_user_msg *msg = log_at(m, i);
        if (msg->hdr.request == VHOST_USER_SET_VRING_BASE && msg->payload.state.index == 2) {
            g_assert_cmpuint(msg->payload.state.num, ==, 5);
            seen = true;
        }
    }
    g_assert_true(seen);
    g_assert_cmpint(vfe_exec(fe, &r, 2000), ==, 0);
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
    vfe_close(fe);
    mock_free(m);
    strict_warnings();
}

static void test_bogus_used_id(void)
{
    struct mock *m = mock_new();
    m->bogus_used = true;
    mock_start(m);
    struct vfe_config cfg = user_cfg(m, 1);
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
    g_test_add_func("/vhost-frontend/handshake", test_handshake);
    g_test_add_func("/vhost-frontend/too-few-queues", test_too_few_queues);
    g_test_add_func("/vhost-frontend/rejected-step", test_rejected_step);
    g_test_add_func("/vhost-frontend/silent-backend", test_silent_backend);
    g_test_add_func("/vhost-frontend/io/event-idx", test_io_event_idx);
    g_test_add_func("/vhost-frontend/io/no-event-idx", test_io_no_event_idx);
    g_test_add_func("/vhost-frontend/io/indirect-add-mem-reg", test_io_indirect_add_mem_reg);
    g_test_add_func("/vhost-frontend/bad-lun-and-tmf", test_bad_lun_and_tmf);
    g_test_add_func("/vhost-frontend/stop-start", test_stop_start);
    g_test_add_func("/vhost-frontend/bogus-used-id", test_bogus_used_id);
    g_test_add_func("/vhost-frontend/hangup", test_hangup);
    g_test_add_func("/vhost-frontend/allocator", test_allocator);
    return g_test_run();
}
