/*
 * Persistent reservations end to end (docs/reservations.md): the real
 * daemon with one file LUN mapped in three controllers, each its own
 * initiator name and so its own I_T nexus, and a front-end on each:
 * node A (the default controller), node B (vm2, iqn.2026-12.test:node-b)
 * and an unregistered path C (vm3).
 *  - the fence: A and B register, A reserves Write Exclusive - Registrants
 *    Only; C's write gets RESERVATION CONFLICT while its read runs and
 *    B's write runs; B does PREEMPT AND ABORT of A's key; A is told
 *    REGISTRATIONS PREEMPTED and its writes conflict, while B writes and
 *    reads back many blocks in flight; READ FULL STATUS names B by its
 *    iSCSI TransportID and relative port;
 *  - with APTPL the state file beside the LUN's file holds it, and a
 *    daemon restarted on it has B's reservation back: C still conflicts,
 *    B writes;
 *  - without APTPL a restart finds no registration and no reservation;
 *  - a corrupt state file stops the daemon from starting, with a message
 *    naming the LUN and the file;
 *  - a ram LUN refuses APTPL (PTPL_C 0) unless --pr-dir gives it a
 *    directory, where its state file then keeps the reservation across a
 *    restart; --pr-dir must be a directory.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "control-client.h"
#include "proto-util.h"
#include "scsi-cmd.h"

#define LUN_BYTES (16u << 20)
#define BS 512
#define KEY_A 0xa0a0a0a0a0a0a0a0ull
#define KEY_B 0xb0b0b0b0b0b0b0b0ull
#define WE_RO 5
#define APTPL 0x01
#define NODE_B "iqn.2026-12.test:node-b"

#define GOOD 0x00
#define CHECK_CONDITION 0x02
#define CONFLICT 0x18

struct cluster {
    struct pu_daemon d;
    char *img, *state, *ctl;
    char *lun_arg;
    char *pr_dir;               /* --pr-dir, or NULL */
    int fd;                     /* control connection */
    struct vfe *a, *b, *c;
};

static void controller(struct cluster *t, const char *name, const char *initiator)
{
    g_autofree char *sock = g_strdup_printf("%s/%s.sock", t->d.dir, name);

    json_node_unref(pu_ctl_ok(t->fd, "controller-add",
                              pu_jobj("name", pu_jstr(name), "socket", pu_jstr(sock),
                                      "queues", pu_jint(1), "initiator", pu_jstr(initiator),
                                      NULL)));
    json_node_unref(pu_ctl_ok(t->fd, "lun-map",
                              pu_jobj("controller", pu_jstr(name), "lun", pu_jint(0),
                                      "backend", pu_jstr("lun0:0"), NULL)));
}

static struct vfe *front_end_at(struct cluster *t, const char *name)
{
    g_autofree char *sock = g_strdup_printf("%s/%s.sock", t->d.dir, name);
    struct vfe *fe = pu_connect_at(sock, 1);

    pu_make_ready(fe, 0);
    return fe;
}

/* Starts (or restarts) the daemon and connects A, B and C. */
static void up(struct cluster *t)
{
    const char *args[] = { "--lun", t->lun_arg, "--control", t->ctl, "--queues", "1",
                           t->pr_dir ? "--pr-dir" : NULL, t->pr_dir, NULL };

    pu_daemon_start(&t->d, args);
    t->fd = ctl_client_connect(t->ctl);
    g_assert_cmpint(t->fd, >=, 0);
    controller(t, "vm2", NODE_B);
    controller(t, "vm3", "iqn.2026-12.test:unregistered");
    t->a = pu_connect(&t->d, 1);
    pu_make_ready(t->a, 0);
    t->b = front_end_at(t, "vm2");
    t->c = front_end_at(t, "vm3");
}

static void down(struct cluster *t)
{
    vfe_close(t->a);
    vfe_close(t->b);
    vfe_close(t->c);
    close(t->fd);
    g_assert_cmpint(pu_daemon_stop(&t->d, false), ==, 0);
}

static void cluster_init(struct cluster *t)
{
    int fd;

    memset(t, 0, sizeof(*t));
    pu_daemon_init(&t->d);
    t->d.capture_log = true;
    t->img = g_build_filename(t->d.dir, "disk.img", NULL);
    t->state = g_strdup_printf("%s.pr", t->img);
    t->ctl = g_build_filename(t->d.dir, "control.sock", NULL);
    t->lun_arg = g_strdup_printf("0=file:%s", t->img);
    fd = open(t->img, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, LUN_BYTES), ==, 0);
    close(fd);
}

