/*
 * The workload of the power-cut test (tests/guest/powercut-test.sh): runs
 * inside a test guest as a vhost-user front-end of vhost-scsi-target
 * (through the project's front-end library), writes 4 KiB blocks of one LUN
 * with QD > 1 over two request queues, some with FUA, with SYNCHRONIZE CACHE
 * now and then while writes are in flight, and records in a journal every
 * submission and every acknowledgement in the order the program saw them.
 * After each acknowledgement it inserts a dm-log-writes mark ("pc-SEQ", the
 * DM_TARGET_MSG ioctl) into the log of the device under the LUN, so the log
 * says which acknowledgements precede which log position; the host's
 * checker (tests/guest/powercut-check.py) replays the log and holds every
 * prefix to the contract.  Every 512-byte sector of a block carries a magic,
 * its index in the block, the block number, the write's generation and a
 * CRC-32, so a sector of another version or a torn one is recognised.
 * --verify reads every block back at the end (the ram backend's promise);
 * --check-zero only reads and expects zeros (a ram LUN after a restart).
 * --device PATH runs the same workload without the target, on the device
 * or file itself through io_uring with the target's system calls (writes
 * with RWF_DSYNC for FUA or WCE off, fdatasync for SYNCHRONIZE CACHE): the
 * kernel's own behaviour, to tell the daemon's faults from the kernel's.
 *
 * Usage: powercut-load --socket PATH --journal FILE --blocks N [--writes N]
 *        [--qd N] [--seed N] [--wce on|off] [--dm NAME] [--fiemap PATH]
 *        [--verify] [--check-zero] [--device PATH [--device-direct]] [--one-flush]
 *   --dm NAME      the dm-log-writes device to mark (none: no marks)
 *   --fiemap PATH  the LUN is this file: record its extents (FIEMAP) so the
 *                  checker can find its blocks on the logged device
 *   --one-flush    at most one command in flight that makes the kernel flush
 * Exit status 0 iff every command succeeded (and the checks passed).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <glib.h>
#include <linux/dm-ioctl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <linux/virtio_scsi.h>
#include <liburing.h>

#include "scsi-cmd.h"
#include "vhost-frontend.h"

#define TIMEOUT_MS 60000
#define BLOCK 4096u
#define SECTOR 512u
#define SECTORS (BLOCK / SECTOR)
#define MAX_RUN 4u                 /* blocks per write */
#define MAX_QD 32u
#define MAGIC 0x54554350u          /* "PCUT" */
#define MAX_EXTENTS 256u

struct load;

struct slot {
    struct vfe_req req;
    struct load *ld;
    uint8_t *buf;
    bool used;
    bool is_sync;
    bool fua;
    bool flushing;             /* the kernel flushes for it (sync, FUA, WCE 0) */
    uint64_t gen;              /* write: its generation; sync: its number */
    uint32_t first, n;
};

struct load {
    struct vfe *fe;
    FILE *journal;
    int dm_fd;                 /* /dev/mapper/control, -1 without --dm */
    const char *dm_name;
    uint32_t nblocks;
    unsigned qd;
    uint64_t writes;           /* writes to submit */
    uint64_t gen;              /* last generation submitted */
    uint64_t seq;              /* acknowledgements so far (= marks) */
    uint64_t syncs;
    uint64_t tag;
    unsigned inflight;
    bool sync_inflight;
    unsigned acks_since_sync;
    unsigned sync_every;
    uint8_t *busy;             /* per block: a write to it is in flight */
    uint64_t *acked;           /* per block: generation of its last acked write */
    struct slot slots[MAX_QD];
    unsigned failures;
    GRand *rand;
    struct io_uring ring;      /* --device */
    int dev_fd;                /* --device: the device, else -1 */
    bool all_dsync;            /* WCE 0: every write is written through */
    bool one_flush;            /* --one-flush */
    unsigned flushing;         /* commands in flight with flushing set */
};

/* CRC-32 (IEEE 802.3, reflected), as Python's zlib.crc32 computes it. */
static uint32_t crc32_ieee(const uint8_t *p, size_t len)
{
    uint32_t c = 0xffffffffu;

    for (size_t i = 0; i < len; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) {
            c = (c >> 1) ^ (0xedb88320u & -(c & 1));
        }
    }
    return c ^ 0xffffffffu;
}

