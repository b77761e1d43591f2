/*
 * Acknowledgement order: every write the target acknowledged is in the
 * backing file when the daemon is killed with SIGKILL right after, under
 * three contracts:
 *  - write cache enabled (the default): every write acknowledged before a
 *    successful SYNCHRONIZE CACHE;
 *  - FUA writes: each one as soon as it is acknowledged;
 *  - write cache disabled with MODE SELECT (WCE=0): every acknowledged
 *    write, no flush needed.
 * The LUN is a file without `direct`, and SIGKILL leaves the kernel's page
 * cache intact, so this proves that the target acknowledges a write only
 * after it reached the file (the order), not that it reached stable
 * storage: durability against power loss needs a test that loses the page
 * cache too, which this one does not attempt.
 * Each test writes many 4 KiB blocks with a unique pattern, with the ring
 * full of requests in flight on two queues, kills the daemon, then reads
 * the file directly.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "proto-util.h"
#include "scsi-cmd.h"

#define FILE_BYTES (8u << 20)
#define BLOCK 4096u
#define NWRITES 512u

enum mode { FLUSH_AFTER, FUA, WCE_OFF };

struct wr {
    struct vfe_req req;
    uint64_t lba;
    bool done;
};

static void wr_done(struct vfe_req *r)
{
    ((struct wr *)r->opaque)->done = true;
}

static void fill(uint8_t *buf, uint64_t lba, unsigned seed)
{
    for (unsigned i = 0; i < BLOCK; i++) {
        buf[i] = (uint8_t)((lba * 131 + i * 7 + seed) ^ (i >> 8));
    }
}

static void set_wce(struct vfe *fe, bool on)
{
    uint8_t sense_cdb[SC_CDB_MAX], select_cdb[SC_CDB_MAX];
    /* libiscsi's MODE SENSE(10) takes an 8-bit allocation length. */
    unsigned sense_len = sc_cdb(scsi_cdb_modesense10(0, 1, SCSI_MODESENSE_PC_CURRENT,
                                                     SCSI_MODEPAGE_CACHING, 0, 255),
                                sense_cdb);
    unsigned select_len;
    uint8_t *buf = vfe_alloc(fe, 256, 64);
    struct vfe_req r;
    unsigned bdl, page_len;

    pu_cmd(fe, 0, sense_cdb, sense_len, buf, 255, true, &r);
    g_assert_cmpuint(r.resp.status, ==, 0);
    bdl = (unsigned)pu_get_be(buf + 6, 2);
    uint8_t *page = buf + 8 + bdl;
    g_assert_cmpuint(page[0] & 0x3f, ==, SCSI_MODEPAGE_CACHING);
    page_len = page[1] + 2u;
    /* Parameter list: an 8-byte header with no block descriptors, then the page. */
    memmove(buf + 8, page, page_len);
    memset(buf, 0, 8);
    buf[8] &= 0x3f;   /* PS bit is reserved in MODE SELECT */
    buf[8 + 2] = (uint8_t)((buf[8 + 2] & ~0x04) | (on ? 0x04 : 0));
    select_len = sc_cdb(scsi_cdb_modeselect10(1, 0, (int)(8 + page_len)), select_cdb);
    pu_cmd(fe, 0, select_cdb, select_len, buf, 8 + page_len, false, &r);
    g_assert_cmpuint(r.resp.status, ==, 0);

    /* Read it back: the change took. */
    pu_cmd(fe, 0, sense_cdb, sense_len, buf, 255, true, &r);
    g_assert_cmpuint(r.resp.status, ==, 0);
    bdl = (unsigned)pu_get_be(buf + 6, 2);
    g_assert_cmpuint(!!(buf[8 + bdl + 2] & 0x04), ==, on);
    vfe_free(fe, buf);
}

