/*
 * Persistence through power loss (APTPL) of persistent reservations
 * (hw/scsi/scsi-pr.c, scsi-pr-file.c): a LUN given a state file reports
 * PTPL_C, keeps its registrations and reservation there from the REGISTER
 * that sets APTPL on, and a LUN opened later on the same file (the
 * daemon restarted) has them back; clearing APTPL removes the file;
 * without a state file APTPL is refused.  A corrupt, foreign or
 * other-format file refuses the LUN, naming it and the file; a change
 * that cannot be saved fails and leaves the state as it was.  The saves
 * run off the I/O thread: with a save held, the thread serves other
 * commands, the PR OUTs that come meanwhile share the next save, and
 * all of them answer only once the file has their change (or fail
 * together with the save).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "iothread.h"
#include "scsi-cmd.h"
#include "scsi-disk.h"
#include "scsi-disk-fixture.h"
#include "scsi-pr-fixture.h"

#define APTPL 0x01

struct fixture {
    char *dir;
    char *path;
};

static void fx_setup(struct fixture *f, gconstpointer data)
{
    f->dir = g_dir_make_tmp("pr-aptpl-XXXXXX", NULL);
    g_assert_nonnull(f->dir);
    f->path = g_build_filename(f->dir, "lun.pr", NULL);
}

static void fx_teardown(struct fixture *f, gconstpointer data)
{
    g_autofree char *tmp = g_strdup_printf("%s.tmp", f->path);

    g_assert_false(g_file_test(tmp, G_FILE_TEST_EXISTS));    /* never left behind */
    g_unlink(f->path);
    g_assert_cmpint(g_rmdir(f->dir), ==, 0);
    g_free(f->path);
    g_free(f->dir);
}

/* A ready ram LUN (the same identity every time) on state file path. */
static struct scsi_lun *lun_at(const char *path)
{
    struct scsi_lun *lun = ram_lun();
    g_autoptr(GError) err = NULL;

    g_assert_cmpint(scsi_lun_set_pr_file(lun, path, &err), ==, 0);
    g_assert_no_error(err);
    return lun;
}

/* REPORT CAPABILITIES: PTPL_C (byte 2 bit 0) and PTPL_A (byte 3 bit 0). */
static void assert_ptpl(struct scsi_lun *lun, bool c, bool a)
{
    uint8_t buf[8];
    struct result r = pr_in(lun, &PR_D, 2, buf, sizeof(buf));

    assert_good(&r);
    g_assert_cmpuint(buf[2] & 1, ==, c);
    g_assert_cmpuint(buf[3] & 1, ==, a);
}

static uint32_t nkeys(struct scsi_lun *lun)
{
    uint8_t buf[64];
    struct result r = pr_in(lun, &PR_D, 0, buf, sizeof(buf));

    assert_good(&r);
    return get32(buf + 4) / 8;
}

static void test_without_file_refused(void)
{
    struct scsi_lun *lun = ram_lun();
    struct result r;

    assert_ptpl(lun, false, false);
    r = pr_out_flags(lun, &PR_A, 0, 0, 0, 0xa, APTPL);
    assert_invalid_param(&r);
    g_assert_cmphex(r.sense[15], ==, 0x88);         /* SKSV, C/D 0 (parameter), BPV, bit 0 */
    g_assert_cmpuint(r.sense[17], ==, 20);          /* byte 20 */
    g_assert_cmpuint(nkeys(lun), ==, 0);
    /* Other service actions ignore the bit. */
    g_assert_cmpuint(pr_out(lun, &PR_A, 0, 0, 0, 0xa), ==, GOOD);
    r = pr_out_flags(lun, &PR_A, 1, 5, 0xa, 0, APTPL);
    assert_good(&r);
    scsi_lun_free(lun);
}

