/*
 * vhost-scsi-bench: a load generator that plays the guest.  It drives a
 * vhost-scsi back-end (our vhost-user target or the kernel's
 * /dev/vhost-scsi) directly through the front-end library, so the numbers
 * measure the back-end and the virtqueue path without a VM in between:
 * IOPS, bandwidth, latency percentiles, interrupts and kicks per I/O and,
 * with --pid, the back-end's CPU time and context switches per I/O, over
 * split rings or (--packed) packed ones.  --verify writes a pattern and
 * reads it back, as a smoke test.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <glib.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include <iscsi/scsi-lowlevel.h>
#include <json-glib/json-glib.h>

#include "vhost-frontend.h"

/* ---- latency histogram: log-linear, 16 sub-buckets per power of two --- */

#define HIST_SUB_BITS 4
#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_BUCKETS (64 * HIST_SUB)

struct hist {
    uint64_t count[HIST_BUCKETS];
    uint64_t total;
    uint64_t max;
};

static unsigned hist_bucket(uint64_t v)
{
    if (v < HIST_SUB) {
        return (unsigned)v;
    }
    unsigned e = 63 - __builtin_clzll(v);             /* e >= HIST_SUB_BITS */
    unsigned m = (v >> (e - HIST_SUB_BITS)) & (HIST_SUB - 1);
    return (e - HIST_SUB_BITS + 1) * HIST_SUB + m;
}

/* Upper bound of bucket b: reported percentiles never understate latency. */
static uint64_t hist_bucket_high(unsigned b)
{
    if (b < HIST_SUB) {
        return b;
    }
    unsigned e = b / HIST_SUB + HIST_SUB_BITS - 1;
    uint64_t m = b % HIST_SUB;
    uint64_t low = (1ull << e) | (m << (e - HIST_SUB_BITS));
    return low + (1ull << (e - HIST_SUB_BITS)) - 1;
}

static void hist_add(struct hist *h, uint64_t v)
{
    h->count[hist_bucket(v)]++;
    h->total++;
    if (v > h->max) {
        h->max = v;
    }
}

static uint64_t hist_pct(const struct hist *h, double pct)
{
    if (!h->total) {
        return 0;
    }
    uint64_t want = (uint64_t)(pct / 100.0 * h->total + 0.999999);
    want = want ? want : 1;
    uint64_t seen = 0;
    for (unsigned b = 0; b < HIST_BUCKETS; b++) {
        seen += h->count[b];
        if (seen >= want) {
            uint64_t hi = hist_bucket_high(b);
            return hi < h->max ? hi : h->max;
        }
    }
    return h->max;
}

/* ---- options --------------------------------------------------------- */

/*
 * RW_HOSTILE: the most expensive commands a guest can send, in turn: WRITE
 * SAME of a pattern and of zeros (UNMAP) over as much of the LUN as the
 * daemon takes in one command (1M blocks), an UNMAP of as much, and a
 * READ and a WRITE of --bs: the load of a hostile neighbour
 * (scripts/neighbour-bench.sh), not a figure of its own.  RW_APTPL:
 * PERSISTENT RESERVE OUT, REGISTER AND IGNORE EXISTING KEY with APTPL on
 * and a new key each time (every one a change of the LUN's state file);
 * RW_UNMAP: an UNMAP of --bs at a random place.  Loads of a neighbour too.
 */
enum rw_mode { RW_READ, RW_WRITE, RW_RANDREAD, RW_RANDWRITE, RW_RW, RW_HOSTILE, RW_APTPL,
               RW_UNMAP };
/* --rw's values, by enum rw_mode. */
static const char *const rw_mode_names[] = { "read", "write", "randread", "randwrite", "rw",
                                             "hostile", "aptpl", "unmap" };
#define HOSTILE_MAX_BLOCKS 0x100000u

/* The strings point into argv. */
struct opts {
    char *socket;
    char *kernel;        /* WWPN[,tpgt] */
    char *rw;
    char *bs_str;
    char *lun_str;
    int iodepth;
    int queues;
    int first_queue;
    int time_s;
    gint64 ios;
    gint64 rate;         /* --rate: I/Os per second at most (0: as fast as it goes) */
    int pid;
    gboolean json;
    gboolean verify;
    gboolean quiet;
    gboolean no_event_idx;
    gboolean indirect;
    gboolean poll;
    gboolean packed;
    gboolean inflight;
    gboolean dirty_log;
    gboolean idle;
    gboolean flush_first;
    int queue_size;
    int rwmix;           /* read percentage for --rw rw */

    enum rw_mode mode;
    uint32_t bs;
    unsigned target, lun;
    unsigned tpgt;
};

/* ---- back-end process accounting ------------------------------------- */

struct proc_sample {
    uint64_t utime, stime;     /* clock ticks, all threads */
    uint64_t vcsw, nvcsw;      /* summed over /proc/PID/task/ */
    bool ok;
};

