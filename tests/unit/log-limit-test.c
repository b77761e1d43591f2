/*
 * Specification of log rate limits (hw/util/log-limit.c): a burst, then
 * a steady rate, the refused lines counted and said once.  The clock is
 * the test's: time passes only when a test says so.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>

#include "log-limit.h"

#define SEC ((int64_t)G_USEC_PER_SEC)

/* How many of n lines at now_us get through; *suppressed: the last count reported. */
static unsigned admit_n(struct log_limit *l, int64_t now_us, unsigned n, uint64_t *suppressed)
{
    unsigned ok = 0;

    for (unsigned i = 0; i < n; i++) {
        uint64_t s = 0;

        if (log_limit_admit(l, now_us, &s)) {
            ok++;
            *suppressed = s;
        }
    }
    return ok;
}

/* Ends l; lines it still holds back are said then (and expected here). */
static void end(struct log_limit *l)
{
    if (l->suppressed) {
        g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING,
                              "conn: * suppressed (rate limit)");
    }
    log_limit_end(l);
    g_test_assert_expected_messages();
}

static void test_burst_then_nothing_until_time_passes(void)
{
    struct log_limit l;
    uint64_t s = 99;

    log_limit_init(&l, "conn", 5, 2);
    g_assert_cmpuint(admit_n(&l, 10 * SEC, 10000, &s), ==, 5);
    g_assert_cmpuint(s, ==, 0);
    /* Half a second at two a second: one more, and the 9995 before it are reported. */
    g_assert_cmpuint(admit_n(&l, 10 * SEC + SEC / 2, 1000, &s), ==, 1);
    g_assert_cmpuint(s, ==, 9995);
    g_assert_cmpuint(admit_n(&l, 10 * SEC + SEC / 2, 1, &s), ==, 0);
    end(&l);
}

static void test_steady_rate(void)
{
    struct log_limit l;
    uint64_t s = 0;
    unsigned total = 0;

    log_limit_init(&l, "conn", 3, 4);
    /* A line every millisecond for 10 s: the burst, then 4 a second. */
    for (int64_t t = 0; t < 10 * SEC; t += 1000) {
        total += admit_n(&l, t, 1, &s);
    }
    g_assert_cmpuint(total, >=, 3 + 4 * 10 - 1);
    g_assert_cmpuint(total, <=, 3 + 4 * 10);
    end(&l);
}

/*
 * Two moments of one bucket: at t1, n1 lines of which ok1 get through;
 * then at t2, n2 lines of which ok2 do.
 */
struct two_moments {
    const char *path;
    unsigned burst, per_sec;
    int64_t t1;
    unsigned n1, ok1;
    int64_t t2;
    unsigned n2, ok2;
};

static const struct two_moments moments[] = {
    { "/log-limit/idle-refills-only-up-to-the-burst", 4, 1, 0, 4, 4, 3600 * SEC, 100, 4 },
    { "/log-limit/clock-going-back-gives-nothing", 1, 1, 100 * SEC, 1, 1, 50 * SEC, 10, 0 },
    { "/log-limit/no-rate-means-the-burst-is-all", 2, 0, 0, 5, 2, 1000 * SEC, 5, 0 },
};

static void test_two_moments(const void *data)
{
    const struct two_moments *m = data;
    struct log_limit l;
    uint64_t s = 0;

    log_limit_init(&l, "conn", m->burst, m->per_sec);
    g_assert_cmpuint(admit_n(&l, m->t1, m->n1, &s), ==, m->ok1);
    g_assert_cmpuint(admit_n(&l, m->t2, m->n2, &s), ==, m->ok2);
    end(&l);
}

static void test_lines_and_the_suppressed_count(void)
{
    struct log_limit l;

    log_limit_init(&l, "conn0", 2, 0);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "conn0: bad message 0");
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE, "conn0: bad message 1");
    log_limit_warning(&l, "conn0: bad message %d", 0);
    log_limit_message(&l, "conn0: bad message %d", 1);
    for (int i = 2; i < 1000; i++) {
        log_limit_warning(&l, "conn0: bad message %d", i);
    }
    g_test_assert_expected_messages();
    /* The source ends with lines still refused: their count is the last word. */
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING,
                          "conn0: 998 messages suppressed (rate limit)");
    log_limit_end(&l);
    g_test_assert_expected_messages();
}

static void test_no_limit_logs_everything(void)
{
    for (int i = 0; i < 50; i++) {
        g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE, "unlimited*");
    }
    for (int i = 0; i < 50; i++) {
        log_limit_message(NULL, "unlimited %d", i);
    }
    g_test_assert_expected_messages();
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/log-limit/burst-then-nothing-until-time-passes",
                    test_burst_then_nothing_until_time_passes);
    g_test_add_func("/log-limit/steady-rate", test_steady_rate);
    for (unsigned i = 0; i < G_N_ELEMENTS(moments); i++) {
        g_test_add_data_func(moments[i].path, &moments[i], test_two_moments);
    }
    g_test_add_func("/log-limit/lines-and-the-suppressed-count",
                    test_lines_and_the_suppressed_count);
    g_test_add_func("/log-limit/no-limit-logs-everything", test_no_limit_logs_everything);
    return g_test_run();
}
