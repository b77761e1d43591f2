/*
 * Inside the sandbox layer: sandbox.c loads the filter whose refusals
 * sandbox-refusals.c answers.  The answering thread starts before the
 * filter is loaded and answers once it has the filter's listener.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_SANDBOX_INT_H
#define VHOST_SCSI_SANDBOX_INT_H

#include "sandbox.h"

/* The answerer, its thread waiting for the listener, in *out; -errno with *err without user notifications. */
int sandbox_refusals_new(struct sandbox **out, GError **err);
/* The filter is loaded: answer what notify_fd (now the answerer's) brings. */
void sandbox_refusals_start(struct sandbox *sb, int notify_fd);

#endif