static void put_le(uint8_t *p, uint64_t v, unsigned bytes)
{
    for (unsigned i = 0; i < bytes; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

/*
 * One block of generation gen: per sector the magic, the sector's index,
 * the block number, the generation, a fill derived from them and the CRC
 * of everything before it in the last four bytes.  Generation 0 is the
 * initial content: zeros.
 */
static void fill_block(uint8_t *p, uint32_t block, uint64_t gen)
{
    if (gen == 0) {
        memset(p, 0, BLOCK);
        return;
    }
    for (unsigned s = 0; s < SECTORS; s++, p += SECTOR) {
        uint64_t w = gen * 0x9e3779b97f4a7c15ull ^ ((uint64_t)block << 20) ^ s;

        put_le(p, MAGIC, 4);
        put_le(p + 4, s, 4);
        put_le(p + 8, block, 8);
        put_le(p + 16, gen, 8);
        for (unsigned off = 24; off < SECTOR - 8; off += 8) {
            w ^= w << 13;
            w ^= w >> 7;
            w ^= w << 17;
            put_le(p + off, w, 8);
        }
        put_le(p + SECTOR - 8, 0, 4);
        put_le(p + SECTOR - 4, crc32_ieee(p, SECTOR - 4), 4);
    }
}

/* Inserts a mark into the dm-log-writes log (dmsetup message NAME 0 mark TEXT). */
static int dm_mark(struct load *ld, const char *text)
{
    union {
        struct dm_ioctl io;
        uint8_t raw[sizeof(struct dm_ioctl) + sizeof(struct dm_target_msg) + 64];
    } u;
    struct dm_target_msg *msg = (struct dm_target_msg *)(u.raw + sizeof(struct dm_ioctl));
    char *m = (char *)msg + sizeof(*msg);
    size_t room = sizeof(u) - sizeof(struct dm_ioctl) - sizeof(*msg);

    if (ld->dm_fd < 0) {
        return 0;
    }
    memset(&u, 0, sizeof(u));
    /* Version 4.0.0: any 4.x kernel accepts it (it refuses newer minors). */
    u.io.version[0] = DM_VERSION_MAJOR;
    u.io.data_size = sizeof(u);
    u.io.data_start = sizeof(struct dm_ioctl);
    g_strlcpy(u.io.name, ld->dm_name, sizeof(u.io.name));
    msg->sector = 0;
    if ((size_t)snprintf(m, room, "mark %s", text) >= room) {
        return -EINVAL;
    }
    if (ioctl(ld->dm_fd, DM_TARGET_MSG, &u) < 0) {
        int err = errno;

        fprintf(stderr, "powercut-load: mark %s on %s: %s\n", text, ld->dm_name, strerror(err));
        return -err;
    }
    return 0;
}

static bool good(const struct vfe_req *r)
{
    return r->resp.response == VIRTIO_SCSI_S_OK && r->resp.status == 0;
}

/* One command, waited for: set-up and read-back only. */
static int exec_cmd(struct load *ld, struct vfe_req *req, const uint8_t *cdb,
                    void *buf, uint32_t len, bool in)
{
    memset(req, 0, sizeof(*req));
    vfe_lun(req->lun, 0, 0);
    req->tag = ++ld->tag;
    memcpy(req->cdb, cdb, SC_CDB_MAX);
    req->data = buf;
    req->data_len = len;
    req->data_in = in;
    return vfe_exec(ld->fe, req, TIMEOUT_MS);
}

/* TEST UNIT READY until GOOD: the new nexus has a POWER ON unit attention. */
static bool make_ready(struct load *ld)
{
    uint8_t cdb[SC_CDB_MAX];
    struct vfe_req r;

    sc_cdb(scsi_cdb_testunitready(), cdb);
    for (int i = 0; i < 8; i++) {
        if (exec_cmd(ld, &r, cdb, NULL, 0, false) == 0 && good(&r)) {
            return true;
        }
    }
    return false;
}

static bool capacity_ok(struct load *ld, uint8_t *buf)
{
    uint8_t cdb[SC_CDB_MAX];
    struct sc_datain d;
    struct vfe_req r;
    bool ok;

    sc_cdb(scsi_cdb_readcapacity16(), cdb);
    memset(buf, 0, 32);
    if (exec_cmd(ld, &r, cdb, buf, 32, true) != 0 || !good(&r)) {
        return false;
    }
    struct scsi_readcapacity16 *rc = sc_datain_decode(&d, cdb, 16, buf, 32);
    ok = rc && rc->block_length == SECTOR &&
         (rc->returned_lba + 1) * SECTOR >= (uint64_t)ld->nblocks * BLOCK;
    sc_datain_free(&d);
    return ok;
}

/*
 * The caching mode page's WCE: reads it (MODE SENSE (10)) and, when set is
 * 0 or 1, changes it with MODE SELECT (10) of the page as read and reads it
 * again.  Returns WCE, or -1 on failure.
 */
static int caching_wce(struct load *ld, uint8_t *buf, int set)
{
    uint8_t sense[SC_CDB_MAX], select[SC_CDB_MAX];
    struct vfe_req r;
    unsigned bdl, page_len;

    sc_cdb(scsi_cdb_modesense10(0, 1, SCSI_MODESENSE_PC_CURRENT, SCSI_MODEPAGE_CACHING, 0, 255),
           sense);
    memset(buf, 0, 256);
    if (exec_cmd(ld, &r, sense, buf, 255, true) != 0 || !good(&r)) {
        return -1;
    }
    bdl = (unsigned)buf[6] << 8 | buf[7];
    if (8 + bdl + 3 > 255 || (buf[8 + bdl] & 0x3f) != SCSI_MODEPAGE_CACHING) {
        return -1;
    }
    if (set < 0) {
        return !!(buf[8 + bdl + 2] & 0x04);
    }
    page_len = buf[8 + bdl + 1] + 2u;
    if (8 + bdl + page_len > 255) {
        return -1;
    }
    /* Parameter list: an 8-byte header without block descriptors, the page. */
    memmove(buf + 8, buf + 8 + bdl, page_len);
    memset(buf, 0, 8);
    buf[8] &= 0x3f;            /* PS is reserved in MODE SELECT */
    buf[10] = (uint8_t)((buf[10] & ~0x04) | (set ? 0x04 : 0));
    sc_cdb(scsi_cdb_modeselect10(1, 0, (int)(8 + page_len)), select);
    if (exec_cmd(ld, &r, select, buf, 8 + page_len, false) != 0 || !good(&r)) {
        return -1;
    }
    return caching_wce(ld, buf, -1);
}

/*
 * Records the LUN file's extents (FIEMAP, after fsync) as "X LOGICAL
 * PHYSICAL LENGTH" lines; refuses extents the checker could not follow
 * (unwritten, delayed, encoded, not aligned).
 */
static bool record_extents(struct load *ld, const char *path)
{
    size_t sz = sizeof(struct fiemap) + MAX_EXTENTS * sizeof(struct fiemap_extent);
    g_autofree struct fiemap *fm = g_malloc0(sz);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    bool ok = fd >= 0 && fsync(fd) == 0;

    fm->fm_length = FIEMAP_MAX_OFFSET;
    fm->fm_flags = FIEMAP_FLAG_SYNC;
    fm->fm_extent_count = MAX_EXTENTS;
    ok = ok && ioctl(fd, FS_IOC_FIEMAP, fm) == 0 && fm->fm_mapped_extents > 0 &&
         fm->fm_mapped_extents < MAX_EXTENTS;
    for (unsigned i = 0; ok && i < fm->fm_mapped_extents; i++) {
        const struct fiemap_extent *e = &fm->fm_extents[i];
        uint32_t bad = FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC |
                       FIEMAP_EXTENT_ENCODED | FIEMAP_EXTENT_UNWRITTEN |
                       FIEMAP_EXTENT_NOT_ALIGNED | FIEMAP_EXTENT_DATA_INLINE;

        ok = !(e->fe_flags & bad) && e->fe_logical % BLOCK == 0 &&
             e->fe_physical % BLOCK == 0 && e->fe_length % BLOCK == 0;
        if (!ok) {
            fprintf(stderr, "powercut-load: extent %u: logical %llu physical %llu length %llu "
                    "flags %#x\n", i, (unsigned long long)e->fe_logical,
                    (unsigned long long)e->fe_physical, (unsigned long long)e->fe_length,
                    e->fe_flags);
        }
        fprintf(ld->journal, "X %llu %llu %llu\n", (unsigned long long)e->fe_logical,
                (unsigned long long)e->fe_physical, (unsigned long long)e->fe_length);
    }
    if (fd >= 0) {
        close(fd);
    }
    if (!ok) {
        fprintf(stderr, "powercut-load: %s: no usable extent map\n", path);
    }
    return ok;
}

static void acknowledged(struct load *ld)
{
    char text[32];

    /* One word: the kernel splits a message into words, and a mark takes one. */
    snprintf(text, sizeof(text), "pc-%" PRIu64, ld->seq);
    if (dm_mark(ld, text) < 0) {
        ld->failures++;
    }
    ld->seq++;
}

/* Completion, in the order the program sees them: journal, then mark. */
static void completed(struct slot *s, bool ok, unsigned response, unsigned status)
{
    struct load *ld = s->ld;

    if (s->is_sync) {
        ld->sync_inflight = false;
        if (ok) {
            fprintf(ld->journal, "Y %" PRIu64 " %" PRIu64 "\n", s->gen, ld->seq);
            acknowledged(ld);
        }
    } else {
        for (uint32_t b = s->first; b < s->first + s->n; b++) {
            ld->busy[b] = 0;
            if (ok) {
                ld->acked[b] = s->gen;
            }
        }
        if (ok) {
            ld->acks_since_sync++;
            fprintf(ld->journal, "A %" PRIu64 " %" PRIu64 "\n", s->gen, ld->seq);
            acknowledged(ld);
        }
    }
    if (!ok) {
        fprintf(ld->journal, "E %c %" PRIu64 " %u %u\n", s->is_sync ? 'S' : 'W', s->gen,
                response, status);
        fprintf(stderr, "powercut-load: %s %" PRIu64 " failed: response %u status %u\n",
                s->is_sync ? "sync" : "write", s->gen, response, status);
        ld->failures++;
    }
    s->used = false;
    ld->inflight--;
    ld->flushing -= s->flushing;
}

static void on_done(struct vfe_req *r)
{
    completed(r->opaque, good(r), r->resp.response, r->resp.status);
}

/* --device: the request through our own io_uring instead of the target. */
static int submit_device(struct load *ld, struct slot *s, bool fua)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ld->ring);

    if (!sqe) {
        return -EAGAIN;
    }
    if (s->is_sync) {
        io_uring_prep_fsync(sqe, ld->dev_fd, IORING_FSYNC_DATASYNC);
    } else {
        io_uring_prep_write(sqe, ld->dev_fd, s->buf, s->n * BLOCK, (uint64_t)s->first * BLOCK);
        sqe->rw_flags = fua || ld->all_dsync ? RWF_DSYNC : 0;
    }
    io_uring_sqe_set_data(sqe, s);
    int ret = io_uring_submit(&ld->ring);
    return ret < 0 ? ret : 0;
}

