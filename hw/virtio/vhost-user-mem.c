/*
 * What a vhost-user front-end maps into the back-end: the memory table
 * (SET_MEM_TABLE, ADD_MEM_REG, REM_MEM_REG) and the inflight-tracking area
 * (GET/SET_INFLIGHT_FD).  Regions and the area are guarded mappings of the
 * front-end's files (guest-mem-guard.c) whose sizes and offsets are checked
 * before anything is mapped; running queues are stopped around a change
 * and restarted on the new table.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/vhost_types.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include <glib.h>
#include <glib-unix.h>

#include "guest-mem-guard.h"
#include "notify-fd.h"
#include "vhost-user-int.h"

static int check_region_fd(struct vu_dev *dev, int fd, const struct vhost_user_mem_region *r)
{
    struct stat st;

    if (fstat(fd, &st) < 0) {
        int err = errno;

        log_limit_warning(&dev->log_limit, "%s: cannot stat the fd of region gpa 0x%llx: %s",
                          dev->name, (unsigned long long)r->guest_phys_addr, g_strerror(err));
        return -err;
    }
    if (S_ISREG(st.st_mode) &&
        (r->mmap_offset > (uint64_t)st.st_size ||
         r->memory_size > (uint64_t)st.st_size - r->mmap_offset)) {
        log_limit_warning(&dev->log_limit,
                          "%s: region gpa 0x%llx (0x%llx bytes at offset 0x%llx) lies beyond the "
                          "end of its %lld-byte file", dev->name,
                          (unsigned long long)r->guest_phys_addr,
                          (unsigned long long)r->memory_size, (unsigned long long)r->mmap_offset,
                          (long long)st.st_size);
        return -EINVAL;
    }
    return 0;
}

/*
 * A table of more regions than the slots we announce is refused; a
 * warning the first time per connection (a peer that keeps asking does
 * not flood the log), the rest at debug level.
 */
static void vu_mem_limit_refused(struct vu_dev *dev, const char *what, unsigned want)
{
    if (!dev->mem_limit_logged) {
        log_limit_warning(&dev->log_limit,
                          "%s: %s refused: %u memory regions, more than the %u slots we "
                          "announced (GET_MAX_MEM_SLOTS); further refusals are not logged",
                          dev->name, what, want, dev->max_mem_slots);
        dev->mem_limit_logged = true;
    } else {
        g_debug("%s: %s refused: %u regions", dev->name, what, want);
    }
}

int vu_handle_set_mem_table(struct vu_dev *dev, struct vu_msg *msg)
{
    const struct vhost_user_memory *m = &msg->p.memory;
    struct guest_mem *table;

    if (msg->nfds < m->nregions) {
        log_limit_warning(&dev->log_limit, "%s: SET_MEM_TABLE with %u regions carries only %u fds",
                          dev->name, m->nregions, msg->nfds);
        return -EINVAL;
    }
    if (m->nregions > dev->max_mem_slots) {
        vu_mem_limit_refused(dev, "SET_MEM_TABLE", m->nregions);
        return -ENOSPC;
    }
    /* Map everything first, so a bad table leaves the old one in place. */
    table = g_new(struct guest_mem, 1);
    guest_mem_init(table);
    table->owner_fd = dev->fd;
    table->log_limit = &dev->log_limit;
    for (unsigned i = 0; i < m->nregions; i++) {
        const struct vhost_user_mem_region *r = &m->regions[i];
        int ret = check_region_fd(dev, msg->fds[i], r);

        if (ret == 0) {
            ret = guest_mem_map_fd(table, vu_take_fd(msg, i), r->guest_phys_addr,
                                   r->memory_size, r->userspace_addr, r->mmap_offset);
        }
        if (ret < 0) {
            log_limit_warning(&dev->log_limit,
                              "%s: SET_MEM_TABLE region %u (gpa 0x%llx size 0x%llx) rejected: %s",
                              dev->name, i, (unsigned long long)r->guest_phys_addr,
                              (unsigned long long)r->memory_size, g_strerror(-ret));
            guest_mem_clear(table);
            g_free(table);
            return ret;
        }
    }
    vu_stop_all(dev);
    guest_mem_clear(&dev->mem);
    dev->mem = *table;
    g_free(table);
    vu_memory_changed(dev);
    return 0;
}

