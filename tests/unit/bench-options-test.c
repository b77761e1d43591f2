/*
 * Specification of the bench's options check (hw/bench/bench-options.c):
 *  - without --rw, --bs, --lun: randread of 4 KiB at LUN 0:0, a ring of
 *    at least 3 entries per request in flight;
 *  - --kernel WWPN,TPGT: the TPGT is the LUN's target unless --lun says
 *    otherwise; the WWPN is kept without it;
 *  - every refusal is a usage error that names the option and what it
 *    accepts, as vhost-scsi-bench prints it.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>

#include "bench-options.h"

static void test_defaults(void)
{
    struct bench_opts o;
    g_autoptr(GError) err = NULL;

    bench_opts_init(&o);
    o.socket = "/tmp/x.sock";
    g_assert_true(bench_opts_check(&o, &err));
    g_assert_no_error(err);
    g_assert_cmpint(o.mode, ==, BENCH_RW_RANDREAD);
    g_assert_cmpstr(bench_rw_name(o.mode), ==, "randread");
    g_assert_cmpuint(o.bs, ==, 4096);
    g_assert_cmpuint(o.target, ==, 0);
    g_assert_cmpuint(o.lun, ==, 0);
    g_assert_cmpint(o.iodepth, ==, 16);
    g_assert_cmpint(o.queue_size, >=, 3 * 16);
    bench_opts_clear(&o);
}

static void test_settled_values(void)
{
    struct bench_opts o;
    g_autoptr(GError) err = NULL;

    bench_opts_init(&o);
    o.socket = "/tmp/x.sock";
    o.rw = "hostile";
    o.bs_str = "64k";
    o.lun_str = "2:7";
    o.iodepth = 1000;
    g_assert_true(bench_opts_check(&o, &err));
    g_assert_cmpint(o.mode, ==, BENCH_RW_HOSTILE);
    g_assert_cmpuint(o.bs, ==, 65536);
    g_assert_cmpuint(o.target, ==, 2);
    g_assert_cmpuint(o.lun, ==, 7);
    g_assert_cmpint(o.queue_size, >=, 3 * 1000);
    bench_opts_clear(&o);
}

static void test_kernel_tpgt_is_the_target(void)
{
    struct bench_opts o;
    g_autoptr(GError) err = NULL;

    bench_opts_init(&o);
    o.kernel = "naa.5001405000000001,3";
    g_assert_true(bench_opts_check(&o, &err));
    g_assert_cmpstr(o.wwpn, ==, "naa.5001405000000001");
    g_assert_cmpuint(o.tpgt, ==, 3);
    g_assert_cmpuint(o.target, ==, 3);
    bench_opts_clear(&o);

    bench_opts_init(&o);
    o.kernel = "naa.5001405000000001";
    o.lun_str = "0:1";
    g_assert_true(bench_opts_check(&o, &err));
    g_assert_cmpuint(o.tpgt, ==, 1);
    g_assert_cmpuint(o.target, ==, 0);
    bench_opts_clear(&o);
}

/* Sets one field of o wrong. */
typedef void (*spoil_fn)(struct bench_opts *o);

static void no_device(struct bench_opts *o) { o->socket = NULL; }
static void both_devices(struct bench_opts *o) { o->kernel = "naa.5001405000000001"; }
static void idle_verify(struct bench_opts *o) { o->idle = true; o->verify = true; }
static void kernel_packed(struct bench_opts *o) { o->socket = NULL; o->kernel = "w"; o->packed = true; }
static void kernel_inflight(struct bench_opts *o) { o->socket = NULL; o->kernel = "w"; o->inflight = true; }
static void bad_tpgt(struct bench_opts *o) { o->socket = NULL; o->kernel = "w,x"; }
static void bad_rw(struct bench_opts *o) { o->rw = "randrw"; }
static void odd_bs(struct bench_opts *o) { o->bs_str = "1000"; }
static void huge_bs(struct bench_opts *o) { o->bs_str = "32m"; }
static void bs_word(struct bench_opts *o) { o->bs_str = "4kb"; }
static void lun_word(struct bench_opts *o) { o->lun_str = "3"; }
static void lun_range(struct bench_opts *o) { o->lun_str = "0:16384"; }
static void queues_past(struct bench_opts *o) { o->first_queue = 60; o->queues = 5; }
static void depth_zero(struct bench_opts *o) { o->iodepth = 0; }
static void ring_small(struct bench_opts *o) { o->queue_size = 32; }

static void test_refusals_say_why(void)
{
    static const struct {
        spoil_fn spoil;
        const char *words;
    } cases[] = {
        { no_device, "give exactly one of --socket and --kernel" },
        { both_devices, "give exactly one of --socket and --kernel" },
        { idle_verify, "--idle issues no I/O: not with --verify, --ios or --rate" },
        { kernel_packed, "--packed: the kernel's vhost has split rings only" },
        { kernel_inflight, "--inflight: the kernel's vhost has no inflight tracking" },
        { bad_tpgt, "bad --kernel w,x (want WWPN[,TPGT], TPGT 0..255)" },
        { bad_rw, "unknown --rw randrw" },
        { odd_bs, "bad --bs 1000 (multiple of 512, <= 16M)" },
        { huge_bs, "bad --bs 32m (multiple of 512, <= 16M)" },
        { bs_word, "bad --bs 4kb (multiple of 512, <= 16M)" },
        { lun_word, "bad --lun 3 (want T:L)" },
        { lun_range, "--lun out of range" },
        { queues_past, "--first-queue + --queues must be <= 64" },
        { depth_zero, "--iodepth 1..4096, --queues 1..64, --time >= 1" },
        { ring_small, "--queue-size 32 cannot hold --iodepth 16" },
    };

    for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
        struct bench_opts o;
        g_autoptr(GError) err = NULL;

        bench_opts_init(&o);
        o.socket = "/tmp/x.sock";
        cases[i].spoil(&o);
        g_assert_false(bench_opts_check(&o, &err));
        g_assert_error(err, BENCH_ERROR, BENCH_ERROR_USAGE);
        g_assert_cmpstr(err->message, ==, cases[i].words);
        bench_opts_clear(&o);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/bench-options/defaults", test_defaults);
    g_test_add_func("/bench-options/settled-values", test_settled_values);
    g_test_add_func("/bench-options/kernel-tpgt-is-the-target", test_kernel_tpgt_is_the_target);
    g_test_add_func("/bench-options/refusals-say-why", test_refusals_say_why);
    return g_test_run();
}