static bool read_proc_stat(int pid, uint64_t *ut, uint64_t *st)
{
    char path[64], *buf = NULL;
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    if (!g_file_get_contents(path, &buf, NULL, NULL)) {
        return false;
    }
    /* comm may contain spaces: fields restart after the last ')' */
    char *p = strrchr(buf, ')');
    bool ok = false;
    if (p) {
        unsigned long long u, s;
        /* after ") " : state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
        if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &u, &s) == 2) {
            *ut = u;
            *st = s;
            ok = true;
        }
    }
    g_free(buf);
    return ok;
}

static void read_task_csw(int pid, uint64_t *v, uint64_t *nv)
{
    char dpath[64];
    snprintf(dpath, sizeof(dpath), "/proc/%d/task", pid);
    DIR *d = opendir(dpath);
    *v = *nv = 0;
    if (!d) {
        return;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') {
            continue;
        }
        char *path = g_strdup_printf("%s/%s/status", dpath, de->d_name);
        char *buf = NULL;
        if (g_file_get_contents(path, &buf, NULL, NULL)) {
            char *l;
            if ((l = strstr(buf, "\nvoluntary_ctxt_switches:"))) {
                *v += g_ascii_strtoull(l + strlen("\nvoluntary_ctxt_switches:"), NULL, 10);
            }
            if ((l = strstr(buf, "\nnonvoluntary_ctxt_switches:"))) {
                *nv += g_ascii_strtoull(l + strlen("\nnonvoluntary_ctxt_switches:"), NULL, 10);
            }
        }
        g_free(buf);
        g_free(path);
    }
    closedir(d);
}

static void proc_sample(int pid, struct proc_sample *s)
{
    memset(s, 0, sizeof(*s));
    if (pid <= 0) {
        return;
    }
    s->ok = read_proc_stat(pid, &s->utime, &s->stime);
    read_task_csw(pid, &s->vcsw, &s->nvcsw);
}

/* ---- the run --------------------------------------------------------- */

struct bench;

struct io {
    struct vfe_req req;
    struct bench *b;
    uint64_t start_ns;
    uint64_t lba;
    bool is_write;
    unsigned ua_retries;      /* this I/O's unit attentions so far */
};

/* An initiator retries a command a unit attention answered (SAM-5 5.14); this many times. */
#define UA_RETRIES 8

struct bench {
    struct opts *o;
    struct vfe *fe;
    uint8_t lun[8];
    uint32_t block_size;
    uint64_t num_blocks;
    unsigned hostile_next;       /* RW_HOSTILE: which command comes next */
    uint32_t io_blocks;
    uint64_t io_slots;           /* distinct bs-aligned positions */

    struct io *ios;
    unsigned nios;
    uint64_t seq_next;
    uint64_t rng;
    uint64_t tag;

    bool running;                /* resubmit on completion */
    /*
     * --rate: the n-th I/O is issued no earlier than t_start + n / rate;
     * a completion ahead of that schedule parks its slot until then.
     */
    uint64_t t_start, ns_per_io_q16;    /* 1e9 / rate, in 1/65536 ns */
    struct io **parked;
    unsigned nparked;
    bool failed;
    uint64_t issued, done, bytes, reads, writes;
    uint64_t limit;              /* 0: time-bound */
    struct hist lat;

    /* verify: positions 0..verify_n-1 */
    bool verify_phase_read;
    uint64_t verify_next, verify_n, mismatches;
    uint64_t unit_attentions;      /* commands retried after one */
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    interrupted = 1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static uint64_t splitmix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The verify pattern is a function of the byte address only: order-independent. */
static void fill_pattern(uint8_t *buf, uint64_t byte_off, uint32_t len)
{
    for (uint32_t i = 0; i + 8 <= len; i += 8) {
        uint64_t w = splitmix(byte_off + i);
        memcpy(buf + i, &w, 8);
    }
}

static uint64_t check_pattern(const uint8_t *buf, uint64_t byte_off, uint32_t len)
{
    for (uint32_t i = 0; i + 8 <= len; i += 8) {
        uint64_t w = splitmix(byte_off + i), got;
        memcpy(&got, buf + i, 8);
        if (got != w) {
            return byte_off + i + 1;   /* 1-based so 0 means "all good" */
        }
    }
    return 0;
}

static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = v >> (56 - 8 * i);
    }
}

static void put_be16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void put_be32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = v >> (24 - 8 * i);
    }
}

static void json_add_string(JsonBuilder *jb, const char *name, const char *v)
{
    json_builder_set_member_name(jb, name);
    json_builder_add_string_value(jb, v);
}

static void json_add_int(JsonBuilder *jb, const char *name, gint64 v)
{
    json_builder_set_member_name(jb, name);
    json_builder_add_int_value(jb, v);
}

static void json_add_bool(JsonBuilder *jb, const char *name, bool v)
{
    json_builder_set_member_name(jb, name);
    json_builder_add_boolean_value(jb, v);
}

/* Rounded to as many decimals as the figure has meaning (as the JSON always had). */
static void json_add_double(JsonBuilder *jb, const char *name, double v, int decimals)
{
    char buf[G_ASCII_DTOSTR_BUF_SIZE];

    g_ascii_formatd(buf, sizeof(buf), decimals == 1 ? "%.1f" : decimals == 2 ? "%.2f"
                                      : decimals == 3 ? "%.3f" : "%.4f", v);
    json_builder_set_member_name(jb, name);
    json_builder_add_double_value(jb, g_ascii_strtod(buf, NULL));
}

/* Encoded here rather than with libiscsi's scsi_cdb_read16/write16, which
 * allocate a task per call: this runs once per I/O and its cost would show
 * in the figures. */
static void build_rw(struct io *io, uint64_t lba, uint32_t blocks, bool write)
{
    memset(io->req.cdb, 0, sizeof(io->req.cdb));
    io->req.cdb[0] = write ? SCSI_OPCODE_WRITE16 : SCSI_OPCODE_READ16;
    put_be64(&io->req.cdb[2], lba);
    put_be32(&io->req.cdb[10], blocks);
    io->req.data_in = !write;
    io->req.data_len = blocks * io->b->block_size;
    io->lba = lba;
    io->is_write = write;
}

/* The next of the hostile commands (RW_HOSTILE), from LBA 0. */
static void build_hostile(struct bench *b, struct io *io)
{
    uint64_t n = MIN(b->num_blocks, HOSTILE_MAX_BLOCKS);
    uint8_t *cdb = io->req.cdb;

    unsigned k = b->hostile_next++ % 5;

    memset(cdb, 0, sizeof(io->req.cdb));
    io->lba = 0;
    io->is_write = true;
    io->req.data_in = false;
    switch (k) {
    case 0:     /* WRITE SAME(16) of a pattern block */
    case 1:     /* WRITE SAME(16), UNMAP, of zeros (NDOB: no data-out) */
        cdb[0] = SCSI_OPCODE_WRITE_SAME16;
        cdb[1] = k == 0 ? 0 : 0x08 | 0x01;
        put_be32(&cdb[10], (uint32_t)n);
        io->req.data_len = k == 0 ? b->block_size : 0;
        memset(io->req.data, 0x5a, io->req.data_len);
        break;
    case 2: {   /* UNMAP of one descriptor */
        uint8_t *p = io->req.data;

        cdb[0] = SCSI_OPCODE_UNMAP;
        put_be16(&cdb[7], 24);
        memset(p, 0, 24);
        put_be16(p, 22);
        put_be16(p + 2, 16);
        put_be32(p + 16, (uint32_t)n);
        io->req.data_len = 24;
        break;
    }
    default:
        build_rw(io, 0, b->io_blocks, k == 4);
        break;
    }
}

/* RW_APTPL: REGISTER AND IGNORE EXISTING KEY, APTPL, the next key. */
static void build_aptpl(struct bench *b, struct io *io)
{
    uint8_t *cdb = io->req.cdb;
    uint8_t *p = io->req.data;

    memset(cdb, 0, sizeof(io->req.cdb));
    cdb[0] = 0x5f;                     /* PERSISTENT RESERVE OUT */
    cdb[1] = 0x06;                     /* REGISTER AND IGNORE EXISTING KEY */
    put_be32(&cdb[5], 24);
    memset(p, 0, 24);
    put_be64(p + 8, ++b->hostile_next);
    p[20] = 0x01;                      /* APTPL */
    io->req.data_in = false;
    io->req.data_len = 24;
    io->lba = 0;
    io->is_write = true;
}

