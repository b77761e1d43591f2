/*
 * The LUN's setup commands (include/bench/bench-lun.h), built and
 * decoded with libiscsi's scsi-lowlevel: they run once, so its allocation
 * per command costs nothing measured.  A refusal names the LUN and the
 * answer in words (bench-response.h): a LUN that is not there reads
 * "LUN 0:3: bad target (VIRTIO_SCSI_S_BAD_TARGET)".
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <iscsi/scsi-lowlevel.h>

#include "bench-lun.h"
#include "bench-options.h"
#include "bench-response.h"

#define EXEC_TIMEOUT_MS 10000
#define TUR_TRIES 9

/*
 * The CDB of task (a libiscsi scsi_cdb_* result, NULL if it could not
 * allocate), data in to buf; retried after a unit attention.
 */
static int exec_cmd(struct bench_lun *l, const struct scsi_task *task, void *buf, uint32_t len,
                    struct virtio_scsi_cmd_resp *resp)
{
    struct vfe_req req = { .queue = 0, .data = buf, .data_len = len, .data_in = true };

    if (!task) {
        return -ENOMEM;
    }
    memcpy(req.lun, l->addr, 8);
    memcpy(req.cdb, task->cdb, (size_t)task->cdb_size);
    for (unsigned i = 0;; i++) {
        int r;

        req.tag = ++*l->tag;
        r = vfe_exec(l->fe, &req, EXEC_TIMEOUT_MS);
        if (r < 0) {
            return r;
        }
        if (!bench_is_unit_attention(&req.resp) || i == BENCH_UA_RETRIES) {
            break;
        }
    }
    *resp = req.resp;
    return 0;
}

/* len bytes of data in for task, decoded by libiscsi (valid until the task is freed); NULL if it cannot. */
static void *decode_datain(struct scsi_task *task, const void *buf, size_t len)
{
    uint8_t *copy = malloc(len);   /* scsi_free_scsi_task frees it */

    if (!copy) {
        return NULL;
    }
    memcpy(copy, buf, len);
    task->datain.data = copy;
    task->datain.size = (int)len;
    return scsi_datain_unmarshall(task);
}

static bool fail(GError **err, struct bench_lun *l, const char *what, int r,
                 const struct virtio_scsi_cmd_resp *rs)
{
    g_autofree char *words = r < 0 ? g_strdup(g_strerror(-r)) : bench_response_describe(rs);

    g_set_error(err, BENCH_ERROR, BENCH_ERROR_FAILED, "LUN %u:%u: %s: %s", l->target, l->lun,
                what, words ? words : "no data");
    return false;
}

static bool wait_ready(struct bench_lun *l, GError **err)
{
    struct scsi_task *tur = scsi_cdb_testunitready();
    struct virtio_scsi_cmd_resp rs = { 0 };
    bool ok = false;

    /* the power-on UNIT ATTENTION (and any others pending) is consumed here */
    for (int i = 0; i < TUR_TRIES; i++) {
        int r = exec_cmd(l, tur, NULL, 0, &rs);

        if (r < 0) {
            fail(err, l, "TEST UNIT READY", r, &rs);
            break;
        }
        if (rs.response != VIRTIO_SCSI_S_OK) {
            g_autofree char *words = bench_response_describe(&rs);

            g_set_error(err, BENCH_ERROR, BENCH_ERROR_FAILED, "LUN %u:%u: %s", l->target, l->lun,
                        words);
            break;
        }
        if (rs.status == 0) {
            ok = true;
            break;
        }
        if (i == TUR_TRIES - 1) {
            fail(err, l, "not ready", 0, &rs);
        }
    }
    if (tur) {
        scsi_free_scsi_task(tur);
    }
    return ok;
}

static bool read_capacity(struct bench_lun *l, void *buf, GError **err)
{
    struct virtio_scsi_cmd_resp rs = { 0 };
    struct scsi_task *rc = scsi_cdb_readcapacity16();   /* allocation length 32 */
    struct scsi_readcapacity16 *rc16;
    struct scsi_readcapacity10 *rc10;
    int r = exec_cmd(l, rc, buf, 32, &rs);
    bool ok = true;

    if (r == 0 && rs.response == VIRTIO_SCSI_S_OK && rs.status == 0 &&
        (rc16 = decode_datain(rc, buf, 32))) {
        l->num_blocks = rc16->returned_lba + 1;
        l->block_size = rc16->block_length;
    } else {
        if (rc) {
            scsi_free_scsi_task(rc);
        }
        rc = scsi_cdb_readcapacity10(0, 0);
        r = exec_cmd(l, rc, buf, 8, &rs);
        if (r == 0 && rs.response == VIRTIO_SCSI_S_OK && rs.status == 0 &&
            (rc10 = decode_datain(rc, buf, 8))) {
            l->num_blocks = (uint64_t)rc10->lba + 1;
            l->block_size = rc10->block_size;
        } else {
            ok = fail(err, l, "READ CAPACITY failed", r, &rs);
        }
    }
    if (rc) {
        scsi_free_scsi_task(rc);
    }
    return ok;
}

bool bench_lun_prepare(struct bench_lun *l, GError **err)
{
    uint8_t *buf = vfe_alloc(l->fe, 512, 64);
    bool ok;

    if (!buf) {
        g_set_error(err, BENCH_ERROR, BENCH_ERROR_FAILED, "out of front-end memory");
        return false;
    }
    ok = wait_ready(l, err) && read_capacity(l, buf, err);
    vfe_free(l->fe, buf);
    return ok;
}

/*
 * A back-end whose cache holds writes through until the first flush
 * (librbd's default rbd_cache_writethrough_until_flush, the safety net for
 * guests that never flush) is so measured in the mode a flushing guest
 * runs it in.
 */
bool bench_lun_flush(struct bench_lun *l, GError **err)
{
    struct virtio_scsi_cmd_resp rs = { 0 };
    struct scsi_task *t = scsi_cdb_synchronizecache10(0, 0, 0, 0);
    int r = t ? exec_cmd(l, t, NULL, 0, &rs) : -ENOMEM;

    if (t) {
        scsi_free_scsi_task(t);
    }
    if (r < 0 || rs.response != VIRTIO_SCSI_S_OK || rs.status != 0) {
        return fail(err, l, "SYNCHRONIZE CACHE failed", r, &rs);
    }
    return true;
}
