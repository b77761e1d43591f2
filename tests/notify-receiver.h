/*
 * A service manager's end of the readiness protocol, for the tests of the
 * sending side (tests/unit/sd-notify-test.c, tests/protocol/ready-test.c):
 * a bound datagram socket that, like systemd's, receives each sender's
 * credentials with its message.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef TESTS_NOTIFY_RECEIVER_H
#define TESTS_NOTIFY_RECEIVER_H

#include <stdbool.h>
#include <sys/types.h>

/* Bound at name: an absolute path, or "@NAME" for an abstract socket. */
int notify_receiver_bind(const char *name);
/* Whether a message is waiting now. */
bool notify_receiver_waiting(int fd);
/* The next message (waited for up to timeout_ms, else the test fails), NUL-terminated; *pid: its sender's. */
char *notify_receiver_next(int fd, int timeout_ms, pid_t *pid);

#endif
