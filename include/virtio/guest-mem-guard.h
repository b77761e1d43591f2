/*
 * The SIGBUS guard for mappings of front-end files (guest memory regions,
 * the inflight area).  A front-end that truncates such a file after
 * handing it over makes our next access to the lost pages raise SIGBUS,
 * which would take the whole daemon, and every other front-end's disks,
 * down with it.  With the guard installed, that fault instead costs only
 * the offending connection: see hw/virtio/guest-mem-guard.c.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_GUEST_MEM_GUARD_H
#define VHOST_SCSI_GUEST_MEM_GUARD_H

#include <stddef.h>

/* Installs the process's SIGBUS handler; idempotent.  0 or -errno. */
int guest_mem_guard_install(void);

/*
 * Guards the mapping [base, base + len), whose owner is the connection
 * socket owner_fd (-1: none).  Returns a handle > 0, or 0 when the table
 * (65,536 mappings) is full: logged, and the caller must then refuse the
 * mapping, since an unguarded one lets its front-end kill the process.
 */
int guest_mem_guard_add(void *base, size_t len, int owner_fd);

/*
 * Guards a shared mapping of the front-end's file fd if that file could
 * shrink (not sealed with F_SEAL_SHRINK, as QEMU's memfds are).  Returns
 * the handle, 0 when no guard is needed, or -ENOSPC when one is needed
 * but the table is full: the caller must then refuse the mapping.
 */
int guest_mem_guard_fd_mapping(int fd, void *base, size_t len, int owner_fd);

/* Stops guarding; call before unmapping.  Handle 0 is ignored. */
void guest_mem_guard_remove(int handle);

/* True once the mapping behind handle has lost its backing. */
int guest_mem_guard_tripped(int handle);

#endif
