/*
 * Specification of MODE SENSE and MODE SELECT
 * (hw/scsi/scsi-disk-mode.c): the caching and control pages in ascending
 * order, after a short or (LLBAA) long block descriptor or none (DBD);
 * current, changeable (WCE alone), default and (refused) saved values;
 * MODE SELECT changes WCE and nothing else, and refuses, with a field
 * pointer where it can, a byte that is not changeable, a wrong page length
 * or an unknown page, a list shorter than its header or than the data-out
 * says, a changed block length and saving pages; a guest toggling the
 * write cache in a loop gets its lines limited (the LUN's log limit).
 * What the write cache setting does to writes is in scsi-disk-rw-test.c.  The harness is
 * scsi-disk-fixture.h.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include <glib.h>

#include "backend.h"
#include "log-limit.h"
#include "scsi-cmd.h"
#include "scsi-disk.h"
#include "scsi-disk-fixture.h"

static void test_mode_sense_pages(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[255];
    struct result r = RUN_IN(lun, scsi_cdb_modesense6(0, SCSI_MODESENSE_PC_CURRENT,
                                                      SCSI_MODEPAGE_RETURN_ALL_PAGES, 0, 255),
                             buf, sizeof(buf));
    struct scsi_mode_sense *ms;
    struct scsi_mode_page *mp;
    struct sc_datain d;

    assert_good(&r);
    ms = decoded(&d, &r, buf);
    g_assert_cmpuint(r.in_xfer, ==, ms->mode_data_length + 1u);
    g_assert_cmphex(ms->device_specific_parameter & 0x90, ==, 0x10);   /* DPOFUA, not WP */
    g_assert_cmpuint(ms->block_descriptor_length, ==, 8);             /* short descriptor */
    /* libiscsi skips block descriptors: their fields are read with its accessors. */
    g_assert_cmpuint(scsi_get_uint32(buf + 4), ==, 8 * MiB / 512);
    g_assert_cmpuint(scsi_get_uint32(buf + 8) & 0xffffff, ==, 512);
    /* Pages in ascending order (libiscsi lists them last first): caching, control. */
    mp = ms->pages;
    g_assert_cmpint(mp->page_code, ==, SCSI_MODEPAGE_CONTROL);
    g_assert_cmpint(mp->len, ==, 10);
    mp = mp->next;
    g_assert_cmpint(mp->page_code, ==, SCSI_MODEPAGE_CACHING);
    g_assert_cmpint(mp->len, ==, 18);
    g_assert_null(mp->next);
    g_assert_cmpuint(r.in_xfer, ==, 4 + 8 + 20 + 12);
    sc_datain_free(&d);

    /* DBD drops the block descriptor. */
    r = RUN_IN(lun, scsi_cdb_modesense6(1, SCSI_MODESENSE_PC_CURRENT,
                                        SCSI_MODEPAGE_RETURN_ALL_PAGES, 0, 255), buf, sizeof(buf));
    assert_good(&r);
    ms = decoded(&d, &r, buf);
    g_assert_cmpuint(ms->block_descriptor_length, ==, 0);
    g_assert_cmpint(ms->pages->next->page_code, ==, SCSI_MODEPAGE_CACHING);   /* the first */
    sc_datain_free(&d);

    /* MODE SENSE(10) with LLBAA: 16-byte descriptor, LONGLBA set. */
    r = RUN_IN(lun, scsi_cdb_modesense10(1, 0, SCSI_MODESENSE_PC_CURRENT, SCSI_MODEPAGE_CONTROL, 0,
                                         255), buf, sizeof(buf));
    assert_good(&r);
    ms = decoded(&d, &r, buf);
    g_assert_cmpuint(ms->mode_data_length, ==, r.in_xfer - 2);
    g_assert_true(ms->longlba);
    g_assert_cmpuint(ms->block_descriptor_length, ==, 16);
    g_assert_cmpuint(scsi_get_uint64(buf + 8), ==, 8 * MiB / 512);
    g_assert_cmpuint(scsi_get_uint32(buf + 20), ==, 512);
    g_assert_cmpint(ms->pages->page_code, ==, SCSI_MODEPAGE_CONTROL);
    g_assert_null(ms->pages->next);
    sc_datain_free(&d);
    scsi_lun_free(lun);
}

