/*
 * PCI configuration space through the legacy 0xcf8/0xcfc mechanism (no
 * firmware runs, so ECAM is never mapped), BAR sizing and assignment,
 * capability walks, and the bridge set-up a hot-plug root port needs
 * because nobody else numbers its secondary bus.  Memory BARs of bus 0
 * come from 0xe0000000; each secondary bus gets its own 16 MiB window
 * from 0xe8000000 so bridge windows never overlap bus-0 BARs.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "libqt.h"

#include <linux/pci_regs.h>

#define CF8 0xcf8
#define CFC 0xcfc

static uint64_t bus_mmio_base(uint8_t busnr)
{
    return busnr ? 0xe8000000ull + (uint64_t)(busnr - 1) * 0x1000000 : QT_PCI_MMIO_BASE;
}

void qt_pci_bus_init(struct qt_pci_bus *bus, struct qts *s)
{
    bus->s = s;
    bus->mmio_next = bus_mmio_base(0);
    bus->io_next = QT_PCI_IO_BASE;
}

static void cfg_addr(struct qt_pci_dev *d, uint8_t off)
{
    qts_outl(d->bus->s, CF8, 0x80000000u | (uint32_t)d->busnr << 16 |
             (uint32_t)d->devfn << 8 | (off & 0xfc));
}

uint8_t qt_pci_cfg_readb(struct qt_pci_dev *d, uint8_t off)
{
    cfg_addr(d, off);
    return qts_inb(d->bus->s, CFC + (off & 3));
}

uint16_t qt_pci_cfg_readw(struct qt_pci_dev *d, uint8_t off)
{
    cfg_addr(d, off);
    return qts_inw(d->bus->s, CFC + (off & 2));
}

uint32_t qt_pci_cfg_readl(struct qt_pci_dev *d, uint8_t off)
{
    cfg_addr(d, off);
    return qts_inl(d->bus->s, CFC);
}

void qt_pci_cfg_writeb(struct qt_pci_dev *d, uint8_t off, uint8_t v)
{
    cfg_addr(d, off);
    qts_outb(d->bus->s, CFC + (off & 3), v);
}

void qt_pci_cfg_writew(struct qt_pci_dev *d, uint8_t off, uint16_t v)
{
    cfg_addr(d, off);
    qts_outw(d->bus->s, CFC + (off & 2), v);
}

void qt_pci_cfg_writel(struct qt_pci_dev *d, uint8_t off, uint32_t v)
{
    cfg_addr(d, off);
    qts_outl(d->bus->s, CFC, v);
}

bool qt_pci_find(struct qt_pci_bus *bus, uint8_t busnr, uint16_t vendor,
                 uint16_t device, struct qt_pci_dev *d)
{
    for (unsigned devfn = 0; devfn < 256; devfn++) {
        struct qt_pci_dev t = { .bus = bus, .busnr = busnr, .devfn = devfn };
        uint32_t id = qt_pci_cfg_readl(&t, PCI_VENDOR_ID);
        if ((id & 0xffff) == 0xffff) {
            if ((devfn & 7) == 0) {
                devfn += 7;     /* no function 0: the slot is empty */
            }
            continue;
        }
        if ((id & 0xffff) == vendor && (!device || id >> 16 == device)) {
            *d = t;
            return true;
        }
    }
    return false;
}

void qt_pci_enable(struct qt_pci_dev *d)
{
    struct qt_pci_bus *bus = d->bus;
    uint64_t *mmio = &bus->mmio_next;
    uint64_t sec_next = 0;

    if (d->busnr) {
        /* Bus-0 allocation state is not shared with secondary buses. */
        sec_next = bus_mmio_base(d->busnr);
        mmio = &sec_next;
    }
    qt_pci_cfg_writew(d, PCI_COMMAND, 0);
    for (int i = 0; i < 6; i++) {
        uint8_t off = PCI_BASE_ADDRESS_0 + 4 * i;
        qt_pci_cfg_writel(d, off, 0xffffffff);
        uint32_t v = qt_pci_cfg_readl(d, off);
        d->bar[i] = 0;
        d->bar_size[i] = 0;
        if (!v) {
            continue;
        }
        if (v & PCI_BASE_ADDRESS_SPACE_IO) {
            uint32_t size = (~(v & PCI_BASE_ADDRESS_IO_MASK) + 1) & 0xffff;
            uint32_t addr = (bus->io_next + size - 1) & ~(size - 1);
            if (d->busnr) {
                addr = 0xd000;   /* the bridge's I/O window */
            } else {
                bus->io_next = addr + size;
            }
            qt_pci_cfg_writel(d, off, addr);
            d->bar[i] = addr;
            d->bar_size[i] = size;
            d->bar_io[i] = true;
            continue;
        }
        bool is64 = (v & PCI_BASE_ADDRESS_MEM_TYPE_MASK) == PCI_BASE_ADDRESS_MEM_TYPE_64;
        uint64_t mask = v & PCI_BASE_ADDRESS_MEM_MASK;
        if (is64) {
            qt_pci_cfg_writel(d, off + 4, 0xffffffff);
            mask |= (uint64_t)qt_pci_cfg_readl(d, off + 4) << 32;
        } else {
            mask |= 0xffffffff00000000ull;
        }
        uint64_t size = ~mask + 1;
        uint64_t addr = (*mmio + size - 1) & ~(size - 1);
        g_assert_cmpuint(addr + size - 1, <=, d->busnr ? bus_mmio_base(d->busnr) + 0xffffff
                                                       : 0xe7ffffffull);
        *mmio = addr + size;
        qt_pci_cfg_writel(d, off, (uint32_t)addr);
        if (is64) {
            qt_pci_cfg_writel(d, off + 4, addr >> 32);
        }
        d->bar[i] = addr;
        d->bar_size[i] = size;
        d->bar_io[i] = false;
        if (is64) {
            i++;
        }
    }
    qt_pci_cfg_writew(d, PCI_COMMAND, PCI_COMMAND_IO | PCI_COMMAND_MEMORY |
                      PCI_COMMAND_MASTER);
}

