/*
 * Shared pieces of the fuzz targets: a byte-stream reader over the fuzzer's
 * input, a small fake guest RAM registered as one memory region, and the
 * LUNs the virtio-scsi targets serve.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_FUZZ_COMMON_H
#define VHOST_SCSI_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "backend.h"
#include "guest-mem.h"
#include "scsi-target.h"

/* Guest RAM for ring fuzzing: small so random addresses often land in it. */
#define FUZZ_RAM_GPA 0x10000ull
#define FUZZ_RAM_SIZE 0x10000ull

struct fuzz_in {
    const uint8_t *p;
    size_t left;
};

static inline uint64_t fuzz_take(struct fuzz_in *in, unsigned bytes)
{
    uint64_t v = 0;

    for (unsigned i = 0; i < bytes; i++) {
        v |= (uint64_t)(in->left ? (in->left--, *in->p++) : 0) << (8 * i);
    }
    return v;
}

static inline size_t fuzz_copy(struct fuzz_in *in, void *dst, size_t len)
{
    size_t n = MIN(len, in->left);

    memcpy(dst, in->p, n);
    memset((uint8_t *)dst + n, 0, len - n);
    in->p += n;
    in->left -= n;
    return n;
}

static inline void fuzz_log_nothing(const gchar *domain, GLogLevelFlags level,
                                    const gchar *message, gpointer opaque)
{
}

/* Quiet logging: bad input is the point, and its warnings must not abort. */
static inline void fuzz_quiet_logs(void)
{
    static gboolean done;

    if (!done) {
        g_log_set_always_fatal(G_LOG_FATAL_MASK);
        if (!g_getenv("FUZZ_VERBOSE")) {
            g_log_set_handler("vhost-scsi", G_LOG_LEVEL_MASK, fuzz_log_nothing, NULL);
        }
        done = TRUE;
    }
}

/* Registers ram (FUZZ_RAM_SIZE bytes) as guest RAM at FUZZ_RAM_GPA, or aborts. */
static inline void fuzz_mem_init(struct guest_mem *mem, uint8_t *ram)
{
    struct guest_mem_region r = {
        .gpa = FUZZ_RAM_GPA, .size = FUZZ_RAM_SIZE, .uva = (uintptr_t)ram, .host = ram,
        .fd = -1,
    };

    guest_mem_init(mem);
    if (guest_mem_add(mem, &r) < 0) {
        abort();
    }
}

/* LUN 0:0 is 1 MiB of RAM in 512-byte blocks, 0:1 a 1 GiB null LUN in
 * 4 KiB blocks; aborts if they cannot be made. */
static inline struct scsi_target *fuzz_target_new(void)
{
    struct scsi_target *t = scsi_target_new("fuzz");
    struct lun_backend *be;

    if (backend_ram_new(1 << 20, 512, &be, NULL) < 0 ||
        scsi_target_add_lun(t, 0, 0, scsi_lun_new(be, "fuzz-ram", NULL, NULL)) < 0 ||
        backend_null_new(1 << 30, 4096, &be, NULL) < 0 ||
        scsi_target_add_lun(t, 0, 1, scsi_lun_new(be, "fuzz-null", NULL, NULL)) < 0) {
        abort();
    }
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
