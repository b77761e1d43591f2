/*
 * The bench's setup of the LUN it measures, before any I/O: TEST UNIT
 * READY until the unit attentions a new nexus is owed are consumed, READ
 * CAPACITY for its size, and (--flush-first) one SYNCHRONIZE CACHE.  Each
 * command is synchronous and retried after a unit attention, as an
 * initiator does (SAM-5 5.14).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_BENCH_LUN_H
#define VHOST_SCSI_BENCH_LUN_H

#include <stdint.h>

#include <glib.h>

#include "vhost-frontend.h"

/* Commands an answer of UNIT ATTENTION makes the bench send again, at most this many times. */
#define BENCH_UA_RETRIES 8

struct bench_lun {
    struct vfe *fe;             /* not owned */
    unsigned target, lun;       /* for messages */
    uint8_t addr[8];            /* virtio-scsi's LUN address */
    uint64_t *tag;              /* the run's tag counter, not owned */
    /* filled by bench_lun_prepare() */
    uint32_t block_size;
    uint64_t num_blocks;
};

/* Waits for the LUN to be ready and reads its capacity; false with a BENCH_ERROR naming what failed. */
bool bench_lun_prepare(struct bench_lun *l, GError **err);

/* One SYNCHRONIZE CACHE (10) of the whole LUN. */
bool bench_lun_flush(struct bench_lun *l, GError **err);

#endif
