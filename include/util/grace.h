/*
 * Grace periods over I/O threads, for data that the threads read without
 * a lock (a nexus's LUN table): the writer publishes a new version with
 * one atomic pointer store, then asks for a grace period, and frees the
 * old version when it ends.  A grace period ends once each of the threads
 * has finished the loop iteration it was in when it began — a handler
 * never keeps a pointer it loaded across iterations — so nothing loaded
 * before the store is still in use.  No reader pays anything: no counter,
 * no fence on the data path.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_GRACE_H
#define VHOST_SCSI_GRACE_H

#include "iothread.h"

/*
 * Runs done(opaque) on home (posted there, never inside this call) when
 * every one of the n threads has passed the end of its current loop
 * iteration.  n == 0: done is posted to home at once; home NULL: done
 * runs inside this call, for programs without threads (tests, fuzzers),
 * where n must be 0.
 */
void iothread_grace(struct iothread *home, struct iothread *const *threads, unsigned n,
                    void (*done)(void *opaque), void *opaque);

#endif
