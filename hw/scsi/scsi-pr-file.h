/*
 * The state file of a LUN's persistent reservations while "activate
 * persist through power loss" (APTPL) is on: the registrations, the
 * reservation and PRgeneration as a GLib key file naming the LUN it
 * belongs to, written atomically (a temporary file, fsync, rename, fsync
 * of the directory) and read back, checked field by field, at start-up.
 * Plain data in and out: scsi-pr.c decides when.  Internal to hw/scsi/.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_SCSI_PR_FILE_H
#define VHOST_SCSI_SCSI_PR_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The version this daemon writes, and the only one it reads. */
#define PR_FILE_FORMAT 1

struct pr_file_reg {
    char *initiator;
    char *target;
    uint16_t rtpi;
    uint64_t key;
};

struct pr_file_state {
    uint64_t naa;              /* the LUN's NAA designator: a file of another LUN is foreign */
    uint32_t generation;
    uint8_t type;              /* 0: no reservation */
    int holder;                /* index into regs; -1 (all-registrants types, none) */
    unsigned nregs;
    struct pr_file_reg *regs;  /* owned */
};

void pr_file_state_clear(struct pr_file_state *s);

/* The file's text for s (g_free it). */
char *pr_file_format(const struct pr_file_state *s, size_t *len);

/*
 * Parses text into *s (cleared first), which must name LUN naa and hold at
 * most max_regs registrations: 0, or -EINVAL with *why (g_free it) saying
 * what is wrong.
 */
int pr_file_parse(const char *text, size_t len, uint64_t naa, unsigned max_regs,
                  struct pr_file_state *s, char **why);

/*
 * Replaces path with data atomically and durably: a reader (and a
 * restart after a crash) sees the old file or the new one, never a part.
 * 0, or -errno with *why.
 */
int pr_file_write(const char *path, const char *data, size_t len, char **why);

/* Removes path (gone already is fine), durably. 0, or -errno with *why. */
int pr_file_remove(const char *path, char **why);

#endif
