/*
 * EXTENDED COPY through the real daemon (hw/scsi/scsi-disk-xcopy.c): a
 * front-end names copy targets by the NAA designators the LUNs' VPD page
 * 83h gave it, and the daemon moves the data itself, on its I/O threads,
 * between a ram LUN, a file LUN of 4096-byte blocks (io_uring, completing
 * later, so the copy's chunks really wait for the backend) and a ram LUN
 * on another virtio target (port); the data is read back through the
 * front-end and, for the file, from the image itself, and RECEIVE COPY
 * RESULTS reports the copy.  A LUN of another controller (another VM's
 * disk) is not a copy target a front-end of the default controller can
 * name: COPY ABORTED, COPY TARGET DEVICE NOT REACHABLE, naming the segment
 * and pointing at its CSCD descriptor.  A copy from a null LUN with
 * fill=none (its READs write nothing) delivers zeros, not bytes of the
 * daemon's heap, another tenant's data among them.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "control-client.h"
#include "proto-util.h"
#include "scsi-cmd.h"

#define MB (1u << 20)
#define COPY (4 * MB)          /* four of the daemon's 1 MiB copy chunks */
#define VM2_CHUNK (16u << 10)  /* a copy's chunk between ram LUNs (their inline piece) */

struct daemon {
    struct pu_daemon d;
    char *img, *ctl, *sock2;
};

static void start(struct daemon *t)
{
    g_autofree char *lun1 = NULL;
    int fd;

    pu_daemon_init(&t->d);
    t->img = g_build_filename(t->d.dir, "xcopy.img", NULL);
    t->ctl = g_build_filename(t->d.dir, "control.sock", NULL);
    t->sock2 = g_build_filename(t->d.dir, "vm2.sock", NULL);
    fd = open(t->img, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, 16 * MB), ==, 0);
    close(fd);
    lun1 = g_strdup_printf("1=file:%s,block-size=4096", t->img);
    {
        const char *args[] = { "--lun", "0=ram:16M", "--lun", lun1, "--lun", "1:0=ram:16M",
                               "--queues", "2", "--threads", "2", "--control", t->ctl, NULL };

        pu_daemon_start(&t->d, args);
    }
}

static void stop(struct daemon *t)
{
    g_assert_cmpint(pu_daemon_stop(&t->d, false), ==, 0);
    pu_daemon_cleanup(&t->d);
    g_free(t->img);
    g_free(t->ctl);
    g_free(t->sock2);
}

/* Runs the CDB libiscsi built in task on (target, lun); the transport must take it. */
static struct vfe_req run(struct vfe *fe, unsigned target, unsigned lun, struct scsi_task *task,
                          void *buf, uint32_t len, bool data_in)
{
    uint8_t cdb[SC_CDB_MAX];
    unsigned n = sc_cdb(task, cdb);

    return pu_run(fe, target, lun, cdb, n, buf, len, data_in);
}

static void ready(struct vfe *fe, unsigned target, unsigned lun)
{
    for (int i = 0; i < 4; i++) {
        struct vfe_req r = pu_tur(fe, target, lun);

        if (r.resp.status == 0) {
            return;
        }
        g_assert_cmpuint(pu_sense_of(&r.resp).key, ==, SCSI_SENSE_UNIT_ATTENTION);
    }
    g_assert_not_reached();
}

/* The NAA designator of (target, lun)'s VPD page 83h. */
static uint64_t naa_of(struct vfe *fe, unsigned target, unsigned lun)
{
    uint8_t *b = vfe_alloc(fe, 64, 64);
    struct vfe_req r = run(fe, target, lun, scsi_cdb_inquiry(1, 0x83, 64), b, 64, true);

    g_assert_cmpuint(r.resp.status, ==, 0);
    g_assert_cmphex(b[5] & 0x3f, ==, 0x03);   /* the LU's NAA designator */
    g_assert_cmpuint(b[7], ==, 8);
    return pu_get_be(b + 8, 8);
}