uint8_t qt_pci_find_cap(struct qt_pci_dev *d, uint8_t id, uint8_t start)
{
    uint8_t off;
    if (!start) {
        if (!(qt_pci_cfg_readw(d, PCI_STATUS) & PCI_STATUS_CAP_LIST)) {
            return 0;
        }
        off = qt_pci_cfg_readb(d, PCI_CAPABILITY_LIST);
    } else {
        off = qt_pci_cfg_readb(d, start + PCI_CAP_LIST_NEXT);
    }
    /* A malformed list must not hang the test: at most 48 capabilities fit. */
    for (int n = 0; off && n < 48; n++) {
        if (qt_pci_cfg_readb(d, off + PCI_CAP_LIST_ID) == id) {
            return off;
        }
        off = qt_pci_cfg_readb(d, off + PCI_CAP_LIST_NEXT);
    }
    return 0;
}

void qt_pcie_slot_power(struct qt_pci_bus *bus, uint8_t devfn, bool on)
{
    struct qt_pci_dev br = { .bus = bus, .busnr = 0, .devfn = devfn };
    uint8_t exp = qt_pci_find_cap(&br, PCI_CAP_ID_EXP, 0);
    g_assert(exp);
    uint16_t ctl = qt_pci_cfg_readw(&br, exp + PCI_EXP_SLTCTL);
    ctl &= ~(PCI_EXP_SLTCTL_PCC | PCI_EXP_SLTCTL_PIC);
    /* What pciehp does: power + indicator together; QEMU acts on the pair. */
    ctl |= on ? PCI_EXP_SLTCTL_PWR_IND_ON
              : (PCI_EXP_SLTCTL_PCC | PCI_EXP_SLTCTL_PWR_IND_OFF);
    qt_pci_cfg_writew(&br, exp + PCI_EXP_SLTCTL, ctl);
}

void qt_pci_bridge_setup(struct qt_pci_bus *bus, uint8_t devfn, uint8_t secbus)
{
    struct qt_pci_dev br = { .bus = bus, .busnr = 0, .devfn = devfn };
    uint64_t base = bus_mmio_base(secbus), limit = base + 0xffffff;

    g_assert_cmpuint(secbus, >=, 1);
    g_assert_cmpuint(qt_pci_cfg_readb(&br, PCI_HEADER_TYPE) & 0x7f, ==,
                     PCI_HEADER_TYPE_BRIDGE);
    qt_pci_cfg_writel(&br, PCI_PRIMARY_BUS, (uint32_t)secbus << 8 | (uint32_t)secbus << 16);
    qt_pci_cfg_writeb(&br, PCI_IO_BASE, 0xd0);
    qt_pci_cfg_writeb(&br, PCI_IO_LIMIT, 0xd0);
    qt_pci_cfg_writew(&br, PCI_MEMORY_BASE, (base >> 16) & 0xfff0);
    qt_pci_cfg_writew(&br, PCI_MEMORY_LIMIT, (limit >> 16) & 0xfff0);
    /* Prefetchable window closed (base > limit): all BARs use the window above. */
    qt_pci_cfg_writew(&br, PCI_PREF_MEMORY_BASE, 0xfff0);
    qt_pci_cfg_writew(&br, PCI_PREF_MEMORY_LIMIT, 0);
    qt_pci_cfg_writel(&br, PCI_PREF_BASE_UPPER32, 0);
    qt_pci_cfg_writel(&br, PCI_PREF_LIMIT_UPPER32, 0);
    qt_pci_cfg_writew(&br, PCI_COMMAND, PCI_COMMAND_IO | PCI_COMMAND_MEMORY |
                      PCI_COMMAND_MASTER);
    if (qt_pci_find_cap(&br, PCI_CAP_ID_EXP, 0)) {
        qt_pcie_slot_power(bus, devfn, true);
    }
}
