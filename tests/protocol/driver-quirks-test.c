/*
 * What the guests' drivers depend on, through the real daemon, one case per
 * quirk; each sends what the driver sends (Windows' vioscsi cannot be booted
 * here; Linux's virtio_scsi follows the same config space):
 *  - VPD page 83h: Windows builds its disk ids from the designators, so every
 *    LUN of the daemon, on any target and any controller, has an NAA and a
 *    T10 vendor id designator no other LUN has (two files of the same
 *    content, two ram disks alike), and the page and the unit serial are
 *    the same after a restart with the same configuration and for a LUN
 *    removed and added again with the same spec;
 *  - transfer size: the daemon does not offer VHOST_USER_PROTOCOL_F_CONFIG,
 *    so the guest reads the front-end's virtio-scsi config space, whose
 *    max_sectors QEMU sets to 0xFFFF for vhost-user-scsi; Block Limits'
 *    MAXIMUM TRANSFER LENGTH stays within it, a transfer of exactly that
 *    and vioscsi's 2 MiB + 4 KiB are served, one block more is INVALID
 *    FIELD IN CDB, and the queue serves the next request;
 *  - segments: a WRITE of 2 MiB + 4 KiB in 513 page-sized segments of an
 *    indirect table, more than seg_max (QEMU says the ring size less 2) on
 *    a 64-entry ring, is served like QEMU's own virtio-scsi serves it, and
 *    the queue serves the next request, a READ that finds the data;
 *  - UNMAP: Block Device Characteristics says non-rotating, and Logical
 *    Block Provisioning (LBPU, thin), READ CAPACITY (16)'s LBPME, Block
 *    Limits' UNMAP counts and granularity and the UNMAP command agree;
 *  - 4Kn and 512e: READ CAPACITY (16)'s LOGICAL BLOCKS PER PHYSICAL BLOCK
 *    EXPONENT and Block Limits' granularities (OPTIMAL TRANSFER LENGTH
 *    GRANULARITY, OPTIMAL UNMAP GRANULARITY, MAXIMUM TRANSFER LENGTH in
 *    whole physical blocks) follow the LUN's geometry.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <glib.h>
#include <linux/virtio_ring.h>

#include "control-client.h"
#include "proto-util.h"
#include "raw-vu.h"
#include "scsi-cmd.h"

#define MiB (1u << 20)
/* QEMU's vhost-user-scsi "max_sectors" default: what the guest reads as the limit. */
#define QEMU_MAX_SECTORS 0xffffu
/* The transfer vioscsi has been seen sending: 2 MiB and one page more. */
#define VIOSCSI_XFER (2 * MiB + 4096)
#define REPLY_MS 5000

/* A file of size bytes in dir, every byte fill; returns its path (g_free). */
static char *make_file(const char *dir, const char *name, size_t size, int fill)
{
    char *path = g_build_filename(dir, name, NULL);
    g_autofree uint8_t *b = g_malloc(size);

    memset(b, fill, size);
    g_assert_true(g_file_set_contents(path, (const char *)b, (gssize)size, NULL));
    return path;
}

/* TEST UNIT READY until the unit attentions a new nexus sees are taken. */
static void ready(struct vfe *fe, unsigned target, unsigned lun)
{
    for (int i = 0; i < 4; i++) {
        struct vfe_req r = pu_tur(fe, target, lun);

        g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
        if (r.resp.status == 0) {
            return;
        }
        g_assert_cmpuint(pu_sense_of(&r.resp).key, ==, SCSI_SENSE_UNIT_ATTENTION);
    }
    g_assert_not_reached();
}

/* VPD page of target:lun into b (255 bytes from vfe_alloc); its whole length. */
static size_t vpd(struct vfe *fe, unsigned target, unsigned lun, uint8_t page, uint8_t *b)
{
    const uint8_t cdb[6] = { 0x12, 0x01, page, 0, 255, 0 };
    struct vfe_req r;

    memset(b, 0, 255);
    r = pu_run(fe, target, lun, cdb, sizeof(cdb), b, 255, true);
    g_assert_cmpuint(r.resp.status, ==, 0);
    g_assert_cmphex(b[1], ==, page);
    g_assert_cmpuint(4 + pu_get_be(b + 2, 2), <=, 255);
    return 4 + pu_get_be(b + 2, 2);
}

