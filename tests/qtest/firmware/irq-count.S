/*
 * The qtest guest's firmware in the KVM mode: instead of a BIOS that only
 * halts, a 64 KiB image that fills the real-mode interrupt table so that
 * every vector counts itself in guest RAM (irq-count.h), switches the
 * local APIC to x2APIC mode and software-enables it with the legacy PIC
 * and LINT0/1 masked, and then halts with interrupts enabled for ever.
 * An MSI-X message aimed at the LAPIC (address 0xfee00000, data = vector)
 * thus becomes one increment of that vector's counter, made by the vCPU
 * itself: proof the interrupt reached the CPU, whichever path (irqfd or
 * QEMU's userspace) carried it.  External vectors are acknowledged with
 * an EOI and return to the halt loop; an exception (vector < 32) is
 * counted and stops the CPU, so a test sees it instead of a KVM emulation
 * failure.
 *
 * It stays in real mode because the paravirtual KVM these tests run on
 * emulates real mode but does not get past the far jump into 32-bit
 * protected mode; x2APIC is what lets real-mode code reach the LAPIC (its
 * registers are MSRs, not MMIO at 0xfee00000).  Linked flat at 0: the
 * image is mapped at 0xf0000 below 1 MiB, so offsets in it are offsets
 * in segment 0xf000; the reset vector is its last 16 bytes.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "irq-count.h"

#define MSR_APIC_BASE   0x01b
#define APIC_BASE_X2APIC 0xc00          /* enable + extended (x2APIC) mode */
#define X2APIC_TPR      0x808
#define X2APIC_EOI      0x80b
#define X2APIC_SVR      0x80f
#define X2APIC_LINT0    0x835
#define X2APIC_LINT1    0x836
#define LVT_MASKED      0x10000
#define STUB_SIZE       16

        .text
        .code16
start:
        cli
        cld
        ljmp    $0xf000, $1f
1:      xorw    %ax, %ax
        movw    %ax, %ds
        movw    %ax, %es
        movw    %ax, %ss
        movw    $QT_FW_STACK, %sp

        xorl    %eax, %eax
        movw    $QT_FW_COUNTERS, %di
        movw    $256 * 2, %cx
        rep stosw

        /* Vector i: 0xf000:stub i. */
        movw    $QT_FW_IVT, %di
        movw    $stubs, %dx
        movw    $256, %cx
1:      movw    %dx, (%di)
        movw    $0xf000, 2(%di)
        addw    $4, %di
        addw    $STUB_SIZE, %dx
        loop    1b

        /* The PIC's timer would otherwise arrive as vector 8 through LINT0. */
        movb    $0xff, %al
        outb    %al, $0x21
        outb    %al, $0xa1
        movl    $MSR_APIC_BASE, %ecx
        rdmsr
        orl     $APIC_BASE_X2APIC, %eax
        wrmsr
        xorl    %edx, %edx
        movl    $X2APIC_SVR, %ecx
        movl    $0x1ff, %eax
        wrmsr
        movl    $X2APIC_LINT0, %ecx
        movl    $LVT_MASKED, %eax
        wrmsr
        movl    $X2APIC_LINT1, %ecx
        wrmsr
        movl    $X2APIC_TPR, %ecx
        xorl    %eax, %eax
        wrmsr
        movl    $QT_FW_MAGIC, QT_FW_READY

idle:   sti
        hlt
        jmp     idle

        /* %ax holds the vector; the interrupted %eax is on the stack. */
common:
        pushl   %ebx
        pushl   %ecx
        pushl   %edx
        movzwl  %ax, %ebx
        shlw    $2, %bx
        incl    QT_FW_COUNTERS(%bx)
        cmpw    $QT_FW_FIRST_IRQ, %ax
        jb      stop
        movl    $X2APIC_EOI, %ecx
        xorl    %eax, %eax
        xorl    %edx, %edx
        wrmsr
        popl    %edx
        popl    %ecx
        popl    %ebx
        popl    %eax
        iret
stop:   cli
        hlt
        jmp     stop

        .balign STUB_SIZE
stubs:
        .set    vec, 0
        .rept   256
        .balign STUB_SIZE
        pushl   %eax
        movw    $vec, %ax
        jmp     common
        .set    vec, vec + 1
        .endr

        .org    0xfff0
reset:  ljmp    $0xf000, $start    /* a far jump: CS becomes the image's segment */
        .org    0x10000
