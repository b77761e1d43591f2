/*
 * Specification of the scatter-gather helpers (hw/util/iov.c).  Every
 * helper is checked against a flat reference buffer for every offset and
 * length over an iovec array with odd, uneven and zero-length elements, the
 * shapes a guest produces when it splits headers across descriptors.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <glib.h>

#include "iov.h"

/* Element sizes 1, 3, 0, 7, 2, 0, 5: 18 bytes in all, over separate buffers. */
static const size_t shape[] = { 1, 3, 0, 7, 2, 0, 5 };
#define NSHAPE G_N_ELEMENTS(shape)
#define TOTAL 18

struct fixture {
    uint8_t storage[NSHAPE][8];
    struct iovec iov[NSHAPE];
};

static void fixture_init(struct fixture *f)
{
    uint8_t v = 0;

    memset(f->storage, 0xee, sizeof(f->storage));
    for (unsigned i = 0; i < NSHAPE; i++) {
        f->iov[i].iov_base = f->storage[i];
        f->iov[i].iov_len = shape[i];
        for (size_t j = 0; j < shape[i]; j++) {
            f->storage[i][j] = v++;       /* byte k of the array holds k */
        }
    }
}

/* Flattens the array, to compare with a reference. */
static void flatten(const struct fixture *f, uint8_t *out)
{
    size_t k = 0;

    for (unsigned i = 0; i < NSHAPE; i++) {
        memcpy(out + k, f->storage[i], shape[i]);
        k += shape[i];
    }
}

static void test_size(void)
{
    struct fixture f;

    fixture_init(&f);
    g_assert_cmpuint(iov_size(f.iov, NSHAPE), ==, TOTAL);
    g_assert_cmpuint(iov_size(f.iov, 0), ==, 0);
    g_assert_cmpuint(iov_size(f.iov, 2), ==, 4);
}

static void test_to_buf_every_offset_and_length(void)
{
    struct fixture f;

    fixture_init(&f);
    for (size_t off = 0; off <= TOTAL + 2; off++) {
        for (size_t len = 0; len <= TOTAL + 2; len++) {
            uint8_t buf[TOTAL + 4];
            size_t expect = off >= TOTAL ? 0 : MIN(len, TOTAL - off);

            memset(buf, 0xaa, sizeof(buf));
            g_assert_cmpuint(iov_to_buf(f.iov, NSHAPE, off, buf, len), ==, expect);
            for (size_t k = 0; k < expect; k++) {
                g_assert_cmpuint(buf[k], ==, off + k);
            }
            /* Nothing beyond what was reported is written. */
            g_assert_cmpuint(buf[expect], ==, 0xaa);
        }
    }
}

static void test_from_buf_every_offset_and_length(void)
{
    for (size_t off = 0; off <= TOTAL + 2; off++) {
        for (size_t len = 0; len <= TOTAL + 2; len++) {
            struct fixture f;
            uint8_t src[TOTAL + 4], flat[TOTAL];
            size_t expect = off >= TOTAL ? 0 : MIN(len, TOTAL - off);

            fixture_init(&f);
            for (size_t k = 0; k < sizeof(src); k++) {
                src[k] = 0x80 + k;
            }
            g_assert_cmpuint(iov_from_buf(f.iov, NSHAPE, off, src, len), ==, expect);
            flatten(&f, flat);
            for (size_t k = 0; k < TOTAL; k++) {
                bool written = k >= off && k < off + expect;
                g_assert_cmpuint(flat[k], ==, written ? 0x80 + (k - off) : k);
            }
            /* Bytes after each element's length stay untouched. */
            for (unsigned i = 0; i < NSHAPE; i++) {
                g_assert_cmpuint(f.storage[i][shape[i]], ==, 0xee);
            }
        }
    }
}

static void test_memset(void)
{
    struct fixture f;
    uint8_t flat[TOTAL];

    fixture_init(&f);
    /* From the middle of the 3-byte element into the 7-byte one. */
    g_assert_cmpuint(iov_memset(f.iov, NSHAPE, 2, 0, 5), ==, 5);
    flatten(&f, flat);
    for (size_t k = 0; k < TOTAL; k++) {
        g_assert_cmpuint(flat[k], ==, (k >= 2 && k < 7) ? 0 : k);
    }
    /* Clipped at the end of the array. */
    g_assert_cmpuint(iov_memset(f.iov, NSHAPE, 15, 0x55, 100), ==, 3);
    g_assert_cmpuint(iov_memset(f.iov, NSHAPE, TOTAL, 0x55, 1), ==, 0);
}

static void test_slice_every_offset_and_length(void)
{
    struct fixture f;

    fixture_init(&f);
    for (size_t off = 0; off <= TOTAL; off++) {
        for (size_t len = 0; off + len <= TOTAL; len++) {
            struct iovec dst[NSHAPE];
            uint8_t got[TOTAL];
            int n = iov_slice(f.iov, NSHAPE, off, len, dst, NSHAPE);

            g_assert_cmpint(n, >=, 0);
            g_assert_cmpuint(iov_size(dst, n), ==, len);
            g_assert_cmpuint(iov_to_buf(dst, n, 0, got, len), ==, len);
            for (size_t k = 0; k < len; k++) {
                g_assert_cmpuint(got[k], ==, off + k);
            }
            /* No empty pieces: each one carries data. */
            for (int i = 0; i < n; i++) {
                g_assert_cmpuint(dst[i].iov_len, >, 0);
            }
        }
    }
}

static void test_slice_errors(void)
{
    struct fixture f;
    struct iovec dst[NSHAPE];

    fixture_init(&f);
    /* Longer than the source, from the start or near the end. */
    g_assert_cmpint(iov_slice(f.iov, NSHAPE, 0, TOTAL + 1, dst, NSHAPE), ==, -EINVAL);
    g_assert_cmpint(iov_slice(f.iov, NSHAPE, TOTAL, 1, dst, NSHAPE), ==, -EINVAL);
    g_assert_cmpint(iov_slice(f.iov, NSHAPE, SIZE_MAX, 1, dst, NSHAPE), ==, -EINVAL);
    /* Bytes 3..5 span the 3-byte and the 7-byte elements: two pieces. */
    g_assert_cmpint(iov_slice(f.iov, NSHAPE, 3, 3, dst, 2), ==, 2);
    g_assert_cmpint(iov_slice(f.iov, NSHAPE, 3, 3, dst, 1), ==, -ENOBUFS);
    g_assert_cmpint(iov_slice(f.iov, NSHAPE, 0, 0, dst, 0), ==, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/iov/size", test_size);
    g_test_add_func("/iov/to-buf/every-offset-and-length", test_to_buf_every_offset_and_length);
    g_test_add_func("/iov/from-buf/every-offset-and-length",
                    test_from_buf_every_offset_and_length);
    g_test_add_func("/iov/memset/odd-offsets", test_memset);
    g_test_add_func("/iov/slice/every-offset-and-length", test_slice_every_offset_and_length);
    g_test_add_func("/iov/slice/errors", test_slice_errors);
    return g_test_run();
}
