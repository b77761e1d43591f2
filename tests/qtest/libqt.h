/*
 * The qtest driver library: everything a test needs to play the guest
 * driver of a virtio-scsi PCI device inside a real QEMU whose vCPU never
 * runs.  The test talks to QEMU over two sockets (the qtest text protocol
 * for port/memory access, QMP for management) and builds PCI, MSI-X,
 * virtio-pci and split-ring state in guest RAM by hand, so every step of
 * a guest driver is explicit and can be made to misbehave on purpose.
 * Layers: qtest.c (process, protocols), pci.c (config space, BARs),
 * observe.c (QEMU's RAM and threads seen from outside),
 * msix.c (vectors and interrupt slots), virtio-pci.c (modern transport),
 * alloc.c (guest RAM), vring.c (split virtqueue), vring-packed.c (packed
 * virtqueue), virtio-scsi.c (requests).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_LIBQT_H
#define VHOST_SCSI_LIBQT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <glib.h>

/* Bounded waits: every poll loop in the suite gives up after this long. */
#define QT_TIMEOUT_US (20 * G_USEC_PER_SEC)

/* ---- qtest.c: a QEMU process and its two sockets ---- */

struct qts;

/* QEMU version of the binary in $QEMU (default qemu-system-x86_64). */
void qt_qemu_version(int *major, int *minor);
const char *qt_qemu_binary(void);

/*
 * Starts QEMU (q35, TCG, 256 MiB shareable memfd RAM, an HLT-only BIOS,
 * no default devices) with extra arguments appended, and connects to it.
 * Fails the test if QEMU does not come up.
 */
struct qts *qts_start(const char *fmt, ...) G_GNUC_PRINTF(1, 2);

/*
 * The KVM mode and the interrupt-counting firmware (firmware/irq-count.S):
 * with a firmware the vCPU takes every interrupt and counts it by vector
 * in guest RAM, and msix.c aims vectors at the LAPIC instead of RAM slots.
 */
