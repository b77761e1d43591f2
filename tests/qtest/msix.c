/*
 * MSI-X as a qtest driver sees it.  With no irqfd and no running vCPU,
 * an MSI-X message is just a 32-bit DMA write by the device to the
 * vector's address; pointing every vector at its own slot in guest RAM
 * turns "interrupt raised" into "slot became non-zero".  The test clears
 * a slot when it consumes the interrupt, so each observation counts one
 * or more writes since the last one.  Masking and the PBA are the
 * architected ones: a masked vector sets its pending bit instead.
 *
 * When the vCPU runs the interrupt-counting firmware (the KVM mode), a
 * write to RAM would prove nothing -- with irqfd KVM injects the message
 * and nothing is written -- so every vector is aimed at the LAPIC
 * (0xfee00000, APIC ID 0) with its own CPU vector, and "fired" means the
 * vCPU's counter for that vector moved since the test last looked.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "libqt.h"

#include <linux/pci_regs.h>

#define LAPIC_MSI_ADDR 0xfee00000u

uint32_t qt_msix_data(struct qt_msix *m, unsigned vec)
{
    return m->lapic ? m->cpu_vector[vec] : 0x5ca1ab00u | (vec & 0xff);
}

uint32_t qt_msix_taken(struct qt_msix *m, unsigned vec)
{
    g_assert(m->lapic);
    g_assert_cmpuint(vec, <, m->nvec);
    return qts_irq_count(m->dev->bus->s, qt_msix_data(m, vec));
}

static uint64_t bir_addr(struct qt_pci_dev *d, uint32_t v)
{
    unsigned bir = v & PCI_MSIX_TABLE_BIR;
    g_assert_cmpuint(bir, <, 6);
    g_assert(d->bar[bir] && !d->bar_io[bir]);
    return d->bar[bir] + (v & PCI_MSIX_TABLE_OFFSET);
}

static uint64_t entry(struct qt_msix *m, unsigned vec)
{
    g_assert_cmpuint(vec, <, m->nvec);
    return m->table + (uint64_t)vec * PCI_MSIX_ENTRY_SIZE;
}

void qt_msix_init(struct qt_msix *m, struct qt_pci_dev *dev, struct qt_alloc *a)
{
    m->dev = dev;
    m->cap = qt_pci_find_cap(dev, PCI_CAP_ID_MSIX, 0);
    g_assert(m->cap);
    uint16_t ctl = qt_pci_cfg_readw(dev, m->cap + PCI_MSIX_FLAGS);
    m->nvec = (ctl & PCI_MSIX_FLAGS_QSIZE) + 1;
    m->table = bir_addr(dev, qt_pci_cfg_readl(dev, m->cap + PCI_MSIX_TABLE));
    m->pba = bir_addr(dev, qt_pci_cfg_readl(dev, m->cap + PCI_MSIX_PBA));
    m->lapic = qts_counts_irqs(dev->bus->s);
    if (m->lapic) {
        g_assert_cmpuint(m->nvec, <=, QT_MSIX_MAX_CPU_VECTORS);
        for (unsigned v = 0; v < m->nvec; v++) {
            m->cpu_vector[v] = QT_MSIX_CPU_VECTOR_BASE + v;
            m->seen[v] = qt_msix_taken(m, v);
        }
    } else {
        if (!m->slots) {
            m->slots = qt_alloc(a, 4ull * m->nvec, 64);
        }
        qts_memset(dev->bus->s, m->slots, 0, 4ull * m->nvec);
    }
    for (unsigned v = 0; v < m->nvec; v++) {
        uint64_t e = entry(m, v);
        uint64_t addr = m->lapic ? LAPIC_MSI_ADDR : m->slots + 4ull * v;
        qts_writel(dev->bus->s, e + PCI_MSIX_ENTRY_LOWER_ADDR, (uint32_t)addr);
        qts_writel(dev->bus->s, e + PCI_MSIX_ENTRY_UPPER_ADDR, addr >> 32);
        qts_writel(dev->bus->s, e + PCI_MSIX_ENTRY_DATA, qt_msix_data(m, v));
        qts_writel(dev->bus->s, e + PCI_MSIX_ENTRY_VECTOR_CTRL, 0);
    }
}

void qt_msix_enable(struct qt_msix *m, bool on)
{
    uint16_t ctl = qt_pci_cfg_readw(m->dev, m->cap + PCI_MSIX_FLAGS);
    ctl &= ~(PCI_MSIX_FLAGS_ENABLE | PCI_MSIX_FLAGS_MASKALL);
    if (on) {
        ctl |= PCI_MSIX_FLAGS_ENABLE;
    }
    qt_pci_cfg_writew(m->dev, m->cap + PCI_MSIX_FLAGS, ctl);
}

void qt_msix_mask_all(struct qt_msix *m, bool masked)
{
    uint16_t ctl = qt_pci_cfg_readw(m->dev, m->cap + PCI_MSIX_FLAGS);
    ctl = masked ? ctl | PCI_MSIX_FLAGS_MASKALL : ctl & ~PCI_MSIX_FLAGS_MASKALL;
    qt_pci_cfg_writew(m->dev, m->cap + PCI_MSIX_FLAGS, ctl);
}

void qt_msix_mask(struct qt_msix *m, unsigned vec, bool masked)
{
    qts_writel(m->dev->bus->s, entry(m, vec) + PCI_MSIX_ENTRY_VECTOR_CTRL,
               masked ? PCI_MSIX_ENTRY_CTRL_MASKBIT : 0);
}

void qt_msix_retarget(struct qt_msix *m, unsigned vec, uint8_t cpu_vector)
{
    g_assert(m->lapic);
    g_assert_cmpuint(cpu_vector, >=, QT_MSIX_CPU_VECTOR_BASE);
    m->cpu_vector[vec] = cpu_vector;
    m->seen[vec] = qt_msix_taken(m, vec);
    qts_writel(m->dev->bus->s, entry(m, vec) + PCI_MSIX_ENTRY_DATA, cpu_vector);
}

bool qt_msix_pending(struct qt_msix *m, unsigned vec)
{
    g_assert_cmpuint(vec, <, m->nvec);
    uint32_t w = qts_readl(m->dev->bus->s, m->pba + (vec / 32) * 4);
    return w & (1u << (vec % 32));
}

bool qt_msix_fired(struct qt_msix *m, unsigned vec)
{
    g_assert_cmpuint(vec, <, m->nvec);
    if (m->lapic) {
        uint32_t n = qt_msix_taken(m, vec);
        bool moved = n != m->seen[vec];
        m->seen[vec] = n;
        return moved;
    }
    uint64_t slot = m->slots + 4ull * vec;
    uint32_t v = qts_readl(m->dev->bus->s, slot);
    if (!v) {
        return false;
    }
    /* Only this vector's entry points here, so anything else is a device bug. */
    g_assert_cmphex(v, ==, qt_msix_data(m, vec));
    qts_writel(m->dev->bus->s, slot, 0);
    return true;
}

bool qt_msix_wait(struct qt_msix *m, unsigned vec, gint64 timeout_us)
{
    gint64 deadline = g_get_monotonic_time() + timeout_us;
    do {
        if (qt_msix_fired(m, vec)) {
            return true;
        }
    } while (g_get_monotonic_time() < deadline);
    return false;
}