int vu_handle_add_mem_reg(struct vu_dev *dev, struct vu_msg *msg)
{
    const struct vhost_user_mem_region *r = &msg->p.mem_reg.region;
    int fd = vu_take_fd(msg, 0);
    int ret;

    if (fd < 0) {
        log_limit_warning(&dev->log_limit, "%s: ADD_MEM_REG without an fd", dev->name);
        return -EINVAL;
    }
    ret = check_region_fd(dev, fd, r);
    if (ret < 0) {
        close(fd);
        return ret;
    }
    /*
     * A device re-created on the same connection (hot-unplug then plug
     * with one chardev) starts from an empty table on QEMU's side and adds
     * every region again: an identical region replaces the old mapping.
     */
    bool replaces = false;
    for (unsigned i = 0; i < dev->mem.nregions; i++) {
        const struct guest_mem_region *old = &dev->mem.r[i];

        if (old->gpa == r->guest_phys_addr && old->size == r->memory_size &&
            old->uva == r->userspace_addr) {
            replaces = true;
        }
    }
    if (!replaces && dev->mem.nregions >= dev->max_mem_slots) {
        vu_mem_limit_refused(dev, "ADD_MEM_REG", dev->mem.nregions + 1);
        close(fd);
        return -ENOSPC;
    }
    /* Running queues read the table from their threads: change it while they are stopped. */
    vu_stop_all(dev);
    if (replaces) {
        log_limit_message(&dev->log_limit,
                          "%s: ADD_MEM_REG replaces the identical region at gpa 0x%llx", dev->name,
                          (unsigned long long)r->guest_phys_addr);
        guest_mem_remove(&dev->mem, r->guest_phys_addr, r->memory_size);
    }
    ret = guest_mem_map_fd(&dev->mem, fd, r->guest_phys_addr, r->memory_size,
                           r->userspace_addr, r->mmap_offset);
    if (ret < 0) {
        log_limit_warning(&dev->log_limit, "%s: ADD_MEM_REG (gpa 0x%llx size 0x%llx) rejected: %s",
                          dev->name, (unsigned long long)r->guest_phys_addr,
                          (unsigned long long)r->memory_size, g_strerror(-ret));
    }
    vu_memory_changed(dev);
    return ret;
}

int vu_handle_rem_mem_reg(struct vu_dev *dev, struct vu_msg *msg)
{
    const struct vhost_user_mem_region *r = &msg->p.mem_reg.region;
    bool found = false;

    /* The spec identifies the region by gpa, size and uva; an fd, if any, is just closed. */
    for (unsigned i = 0; i < dev->mem.nregions; i++) {
        const struct guest_mem_region *g = &dev->mem.r[i];

        if (g->gpa == r->guest_phys_addr && g->size == r->memory_size &&
            g->uva == r->userspace_addr) {
            found = true;
            break;
        }
    }
    if (!found) {
        log_limit_warning(&dev->log_limit,
                          "%s: REM_MEM_REG for an unknown region (gpa 0x%llx size 0x%llx uva "
                          "0x%llx)", dev->name, (unsigned long long)r->guest_phys_addr,
                          (unsigned long long)r->memory_size,
                          (unsigned long long)r->userspace_addr);
        return -ENOENT;
    }
    vu_stop_all(dev);
    guest_mem_remove(&dev->mem, r->guest_phys_addr, r->memory_size);
    vu_memory_changed(dev);
    return 0;
}

/* True if a mapping of this connection lost its file (see guest-mem-guard.c). */
bool vu_mem_lost(const struct vu_dev *dev)
{
    for (unsigned i = 0; i < dev->mem.nregions; i++) {
        if (guest_mem_guard_tripped(dev->mem.r[i].guard)) {
            return true;
        }
    }
    return guest_mem_guard_tripped(dev->inflight.guard);
}

void vu_inflight_unmap(struct vu_inflight *inf)
{
    guest_mem_guard_remove(inf->guard);
    if (inf->map) {
        munmap(inf->map, inf->map_size);
    }
    memset(inf, 0, sizeof(*inf));
}

static size_t inflight_split_bytes(unsigned queue_size)
{
    return sizeof(struct vhost_user_inflight_queue) +
           (size_t)queue_size * sizeof(struct vhost_user_inflight_desc);
}

/*
 * The slices of an area we make: GET_INFLIGHT_FD may come before
 * SET_FEATURES says whether the rings are packed, so each slice fits
 * either layout (both start with their own header).
 */
static size_t inflight_stride(unsigned queue_size)
{
    return MAX(inflight_split_bytes(queue_size), vu_inflight_packed_bytes(queue_size));
}

static int inflight_check_geometry(struct vu_dev *dev, const struct vhost_user_inflight *in)
{
    unsigned qs = in->queue_size;

    if (in->num_queues == 0 || in->num_queues > dev->num_queues || qs == 0 ||
        qs > VU_MAX_RING_SIZE || (qs & (qs - 1))) {
        log_limit_warning(&dev->log_limit, "%s: %s for %u queues of %u entries (we have %u queues)",
                          dev->name, "inflight area", in->num_queues, qs, dev->num_queues);
        return -EINVAL;
    }
    if (qs > VU_INFLIGHT_MAX_QUEUE_SIZE) {
        log_limit_warning(&dev->log_limit,
                          "%s: inflight area for %u-entry rings: more than the %u entries we "
                          "track", dev->name, qs, VU_INFLIGHT_MAX_QUEUE_SIZE);
        return -E2BIG;
    }
    return 0;
}

