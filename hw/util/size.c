/*
 * Sizes as people write them on command lines and in specs: decimal
 * digits with an optional K, M, G or T (powers of 1024, either case).
 * One parser for vhost-scsi-target's --lun and vhost-scsi-ctl's LUNs, so
 * both accept exactly the same sizes.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdint.h>

#include <glib.h>

#include "size.h"

int size_parse(const char *str, uint64_t *out)
{
    uint64_t v = 0, mult = 1;
    const char *p = str;

    if (!g_ascii_isdigit(*p)) {
        return -EINVAL;
    }
    for (; g_ascii_isdigit(*p); p++) {
        unsigned d = *p - '0';

        if (v > (UINT64_MAX - d) / 10) {
            return -EINVAL;
        }
        v = v * 10 + d;
    }
    switch (g_ascii_toupper(*p)) {
    case '\0':
        break;
    case 'K':
        mult = 1ull << 10;
        break;
    case 'M':
        mult = 1ull << 20;
        break;
    case 'G':
        mult = 1ull << 30;
        break;
    case 'T':
        mult = 1ull << 40;
        break;
    default:
        return -EINVAL;
    }
    if (*p && p[1]) {
        return -EINVAL;
    }
    if (v > UINT64_MAX / mult) {
        return -EINVAL;
    }
    *out = v * mult;
    return 0;
}
