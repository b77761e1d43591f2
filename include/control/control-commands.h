/*
 * vhost-scsi-ctl's `target` command (tools/ctl-target.c).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_TOOLS_CTL_TARGET_H
#define VHOST_SCSI_TOOLS_CTL_TARGET_H

/* argv[0] is "target"; returns the exit status. */
int ctl_target_main(int argc, char **argv);

#endif
