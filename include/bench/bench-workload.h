/*
 * The commands the bench sends, built into a front-end request
 * (vhost-frontend.h's struct vfe_req, whose data buffer the caller
 * provides): READ(16)/WRITE(16), the hostile neighbour's WRITE SAME and
 * UNMAP, PERSISTENT RESERVE OUT with APTPL, and the --verify pattern,
 * a function of the byte address only so that the order of completions
 * does not matter.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_BENCH_WORKLOAD_H
#define VHOST_SCSI_BENCH_WORKLOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "vhost-frontend.h"

/* What one hostile WRITE SAME or UNMAP covers at most: the daemon's limit for one command. */
#define BENCH_HOSTILE_MAX_BLOCKS 0x100000u
/* The hostile commands, taken in turn. */
#define BENCH_HOSTILE_KINDS 5

/* READ(16) or WRITE(16) of blocks blocks at lba. */
void bench_build_rw(struct vfe_req *req, uint64_t lba, uint32_t blocks, uint32_t block_size,
                    bool write);

/*
 * Hostile command k (k < BENCH_HOSTILE_KINDS) from LBA 0 of a LUN of
 * lun_blocks blocks: WRITE SAME(16) of a pattern block, WRITE SAME(16)
 * UNMAP of zeros, UNMAP, READ(16) and WRITE(16) of io_blocks.  The data
 * buffer must hold a block or 24 bytes, whichever is more.
 */
void bench_build_hostile(struct vfe_req *req, unsigned k, uint64_t lun_blocks, uint32_t io_blocks,
                         uint32_t block_size);

/* PERSISTENT RESERVE OUT, REGISTER AND IGNORE EXISTING KEY to key, APTPL on. */
void bench_build_aptpl(struct vfe_req *req, uint64_t key);

/* UNMAP of one descriptor: blocks at lba. */
void bench_build_unmap(struct vfe_req *req, uint64_t lba, uint32_t blocks);

/* Fills buf with the verify pattern of the len bytes at byte_off of the LUN. */
void bench_pattern_fill(uint8_t *buf, uint64_t byte_off, uint32_t len);

/* 0 if buf holds the pattern of byte_off; else 1 + the LUN byte address of the first difference. */
uint64_t bench_pattern_check(const uint8_t *buf, uint64_t byte_off, uint32_t len);

#endif