/* READ CAPACITY (16) of LUN lun of target 0 into b (32 bytes from vfe_alloc). */
static void read_capacity16(struct vfe *fe, unsigned lun, uint8_t *b)
{
    const uint8_t cdb[16] = { 0x9e, 0x10, [13] = 32 };
    struct vfe_req r = pu_run(fe, 0, lun, cdb, sizeof(cdb), b, 32, true);

    g_assert_cmpuint(r.resp.status, ==, 0);
}

/* ---- VPD 83h ------------------------------------------------------------ */

/* A LUN as the guest's driver sees it: where, its page 83h and its unit serial. */
struct ident {
    const char *sock;     /* which controller */
    unsigned target, lun;
    uint8_t page[255];
    size_t len;
    char serial[252];
};

#define N_IDENT 6

struct id_daemon {
    struct pu_daemon d;
    char *ctl, *sock2, *a, *b;
    int fd;
};

/*
 * Two files of the same content, two ram disks, a ram disk on target 1 and
 * one on controller vm2, each added the way the configuration says.
 */
static void id_start(struct id_daemon *t, bool first)
{
    g_autofree char *lun0 = NULL, *lun1 = NULL;

    if (first) {
        pu_daemon_init(&t->d);
        t->ctl = g_build_filename(t->d.dir, "control.sock", NULL);
        t->sock2 = g_build_filename(t->d.dir, "vm2.sock", NULL);
        t->a = make_file(t->d.dir, "a.img", 4 * MiB, 0);
        t->b = make_file(t->d.dir, "b.img", 4 * MiB, 0);
    }
    lun0 = g_strdup_printf("0=file:%s", t->a);
    lun1 = g_strdup_printf("1=file:%s", t->b);
    {
        const char *args[] = { "--lun", lun0, "--lun", lun1, "--lun", "2=ram:4M", "--lun",
                               "3=ram:4M", "--lun", "1:0=ram:4M", "--control", t->ctl, NULL };

        pu_daemon_start(&t->d, args);
    }
    t->fd = ctl_client_connect(t->ctl);
    g_assert_cmpint(t->fd, >=, 0);
    json_node_unref(pu_ctl_ok(t->fd, "controller-add",
                              pu_jobj("name", pu_jstr("vm2"), "socket", pu_jstr(t->sock2),
                                      "queues", pu_jint(1), NULL)));
    json_node_unref(pu_ctl_ok(t->fd, "lun-add", pu_jobj("controller", pu_jstr("vm2"),
                                                        "lun", pu_jstr("0=ram:4M"), NULL)));
}

static void id_stop(struct id_daemon *t)
{
    close(t->fd);
    g_assert_cmpint(pu_daemon_stop(&t->d, false), ==, 0);
}

/* Reads every LUN's page 83h and serial into ids[N_IDENT]. */
static void read_idents(struct id_daemon *t, struct ident *ids)
{
    static const unsigned where[N_IDENT][3] = {   /* controller (0: default), target, lun */
        { 0, 0, 0 }, { 0, 0, 1 }, { 0, 0, 2 }, { 0, 0, 3 }, { 0, 1, 0 }, { 1, 0, 0 },
    };
    struct vfe *fe[2] = { pu_connect(&t->d, 1), pu_connect_at(t->sock2, 1) };
    uint8_t *b = vfe_alloc(fe[0], 255, 64), *b2 = vfe_alloc(fe[1], 255, 64);

    for (unsigned i = 0; i < N_IDENT; i++) {
        struct vfe *f = fe[where[i][0]];
        uint8_t *buf = where[i][0] ? b2 : b;
        size_t n;

        ids[i].sock = where[i][0] ? t->sock2 : t->d.sock;
        ids[i].target = where[i][1];
        ids[i].lun = where[i][2];
        ready(f, ids[i].target, ids[i].lun);
        ids[i].len = vpd(f, ids[i].target, ids[i].lun, 0x83, buf);
        memcpy(ids[i].page, buf, ids[i].len);
        n = vpd(f, ids[i].target, ids[i].lun, 0x80, buf) - 4;
        memcpy(ids[i].serial, buf + 4, n);
        ids[i].serial[n] = '\0';
    }
    vfe_close(fe[0]);
    vfe_close(fe[1]);
}

