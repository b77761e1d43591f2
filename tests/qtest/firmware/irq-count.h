/*
 * Where the interrupt-counting firmware (irq-count.S) keeps what the test
 * reads: shared by the assembler source and the qtest driver (msix.c) so
 * the two agree on guest addresses.  All of it lies below 1 MiB, out of
 * the way of the test's allocator (alloc.c starts there).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef QT_IRQ_COUNT_H
#define QT_IRQ_COUNT_H

#define QT_FW_IVT       0x0000      /* the real-mode interrupt table, 1 KiB */
#define QT_FW_READY     0x0ff0      /* QT_FW_MAGIC once the IDT and LAPIC are set up */
#define QT_FW_COUNTERS  0x1000      /* 256 x 32-bit: interrupts taken, by vector */
#define QT_FW_STACK     0x7000      /* top of the firmware's stack (segment 0) */
#define QT_FW_MAGIC     0x51a7c0de
/* Vectors below 32 are exceptions: the firmware counts one and stops. */
#define QT_FW_FIRST_IRQ 32

#endif