/* Registered and reserved with APTPL, the LUN closed: a new one on the file has it all. */
static void test_survives_restart(struct fixture *f, gconstpointer data)
{
    struct scsi_lun *lun = lun_at(f->path);
    uint8_t buf[128];
    struct result r;
    uint32_t gen;

    assert_ptpl(lun, true, false);
    g_assert_cmpuint(pr_out(lun, &PR_A, 0, 0, 0, 0xa), ==, GOOD);
    g_assert_false(g_file_test(f->path, G_FILE_TEST_EXISTS));    /* APTPL not yet on */
    r = pr_out_flags(lun, &PR_B, 0, 0, 0, 0xb, APTPL);
    assert_good(&r);
    g_assert_true(g_file_test(f->path, G_FILE_TEST_EXISTS));
    assert_ptpl(lun, true, true);
    /* APTPL is the LUN's, set by the last register action: C keeps it on. */
    g_assert_cmpuint(pr_out_flags(lun, &PR_C, 0, 0, 0, 0xc, APTPL).status, ==, GOOD);
    g_assert_cmpuint(pr_out(lun, &PR_A, 1, 5, 0xa, 0), ==, GOOD);
    r = pr_in(lun, &PR_D, 0, buf, sizeof(buf));
    gen = get32(buf);
    scsi_lun_free(lun);

    lun = lun_at(f->path);
    assert_ptpl(lun, true, true);
    r = pr_in(lun, &PR_D, 0, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(get32(buf), ==, gen);
    g_assert_cmpuint(get32(buf + 4), ==, 24);
    g_assert_cmphex(get64(buf + 8), ==, 0xa);
    g_assert_cmphex(get64(buf + 16), ==, 0xb);
    g_assert_cmphex(get64(buf + 24), ==, 0xc);
    r = pr_in(lun, &PR_D, 1, buf, sizeof(buf));
    g_assert_cmphex(get64(buf + 8), ==, 0xa);
    g_assert_cmpuint(buf[21], ==, 5);
    /* The holder is the same nexus: it writes, an unregistered one conflicts, C still may. */
    g_assert_cmpuint(write10(lun, &PR_A), ==, GOOD);
    g_assert_cmpuint(write10(lun, &PR_D), ==, CONFLICT);
    g_assert_cmpuint(write10(lun, &PR_C), ==, GOOD);
    /* READ FULL STATUS names the restored nexuses: C's SAS port, relative port 2. */
    r = pr_in(lun, &PR_D, 3, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpstr((const char *)buf + 8 + 28, ==, PR_A.initiator);
    g_assert_cmphex(buf[8 + 12], ==, 0x01);                       /* A holds it */
    scsi_lun_free(lun);
}

/* A REGISTER without APTPL turns it off: the file goes, a restart finds nothing. */
static void test_cleared(struct fixture *f, gconstpointer data)
{
    struct scsi_lun *lun = lun_at(f->path);

    g_assert_cmpuint(pr_out_flags(lun, &PR_A, 0, 0, 0, 0xa, APTPL).status, ==, GOOD);
    g_assert_cmpuint(pr_out(lun, &PR_A, 1, 1, 0xa, 0), ==, GOOD);
    g_assert_true(g_file_test(f->path, G_FILE_TEST_EXISTS));
    g_assert_cmpuint(pr_out(lun, &PR_A, 6, 0, 0, 0xaa), ==, GOOD);   /* RAI, APTPL 0 */
    g_assert_false(g_file_test(f->path, G_FILE_TEST_EXISTS));
    assert_ptpl(lun, true, false);
    scsi_lun_free(lun);
    lun = lun_at(f->path);
    g_assert_cmpuint(nkeys(lun), ==, 0);
    g_assert_cmpuint(write10(lun, &PR_D), ==, GOOD);
    assert_ptpl(lun, true, false);
    scsi_lun_free(lun);
}

/* Without APTPL nothing is written at all: a restart is a power loss. */
static void test_not_persisted(struct fixture *f, gconstpointer data)
{
    struct scsi_lun *lun = lun_at(f->path);

    g_assert_cmpuint(pr_out(lun, &PR_A, 0, 0, 0, 0xa), ==, GOOD);
    g_assert_cmpuint(pr_out(lun, &PR_A, 1, 3, 0xa, 0), ==, GOOD);
    g_assert_false(g_file_test(f->path, G_FILE_TEST_EXISTS));
    scsi_lun_free(lun);
    lun = lun_at(f->path);
    g_assert_cmpuint(nkeys(lun), ==, 0);
    g_assert_cmpuint(read10(lun, &PR_D), ==, GOOD);
    scsi_lun_free(lun);
}

/* Each file is refused whole, with the LUN and the file named; the LUN has no APTPL. */
static void test_refused_files(struct fixture *f, gconstpointer data)
{
    static const struct {
        const char *what, *text, *says;
    } files[] = {
        { "empty", "", "no [reservations]" },
        { "binary", "\x7f" "ELF\x02\x01\x01", "not" },
        { "another format",
          "[reservations]\nformat=2\nlun=naa.X\ngeneration=1\nregistrations=0\n", "format 2" },
        { "another LUN's",
          "[reservations]\nformat=1\nlun=naa.5000000000000001\ngeneration=1\n"
          "registrations=0\n", "belongs to LUN naa.5000000000000001" },
        { "a registration missing", "[reservations]\nformat=1\nlun=@\ngeneration=1\n"
          "registrations=1\n", "[registration 0] has no key" },
        { "key 0", "[reservations]\nformat=1\nlun=@\ngeneration=1\nregistrations=1\n"
          "[registration 0]\nkey=0\ninitiator=i\ntarget=t\nrelative-target-port=1\n",
          "key=0 is not" },
        { "a type that does not exist", "[reservations]\nformat=1\nlun=@\ngeneration=1\n"
          "registrations=1\ntype=2\nholder=0\n[registration 0]\nkey=a\ninitiator=i\n"
          "target=t\nrelative-target-port=1\n", "type=2" },
        { "a holder out of range", "[reservations]\nformat=1\nlun=@\ngeneration=1\n"
          "registrations=1\ntype=5\nholder=1\n[registration 0]\nkey=a\ninitiator=i\n"
          "target=t\nrelative-target-port=1\n", "holder=1" },
        { "a nexus twice", "[reservations]\nformat=1\nlun=@\ngeneration=1\n"
          "registrations=2\n[registration 0]\nkey=a\ninitiator=i\ntarget=t\n"
          "relative-target-port=1\n[registration 1]\nkey=b\ninitiator=i\ntarget=t\n"
          "relative-target-port=1\n", "again" },
        { "too many registrations", "[reservations]\nformat=1\nlun=@\ngeneration=1\n"
          "registrations=129\n", "registrations=129" },
    };
    g_autofree char *naa = NULL;

    /* The LUN's own designator, from a file it wrote. */
    {
        struct scsi_lun *lun = lun_at(f->path);
        g_autofree char *text = NULL;
        char *p;

        g_assert_cmpuint(pr_out_flags(lun, &PR_A, 0, 0, 0, 0xa, APTPL).status, ==, GOOD);
        g_assert_true(g_file_get_contents(f->path, &text, NULL, NULL));
        p = strstr(text, "lun=naa.");
        g_assert_nonnull(p);
        naa = g_strndup(p + 4, 20);
        scsi_lun_free(lun);
    }
    for (unsigned i = 0; i < G_N_ELEMENTS(files); i++) {
        g_autoptr(GString) text = g_string_new(files[i].text);
        struct scsi_lun *lun = ram_lun();
        g_autoptr(GError) err = NULL;
        struct result r;

        g_test_message("%s", files[i].what);
        g_string_replace(text, "@", naa, 0);
        g_assert_true(g_file_set_contents(f->path, text->str, (gssize)text->len, NULL));
        g_assert_cmpint(scsi_lun_set_pr_file(lun, f->path, &err), ==, -EINVAL);
        g_assert_error(err, VS_ERROR, EINVAL);
        g_test_message("%s", err->message);
        g_assert_nonnull(strstr(err->message, "test:ram"));
        g_assert_nonnull(strstr(err->message, f->path));
        g_assert_nonnull(strstr(err->message, files[i].says));
        assert_ptpl(lun, false, false);
        g_assert_cmpuint(nkeys(lun), ==, 0);
        r = pr_out_flags(lun, &PR_A, 0, 0, 0, 0xa, APTPL);
        assert_invalid_param(&r);
        scsi_lun_free(lun);
    }
}

/* A state file that cannot be written: the command fails and changes nothing. */
static void test_save_fails(struct fixture *f, gconstpointer data)
{
    g_autofree char *gone = g_build_filename(f->dir, "no-such-dir", "lun.pr", NULL);
    struct scsi_lun *lun = lun_at(gone);
    uint8_t buf[64];
    struct result r;

    g_assert_cmpuint(pr_out(lun, &PR_A, 0, 0, 0, 0xa), ==, GOOD);
    g_test_expect_message("vhost-scsi", G_LOG_LEVEL_WARNING,
                          "test:ram: persistent reservations: cannot create *no-such-dir*");
    r = pr_out_flags(lun, &PR_B, 0, 0, 0, 0xb, APTPL);
    g_test_assert_expected_messages();
    assert_sense(&r, SCSI_SENSE_HARDWARE_ERROR, 0x4400);        /* INTERNAL TARGET FAILURE */
    g_assert_cmpuint(nkeys(lun), ==, 1);
    assert_ptpl(lun, true, false);
    r = pr_in(lun, &PR_D, 0, buf, sizeof(buf));
    g_assert_cmpuint(get32(buf), ==, 1);                           /* PRgeneration too */
    scsi_lun_free(lun);
}

/* ---- saves held off the I/O thread ------------------------------------- */

/*
 * A state file store whose saves wait until the test lets them go, then
 * write the file (or fail with fail), and the commands run on an I/O
 * thread whose completions it records: one lock and one condition for
 * every event a test waits for.
 */
struct held {
    GMutex lock;
    GCond cond;
    unsigned begun;           /* saves that reached the store */
    unsigned allowed;         /* saves let through */
    int fail;                 /* what the saves let through return (0: they write) */
    struct iothread *t;
};

static int held_write(void *opaque, const char *path, const char *data, size_t len, char **why)
{
    struct held *h = opaque;
    g_autoptr(GError) err = NULL;
    int fail;

    g_mutex_lock(&h->lock);
    h->begun++;
    g_cond_broadcast(&h->cond);
    while (h->allowed < h->begun) {
        g_cond_wait(&h->cond, &h->lock);
    }
    fail = h->fail;
    g_mutex_unlock(&h->lock);
    if (fail) {
        *why = g_strdup_printf("test store: %s", g_strerror(-fail));
        return fail;
    }
    g_assert_true(g_file_set_contents(path, data, (gssize)len, &err));
    return 0;
}

static int held_remove(void *opaque, const char *path, char **why)
{
    g_unlink(path);
    return 0;
}

static const struct scsi_pr_store held_store = { held_write, held_remove };

/* A command run on the I/O thread, its result taken when it completes. */
struct thread_cmd {
    struct held *h;
    struct scsi_lun *lun;
    struct scsi_cmd cmd;
    struct iovec out, in;
    uint8_t cdb[10];
    uint8_t param[24];
    uint8_t buf[BS];
    bool done;
    struct result r;
};

static void thread_cmd_done(struct scsi_cmd *cmd)
{
    struct thread_cmd *c = cmd->opaque;

    g_mutex_lock(&c->h->lock);
    c->r = result_of(cmd);
    c->done = true;
    g_cond_broadcast(&c->h->cond);
    g_mutex_unlock(&c->h->lock);
}

static void thread_cmd_exec(void *opaque)
{
    struct thread_cmd *c = opaque;

    scsi_lun_exec(c->lun, &c->cmd);
}

static void thread_cmd_post(struct held *h, struct thread_cmd *c, struct scsi_lun *lun,
                            const struct scsi_it_id *it)
{
    c->h = h;
    c->lun = lun;
    c->cmd = (struct scsi_cmd) { .cdb = c->cdb, .cdb_len = sizeof(c->cdb), .thread = h->t,
                                 .complete = thread_cmd_done, .opaque = c, .it = *it };
    if (c->out.iov_base) {
        c->cmd.data_out = &c->out;
        c->cmd.data_out_cnt = 1;
    }
    if (c->in.iov_base) {
        c->cmd.data_in = &c->in;
        c->cmd.data_in_cnt = 1;
    }
    iothread_post(h->t, thread_cmd_exec, c);
}

/* REGISTER AND IGNORE EXISTING KEY of key from it, APTPL on, started on the thread. */
static void post_register_aptpl(struct held *h, struct thread_cmd *c, struct scsi_lun *lun,
                                const struct scsi_it_id *it, uint64_t key)
{
    uint8_t cdb[10] = { 0x5f, 6, 0, 0, 0, 0, 0, 0, 24, 0 };

    memcpy(c->cdb, cdb, sizeof(cdb));
    memset(c->param, 0, sizeof(c->param));
    put64(c->param + 8, key);
    c->param[20] = APTPL;
    c->out = (struct iovec) { c->param, sizeof(c->param) };
    thread_cmd_post(h, c, lun, it);
}

/* READ(10) of block 0 from it, started on the thread. */
static void post_read(struct held *h, struct thread_cmd *c, struct scsi_lun *lun,
                      const struct scsi_it_id *it)
{
    uint8_t cdb[10] = { 0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0 };

    memcpy(c->cdb, cdb, sizeof(cdb));
    c->in = (struct iovec) { c->buf, sizeof(c->buf) };
    thread_cmd_post(h, c, lun, it);
}

/* Waits (bounded) until cond(h, arg) holds, under h's lock. */
static bool held_wait(struct held *h, bool (*cond)(struct held *h, const void *arg),
                      const void *arg)
{
    gint64 end = g_get_monotonic_time() + DRAIN_TIMEOUT_US;
    bool ok;

    g_mutex_lock(&h->lock);
    while (!(ok = cond(h, arg)) && g_cond_wait_until(&h->cond, &h->lock, end)) {
    }
    ok = cond(h, arg);
    g_mutex_unlock(&h->lock);
    return ok;
}

static bool saves_begun(struct held *h, const void *n)
{
    return h->begun >= *(const unsigned *)n;
}

static bool cmd_done(struct held *h, const void *c)
{
    return ((const struct thread_cmd *)c)->done;
}

static bool all_done(struct held *h, const void *cs)
{
    const struct thread_cmd *const *c = cs;

    for (; *c; c++) {
        if (!(*c)->done) {
            return false;
        }
    }
    return true;
}

static void held_allow(struct held *h, unsigned n, int fail)
{
    g_mutex_lock(&h->lock);
    h->allowed += n;
    h->fail = fail;
    g_cond_broadcast(&h->cond);
    g_mutex_unlock(&h->lock);
}

static void held_start(struct held *h)
{
    g_mutex_init(&h->lock);
    g_cond_init(&h->cond);
    h->t = iothread_new("t-pr", 1, 0);
    g_assert_cmpint(iothread_start(h->t), ==, 0);
}

static void held_end(struct held *h)
{
    iothread_free(h->t);
    g_cond_clear(&h->cond);
    g_mutex_clear(&h->lock);
}

/*
 * While a save is held the I/O thread serves other commands: a READ on
 * another LUN of the same thread, and a READ and PR IN on this one,
 * complete; the PR OUT answers GOOD only once its save is let through.
 */
static void test_save_off_thread(struct fixture *f, gconstpointer data)
{
    struct held h = { 0 };
    struct scsi_lun *lun = lun_at(f->path), *other = ram_lun();
    struct thread_cmd reg = { 0 }, rd_other = { 0 }, rd = { 0 };
    unsigned one = 1;

    held_start(&h);
    scsi_lun_set_pr_store(lun, &held_store, &h);
    post_register_aptpl(&h, &reg, lun, &PR_A, 0xa);
    g_assert_true(held_wait(&h, saves_begun, &one));

    post_read(&h, &rd_other, other, &PR_B);
    g_assert_true(held_wait(&h, cmd_done, &rd_other));
    assert_good(&rd_other.r);
    post_read(&h, &rd, lun, &PR_B);
    g_assert_true(held_wait(&h, cmd_done, &rd));
    assert_good(&rd.r);
    iothread_run_sync(h.t, nothing, NULL);
    g_assert_false(reg.done);                          /* not before the file has it */
    g_assert_false(g_file_test(f->path, G_FILE_TEST_EXISTS));

    held_allow(&h, 1, 0);
    g_assert_true(held_wait(&h, cmd_done, &reg));
    assert_good(&reg.r);
    g_assert_true(g_file_test(f->path, G_FILE_TEST_EXISTS));
    iothread_run_sync(h.t, nothing, NULL);     /* the commands are counted out */
    scsi_lun_free(lun);
    scsi_lun_free(other);
    held_end(&h);
}

#define FLOOD 8

/*
 * FLOOD PR OUTs while the first one's save is held share at most one more
 * save; every one answers GOOD after it, and the file has the last state.
 */
static void test_saves_coalesce(struct fixture *f, gconstpointer data)
{
    struct held h = { 0 };
    struct scsi_lun *lun = lun_at(f->path);
    struct thread_cmd c[FLOOD] = { 0 };
    const struct thread_cmd *all[FLOOD + 1] = { NULL };
    unsigned one = 1;
    uint8_t buf[64];
    struct result r;

    held_start(&h);
    scsi_lun_set_pr_store(lun, &held_store, &h);
    for (unsigned i = 0; i < FLOOD; i++) {
        all[i] = &c[i];
        post_register_aptpl(&h, &c[i], lun, &PR_A, 0xa0 + i);
        if (i == 0) {
            g_assert_true(held_wait(&h, saves_begun, &one));
        }
    }
    iothread_run_sync(h.t, nothing, NULL);     /* every PR OUT has run on the thread */
    for (unsigned i = 0; i < FLOOD; i++) {
        g_assert_false(c[i].done);
    }

    held_allow(&h, FLOOD, 0);
    g_assert_true(held_wait(&h, all_done, all));
    for (unsigned i = 0; i < FLOOD; i++) {
        assert_good(&c[i].r);
    }
    g_assert_cmpuint(h.begun, <=, 2);
    iothread_run_sync(h.t, nothing, NULL);
    scsi_lun_free(lun);
    held_end(&h);

    lun = lun_at(f->path);                     /* a restart finds the last key */
    r = pr_in(lun, &PR_D, 0, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(get32(buf + 4), ==, 8);
    g_assert_cmphex(get64(buf + 8), ==, 0xa0 + FLOOD - 1);
    scsi_lun_free(lun);
}

/*
 * A save that fails fails every PR OUT that waited for it, the one it
 * was writing and those that came meanwhile, with INTERNAL TARGET
 * FAILURE; the state goes back to what the file has (nothing).
 */
static void test_failed_save_fails_waiters(struct fixture *f, gconstpointer data)
{
    struct held h = { 0 };
    struct scsi_lun *lun = lun_at(f->path);
    struct thread_cmd c[3] = { 0 };
    const struct thread_cmd *all[4] = { &c[0], &c[1], &c[2], NULL };
    const struct scsi_it_id *who[3] = { &PR_A, &PR_B, &PR_C };
    unsigned one = 1;

    held_start(&h);
    scsi_lun_set_pr_store(lun, &held_store, &h);
    for (unsigned i = 0; i < 3; i++) {
        post_register_aptpl(&h, &c[i], lun, who[i], 0xa + i);
        if (i == 0) {
            g_assert_true(held_wait(&h, saves_begun, &one));
        }
    }
    iothread_run_sync(h.t, nothing, NULL);
    g_test_expect_message("vhost-scsi", G_LOG_LEVEL_WARNING,
                          "test:ram: persistent reservations: test store: *");
    held_allow(&h, 3, -EIO);
    g_assert_true(held_wait(&h, all_done, all));
    g_test_assert_expected_messages();
    for (unsigned i = 0; i < 3; i++) {
        assert_sense(&c[i].r, SCSI_SENSE_HARDWARE_ERROR, 0x4400);
    }
    g_assert_cmpuint(h.begun, ==, 1);
    iothread_run_sync(h.t, nothing, NULL);
    g_assert_cmpuint(nkeys(lun), ==, 0);
    assert_ptpl(lun, true, false);
    scsi_lun_free(lun);
    held_end(&h);
}

static gpointer free_lun(gpointer lun)
{
    scsi_lun_free(lun);
    return NULL;
}

/* The free has found the PR OUT in flight and waits for it: the save may end now. */
static void release_when_free_waits(const gchar *domain, GLogLevelFlags level,
                                    const gchar *message, gpointer opaque)
{
    g_assert_nonnull(strstr(message, "freed with 1 commands in flight"));
    held_allow(opaque, 1, 0);
}

/*
 * A LUN freed while its save is in flight (a removal) waits for the PR
 * OUT that waits for the save, then for the saver: nothing is used after
 * it is freed (ASan), and the command is answered GOOD first.
 */
static void test_lun_freed_while_saving(struct fixture *f, gconstpointer data)
{
    struct held h = { 0 };
    struct scsi_lun *lun = lun_at(f->path);
    struct thread_cmd reg = { 0 };
    unsigned one = 1;
    GThread *remover;
    GLogLevelFlags fatal;
    guint handler;

    held_start(&h);
    scsi_lun_set_pr_store(lun, &held_store, &h);
    post_register_aptpl(&h, &reg, lun, &PR_A, 0xa);
    g_assert_true(held_wait(&h, saves_begun, &one));
    iothread_run_sync(h.t, nothing, NULL);
    fatal = g_log_set_always_fatal(G_LOG_FATAL_MASK);
    handler = g_log_set_handler("vhost-scsi", G_LOG_LEVEL_WARNING, release_when_free_waits, &h);
    remover = g_thread_new("remover", free_lun, lun);
    g_thread_join(remover);
    g_log_remove_handler("vhost-scsi", handler);
    g_log_set_always_fatal(fatal);
    g_assert_cmpuint(h.allowed, ==, 1);
    g_assert_true(reg.done);
    assert_good(&reg.r);
    held_end(&h);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/pr-aptpl/without-file-refused", test_without_file_refused);
#define ADD(path, fn) g_test_add(path, struct fixture, NULL, fx_setup, fn, fx_teardown)
    ADD("/pr-aptpl/survives-restart", test_survives_restart);
    ADD("/pr-aptpl/cleared", test_cleared);
    ADD("/pr-aptpl/not-persisted", test_not_persisted);
    ADD("/pr-aptpl/refused-files", test_refused_files);
    ADD("/pr-aptpl/save-fails", test_save_fails);
    ADD("/pr-aptpl/save-off-thread", test_save_off_thread);
    ADD("/pr-aptpl/saves-coalesce", test_saves_coalesce);
    ADD("/pr-aptpl/failed-save-fails-waiters", test_failed_save_fails_waiters);
    ADD("/pr-aptpl/lun-freed-while-saving", test_lun_freed_while_saving);
    return g_test_run();
}
