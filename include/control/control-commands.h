/*
 * The words of `vhost-scsi-ctl target COMMAND …` as a JSON-RPC request to
 * vhost-scsi-target's control socket (docs/control.md): one command, one
 * method.  A command line that names no method, or gives a value the
 * method would refuse by its shape (a LUN out of range, a size that is
 * not one), is refused here, in the words the user sees, before anything
 * is sent.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_CONTROL_COMMANDS_H
#define VHOST_SCSI_CONTROL_COMMANDS_H

#include <stdbool.h>

#include <glib.h>
#include <json-glib/json-glib.h>

#define CTL_COMMAND_ERROR (ctl_command_error_quark())
GQuark ctl_command_error_quark(void);

enum ctl_command_error {
    CTL_COMMAND_ERROR_USAGE,    /* the words are not a command */
};

struct ctl_request {
    const char *method;         /* static */
    JsonNode *params;           /* an object, owned; NULL: none */
    const char *what;           /* static: the word an answer is printed after ("added"), or "" */
};

/*
 * argv[0..argc-1]: the command and its words ("lun", "add", "1=ram:1G").
 * controller: the controller lun-* methods act on (NULL: the daemon's
 * default).  false with a CTL_COMMAND_ERROR_USAGE if they are not a command.
 */
bool ctl_command_parse(int argc, char **argv, const char *controller, struct ctl_request *req,
                       GError **err);

void ctl_request_clear(struct ctl_request *req);

#endif