struct qts_opts {
    bool kvm;                     /* -accel kvm; else TCG */
    const char *firmware;         /* the irq-count image; NULL: the HLT BIOS */
    const char *accel_extra;      /* appended to -accel kvm (",kernel-irqchip=off") */
};
struct qts *qts_start_opts(const struct qts_opts *o, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
/* True if /dev/kvm can be opened and speaks KVM's API; else why not (caller frees). */
bool qt_kvm_usable(char **why);
bool qts_counts_irqs(struct qts *s);
/* Interrupts the vCPU has taken on a CPU vector since the firmware started. */
uint32_t qts_irq_count(struct qts *s, unsigned vector);
/* Exceptions the vCPU took (the firmware stops at the first). */
unsigned qts_exceptions(struct qts *s);
pid_t qts_pid(struct qts *s);

/* ---- observe.c: QEMU watched from outside, without a command that wakes it ---- */

/* Guest RAM (QT_RAM_SIZE bytes from guest-physical 0), read-only, through QEMU's memfd. */
const volatile uint8_t *qt_ram_map(struct qts *s);
void qt_ram_unmap(const volatile uint8_t *ram);
/* The firmware's counter for a CPU vector, in a qt_ram_map() mapping. */
const volatile uint32_t *qt_ram_irq_counter(const volatile uint8_t *ram, unsigned vector);
/* Context switches so far of QEMU's threads other than its vCPUs. */
uint64_t qts_wakeups(struct qts *s);
/*
 * Waits (bounded) until QEMU's main thread sleeps, so that the switch it
 * makes going back to sleep after the last command is not counted later.
 */
void qts_wait_asleep(struct qts *s);
/* Asks QEMU to quit, waits for it (kills it after a timeout), frees. */
void qts_quit(struct qts *s);
/* True while the QEMU process has not exited (and not aborted). */
bool qts_alive(struct qts *s);
/* Exit status as waitpid() reported it once QEMU is gone; -1 while alive. */
int qts_wait_status(struct qts *s);

void qts_outb(struct qts *s, uint16_t port, uint8_t v);
void qts_outw(struct qts *s, uint16_t port, uint16_t v);
void qts_outl(struct qts *s, uint16_t port, uint32_t v);
uint8_t qts_inb(struct qts *s, uint16_t port);
uint16_t qts_inw(struct qts *s, uint16_t port);
uint32_t qts_inl(struct qts *s, uint16_t port);
uint8_t qts_readb(struct qts *s, uint64_t addr);
uint16_t qts_readw(struct qts *s, uint64_t addr);
uint32_t qts_readl(struct qts *s, uint64_t addr);
uint64_t qts_readq(struct qts *s, uint64_t addr);
void qts_writeb(struct qts *s, uint64_t addr, uint8_t v);
void qts_writew(struct qts *s, uint64_t addr, uint16_t v);
void qts_writel(struct qts *s, uint64_t addr, uint32_t v);
void qts_writeq(struct qts *s, uint64_t addr, uint64_t v);
void qts_memread(struct qts *s, uint64_t addr, void *buf, size_t len);
void qts_memwrite(struct qts *s, uint64_t addr, const void *buf, size_t len);
void qts_memset(struct qts *s, uint64_t addr, uint8_t c, size_t len);

/*
 * QMP.  qmp() sends one command (printf-style JSON) and returns the reply
 * line (caller frees); events that arrive meanwhile are queued.  The
 * reply is either {"return": ...} or {"error": ...}: see qmp_ok().
 */
char *qmp(struct qts *s, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
bool qmp_ok(const char *reply);
/* Sends a command without waiting for the reply (qmp_reply() gets it). */
void qmp_send(struct qts *s, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
char *qmp_reply(struct qts *s);
/*
 * Waits for an event named name whose line contains match (or any, if
 * NULL); returns the event line, or NULL after timeout_us.
 */
char *qmp_wait_event(struct qts *s, const char *name, const char *match,
                     gint64 timeout_us);
/* device_add with the given arguments ("'driver': ..., 'id': ..."); fails the test on error. */
void qmp_device_add(struct qts *s, const char *args);
/* True if query-pci lists a device with this qdev id, on any bus. */
bool qmp_pci_has_device(struct qts *s, const char *qdev_id);
/* True if QEMU answers QMP (query-status) — "not aborted, not wedged". */
bool qmp_responsive(struct qts *s);

/* ---- pci.c: config space through 0xcf8/0xcfc ---- */

#define QT_PCI_MMIO_BASE 0xe0000000ull   /* below q35's IOAPIC/LAPIC, above ECAM */
#define QT_PCI_MMIO_END  0xefffffffull
#define QT_PCI_IO_BASE   0xc000

struct qt_pci_bus {
    struct qts *s;
    uint64_t mmio_next;     /* bump allocator for memory BARs */
    uint32_t io_next;
};

struct qt_pci_dev {
    struct qt_pci_bus *bus;
    uint8_t busnr, devfn;
    uint64_t bar[6];        /* assigned address (0 if none) */
    uint64_t bar_size[6];
    bool bar_io[6];
};

void qt_pci_bus_init(struct qt_pci_bus *bus, struct qts *s);
uint8_t qt_pci_cfg_readb(struct qt_pci_dev *d, uint8_t off);
uint16_t qt_pci_cfg_readw(struct qt_pci_dev *d, uint8_t off);
uint32_t qt_pci_cfg_readl(struct qt_pci_dev *d, uint8_t off);
void qt_pci_cfg_writeb(struct qt_pci_dev *d, uint8_t off, uint8_t v);
void qt_pci_cfg_writew(struct qt_pci_dev *d, uint8_t off, uint16_t v);
void qt_pci_cfg_writel(struct qt_pci_dev *d, uint8_t off, uint32_t v);
/*
 * Finds the first function with this vendor/device id on busnr; fills d.
 * Returns false if none.
 */
bool qt_pci_find(struct qt_pci_bus *bus, uint8_t busnr, uint16_t vendor,
                 uint16_t device, struct qt_pci_dev *d);
/* Sizes and assigns every BAR, enables memory, I/O and bus mastering. */
void qt_pci_enable(struct qt_pci_dev *d);
/* Offset of the next capability with this id after 'start' (0: first); 0 if none. */
uint8_t qt_pci_find_cap(struct qt_pci_dev *d, uint8_t id, uint8_t start);
/*
 * Programs a PCI-PCI bridge (e.g. pcie-root-port) at 0:devfn so that
 * secbus is behind it and the whole MMIO window is forwarded, and powers
 * its hot-plug slot on.
 */
void qt_pci_bridge_setup(struct qt_pci_bus *bus, uint8_t devfn, uint8_t secbus);
/* Guest side of a PCIe native unplug: power the slot off (QEMU then unplugs). */
void qt_pcie_slot_power(struct qt_pci_bus *bus, uint8_t devfn, bool on);

/* ---- alloc.c: guest RAM ---- */

#define QT_RAM_SIZE   (256ull << 20)
#define QT_ALLOC_BASE (1ull << 20)

struct qt_alloc {
    uint64_t next, end;
};
void qt_alloc_init(struct qt_alloc *a);
/* Bump allocation, aligned; guest memory is zeroed by the caller if needed. */
uint64_t qt_alloc(struct qt_alloc *a, uint64_t size, uint64_t align);

/* ---- msix.c: MSI-X vectors that write into guest RAM or reach the vCPU ---- */

/* With the counting firmware, MSI-X vector v interrupts the vCPU on this + v. */
#define QT_MSIX_CPU_VECTOR_BASE 0x30
#define QT_MSIX_MAX_CPU_VECTORS (256 - QT_MSIX_CPU_VECTOR_BASE)

struct qt_msix {
    struct qt_pci_dev *dev;
    uint8_t cap;
    unsigned nvec;
    uint64_t table, pba;          /* guest-physical addresses */
    uint64_t slots;               /* nvec u32 slots in guest RAM (not lapic) */
    bool lapic;                   /* vectors aim at the LAPIC (qts_counts_irqs) */
    uint32_t seen[QT_MSIX_MAX_CPU_VECTORS];   /* lapic: counts already consumed */
    uint8_t cpu_vector[QT_MSIX_MAX_CPU_VECTORS];  /* lapic: each vector's data */
};

/*
 * Finds the capability and points every vector at its own RAM slot, or,
 * when the vCPU counts interrupts, at the LAPIC with its own CPU vector.
 */
void qt_msix_init(struct qt_msix *m, struct qt_pci_dev *dev, struct qt_alloc *a);
void qt_msix_enable(struct qt_msix *m, bool on);
void qt_msix_mask(struct qt_msix *m, unsigned vec, bool masked);
/* The function mask (every vector at once), leaving enable as it is. */
void qt_msix_mask_all(struct qt_msix *m, bool masked);
bool qt_msix_pending(struct qt_msix *m, unsigned vec);   /* PBA bit */
/* True (and clears the slot) if vector vec has fired since the last call or init. */
bool qt_msix_fired(struct qt_msix *m, unsigned vec);
/* Waits up to timeout_us for vec to fire (consumes it). */
bool qt_msix_wait(struct qt_msix *m, unsigned vec, gint64 timeout_us);
/* The data word a vector writes: lets tests tell vectors apart. */
uint32_t qt_msix_data(struct qt_msix *m, unsigned vec);
/* lapic: interrupts the vCPU has taken on vec's CPU vector (a running count). */
uint32_t qt_msix_taken(struct qt_msix *m, unsigned vec);
/* lapic: rewrites vec's message to interrupt the vCPU on cpu_vector instead. */
void qt_msix_retarget(struct qt_msix *m, unsigned vec, uint8_t cpu_vector);

/* ---- virtio-pci.c: the modern transport ---- */

#define QT_VIRTIO_MAX_QUEUES 16

struct qt_vring;

struct qt_vpci {
    struct qts *s;
    struct qt_pci_dev pci;
    struct qt_msix msix;
    uint64_t common, notify, isr, device;   /* guest-physical addresses */
    uint32_t notify_mult;
};

/* Enables the PCI function and reads the virtio capabilities. */
void qt_vpci_init(struct qt_vpci *v, struct qt_pci_dev *pci, struct qt_alloc *a);
uint8_t qt_vpci_status(struct qt_vpci *v);
void qt_vpci_set_status(struct qt_vpci *v, uint8_t status);
/* Writes 0 and waits until the device reads back 0 (virtio 1.x 4.1.4.3.2). */
void qt_vpci_reset(struct qt_vpci *v);
uint64_t qt_vpci_device_features(struct qt_vpci *v);
/* Writes the driver features and sets FEATURES_OK; returns whether it stuck. */
bool qt_vpci_set_features(struct qt_vpci *v, uint64_t features);
uint16_t qt_vpci_num_queues(struct qt_vpci *v);
uint16_t qt_vpci_queue_max(struct qt_vpci *v, uint16_t q);
/* Sets a queue's (or config, q = 0xffff) vector; returns the read-back. */
uint16_t qt_vpci_set_vector(struct qt_vpci *v, uint16_t q, uint16_t vec);
/* Programs size and addresses of vq and enables it. */
void qt_vpci_queue_setup(struct qt_vpci *v, struct qt_vring *vq);
void qt_vpci_notify(struct qt_vpci *v, struct qt_vring *vq);
/* Reading ISR acknowledges it (INTx mode). */
uint8_t qt_vpci_isr(struct qt_vpci *v);
uint32_t qt_vpci_cfg_readl(struct qt_vpci *v, unsigned off);

/* ---- vring.c: a split virtqueue in guest memory (packed: vring-packed.c) ---- */

struct qt_sg {
    uint64_t addr;
    uint32_t len;
    bool write;        /* device writes (VRING_DESC_F_WRITE) */
};

/*
 * A virtqueue, split or (packed set) packed.  For a packed ring desc is
 * the descriptor ring, avail the driver event area and used the device
 * event area (what the transport's queue_desc/driver/device take); a
 * head is a buffer id, avail_idx and last_used are ring slots and
 * num_free counts free slots.
 */
struct qt_vring {
    struct qts *s;
    uint16_t index, size;
    uint64_t desc, avail, used;
    uint16_t free_head, num_free;
    uint16_t avail_idx;           /* shadow of avail->idx; packed: next slot to fill */
    uint16_t last_used;           /* packed: the slot of the next used descriptor */
    uint16_t vector;              /* MSI-X vector assigned, or NO_VECTOR */
    bool event_idx;
    bool packed;                  /* VIRTIO_F_RING_PACKED */
    bool avail_wrap, used_wrap;   /* packed: wrap counters of avail_idx and last_used */
    uint16_t num_added;           /* packed: slots made available since the last kick decision */
    unsigned kicks_skipped;       /* kick decisions the device event area said no to */
    uint16_t *next_free;          /* driver-side free list (packed: of buffer ids) */
    uint16_t *chain_len;          /* descriptors (packed: slots) per head, for freeing */
    bool *done;                   /* head completed, not yet consumed */
    uint32_t *done_len;
    uint64_t *buf_addr;           /* packed: each id's first buffer (split reads it from desc) */
};

void qt_vring_init(struct qt_vring *vq, struct qts *s, struct qt_alloc *a,
                   uint16_t index, uint16_t size, bool event_idx);
/* The driver-side state of either layout, no guest memory yet (the inits call it). */
void qt_vring_init_state(struct qt_vring *vq, struct qts *s, uint16_t index, uint16_t size,
                         bool event_idx, bool packed);
void qt_vring_free(struct qt_vring *vq);
/* Rewinds the driver state (after a device reset), keeping the memory. */
void qt_vring_reset(struct qt_vring *vq);
/* Adds a chain and publishes it in the avail ring; returns the head. */
int qt_vring_add(struct qt_vring *vq, const struct qt_sg *sg, unsigned n);
/* Writes the chain's descriptors only; qt_vring_publish() makes it available. */
int qt_vring_prepare(struct qt_vring *vq, const struct qt_sg *sg, unsigned n);
/* Writes a raw descriptor (for malformed chains). */
void qt_vring_write_desc(struct qt_vring *vq, uint16_t i, uint64_t addr,
                         uint32_t len, uint16_t flags, uint16_t next);
/* Publishes head in the avail ring without touching descriptors. */
void qt_vring_publish(struct qt_vring *vq, uint16_t head);
uint16_t qt_vring_used_idx(struct qt_vring *vq);
/*
 * Pops one used element (head, len); returns false if none.  Frees the
 * chain's descriptors.
 */
bool qt_vring_get(struct qt_vring *vq, uint32_t *head, uint32_t *len);
/* Remembers head id as done with len (a layout's pop calls it); checks the id is ours. */
void qt_vring_mark_used(struct qt_vring *vq, uint32_t id, uint32_t len);
/* Pops one used element and remembers it as done (descriptors kept). */
bool qt_vring_pop(struct qt_vring *vq, uint32_t *head, uint32_t *len);
void qt_vring_free_chain(struct qt_vring *vq, uint16_t head);
/* Waits (bounded) until head is used, whatever order others complete in. */
bool qt_vring_wait_head(struct qt_vring *vq, uint16_t head, uint32_t *len,
                        gint64 timeout_us);
/* Waits for a used element (bounded); false on timeout. */
bool qt_vring_wait(struct qt_vring *vq, uint32_t *head, uint32_t *len,
                   gint64 timeout_us);
/* Whether the device wants a kick for what was added since the last call (split: always). */
bool qt_vring_kick_needed(struct qt_vring *vq);
/* The first buffer of head's chain (its address, as the driver gave it). */
uint64_t qt_vring_buf_addr(struct qt_vring *vq, uint16_t head);
/* EVENT_IDX: the driver's used_event (interrupt when used idx passes it). */
void qt_vring_set_used_event(struct qt_vring *vq, uint16_t v);
/* Without EVENT_IDX: VRING_AVAIL_F_NO_INTERRUPT. */
void qt_vring_set_no_interrupt(struct qt_vring *vq, bool on);

/* ---- vring-packed.c: a packed virtqueue (the qt_vring_* calls above serve it too) ---- */

void qt_vring_packed_init(struct qt_vring *vq, struct qts *s, struct qt_alloc *a,
                          uint16_t index, uint16_t size, bool event_idx);
/* Called through qt_vring_reset, _add, _pop, _free_chain and _kick_needed. */
void qt_vring_packed_reset(struct qt_vring *vq);
int qt_vring_packed_add(struct qt_vring *vq, const struct qt_sg *sg, unsigned n);
bool qt_vring_packed_pop(struct qt_vring *vq, uint32_t *head, uint32_t *len);
void qt_vring_packed_free_chain(struct qt_vring *vq, uint16_t id);
bool qt_vring_packed_kick_needed(struct qt_vring *vq);
/* The device event area: VRING_PACKED_EVENT_FLAG_* and, with DESC, the slot and wrap bit. */
void qt_vring_packed_device_event(struct qt_vring *vq, uint16_t *flags, uint16_t *off_wrap);
/* The driver event area: VRING_PACKED_EVENT_FLAG_ENABLE or _DISABLE. */
void qt_vring_packed_set_event(struct qt_vring *vq, uint16_t flags);
/*
 * EVENT_IDX: VRING_PACKED_EVENT_FLAG_DESC at the used slot `ahead` slots
 * past the next one the driver reads (and that slot's lap; negative: a
 * slot already used): the device interrupts once its used index moves
 * past that slot.
 */
void qt_vring_packed_event_desc(struct qt_vring *vq, int ahead);

/* ---- virtio-scsi.c: a virtio-scsi driver ---- */

struct qt_scsi_resp {
    uint32_t sense_len, resid;
    uint16_t status_qualifier;
    uint8_t status, response;
    uint8_t sense[96];
};

struct qt_scsi_req {
    int head;
    uint64_t req, resp, data;
    uint32_t data_len;
};

struct qt_vscsi {
    struct qts *s;
    struct qt_pci_bus bus;
    struct qt_vpci vpci;
    struct qt_alloc alloc;
    unsigned nq;                  /* request queues */
    struct qt_vring vq[QT_VIRTIO_MAX_QUEUES];
    uint64_t offered;             /* the device's features */
    uint64_t features;            /* those the driver accepted */
    bool use_msix;
    uint64_t events;              /* event buffers, 8 x 16 bytes */
    /* The device leaves used.len 0 (Linux vhost-scsi, as Linux's own
     * driver ignores it): completions then prove themselves by the
     * response bytes instead.  Set after qt_vscsi_init. */
    bool used_len_zero_ok;
};

struct qt_vscsi_opts {
    uint8_t busnr;                /* 0, or the bus behind a root port */
    uint16_t device_id;           /* 0: any virtio-scsi (0x1004 or 0x1048) */
    bool event_idx;               /* negotiate EVENT_IDX if offered */
    bool packed;                  /* negotiate VIRTIO_F_RING_PACKED if offered */
    bool hotplug;                 /* negotiate VIRTIO_SCSI_F_HOTPLUG if offered */
    bool change;                  /* negotiate VIRTIO_SCSI_F_CHANGE if offered */
    bool no_msix;                 /* leave MSI-X disabled: INTx + ISR */
    bool no_driver_ok;            /* stop before DRIVER_OK */
    uint16_t queue_size;          /* 0: the device's maximum (at most 256) */
};

/* Full driver init: reset, features, queues, vectors, DRIVER_OK. */
void qt_vscsi_init(struct qt_vscsi *d, struct qts *s, const struct qt_vscsi_opts *o);
/* Driver re-init after a reset of the device (same memory). */
void qt_vscsi_reinit(struct qt_vscsi *d, const struct qt_vscsi_opts *o);
void qt_vscsi_cleanup(struct qt_vscsi *d);
/* Request queue i (0-based) -> its qt_vring. */
struct qt_vring *qt_vscsi_rq(struct qt_vscsi *d, unsigned i);

/* Notifies vq's doorbell if the device wants a kick (qt_vring_kick_needed). */
void qt_vscsi_kick(struct qt_vscsi *d, struct qt_vring *vq);
/*
 * Queues a command without waiting: out_len bytes copied from out go to
 * the device (data-out), in_len bytes of buffer receive its data-in.
 * Kicks the queue (qt_vscsi_kick) unless nokick.  r gets the guest addresses.
 */
void qt_vscsi_submit(struct qt_vscsi *d, struct qt_vring *vq, uint8_t lun,
                     const uint8_t *cdb, unsigned cdb_len, const void *out,
                     uint32_t in_len, uint32_t out_len, struct qt_scsi_req *r,
                     bool nokick);
/* Waits for r's completion on vq and reads its response and data. */
void qt_vscsi_complete(struct qt_vscsi *d, struct qt_vring *vq,
                       struct qt_scsi_req *r, struct qt_scsi_resp *resp,
                       void *in, uint32_t in_len);
/* Submit and wait in one go; returns the SAM status. */
uint8_t qt_vscsi_cmd(struct qt_vscsi *d, struct qt_vring *vq, uint8_t lun,
                     const uint8_t *cdb, unsigned cdb_len, const void *out,
                     uint32_t out_len, void *in, uint32_t in_len,
                     struct qt_scsi_resp *resp);
/* Issues TEST UNIT READY until it succeeds (consumes unit attentions). */
void qt_vscsi_clear_ua(struct qt_vscsi *d, struct qt_vring *vq, uint8_t lun);
/* A task management function on the control queue; returns the response. */
uint8_t qt_vscsi_tmf(struct qt_vscsi *d, uint32_t subtype, uint8_t lun, uint64_t tag);
/* Posts n event buffers on the event queue (at d->events). */
void qt_vscsi_post_events(struct qt_vscsi *d, unsigned n);
/* Waits (bounded) for the next event; false on timeout. */
bool qt_vscsi_get_event(struct qt_vscsi *d, uint32_t *event, uint8_t lun[8],
                        uint32_t *reason);

/* SCSI helpers */
void qt_cdb_rw10(uint8_t *cdb, bool write, uint32_t lba, uint16_t blocks);
void qt_fill_pattern(void *buf, size_t len, uint32_t seed);

#endif