/* The designator of type (4 bits) with the logical unit association in page p; NULL if none. */
static const uint8_t *designator(const struct ident *p, unsigned type)
{
    for (size_t o = 4; o + 4 <= p->len; o += 4 + p->page[o + 3]) {
        const uint8_t *d = p->page + o;

        g_assert_cmpuint(o + 4 + d[3], <=, p->len);
        if ((d[1] & 0x0f) == type && (d[1] & 0x30) == 0) {
            return d;
        }
    }
    return NULL;
}

static bool same_designator(const uint8_t *x, const uint8_t *y)
{
    return x[3] == y[3] && memcmp(x + 4, y + 4, x[3]) == 0;
}

static void assert_unique(const struct ident *ids)
{
    for (unsigned i = 0; i < N_IDENT; i++) {
        const uint8_t *naa = designator(&ids[i], 3), *t10 = designator(&ids[i], 1);

        /* Never empty: an NAA (binary, 8 bytes, NAA 5) and a T10 vendor id. */
        g_assert_nonnull(naa);
        g_assert_nonnull(t10);
        g_assert_cmphex(naa[0] & 0x0f, ==, 1);
        g_assert_cmpuint(naa[3], ==, 8);
        g_assert_cmphex(naa[4] >> 4, ==, 5);
        g_assert_cmpuint(t10[3], >, 8);
        g_assert_cmpuint(strlen(ids[i].serial), >, 0);
        for (unsigned j = 0; j < i; j++) {
            if (same_designator(naa, designator(&ids[j], 3)) ||
                same_designator(t10, designator(&ids[j], 1)) ||
                !strcmp(ids[i].serial, ids[j].serial)) {
                g_error("%s %u:%u and %s %u:%u carry the same designator or serial",
                        ids[i].sock, ids[i].target, ids[i].lun, ids[j].sock, ids[j].target,
                        ids[j].lun);
            }
        }
    }
}

static void assert_same_idents(const struct ident *x, const struct ident *y)
{
    for (unsigned i = 0; i < N_IDENT; i++) {
        g_assert_cmpuint(x[i].len, ==, y[i].len);
        g_assert_cmpmem(x[i].page, x[i].len, y[i].page, y[i].len);
        g_assert_cmpstr(x[i].serial, ==, y[i].serial);
    }
}

static void test_vpd83_unique_and_stable(void)
{
    struct ident before[N_IDENT], after[N_IDENT], readded[N_IDENT];
    struct id_daemon t;

    id_start(&t, true);
    read_idents(&t, before);
    assert_unique(before);

    /* The same configuration after a restart: the same disks to the guest. */
    id_stop(&t);
    id_start(&t, false);
    read_idents(&t, after);
    assert_same_idents(before, after);

    /* A LUN removed and added again with the same spec is the same disk. */
    json_node_unref(pu_ctl_ok(t.fd, "lun-remove", pu_jobj("lun", pu_jint(1), NULL)));
    {
        g_autofree char *spec = g_strdup_printf("1=file:%s", t.b);

        json_node_unref(pu_ctl_ok(t.fd, "lun-add", pu_jobj("lun", pu_jstr(spec), NULL)));
    }
    read_idents(&t, readded);
    assert_same_idents(before, readded);

    id_stop(&t);
    pu_daemon_cleanup(&t.d);
    g_free(t.ctl);
    g_free(t.sock2);
    g_free(t.a);
    g_free(t.b);
}

/* ---- transfer size ------------------------------------------------------ */

