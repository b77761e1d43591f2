/*
 * A silent portal for tests: a TCP listener on 127.0.0.1 whose thread
 * accepts every connection, reads what it is sent and never answers, as a
 * hung iSCSI target would.  It counts the connections it has accepted and
 * those their peers have closed, so a test waits for the daemon to have
 * connected (or given up) on a condition, never by sleeping.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_SILENT_PORTAL_H
#define VHOST_SCSI_SILENT_PORTAL_H

#include <stdbool.h>

struct silent_portal;

struct silent_portal *silent_portal_start(void);
int silent_portal_port(const struct silent_portal *p);
/* Waits up to timeout_ms until n connections have been accepted; true if they have. */
bool silent_portal_wait_accepted(struct silent_portal *p, unsigned n, int timeout_ms);
/* Waits up to timeout_ms until n of them have been closed by their peer; true if they have. */
bool silent_portal_wait_closed(struct silent_portal *p, unsigned n, int timeout_ms);
/* Stops the thread, closes every connection and the listener. */
void silent_portal_stop(struct silent_portal *p);

#endif