static void inflight_install(struct vu_dev *dev, void *map, size_t map_size, uint8_t *area,
                             size_t stride, const struct vhost_user_inflight *in, int guard)
{
    vu_stop_all(dev);
    vu_inflight_unmap(&dev->inflight);
    dev->inflight.map = map;
    dev->inflight.map_size = map_size;
    dev->inflight.guard = guard;
    dev->inflight.area = area;
    dev->inflight.stride = stride;
    dev->inflight.num_queues = in->num_queues;
    dev->inflight.queue_size = in->queue_size;
    vu_refresh_all(dev);
}

int vu_handle_get_inflight_fd(struct vu_dev *dev, struct vu_msg *msg,
                              struct vu_reply *reply)
{
    const struct vhost_user_inflight *in = &msg->p.inflight;
    size_t size;
    void *map;
    int fd, r;

    /* mmap_size 0 tells the front-end "no inflight tracking", which it tolerates. */
    reply->send = true;
    reply->size = sizeof(struct vhost_user_inflight);
    memset(&reply->p.inflight, 0, sizeof(reply->p.inflight));
    r = inflight_check_geometry(dev, in);
    if (r == -E2BIG) {
        return 0;          /* answered with "no tracking" */
    }
    if (r < 0) {
        return r;
    }
    size = in->num_queues * inflight_stride(in->queue_size);
    fd = memfd_create("vhost-user-inflight", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        r = -errno;
        log_limit_warning(&dev->log_limit, "%s: cannot create the inflight area: %s", dev->name,
                          g_strerror(-r));
        return r;
    }
    /* Sealed, so the front-end cannot shrink it under our mapping (SIGBUS). */
    if (ftruncate(fd, size) < 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
        r = -errno;
        log_limit_warning(&dev->log_limit, "%s: cannot size the inflight area: %s", dev->name,
                          g_strerror(-r));
        close(fd);
        return r;
    }
    map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        r = -errno;
        log_limit_warning(&dev->log_limit, "%s: cannot map the inflight area: %s", dev->name,
                          g_strerror(-r));
        close(fd);
        return r;
    }
    /* Our own memfd, sealed: nobody can shrink it, nothing to guard. */
    inflight_install(dev, map, size, map, inflight_stride(in->queue_size), in, 0);
    reply->p.inflight = *in;
    reply->p.inflight.mmap_size = size;
    reply->p.inflight.mmap_offset = 0;
    reply->fd = fd;
    return 0;
}

int vu_handle_set_inflight_fd(struct vu_dev *dev, struct vu_msg *msg)
{
    const struct vhost_user_inflight *in = &msg->p.inflight;
    uint64_t need, page = (uint64_t)sysconf(_SC_PAGESIZE), delta;
    size_t stride;
    struct stat st;
    void *map;
    int fd = vu_take_fd(msg, 0);
    int r, guard;

    if (fd < 0) {
        log_limit_warning(&dev->log_limit, "%s: SET_INFLIGHT_FD without an fd", dev->name);
        return -EINVAL;
    }
    r = inflight_check_geometry(dev, in);
    if (r < 0) {
        goto out;
    }
    /*
     * An area made by an earlier version of ours has split-sized slices:
     * its split rings go on in it, a packed ring runs untracked
     * (queue_attach_inflight says so).
     */
    stride = inflight_stride(in->queue_size);
    if (in->mmap_size < in->num_queues * stride) {
        stride = inflight_split_bytes(in->queue_size);
    }
    need = in->num_queues * stride;
    delta = in->mmap_offset % page;
    /* A short file would SIGBUS us on first access; check before mapping. */
    if (in->mmap_size < need || in->mmap_size > SIZE_MAX - delta ||
        in->mmap_offset > UINT64_MAX - in->mmap_size || fstat(fd, &st) < 0 ||
        (uint64_t)st.st_size < in->mmap_offset + in->mmap_size) {
        log_limit_warning(&dev->log_limit,
                          "%s: SET_INFLIGHT_FD area (size 0x%llx at offset 0x%llx) is too small "
                          "for %u queues of %u entries or beyond the end of its file", dev->name,
                          (unsigned long long)in->mmap_size, (unsigned long long)in->mmap_offset,
                          in->num_queues, in->queue_size);
        r = -EINVAL;
        goto out;
    }
    map = mmap(NULL, delta + in->mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
               in->mmap_offset - delta);
    if (map == MAP_FAILED) {
        r = -errno;
        log_limit_warning(&dev->log_limit, "%s: cannot map the inflight area: %s", dev->name,
                          g_strerror(-r));
        goto out;
    }
    /* The front-end's own file may shrink under us: guard it, or do without it. */
    guard = guest_mem_guard_fd_mapping(fd, map, delta + in->mmap_size, dev->fd);
    if (guard < 0) {
        munmap(map, delta + in->mmap_size);
        r = guard;
        goto out;
    }
    inflight_install(dev, map, delta + in->mmap_size, (uint8_t *)map + delta, stride, in,
                     guard);
    r = 0;
out:
    close(fd);
    return r;
}

/* Requests whose sender always waits for a reply, even without NEED_REPLY. */