/* Block Limits' MAXIMUM TRANSFER LENGTH of target 0's LUN lun, in blocks. */
static uint32_t max_transfer(struct vfe *fe, unsigned lun, uint8_t *b)
{
    g_assert_cmpuint(vpd(fe, 0, lun, 0xb0, b), ==, 64);
    return (uint32_t)pu_get_be(b + 8, 4);
}

/* A READ(16) or WRITE(16) of blocks at lba on request queue 0, waited for. */
static struct vfe_req rw(struct vfe *fe, unsigned lun, bool write, uint64_t lba, uint32_t blocks,
                         void *buf, uint32_t len)
{
    struct vfe_req r;

    pu_req_prep(&r, 0, lun, (const uint8_t[16]){ 0 }, 16, buf, len, !write);
    pu_make_rw16(&r, write, lba, blocks);
    g_assert_cmpint(vfe_exec(fe, &r, PU_TIMEOUT_MS), ==, 0);
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
    return r;
}

static void check_transfer_limits(struct vfe *fe, unsigned lun, uint32_t bs, uint8_t *data,
                                  uint8_t *b)
{
    uint32_t max = max_transfer(fe, lun, b);
    struct vfe_req r;

    /* Within the config space's max_sectors, and not less than vioscsi sends. */
    g_assert_cmpuint((uint64_t)max * bs, <=, (uint64_t)QEMU_MAX_SECTORS * 512);
    g_assert_cmpuint((uint64_t)max * bs, >=, VIOSCSI_XFER);

    /* 2 MiB + 4 KiB: written and read back. */
    pu_pattern_fill(data, VIOSCSI_XFER, lun + 1, 0);
    r = rw(fe, lun, true, 0, VIOSCSI_XFER / bs, data, VIOSCSI_XFER);
    g_assert_cmpuint(r.resp.status, ==, 0);
    memset(data, 0, VIOSCSI_XFER);
    r = rw(fe, lun, false, 0, VIOSCSI_XFER / bs, data, VIOSCSI_XFER);
    g_assert_cmpuint(r.resp.status, ==, 0);
    g_assert_cmpuint(pu_pattern_mismatch(data, VIOSCSI_XFER, lun + 1, 0), ==, VIOSCSI_XFER);

    /* Exactly the limit: served. */
    r = rw(fe, lun, false, 0, max, data, max * bs);
    g_assert_cmpuint(r.resp.status, ==, 0);
    /* One block more, with the buffer for it: a clean refusal, nothing transferred. */
    r = rw(fe, lun, false, 0, max + 1, data, (max + 1) * bs);
    g_assert_cmpuint(r.resp.status, ==, 0x02);
    g_assert_cmpuint(pu_sense_of(&r.resp).key, ==, SCSI_SENSE_ILLEGAL_REQUEST);
    g_assert_cmphex(pu_sense_of(&r.resp).code, ==, SCSI_SENSE_ASCQ_INVALID_FIELD_IN_CDB);
    /* And the queue goes on. */
    r = rw(fe, lun, false, 0, 8, data, 8 * bs);
    g_assert_cmpuint(r.resp.status, ==, 0);
}

static void test_transfer_within_max_sectors(void)
{
    struct pu_daemon d;
    struct rv_fe f;
    g_autofree char *img = NULL, *lun1 = NULL;
    struct vfe_config cfg = { .num_request_queues = 1, .queue_size = 128, .mem_size = 80 * MiB,
                              .event_idx = true, .indirect = true };
    struct vfe *fe;
    uint8_t *data, *b;

    pu_daemon_init(&d);
    img = make_file(d.dir, "4k.img", 40 * MiB, 0);
    lun1 = g_strdup_printf("1=file:%s,block-size=4096", img);
    {
        const char *args[] = { "--lun", "0=ram:40M", "--lun", lun1, "--lun",
                               "2=ram:40M,physical-block-size=4096", NULL };

        pu_daemon_start(&d, args);
    }
    /* The config space is the front-end's: the daemon offers no F_CONFIG to take it over. */
    g_assert_cmpint(rv_fe_open(&f, d.sock, 1ull << VHOST_USER_PROTOCOL_F_CONFIG, REPLY_MS), ==, 0);
    g_assert_false(f.protocol & (1ull << VHOST_USER_PROTOCOL_F_CONFIG));
    rv_fe_close(&f);

    fe = pu_connect_cfg(&d, &cfg);
    data = vfe_alloc(fe, 33 * MiB, 4096);
    b = vfe_alloc(fe, 255, 64);
    g_assert_nonnull(data);
    for (unsigned lun = 0; lun < 3; lun++) {
        ready(fe, 0, lun);
    }
    check_transfer_limits(fe, 0, 512, data, b);
    check_transfer_limits(fe, 1, 4096, data, b);
    check_transfer_limits(fe, 2, 512, data, b);
    vfe_close(fe);
    g_assert_cmpint(pu_daemon_stop(&d, false), ==, 0);
    pu_daemon_cleanup(&d);
}

