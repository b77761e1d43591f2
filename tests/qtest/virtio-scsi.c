/*
 * A minimal virtio-scsi guest driver (virtio 1.2 section 5.6) on top of
 * the transport and ring layers: the initialisation sequence, command
 * requests laid out as [request][data-out] readable then
 * [response][data-in] writable, task management on the control queue,
 * and event buffers.  Each request gets fresh guest memory so that a
 * late completion can never scribble over a newer request's buffers.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "libqt.h"
#include "scsi-cmd.h"

#include <string.h>
#include <linux/virtio_config.h>
#include <linux/virtio_pci.h>
#include <linux/virtio_ring.h>
#include <linux/virtio_scsi.h>

#define VIRTIO_VENDOR 0x1af4
#define QUEUE_SIZE_MAX 256   /* bounds the guest RAM a scenario uses */

struct qt_vring *qt_vscsi_rq(struct qt_vscsi *d, unsigned i)
{
    g_assert_cmpuint(i, <, d->nq);
    return &d->vq[2 + i];
}

static void find_device(struct qt_vscsi *d, const struct qt_vscsi_opts *o,
                        struct qt_pci_dev *pci)
{
    uint16_t ids[] = { 0x1048, 0x1004 };
    for (unsigned i = 0; i < G_N_ELEMENTS(ids); i++) {
        if ((!o->device_id || o->device_id == ids[i]) &&
            qt_pci_find(&d->bus, o->busnr, VIRTIO_VENDOR, ids[i], pci)) {
            return;
        }
    }
    g_error("no virtio-scsi PCI function on bus %u", o->busnr);
}

static void driver_init(struct qt_vscsi *d, const struct qt_vscsi_opts *o, bool first)
{
    struct qt_pci_dev pci;
    struct qt_vpci *v = &d->vpci;

    find_device(d, o, &pci);
    qt_vpci_init(v, &pci, &d->alloc);
    qt_vpci_reset(v);
    qt_vpci_set_status(v, VIRTIO_CONFIG_S_ACKNOWLEDGE);
    qt_vpci_set_status(v, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);

    uint64_t offered = qt_vpci_device_features(v);
    g_assert(offered & (1ull << VIRTIO_F_VERSION_1));
    d->offered = offered;
    d->features = 1ull << VIRTIO_F_VERSION_1;
    if (o->packed && (offered & (1ull << VIRTIO_F_RING_PACKED))) {
        d->features |= 1ull << VIRTIO_F_RING_PACKED;
    }
    if (o->event_idx && (offered & (1ull << VIRTIO_RING_F_EVENT_IDX))) {
        d->features |= 1ull << VIRTIO_RING_F_EVENT_IDX;
    }
    if (o->hotplug && (offered & (1ull << VIRTIO_SCSI_F_HOTPLUG))) {
        d->features |= 1ull << VIRTIO_SCSI_F_HOTPLUG;
    }
    if (o->change && (offered & (1ull << VIRTIO_SCSI_F_CHANGE))) {
        d->features |= 1ull << VIRTIO_SCSI_F_CHANGE;
    }
    g_assert(qt_vpci_set_features(v, d->features));

    unsigned total = qt_vpci_num_queues(v);
    g_assert_cmpuint(total, >=, 3);
    /* The device config's num_queues counts request queues only. */
    g_assert_cmpuint(qt_vpci_cfg_readl(v, offsetof(struct virtio_scsi_config, num_queues)),
                     ==, total - 2);
    d->nq = MIN(total - 2, QT_VIRTIO_MAX_QUEUES - 2);

    d->use_msix = !o->no_msix;
    qt_msix_enable(&v->msix, d->use_msix);
    if (d->use_msix) {
        g_assert_cmpuint(qt_vpci_set_vector(v, 0xffff, 0), ==, 0);
    }
    bool eidx = d->features & (1ull << VIRTIO_RING_F_EVENT_IDX);
    bool packed = d->features & (1ull << VIRTIO_F_RING_PACKED);
    for (unsigned q = 0; q < 2 + d->nq; q++) {
        struct qt_vring *vq = &d->vq[q];
        uint16_t max = qt_vpci_queue_max(v, q);
        g_assert_cmpuint(max, >=, 8);
        if (first || vq->packed != packed) {
            /* Like Linux: the device's maximum, unless the scenario asks less. */
            uint16_t size = MIN(max, o->queue_size ? o->queue_size : QUEUE_SIZE_MAX);
            /* A ring of the other layout is left behind in guest RAM. */
            qt_vring_free(vq);
            (packed ? qt_vring_packed_init : qt_vring_init)(vq, d->s, &d->alloc, q, size,
                                                            eidx);
        } else {
            vq->event_idx = eidx;
            qt_vring_reset(vq);
        }
        /* Vector 0 is config; queues share the last vector if there are few. */
        vq->vector = d->use_msix ? MIN(q + 1, v->msix.nvec - 1) : VIRTIO_MSI_NO_VECTOR;
        qt_vpci_queue_setup(v, vq);
        if (d->use_msix) {
            qts_writew(d->s, v->common + offsetof(struct virtio_pci_common_cfg, queue_select), q);
            g_assert_cmpuint(qts_readw(d->s, v->common +
                                       offsetof(struct virtio_pci_common_cfg, queue_msix_vector)),
                             ==, vq->vector);
        }
    }
    if (!o->no_driver_ok) {
        qt_vpci_set_status(v, qt_vpci_status(v) | VIRTIO_CONFIG_S_DRIVER_OK);
        g_assert_cmphex(qt_vpci_status(v) & VIRTIO_CONFIG_S_NEEDS_RESET, ==, 0);
    }
}

