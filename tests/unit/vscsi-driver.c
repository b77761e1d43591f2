/*
 * The unit tests' virtio-scsi driver (vscsi-driver.h): guest RAM, split
 * rings and the requests a guest posts, written the way a driver writes
 * them (descriptors first, then the avail entry with release order, then
 * a kick), and read back the way it reads them (used index with acquire
 * order, woken by the call eventfd).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <glib.h>

#include "scsi-cmd.h"
#include "vscsi-driver.h"

#define RING_AREA 0x2000u       /* desc 4 KiB, avail and used after it */
#define BUF_OFF 0x10000u

void *fe_gpa_host(struct fe *f, uint64_t gpa)
{
    g_assert_cmpuint(gpa, >=, RAM_GPA);
    g_assert_cmpuint(gpa - RAM_GPA, <, RAM_SIZE);
    return f->ram + (gpa - RAM_GPA);
}

uint64_t fe_alloc(struct fe *f, size_t len)
{
    uint64_t gpa = RAM_GPA + f->next_buf;

    f->next_buf += (len + 63) & ~(size_t)63;
    g_assert_cmpuint(f->next_buf, <=, RAM_SIZE);
    return gpa;
}

uint16_t tq_post(struct fe *f, unsigned qi, const struct seg *segs, unsigned n)
{
    struct tq *q = &f->q[qi];
    uint16_t head = q->next_desc;
    uint64_t one = 1;

    g_assert_cmpuint(q->next_desc + n, <=, QSZ);
    for (unsigned i = 0; i < n; i++) {
        struct vring_desc *d = &q->desc[q->next_desc++];

        d->addr = segs[i].gpa;
        d->len = segs[i].len;
        d->flags = (segs[i].write ? VRING_DESC_F_WRITE : 0) | (i + 1 < n ? VRING_DESC_F_NEXT : 0);
        d->next = q->next_desc;
    }
    q->avail->ring[q->avail->idx % QSZ] = head;
    __atomic_store_n(&q->avail->idx, (uint16_t)(q->avail->idx + 1), __ATOMIC_RELEASE);
    g_assert_cmpint(write(q->vq.kick_fd, &one, sizeof(one)), ==, sizeof(one));
    return head;
}

unsigned tq_used_count(struct fe *f, unsigned qi)
{
    unsigned idx = __atomic_load_n(&f->q[qi].used->idx, __ATOMIC_ACQUIRE);

    /* The tests never wrap a ring: more would be the device's bug. */
    g_assert_cmpuint(idx, <, QSZ);
    return idx;
}

uint16_t tq_used_head(struct fe *f, unsigned qi, unsigned i)
{
    g_assert_cmpuint(i, <, tq_used_count(f, qi));
    return (uint16_t)f->q[qi].used->ring[i].id;
}

static int used_slot(struct fe *f, unsigned qi, uint16_t head)
{
    unsigned n = tq_used_count(f, qi);

    for (unsigned i = 0; i < n; i++) {
        if (f->q[qi].used->ring[i].id == head) {
            return (int)i;
        }
    }
    return -1;
}

bool tq_used(struct fe *f, unsigned qi, uint16_t head)
{
    return used_slot(f, qi, head) >= 0;
}

uint32_t tq_used_len(struct fe *f, unsigned qi, uint16_t head)
{
    int i = used_slot(f, qi, head);

    g_assert_cmpint(i, >=, 0);
    return f->q[qi].used->ring[i].len;
}

void tq_wait(struct fe *f, unsigned qi, uint16_t head)
{
    gint64 deadline = g_get_monotonic_time() + TIMEOUT_MS * G_TIME_SPAN_MILLISECOND;
    struct pollfd p = { .fd = f->q[qi].vq.call_fd, .events = POLLIN };

    while (!tq_used(f, qi, head)) {
        gint64 left = (deadline - g_get_monotonic_time()) / 1000;
        uint64_t v;

        g_assert_cmpint(left, >, 0);
        if (poll(&p, 1, (int)left) == 1 && read(p.fd, &v, sizeof(v)) < 0) {
            g_assert_cmpint(errno, ==, EAGAIN);
        }
    }
}

void fe_lun(uint8_t lun_field[8], unsigned target, unsigned lun)
{
    memset(lun_field, 0, 8);
    lun_field[0] = 1;
    lun_field[1] = (uint8_t)target;
    lun_field[2] = 0x40 | (uint8_t)(lun >> 8);
    lun_field[3] = (uint8_t)lun;
}

