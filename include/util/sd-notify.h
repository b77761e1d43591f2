/*
 * The service manager's readiness protocol (systemd's sd_notify(3), as its
 * documented datagram protocol, without libsystemd): a daemon started with
 * Type=notify finds the manager's socket in $NOTIFY_SOCKET and sends it
 * newline-separated VARIABLE=VALUE assignments ("READY=1") as one datagram
 * (hw/util/sd-notify.c).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_SD_NOTIFY_H
#define VHOST_SCSI_SD_NOTIFY_H

/* A datagram socket connected to the manager's. */
struct sd_notify;

/*
 * Connects to the socket $NOTIFY_SOCKET names (an absolute path, or an
 * abstract name written "@NAME") and unsets the variable, so that nothing
 * the process starts later inherits it.  Once connected, a message needs
 * only send(2): a process may connect before a system-call filter that
 * allows no new sockets.  Returns 0 with *out NULL when the variable is not
 * set (not started as a Type=notify service: sending is then a no-op), 0
 * with *out set, or -errno: -EINVAL for a name that is neither, or empty,
 * -ENAMETOOLONG for one longer than a socket address holds, or the
 * socket's or the connect's error.
 */
int sd_notify_open(struct sd_notify **out);
/* Sends state (e.g. "READY=1\nSTATUS=serving") as one datagram; 0 or -errno. NULL n: 0. */
int sd_notify_send(struct sd_notify *n, const char *state);
/* Closes the socket (NULL: nothing). */
void sd_notify_free(struct sd_notify *n);

#endif