/* ---- segments ----------------------------------------------------------- */

#define RING 64                      /* QEMU's seg_max for it: 62 */
#define SEGS (VIOSCSI_XFER / 4096)   /* 513 pages */

/* Waits (the call eventfd, bounded) until vq 2's used index reaches idx. */
static void wait_used(const struct rv_fe *f, int call, uint16_t idx)
{
    gint64 deadline = g_get_monotonic_time() + PU_TIMEOUT_MS * 1000ll;

    while (rv_fe_used_idx(f, 2) != idx) {
        struct pollfd p = { .fd = call, .events = POLLIN };
        uint64_t v;

        if (g_get_monotonic_time() > deadline) {
            g_error("request queue: used index %u, not %u, after %d ms",
                    rv_fe_used_idx(f, 2), idx, PU_TIMEOUT_MS);
        }
        if (poll(&p, 1, 100) > 0) {
            g_assert_cmpint(read(call, &v, sizeof(v)), ==, sizeof(v));
        }
    }
}

static void test_segments_past_seg_max(void)
{
    static const char *const args[] = { "--lun", "0=ram:8M", NULL };
    const size_t table_n = SEGS + 2;
    struct pu_daemon d;
    struct rv_fe f;
    struct vring_desc *table;
    struct virtio_scsi_cmd_req *req;
    struct virtio_scsi_cmd_resp *resp;
    uint8_t *page, *back;
    uint64_t feat = 0, one = 1;
    uint16_t idx = 0;
    int call = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

    g_assert_cmpint(call, >=, 0);
    pu_daemon_init(&d);
    pu_daemon_start(&d, args);
    g_assert_cmpint(rv_fe_open(&f, d.sock, 0, REPLY_MS), ==, 0);
    /* vioscsi negotiates indirect descriptors, and puts its scatter list in one table. */
    g_assert_cmpint(rv_get_u64(f.sock, VHOST_USER_GET_FEATURES, REPLY_MS, &feat), ==, 0);
    g_assert_true(feat & (1ull << VIRTIO_RING_F_INDIRECT_DESC));
    f.features |= 1ull << VIRTIO_RING_F_INDIRECT_DESC;
    g_assert_cmpint(rv_set_u64(f.sock, VHOST_USER_SET_FEATURES, f.features, -1, REPLY_MS, NULL),
                    ==, 0);
    g_assert_cmpint(rv_fe_set_mem(&f), ==, 0);
    g_assert_cmpint(rv_fe_ring(&f, 2, RING, call, -1), ==, 0);
    g_assert_cmpint(rv_fe_kick(&f, 2, -1, NULL), ==, 0);
    resp = (struct virtio_scsi_cmd_resp *)(f.ring[2].buf + 256);
    /* The new nexus's unit attentions first. */
    do {
        g_assert_cmpuint(idx, <, 4);
        rv_fe_post_tur(&f, 2, 0, 0);
        wait_used(&f, call, ++idx);
        g_assert_cmpuint(resp->response, ==, VIRTIO_SCSI_S_OK);
    } while (resp->status);

    /* Guest RAM the other virtqueues' spans would hold: the table, then one data page. */
    table = (struct vring_desc *)(f.mem + 3 * RV_VQ_SPAN);
    g_assert_cmpuint(table_n * sizeof(*table), <=, RV_VQ_SPAN);
    page = f.mem + 4 * RV_VQ_SPAN;
    memset(page, 0x5a, 4096);
    req = (struct virtio_scsi_cmd_req *)f.ring[2].buf;
    memset(req, 0, sizeof(*req));
    req->lun[0] = 1;
    req->lun[2] = 0x40;
    req->tag = 7;
    req->task_attr = VIRTIO_SCSI_S_SIMPLE;
    /* WRITE(10) of 2 MiB + 4 KiB at LBA 0: every segment is the same page. */
    req->cdb[0] = 0x2a;
    pu_put_be(req->cdb + 7, VIOSCSI_XFER / 512, 2);
    memset(resp, 0xff, sizeof(*resp));     /* an answer must overwrite it */
    table[0] = (struct vring_desc){ .addr = (uint64_t)((uint8_t *)req - f.mem),
                                    .len = sizeof(*req), .flags = VRING_DESC_F_NEXT, .next = 1 };
    for (unsigned i = 1; i <= SEGS; i++) {
        table[i] = (struct vring_desc){ .addr = (uint64_t)(page - f.mem), .len = 4096,
                                        .flags = VRING_DESC_F_NEXT, .next = (uint16_t)(i + 1) };
    }
    table[SEGS + 1] = (struct vring_desc){ .addr = (uint64_t)((uint8_t *)resp - f.mem),
                                           .len = sizeof(*resp), .flags = VRING_DESC_F_WRITE };
    f.ring[2].desc[2] = (struct vring_desc){ .addr = (uint64_t)((uint8_t *)table - f.mem),
                                             .len = (uint32_t)(table_n * sizeof(*table)),
                                             .flags = VRING_DESC_F_INDIRECT };
    f.ring[2].avail->ring[idx % RING] = 2;
    __atomic_store_n(&f.ring[2].avail->idx, (uint16_t)(idx + 1), __ATOMIC_RELEASE);
    g_assert_cmpint(write(f.ring[2].kick_fd, &one, sizeof(one)), ==, sizeof(one));
    wait_used(&f, call, ++idx);

    g_assert_cmpuint(f.ring[2].used->ring[(idx - 1) % RING].id, ==, 2);
    g_assert_cmpuint(f.ring[2].used->ring[(idx - 1) % RING].len, >=,
                     sizeof(*resp) - sizeof(resp->sense));
    g_assert_cmpuint(resp->response, ==, VIRTIO_SCSI_S_OK);
    g_assert_cmpuint(resp->status, ==, 0);
    /* The queue is not broken: a READ(10) of the last page written completes, with it. */
    back = f.mem + 5 * RV_VQ_SPAN;
    memset(back, 0, 4096);
    memset(req->cdb, 0, sizeof(req->cdb));
    req->cdb[0] = 0x28;
    pu_put_be(req->cdb + 2, VIOSCSI_XFER / 512 - 8, 4);
    pu_put_be(req->cdb + 7, 8, 2);
    memset(resp, 0xff, sizeof(*resp));
    f.ring[2].desc[3] = (struct vring_desc){ .addr = (uint64_t)((uint8_t *)req - f.mem),
                                             .len = sizeof(*req), .flags = VRING_DESC_F_NEXT,
                                             .next = 4 };
    f.ring[2].desc[4] = (struct vring_desc){ .addr = (uint64_t)((uint8_t *)resp - f.mem),
                                             .len = sizeof(*resp),
                                             .flags = VRING_DESC_F_WRITE | VRING_DESC_F_NEXT,
                                             .next = 5 };
    f.ring[2].desc[5] = (struct vring_desc){ .addr = (uint64_t)(back - f.mem), .len = 4096,
                                             .flags = VRING_DESC_F_WRITE };
    f.ring[2].avail->ring[idx % RING] = 3;
    __atomic_store_n(&f.ring[2].avail->idx, (uint16_t)(idx + 1), __ATOMIC_RELEASE);
    g_assert_cmpint(write(f.ring[2].kick_fd, &one, sizeof(one)), ==, sizeof(one));
    wait_used(&f, call, ++idx);
    g_assert_cmpuint(resp->response, ==, VIRTIO_SCSI_S_OK);
    g_assert_cmpuint(resp->status, ==, 0);
    for (unsigned i = 0; i < 4096; i++) {
        g_assert_cmphex(back[i], ==, 0x5a);
    }

    rv_fe_close(&f);
    close(call);
    g_assert_cmpint(pu_daemon_stop(&d, false), ==, 0);
    pu_daemon_cleanup(&d);
}

