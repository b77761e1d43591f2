/*
 * A hostile front-end next to a well-behaved one on the same I/O thread
 * of the real daemon (--threads 1: every request queue of every
 * connection is served by one thread).  The hostile one keeps its queue
 * full of the most expensive commands there are: WRITE SAME of a pattern
 * and of zeros (UNMAP) and an UNMAP, each over its whole 64 MiB LUN, and
 * 8 MiB READs and WRITEs; the neighbour runs QD1 4 KiB reads on a LUN of
 * its own.  Speed is never asserted here (the figures are
 * scripts/neighbour-bench.sh's, docs/performance.md); what is asserted is
 * the structure that keeps the neighbour's latency bounded: the thread
 * serves the neighbour between the pieces of the hostile commands, so
 * while the hostile front-end completes its commands the neighbour
 * completes many times as many requests.  A thread that ran a command's
 * pieces back to back (no yield) would serve the neighbour once per batch
 * of hostile commands, fewer times than it completes them; and every
 * command of both completes GOOD.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <poll.h>
#include <string.h>

#include <glib.h>
#include <linux/virtio_scsi.h>

#include "proto-util.h"

#define HOSTILE_LUN 0
#define NEIGHBOUR_LUN 1
#define HOSTILE_BLOCKS (64u * 1024 * 1024 / 512)
#define HOSTILE_QD 5                /* one of each kind of command in flight */
#define HOSTILE_RW_BYTES (8u << 20)
#define HOSTILE_COMMANDS 25         /* the flood: five of each kind */
/*
 * The neighbour must complete at least this many requests per hostile
 * command completed.  A whole-LUN WRITE SAME or UNMAP is 64 pieces, each
 * followed by a turn of the neighbour; run back to back, the neighbour
 * would get one turn per batch of HOSTILE_QD commands (a ratio of 1/5).
 */
#define MIN_RATIO 2
#define FLOOD_TIMEOUT_US (120 * G_TIME_SPAN_SECOND)

struct side {
    struct vfe *fe;
    unsigned done, bad, in_flight;
    bool stop;
};

struct hostile_req {
    struct vfe_req req;
    struct side *s;
    unsigned next;              /* which kind of command it sends next */
};

/* The next expensive command of slot h (WRITE SAME x2, UNMAP, READ, WRITE in turn). */
static void hostile_build(struct hostile_req *h)
{
    struct vfe_req *r = &h->req;
    uint8_t *d = r->data;
    unsigned kind = h->next++ % 5;

    memset(r->cdb, 0, sizeof(r->cdb));
    r->data_in = false;
    switch (kind) {
    case 0:                                      /* WRITE SAME(16) of a pattern block */
        r->cdb[0] = 0x93;
        pu_put_be(r->cdb + 10, HOSTILE_BLOCKS, 4);
        memset(d, 0xa5, 512);
        r->data_len = 512;
        break;
    case 1:                                      /* WRITE SAME(16), UNMAP, NDOB */
        r->cdb[0] = 0x93;
        r->cdb[1] = 0x08 | 0x01;
        pu_put_be(r->cdb + 10, HOSTILE_BLOCKS, 4);
        r->data_len = 0;
        break;
    case 2:                                      /* UNMAP of the whole LUN */
        r->cdb[0] = 0x42;
        pu_put_be(r->cdb + 7, 24, 2);
        memset(d, 0, 24);
        pu_put_be(d, 22, 2);
        pu_put_be(d + 2, 16, 2);
        pu_put_be(d + 16, HOSTILE_BLOCKS, 4);
        r->data_len = 24;
        break;
    default:                                     /* 8 MiB READ(16) or WRITE(16) */
        pu_make_rw16(r, kind == 4, 0, HOSTILE_RW_BYTES / 512);
        r->data_len = HOSTILE_RW_BYTES;
        break;
    }
}

static void counted(struct side *s, struct vfe_req *r)
{
    s->in_flight--;
    s->done++;
    if (r->resp.response != VIRTIO_SCSI_S_OK || r->resp.status != 0) {
        s->bad++;
    }
}

static void hostile_done(struct vfe_req *r)
{
    struct hostile_req *h = r->opaque;

    counted(h->s, r);
    if (h->s->done + h->s->in_flight < HOSTILE_COMMANDS) {
        hostile_build(h);
        g_assert_cmpint(vfe_submit(h->s->fe, r), ==, 0);
        h->s->in_flight++;
    }
}