void qt_vscsi_init(struct qt_vscsi *d, struct qts *s, const struct qt_vscsi_opts *o)
{
    static const struct qt_vscsi_opts defaults;
    memset(d, 0, sizeof(*d));
    d->s = s;
    qt_pci_bus_init(&d->bus, s);
    qt_alloc_init(&d->alloc);
    driver_init(d, o ? o : &defaults, true);
}

void qt_vscsi_reinit(struct qt_vscsi *d, const struct qt_vscsi_opts *o)
{
    static const struct qt_vscsi_opts defaults;
    driver_init(d, o ? o : &defaults, false);
}

void qt_vscsi_cleanup(struct qt_vscsi *d)
{
    for (unsigned q = 0; q < G_N_ELEMENTS(d->vq); q++) {
        qt_vring_free(&d->vq[q]);
    }
}

static void encode_lun(uint8_t *out, uint8_t lun)
{
    memset(out, 0, 8);
    out[0] = 1;              /* the single-level LUN structure of virtio-scsi */
    out[1] = 0;              /* target */
    out[2] = 0x40 | (lun >> 8);
    out[3] = lun;
}

void qt_vscsi_kick(struct qt_vscsi *d, struct qt_vring *vq)
{
    if (qt_vring_kick_needed(vq)) {
        qt_vpci_notify(&d->vpci, vq);
    }
}