struct cmd fe_cmd_segs(struct fe *f, unsigned qi, const uint8_t lun[8], uint64_t tag,
                       const uint8_t *cdb, unsigned cdb_len, const struct seg *data, unsigned n)
{
    uint64_t req_gpa = fe_alloc(f, sizeof(struct virtio_scsi_cmd_req));
    uint64_t resp_gpa = fe_alloc(f, sizeof(struct virtio_scsi_cmd_resp));
    struct seg segs[2 + 8];
    struct cmd c = { .qi = qi, .req = fe_gpa_host(f, req_gpa), .resp = fe_gpa_host(f, resp_gpa) };
    unsigned k = 0;

    g_assert_cmpuint(cdb_len, <=, sizeof(c.req->cdb));
    g_assert_cmpuint(n, <=, 8);
    memset(c.req, 0, sizeof(*c.req));
    memcpy(c.req->lun, lun, 8);
    c.req->tag = htole64(tag);
    memcpy(c.req->cdb, cdb, cdb_len);
    memset(c.resp, 0xee, sizeof(*c.resp));
    /* Device-readable buffers first (header, data-out), then writable ones. */
    segs[k++] = (struct seg){ req_gpa, sizeof(struct virtio_scsi_cmd_req), false };
    for (unsigned i = 0; i < n; i++) {
        if (!data[i].write) {
            segs[k++] = data[i];
        }
    }
    segs[k++] = (struct seg){ resp_gpa, sizeof(struct virtio_scsi_cmd_resp), true };
    for (unsigned i = 0; i < n; i++) {
        if (data[i].write) {
            c.data_in = c.data_in ? c.data_in : fe_gpa_host(f, data[i].gpa);
            segs[k++] = data[i];
        }
    }
    c.head = tq_post(f, qi, segs, k);
    return c;
}

struct cmd fe_cmd(struct fe *f, unsigned qi, unsigned target, unsigned lun,
                  uint64_t tag, const uint8_t *cdb, unsigned cdb_len, uint32_t in_len)
{
    uint8_t field[8];
    struct seg in = { in_len ? fe_alloc(f, in_len) : 0, in_len, true };

    fe_lun(field, target, lun);
    return fe_cmd_segs(f, qi, field, tag, cdb, cdb_len, &in, in_len ? 1 : 0);
}

void cmd_wait(struct fe *f, const struct cmd *c)
{
    tq_wait(f, c->qi, c->head);
}

bool cmd_done(struct fe *f, const struct cmd *c)
{
    return tq_used(f, c->qi, c->head);
}

uint8_t fe_tur(struct fe *f, unsigned target, unsigned lun, struct cmd *out)
{
    uint8_t cdb[SC_CDB_MAX];
    unsigned cdb_len = sc_cdb(scsi_cdb_testunitready(), cdb);
    struct cmd c = fe_cmd(f, VSCSI_FIRST_REQ_QUEUE, target, lun, 0, cdb, cdb_len, 0);

    cmd_wait(f, &c);
    g_assert_cmpuint(c.resp->response, ==, VIRTIO_SCSI_S_OK);
    if (out) {
        *out = c;
    }
    return c.resp->status;
}

unsigned sense_code(const struct cmd *c)
{
    return sc_sense_of(c->resp->sense, MIN(c->resp->sense_len, sizeof(c->resp->sense))).code;
}

struct tmf fe_tmf(struct fe *f, uint32_t subtype, unsigned target, unsigned lun, uint64_t tag)
{
    uint64_t req_gpa = fe_alloc(f, sizeof(struct virtio_scsi_ctrl_tmf_req));
    uint64_t resp_gpa = fe_alloc(f, sizeof(struct virtio_scsi_ctrl_tmf_resp));
    struct virtio_scsi_ctrl_tmf_req *req = fe_gpa_host(f, req_gpa);
    struct seg segs[2] = {
        { req_gpa, sizeof(*req), false },
        { resp_gpa, sizeof(struct virtio_scsi_ctrl_tmf_resp), true },
    };
    struct tmf t = { .resp = fe_gpa_host(f, resp_gpa) };

    memset(req, 0, sizeof(*req));
    req->type = htole32(VIRTIO_SCSI_T_TMF);
    req->subtype = htole32(subtype);
    fe_lun(req->lun, target, lun);
    req->tag = htole64(tag);
    t.resp->response = 0xee;
    t.head = tq_post(f, VSCSI_CTRL_QUEUE, segs, 2);
    return t;
}

bool tmf_answered(struct fe *f, const struct tmf *t)
{
    return tq_used(f, VSCSI_CTRL_QUEUE, t->head);
}

uint8_t tmf_wait(struct fe *f, const struct tmf *t)
{
    tq_wait(f, VSCSI_CTRL_QUEUE, t->head);
    return t->resp->response;
}

uint8_t fe_an_query(struct fe *f, unsigned target)
{
    uint64_t req_gpa = fe_alloc(f, sizeof(struct virtio_scsi_ctrl_an_req));
    uint64_t resp_gpa = fe_alloc(f, sizeof(struct virtio_scsi_ctrl_an_resp));
    struct virtio_scsi_ctrl_an_req *req = fe_gpa_host(f, req_gpa);
    struct virtio_scsi_ctrl_an_resp *resp = fe_gpa_host(f, resp_gpa);
    struct seg segs[2] = {
        { req_gpa, sizeof(*req), false },
        { resp_gpa, sizeof(*resp), true },
    };
    uint16_t head;

    memset(req, 0, sizeof(*req));
    req->type = htole32(VIRTIO_SCSI_T_AN_QUERY);
    fe_lun(req->lun, target, 0);
    resp->response = 0xee;
    head = tq_post(f, VSCSI_CTRL_QUEUE, segs, 2);
    tq_wait(f, VSCSI_CTRL_QUEUE, head);
    return resp->response;
}

