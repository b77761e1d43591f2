/*
 * Fuzz target for the descriptor-chain walkers (hw/virtio/virtqueue.c,
 * split, and virtqueue-packed.c): the input becomes the contents of a fake
 * guest RAM holding the rings and the buffers; we pop until the ring is
 * empty or declared broken, return every chain, and answer a malformed
 * one as the virtio-scsi layer does.  With features bit 4 the ring is
 * first taken over from an inflight-tracking record (INFLIGHT_SHMFD) whose
 * bytes the input also supplies, as a restarted back-end takes one over,
 * and tracked while it runs, every third chain given back with vq_unpop,
 * every fifth pop followed by the record's first bytes rewritten from
 * guest RAM (the area is shared: a front-end may write it at any time).
 * Any crash, out-of-bounds access or hang is a bug.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdlib.h>

#include <linux/virtio_config.h>

#include "fuzz-common.h"
#include "vhost-user-proto.h"
#include "virtqueue.h"

/* Input bytes that go into a record (the rest of it stays zero). */
#define RECORD_INPUT 1024

static size_t record_bytes(unsigned num, bool packed)
{
    return packed ? sizeof(struct vhost_user_inflight_queue_packed) +
                    num * sizeof(struct vhost_user_inflight_desc_packed)
                  : sizeof(struct vhost_user_inflight_queue) +
                    num * sizeof(struct vhost_user_inflight_desc);
}

/* A record of the layout and size a ring of num entries needs, exactly (ASan sees past it). */
static uint8_t *record_take(struct fuzz_in *in, unsigned num, bool packed)
{
    size_t bytes = record_bytes(num, packed);
    uint8_t *r = g_malloc0(bytes);

    fuzz_copy(in, r, MIN(bytes, RECORD_INPUT));
    /* Whether it fits the ring is the vhost-user layer's check. */
    if (packed) {
        ((struct vhost_user_inflight_queue_packed *)r)->desc_num = (uint16_t)num;
    } else {
        ((struct vhost_user_inflight_queue *)r)->desc_num = (uint16_t)num;
    }
    return r;
}

static int record_take_over(struct virtqueue *vq, uint8_t *record)
{
    if (!record) {
        return 0;
    }
    if (vq->packed) {
        return vq_set_inflight_packed(vq, (void *)record, true);
    }
    return vq_set_inflight(vq, (void *)record, true);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t *ram;
    struct guest_mem mem;
    struct virtqueue vq;
    struct fuzz_in in = { data, size };
    struct iovec iov[64];
    struct vq_elem e;
    unsigned num, max_iov;
    uint64_t features;
    uint8_t *record = NULL;
    bool tracked;

    fuzz_quiet_logs();
    if (!ram) {
        ram = aligned_alloc(4096, FUZZ_RAM_SIZE);
    }
    /*
     * Header: ring size (power of two), features, base index, max iovecs;
     * a packed ring's base has two more bytes (used slot and wrap counter).
     */
    num = 1u << (fuzz_take(&in, 1) % 9);
    features = fuzz_take(&in, 1);
    tracked = features & 16;
    features = ((features & 1) ? 1ull << VIRTIO_RING_F_EVENT_IDX : 0) |
               ((features & 2) ? 1ull << VIRTIO_RING_F_INDIRECT_DESC : 0) |
               ((features & 4) ? 1ull << VIRTIO_F_NOTIFY_ON_EMPTY : 0) |
               ((features & 8) ? 1ull << VIRTIO_F_RING_PACKED : 0);
    uint32_t base = (uint32_t)fuzz_take(&in, 2);
    if (features & (1ull << VIRTIO_F_RING_PACKED)) {
        base |= (uint32_t)fuzz_take(&in, 2) << 16;
    }
    max_iov = 1 + (unsigned)(fuzz_take(&in, 1) % G_N_ELEMENTS(iov));
    if (tracked) {
        record = record_take(&in, num, features & (1ull << VIRTIO_F_RING_PACKED));
    }
    fuzz_copy(&in, ram, FUZZ_RAM_SIZE);

    fuzz_mem_init(&mem, ram);
    vq_init(&vq, 2, "fuzz-vq");
    /*
     * Rings at fixed places: desc at 0, avail at 16*num, used 4 KiB-aligned
     * after (packed: the driver's and the device's event areas there).
     */
    size_t avail_off = 16u * num;
    size_t used_off = (avail_off + 6 + 2u * num + 4095) & ~4095ul;
    if (vq_setup(&vq, &mem, num, ram, ram + avail_off, ram + used_off, features, base) == 0 &&
        record_take_over(&vq, record) == 0) {
        for (unsigned i = 0; i < 4 * num + 4; i++) {
            int ret = vq_pop(&vq, &e, iov, max_iov);

            if (ret < 0) {
                (void)vq_answer_bad_chain(&vq, "fuzz-response", 13);
            }
            if (ret <= 0) {
                break;
            }
            if (record && i % 5 == 4) {
                memcpy(record, ram + 0x800, MIN(record_bytes(num, vq.packed), RECORD_INPUT));
            }
            if (record && i % 3 == 2) {
                vq_unpop(&vq);
                continue;
            }
            /* Touch every byte the walker handed out: ASan checks the bounds. */
            for (unsigned k = 0; k < e.out_num + e.in_num; k++) {
                volatile uint8_t *b = e.out_sg[k].iov_base;

                if (e.out_sg[k].iov_len) {
                    (void)b[0];
                    (void)b[e.out_sg[k].iov_len - 1];
                }
            }
            if (i & 1) {
                vq_push(&vq, &e, (uint32_t)e.in_len);
            } else {
                vq_fill(&vq, &e, 0);
            }
        }
        vq_flush(&vq);
        (void)vq_should_notify(&vq);
        (void)vq_enable_notify(&vq);
    }
    vq_cleanup(&vq);
    g_free(record);
    return 0;
}