/* ---- UNMAP and provisioning --------------------------------------------- */

static void check_provisioning(struct vfe *fe, unsigned lun, uint8_t *b)
{
    bool lbpu, lbpme;
    uint32_t max_unmap, gran, align, phys;
    uint8_t type;
    struct vfe_req r;

    read_capacity16(fe, lun, b);
    lbpme = b[14] & 0x80;
    phys = 1u << (b[13] & 0x0f);

    /* Non-rotating: Windows retrims it, never defragments it (a rewrite of a thin disk). */
    vpd(fe, 0, lun, 0xb1, b);
    g_assert_cmpuint(pu_get_be(b + 4, 2), ==, 1);

    vpd(fe, 0, lun, 0xb2, b);
    lbpu = b[5] & 0x80;
    type = b[6] & 0x07;
    g_assert_true(lbpu == lbpme);
    g_assert_true(lbpu == !!(b[5] & 0x40));           /* LBPWS with it */
    g_assert_cmpuint(type, ==, lbpu ? 2 : 0);           /* thin, or full */

    vpd(fe, 0, lun, 0xb0, b);
    max_unmap = (uint32_t)pu_get_be(b + 20, 4);
    gran = (uint32_t)pu_get_be(b + 28, 4);
    align = (uint32_t)pu_get_be(b + 32, 4);
    if (!lbpu) {
        g_assert_cmpuint(max_unmap, ==, 0);
        return;
    }
    g_assert_cmpuint(max_unmap, >, 0);
    g_assert_cmpuint(pu_get_be(b + 24, 4), >, 0);      /* descriptors */
    g_assert_cmpuint(gran, >=, 1);
    g_assert_cmpuint(gran % phys, ==, 0);               /* whole physical blocks */
    g_assert_true(align & 0x80000000u);                 /* UGAVALID */
    g_assert_cmpuint(align & 0x7fffffffu, <, gran);

    /* Offered, so it works: one granule at LBA 0. */
    {
        const uint8_t cdb[10] = { 0x42, [8] = 24 };
        uint8_t *p = b;

        memset(p, 0, 24);
        pu_put_be(p, 22, 2);
        pu_put_be(p + 2, 16, 2);
        pu_put_be(p + 16, gran, 4);
        r = pu_run(fe, 0, lun, cdb, sizeof(cdb), p, 24, false);
        g_assert_cmpuint(r.resp.status, ==, 0);
    }
}

