/*
 * The command families of the SCSI disk emulation, as the dispatch
 * (scsi-disk.c) sees them: one entry point per command.  Included by the dispatch and by each family
 * to define its own entry points; a family never calls another's.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_SCSI_DISK_OPS_H
#define VHOST_SCSI_SCSI_DISK_OPS_H

#include "scsi-disk-int.h"

/* scsi-disk-rw.c */
sd_exec_fn sd_exec_read, sd_exec_write, sd_exec_write_verify, sd_exec_verify,
           sd_exec_sync_cache, sd_exec_start_stop;
/* scsi-disk-caw.c */
sd_exec_fn sd_exec_compare_and_write, sd_exec_orwrite, sd_exec_write_atomic;
/* scsi-disk-medium.c */
sd_exec_fn sd_exec_pre_fetch, sd_exec_get_lba_status, sd_exec_read_defect_data;
/* scsi-disk-provisioning.c */
sd_exec_fn sd_exec_write_same, sd_exec_unmap;
/* scsi-disk-sanitize.c */
sd_exec_fn sd_exec_sanitize;
/* scsi-disk-inquiry.c */
sd_exec_fn sd_exec_inquiry, sd_exec_read_capacity_10, sd_exec_read_capacity_16,
           sd_exec_request_sense;
/* scsi-disk-pr.c */
sd_exec_fn sd_exec_pr_in, sd_exec_pr_out, sd_exec_reserve_release;
/* scsi-disk-xcopy.c */
sd_exec_fn sd_exec_extended_copy, sd_exec_receive_copy_results;
/* Frees the held copy results of a LUN being freed (its life cycle, scsi-disk.c). */
void sd_xcopy_free(struct scsi_lun *lun);
/* scsi-disk-mode.c */
sd_exec_fn sd_exec_mode_sense, sd_exec_mode_select;

#endif