/* An identification CSCD descriptor at d for naa, blocks of bs bytes. */
static void put_cscd(uint8_t *d, uint64_t naa, uint32_t bs)
{
    memset(d, 0, 32);
    d[0] = IDENT_DESCR_TGT_DESCR;
    d[4] = 0x01;
    d[5] = 0x03;
    d[7] = 8;
    pu_put_be(d + 8, naa, 8);
    pu_put_be(d + 29, bs, 3);
}

/* A block-to-block segment descriptor at d. */
static void put_seg(uint8_t *d, uint16_t src, uint16_t dst, bool dc, uint16_t n, uint64_t slba,
                    uint64_t dlba)
{
    memset(d, 0, 28);
    d[0] = BLK_TO_BLK_SEG_DESCR;
    d[1] = dc ? 0x02 : 0;
    pu_put_be(d + 2, 0x18, 2);
    pu_put_be(d + 4, src, 2);
    pu_put_be(d + 6, dst, 2);
    pu_put_be(d + 10, n, 2);
    pu_put_be(d + 12, slba, 8);
    pu_put_be(d + 20, dlba, 8);
}

/* A header at p for ncscd CSCD and nseg segment descriptors; the list's length. */
static uint32_t put_header(uint8_t *p, uint8_t list_id, unsigned ncscd, unsigned nseg)
{
    memset(p, 0, 16);
    p[0] = list_id;
    pu_put_be(p + 2, 32 * ncscd, 2);
    pu_put_be(p + 8, 28 * nseg, 4);
    return 16 + 32 * ncscd + 28 * nseg;
}

static void write_lun(struct vfe *fe, unsigned target, unsigned lun, uint32_t bs, uint8_t *buf,
                      uint32_t len)
{
    struct vfe_req r = run(fe, target, lun, scsi_cdb_write16(0, len, (int)bs, 0, 0, 0, 0, 0), buf,
                           len, false);

    g_assert_cmpuint(r.resp.status, ==, 0);
}

static void read_lun(struct vfe *fe, unsigned target, unsigned lun, uint32_t bs, uint64_t lba,
                     uint8_t *buf, uint32_t len)
{
    struct vfe_req r = run(fe, target, lun,
                           scsi_cdb_read16(lba, len, (int)bs, 0, 0, 0, 0, 0), buf, len, true);

    g_assert_cmpuint(r.resp.status, ==, 0);
}

/*
 * Sent to the ram LUN 0:0: ram 0:0 to the file LUN 0:1 (counted in the
 * ram's 512-byte blocks) and the file to the ram LUN of target 1 (DC:
 * counted in its 512-byte blocks), in one command.
 */
static void test_copy_between_luns(void)
{
    struct daemon t;
    struct vfe *fe;
    uint8_t *data, *got, *plist, *st;
    g_autofree uint8_t *img = g_malloc(COPY);
    uint32_t len;
    struct vfe_req r;
    int fd;

    start(&t);
    fe = pu_connect(&t.d, 2);
    ready(fe, 0, 0);
    ready(fe, 0, 1);
    ready(fe, 1, 0);
    data = vfe_alloc(fe, COPY, 4096);
    got = vfe_alloc(fe, COPY, 4096);
    plist = vfe_alloc(fe, 4096, 64);
    st = vfe_alloc(fe, 64, 64);
    pu_pattern_fill(data, COPY, 21, 0);
    write_lun(fe, 0, 0, 512, data, COPY);

    len = put_header(plist, 9, 3, 2);
    put_cscd(plist + 16, naa_of(fe, 0, 0), 512);
    put_cscd(plist + 48, naa_of(fe, 0, 1), 4096);
    put_cscd(plist + 80, naa_of(fe, 1, 0), 512);
    put_seg(plist + 112, 0, 1, false, COPY / 512, 0, 16);
    put_seg(plist + 140, 1, 2, true, COPY / 512, 16, 100);
    r = run(fe, 0, 0, scsi_cdb_extended_copy((int)len), plist, len, false);
    g_assert_cmpuint(r.resp.status, ==, 0);

    read_lun(fe, 0, 1, 4096, 16, got, COPY);
    g_assert_cmpuint(pu_pattern_mismatch(got, COPY, 21, 0), ==, COPY);
    read_lun(fe, 1, 0, 512, 100, got, COPY);
    g_assert_cmpuint(pu_pattern_mismatch(got, COPY, 21, 0), ==, COPY);
    /* In the image itself, where the file LUN's block 16 lives. */
    fd = open(t.img, O_RDONLY | O_CLOEXEC);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(pread(fd, img, COPY, 16 * 4096), ==, COPY);
    close(fd);
    g_assert_cmpuint(pu_pattern_mismatch(img, COPY, 21, 0), ==, COPY);

    /* COPY STATUS of list 9: completed, two segments, all the bytes. */
    r = run(fe, 0, 0, scsi_cdb_receive_copy_results(SCSI_COPY_RESULTS_COPY_STATUS, 9, 64), st,
            64, true);
    g_assert_cmpuint(r.resp.status, ==, 0);
    g_assert_cmphex(st[4], ==, 0x01);
    g_assert_cmpuint(pu_get_be(st + 5, 2), ==, 2);
    g_assert_cmpuint(st[7], ==, 0);
    g_assert_cmpuint(pu_get_be(st + 8, 4), ==, 2 * COPY);
    vfe_close(fe);
    stop(&t);
}