static int poll_device(struct load *ld)
{
    struct io_uring_cqe *cqe;
    int n = 0, ret = io_uring_wait_cqe(&ld->ring, &cqe);

    while (ret == 0) {
        struct slot *s = io_uring_cqe_get_data(cqe);
        int res = cqe->res;

        io_uring_cqe_seen(&ld->ring, cqe);
        completed(s, s->is_sync ? res == 0 : res == (int)(s->n * BLOCK), 0,
                  res < 0 ? (unsigned)-res : 0);
        n++;
        ret = io_uring_peek_cqe(&ld->ring, &cqe);
    }
    return n ? n : ret;
}

static struct slot *free_slot(struct load *ld)
{
    for (unsigned i = 0; i < ld->qd; i++) {
        if (!ld->slots[i].used) {
            return &ld->slots[i];
        }
    }
    return NULL;
}

static int submit(struct load *ld, struct slot *s)
{
    struct vfe_req *r = &s->req;
    bool fua = s->fua && !s->is_sync;

    memset(r, 0, sizeof(*r));
    r->queue = (unsigned)(ld->tag % 2);
    vfe_lun(r->lun, 0, 0);
    r->tag = ++ld->tag;
    r->complete = on_done;
    r->opaque = s;
    if (s->is_sync) {
        sc_cdb(scsi_cdb_synchronizecache10(0, 0, 0, 0), r->cdb);
    } else {
        for (uint32_t i = 0; i < s->n; i++) {
            fill_block(s->buf + (size_t)i * BLOCK, s->first + i, s->gen);
            ld->busy[s->first + i] = 1;
        }
        sc_cdb(scsi_cdb_write16((uint64_t)s->first * SECTORS, s->n * BLOCK, SECTOR, 0, 0,
                                fua, 0, 0), r->cdb);
        r->data = s->buf;
        r->data_len = s->n * BLOCK;
        fprintf(ld->journal, "W %" PRIu64 " %u %u %d\n", s->gen, s->first, s->n, fua);
    }
    s->used = true;
    ld->inflight++;
    s->flushing = s->is_sync || fua || ld->all_dsync;
    ld->flushing += s->flushing;
    int ret = ld->dev_fd >= 0 ? submit_device(ld, s, fua) : vfe_submit(ld->fe, r);
    if (ret < 0) {
        fprintf(stderr, "powercut-load: submit: %s\n", strerror(-ret));
    }
    return ret;
}

