/*
 * The bench's run (include/bench/bench-run.h): a load generator that
 * plays the guest.  It drives a vhost-scsi back-end (our vhost-user
 * target or the kernel's /dev/vhost-scsi) directly through the front-end
 * layer, so the figures measure the back-end and the virtqueue path
 * without a VM in between.  Every slot of the queue depth resubmits from
 * its own completion, reading the clock once per I/O; the first failure
 * ends the run and is kept to be said once, after the figures.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "bench-lun.h"
#include "bench-proc.h"
#include "bench-response.h"
#include "bench-run.h"
#include "bench-stats.h"
#include "bench-workload.h"
#include "vhost-frontend.h"

#define NS_PER_S 1000000000ull
#define STALL_NS (5 * NS_PER_S)         /* no completion this long: the back-end is stuck */
#define POLL_CLOCK_EVERY 256            /* --poll reads the clock every this many empty looks */
#define VERIFY_BLOCKS 4096              /* --verify without --ios */

struct bench;

struct io {
    struct vfe_req req;
    struct bench *b;
    uint64_t start_ns;
    uint64_t lba;
    bool is_write;
    unsigned ua_retries;      /* this I/O's unit attentions so far */
};

struct bench {
    const struct bench_opts *o;
    const struct bench_hooks *h;
    struct vfe *fe;
    struct bench_lun lun;
    unsigned hostile_next;       /* BENCH_RW_HOSTILE: which command comes next; APTPL: the key */
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
    GError *error;               /* the first failure; the run stops issuing */
    uint64_t issued, done, bytes, reads, writes;
    uint64_t limit;              /* 0: time-bound */
    struct bench_hist lat;

    /* verify: positions 0..verify_n-1 */
    bool verify_phase_read;
    uint64_t verify_next, verify_n, mismatches;
    uint64_t unit_attentions;
};

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static void failed(struct bench *b, GError *e)
{
    if (!b->error) {
        b->error = e;
    } else {
        g_error_free(e);
    }
    b->running = false;
}

static bool stopped(const struct bench *b)
{
    return b->h->stop && *b->h->stop;
}

static bool pick_next(struct bench *b, struct io *io)
{
    const struct bench_opts *o = b->o;
    uint64_t slot, lba;
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
        slot = o->mode == BENCH_RW_READ || o->mode == BENCH_RW_WRITE ?
               b->seq_next++ % b->io_slots : xorshift(&b->rng) % b->io_slots;
        write = o->mode == BENCH_RW_WRITE || o->mode == BENCH_RW_RANDWRITE ||
                (o->mode == BENCH_RW_RW && (int)(xorshift(&b->rng) % 100) >= o->rwmix);
    }
    lba = slot * b->io_blocks;
    io->req.tag = ++b->tag;
    io->lba = lba;
    io->is_write = true;
    if (!o->verify && o->mode == BENCH_RW_HOSTILE) {
        io->lba = 0;
        bench_build_hostile(&io->req, b->hostile_next++ % BENCH_HOSTILE_KINDS,
                            b->lun.num_blocks, b->io_blocks, b->lun.block_size);
    } else if (!o->verify && o->mode == BENCH_RW_APTPL) {
        io->lba = 0;
        bench_build_aptpl(&io->req, ++b->hostile_next);
    } else if (!o->verify && o->mode == BENCH_RW_UNMAP) {
        bench_build_unmap(&io->req, lba, b->io_blocks);
    } else {
        io->is_write = write;
        bench_build_rw(&io->req, lba, b->io_blocks, b->lun.block_size, write);
        if (write && o->verify) {
            bench_pattern_fill(io->req.data, lba * b->lun.block_size, o->bs);
        }
    }
    return true;
}