/* RW_UNMAP: one descriptor of the I/O size at lba. */
static void build_unmap(struct bench *b, struct io *io, uint64_t lba)
{
    uint8_t *cdb = io->req.cdb;
    uint8_t *p = io->req.data;

    memset(cdb, 0, sizeof(io->req.cdb));
    cdb[0] = SCSI_OPCODE_UNMAP;
    put_be16(&cdb[7], 24);
    memset(p, 0, 24);
    put_be16(p, 22);
    put_be16(p + 2, 16);
    put_be64(p + 8, lba);
    put_be32(p + 16, b->io_blocks);
    io->req.data_in = false;
    io->req.data_len = 24;
    io->lba = lba;
    io->is_write = true;
}

static bool pick_next(struct bench *b, struct io *io)
{
    struct opts *o = b->o;
    uint64_t slot;
    bool write;

    if (o->verify) {
        if (b->verify_next >= b->verify_n) {
            return false;
        }
        slot = b->verify_next++;
        write = !b->verify_phase_read;
    } else {
        if (b->limit && b->issued >= b->limit) {
            return false;
        }
        switch (o->mode) {
        case RW_READ:
        case RW_WRITE:
            slot = b->seq_next++ % b->io_slots;
            break;
        default:
            slot = xorshift(&b->rng) % b->io_slots;
            break;
        }
        write = o->mode == RW_WRITE || o->mode == RW_RANDWRITE ||
                (o->mode == RW_RW && (int)(xorshift(&b->rng) % 100) >= o->rwmix);
    }
    uint64_t lba = slot * b->io_blocks;
    if ((o->mode == RW_HOSTILE || o->mode == RW_APTPL || o->mode == RW_UNMAP) && !o->verify) {
        if (o->mode == RW_HOSTILE) {
            build_hostile(b, io);
        } else if (o->mode == RW_APTPL) {
            build_aptpl(b, io);
        } else {
            build_unmap(b, io, lba);
        }
        io->req.tag = ++b->tag;
        return true;
    }
    build_rw(io, lba, b->io_blocks, write);
    if (write && o->verify) {
        fill_pattern(io->req.data, lba * b->block_size, o->bs);
    }
    io->req.tag = ++b->tag;
    return true;
}

static int submit_io(struct bench *b, struct io *io, uint64_t t)
{
    if (!pick_next(b, io)) {
        return 0;
    }
    io->start_ns = t;
    int r = vfe_submit(b->fe, &io->req);
    if (r < 0) {
        fprintf(stderr, "vhost-scsi-bench: submit: %s\n", g_strerror(-r));
        b->failed = true;
        return r;
    }
    b->issued++;
    return 1;
}

static void sense_of(const struct virtio_scsi_cmd_resp *rs, unsigned *key, unsigned *asc,
                     unsigned *ascq)
{
    *key = *asc = *ascq = 0;
    if (rs->sense_len >= 14) {
        /* libiscsi follows descriptor lengths: zeroes past what came back. */
        uint8_t sb[8 + 255] = { 0 };
        struct scsi_sense s = { 0 };

        memcpy(sb, rs->sense, MIN(rs->sense_len, sizeof(rs->sense)));
        scsi_parse_sense_data(&s, sb);
        *key = s.key;
        *asc = (unsigned)s.ascq >> 8;
        *ascq = (unsigned)s.ascq & 0xff;
    }
}

static void report_bad(struct bench *b, struct io *io)
{
    const struct virtio_scsi_cmd_resp *rs = &io->req.resp;
    unsigned key, asc, ascq;

    sense_of(rs, &key, &asc, &ascq);
    fprintf(stderr,
            "vhost-scsi-bench: %s lba %" PRIu64 " failed: response %u status 0x%02x "
            "sense %x/%02x/%02x\n", io->is_write ? "write" : "read", io->lba,
            rs->response, rs->status, key, asc, ascq);
}

/* When --rate lets the next I/O go. */
static uint64_t rate_due(const struct bench *b)
{
    return b->t_start + (uint64_t)(((unsigned __int128)b->issued * b->ns_per_io_q16) >> 16);
}

/* --rate: parks io when the schedule has not come to it yet; true if it did. */
static bool rate_park(struct bench *b, struct io *io, uint64_t t)
{
    if (!b->o->rate || t >= rate_due(b)) {
        return false;
    }
    b->parked[b->nparked++] = io;
    return true;
}

static void io_complete(struct vfe_req *req)
{
    struct io *io = req->opaque;
    struct bench *b = io->b;
    uint64_t t = now_ns();
    uint64_t lat = t - io->start_ns;

    if (req->resp.response == VIRTIO_SCSI_S_OK && req->resp.status == 0x02 /* CHECK CONDITION */ &&
        io->ua_retries < UA_RETRIES) {
        unsigned key, asc, ascq;

        /* A LUN added or grown beside ours, a reset: the same command again. */
        sense_of(&req->resp, &key, &asc, &ascq);
        if (key == SCSI_SENSE_UNIT_ATTENTION && vfe_submit(b->fe, &io->req) == 0) {
            io->ua_retries++;
            b->unit_attentions++;
            return;
        }
    }
    io->ua_retries = 0;
    b->done++;
    if (req->resp.response != VIRTIO_SCSI_S_OK || req->resp.status != 0) {
        if (!b->failed) {
            report_bad(b, io);
        }
        b->failed = true;
        b->running = false;
        return;
    }
    hist_add(&b->lat, lat);
    b->bytes += b->o->bs;
    if (io->is_write) {
        b->writes++;
    } else {
        b->reads++;
        if (b->o->verify) {
            uint64_t bad = check_pattern(req->data, io->lba * b->block_size, b->o->bs);
            if (bad) {
                if (!b->mismatches) {
                    fprintf(stderr, "vhost-scsi-bench: verify: mismatch at byte %" PRIu64
                            " (lba %" PRIu64 ")\n", bad - 1, io->lba);
                }
                b->mismatches++;
                b->failed = true;
            }
        }
    }
    if (b->running) {
        if (rate_park(b, io, t)) {
            return;
        }
        /* the completion's clock reading is the next request's start: one per I/O */
        submit_io(b, io, t);
    }
}

/* Issues the parked slots whose turn has come; returns how many are still parked. */
static unsigned rate_release(struct bench *b, uint64_t t)
{
    while (b->nparked && b->running && t >= rate_due(b)) {
        submit_io(b, b->parked[--b->nparked], t);
    }
    if (!b->running) {
        b->nparked = 0;
    }
    return b->nparked;
}

/* A synchronous command for the setup phase: the CDB of task, a libiscsi
 * scsi_cdb_* result (NULL if it could not allocate), data in to buf. */
