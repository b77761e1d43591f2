/*
 * `vhost-scsi-ctl lio COMMAND …` as a command of the lio layer: its words
 * checked (the arity, a WWPN's form, a LUN's range) before the kernel is
 * touched, then run on an open configfs root, with what the command
 * prints returned as text.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_LIO_COMMAND_H
#define VHOST_SCSI_LIO_COMMAND_H

#include <stdbool.h>

#include <glib.h>

#include "lio-configfs.h"

#define LIO_COMMAND_ERROR (lio_command_error_quark())
GQuark lio_command_error_quark(void);

enum lio_command_error {
    LIO_COMMAND_ERROR_USAGE,    /* the words are not a command */
};

enum lio_command_kind {
    LIO_CMD_CREATE, LIO_CMD_DELETE, LIO_CMD_LUN_ADD, LIO_CMD_LUN_REMOVE, LIO_CMD_LIST,
    LIO_CMD_SAVE, LIO_CMD_RESTORE, LIO_CMD_QEMU_ARGS, LIO_CMD_GENERATE_WWPN,
};

/* The strings point into the words; the options are the caller's to set. */
struct lio_command {
    enum lio_command_kind kind;
    const char *wwpn;           /* NULL for create: a new one */
    unsigned lun;
    const char *spec;           /* lun add */
    const char *file;           /* save, restore */

    /* options */
    unsigned tpgt;              /* LIO_DEFAULT_TPGT unless given */
    const char *nexus;
    const char *bus;
    unsigned num_queues;
    bool json, force, partial;
    enum lio_format format;
};

/*
 * The command in words[0..n-1] ("lun", "add", WWPN, LUN, SPEC) into c's
 * first fields; false with a LIO_COMMAND_ERROR_USAGE naming the word at
 * fault.
 */
bool lio_command_parse(const char *const *words, int n, struct lio_command *c, GError **err);

/* Whether c needs a configfs root (all but qemu-args and generate-wwpn). */
bool lio_command_needs_root(const struct lio_command *c);

/*
 * Runs c (lio: NULL when it needs no root); *out (g_free) what it prints.
 * 0, or -errno with *err (VS_ERROR) saying why.
 */
int lio_command_run(struct lio *lio, const struct lio_command *c, char **out, GError **err);

#endif