static void test_mode_sense_page_control(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[255];
    const uint8_t *pg;
    struct scsi_mode_sense *ms;
    struct scsi_mode_page *mp;
    struct sc_datain d;
    struct result r;

    /* Changeable: only WCE.  libiscsi decodes the page's fields, not its reserved bytes. */
    r = RUN_IN(lun, scsi_cdb_modesense6(1, SCSI_MODESENSE_PC_CHANGEABLE, SCSI_MODEPAGE_CACHING, 0,
                                        255), buf, sizeof(buf));
    assert_good(&r);
    ms = decoded(&d, &r, buf);
    mp = ms->pages;
    g_assert_true(mp->caching.wce);
    g_assert_false(mp->caching.ic || mp->caching.abpf || mp->caching.cap || mp->caching.disc ||
                   mp->caching.size || mp->caching.mf || mp->caching.rcd);
    pg = buf + 4 + ms->block_descriptor_length;
    g_assert_cmpint(mp->len, ==, 18);
    for (int i = 3; i < 20; i++) {
        g_assert_cmphex(pg[i], ==, 0);
    }
    sc_datain_free(&d);
    /* Default: the backend's cache (none). */
    r = RUN_IN(lun, scsi_cdb_modesense6(1, SCSI_MODESENSE_PC_DEFAULT, SCSI_MODEPAGE_CACHING, 0,
                                        255), buf, sizeof(buf));
    assert_good(&r);
    ms = decoded(&d, &r, buf);
    g_assert_false(ms->pages->caching.wce);
    sc_datain_free(&d);
    r = RUN_IN(lun, scsi_cdb_modesense6(1, SCSI_MODESENSE_PC_SAVED, SCSI_MODEPAGE_CACHING, 0, 255),
               buf, sizeof(buf));
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SC_ASCQ_SAVING_PARAMETERS_NOT_SUPPORTED);
    scsi_lun_free(lun);
}

static void test_mode_sense_invalid(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[255];
    struct result r;

    /* A page this LUN does not have. */
    r = RUN_IN(lun, scsi_cdb_modesense6(0, SCSI_MODESENSE_PC_CURRENT,
                                        SCSI_MODEPAGE_INFORMATIONAL_EXCEPTIONS_CONTROL, 0, 255),
               buf, sizeof(buf));
    assert_invalid_cdb(&r);
    /* A subpage of the caching page. */
    r = RUN_IN(lun, scsi_cdb_modesense6(0, SCSI_MODESENSE_PC_CURRENT, SCSI_MODEPAGE_CACHING, 0x01,
                                        255), buf, sizeof(buf));
    assert_invalid_cdb(&r);
    /* All pages and all subpages. */
    r = RUN_IN(lun, scsi_cdb_modesense6(0, SCSI_MODESENSE_PC_CURRENT,
                                        SCSI_MODEPAGE_RETURN_ALL_PAGES, 0xff, 255), buf, sizeof(buf));
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_mode_select_toggles_wce(void)
{
    struct scsi_lun *lun = ram_lun();

    g_assert_false(get_wce(lun));
    set_wce(lun, true);
    g_assert_true(get_wce(lun));
    set_wce(lun, false);
    g_assert_false(get_wce(lun));
    scsi_lun_free(lun);
}

struct wce_lines {
    unsigned changed;       /* "write cache enabled/disabled" */
    unsigned suppressed;    /* "N messages suppressed" */
};

static void count_wce_lines(const gchar *domain, GLogLevelFlags level, const gchar *msg,
                            gpointer data)
{
    struct wce_lines *c = data;

    c->changed += strstr(msg, ": write cache ") != NULL;
    c->suppressed += strstr(msg, " messages suppressed (rate limit)") != NULL;
}

/*
 * Each change of the write cache is logged, but a guest toggling it in a
 * loop gets the LUN's burst of lines, then one a second of the loop's
 * time (by our clock), and the count of the rest when the LUN goes.
 */
static void test_mode_select_wce_lines_are_limited(void)
{
    struct scsi_lun *lun = ram_lun();
    struct wce_lines c = { 0 };
    GLogLevelFlags fatal = g_log_set_always_fatal(G_LOG_FATAL_MASK);
    guint h = g_log_set_handler(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE | G_LOG_LEVEL_WARNING,
                                count_wce_lines, &c);
    gint64 t0 = g_get_monotonic_time(), secs;

    for (unsigned i = 0; i < 200; i++) {
        set_wce(lun, i % 2 == 0);
    }
    secs = (g_get_monotonic_time() - t0) / G_USEC_PER_SEC + 1;
    g_assert_cmpuint(c.changed, >=, LOG_LIMIT_BURST);
    g_assert_cmpuint(c.changed, <=, LOG_LIMIT_BURST + LOG_LIMIT_PER_SEC * secs);
    scsi_lun_free(lun);
    g_assert_cmpuint(c.suppressed, >=, 1);
    g_log_remove_handler(G_LOG_DOMAIN, h);
    g_log_set_always_fatal(fatal);
}

/*
 * The MODE SELECT parameter lists below are MODE SENSE data edited by hand:
 * libiscsi marshalls one mode page, not block descriptors or the broken
 * lists these tests need.
 */
static void test_mode_select_block_descriptor(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t p[255];
    struct result r = RUN_IN(lun, scsi_cdb_modesense6(0, SCSI_MODESENSE_PC_CURRENT,
                                                      SCSI_MODEPAGE_CACHING, 0, 255), p, sizeof(p));
    size_t len = r.in_xfer;

    /* MODE SENSE without DBD: header, 8-byte descriptor, caching page. */
    assert_good(&r);
    g_assert_cmpuint(len, ==, 4 + 8 + 20);
    p[0] = 0;               /* MODE DATA LENGTH is reserved in MODE SELECT */
    p[12 + 2] |= 0x04;      /* WCE */
    r = RUN_OUT(lun, scsi_cdb_modeselect6(1, 0, (int)len), p, len);
    assert_good(&r);
    g_assert_true(get_wce(lun));

    /* The block length cannot be changed. */
    p[4 + 6] = 0x10;        /* 4096 */
    p[4 + 7] = 0x00;
    r = RUN_OUT(lun, scsi_cdb_modeselect6(1, 0, (int)len), p, len);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_INVALID_FIELD_IN_PARAMETER_LIST);

    /* A descriptor length that is neither 0 nor 8. */
    p[4 + 6] = 0x02;
    p[3] = 4;
    r = RUN_OUT(lun, scsi_cdb_modeselect6(1, 0, (int)len), p, len);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_INVALID_FIELD_IN_PARAMETER_LIST);
    scsi_lun_free(lun);
}

