/*
 * Signalling the eventfds a front-end hands over (call and err fds).  The
 * server makes them non-blocking when it receives them, but that flag
 * lives on the open file that the front-end shares: a hostile one can
 * clear it again and fill the counter, and the next signal would block
 * the thread that serves every queue on it.  notify_fd_signal() never
 * blocks for long on a thread enrolled with the notify watchdog: a write
 * that does not return within about two watchdog periods is interrupted,
 * and the caller is told the fd is hostile.  See hw/virtio/notify-fd.c.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_NOTIFY_FD_H
#define VHOST_SCSI_NOTIFY_FD_H

struct notify_watchdog;

/*
 * Starts the watchdog thread, checking enrolled threads every period_ms,
 * and installs its (empty, non-restarting) signal handler.  NULL on error
 * (logged).
 */
struct notify_watchdog *notify_watchdog_start(unsigned period_ms);
/* Stops and frees it; enrolled threads must have left (or exited) first. */
void notify_watchdog_stop(struct notify_watchdog *wd);

/*
 * Makes the calling thread's notify_fd_signal() calls interruptible.
 * 0, or -ENOSPC when the watchdog has no room for another thread.
 */
int notify_watchdog_enrol(struct notify_watchdog *wd);
/* The calling thread leaves (before it exits). */
void notify_watchdog_leave(struct notify_watchdog *wd);

/*
 * Adds 1 to the eventfd.  0 on success; -EAGAIN when its counter is full
 * (the front-end is not reading: its problem); -ETIMEDOUT when the write
 * blocked, so the fd lost O_NONBLOCK after it was handed over, and was
 * interrupted: the caller must stop using the fd and drop its front-end;
 * another -errno otherwise.
 */
int notify_fd_signal(int fd);

#endif