static void neighbour_done(struct vfe_req *r)
{
    struct side *s = r->opaque;

    counted(s, r);
    if (!s->stop) {
        g_assert_cmpint(vfe_submit(s->fe, r), ==, 0);
        s->in_flight++;
    }
}

/* Waits for either side's call signal (bounded), then reaps both. */
static void reap(struct side *a, struct side *b)
{
    struct pollfd p[2] = { { .fd = vfe_call_fd(a->fe, 2), .events = POLLIN },
                           { .fd = vfe_call_fd(b->fe, 2), .events = POLLIN } };

    g_assert_cmpint(poll(p, 2, PU_TIMEOUT_MS), >=, 0);
    g_assert_cmpint(vfe_poll(a->fe, 0), >=, 0);
    g_assert_cmpint(vfe_poll(b->fe, 0), >=, 0);
}

static void test_neighbour_served_between_hostile_pieces(void)
{
    static const char *const args[] = { "--lun", "0=ram:64M", "--lun", "1=ram:16M",
                                        "--queues", "1", "--threads", "1", NULL };
    struct vfe_config hc = { .num_request_queues = 1, .queue_size = 16,
                             .mem_size = (HOSTILE_QD + 1) * (size_t)HOSTILE_RW_BYTES,
                             .event_idx = true };
    struct side hostile = { 0 }, neighbour = { 0 };
    struct hostile_req h[HOSTILE_QD];
    struct vfe_req nr = { 0 };
    unsigned during;
    struct pu_daemon d;
    gint64 deadline;

    pu_daemon_init(&d);
    pu_daemon_start(&d, args);
    hostile.fe = pu_connect_cfg(&d, &hc);
    neighbour.fe = pu_connect(&d, 1);
    pu_make_ready(hostile.fe, HOSTILE_LUN);
    pu_make_ready(neighbour.fe, NEIGHBOUR_LUN);

    vfe_lun(nr.lun, 0, NEIGHBOUR_LUN);
    nr.data = vfe_alloc(neighbour.fe, 4096, 4096);
    g_assert_nonnull(nr.data);
    nr.data_len = 4096;
    nr.data_in = true;
    nr.opaque = &neighbour;
    nr.complete = neighbour_done;
    pu_make_rw16(&nr, false, 8, 8);
    g_assert_cmpint(vfe_submit(neighbour.fe, &nr), ==, 0);
    neighbour.in_flight = 1;
    for (unsigned i = 0; i < HOSTILE_QD; i++) {
        h[i] = (struct hostile_req){ .s = &hostile, .next = i };
        vfe_lun(h[i].req.lun, 0, HOSTILE_LUN);
        h[i].req.data = vfe_alloc(hostile.fe, HOSTILE_RW_BYTES, 4096);
        g_assert_nonnull(h[i].req.data);
        h[i].req.opaque = &h[i];
        h[i].req.complete = hostile_done;
        hostile_build(&h[i]);
        g_assert_cmpint(vfe_submit(hostile.fe, &h[i].req), ==, 0);
        hostile.in_flight++;
    }

    /* The flood: until the hostile front-end has had all its commands answered. */
    deadline = g_get_monotonic_time() + FLOOD_TIMEOUT_US;
    while (hostile.in_flight) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        reap(&hostile, &neighbour);
    }
    during = neighbour.done;
    neighbour.stop = true;
    while (neighbour.in_flight) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        reap(&hostile, &neighbour);
    }
    g_printerr("# hostile: %u commands (%u of them whole-LUN WRITE SAME or UNMAP); "
               "neighbour meanwhile: %u reads\n", hostile.done, HOSTILE_COMMANDS * 3 / 5, during);
    g_assert_cmpuint(hostile.done, ==, HOSTILE_COMMANDS);
    g_assert_cmpuint(hostile.bad, ==, 0);
    g_assert_cmpuint(neighbour.bad, ==, 0);
    g_assert_cmpuint(during, >=, MIN_RATIO * HOSTILE_COMMANDS);

    for (unsigned i = 0; i < HOSTILE_QD; i++) {
        vfe_free(hostile.fe, h[i].req.data);
    }
    vfe_free(neighbour.fe, nr.data);
    vfe_close(hostile.fe);
    vfe_close(neighbour.fe);
    g_assert_cmpint(pu_daemon_stop(&d, false), ==, 0);
    pu_daemon_cleanup(&d);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/neighbour/served-between-hostile-pieces",
                    test_neighbour_served_between_hostile_pieces);
    return g_test_run();
}
