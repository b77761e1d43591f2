/*
 * The front-end's half of dirty logging, as QEMU plays it while migrating
 * a VM: a sealed memfd bitmap with one bit per 4 KiB page of the guest
 * physical space we describe (VFE_GPA_BASE onwards), handed over with
 * SET_LOG_BASE, then VHOST_F_LOG_ALL in SET_FEATURES.  Tests and the
 * bench read the bitmap to check what the back-end marked.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/mman.h>

#include <glib.h>
#include <linux/vhost_types.h>

#include "vhost-frontend-int.h"

#define PAGE 4096u

static bool page_marked(const struct vfe *fe, uint64_t page)
{
    return __atomic_load_n(&fe->log[page / 8], __ATOMIC_ACQUIRE) & (1u << (page % 8));
}

static int log_alloc(struct vfe *fe)
{
    uint64_t pages = (VFE_GPA_BASE + fe->mem_size + PAGE - 1) / PAGE;
    size_t size = (size_t)((pages + 7) / 8);
    int fd = memfd_create("vfe-dirty-log", MFD_CLOEXEC | MFD_ALLOW_SEALING);

    if (fd < 0) {
        return -errno;
    }
    /* Sealed like QEMU's: the back-end need not guard against truncation. */
    if (ftruncate(fd, (off_t)size) < 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
        int err = -errno;

        close(fd);
        return err;
    }
    fe->log = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fe->log == MAP_FAILED) {
        int err = -errno;

        fe->log = NULL;
        close(fd);
        return err;
    }
    fe->log_fd = fd;
    fe->log_size = size;
    return 0;
}

void vfe_log_free(struct vfe *fe)
{
    if (fe->log) {
        munmap(fe->log, fe->log_size);
        fe->log = NULL;
    }
    if (fe->log_fd >= 0) {
        close(fe->log_fd);
        fe->log_fd = -1;
    }
}

int vfe_log_start(struct vfe *fe)
{
    int r;

    if (!fe->ops->set_log || !fe->cfg.dirty_log) {
        return -ENOTSUP;
    }
    if (!fe->log) {
        r = log_alloc(fe);
        if (r < 0) {
            g_warning("vhost front-end: %s: cannot make a dirty log: %s", fe->path,
                      g_strerror(-r));
            return r;
        }
    }
    r = fe->ops->set_log(fe, fe->log_fd, fe->log_size);
    if (r < 0) {
        return r;
    }
    return fe->ops->set_features(fe, fe->features | (1ull << VHOST_F_LOG_ALL));
}

int vfe_log_stop(struct vfe *fe)
{
    if (!fe->ops->set_features) {
        return -ENOTSUP;
    }
    return fe->ops->set_features(fe, fe->features);
}

size_t vfe_log_unmarked(struct vfe *fe, const void *p, size_t len)
{
    uint64_t first, last;
    size_t missing = 0;

    if (!fe->log || !len) {
        return fe->log ? 0 : (len + PAGE - 1) / PAGE;
    }
    first = vfe_gpa(fe, p) / PAGE;
    last = (vfe_gpa(fe, p) + len - 1) / PAGE;
    for (uint64_t pg = first; pg <= last; pg++) {
        missing += !page_marked(fe, pg);
    }
    return missing;
}

size_t vfe_log_count(struct vfe *fe)
{
    size_t n = 0;

    for (size_t i = 0; fe->log && i < fe->log_size; i++) {
        n += (size_t)__builtin_popcount(__atomic_load_n(&fe->log[i], __ATOMIC_ACQUIRE));
    }
    return n;
}

void vfe_log_clear(struct vfe *fe)
{
    /* An exchange per byte, as QEMU's sync reads and clears each word. */
    for (size_t i = 0; fe->log && i < fe->log_size; i++) {
        __atomic_exchange_n(&fe->log[i], 0, __ATOMIC_ACQ_REL);
    }
}