static int exec_cmd(struct bench *b, const struct scsi_task *task, void *buf, uint32_t len,
                    struct virtio_scsi_cmd_resp *resp)
{
    struct vfe_req req = { .queue = 0, .tag = ++b->tag, .data = buf, .data_len = len,
                           .data_in = true };
    if (!task) {
        return -ENOMEM;
    }
    memcpy(req.lun, b->lun, 8);
    memcpy(req.cdb, task->cdb, (size_t)task->cdb_size);
    /* As for I/O: a unit attention (a LUN changed beside ours) is retried. */
    for (unsigned i = 0;; i++) {
        unsigned key = 0, asc, ascq;
        int r = vfe_exec(b->fe, &req, 10000);

        if (r < 0) {
            return r;
        }
        if (req.resp.response == VIRTIO_SCSI_S_OK && req.resp.status == 0x02) {
            sense_of(&req.resp, &key, &asc, &ascq);
        }
        if (key != SCSI_SENSE_UNIT_ATTENTION || i == UA_RETRIES) {
            break;
        }
    }
    *resp = req.resp;
    return 0;
}

/* len bytes of data in for task, decoded by libiscsi (valid until the
 * task is freed); NULL if it cannot. */
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

/*
 * --flush-first: one SYNCHRONIZE CACHE (10) of the whole LUN, so a back-end
 * whose cache holds writes through until the first flush (librbd's default
 * rbd_cache_writethrough_until_flush, the safety net for guests that never
 * flush) is measured in the mode a flushing guest runs it in.
 */
static int flush_lun(struct bench *b)
{
    struct virtio_scsi_cmd_resp rs;
    struct scsi_task *t = scsi_cdb_synchronizecache10(0, 0, 0, 0);
    int r;

    if (!t) {
        return -ENOMEM;
    }
    r = exec_cmd(b, t, NULL, 0, &rs);
    scsi_free_scsi_task(t);
    if (r == 0 && (rs.response != VIRTIO_SCSI_S_OK || rs.status != 0)) {
        fprintf(stderr, "vhost-scsi-bench: SYNCHRONIZE CACHE failed: response %u status 0x%02x\n",
                rs.response, rs.status);
        return -EIO;
    }
    if (r < 0) {
        fprintf(stderr, "vhost-scsi-bench: SYNCHRONIZE CACHE: %s\n", g_strerror(-r));
    }
    return r;
}

static int prepare_lun(struct bench *b)
{
    struct virtio_scsi_cmd_resp rs;
    uint8_t *buf = vfe_alloc(b->fe, 512, 64);
    struct scsi_task *tur, *rc = NULL;
    struct scsi_readcapacity16 *rc16;
    struct scsi_readcapacity10 *rc10;
    int r;

    if (!buf) {
        return -ENOMEM;
    }
    tur = scsi_cdb_testunitready();
    /* the power-on UNIT ATTENTION (and any others pending) is consumed here */
    for (int i = 0;; i++) {
        r = exec_cmd(b, tur, NULL, 0, &rs);
        if (r < 0) {
            fprintf(stderr, "vhost-scsi-bench: TEST UNIT READY: %s\n", g_strerror(-r));
            goto out;
        }
        if (rs.response != VIRTIO_SCSI_S_OK) {
            fprintf(stderr, "vhost-scsi-bench: LUN %u:%u: virtio-scsi response %u\n",
                    b->o->target, b->o->lun, rs.response);
            r = -ENODEV;
            goto out;
        }
        if (rs.status == 0) {
            break;
        }
        if (i == 8) {
            fprintf(stderr, "vhost-scsi-bench: LUN %u:%u not ready (status 0x%x)\n",
                    b->o->target, b->o->lun, rs.status);
            r = -EIO;
            goto out;
        }
    }
    rc = scsi_cdb_readcapacity16();   /* allocation length 32 */
    r = exec_cmd(b, rc, buf, 32, &rs);
    if (r == 0 && rs.response == VIRTIO_SCSI_S_OK && rs.status == 0 &&
        (rc16 = decode_datain(rc, buf, 32))) {
        b->num_blocks = rc16->returned_lba + 1;
        b->block_size = rc16->block_length;
    } else {
        if (rc) {
            scsi_free_scsi_task(rc);
        }
        rc = scsi_cdb_readcapacity10(0, 0);
        r = exec_cmd(b, rc, buf, 8, &rs);
        if (r < 0 || rs.response != VIRTIO_SCSI_S_OK || rs.status != 0 ||
            !(rc10 = decode_datain(rc, buf, 8))) {
            fprintf(stderr, "vhost-scsi-bench: READ CAPACITY failed\n");
            r = r < 0 ? r : -EIO;
            goto out;
        }
        b->num_blocks = (uint64_t)rc10->lba + 1;
        b->block_size = rc10->block_size;
    }
    if (b->block_size == 0 || b->block_size > (1u << 20) || b->o->bs % b->block_size) {
        fprintf(stderr, "vhost-scsi-bench: block size %u does not divide --bs %u\n",
                b->block_size, b->o->bs);
        r = -EINVAL;
        goto out;
    }
    b->io_blocks = b->o->bs / b->block_size;
    b->io_slots = b->num_blocks / b->io_blocks;
    if (b->io_slots == 0) {
        fprintf(stderr, "vhost-scsi-bench: LUN smaller than one I/O\n");
        r = -EINVAL;
        goto out;
    }
    r = 0;
out:
    if (tur) {
        scsi_free_scsi_task(tur);
    }
    if (rc) {
        scsi_free_scsi_task(rc);
    }
    vfe_free(b->fe, buf);
    return r;
}

/*
 * The options, as getopt_long's table and the --help text both come from
 * (the same style as vhost-scsi-target and vhost-scsi-ctl, so --help, the
 * errors and the bash completion agree).
 */
enum {
    OPT_SOCKET = 256, OPT_KERNEL, OPT_RW, OPT_RWMIX, OPT_BS, OPT_IODEPTH, OPT_QUEUES,
    OPT_FIRST_QUEUE, OPT_TIME, OPT_IOS, OPT_LUN, OPT_PID, OPT_JSON, OPT_VERIFY, OPT_NO_EVENT_IDX,
    OPT_INDIRECT, OPT_POLL, OPT_QUEUE_SIZE, OPT_DIRTY_LOG, OPT_IDLE,
    OPT_FLUSH_FIRST, OPT_PACKED, OPT_RATE, OPT_INFLIGHT, OPT_VERSION,
};