static void cluster_free(struct cluster *t)
{
    pu_daemon_cleanup(&t->d);
    g_free(t->img);
    g_free(t->state);
    g_free(t->ctl);
    g_free(t->lun_arg);
    g_free(t->pr_dir);
}

/* ---- commands ----------------------------------------------------------- */

static struct vfe_req pr_out(struct vfe *fe, uint8_t sa, uint8_t type, uint64_t key,
                             uint64_t sa_key, uint8_t flags)
{
    uint8_t cdb[10] = { 0x5f, sa, type, 0, 0, 0, 0, 0, 24, 0 };
    uint8_t *p = vfe_alloc(fe, 24, 64);
    struct vfe_req r;

    memset(p, 0, 24);
    pu_put_be(p, key, 8);
    pu_put_be(p + 8, sa_key, 8);
    p[20] = flags;
    pu_cmd(fe, 0, cdb, sizeof(cdb), p, 24, false, &r);
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
    vfe_free(fe, p);
    return r;
}

static uint8_t pr_out_status(struct vfe *fe, uint8_t sa, uint8_t type, uint64_t key,
                             uint64_t sa_key, uint8_t flags)
{
    return pr_out(fe, sa, type, key, sa_key, flags).resp.status;
}

/* PERSISTENT RESERVE IN sa into out (len bytes), which must succeed. */
static void pr_in(struct vfe *fe, uint8_t sa, uint8_t *out, uint16_t len)
{
    uint8_t cdb[10] = { 0x5e, sa, 0, 0, 0, 0, 0, (uint8_t)(len >> 8), (uint8_t)len, 0 };
    uint8_t *p = vfe_alloc(fe, len, 64);
    struct vfe_req r;

    pu_cmd(fe, 0, cdb, sizeof(cdb), p, len, true, &r);
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
    g_assert_cmpuint(r.resp.status, ==, GOOD);
    memcpy(out, p, len);
    vfe_free(fe, p);
}

/* One block at lba, written (with a pattern) or read: the status. */
static struct vfe_req rw(struct vfe *fe, bool write, uint64_t lba)
{
    uint8_t *p = vfe_alloc(fe, BS, 64);
    struct vfe_req r;

    pu_pattern_fill(p, BS, 7, lba * BS);
    pu_req_prep(&r, 0, 0, (const uint8_t[16]) { 0 }, 16, p, BS, !write);
    pu_make_rw16(&r, write, lba, 1);
    g_assert_cmpint(vfe_exec(fe, &r, PU_TIMEOUT_MS), ==, 0);
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
    vfe_free(fe, p);
    return r;
}

static uint8_t write_status(struct vfe *fe)
{
    return rw(fe, true, 1).resp.status;
}

static uint8_t read_status(struct vfe *fe)
{
    return rw(fe, false, 1).resp.status;
}

/* READ RESERVATION: the holder's key and the type; 0, 0 for none. */
static void reservation(struct vfe *fe, uint64_t *key, uint8_t *type)
{
    uint8_t b[24];

    pr_in(fe, 1, b, sizeof(b));
    if (pu_get_be(b + 4, 4) == 0) {
        *key = 0;
        *type = 0;
        return;
    }
    g_assert_cmpuint(pu_get_be(b + 4, 4), ==, 16);
    *key = pu_get_be(b + 8, 8);
    *type = b[21] & 0x0f;
}

static unsigned nkeys(struct vfe *fe)
{
    uint8_t b[64];

    pr_in(fe, 0, b, sizeof(b));
    return (unsigned)pu_get_be(b + 4, 4) / 8;
}

/* ---- the cases ---------------------------------------------------------- */

/* A and B registered (with flags), A holding Write Exclusive - Registrants Only. */
static void register_and_reserve(struct cluster *t, uint8_t flags)
{
    uint64_t key;
    uint8_t type;

    g_assert_cmpuint(pr_out_status(t->a, 0, 0, 0, KEY_A, flags), ==, GOOD);
    g_assert_cmpuint(pr_out_status(t->b, 0, 0, 0, KEY_B, flags), ==, GOOD);
    g_assert_cmpuint(pr_out_status(t->a, 1, WE_RO, KEY_A, 0, 0), ==, GOOD);
    reservation(t->c, &key, &type);
    g_assert_cmphex(key, ==, KEY_A);
    g_assert_cmpuint(type, ==, WE_RO);
}