/* A run of blocks no write in flight touches; false after a few misses. */
static bool pick_run(struct load *ld, uint32_t *first, uint32_t *n)
{
    for (int tries = 0; tries < 8; tries++) {
        uint32_t f = (uint32_t)g_rand_int_range(ld->rand, 0, (gint32)ld->nblocks);
        uint32_t want = (uint32_t)g_rand_int_range(ld->rand, 1, MAX_RUN + 1);
        uint32_t len = MIN(want, ld->nblocks - f);
        bool clear = true;

        for (uint32_t b = f; b < f + len && clear; b++) {
            clear = !ld->busy[b];
        }
        if (clear) {
            *first = f;
            *n = len;
            return true;
        }
    }
    return false;
}

/*
 * The workload: keeps qd commands in flight; after every sync_every
 * acknowledged writes (3..12 at random) one SYNCHRONIZE CACHE goes out among
 * them.  Writes never overlap a write in flight, so each block's versions
 * are ordered by submission.  With one_flush at most one command that makes
 * the kernel flush (SYNCHRONIZE CACHE, FUA, any write under WCE 0) is in
 * flight: without `direct` each of them is an fdatasync, and dm-log-writes
 * cannot order a write against two flushes in flight (docs/testing.md).
 */
static int run(struct load *ld)
{
    while (ld->gen < ld->writes || ld->inflight) {
        struct slot *s;

        while (ld->gen < ld->writes && (s = free_slot(ld)) != NULL) {
            bool flush_ok = !ld->one_flush || ld->flushing == 0;

            if (!ld->sync_inflight && ld->acks_since_sync >= ld->sync_every && flush_ok) {
                s->is_sync = true;
                s->gen = ++ld->syncs;
                fprintf(ld->journal, "S %" PRIu64 "\n", s->gen);
                ld->sync_inflight = true;
                ld->acks_since_sync = 0;
                ld->sync_every = (unsigned)g_rand_int_range(ld->rand, 3, 13);
            } else {
                s->is_sync = false;
                s->fua = g_rand_int_range(ld->rand, 0, 4) == 0 && flush_ok;
                if ((ld->all_dsync && !flush_ok) || !pick_run(ld, &s->first, &s->n)) {
                    break;
                }
                s->gen = ++ld->gen;
            }
            if (submit(ld, s) < 0) {
                return -EIO;
            }
        }
        int n = ld->dev_fd >= 0 ? poll_device(ld) : vfe_poll(ld->fe, TIMEOUT_MS);
        if (n <= 0) {
            fprintf(stderr, "powercut-load: no completion within %d ms (%d)\n", TIMEOUT_MS, n);
            return -ETIMEDOUT;
        }
    }
    return 0;
}

