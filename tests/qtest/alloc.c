/*
 * Guest memory for the test's driver structures: a bump allocator over
 * guest RAM from 1 MiB (below that sit the legacy holes) to the end of the
 * 256 MiB the suite gives QEMU.  Nothing is ever freed: a scenario uses a
 * few MiB and each QEMU lives for one scenario.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "libqt.h"

void qt_alloc_init(struct qt_alloc *a)
{
    a->next = QT_ALLOC_BASE;
    a->end = QT_RAM_SIZE;
}

uint64_t qt_alloc(struct qt_alloc *a, uint64_t size, uint64_t align)
{
    g_assert(align && !(align & (align - 1)));
    uint64_t addr = (a->next + align - 1) & ~(align - 1);
    g_assert_cmpuint(addr + size, <=, a->end);
    a->next = addr + size;
    return addr;
}