/* B fences A off: PREEMPT AND ABORT of A's key. */
static void fence(struct cluster *t)
{
    struct vfe_req r;
    uint64_t key;
    uint8_t type;

    g_assert_cmpuint(pr_out_status(t->b, 5, WE_RO, KEY_B, KEY_A, 0), ==, GOOD);
    reservation(t->c, &key, &type);
    g_assert_cmphex(key, ==, KEY_B);
    g_assert_cmpuint(type, ==, WE_RO);
    g_assert_cmpuint(nkeys(t->c), ==, 1);
    /* A hears of it once, then is shut out of writing (reads stay: Write Exclusive). */
    r = rw(t->a, true, 1);
    g_assert_cmpuint(r.resp.status, ==, CHECK_CONDITION);
    g_assert_cmpuint(pu_sense_of(&r.resp).key, ==, SCSI_SENSE_UNIT_ATTENTION);
    g_assert_cmphex(pu_sense_of(&r.resp).code, ==, 0x2a05);    /* REGISTRATIONS PREEMPTED */
    g_assert_cmpuint(write_status(t->a), ==, CONFLICT);
    g_assert_cmpuint(write_status(t->a), ==, CONFLICT);
    g_assert_cmpuint(read_status(t->a), ==, GOOD);
    /* A cannot win it back: its key is gone. */
    g_assert_cmpuint(pr_out_status(t->a, 5, WE_RO, KEY_A, KEY_B, 0), ==, CONFLICT);
}

static void test_fence(void)
{
    struct cluster t;
    uint8_t b[128];
    size_t off;

    cluster_init(&t);
    up(&t);
    register_and_reserve(&t, 0);
    /* The unregistered path reads, but its write conflicts; the registrant B writes. */
    g_assert_cmpuint(write_status(t.c), ==, CONFLICT);
    g_assert_cmpuint(read_status(t.c), ==, GOOD);
    g_assert_cmpuint(write_status(t.b), ==, GOOD);
    g_assert_cmpuint(write_status(t.a), ==, GOOD);
    fence(&t);
    g_assert_cmpuint(write_status(t.c), ==, CONFLICT);
    /* B carries on with a queue of writes, read back and compared. */
    {
        struct pu_rw_spec s = { .lun = 0, .queues = 1, .n_io = 32, .io_bytes = 64 * 1024,
                                .seed = 99 };

        pu_write_read_compare(t.b, &s);
    }
    /* READ FULL STATUS: one registration, B's, holding, by its iSCSI name. */
    pr_in(t.c, 3, b, sizeof(b));
    g_assert_cmpuint(pu_get_be(b + 4, 4), >, 24);
    off = 8;
    g_assert_cmphex(pu_get_be(b + off, 8), ==, KEY_B);
    g_assert_cmphex(b[off + 12], ==, 0x01);                   /* R_HOLDER */
    g_assert_cmpuint(b[off + 13] & 0x0f, ==, WE_RO);
    g_assert_cmpuint(pu_get_be(b + off + 18, 2), >=, 1);      /* relative target port */
    g_assert_cmphex(b[off + 24] & 0x0f, ==, 0x05);            /* iSCSI TransportID */
    g_assert_cmpstr((const char *)b + off + 28, ==, NODE_B);
    /* No APTPL: no state file. */
    g_assert_false(g_file_test(t.state, G_FILE_TEST_EXISTS));
    down(&t);
    cluster_free(&t);
}

static void test_aptpl_survives_restart(void)
{
    struct cluster t;
    uint64_t key;
    uint8_t type, caps[8];

    cluster_init(&t);
    up(&t);
    pr_in(t.c, 2, caps, sizeof(caps));
    g_assert_cmpuint(caps[2] & 0x01, ==, 1);                  /* PTPL_C: a file LUN */
    register_and_reserve(&t, APTPL);
    fence(&t);
    g_assert_true(g_file_test(t.state, G_FILE_TEST_IS_REGULAR));
    down(&t);

    up(&t);
    pr_in(t.c, 2, caps, sizeof(caps));
    g_assert_cmpuint(caps[3] & 0x01, ==, 1);                  /* PTPL_A */
    reservation(t.c, &key, &type);
    g_assert_cmphex(key, ==, KEY_B);
    g_assert_cmpuint(type, ==, WE_RO);
    g_assert_cmpuint(nkeys(t.c), ==, 1);
    g_assert_cmpuint(write_status(t.c), ==, CONFLICT);
    g_assert_cmpuint(write_status(t.a), ==, CONFLICT);        /* still fenced */
    g_assert_cmpuint(write_status(t.b), ==, GOOD);
    /* B turns APTPL off (REGISTER with its key, APTPL 0): the file goes. */
    g_assert_cmpuint(pr_out_status(t.b, 0, 0, KEY_B, KEY_B, 0), ==, GOOD);
    g_assert_false(g_file_test(t.state, G_FILE_TEST_EXISTS));
    down(&t);
    cluster_free(&t);
}