/* Reads every block back: each must be its last acknowledged version. */
static unsigned read_back(struct load *ld, uint8_t *buf, bool zeros)
{
    uint8_t cdb[SC_CDB_MAX], want[BLOCK];
    unsigned bad = 0;
    struct vfe_req r;

    for (uint32_t b = 0; b < ld->nblocks; b++) {
        sc_cdb(scsi_cdb_read16((uint64_t)b * SECTORS, BLOCK, SECTOR, 0, 0, 0, 0, 0), cdb);
        fill_block(want, b, zeros ? 0 : ld->acked[b]);
        if (exec_cmd(ld, &r, cdb, buf, BLOCK, true) != 0 || !good(&r) ||
            memcmp(buf, want, BLOCK) != 0) {
            if (bad++ < 5) {
                fprintf(stderr, "powercut-load: block %u is not generation %" PRIu64 "\n", b,
                        zeros ? 0 : ld->acked[b]);
            }
        }
    }
    return bad;
}

/* Connects to the target; *buf gets a 4 KiB buffer for set-up commands. */
static int open_target(struct load *ld, const char *socket, uint8_t **buf)
{
    struct vfe_config cfg = {
        .transport = VFE_VHOST_USER, .path = socket, .num_request_queues = 2,
        .queue_size = 128, .mem_size = 16u << 20,
    };
    int ret = vfe_open(&cfg, &ld->fe);

    if (ret < 0) {
        fprintf(stderr, "powercut-load: connect %s: %s\n", socket, strerror(-ret));
        return ret;
    }
    *buf = vfe_alloc(ld->fe, BLOCK, 4096);
    for (unsigned i = 0; i < ld->qd; i++) {
        ld->slots[i].buf = vfe_alloc(ld->fe, MAX_RUN * BLOCK, 4096);
        g_assert(ld->slots[i].buf);
    }
    g_assert(*buf);
    if (!make_ready(ld) || !capacity_ok(ld, *buf)) {
        fprintf(stderr, "powercut-load: LUN 0 not ready or smaller than %u blocks\n",
                ld->nblocks);
        return -EIO;
    }
    return 0;
}

