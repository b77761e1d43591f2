/*
 * The dirty log of a vhost-user connection (VHOST_F_LOG_ALL with
 * VHOST_USER_PROTOCOL_F_LOG_SHMFD): SET_LOG_BASE hands over the bitmap as
 * a shared-memory fd, SET_FEATURES with VHOST_F_LOG_ALL turns logging on
 * for every queue.  The rule that makes it correct by construction: a
 * queue never runs with LOG_ALL negotiated unless a log covering the
 * whole memory table is mapped, so no write can go unmarked or past the
 * bitmap.  QEMU starts a device during a migration with SET_FEATURES
 * before SET_LOG_BASE; the queues simply start when the log arrives.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "guest-mem-guard.h"
#include "vhost-user-int.h"

void vu_log_unmap(struct vu_log *l)
{
    guest_mem_guard_remove(l->guard);
    if (l->map) {
        munmap(l->map, l->map_size);
    }
    *l = (struct vu_log) { .guard = 0 };
}

/* Maps the log msg describes; 0 and *out filled, or -errno (logged). */
static int log_map(struct vu_dev *dev, int fd, const struct vhost_user_log *in,
                   struct vu_log *out)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), delta = in->mmap_offset % page;
    struct stat st;
    void *map;
    int guard;

    /* A short file would SIGBUS us at the first mark: check before mapping. */
    if (in->mmap_size == 0 || in->mmap_size > SIZE_MAX - delta ||
        in->mmap_offset > UINT64_MAX - in->mmap_size || fstat(fd, &st) < 0 ||
        (S_ISREG(st.st_mode) && (uint64_t)st.st_size < in->mmap_offset + in->mmap_size)) {
        log_limit_warning(&dev->log_limit,
                          "%s: SET_LOG_BASE log (0x%llx bytes at offset 0x%llx) is empty, wraps "
                          "or lies beyond the end of its file; refused", dev->name,
                          (unsigned long long)in->mmap_size, (unsigned long long)in->mmap_offset);
        return -EINVAL;
    }
    map = mmap(NULL, delta + in->mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
               (off_t)(in->mmap_offset - delta));
    if (map == MAP_FAILED) {
        int err = errno;

        log_limit_warning(&dev->log_limit, "%s: cannot map the dirty log: %s", dev->name,
                          g_strerror(err));
        return -err;
    }
    /* The front-end's file may shrink under us (QEMU seals its memfd; others may not). */
    guard = guest_mem_guard_fd_mapping(fd, map, delta + in->mmap_size, dev->fd);
    if (guard < 0) {
        munmap(map, delta + in->mmap_size);
        return guard;
    }
    *out = (struct vu_log) {
        .log = { .bits = (uint8_t *)map + delta, .size = in->mmap_size },
        .map = map,
        .map_size = delta + in->mmap_size,
        .guard = guard,
    };
    return 0;
}

int vu_handle_set_log_base(struct vu_dev *dev, struct vu_msg *msg, struct vu_reply *reply)
{
    struct vu_log fresh = { .guard = 0 };
    int fd = vu_take_fd(msg, 0);
    uint64_t need;
    int r;

    if (!(dev->protocol & (1ull << VHOST_USER_PROTOCOL_F_LOG_SHMFD)) || fd < 0) {
        /* Without LOG_SHMFD the log is front-end memory we cannot reach. */
        log_limit_warning(&dev->log_limit, "%s: SET_LOG_BASE %s; refused", dev->name,
                          fd < 0 ? "without an fd" : "without VHOST_USER_PROTOCOL_F_LOG_SHMFD");
        if (fd >= 0) {
            close(fd);
        }
        return -EINVAL;
    }
    r = log_map(dev, fd, &msg->p.log, &fresh);
    close(fd);
    if (r < 0) {
        return r;
    }
    /* Queues may be marking the old log: it goes only once they are stopped. */
    vu_stop_all(dev);
    vu_log_unmap(&dev->log);
    need = vhost_log_size_for(&dev->mem);
    if (fresh.log.size < need) {
        /*
         * The front-end reads only the newest log, so the old one is of no
         * use either: the queues wait (vu_log_ready) for one that fits.
         */
        log_limit_warning(&dev->log_limit,
                          "%s: SET_LOG_BASE log of %llu bytes cannot cover guest memory (needs "
                          "%llu); refused, queues wait for a log that fits", dev->name,
                          (unsigned long long)fresh.log.size, (unsigned long long)need);
        vu_log_unmap(&fresh);
    } else {
        dev->log = fresh;
        g_debug("%s: dirty log of %llu bytes mapped", dev->name,
                (unsigned long long)fresh.log.size);
    }
    vu_refresh_all(dev);
    /* QEMU waits for an empty reply (and does not look at it). */
    reply->send = true;
    reply->size = 0;
    return 0;
}