void qt_vscsi_submit(struct qt_vscsi *d, struct qt_vring *vq, uint8_t lun,
                     const uint8_t *cdb, unsigned cdb_len, const void *out,
                     uint32_t in_len, uint32_t out_len, struct qt_scsi_req *r,
                     bool nokick)
{
    static uint64_t tag_seq;
    struct virtio_scsi_cmd_req req = { .task_attr = VIRTIO_SCSI_S_SIMPLE };
    struct qt_sg sg[4];
    unsigned n = 0;

    g_assert_cmpuint(cdb_len, <=, sizeof(req.cdb));
    encode_lun(req.lun, lun);
    req.tag = GUINT64_TO_LE(++tag_seq);
    memcpy(req.cdb, cdb, cdb_len);

    memset(r, 0, sizeof(*r));
    r->req = qt_alloc(&d->alloc, sizeof(req), 64);
    r->resp = qt_alloc(&d->alloc, sizeof(struct virtio_scsi_cmd_resp), 64);
    qts_memwrite(d->s, r->req, &req, sizeof(req));
    /* A recognisable pattern: a response the device never wrote shows up. */
    qts_memset(d->s, r->resp, 0xa5, sizeof(struct virtio_scsi_cmd_resp));
    sg[n++] = (struct qt_sg){ r->req, sizeof(req), false };
    if (out_len) {
        r->data = qt_alloc(&d->alloc, out_len, 512);
        r->data_len = out_len;
        qts_memwrite(d->s, r->data, out, out_len);
        sg[n++] = (struct qt_sg){ r->data, out_len, false };
    }
    sg[n++] = (struct qt_sg){ r->resp, sizeof(struct virtio_scsi_cmd_resp), true };
    if (in_len) {
        r->data = qt_alloc(&d->alloc, in_len, 512);
        r->data_len = in_len;
        qts_memset(d->s, r->data, 0, in_len);
        sg[n++] = (struct qt_sg){ r->data, in_len, true };
    }
    r->head = qt_vring_add(vq, sg, n);
    if (!nokick) {
        qt_vscsi_kick(d, vq);
    }
}

static void read_resp(struct qt_vscsi *d, uint64_t addr, struct qt_scsi_resp *out)
{
    struct virtio_scsi_cmd_resp r;
    qts_memread(d->s, addr, &r, sizeof(r));
    out->sense_len = GUINT32_FROM_LE(r.sense_len);
    out->resid = GUINT32_FROM_LE(r.resid);
    out->status_qualifier = GUINT16_FROM_LE(r.status_qualifier);
    out->status = r.status;
    out->response = r.response;
    memcpy(out->sense, r.sense, sizeof(out->sense));
}

void qt_vscsi_complete(struct qt_vscsi *d, struct qt_vring *vq,
                       struct qt_scsi_req *r, struct qt_scsi_resp *resp,
                       void *in, uint32_t in_len)
{
    uint32_t len;
    if (!qt_vring_wait_head(vq, r->head, &len, QT_TIMEOUT_US)) {
        g_error("queue %u: request (head %d) did not complete", vq->index, r->head);
    }
    read_resp(d, r->resp, resp);
    if (d->used_len_zero_ok && len == 0) {
        /* Submission filled the response with 0xa5: the device overwrote it. */
        g_assert_cmphex(resp->response, !=, 0xa5);
    } else {
        /* The used length covers at least the response header we read. */
        g_assert_cmpuint(len, >=, offsetof(struct virtio_scsi_cmd_resp, sense));
    }
    if (in && in_len) {
        g_assert_cmpuint(in_len, <=, r->data_len);
        qts_memread(d->s, r->data, in, in_len);
    }
}

uint8_t qt_vscsi_cmd(struct qt_vscsi *d, struct qt_vring *vq, uint8_t lun,
                     const uint8_t *cdb, unsigned cdb_len, const void *out,
                     uint32_t out_len, void *in, uint32_t in_len,
                     struct qt_scsi_resp *resp)
{
    struct qt_scsi_req r;
    struct qt_scsi_resp tmp;
    if (!resp) {
        resp = &tmp;
    }
    qt_vscsi_submit(d, vq, lun, cdb, cdb_len, out, in_len, out_len, &r, false);
    qt_vscsi_complete(d, vq, &r, resp, in, in_len);
    g_assert_cmpuint(resp->response, ==, VIRTIO_SCSI_S_OK);
    return resp->status;
}

