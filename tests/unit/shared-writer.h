/*
 * A hostile front-end or guest in a test: a second thread that keeps
 * rewriting memory the code under test shares with it (rings, descriptor
 * and indirect tables, an inflight area) while the test's thread runs the
 * daemon's code on it.  The writer starts before the test's work and runs
 * until stopped; the test bounds itself by its own iteration count.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_SHARED_WRITER_H
#define VHOST_SCSI_SHARED_WRITER_H

#include <glib.h>

/* One pass over the shared memory: rewrite what it likes, with rand's values. */
typedef void (*shared_writer_pass)(void *shared, GRand *rand);

struct shared_writer;

/*
 * Starts the thread calling pass(shared, ...) over and over; returns once
 * the first pass is done, so the caller's work overlaps the writes.
 */
struct shared_writer *shared_writer_start(shared_writer_pass pass, void *shared);

/* Stops and joins the thread; returns the passes it made. */
guint64 shared_writer_stop(struct shared_writer *w);

#endif
