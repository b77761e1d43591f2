/*
 * The virtio 1.x PCI transport (modern interface only): the vendor
 * capabilities that locate the common, notify, ISR and device-specific
 * structures inside BARs, and the register-level steps of the driver
 * initialisation sequence (virtio 1.2 section 3.1).  Every access is a
 * qtest MMIO access, so the order of writes here is exactly the order a
 * device model sees.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "libqt.h"

#include <string.h>

#include <linux/pci_regs.h>
#include <linux/virtio_config.h>
#include <linux/virtio_pci.h>

#define COMMON(f) (v->common + offsetof(struct virtio_pci_common_cfg, f))

static uint64_t cap_addr(struct qt_vpci *v, uint8_t cap)
{
    uint8_t bar = qt_pci_cfg_readb(&v->pci, cap + offsetof(struct virtio_pci_cap, bar));
    uint32_t off = qt_pci_cfg_readl(&v->pci, cap + offsetof(struct virtio_pci_cap, offset));
    g_assert_cmpuint(bar, <, 6);
    g_assert(v->pci.bar[bar] && !v->pci.bar_io[bar]);
    return v->pci.bar[bar] + off;
}

void qt_vpci_init(struct qt_vpci *v, struct qt_pci_dev *pci, struct qt_alloc *a)
{
    uint64_t slots = v->msix.slots;   /* survives re-init: same RAM */

    memset(v, 0, sizeof(*v));
    v->s = pci->bus->s;
    v->pci = *pci;
    qt_pci_enable(&v->pci);
    for (uint8_t cap = qt_pci_find_cap(&v->pci, PCI_CAP_ID_VNDR, 0); cap;
         cap = qt_pci_find_cap(&v->pci, PCI_CAP_ID_VNDR, cap)) {
        uint8_t type = qt_pci_cfg_readb(&v->pci, cap + offsetof(struct virtio_pci_cap, cfg_type));
        uint64_t *dst = NULL;
        switch (type) {
        case VIRTIO_PCI_CAP_COMMON_CFG: dst = &v->common; break;
        case VIRTIO_PCI_CAP_NOTIFY_CFG: dst = &v->notify; break;
        case VIRTIO_PCI_CAP_ISR_CFG: dst = &v->isr; break;
        case VIRTIO_PCI_CAP_DEVICE_CFG: dst = &v->device; break;
        default: continue;
        }
        /* The spec lets a device repeat a type; the first one is preferred. */
        if (*dst) {
            continue;
        }
        *dst = cap_addr(v, cap);
        if (type == VIRTIO_PCI_CAP_NOTIFY_CFG) {
            v->notify_mult = qt_pci_cfg_readl(&v->pci, cap +
                                              offsetof(struct virtio_pci_notify_cap,
                                                       notify_off_multiplier));
        }
    }
    g_assert(v->common && v->notify && v->isr && v->device);
    v->msix.slots = slots;
    qt_msix_init(&v->msix, &v->pci, a);
}

uint8_t qt_vpci_status(struct qt_vpci *v)
{
    return qts_readb(v->s, COMMON(device_status));
}

void qt_vpci_set_status(struct qt_vpci *v, uint8_t status)
{
    qts_writeb(v->s, COMMON(device_status), status);
}

void qt_vpci_reset(struct qt_vpci *v)
{
    qt_vpci_set_status(v, 0);
    gint64 deadline = g_get_monotonic_time() + QT_TIMEOUT_US;
    while (qt_vpci_status(v) != 0) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
    }
}

uint64_t qt_vpci_device_features(struct qt_vpci *v)
{
    qts_writel(v->s, COMMON(device_feature_select), 0);
    uint64_t lo = qts_readl(v->s, COMMON(device_feature));
    qts_writel(v->s, COMMON(device_feature_select), 1);
    uint64_t hi = qts_readl(v->s, COMMON(device_feature));
    return hi << 32 | lo;
}

bool qt_vpci_set_features(struct qt_vpci *v, uint64_t features)
{
    qts_writel(v->s, COMMON(guest_feature_select), 0);
    qts_writel(v->s, COMMON(guest_feature), (uint32_t)features);
    qts_writel(v->s, COMMON(guest_feature_select), 1);
    qts_writel(v->s, COMMON(guest_feature), features >> 32);
    qt_vpci_set_status(v, qt_vpci_status(v) | VIRTIO_CONFIG_S_FEATURES_OK);
    return qt_vpci_status(v) & VIRTIO_CONFIG_S_FEATURES_OK;
}

uint16_t qt_vpci_num_queues(struct qt_vpci *v)
{
    return qts_readw(v->s, COMMON(num_queues));
}

uint16_t qt_vpci_queue_max(struct qt_vpci *v, uint16_t q)
{
    qts_writew(v->s, COMMON(queue_select), q);
    return qts_readw(v->s, COMMON(queue_size));
}

uint16_t qt_vpci_set_vector(struct qt_vpci *v, uint16_t q, uint16_t vec)
{
    if (q == 0xffff) {
        qts_writew(v->s, COMMON(msix_config), vec);
        return qts_readw(v->s, COMMON(msix_config));
    }
    qts_writew(v->s, COMMON(queue_select), q);
    qts_writew(v->s, COMMON(queue_msix_vector), vec);
    return qts_readw(v->s, COMMON(queue_msix_vector));
}

void qt_vpci_queue_setup(struct qt_vpci *v, struct qt_vring *vq)
{
    qts_writew(v->s, COMMON(queue_select), vq->index);
    qts_writew(v->s, COMMON(queue_size), vq->size);
    qts_writel(v->s, COMMON(queue_desc_lo), (uint32_t)vq->desc);
    qts_writel(v->s, COMMON(queue_desc_hi), vq->desc >> 32);
    qts_writel(v->s, COMMON(queue_avail_lo), (uint32_t)vq->avail);
    qts_writel(v->s, COMMON(queue_avail_hi), vq->avail >> 32);
    qts_writel(v->s, COMMON(queue_used_lo), (uint32_t)vq->used);
    qts_writel(v->s, COMMON(queue_used_hi), vq->used >> 32);
    qts_writew(v->s, COMMON(queue_msix_vector), vq->vector);
    qts_writew(v->s, COMMON(queue_enable), 1);
}

void qt_vpci_notify(struct qt_vpci *v, struct qt_vring *vq)
{
    qts_writew(v->s, COMMON(queue_select), vq->index);
    uint16_t off = qts_readw(v->s, COMMON(queue_notify_off));
    qts_writew(v->s, v->notify + (uint64_t)off * v->notify_mult, vq->index);
}

uint8_t qt_vpci_isr(struct qt_vpci *v)
{
    return qts_readb(v->s, v->isr);
}

uint32_t qt_vpci_cfg_readl(struct qt_vpci *v, unsigned off)
{
    return qts_readl(v->s, v->device + off);
}