static void test_without_aptpl_gone(void)
{
    struct cluster t;
    uint64_t key;
    uint8_t type;

    cluster_init(&t);
    up(&t);
    register_and_reserve(&t, 0);
    fence(&t);
    down(&t);

    up(&t);
    reservation(t.c, &key, &type);
    g_assert_cmpuint(type, ==, 0);
    g_assert_cmpuint(nkeys(t.c), ==, 0);
    g_assert_cmpuint(write_status(t.c), ==, GOOD);
    g_assert_cmpuint(write_status(t.a), ==, GOOD);
    down(&t);
    cluster_free(&t);
}

static void test_corrupt_state_refused(void)
{
    const char *args[6];
    struct cluster t;
    int status;
    size_t from;

    cluster_init(&t);
    g_assert_true(g_file_set_contents(t.state, "[reservations]\nformat=1\nlun=naa.1\n", -1,
                                      NULL));
    args[0] = "--lun";
    args[1] = t.lun_arg;
    args[2] = "--control";
    args[3] = t.ctl;
    args[4] = NULL;
    from = 0;
    g_assert_false(pu_daemon_try_start(&t.d, args, &status));
    g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    g_assert_cmpuint(pu_daemon_log_count(&t.d, from, "LUN lun0:0: reservations file .*"
                                         "disk\\.img\\.pr is refused"), ==, 1);
    /* Moved away, the daemon starts, without reservations. */
    {
        g_autofree char *moved = g_strdup_printf("%s.bad", t.state);

        g_assert_cmpint(rename(t.state, moved), ==, 0);
    }
    up(&t);
    g_assert_cmpuint(nkeys(t.c), ==, 0);
    down(&t);
    cluster_free(&t);
}

static void test_pr_dir(void)
{
    struct cluster t;
    uint8_t caps[8];
    struct vfe_req r;
    uint64_t key;
    uint8_t type;

    cluster_init(&t);
    g_free(t.lun_arg);
    t.lun_arg = g_strdup("0=ram:16M");
    up(&t);
    pr_in(t.c, 2, caps, sizeof(caps));
    g_assert_cmpuint(caps[2] & 0x01, ==, 0);                  /* PTPL_C: nowhere to keep it */
    r = pr_out(t.a, 0, 0, 0, KEY_A, APTPL);
    g_assert_cmpuint(r.resp.status, ==, CHECK_CONDITION);
    g_assert_cmphex(pu_sense_of(&r.resp).code, ==, 0x2600);
    down(&t);

    t.pr_dir = g_build_filename(t.d.dir, "pr", NULL);
    g_assert_cmpint(g_mkdir(t.pr_dir, 0700), ==, 0);
    up(&t);
    register_and_reserve(&t, APTPL);
    {
        g_autofree char *state = g_build_filename(t.pr_dir, "lun0:0.pr", NULL);

        g_assert_true(g_file_test(state, G_FILE_TEST_IS_REGULAR));
    }
    down(&t);
    up(&t);
    reservation(t.c, &key, &type);
    g_assert_cmphex(key, ==, KEY_A);
    g_assert_cmpuint(type, ==, WE_RO);
    g_assert_cmpuint(write_status(t.c), ==, CONFLICT);
    down(&t);
    /* --pr-dir must name a directory. */
    {
        const char *args[] = { "--lun", t.lun_arg, "--pr-dir", t.img, NULL };
        int status;

        g_assert_false(pu_daemon_try_start(&t.d, args, &status));
        g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    }
    cluster_free(&t);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/pr/fence", test_fence);
    g_test_add_func("/pr/aptpl-survives-restart", test_aptpl_survives_restart);
    g_test_add_func("/pr/without-aptpl-gone", test_without_aptpl_gone);
    g_test_add_func("/pr/corrupt-state-refused", test_corrupt_state_refused);
    g_test_add_func("/pr/pr-dir", test_pr_dir);
    return g_test_run();
}
