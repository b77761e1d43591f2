/*
 * The harness the unit tests of the lio layer share (lio-fixture.c,
 * compiled into each of them with the fake of the filesystem and kernel
 * operations, lio-fs-fake.c).  Each case gets a scratch directory whose
 * configfs/ is the fake configfs root, opened as vhost-scsi-ctl opens the
 * host's, kernel set-up included, so the library runs its own code on
 * it.  A case states its expectations as the tree and attribute files it
 * finds there; a snapshot of the whole scratch directory says that a
 * refused or failed operation left nothing behind; a refusal is checked as
 * the GError it returns (the library logs no warning, and a warning fails
 * the case); the failure driver makes each change of an operation fail in
 * turn, for the rollback cases; and the cases about what users see run
 * vhost-scsi-ctl on the fake root.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_LIO_FIXTURE_H
#define VHOST_SCSI_LIO_FIXTURE_H

#include <stdbool.h>

#include <glib.h>

#include "lio-configfs.h"
#include "lio-fs-fake.h"

#define WWPN "naa.5001405aaaaaaaaa"
#define WWPN2 "naa.5001405bbbbbbbbb"
/* The backstore lio_lun_add makes for WWPN tpgt 1 LUN 0. */
#define BS0 "vs-naa_5001405aaaaaaaaa-t1-l0"

struct fx {
    char *dir;                 /* scratch: root/ is the fake configfs */
    char *root;
    struct lio_fake *fake;
    struct lio *lio;
};

/* The fixture of g_test_add: a fresh scratch directory and an open root. */
void fx_setup(struct fx *f, gconstpointer data);
void fx_teardown(struct fx *f, gconstpointer data);
#define ADD(name, fn) g_test_add(name, struct fx, NULL, fx_setup, fn, fx_teardown)

/* rel below the fake configfs root, and name in the scratch directory. */
char *cf(struct fx *f, const char *rel);
char *scratch(struct fx *f, const char *name);
/* A file's contents; the case fails when it cannot be read. */
char *slurp(const char *path);
/* An attribute below the root, or NULL when there is none. */
char *attr(struct fx *f, const char *rel);
/* Whether rel exists below the root (a dangling link counts). */
bool exists(struct fx *f, const char *rel);
unsigned count_entries(struct fx *f, const char *rel);

/*
 * *err is a VS_ERROR of code (a positive errno) whose message matches
 * pattern (g_pattern_match_simple: '*' and '?'); it is freed and cleared.
 */
void assert_error(GError **err, int code, const char *pattern);

/* LUN lun of wwpn tpgt 1 on a scratch file name of size (a spec's size=). */
void add_file_lun(struct fx *f, const char *wwpn, unsigned lun, const char *name,
                  const char *size);
/* A scratch path the fake presents as a 64 MiB block device. */
char *fake_blockdev(struct fx *f, const char *name);

/* What lio_save writes to scratch name in format. */
char *save_text(struct fx *f, const char *name, enum lio_format format);

/* The whole scratch directory as text (equal snapshots: nothing changed). */
char *snapshot(struct fx *f);

/* Messages (g_message: what does not fail a call) gathered in msgs. */
struct collected {
    GPtrArray *msgs;
    guint handler;
};
void collect_begin(struct collected *c);
void collect_end(struct collected *c);

/*
 * The failure driver: fn is run with its first change failing, then its
 * second, and so on until it succeeds.  Each failed run must return -EIO
 * with a VS_ERROR EIO naming one of names, log nothing, and leave the
 * scratch directory as it was.  Returns the number of changes the
 * successful run made.
 */
typedef int (*step_fn)(struct fx *f, gconstpointer arg, GError **err);
unsigned fail_each_step(struct fx *f, step_fn fn, gconstpointer arg,
                        const char *const *names);

/*
 * Whether meson gave the path of the vhost-scsi-ctl it built
 * (VHOST_SCSI_CTL); when not, the case is marked skipped.
 */
bool ctl_available(void);
/*
 * Runs "vhost-scsi-ctl lio --configfs ROOT arg..." on the fake root and
 * returns its exit status, its output in *out and *err.
 */
int run_ctl(struct fx *f, char **out, char **err, const char *arg, ...) G_GNUC_NULL_TERMINATED;

#endif