static const struct bench_option {
    const char *name;
    int id;             /* getopt_long's val: OPT_* or the short option */
    const char *arg;    /* the value's name in --help; NULL: takes none */
    const char *help;
} bench_options[] = {
    { "socket", OPT_SOCKET, "PATH", "vhost-user socket" },
    { "kernel", OPT_KERNEL, "WWPN[,TPGT]", "kernel /dev/vhost-scsi target (TPGT 1)" },
    { "rw", OPT_RW, "MODE", "read|write|randread|randwrite|rw|hostile|aptpl|unmap (default randread; "
      "hostile: WRITE SAME, UNMAP of up to 1M blocks and --bs READ/WRITE in turn; aptpl: "
      "PR OUT REGISTER AND IGNORE EXISTING KEY, APTPL on, a new key each; unmap: UNMAP of "
      "--bs at random)" },
    { "rwmixread", OPT_RWMIX, "PCT", "read % for --rw rw (50)" },
    { "bs", OPT_BS, "SIZE", "block size, e.g. 4k (default 4k)" },
    { "iodepth", OPT_IODEPTH, "N", "requests in flight per queue (16)" },
    { "queues", OPT_QUEUES, "N", "request queues (1)" },
    { "first-queue", OPT_FIRST_QUEUE, "N", "use request queues N..N+queues-1 only (several "
      "bench processes on one target, one queue each)" },
    { "time", OPT_TIME, "SECS", "run time in seconds (10)" },
    { "ios", OPT_IOS, "N", "stop after N I/Os" },
    { "rate", OPT_RATE, "IOPS", "issue at most IOPS I/Os per second, evenly spaced: what the "
      "back-end (--pid) costs at a given load" },
    { "lun", OPT_LUN, "T:L", "target:lun (0:0; with --kernel TPGT:0)" },
    { "pid", OPT_PID, "PID", "back-end pid for CPU accounting" },
    { "json", OPT_JSON, NULL, "print the result as JSON" },
    { "verify", OPT_VERIFY, NULL, "write a pattern, read it back and compare" },
    { "quiet", 'q', NULL, "no progress line" },
    { "no-event-idx", OPT_NO_EVENT_IDX, NULL, "do not negotiate VIRTIO_RING_F_EVENT_IDX" },
    { "indirect", OPT_INDIRECT, NULL, "use indirect descriptors" },
    { "poll", OPT_POLL, NULL, "busy-poll the used rings: no call signals, no waiting "
      "(takes a core)" },
    { "packed", OPT_PACKED, NULL, "packed virtqueues (VIRTIO_F_RING_PACKED; vhost-user, "
      "and the back-end must offer them)" },
    { "inflight", OPT_INFLIGHT, NULL, "share an inflight-tracking area with the back-end "
      "(GET/SET_INFLIGHT_FD) when it offers one, as QEMU 8.2+ does: the bookkeeping a guest's "
      "I/O pays for back-end restarts (vhost-user)" },
    { "queue-size", OPT_QUEUE_SIZE, "N", "ring entries (auto)" },
    { "dirty-log", OPT_DIRTY_LOG, NULL, "run with dirty logging on, as during a live "
      "migration (vhost-user)" },
    { "idle", OPT_IDLE, NULL, "connect and issue nothing for --time seconds: what the "
      "back-end (--pid) costs with a front-end attached and no I/O" },
    { "flush-first", OPT_FLUSH_FIRST, NULL, "send one SYNCHRONIZE CACHE before measuring, as a "
      "guest's first fsync or fio's rbd engine does (librbd's cache stays write-through until "
      "the first flush)" },
    { "version", OPT_VERSION, NULL, "print the version and exit" },
    { "help", 'h', NULL, "this text" },
};

static void usage(FILE *f)
{
    fprintf(f, "Usage: vhost-scsi-bench --socket PATH | --kernel WWPN[,TPGT] [OPTIONS]\n"
               "A vhost-scsi load generator: plays the guest of a vhost-scsi back-end.\n\n");
    for (size_t i = 0; i < G_N_ELEMENTS(bench_options); i++) {
        const struct bench_option *b = &bench_options[i];
        /* Entries with a short option have it as their id (-q, -h). */
        g_autofree char *opt = b->id < 256 ? g_strdup_printf("-%c, --%s", b->id, b->name)
                                           : g_strdup_printf("--%s", b->name);
        g_autofree char *head = g_strdup_printf("%s%s%s", opt, b->arg ? " " : "",
                                                b->arg ? b->arg : "");

        fprintf(f, "  %-24s %s\n", head, b->help);
    }
}