static void test_unmap_vpds(void)
{
    struct pu_daemon d;
    g_autofree char *img = NULL, *img2 = NULL, *lun1 = NULL, *lun3 = NULL;
    struct vfe *fe;
    uint8_t *b;

    pu_daemon_init(&d);
    img = make_file(d.dir, "thin.img", 8 * MiB, 0);
    img2 = make_file(d.dir, "thin-512e.img", 8 * MiB, 0);
    lun1 = g_strdup_printf("1=file:%s", img);
    lun3 = g_strdup_printf("3=file:%s,physical-block-size=4096", img2);
    {
        const char *args[] = { "--lun", "0=ram:8M", "--lun", lun1, "--lun", "2=null:8M",
                               "--lun", lun3, NULL };

        pu_daemon_start(&d, args);
    }
    fe = pu_connect(&d, 1);
    b = vfe_alloc(fe, 255, 64);
    for (unsigned lun = 0; lun < 4; lun++) {
        ready(fe, 0, lun);
        check_provisioning(fe, lun, b);
    }
    vfe_close(fe);
    g_assert_cmpint(pu_daemon_stop(&d, false), ==, 0);
    pu_daemon_cleanup(&d);
}

/* ---- 4Kn and 512e ------------------------------------------------------- */

struct geometry {
    const char *opts;     /* after the file's path */
    uint32_t bs, pbs;
};