static int open_device(struct load *ld, const char *path, bool direct)
{
    int ret;

    ld->dev_fd = open(path, O_RDWR | O_CLOEXEC | (direct ? O_DIRECT : 0));
    if (ld->dev_fd < 0) {
        ret = -errno;
        fprintf(stderr, "powercut-load: %s: %s\n", path, strerror(-ret));
        return ret;
    }
    ret = io_uring_queue_init(2 * MAX_QD, &ld->ring, 0);
    if (ret < 0) {
        fprintf(stderr, "powercut-load: io_uring: %s\n", strerror(-ret));
        return ret;
    }
    for (unsigned i = 0; i < ld->qd; i++) {
        ld->slots[i].buf = g_aligned_alloc(MAX_RUN, BLOCK, BLOCK);
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct load ld = { .qd = 8, .writes = 600, .dm_fd = -1, .dev_fd = -1, .sync_every = 6 };
    const char *socket = NULL, *journal = NULL, *fiemap = NULL, *device = NULL;
    bool device_direct = false;
    guint64 seed = 1;
    int set_wce = -1;
    bool verify = false, check_zero = false;

    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        guint64 n;
        bool ok = v != NULL;

        if (!strcmp(a, "--one-flush")) {
            ld.one_flush = true;
            continue;
        }
        if (!strcmp(a, "--verify") || !strcmp(a, "--check-zero") ||
            !strcmp(a, "--device-direct")) {
            *(a[2] == 'v' ? &verify : a[2] == 'c' ? &check_zero : &device_direct) = true;
            continue;
        }
        if (!strcmp(a, "--socket") && v) {
            socket = v;
        } else if (!strcmp(a, "--journal") && v) {
            journal = v;
        } else if (!strcmp(a, "--dm") && v) {
            ld.dm_name = v;
        } else if (!strcmp(a, "--device") && v) {
            device = v;
        } else if (!strcmp(a, "--fiemap") && v) {
            fiemap = v;
        } else if (!strcmp(a, "--blocks") && v) {
            ok = g_ascii_string_to_unsigned(v, 10, MAX_RUN, 1u << 20, &n, NULL);
            ld.nblocks = (uint32_t)n;
        } else if (!strcmp(a, "--writes") && v) {
            ok = g_ascii_string_to_unsigned(v, 10, 1, 1u << 24, &n, NULL);
            ld.writes = n;
        } else if (!strcmp(a, "--qd") && v) {
            ok = g_ascii_string_to_unsigned(v, 10, 2, MAX_QD, &n, NULL);
            ld.qd = (unsigned)n;
        } else if (!strcmp(a, "--seed") && v) {
            ok = g_ascii_string_to_unsigned(v, 10, 0, UINT32_MAX, &seed, NULL);
        } else if (!strcmp(a, "--wce") && v) {
            ok = !strcmp(v, "on") || !strcmp(v, "off");
            set_wce = !strcmp(v, "on");
        } else {
            ok = false;
        }
        if (!ok) {
            fprintf(stderr, "powercut-load: bad argument %s %s\n", a, v ? v : "");
            return 2;
        }
        i++;
    }
    if (!(socket || device) || (socket && device) || !journal || !ld.nblocks ||
        (device && (verify || check_zero))) {
        fprintf(stderr, "usage: powercut-load --socket PATH|--device PATH --journal FILE "
                "--blocks N ...\n");
        return 2;
    }
    ld.journal = fopen(journal, "we");
    if (!ld.journal) {
        fprintf(stderr, "powercut-load: %s: %s\n", journal, strerror(errno));
        return 1;
    }
    if (ld.dm_name) {
        ld.dm_fd = open("/dev/mapper/control", O_RDWR | O_CLOEXEC);
        if (ld.dm_fd < 0) {
            fprintf(stderr, "powercut-load: /dev/mapper/control: %s\n", strerror(errno));
            return 1;
        }
    }
    ld.rand = g_rand_new_with_seed((guint32)seed);
    ld.busy = g_new0(uint8_t, ld.nblocks);
    for (unsigned i = 0; i < MAX_QD; i++) {
        ld.slots[i].ld = &ld;
    }
    ld.acked = g_new0(uint64_t, ld.nblocks);

    int ret, wce;
    uint8_t *buf = NULL;

    if (device) {
        ret = open_device(&ld, device, device_direct);
        wce = set_wce != 0;
        ld.all_dsync = !wce;
    } else {
        ret = open_target(&ld, socket, &buf);
        if (ret == 0 && check_zero) {
            unsigned bad = read_back(&ld, buf, true);

            printf("powercut-load: %u of %u blocks not zero\n", bad, ld.nblocks);
            vfe_close(ld.fe);
            return bad ? 1 : 0;
        }
        wce = ret == 0 ? caching_wce(&ld, buf, set_wce) : -1;
        if (ret == 0 && wce < 0) {
            fprintf(stderr, "powercut-load: caching mode page: MODE SENSE/SELECT failed\n");
        }
        if (ret == 0 && set_wce >= 0 && wce >= 0 && wce != set_wce) {
            fprintf(stderr, "powercut-load: WCE is %d after MODE SELECT of %d\n", wce,
                    set_wce);
            wce = -1;
        }
    }
    if (ret < 0 || wce < 0) {
        return 1;
    }
    ld.all_dsync = !wce;
    fprintf(ld.journal, "P %u %u %d %" PRIu64 "\n", ld.nblocks, BLOCK, wce, (uint64_t)seed);
    if (fiemap && !record_extents(&ld, fiemap)) {
        return 1;
    }
    /* Contract checks begin here: what came before (mkfs, the file) is set-up. */
    fflush(ld.journal);
    if (dm_mark(&ld, "pc-start") < 0) {
        return 1;
    }
    fprintf(ld.journal, "G\n");
    ret = run(&ld);
    fprintf(ld.journal, "END\n");
    if (fflush(ld.journal) != 0 || fsync(fileno(ld.journal)) != 0) {
        ld.failures++;
    }
    unsigned bad = ret == 0 && verify ? read_back(&ld, buf, false) : 0;
    printf("powercut-load: %" PRIu64 " writes, %" PRIu64 " syncs, %" PRIu64
           " acknowledgements, %u failures, WCE %d%s\n", ld.gen, ld.syncs, ld.seq, ld.failures,
           wce, verify ? (bad ? ", read-back FAILED" : ", read-back ok") : "");
    if (ld.fe) {
        vfe_close(ld.fe);
    }
    fclose(ld.journal);
    g_rand_free(ld.rand);
    return ret == 0 && ld.failures == 0 && bad == 0 ? 0 : 1;
}