/* An integer option's value in [min, max]; false (said) if it is not one. */
static bool int_arg(const char *name, const char *s, gint64 min, gint64 max, gint64 *out)
{
    if (!g_ascii_string_to_signed(s, 10, min, max, out, NULL)) {
        fprintf(stderr, "vhost-scsi-bench: --%s '%s': expected a whole number\n", name, s);
        return false;
    }
    return true;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
    struct option longopts[G_N_ELEMENTS(bench_options) + 1] = { { 0 } };
    int c, idx;

    for (size_t i = 0; i < G_N_ELEMENTS(bench_options); i++) {
        longopts[i] = (struct option){ bench_options[i].name,
                                       bench_options[i].arg ? required_argument : no_argument,
                                       NULL, bench_options[i].id };
    }
    o->iodepth = 16;
    o->queues = 1;
    o->time_s = 10;
    o->rwmix = 50;
    while ((c = getopt_long(argc, argv, "qh", longopts, &idx)) != -1) {
        const char *name = c >= 256 ? longopts[idx].name : "";
        gint64 v;

        switch (c) {
        case OPT_SOCKET:
            o->socket = optarg;
            break;
        case OPT_KERNEL:
            o->kernel = optarg;
            break;
        case OPT_RW:
            o->rw = optarg;
            break;
        case OPT_BS:
            o->bs_str = optarg;
            break;
        case OPT_LUN:
            o->lun_str = optarg;
            break;
        case OPT_RWMIX: case OPT_IODEPTH: case OPT_QUEUES: case OPT_FIRST_QUEUE: case OPT_TIME:
        case OPT_PID: case OPT_QUEUE_SIZE:
            if (!int_arg(name, optarg, INT_MIN, INT_MAX, &v)) {
                return -EINVAL;
            }
            *(c == OPT_RWMIX ? &o->rwmix : c == OPT_IODEPTH ? &o->iodepth :
              c == OPT_QUEUES ? &o->queues : c == OPT_FIRST_QUEUE ? &o->first_queue :
              c == OPT_TIME ? &o->time_s : c == OPT_PID ? &o->pid : &o->queue_size) = (int)v;
            break;
        case OPT_IOS:
            if (!int_arg(name, optarg, G_MININT64, G_MAXINT64, &o->ios)) {
                return -EINVAL;
            }
            break;
        case OPT_RATE:
            if (!int_arg(name, optarg, 1, 1000000000, &o->rate)) {
                return -EINVAL;
            }
            break;
        case OPT_JSON:
            o->json = TRUE;
            break;
        case OPT_VERIFY:
            o->verify = TRUE;
            break;
        case 'q':
            o->quiet = TRUE;
            break;
        case OPT_NO_EVENT_IDX:
            o->no_event_idx = TRUE;
            break;
        case OPT_INDIRECT:
            o->indirect = TRUE;
            break;
        case OPT_POLL:
            o->poll = TRUE;
            break;
        case OPT_PACKED:
            o->packed = TRUE;
            break;
        case OPT_INFLIGHT:
            o->inflight = TRUE;
            break;
        case OPT_DIRTY_LOG:
            o->dirty_log = TRUE;
            break;
        case OPT_IDLE:
            o->idle = TRUE;
            break;
        case OPT_FLUSH_FIRST:
            o->flush_first = TRUE;
            break;
        case OPT_VERSION:
            printf("vhost-scsi-bench %s\n", VHOST_SCSI_VERSION);
            exit(0);
        case 'h':
            usage(stdout);
            exit(0);
        default:
            /* getopt_long said what was wrong. */
            fprintf(stderr, "(vhost-scsi-bench --help for usage)\n");
            return -EINVAL;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "vhost-scsi-bench: unexpected argument '%s'\n", argv[optind]);
        return -EINVAL;
    }
    if (!!o->socket == !!o->kernel) {
        fprintf(stderr, "vhost-scsi-bench: give exactly one of --socket and --kernel\n");
        return -EINVAL;
    }
    if (o->idle && (o->verify || o->ios || o->rate)) {
        fprintf(stderr, "vhost-scsi-bench: --idle issues no I/O: not with --verify, --ios or "
                "--rate\n");
        return -EINVAL;
    }
    if (o->packed && o->kernel) {
        fprintf(stderr, "vhost-scsi-bench: --packed: the kernel's vhost has split rings only\n");
        return -EINVAL;
    }
    if (o->inflight && o->kernel) {
        fprintf(stderr, "vhost-scsi-bench: --inflight: the kernel's vhost has no inflight "
                "tracking\n");
        return -EINVAL;
    }
    o->mode = RW_RANDREAD;
    if (o->rw) {
        unsigned i;
        for (i = 0; i < G_N_ELEMENTS(rw_mode_names) && strcmp(o->rw, rw_mode_names[i]); i++) {
        }
        if (i == G_N_ELEMENTS(rw_mode_names)) {
            fprintf(stderr, "vhost-scsi-bench: unknown --rw %s\n", o->rw);
            return -EINVAL;
        }
        o->mode = i;
    }
    o->bs = 4096;
    if (o->bs_str) {
        char *end;
        guint64 v = g_ascii_strtoull(o->bs_str, &end, 10);
        if (*end == 'k' || *end == 'K') {
            v <<= 10, end++;
        } else if (*end == 'm' || *end == 'M') {
            v <<= 20, end++;
        }
        if (*end || v == 0 || v > (16u << 20) || v % 512) {
            fprintf(stderr, "vhost-scsi-bench: bad --bs %s (multiple of 512, <= 16M)\n",
                    o->bs_str);
            return -EINVAL;
        }
        o->bs = v;
    }
    if (o->lun_str && sscanf(o->lun_str, "%u:%u", &o->target, &o->lun) != 2) {
        fprintf(stderr, "vhost-scsi-bench: bad --lun %s (want T:L)\n", o->lun_str);
        return -EINVAL;
    }
    if (o->target > 255 || o->lun > 16383) {
        fprintf(stderr, "vhost-scsi-bench: --lun out of range\n");
        return -EINVAL;
    }
    if (o->kernel) {
        char *comma = strchr(o->kernel, ',');
        o->tpgt = 1;
        if (comma) {
            *comma = 0;
            o->tpgt = atoi(comma + 1);
        }
        /* the kernel addresses a LUN's target by its TPGT */
        if (!o->lun_str) {
            o->target = o->tpgt;
        }
    }
    if (o->first_queue < 0 || o->first_queue + o->queues > 64) {
        fprintf(stderr, "vhost-scsi-bench: --first-queue + --queues must be <= 64\n");
        return -EINVAL;
    }
    if (o->iodepth < 1 || o->iodepth > 4096 || o->queues < 1 || o->queues > 64 ||
        o->time_s < 1 || o->ios < 0 || o->rwmix < 0 || o->rwmix > 100) {
        fprintf(stderr, "vhost-scsi-bench: --iodepth 1..4096, --queues 1..64, --time >= 1\n");
        return -EINVAL;
    }
    return 0;
}

/* Ends jb's top-level object and prints it as one line. */
static void json_print(JsonBuilder *jb)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = NULL;
    g_autofree char *text = NULL;

    json_builder_end_object(jb);
    root = json_builder_get_root(jb);
    json_generator_set_root(gen, root);
    text = json_generator_to_data(gen, NULL);
    printf("%s\n", text);
}

/* Whether the back-end keeps an inflight area: what was set up, not what was asked. */
static bool bench_inflight(struct bench *b)
{
    size_t size;

    return vfe_inflight_area(b->fe, &size) != NULL;
}

/* Whether the rings are packed: what was negotiated, as event_idx is reported. */
static bool bench_packed(struct bench *b)
{
    return vfe_features(b->fe) & (1ull << VIRTIO_F_RING_PACKED);
}