static void run(enum mode mode)
{
    struct pu_daemon d;
    char *file, *lun;
    struct vfe *fe;
    struct wr *w = g_new0(struct wr, NWRITES);
    uint8_t *bufs;
    unsigned seed = g_test_rand_int();
    unsigned submitted = 0, completed = 0;
    int fd;

    pu_daemon_init(&d);
    file = g_build_filename(d.dir, "disk.img", NULL);
    fd = open(file, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, FILE_BYTES), ==, 0);
    lun = g_strdup_printf("0=file:%s", file);
    const char *args[] = { "--lun", lun, "--queues", "2", NULL };
    pu_daemon_start(&d, args);
    fe = pu_connect(&d, 2);
    pu_make_ready(fe, 0);
    if (mode == WCE_OFF) {
        set_wce(fe, false);
    }

    bufs = vfe_alloc(fe, (size_t)NWRITES * BLOCK, 4096);
    g_assert_nonnull(bufs);
    /* Distinct LBAs in a shuffled order, so writes land all over the file. */
    for (unsigned i = 0; i < NWRITES; i++) {
        w[i].lba = (uint64_t)i * (FILE_BYTES / 512 / NWRITES);
    }
    for (unsigned i = NWRITES - 1; i > 0; i--) {
        unsigned j = (unsigned)g_test_rand_int_range(0, (gint32)i + 1);
        uint64_t t = w[i].lba;

        w[i].lba = w[j].lba;
        w[j].lba = t;
    }
    while (completed < NWRITES) {
        while (submitted < NWRITES) {
            struct wr *x = &w[submitted];
            struct vfe_req *r = &x->req;

            memset(r, 0, sizeof(*r));
            r->queue = submitted % 2;
            vfe_lun(r->lun, 0, 0);
            sc_cdb(scsi_cdb_write10((uint32_t)x->lba, BLOCK, 512, 0, 0, mode == FUA, 0, 0),
                   r->cdb);
            r->data = bufs + (size_t)submitted * BLOCK;
            r->data_len = BLOCK;
            fill(r->data, x->lba, seed);
            r->complete = wr_done;
            r->opaque = x;
            if (vfe_submit(fe, r) == -EAGAIN) {
                break;
            }
            submitted++;
        }
        vfe_kick(fe);
        int n = vfe_poll(fe, PU_TIMEOUT_MS);
        g_assert_cmpint(n, >, 0);
        completed = 0;
        for (unsigned i = 0; i < submitted; i++) {
            completed += w[i].done;
        }
    }
    for (unsigned i = 0; i < NWRITES; i++) {
        g_assert_cmpuint(w[i].req.resp.response, ==, 0);
        g_assert_cmpuint(w[i].req.resp.status, ==, 0);
    }
    if (mode == FLUSH_AFTER) {
        uint8_t sync_cdb[SC_CDB_MAX];
        unsigned sync_len = sc_cdb(scsi_cdb_synchronizecache10(0, 0, 0, 0), sync_cdb);
        struct vfe_req r;

        pu_cmd(fe, 0, sync_cdb, sync_len, NULL, 0, false, &r);
        g_assert_cmpuint(r.resp.status, ==, 0);
    }

    /* The daemon dies without any chance to clean up. */
    g_assert_true(pu_daemon_alive(&d));
    pu_daemon_stop(&d, true);
    /* Closing talks to a dead peer: its warnings are expected here. */
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    vfe_close(fe);
    g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_WARNING | G_LOG_LEVEL_CRITICAL);

    for (unsigned i = 0; i < NWRITES; i++) {
        uint8_t expect[BLOCK], got[BLOCK];

        fill(expect, w[i].lba, seed);
        g_assert_cmpint(pread(fd, got, BLOCK, (off_t)(w[i].lba * 512)), ==, BLOCK);
        if (memcmp(expect, got, BLOCK) != 0) {
            g_error("acknowledged write to LBA %" G_GUINT64_FORMAT " is not in the file",
                    w[i].lba);
        }
    }
    close(fd);
    g_free(w);
    g_free(lun);
    g_free(file);
    pu_daemon_cleanup(&d);
}

static void test_flushed_writes_in_file_after_kill(void)
{
    run(FLUSH_AFTER);
}

static void test_fua_writes_in_file_after_kill(void)
{
    run(FUA);
}

static void test_write_cache_off_writes_in_file_after_kill(void)
{
    run(WCE_OFF);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/ack-order/flushed-writes-in-file-after-kill9",
                    test_flushed_writes_in_file_after_kill);
    g_test_add_func("/ack-order/fua-writes-in-file-after-kill9",
                    test_fua_writes_in_file_after_kill);
    g_test_add_func("/ack-order/write-cache-off-writes-in-file-after-kill9",
                    test_write_cache_off_writes_in_file_after_kill);
    return g_test_run();
}
