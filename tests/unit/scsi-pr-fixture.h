/*
 * What the persistent-reservation tests share (scsi-pr-fixture.c,
 * compiled into each of them): three I_T nexuses A, B (iSCSI names, one
 * target port) and C (a SAS name, another port) and an observer D, a command run on a LUN
 * as one of them, PERSISTENT RESERVE IN/OUT with a hand-built CDB and
 * parameter list (libiscsi builds PR OUT only with its own parameter
 * structure, which cannot carry the flags and lengths these tests vary),
 * and big-endian field access.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_SCSI_PR_FIXTURE_H
#define VHOST_SCSI_SCSI_PR_FIXTURE_H

#include <stdint.h>

#include "scsi-disk.h"
#include "scsi-disk-fixture.h"

extern const struct scsi_it_id PR_A, PR_B, PR_C;
/* A nexus that never registers: it reads the state without being owed unit attentions. */
extern const struct scsi_it_id PR_D;

#define GOOD SAM_STAT_GOOD
#define CONFLICT SAM_STAT_RESERVATION_CONFLICT

/* One command from it, which must complete inline, once. */
struct result run_as(struct scsi_lun *lun, const struct scsi_it_id *it, const uint8_t *cdb,
                     unsigned len, const void *out, size_t out_len, void *in, size_t in_len);

void put64(uint8_t *p, uint64_t v);
uint64_t get64(const uint8_t *p);
uint32_t get32(const uint8_t *p);

/* PERSISTENT RESERVE OUT sa with type, keys and flags (byte 20). */
struct result pr_out_flags(struct scsi_lun *lun, const struct scsi_it_id *it, uint8_t sa,
                           uint8_t type, uint64_t key, uint64_t sa_key, uint8_t flags);

/* pr_out_flags() without flags: its status. */
uint8_t pr_out(struct scsi_lun *lun, const struct scsi_it_id *it, uint8_t sa, uint8_t type,
               uint64_t key, uint64_t sa_key);

/* PERSISTENT RESERVE IN sa into buf (prefilled with EEh), len the allocation length. */
struct result pr_in(struct scsi_lun *lun, const struct scsi_it_id *it, uint8_t sa,
                    uint8_t *buf, uint16_t len);

/* READ(10) / WRITE(10) of block 0, TEST UNIT READY: the status. */
uint8_t read10(struct scsi_lun *lun, const struct scsi_it_id *it);
uint8_t write10(struct scsi_lun *lun, const struct scsi_it_id *it);
uint8_t tur(struct scsi_lun *lun, const struct scsi_it_id *it);

/* INVALID FIELD IN PARAMETER LIST pointing at byte (and bit, -1: none) of the list. */
void assert_param_field(const struct result *r, unsigned byte, int bit);

/* TEST UNIT READY as it: GOOD, or the unit attention it is owed (code ASC << 8 | ASCQ). */
void assert_owed(struct scsi_lun *lun, const struct scsi_it_id *it, unsigned code);

#endif