static int submit_io(struct bench *b, struct io *io, uint64_t t)
{
    int r;

    if (!pick_next(b, io)) {
        return 0;
    }
    io->start_ns = t;
    r = vfe_submit(b->fe, &io->req);
    if (r < 0) {
        failed(b, g_error_new(BENCH_ERROR, BENCH_ERROR_FAILED, "submit: %s", g_strerror(-r)));
        return r;
    }
    b->issued++;
    return 1;
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

static void check_read(struct bench *b, struct io *io)
{
    uint64_t bad = bench_pattern_check(io->req.data, io->lba * b->lun.block_size, b->o->bs);

    if (bad) {
        if (!b->mismatches && !b->error) {
            b->error = g_error_new(BENCH_ERROR, BENCH_ERROR_FAILED,
                                   "verify: mismatch at byte %" G_GUINT64_FORMAT " (lba %"
                                   G_GUINT64_FORMAT ")", bad - 1, io->lba);
        }
        b->mismatches++;
    }
}

static void io_complete(struct vfe_req *req)
{
    struct io *io = req->opaque;
    struct bench *b = io->b;
    uint64_t t = now_ns();

    /* A LUN added or grown beside ours, a reset: the same command again. */
    if (bench_is_unit_attention(&req->resp) && io->ua_retries < BENCH_UA_RETRIES &&
        vfe_submit(b->fe, &io->req) == 0) {
        io->ua_retries++;
        b->unit_attentions++;
        return;
    }
    io->ua_retries = 0;
    b->done++;
    if (req->resp.response != VIRTIO_SCSI_S_OK || req->resp.status != 0) {
        g_autofree char *words = bench_response_describe(&req->resp);

        failed(b, g_error_new(BENCH_ERROR, BENCH_ERROR_FAILED, "%s lba %" G_GUINT64_FORMAT
                              " failed: %s", io->is_write ? "write" : "read", io->lba, words));
        return;
    }
    bench_hist_add(&b->lat, t - io->start_ns);
    b->bytes += b->o->bs;
    if (io->is_write) {
        b->writes++;
    } else {
        b->reads++;
        if (b->o->verify) {
            check_read(b, io);
        }
    }
    if (b->running && !rate_park(b, io, t)) {
        /* the completion's clock reading is the next request's start: one per I/O */
        submit_io(b, io, t);
    }
}

/* Runs until nothing is in flight and nothing more will be issued. */
static int run_loop(struct bench *b, uint64_t t_end_ns, GError **err)
{
    uint64_t last_tick = now_ns(), last_done = b->done;
    uint64_t t0 = last_tick, last_progress = last_tick;
    /* --poll: look at the rings without sleeping */
    int wait_ms = b->o->poll ? 0 : 1000;
    unsigned idle = 0;

    if (b->o->rate && !b->parked) {
        /* one schedule for the whole run (--verify's write and read phases alike) */
        b->t_start = last_tick;
        b->ns_per_io_q16 = (uint64_t)((NS_PER_S << 16) / (uint64_t)b->o->rate);
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
    while (b->issued != b->done || b->nparked) {
        int wait = wait_ms, r;
        uint64_t t;

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
        r = vfe_poll(b->fe, wait);
        if (r < 0) {
            g_set_error(err, BENCH_ERROR, BENCH_ERROR_FAILED, "%s", g_strerror(-r));
            return r;
        }
        vfe_kick(b->fe);
        if (r == 0 && wait == 0 && ++idle % POLL_CLOCK_EVERY) {
            continue;
        }
        t = now_ns();
        if (r > 0) {
            last_progress = t;
        } else if (t - last_progress >= STALL_NS) {
            g_set_error(err, BENCH_ERROR, BENCH_ERROR_FAILED, "no completion for 5 s, %"
                        G_GUINT64_FORMAT " requests in flight", b->issued - b->done);
            return -ETIMEDOUT;
        }
        if ((t_end_ns && t >= t_end_ns) || stopped(b)) {
            b->running = false;
        }
        if (t - last_tick >= NS_PER_S) {
            if (b->h->progress) {
                b->h->progress((t - t0) / NS_PER_S,
                               (double)(b->done - last_done) * 1e9 / (double)(t - last_tick),
                               b->done, b->h->opaque);
            }
            last_tick = t;
            last_done = b->done;
        }
    }
    return 0;
}

static void result_head(const struct bench *b, struct bench_result *res)
{
    uint64_t features = vfe_features(b->fe);
    size_t size;

    res->transport = b->o->socket ? "vhost-user" : "vhost-kernel";
    res->rw = b->o->idle ? "idle" : b->o->verify ? "verify" : bench_rw_name(b->o->mode);
    res->bs = b->o->bs;
    res->iodepth = b->o->iodepth;
    res->rate = b->o->rate;
    res->queues = b->o->queues;
    /* what was set up, not what was asked */
    res->packed = features & (1ull << VIRTIO_F_RING_PACKED);
    res->event_idx = features & (1ull << VIRTIO_RING_F_EVENT_IDX);
    res->inflight = vfe_inflight_area(b->fe, &size) != NULL;
    res->pid = b->o->pid;
}

/*
 * --idle: the queues are set up and nothing is issued for --time seconds;
 * the back-end's CPU over that time (what a polling back-end burns for an
 * attached, quiet guest) and the signals it sent meanwhile.
 */
static bool run_idle(struct bench *b, struct bench_result *res, GError **err)
{
    struct bench_proc_sample p0, p1;
    struct vfe_stats st0, st1;
    uint64_t t0 = now_ns(), t_end = t0 + (uint64_t)b->o->time_s * NS_PER_S;
    double tck = (double)sysconf(_SC_CLK_TCK);

    vfe_get_stats(b->fe, &st0);
    bench_proc_sample(b->o->pid, &p0);
    for (uint64_t t = t0; t < t_end && !stopped(b); t = now_ns()) {
        int r = vfe_poll(b->fe, (int)MIN((t_end - t) / 1000000 + 1, 1000));

        if (r < 0) {
            g_set_error(err, BENCH_ERROR, BENCH_ERROR_FAILED, "idle: %s", g_strerror(-r));
            return false;
        }
    }
    res->seconds = (double)(now_ns() - t0) / 1e9;
    bench_proc_sample(b->o->pid, &p1);
    vfe_get_stats(b->fe, &st1);
    res->idle = true;
    result_head(b, res);
    res->interrupts = st1.calls - st0.calls;
    res->have_backend = p0.ok && p1.ok;
    if (res->have_backend) {
        res->cpu_cores = (double)(p1.utime + p1.stime - p0.utime - p0.stime) / tck / res->seconds;
        res->ctxsw_per_s = (double)(p1.vcsw + p1.nvcsw - p0.vcsw - p0.nvcsw) / res->seconds;
    }
    return true;
}

static void result_io(const struct bench *b, double secs, const struct vfe_stats *st,
                      const struct bench_proc_sample *p0, const struct bench_proc_sample *p1,
                      struct bench_result *res)
{
    double n = (double)(b->done ? b->done : 1);
    double tck = (double)sysconf(_SC_CLK_TCK);

    result_head(b, res);
    res->seconds = secs;
    res->ios = b->done;
    res->reads = b->reads;
    res->writes = b->writes;
    res->iops = (double)b->done / secs;
    res->mb_per_s = (double)b->bytes / secs / 1e6;
    res->lat_us_p50 = (double)bench_hist_pct(&b->lat, 50) / 1e3;
    res->lat_us_p99 = (double)bench_hist_pct(&b->lat, 99) / 1e3;
    res->lat_us_p99_9 = (double)bench_hist_pct(&b->lat, 99.9) / 1e3;
    res->lat_us_max = (double)b->lat.max / 1e3;
    res->interrupts_per_io = (double)st->calls / n;
    res->kicks_per_io = (double)st->kicks / n;
    res->unit_attentions = b->unit_attentions;
    res->verify = b->o->verify;
    res->verify_blocks = b->verify_n;
    res->verify_errors = b->mismatches;
    res->have_backend = p0->ok && p1->ok;
    if (res->have_backend) {
        res->usr_us_per_io = (double)(p1->utime - p0->utime) / tck * 1e6 / n;
        res->sys_us_per_io = (double)(p1->stime - p0->stime) / tck * 1e6 / n;
        res->ctxsw_per_io = (double)(p1->vcsw + p1->nvcsw - p0->vcsw - p0->nvcsw) / n;
    }
}

/* The measured part: the I/O loop (twice for --verify) between two samples. */
static bool run_io(struct bench *b, struct bench_result *res, bool *have_result, GError **err)
{
    const struct bench_opts *o = b->o;
    struct vfe_stats st0, st1;
    struct bench_proc_sample p0, p1;
    uint64_t t0;
    int r;

    vfe_get_stats(b->fe, &st0);
    bench_proc_sample(o->pid, &p0);
    t0 = now_ns();
    b->running = true;
    if (o->verify) {
        b->verify_n = MIN(o->ios ? (uint64_t)o->ios : VERIFY_BLOCKS, b->io_slots);
        r = run_loop(b, 0, err);
        if (r == 0 && !b->error) {
            b->verify_phase_read = true;
            b->verify_next = 0;
            b->running = true;
            r = run_loop(b, 0, err);
        }
    } else {
        b->limit = (uint64_t)o->ios;
        r = run_loop(b, o->ios ? 0 : t0 + (uint64_t)o->time_s * NS_PER_S, err);
    }
    if (r < 0) {
        if (!*err && b->error) {
            g_propagate_error(err, g_steal_pointer(&b->error));
        }
        return false;
    }
    double secs = (double)(now_ns() - t0) / 1e9;

    bench_proc_sample(o->pid, &p1);
    vfe_get_stats(b->fe, &st1);
    st1.kicks -= st0.kicks;
    st1.calls -= st0.calls;
    result_io(b, secs, &st1, &p0, &p1, res);
    *have_result = true;
    if (b->error) {
        g_propagate_error(err, g_steal_pointer(&b->error));
        return false;
    }
    if (o->verify && b->reads != b->verify_n) {
        g_set_error(err, BENCH_ERROR, BENCH_ERROR_FAILED, "verify read %" G_GUINT64_FORMAT
                    " of %" G_GUINT64_FORMAT " blocks", b->reads, b->verify_n);
        return false;
    }
    return true;
}

static bool setup_ios(struct bench *b, GError **err)
{
    const struct bench_opts *o = b->o;

    b->nios = (unsigned)(o->queues * o->iodepth);
    b->ios = g_new0(struct io, b->nios);
    for (unsigned i = 0; i < b->nios; i++) {
        struct io *io = &b->ios[i];

        io->b = b;
        io->req.queue = (unsigned)o->first_queue + i % (unsigned)o->queues;
        memcpy(io->req.lun, b->lun.addr, 8);
        io->req.data = vfe_alloc(b->fe, o->bs, 4096);
        io->req.data_len = o->bs;
        io->req.opaque = io;
        io->req.complete = io_complete;
        if (!io->req.data) {
            g_set_error(err, BENCH_ERROR, BENCH_ERROR_FAILED, "out of front-end memory");
            return false;
        }
    }
    return true;
}

/* Connects the front-end, the LUN and --bs: what every run needs before its first I/O. */
static bool setup(struct bench *b, GError **err)
{
    const struct bench_opts *o = b->o;
    struct vfe_config cfg = {
        .transport = o->socket ? VFE_VHOST_USER : VFE_VHOST_KERNEL,
        .path = o->socket,
        .wwpn = o->wwpn,
        .tpgt = o->tpgt,
        .num_request_queues = (unsigned)(o->first_queue + o->queues),
        .queue_size = (unsigned)o->queue_size,
        .mem_size = (size_t)o->queues * (size_t)o->iodepth * o->bs +
                    ((size_t)o->queues + 2) * (size_t)o->queue_size * 512 + (16u << 20),
        .event_idx = !o->no_event_idx,
        .indirect = o->indirect,
        .batch = true,
        .poll = o->poll,
        .dirty_log = o->dirty_log,
        .packed = o->packed,
        .inflight = o->inflight,
    };
    int r = vfe_open(&cfg, &b->fe);

    if (r < 0) {
        g_set_error(err, BENCH_ERROR, BENCH_ERROR_FAILED, "cannot start the front-end: %s",
                    g_strerror(-r));
        return false;
    }
    b->lun = (struct bench_lun){ .fe = b->fe, .target = o->target, .lun = o->lun, .tag = &b->tag };
    vfe_lun(b->lun.addr, o->target, o->lun);
    if (o->dirty_log && (r = vfe_log_start(b->fe)) < 0) {
        g_set_error(err, BENCH_ERROR, BENCH_ERROR_FAILED, "cannot turn dirty logging on: %s",
                    g_strerror(-r));
        return false;
    }
    if (!bench_lun_prepare(&b->lun, err) || (o->flush_first && !bench_lun_flush(&b->lun, err))) {
        return false;
    }
    if (b->lun.block_size == 0 || b->lun.block_size > (1u << 20) || o->bs % b->lun.block_size) {
        g_set_error(err, BENCH_ERROR, BENCH_ERROR_FAILED, "block size %u does not divide --bs %u",
                    b->lun.block_size, o->bs);
        return false;
    }
    b->io_blocks = o->bs / b->lun.block_size;
    b->io_slots = b->lun.num_blocks / b->io_blocks;
    if (b->io_slots == 0) {
        g_set_error(err, BENCH_ERROR, BENCH_ERROR_FAILED, "LUN smaller than one I/O");
        return false;
    }
    return setup_ios(b, err);
}

struct bench *bench_open(const struct bench_opts *o, GError **err)
{
    struct bench *b = g_new0(struct bench, 1);

    b->o = o;
    b->rng = 0x2545f4914f6cdd1dull ^ (uint64_t)getpid();
    if (!setup(b, err)) {
        bench_close(b);
        return NULL;
    }
    return b;
}

bool bench_run(struct bench *b, const struct bench_hooks *h, struct bench_result *res,
               bool *have_result, GError **err)
{
    memset(res, 0, sizeof(*res));
    *have_result = false;
    b->h = h;
    if (b->o->idle) {
        return *have_result = run_idle(b, res, err);
    }
    return run_io(b, res, have_result, err);
}

void bench_close(struct bench *b)
{
    if (!b) {
        return;
    }
    /*
     * Stop first: requests still in flight (a run that gave up on them)
     * complete into b->ios while the queues stop, so it must outlive that.
     */
    if (b->fe) {
        vfe_stop(b->fe);
    }
    for (unsigned i = 0; b->ios && i < b->nios; i++) {
        vfe_free(b->fe, b->ios[i].req.data);
    }
    g_free(b->ios);
    g_free(b->parked);
    if (b->error) {
        g_error_free(b->error);
    }
    if (b->fe) {
        vfe_close(b->fe);
    }
    g_free(b);
}