/*
 * Another VM: controller vm2 with a ram LUN 0:0, added through a control
 * connection (left in *ctl); its front-end, ready.
 */
static struct vfe *add_vm2(struct daemon *t, int *ctl)
{
    int fd = ctl_client_connect(t->ctl);
    struct vfe *fe2;

    g_assert_cmpint(fd, >=, 0);
    *ctl = fd;
    json_node_unref(pu_ctl_ok(fd, "controller-add",
                              pu_jobj("name", pu_jstr("vm2"), "socket", pu_jstr(t->sock2),
                                      "queues", pu_jint(1), NULL)));
    json_node_unref(pu_ctl_ok(fd, "lun-add", pu_jobj("controller", pu_jstr("vm2"), "lun",
                                                     pu_jstr("0=ram:4M"), NULL)));
    fe2 = pu_connect_at(t->sock2, 1);
    ready(fe2, 0, 0);
    return fe2;
}

/* Another controller's LUN is out of reach of this controller's front-end. */
static void test_other_controller_unreachable(void)
{
    struct daemon t;
    struct vfe *fe, *fe2;
    uint8_t *plist;
    uint64_t foreign;
    uint32_t len;
    struct vfe_req r;
    int fd;

    start(&t);
    fe2 = add_vm2(&t, &fd);
    foreign = naa_of(fe2, 0, 0);
    fe = pu_connect(&t.d, 1);
    ready(fe, 0, 0);
    g_assert_cmphex(foreign, !=, naa_of(fe, 0, 0));
    plist = vfe_alloc(fe, 4096, 64);
    len = put_header(plist, 1, 2, 1);
    put_cscd(plist + 16, naa_of(fe, 0, 0), 512);
    put_cscd(plist + 48, foreign, 512);
    put_seg(plist + 80, 0, 1, false, 8, 0, 0);
    r = run(fe, 0, 0, scsi_cdb_extended_copy((int)len), plist, len, false);
    g_assert_cmpuint(r.resp.status, ==, 2);
    g_assert_cmpuint(pu_sense_of(&r.resp).key, ==, SCSI_SENSE_COPY_ABORTED);
    g_assert_cmphex(pu_sense_of(&r.resp).code, ==,
                    SCSI_SENSE_ASCQ_COPY_TARGET_DEVICE_NOT_REACHABLE);
    /*
     * Found processing segment 0 (COMMAND-SPECIFIC INFORMATION bytes 2-3),
     * the segment pointer at the foreign LUN's CSCD descriptor in the list.
     */
    g_assert_cmpuint(scsi_get_uint16(r.resp.sense + 10), ==, 0);
    g_assert_cmphex(r.resp.sense[15], ==, 0x80);
    g_assert_cmpuint(scsi_get_uint16(r.resp.sense + 16), ==, 48);
    vfe_close(fe);
    vfe_close(fe2);
    close(fd);
    stop(&t);
}

