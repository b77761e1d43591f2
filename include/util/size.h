/*
 * Sizes with an optional K/M/G/T suffix (hw/util/size.c).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_SIZE_H
#define VHOST_SCSI_SIZE_H

#include <stdint.h>

/*
 * Digits, then at most one of K, M, G, T (either case, powers of 1024);
 * nothing else, no sign, no spaces.  Returns 0 and sets *out, or -EINVAL
 * (leaving *out alone) for anything else or a value above UINT64_MAX.
 */
int size_parse(const char *str, uint64_t *out);

#endif
