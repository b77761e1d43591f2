/*
 * Persistence through power loss (APTPL) of persistent reservations
 * (lib/scsi/scsi-pr.c, scsi-pr-file.c): a LUN given a state file reports
 * PTPL_C, keeps its registrations and reservation there from the REGISTER
 * that sets APTPL on, and a LUN opened later on the same file (the
 * daemon restarted) has them back; clearing APTPL removes the file;
 * without a state file APTPL is refused.  A corrupt, foreign or
 * other-format file refuses the LUN, naming it and the file; a change
 * that cannot be saved fails and leaves the state as it was.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

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
    g_autofree char *err = NULL;

    g_assert_cmpint(scsi_lun_set_pr_file(lun, path, &err), ==, 0);
    g_assert_null(err);
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
        g_autofree char *err = NULL;
        struct result r;

        g_test_message("%s", files[i].what);
        g_string_replace(text, "@", naa, 0);
        g_assert_true(g_file_set_contents(f->path, text->str, (gssize)text->len, NULL));
        g_assert_cmpint(scsi_lun_set_pr_file(lun, f->path, &err), ==, -EINVAL);
        g_test_message("%s", err);
        g_assert_nonnull(strstr(err, "test:ram"));
        g_assert_nonnull(strstr(err, f->path));
        g_assert_nonnull(strstr(err, files[i].says));
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
    return g_test_run();
}
