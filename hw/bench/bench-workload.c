/*
 * The bench's commands (include/bench/bench-workload.h), encoded here
 * rather than with libiscsi's scsi_cdb_read16/write16, which allocate a
 * task per call: this runs once per I/O and its cost would show in the
 * figures.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdint.h>
#include <string.h>

#include <glib.h>
#include <iscsi/scsi-lowlevel.h>

#include "bench-workload.h"

#define UNMAP_PARAM_LEN 24          /* header and one block descriptor */
#define PR_OUT_PARAM_LEN 24
#define OP_PERSISTENT_RESERVE_OUT 0x5f
#define PR_REGISTER_AND_IGNORE 0x06

static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (56 - 8 * i));
    }
}

static void put_be32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (24 - 8 * i));
    }
}

static void put_be16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

void bench_build_rw(struct vfe_req *req, uint64_t lba, uint32_t blocks, uint32_t block_size,
                    bool write)
{
    memset(req->cdb, 0, sizeof(req->cdb));
    req->cdb[0] = write ? SCSI_OPCODE_WRITE16 : SCSI_OPCODE_READ16;
    put_be64(&req->cdb[2], lba);
    put_be32(&req->cdb[10], blocks);
    req->data_in = !write;
    req->data_len = blocks * block_size;
}

void bench_build_unmap(struct vfe_req *req, uint64_t lba, uint32_t blocks)
{
    uint8_t *p = req->data;

    memset(req->cdb, 0, sizeof(req->cdb));
    req->cdb[0] = SCSI_OPCODE_UNMAP;
    put_be16(&req->cdb[7], UNMAP_PARAM_LEN);
    memset(p, 0, UNMAP_PARAM_LEN);
    put_be16(p, UNMAP_PARAM_LEN - 2);       /* data length: what follows it */
    put_be16(p + 2, 16);                    /* block descriptor data length */
    put_be64(p + 8, lba);
    put_be32(p + 16, blocks);
    req->data_in = false;
    req->data_len = UNMAP_PARAM_LEN;
}

void bench_build_hostile(struct vfe_req *req, unsigned k, uint64_t lun_blocks, uint32_t io_blocks,
                         uint32_t block_size)
{
    uint32_t n = (uint32_t)MIN(lun_blocks, BENCH_HOSTILE_MAX_BLOCKS);

    switch (k) {
    case 0:     /* WRITE SAME(16) of a pattern block */
    case 1:     /* WRITE SAME(16), UNMAP, of zeros (NDOB: no data-out) */
        memset(req->cdb, 0, sizeof(req->cdb));
        req->cdb[0] = SCSI_OPCODE_WRITE_SAME16;
        req->cdb[1] = k == 0 ? 0 : 0x08 | 0x01;
        put_be32(&req->cdb[10], n);
        req->data_in = false;
        req->data_len = k == 0 ? block_size : 0;
        memset(req->data, 0x5a, req->data_len);
        break;
    case 2:
        bench_build_unmap(req, 0, n);
        break;
    default:
        bench_build_rw(req, 0, io_blocks, block_size, k == 4);
        break;
    }
}

void bench_build_aptpl(struct vfe_req *req, uint64_t key)
{
    uint8_t *p = req->data;

    memset(req->cdb, 0, sizeof(req->cdb));
    req->cdb[0] = OP_PERSISTENT_RESERVE_OUT;
    req->cdb[1] = PR_REGISTER_AND_IGNORE;
    put_be32(&req->cdb[5], PR_OUT_PARAM_LEN);
    memset(p, 0, PR_OUT_PARAM_LEN);
    put_be64(p + 8, key);                   /* service action reservation key */
    p[20] = 0x01;                           /* APTPL */
    req->data_in = false;
    req->data_len = PR_OUT_PARAM_LEN;
}

static uint64_t splitmix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void bench_pattern_fill(uint8_t *buf, uint64_t byte_off, uint32_t len)
{
    for (uint32_t i = 0; i + 8 <= len; i += 8) {
        uint64_t w = splitmix(byte_off + i);

        memcpy(buf + i, &w, 8);
    }
}

uint64_t bench_pattern_check(const uint8_t *buf, uint64_t byte_off, uint32_t len)
{
    for (uint32_t i = 0; i + 8 <= len; i += 8) {
        uint64_t w = splitmix(byte_off + i), got;

        memcpy(&got, buf + i, 8);
        if (got != w) {
            return byte_off + i + 1;
        }
    }
    return 0;
}
