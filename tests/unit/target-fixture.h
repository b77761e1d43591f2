/*
 * An in-process daemon for the tests of the daemon layer (hw/daemon):
 * a struct target with one request queue on one I/O thread, started
 * without signals, in a temporary directory of its own for the files and
 * sockets a test makes.  Its main loop runs on the test's thread, once
 * per fixture, until the target is drained: no control socket any more,
 * and every LUN removal and every job off the main thread (opens, closes,
 * sockets made) finished, so that nothing outlives the target.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_TESTS_TARGET_FIXTURE_H
#define VHOST_SCSI_TESTS_TARGET_FIXTURE_H

#include "target.h"

struct target_fixture {
    struct target_opts opts;
    struct target tgt;
    char *dir;                  /* removed with what is in it */
    bool ran;                   /* its main loop has run (it runs once) */
    unsigned max_conns;         /* --max-connections; 0: the default */
};

/*
 * g_test_init, with one difference: the daemon logs what it refuses (a
 * warning), which is no failure in a test of refusals; a critical still is.
 */
void target_fixture_test_init(int *argc, char ***argv);
/*
 * Set up and started; with control, its control socket listens at dir/ctl
 * and the default controller's at dir/vs.sock.
 */
void target_fixture_start(struct target_fixture *f, bool control);
/* dir/name (g_free). */
char *target_fixture_path(const struct target_fixture *f, const char *name);
/* A file of size bytes at dir/name; its path (g_free). */
char *target_fixture_file(const struct target_fixture *f, const char *name, size_t size);
/*
 * The main loop until the target is drained, bounded: a test that hangs
 * fails.  drain: on the main thread, in the loop or before it runs;
 * drain_soon: from any thread.
 */
void target_fixture_run(struct target_fixture *f);
void target_fixture_drain(struct target_fixture *f);
void target_fixture_drain_soon(struct target_fixture *f);
/* Drained and run if it was not, then freed. */
void target_fixture_end(struct target_fixture *f);

/*
 * A control client of a new target (control socket and default
 * controller listening, --max-connections max_conns unless 0): script
 * runs on a thread of its own, connected as c->fd, while the target's
 * main loop runs on the test's; then the target is drained and ended.
 */
struct target_client {
    struct target_fixture *f;
    void (*script)(struct target_client *c);
    int fd;
};
void target_client_run(unsigned max_conns, void (*script)(struct target_client *c));
/* method(params: JSON text or NULL) answers a result (json_node_unref; JSON null may be NULL). */
JsonNode *call_ok(struct target_client *c, const char *method, const char *params);
/* method(params) answers error want_code, and its message says words. */
void call_err(struct target_client *c, const char *method, const char *params, int want_code,
              const char *words);

#endif
