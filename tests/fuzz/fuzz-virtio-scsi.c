/*
 * Fuzz target for virtio-scsi request parsing (hw/scsi/virtio-scsi.c): the
 * harness lays out well-formed descriptor chains in a fake guest RAM, but
 * the request headers, LUN fields, CDBs, data and buffer sizes and splits
 * come from the input.  Every request must be returned on the used ring,
 * exactly once, with a used length that fits the device-writable buffers.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdlib.h>

#include <linux/virtio_scsi.h>

#include "fuzz-common.h"
#include "virtio-scsi.h"

#define RING_NUM 16u
#define DESC_OFF 0x0
#define AVAIL_OFF 0x100
#define USED_OFF 0x200
#define BUF_OFF 0x1000

struct layout {
    uint8_t *ram;
    struct vring_desc *desc;
    size_t next_buf;
    unsigned next_desc;
};

/* Adds len bytes of buffer split into parts descriptors; returns first index or -1. */
static int add_bufs(struct layout *l, struct fuzz_in *in, size_t len, unsigned parts,
                    bool writable, bool fill)
{
    int first = -1;
    size_t done = 0;

    parts = MAX(1u, MIN(parts, (unsigned)MAX(len, 1)));
    for (unsigned p = 0; p < parts; p++) {
        size_t chunk = p == parts - 1 ? len - done : len / parts;
        unsigned d;

        if (l->next_desc >= RING_NUM || l->next_buf + chunk > FUZZ_RAM_SIZE) {
            return -2;
        }
        d = l->next_desc++;
        l->desc[d].addr = FUZZ_RAM_GPA + l->next_buf;
        l->desc[d].len = (uint32_t)chunk;
        l->desc[d].flags = writable ? VRING_DESC_F_WRITE : 0;
        if (d > 0 && first != -1) {
            l->desc[d - 1].flags |= VRING_DESC_F_NEXT;
            l->desc[d - 1].next = (uint16_t)d;
        }
        if (fill) {
            fuzz_copy(in, l->ram + l->next_buf, chunk);
        }
        if (first == -1) {
            first = (int)d;
        }
        l->next_buf += chunk;
        done += chunk;
    }
    return first;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t *ram;
    static struct scsi_target *target;
    static struct iothread *thread;
    struct fuzz_in in = { data, size };
    struct guest_mem mem;
    struct vscsi_dev_config cfg = { 0 };
    struct vscsi_dev *dev;
    struct virtqueue vq;
    struct layout l;
    struct vring_avail *avail;
    struct vring_used *used;
    uint32_t in_room[RING_NUM] = { 0 };
    unsigned n = 0;

    fuzz_quiet_logs();
    if (!ram) {
        ram = aligned_alloc(4096, FUZZ_RAM_SIZE);
        target = fuzz_target_new();
        /* Never started: run_sync calls run inline, as in a single thread. */
        thread = iothread_new("fuzz-io", 1, 0);
    }
    memset(ram, 0, FUZZ_RAM_SIZE);
    l = (struct layout){ .ram = ram, .desc = (struct vring_desc *)(ram + DESC_OFF),
                         .next_buf = BUF_OFF };
    avail = (struct vring_avail *)(ram + AVAIL_OFF);
    used = (struct vring_used *)(ram + USED_OFF);

    while (in.left && n < RING_NUM) {
        unsigned flags = (unsigned)fuzz_take(&in, 1);
        size_t out_len = sizeof(struct virtio_scsi_cmd_req) - 8 + fuzz_take(&in, 1) % 16 +
                         (flags & 1 ? fuzz_take(&in, 2) % 8192 : 0);
        size_t in_len = sizeof(struct virtio_scsi_cmd_resp) - 8 + fuzz_take(&in, 1) % 16 +
                        (flags & 2 ? fuzz_take(&in, 2) % 8192 : 0);
        size_t hdr_at = l.next_buf;
        unsigned saved_desc = l.next_desc;
        int head, in_head;

        head = add_bufs(&l, &in, out_len, 1 + ((flags >> 2) & 3), false, true);
        in_head = head >= 0 ? add_bufs(&l, &in, in_len, 1 + ((flags >> 4) & 3), true, false)
                            : -2;
        if (head < 0 || in_head < 0) {
            l.next_desc = saved_desc;
            break;
        }
        /* Link the readable part to the writable part. */
        l.desc[in_head - 1].flags |= VRING_DESC_F_NEXT;
        l.desc[in_head - 1].next = (uint16_t)in_head;
        if (flags & 0x40 && out_len >= 19) {
            /* Steer most requests to a real LUN so the CDB reaches the disk. */
            uint8_t lun[8] = { 1, 0, 0x40, (uint8_t)(flags >> 7), 0, 0, 0, 0 };

            memcpy(ram + hdr_at, lun, sizeof(lun));
        }
        in_room[head] = (uint32_t)in_len;
        avail->ring[n++] = (uint16_t)head;
    }
    avail->idx = (uint16_t)n;

    fuzz_mem_init(&mem, ram);
    vq_init(&vq, 2, "fuzz-vq");
    if (vq_setup(&vq, &mem, RING_NUM, l.desc, avail, used, 0, 0) < 0) {
        abort();
    }
    cfg.name = "fuzz";
    cfg.target = target;
    cfg.main_thread = thread;
    cfg.threads = &thread;
    cfg.nthreads = 1;
    cfg.num_request_queues = 1;
    dev = vscsi_dev_new(&cfg);
    if (vscsi_queue_start(dev, 2, &vq) < 0) {
        abort();
    }
    vscsi_queue_stop(dev, 2, &vq);
    vscsi_dev_free(dev);

    /* Oracle: each well-formed chain came back once, within its buffers. */
    if (used->idx != n) {
        abort();
    }
    bool seen[RING_NUM] = { false };

    for (unsigned i = 0; i < n; i++) {
        unsigned id = used->ring[i].id;

        if (id >= RING_NUM || seen[id] || used->ring[i].len > in_room[id]) {
            abort();
        }
        seen[id] = true;
    }
    vq_cleanup(&vq);
    return 0;
}