/*
 * EXTENDED COPY sent to 0:lun of n 512-byte blocks, from src_lba of the
 * LUN named src to dst_lba of the one named dst (either may be lun); GOOD.
 */
static void copy_512(struct vfe *fe, unsigned lun, uint64_t src, uint64_t src_lba, uint64_t dst,
                     uint64_t dst_lba, uint16_t n)
{
    uint8_t *plist = vfe_alloc(fe, 4096, 64);
    uint32_t len = put_header(plist, 1, 2, 1);
    struct vfe_req r;

    put_cscd(plist + 16, src, 512);
    put_cscd(plist + 48, dst, 512);
    put_seg(plist + 80, 0, 1, false, n, src_lba, dst_lba);
    r = run(fe, 0, lun, scsi_cdb_extended_copy((int)len), plist, len, false);
    g_assert_cmpuint(r.resp.status, ==, 0);
    vfe_free(fe, plist);
}

/*
 * A tenant's data passes through the daemon's bounce buffers (vm2 copies
 * within its own disk); then a front-end of the default controller copies
 * from a null LUN with fill=none, whose READs write nothing into the
 * bounce buffer, over data on its ram LUN: what arrives is zeros, none
 * of vm2's bytes nor anything else of the daemon's heap.
 */
static void test_unwritten_source_copies_zeros(void)
{
    struct daemon t;
    struct vfe *fe, *fe2;
    uint8_t *data, *got;
    uint64_t vm2_disk, nofill, ram;
    int fd;

    start(&t);
    fe2 = add_vm2(&t, &fd);
    json_node_unref(pu_ctl_ok(fd, "lun-add", pu_jobj("lun", pu_jstr("2=null:16M,fill=none"),
                                                     NULL)));
    fe = pu_connect(&t.d, 1);
    ready(fe, 0, 0);
    ready(fe, 0, 2);
    got = vfe_alloc(fe, MB, 4096);
    pu_pattern_fill(got, MB, 34, 0);
    write_lun(fe, 0, 0, 512, got, MB);
    nofill = naa_of(fe, 0, 2);
    ram = naa_of(fe, 0, 0);
    data = vfe_alloc(fe2, MB, 4096);
    pu_pattern_fill(data, MB, 33, 0);
    write_lun(fe2, 0, 0, 512, data, MB);
    vm2_disk = naa_of(fe2, 0, 0);

    /*
     * Both connections' queue 0 run on I/O thread 0, so vm2's copy leaves
     * its freed bounce buffers where the next copy's allocation looks.
     */
    copy_512(fe2, 0, vm2_disk, 0, vm2_disk, 4096, MB / 512);
    copy_512(fe, 0, nofill, 0, ram, 0, MB / 512);
    read_lun(fe, 0, 0, 512, 0, got, MB);
    for (uint32_t i = 0; i < MB; i++) {
        if (got[i]) {
            /* Whether vm2's data is what leaked: the longest run of its bytes, anywhere. */
            uint32_t best = 0;

            for (uint32_t k = 0; k + 64 <= MB; k += 8) {
                for (uint32_t o = 0; o < 64; o += 8) {
                    uint32_t n = 0;

                    while (i + o + n < MB && k + n < MB &&
                           got[i + o + n] == pu_pattern(33, k + n)) {
                        n++;
                    }
                    best = MAX(best, n);
                }
            }
            g_error("byte %u of the copy is %#x, not 0 (the longest run of vm2's data in it "
                    "from there: %u bytes)", i, got[i], best);
        }
    }
    vfe_close(fe);
    vfe_close(fe2);
    close(fd);
    stop(&t);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/xcopy/between-luns", test_copy_between_luns);
    g_test_add_func("/xcopy/other-controller-unreachable", test_other_controller_unreachable);
    g_test_add_func("/xcopy/unwritten-source-copies-zeros", test_unwritten_source_copies_zeros);
    return g_test_run();
}