void fe_ctrl_barrier(struct fe *f)
{
    g_assert_cmpuint(fe_an_query(f, 0), ==, VIRTIO_SCSI_S_OK);
}

struct evbuf fe_event_buf(struct fe *f, uint32_t len)
{
    struct seg s = { fe_alloc(f, len), len, true };
    struct evbuf b = { .ev = fe_gpa_host(f, s.gpa) };

    memset(b.ev, 0xee, len);
    b.head = tq_post(f, VSCSI_EVENT_QUEUE, &s, 1);
    return b;
}

/* ---- the device's hooks, on the main thread as the server calls them --- */

void fe_on_main(struct fe *f, void (*fn)(void *opaque), void *opaque)
{
    iothread_run_sync(f->main, fn, opaque);
}

static void start_queues_on_main(void *opaque)
{
    struct fe *f = opaque;

    for (unsigned i = 0; i < NQ; i++) {
        g_assert_cmpint(vscsi_queue_start(f->dev, i, &f->q[i].vq), ==, 0);
    }
}

struct stop_call {
    struct fe *f;
    unsigned idx;
};

static void stop_queue_on_main(void *opaque)
{
    struct stop_call *c = opaque;

    vscsi_queue_stop(c->f->dev, c->idx, &c->f->q[c->idx].vq);
}

void fe_stop_queue(struct fe *f, unsigned idx)
{
    struct stop_call c = { f, idx };

    fe_on_main(f, stop_queue_on_main, &c);
}

static void free_dev_on_main(void *opaque)
{
    struct fe *f = opaque;

    vscsi_dev_free(f->dev);
    f->dev = NULL;
}

void fe_threads_start(struct fe_threads *t)
{
    t->main = iothread_new("t-main", 0, 0);
    t->io[0] = iothread_new("t-io0", 1, 0);
    t->io[1] = iothread_new("t-io1", 2, 0);
    g_assert_cmpint(iothread_start(t->main), ==, 0);
    g_assert_cmpint(iothread_start(t->io[0]), ==, 0);
    g_assert_cmpint(iothread_start(t->io[1]), ==, 0);
}

void fe_threads_stop(struct fe_threads *t)
{
    iothread_free(t->io[0]);
    iothread_free(t->io[1]);
    iothread_free(t->main);
}

void fe_open(struct fe *f, const char *name, struct scsi_target *target,
             struct iothread *main, struct iothread **io)
{
    struct guest_mem_region r = { .gpa = RAM_GPA, .size = RAM_SIZE, .fd = -1 };
    struct vscsi_dev_config cfg = {
        .name = name, .target = target, .main_thread = main, .threads = io,
        .nthreads = 2, .num_request_queues = NQ - VSCSI_FIRST_REQ_QUEUE,
    };

    memset(f, 0, sizeof(*f));
    io_stats_init(&f->stats);
    cfg.stats = &f->stats;
    f->name = name;
    f->main = main;
    f->ram = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    g_assert_true(f->ram != MAP_FAILED);
    r.host = f->ram;
    r.uva = (uintptr_t)f->ram;
    guest_mem_init(&f->mem);
    g_assert_cmpint(guest_mem_add(&f->mem, &r), ==, 0);
    f->next_buf = BUF_OFF;
    for (unsigned i = 0; i < NQ; i++) {
        struct tq *q = &f->q[i];
        uint8_t *area = f->ram + i * RING_AREA;

        q->desc = (void *)area;
        q->avail = (void *)(area + QSZ * sizeof(struct vring_desc));
        q->used = (void *)(area + 0x1400);
        snprintf(q->name, sizeof(q->name), "%s:vq%u", name, i);
        vq_init(&q->vq, i, q->name);
        g_assert_cmpint(vq_setup(&q->vq, &f->mem, QSZ, q->desc, q->avail, q->used, 0, 0),
                        ==, 0);
        q->vq.kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        q->vq.call_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        g_assert_cmpint(q->vq.kick_fd, >=, 0);
        g_assert_cmpint(q->vq.call_fd, >=, 0);
    }
    f->dev = vscsi_dev_new(&cfg);
    fe_on_main(f, start_queues_on_main, f);
}

void fe_free_dev(struct fe *f)
{
    if (f->dev) {
        fe_on_main(f, free_dev_on_main, f);
    }
}

void fe_close(struct fe *f)
{
    fe_free_dev(f);
    for (unsigned i = 0; i < NQ; i++) {
        close(f->q[i].vq.kick_fd);
        close(f->q[i].vq.call_fd);
        vq_cleanup(&f->q[i].vq);
    }
    guest_mem_clear(&f->mem);
    munmap(f->ram, RAM_SIZE);
    io_stats_destroy(&f->stats);
}