static const struct geometry geometries[] = {
    { "", 512, 512 },                                         /* 512n */
    { ",block-size=4096", 4096, 4096 },                       /* 4Kn */
    { ",block-size=4096,physical-block-size=4096", 4096, 4096 },
    { ",physical-block-size=4096", 512, 4096 },               /* 512e */
    { ",physical-block-size=8192", 512, 8192 },
};

static void test_geometry(void)
{
    enum { N = G_N_ELEMENTS(geometries) };
    const char *args[2 * N + 1];
    char *specs[N];
    struct pu_daemon d;
    struct vfe *fe;
    uint8_t *b;

    pu_daemon_init(&d);
    for (unsigned i = 0; i < N; i++) {
        g_autofree char *name = g_strdup_printf("g%u.img", i);
        g_autofree char *img = make_file(d.dir, name, 8 * MiB, 0);

        specs[i] = g_strdup_printf("%u=file:%s%s", i, img, geometries[i].opts);
        args[2 * i] = "--lun";
        args[2 * i + 1] = specs[i];
    }
    args[2 * N] = NULL;
    pu_daemon_start(&d, args);
    fe = pu_connect(&d, 1);
    b = vfe_alloc(fe, 255, 64);
    for (unsigned i = 0; i < N; i++) {
        const struct geometry *g = &geometries[i];
        uint32_t per = g->pbs / g->bs;

        ready(fe, 0, i);
        read_capacity16(fe, i, b);
        g_assert_cmpuint(pu_get_be(b + 8, 4), ==, g->bs);
        g_assert_cmpuint(1u << (b[13] & 0x0f), ==, per);   /* LOGICAL BLOCKS PER PHYSICAL BLOCK */
        g_assert_cmpuint(pu_get_be(b + 14, 2) & 0x3fff, ==, 0);   /* LOWEST ALIGNED LBA */

        vpd(fe, 0, i, 0xb0, b);
        /* Linux's io_min and Windows' alignment: the physical block. */
        g_assert_cmpuint(pu_get_be(b + 6, 2) % per, ==, 0);   /* OPTIMAL TRANSFER LENGTH GRANULARITY */
        g_assert_cmpuint(pu_get_be(b + 8, 4) % per, ==, 0);   /* MAXIMUM TRANSFER LENGTH */
        g_assert_cmpuint(pu_get_be(b + 12, 4) % per, ==, 0);  /* OPTIMAL TRANSFER LENGTH */
        if (pu_get_be(b + 20, 4)) {
            g_assert_cmpuint(pu_get_be(b + 28, 4) % per, ==, 0);   /* OPTIMAL UNMAP GRANULARITY */
        }
        g_assert_cmpuint(pu_get_be(b + 48, 4), ==, per);      /* ATOMIC ALIGNMENT */
    }
    vfe_close(fe);
    g_assert_cmpint(pu_daemon_stop(&d, false), ==, 0);
    pu_daemon_cleanup(&d);
    for (unsigned i = 0; i < N; i++) {
        g_free(specs[i]);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/driver-quirks/vpd83/unique-and-stable", test_vpd83_unique_and_stable);
    g_test_add_func("/driver-quirks/transfer/within-max-sectors", test_transfer_within_max_sectors);
    g_test_add_func("/driver-quirks/transfer/segments-past-seg-max", test_segments_past_seg_max);
    g_test_add_func("/driver-quirks/unmap/provisioning-vpds", test_unmap_vpds);
    g_test_add_func("/driver-quirks/geometry/4kn-and-512e", test_geometry);
    return g_test_run();
}
