/*
 * The kernel transport of the front-end library: drives /dev/vhost-scsi
 * (tcm_vhost) with the ioctls from linux/vhost.h in the order QEMU's
 * vhost-scsi device uses: SET_OWNER, ABI version check, features, memory
 * table, vrings, then SET_ENDPOINT naming the LIO vhost target (wwpn);
 * stopping clears the endpoint before reading the ring bases back, because
 * only CLEAR_ENDPOINT makes the kernel stop and flush the queues.  Split
 * rings only: a packed ring asked for is refused before the device is opened.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <glib.h>
#include <linux/vhost.h>
#include <linux/virtio_config.h>

#include "vhost-frontend-int.h"

static int kioctl(struct vfe *fe, unsigned long req, void *arg, const char *what)
{
    if (ioctl(fe->fd, req, arg) < 0) {
        int err = -errno;
        g_warning("vhost front-end: %s: %s: %s", fe->path, what, g_strerror(errno));
        return err;
    }
    return 0;
}

static int kernel_connect(struct vfe *fe)
{
    /* Linux's vhost has only split rings: its VHOST_FEATURES never include RING_PACKED. */
    if (fe->cfg.packed) {
        g_warning("vhost front-end: %s: the kernel's vhost has no packed rings "
                  "(VIRTIO_F_RING_PACKED)", fe->path);
        return -ENOTSUP;
    }
    if (!fe->wwpn || !*fe->wwpn || strlen(fe->wwpn) >= sizeof(((struct vhost_scsi_target *)0)->vhost_wwpn)) {
        g_warning("vhost front-end: kernel vhost-scsi needs a wwpn shorter than 224 bytes");
        return -EINVAL;
    }
    fe->fd = open(fe->path, O_RDWR | O_CLOEXEC);
    if (fe->fd < 0) {
        int err = -errno;
        g_warning("vhost front-end: open %s: %s", fe->path, g_strerror(errno));
        return err;
    }
    int r = kioctl(fe, VHOST_SET_OWNER, NULL, "VHOST_SET_OWNER");
    if (r < 0) {
        return r;
    }
    int abi = 0;
    r = kioctl(fe, VHOST_SCSI_GET_ABI_VERSION, &abi, "VHOST_SCSI_GET_ABI_VERSION");
    if (r < 0) {
        return r;
    }
    if (abi > VHOST_SCSI_ABI_VERSION) {
        g_warning("vhost front-end: %s speaks vhost-scsi ABI %d, we know %d",
                  fe->path, abi, VHOST_SCSI_ABI_VERSION);
        return -ENOTSUP;
    }
    uint64_t dev_features;
    r = kioctl(fe, VHOST_GET_FEATURES, &dev_features, "VHOST_GET_FEATURES");
    if (r < 0) {
        return r;
    }
    /* never T10_PI: it changes the request header layout */
    uint64_t want = (1ull << VIRTIO_F_VERSION_1) |
                    (fe->cfg.event_idx ? 1ull << VIRTIO_RING_F_EVENT_IDX : 0) |
                    (fe->cfg.indirect ? 1ull << VIRTIO_RING_F_INDIRECT_DESC : 0);
    fe->features = dev_features & want;
    if (!(fe->features & (1ull << VIRTIO_F_VERSION_1))) {
        g_warning("vhost front-end: %s does not offer VIRTIO_F_VERSION_1", fe->path);
        return -ENOTSUP;
    }
    return kioctl(fe, VHOST_SET_FEATURES, &fe->features, "VHOST_SET_FEATURES");
}

static int kernel_set_mem(struct vfe *fe)
{
    struct vhost_memory *m = g_malloc0(sizeof(*m) + sizeof(struct vhost_memory_region));
    m->nregions = 1;
    m->regions[0] = (struct vhost_memory_region){
        .guest_phys_addr = VFE_GPA_BASE,
        .memory_size = fe->mem_size,
        .userspace_addr = (uint64_t)(uintptr_t)fe->mem,
    };
    int r = kioctl(fe, VHOST_SET_MEM_TABLE, m, "VHOST_SET_MEM_TABLE");
    g_free(m);
    return r;
}

static int kernel_start_queue(struct vfe *fe, struct vfe_queue *q)
{
    struct vhost_vring_state num = { .index = q->index, .num = q->num };
    struct vhost_vring_state base = { .index = q->index, .num = q->base };
    struct vhost_vring_addr addr = {
        .index = q->index,
        .desc_user_addr = (uint64_t)(uintptr_t)q->desc,
        .avail_user_addr = (uint64_t)(uintptr_t)q->avail,
        .used_user_addr = (uint64_t)(uintptr_t)q->used,
    };
    struct vhost_vring_file call = { .index = q->index, .fd = q->call_fd };
    struct vhost_vring_file kick = { .index = q->index, .fd = q->kick_fd };

    int r = kioctl(fe, VHOST_SET_VRING_NUM, &num, "VHOST_SET_VRING_NUM");
    if (r == 0) {
        r = kioctl(fe, VHOST_SET_VRING_BASE, &base, "VHOST_SET_VRING_BASE");
    }
    if (r == 0) {
        r = kioctl(fe, VHOST_SET_VRING_ADDR, &addr, "VHOST_SET_VRING_ADDR");
    }
    if (r == 0) {
        r = kioctl(fe, VHOST_SET_VRING_CALL, &call, "VHOST_SET_VRING_CALL");
    }
    if (r == 0) {
        r = kioctl(fe, VHOST_SET_VRING_KICK, &kick, "VHOST_SET_VRING_KICK");
    }
    return r;
}

static void fill_target(struct vfe *fe, struct vhost_scsi_target *t)
{
    memset(t, 0, sizeof(*t));
    t->abi_version = VHOST_SCSI_ABI_VERSION;
    g_strlcpy(t->vhost_wwpn, fe->wwpn, sizeof(t->vhost_wwpn));
    t->vhost_tpgt = fe->cfg.tpgt;
}

static int kernel_start_done(struct vfe *fe)
{
    struct vhost_scsi_target t;
    fill_target(fe, &t);
    return kioctl(fe, VHOST_SCSI_SET_ENDPOINT, &t, "VHOST_SCSI_SET_ENDPOINT");
}

static int kernel_stop_begin(struct vfe *fe)
{
    struct vhost_scsi_target t;
    fill_target(fe, &t);
    return kioctl(fe, VHOST_SCSI_CLEAR_ENDPOINT, &t, "VHOST_SCSI_CLEAR_ENDPOINT");
}

static int kernel_get_base(struct vfe *fe, struct vfe_queue *q, uint32_t *base)
{
    struct vhost_vring_state s = { .index = q->index };
    int r = kioctl(fe, VHOST_GET_VRING_BASE, &s, "VHOST_GET_VRING_BASE");
    if (r == 0) {
        *base = s.num;
    }
    return r;
}

static void kernel_disconnect(struct vfe *fe)
{
    if (fe->fd >= 0) {
        close(fe->fd);
        fe->fd = -1;
    }
}

const struct vfe_transport_ops vfe_kernel_ops = {
    .name = "vhost-kernel",
    .connect = kernel_connect,
    .set_mem = kernel_set_mem,
    .start_queue = kernel_start_queue,
    .start_done = kernel_start_done,
    .stop_begin = kernel_stop_begin,
    .get_base = kernel_get_base,
    .disconnect = kernel_disconnect,
};
