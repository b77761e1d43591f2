/*
 * A worker thread for the blocking system calls an I/O thread must not
 * make itself (a block device's BLKDISCARD, a state file's fsync): jobs
 * run one at a time, in the order they were queued, on a thread started
 * at the first job, so an owner that never needs one costs no thread, and
 * one started after the sandbox is on is a plain clone(CLONE_THREAD),
 * which the filter allows.  A job hands its result back to the thread
 * that asked itself (iothread_post).  The owner frees it once nothing it
 * queued can still be waited for; offload_free runs what is still queued
 * and joins the thread.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_OFFLOAD_H
#define VHOST_SCSI_OFFLOAD_H

struct offload;

/* name: the worker thread's (at most 15 characters show). */
struct offload *offload_new(const char *name);
/*
 * Queues fn(opaque) to run on the worker, after the jobs queued before
 * it; from any thread.  0, or -errno when the worker cannot start (fn
 * does not run: the caller does the work itself or fails it).
 */
int offload_run(struct offload *o, void (*fn)(void *opaque), void *opaque);
/* Runs the jobs still queued, joins the worker and frees o (NULL: nothing). */
void offload_free(struct offload *o);

#endif
