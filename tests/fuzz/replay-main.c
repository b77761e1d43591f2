/*
 * A stand-in for libFuzzer's driver, so every fuzz target also builds with
 * gcc and runs in the normal (sanitized) test suite: it replays each file
 * of the corpus directories given on the command line, then feeds a fixed
 * number of pseudo-random inputs (a seeded generator, so a failure
 * reproduces) derived from the corpus files by mutation.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdio.h>
#include <stdlib.h>

#include <glib.h>

#include "fuzz-common.h"

static GPtrArray *load_corpus(int argc, char **argv)
{
    GPtrArray *files = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);

    for (int i = 1; i < argc; i++) {
        GDir *dir = g_dir_open(argv[i], 0, NULL);
        const char *name;

        if (!dir) {
            fprintf(stderr, "replay: cannot open corpus %s\n", argv[i]);
            exit(1);
        }
        while ((name = g_dir_read_name(dir))) {
            char *path = g_build_filename(argv[i], name, NULL);
            gchar *data;
            gsize len;

            if (g_file_get_contents(path, &data, &len, NULL)) {
                g_ptr_array_add(files, g_bytes_new_take(data, len));
            }
            g_free(path);
        }
        g_dir_close(dir);
    }
    return files;
}

int main(int argc, char **argv)
{
    GPtrArray *files = load_corpus(argc, argv);
    const char *iters_env = g_getenv("FUZZ_REPLAY_ITERATIONS");
    unsigned iters = iters_env ? (unsigned)atoi(iters_env) : 2000;
    GRand *rng = g_rand_new_with_seed(0x5c51);
    uint8_t buf[4096];

    for (guint i = 0; i < files->len; i++) {
        gsize len;
        const uint8_t *d = g_bytes_get_data(g_ptr_array_index(files, i), &len);

        LLVMFuzzerTestOneInput(d, len);
    }
    for (unsigned i = 0; i < iters; i++) {
        size_t len;

        if (files->len && (i & 1)) {
            /* Mutate a corpus entry: flip bytes and perhaps truncate. */
            gsize src_len;
            const uint8_t *src = g_bytes_get_data(
                g_ptr_array_index(files, g_rand_int_range(rng, 0, (gint32)files->len)),
                &src_len);

            len = MIN(src_len, sizeof(buf));
            memcpy(buf, src, len);
            for (int k = 0; k < 1 + g_rand_int_range(rng, 0, 8) && len; k++) {
                buf[g_rand_int_range(rng, 0, (gint32)len)] = (uint8_t)g_rand_int(rng);
            }
            if (g_rand_boolean(rng) && len) {
                len = (size_t)g_rand_int_range(rng, 0, (gint32)len + 1);
            }
        } else {
            len = (size_t)g_rand_int_range(rng, 0, sizeof(buf));
            for (size_t k = 0; k < len; k++) {
                buf[k] = (uint8_t)g_rand_int(rng);
            }
        }
        LLVMFuzzerTestOneInput(buf, len);
    }
    printf("replayed %u corpus files and %u generated inputs\n", files->len, iters);
    g_rand_free(rng);
    g_ptr_array_free(files, TRUE);
    return 0;
}