static void print_result(struct bench *b, double secs, const struct vfe_stats *st,
                         const struct proc_sample *p0, const struct proc_sample *p1)
{
    struct opts *o = b->o;
    uint64_t n = b->done ? b->done : 1;
    double iops = b->done / secs;
    double mbs = b->bytes / secs / 1e6;
    double p50 = hist_pct(&b->lat, 50) / 1e3, p99 = hist_pct(&b->lat, 99) / 1e3;
    double p999 = hist_pct(&b->lat, 99.9) / 1e3, lmax = b->lat.max / 1e3;
    double irq = (double)st->calls / n, kick = (double)st->kicks / n;
    long tck = sysconf(_SC_CLK_TCK);
    bool have_cpu = p0->ok && p1->ok;
    double usr = have_cpu ? (double)(p1->utime - p0->utime) / tck * 1e6 / n : 0;
    double sys = have_cpu ? (double)(p1->stime - p0->stime) / tck * 1e6 / n : 0;
    double csw = have_cpu ? (double)(p1->vcsw + p1->nvcsw - p0->vcsw - p0->nvcsw) / n : 0;

    if (o->json) {
        g_autoptr(JsonBuilder) jb = json_builder_new();

        json_builder_begin_object(jb);
        json_add_string(jb, "transport", o->socket ? "vhost-user" : "vhost-kernel");
        json_add_string(jb, "rw", o->verify ? "verify" : rw_mode_names[o->mode]);
        json_add_int(jb, "bs", o->bs);
        json_add_int(jb, "iodepth", o->iodepth);
        json_add_int(jb, "rate", o->rate);
        json_add_int(jb, "queues", o->queues);
        json_add_bool(jb, "packed", bench_packed(b));
        json_add_bool(jb, "inflight", bench_inflight(b));
        json_add_int(jb, "ios", (gint64)b->done);
        json_add_int(jb, "reads", (gint64)b->reads);
        json_add_int(jb, "writes", (gint64)b->writes);
        json_add_double(jb, "seconds", secs, 3);
        json_add_double(jb, "iops", iops, 1);
        json_add_double(jb, "mb_per_s", mbs, 2);
        json_builder_set_member_name(jb, "lat_us");
        json_builder_begin_object(jb);
        json_add_double(jb, "p50", p50, 1);
        json_add_double(jb, "p99", p99, 1);
        json_add_double(jb, "p99_9", p999, 1);
        json_add_double(jb, "max", lmax, 1);
        json_builder_end_object(jb);
        json_add_double(jb, "interrupts_per_io", irq, 4);
        json_add_double(jb, "kicks_per_io", kick, 4);
        json_add_bool(jb, "event_idx", vfe_features(b->fe) & (1ull << VIRTIO_RING_F_EVENT_IDX));
        json_add_int(jb, "verify_errors", (gint64)b->mismatches);
        json_add_int(jb, "unit_attentions", (gint64)b->unit_attentions);
        if (have_cpu) {
            json_builder_set_member_name(jb, "backend");
            json_builder_begin_object(jb);
            json_add_int(jb, "pid", o->pid);
            json_add_double(jb, "usr_us_per_io", usr, 3);
            json_add_double(jb, "sys_us_per_io", sys, 3);
            json_add_double(jb, "ctxsw_per_io", csw, 4);
            json_builder_end_object(jb);
        }
        json_print(jb);
        return;
    }
    printf("%s %s bs=%u iodepth=%d queues=%d%s%s: %" PRIu64 " I/Os in %.2f s\n",
           o->socket ? "vhost-user" : "vhost-kernel", o->verify ? "verify" : rw_mode_names[o->mode],
           o->bs, o->iodepth, o->queues, bench_packed(b) ? " ring=packed" : "",
           bench_inflight(b) ? " inflight" : "", b->done, secs);
    printf("  IOPS %.0f  bandwidth %.2f MB/s\n", iops, mbs);
    printf("  latency us: p50 %.1f  p99 %.1f  p99.9 %.1f  max %.1f\n", p50, p99, p999, lmax);
    printf("  interrupts/IO %.3f  kicks/IO %.3f\n", irq, kick);
    if (have_cpu) {
        printf("  back-end pid %d: usr %.2f us/IO  sys %.2f us/IO  context switches/IO %.3f\n",
               o->pid, usr, sys, csw);
    }
    if (o->verify) {
        printf("  verify: %" PRIu64 " blocks of %u bytes, %" PRIu64 " mismatches\n",
               b->verify_n, o->bs, b->mismatches);
    }
}

/*
 * --idle: the queues are set up and nothing is issued for --time seconds;
 * reports the back-end's CPU over that time (what a polling back-end
 * burns for an attached, quiet guest) and the signals it sent meanwhile.
 */
static int run_idle(struct bench *b)
{
    struct opts *o = b->o;
    struct proc_sample p0, p1;
    struct vfe_stats st0, st1;
    uint64_t t0 = now_ns(), t_end = t0 + (uint64_t)o->time_s * 1000000000ull;
    long tck = sysconf(_SC_CLK_TCK);

    vfe_get_stats(b->fe, &st0);
    proc_sample(o->pid, &p0);
    for (uint64_t t = t0; t < t_end; t = now_ns()) {
        int r = vfe_poll(b->fe, (int)MIN((t_end - t) / 1000000 + 1, 1000));
        if (r < 0) {
            fprintf(stderr, "vhost-scsi-bench: idle: %s\n", g_strerror(-r));
            return r;
        }
    }
    double secs = (now_ns() - t0) / 1e9;
    proc_sample(o->pid, &p1);
    vfe_get_stats(b->fe, &st1);
    bool have_cpu = p0.ok && p1.ok;
    double cores = have_cpu ? (double)(p1.utime + p1.stime - p0.utime - p0.stime) / tck / secs : 0;
    double csw = have_cpu ? (double)(p1.vcsw + p1.nvcsw - p0.vcsw - p0.nvcsw) / secs : 0;
    uint64_t calls = st1.calls - st0.calls;

    if (o->json) {
        g_autoptr(JsonBuilder) jb = json_builder_new();

        json_builder_begin_object(jb);
        json_add_string(jb, "transport", o->socket ? "vhost-user" : "vhost-kernel");
        json_add_string(jb, "rw", "idle");
        json_add_int(jb, "queues", o->queues);
        json_add_bool(jb, "packed", bench_packed(b));
        json_add_double(jb, "seconds", secs, 3);
        json_add_int(jb, "interrupts", (gint64)calls);
        if (have_cpu) {
            json_builder_set_member_name(jb, "backend");
            json_builder_begin_object(jb);
            json_add_int(jb, "pid", o->pid);
            json_add_double(jb, "cpu_cores", cores, 4);
            json_builder_end_object(jb);
        }
        json_print(jb);
        return 0;
    }
    printf("%s idle, %d queue(s)%s: %.2f s, %" PRIu64 " interrupts\n",
           o->socket ? "vhost-user" : "vhost-kernel", o->queues,
           bench_packed(b) ? " ring=packed" : "", secs, calls);
    if (have_cpu) {
        printf("  back-end pid %d: %.2f%% of a core, %.1f context switches/s\n", o->pid,
               cores * 100, csw);
    }
    return 0;
}