static void test_mode_select_invalid(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t page[255], p[255];
    struct result r = RUN_IN(lun, scsi_cdb_modesense10(0, 1, SCSI_MODESENSE_PC_CURRENT,
                                                       SCSI_MODEPAGE_CACHING, 0, 255),
                             page, sizeof(page));
    size_t len = r.in_xfer;
    struct sc_sense s;

    assert_good(&r);
    g_assert_cmpuint(len, ==, 8 + 20);
    page[0] = page[1] = 0;

    /* A byte that is not changeable (RCD in the caching page). */
    memcpy(p, page, len);
    p[10] |= 0x01;
    r = RUN_OUT(lun, scsi_cdb_modeselect10(1, 0, (int)len), p, len);
    s = assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_INVALID_FIELD_IN_PARAMETER_LIST);
    g_assert_true(s.sksv && !s.in_cdb);                      /* in the parameter list */
    g_assert_cmpuint(s.field, ==, 10);

    /* Wrong page length. */
    memcpy(p, page, len);
    p[9] = 0x10;
    r = RUN_OUT(lun, scsi_cdb_modeselect10(1, 0, (int)len), p, len);
    assert_invalid_param(&r);

    /* Unknown page. */
    memcpy(p, page, len);
    p[8] = SCSI_MODEPAGE_INFORMATIONAL_EXCEPTIONS_CONTROL;   /* one this LUN does not have */
    r = RUN_OUT(lun, scsi_cdb_modeselect10(1, 0, (int)len), p, len);
    assert_invalid_param(&r);

    /* Page runs past the parameter list. */
    r = RUN_OUT(lun, scsi_cdb_modeselect10(1, 0, (int)len - 4), page, len);
    assert_invalid_param(&r);

    /* Parameter list shorter than the header. */
    r = RUN_OUT(lun, scsi_cdb_modeselect10(1, 0, 3), page, len);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_PARAMETER_LIST_LENGTH_ERROR);

    /* Data-out shorter than the parameter list length. */
    r = RUN_OUT(lun, scsi_cdb_modeselect10(1, 0, (int)len), page, len - 1);
    assert_invalid_cdb(&r);

    /* SP: saving pages is not supported. */
    r = RUN_OUT(lun, scsi_cdb_modeselect10(1, 1, (int)len), page, len);
    assert_invalid_cdb(&r);

    /* Nothing changed. */
    g_assert_false(get_wce(lun));
    scsi_lun_free(lun);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/scsi-disk/mode/sense-pages", test_mode_sense_pages);
    g_test_add_func("/scsi-disk/mode/page-control", test_mode_sense_page_control);
    g_test_add_func("/scsi-disk/mode/sense-invalid", test_mode_sense_invalid);
    g_test_add_func("/scsi-disk/mode/select-wce", test_mode_select_toggles_wce);
    g_test_add_func("/scsi-disk/mode/select-wce-lines-are-limited",
                    test_mode_select_wce_lines_are_limited);
    g_test_add_func("/scsi-disk/mode/select-invalid", test_mode_select_invalid);
    g_test_add_func("/scsi-disk/mode/select-block-descriptor", test_mode_select_block_descriptor);

    return g_test_run();
}