void qt_vscsi_clear_ua(struct qt_vscsi *d, struct qt_vring *vq, uint8_t lun)
{
    uint8_t tur[SC_CDB_MAX];
    unsigned tur_len = sc_cdb(scsi_cdb_testunitready(), tur);
    for (int i = 0; i < 8; i++) {
        struct qt_scsi_resp resp;
        if (qt_vscsi_cmd(d, vq, lun, tur, tur_len, NULL, 0, NULL, 0, &resp) == 0) {
            return;
        }
        /* Only unit attentions are expected to clear by themselves. */
        g_assert_cmphex(sc_sense_of(resp.sense, MIN(resp.sense_len, sizeof(resp.sense))).key, ==,
                        SCSI_SENSE_UNIT_ATTENTION);
    }
    g_error("LUN %u still reports UNIT ATTENTION after 8 commands", lun);
}

uint8_t qt_vscsi_tmf(struct qt_vscsi *d, uint32_t subtype, uint8_t lun, uint64_t tag)
{
    struct virtio_scsi_ctrl_tmf_req req = {
        .type = GUINT32_TO_LE(VIRTIO_SCSI_T_TMF),
        .subtype = GUINT32_TO_LE(subtype),
        .tag = GUINT64_TO_LE(tag),
    };
    struct virtio_scsi_ctrl_tmf_resp resp = { .response = 0xff };
    encode_lun(req.lun, lun);
    uint64_t a = qt_alloc(&d->alloc, sizeof(req), 64);
    uint64_t b = qt_alloc(&d->alloc, sizeof(resp), 64);
    qts_memwrite(d->s, a, &req, sizeof(req));
    qts_memwrite(d->s, b, &resp, sizeof(resp));
    struct qt_sg sg[2] = { { a, sizeof(req), false }, { b, sizeof(resp), true } };
    int head = qt_vring_add(&d->vq[0], sg, 2);
    qt_vscsi_kick(d, &d->vq[0]);
    if (!qt_vring_wait_head(&d->vq[0], head, NULL, QT_TIMEOUT_US)) {
        g_error("control queue: TMF %u did not complete", subtype);
    }
    qts_memread(d->s, b, &resp, sizeof(resp));
    return resp.response;
}

void qt_vscsi_post_events(struct qt_vscsi *d, unsigned n)
{
    const unsigned sz = sizeof(struct virtio_scsi_event);
    d->events = qt_alloc(&d->alloc, (uint64_t)sz * n, 64);
    qts_memset(d->s, d->events, 0, (uint64_t)sz * n);
    for (unsigned i = 0; i < n; i++) {
        struct qt_sg sg = { d->events + (uint64_t)sz * i, sz, true };
        qt_vring_add(&d->vq[1], &sg, 1);
    }
    qt_vscsi_kick(d, &d->vq[1]);
}

bool qt_vscsi_get_event(struct qt_vscsi *d, uint32_t *event, uint8_t lun[8],
                        uint32_t *reason)
{
    struct virtio_scsi_event ev;
    uint32_t head, len;
    if (!qt_vring_wait(&d->vq[1], &head, &len, QT_TIMEOUT_US)) {
        return false;
    }
    g_assert_cmpuint(len, ==, sizeof(ev));
    uint64_t buf = qt_vring_buf_addr(&d->vq[1], head);
    g_assert_cmpuint(buf, >=, d->events);
    qts_memread(d->s, buf, &ev, sizeof(ev));
    *event = GUINT32_FROM_LE(ev.event);
    memcpy(lun, ev.lun, 8);
    *reason = GUINT32_FROM_LE(ev.reason);
    return true;
}

void qt_cdb_rw10(uint8_t *cdb, bool write, uint32_t lba, uint16_t blocks)
{
    uint8_t full[SC_CDB_MAX];

    /* Block size 1: the builders' transfer length is xferlen / blocksize. */
    sc_cdb(write ? scsi_cdb_write10(lba, blocks, 1, 0, 0, 0, 0, 0)
                 : scsi_cdb_read10(lba, blocks, 1, 0, 0, 0, 0, 0), full);
    memcpy(cdb, full, 10);
}

void qt_fill_pattern(void *buf, size_t len, uint32_t seed)
{
    uint8_t *p = buf;
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < len; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = x >> 16;
    }
}