/* Runs until nothing is in flight and nothing more will be issued. */
static int run_loop(struct bench *b, uint64_t t_end_ns)
{
    uint64_t last_tick = now_ns(), last_done = b->done;
    uint64_t t0 = last_tick, last_progress = last_tick;

    if (b->o->rate && !b->parked) {
        /* one schedule for the whole run (--verify's write and read phases alike) */
        b->t_start = last_tick;
        b->ns_per_io_q16 = (uint64_t)((1000000000ull << 16) / (uint64_t)b->o->rate);
        b->parked = g_new(struct io *, b->nios);
        b->nparked = 0;
    }
    for (unsigned i = 0; i < b->nios; i++) {
        uint64_t t = now_ns();

        if (!rate_park(b, &b->ios[i], t) && submit_io(b, &b->ios[i], t) < 0) {
            return -EIO;
        }
    }
    vfe_kick(b->fe);
    /* --poll: look at the rings without sleeping; read the clock every 256 empty looks */
    int wait_ms = b->o->poll ? 0 : 1000;
    unsigned idle = 0;
    while (b->issued != b->done || b->nparked) {
        int wait = wait_ms;
        if (b->nparked) {
            /* slots parked by --rate: the next is due within microseconds, so never sleep */
            if (rate_release(b, now_ns())) {
                wait = 0;
            }
            vfe_kick(b->fe);
            if (b->issued == b->done) {
                continue;
            }
        }
        int r = vfe_poll(b->fe, wait);
        if (r < 0) {
            fprintf(stderr, "vhost-scsi-bench: %s\n", g_strerror(-r));
            return r;
        }
        vfe_kick(b->fe);
        if (r == 0 && wait == 0 && ++idle % 256) {
            continue;
        }
        uint64_t t = now_ns();
        if (r > 0) {
            last_progress = t;
        } else if (t - last_progress >= 5000000000ull) {
            fprintf(stderr, "vhost-scsi-bench: no completion for 5 s, %" PRIu64
                    " requests in flight\n", b->issued - b->done);
            return -ETIMEDOUT;
        }
        if ((t_end_ns && t >= t_end_ns) || interrupted) {
            b->running = false;
        }
        if (t - last_tick >= 1000000000ull && r >= 0) {
            if (!b->o->quiet) {
                fprintf(stderr, "\r[%3" PRIu64 "s] %8.0f IOPS  %" PRIu64 " done   ",
                        (uint64_t)((t - t0) / 1000000000ull),
                        (b->done - last_done) * 1e9 / (double)(t - last_tick), b->done);
            }
            last_tick = t;
            last_done = b->done;
        }
    }
    if (!b->o->quiet && t0 + 1000000000ull <= now_ns()) {
        fprintf(stderr, "\n");
    }
    return 0;
}

static int run(struct opts *po);

int main(int argc, char **argv)
{
    struct opts o = { 0 };

    return parse_opts(argc, argv, &o) < 0 ? 2 : run(&o);
}

static int run(struct opts *po)
{
    struct opts o = *po;

    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);

    unsigned depth = o.iodepth;
    unsigned qsize = o.queue_size;
    if (!qsize) {
        qsize = 128;
        while (qsize < 3 * depth + 8 && qsize < 32768) {
            qsize <<= 1;
        }
    } else if (qsize < (o.indirect ? 1 : 3) * depth) {
        /* without indirect descriptors a request takes 3 ring slots */
        fprintf(stderr, "vhost-scsi-bench: --queue-size %u cannot hold --iodepth %u\n",
                qsize, depth);
        return 2;
    }
    struct vfe_config cfg = {
        .transport = o.socket ? VFE_VHOST_USER : VFE_VHOST_KERNEL,
        .path = o.socket,
        .wwpn = o.kernel,
        .tpgt = o.tpgt,
        .num_request_queues = o.first_queue + o.queues,
        .queue_size = qsize,
        .mem_size = (size_t)o.queues * depth * o.bs + ((size_t)o.queues + 2) * qsize * 512 +
                    (16u << 20),
        .event_idx = !o.no_event_idx,
        .indirect = o.indirect,
        .batch = true,
        .poll = o.poll,
        .dirty_log = o.dirty_log,
        .packed = o.packed,
        .inflight = o.inflight,
    };
    struct bench b = { .o = &o, .rng = 0x2545f4914f6cdd1dull ^ (uint64_t)getpid() };
    int r = vfe_open(&cfg, &b.fe);
    if (r < 0) {
        fprintf(stderr, "vhost-scsi-bench: cannot start the front-end: %s\n", g_strerror(-r));
        return 1;
    }
    vfe_lun(b.lun, o.target, o.lun);
    int ret = 1;
    if (o.dirty_log && (r = vfe_log_start(b.fe)) < 0) {
        fprintf(stderr, "vhost-scsi-bench: cannot turn dirty logging on: %s\n", g_strerror(-r));
        goto out;
    }
    if (prepare_lun(&b) < 0 || (o.flush_first && flush_lun(&b) < 0)) {
        goto out;
    }

    b.nios = o.queues * depth;
    b.ios = g_new0(struct io, b.nios);
    for (unsigned i = 0; i < b.nios; i++) {
        struct io *io = &b.ios[i];
        io->b = &b;
        io->req.queue = o.first_queue + i % o.queues;
        memcpy(io->req.lun, b.lun, 8);
        io->req.data = vfe_alloc(b.fe, o.bs, 4096);
        io->req.data_len = o.bs;
        io->req.opaque = io;
        io->req.complete = io_complete;
        if (!io->req.data) {
            fprintf(stderr, "vhost-scsi-bench: out of front-end memory\n");
            goto out;
        }
    }

    if (o.idle) {
        ret = run_idle(&b) == 0 ? 0 : 1;
        goto out;
    }

    struct vfe_stats st0, st1;
    struct proc_sample p0, p1;
    vfe_get_stats(b.fe, &st0);
    proc_sample(o.pid, &p0);
    uint64_t t0 = now_ns();
    b.running = true;
    if (o.verify) {
        b.verify_n = o.ios ? (uint64_t)o.ios : 4096;
        if (b.verify_n > b.io_slots) {
            b.verify_n = b.io_slots;
        }
        r = run_loop(&b, 0);
        if (r == 0 && !b.failed) {
            b.verify_phase_read = true;
            b.verify_next = 0;
            b.running = true;
            r = run_loop(&b, 0);
        }
    } else {
        b.limit = o.ios;
        r = run_loop(&b, o.ios ? 0 : t0 + (uint64_t)o.time_s * 1000000000ull);
    }
    double secs = (now_ns() - t0) / 1e9;
    proc_sample(o.pid, &p1);
    vfe_get_stats(b.fe, &st1);
    st1.kicks -= st0.kicks;
    st1.calls -= st0.calls;
    st1.completions -= st0.completions;
    if (r == 0) {
        print_result(&b, secs, &st1, &p0, &p1);
    }
    ret = (r == 0 && !b.failed) ? 0 : 1;
    if (o.verify && r == 0 && b.reads != b.verify_n) {
        fprintf(stderr, "vhost-scsi-bench: verify read %" PRIu64 " of %" PRIu64 " blocks\n",
                b.reads, b.verify_n);
        ret = 1;
    }

out:
    /*
     * Stop first: requests still in flight (a run that gave up on them)
     * complete into b.ios while the queues stop, so it must outlive that.
     */
    vfe_stop(b.fe);
    if (b.ios) {
        for (unsigned i = 0; i < b.nios; i++) {
            vfe_free(b.fe, b.ios[i].req.data);
        }
        g_free(b.ios);
        g_free(b.parked);
    }
    vfe_close(b.fe);
    return ret;
}
