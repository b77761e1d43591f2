/*
 * Fuzz target for the virtio-scsi control queue (hw/scsi/virtio-scsi.c):
 * task management functions (every subtype, and any other value) and
 * asynchronous notification requests, with short, exact and long buffers,
 * well-formed and arbitrary LUN addresses, and tags that name READ/WRITE
 * commands queued at the same time on a request queue, which a real I/O
 * thread completes while the main thread handles the TMFs that name them.
 * Oracle: every request on either queue comes back on its used ring exactly
 * once, in bounded time, within its device-writable buffers, and a
 * complete TMF or AN request with room for its response gets exactly that
 * response's length.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <iscsi/scsi-lowlevel.h>
#include <linux/virtio_scsi.h>

#include "fuzz-common.h"
#include "iothread.h"
#include "virtio-scsi.h"

#define RING_NUM 16u
#define MAX_CMDS 8u
#define REQ_AREA 0x0       /* request queue: desc, avail, used */
#define CTRL_AREA 0x800    /* control queue: desc, avail, used */
#define BUF_OFF 0x1000
#define WAIT_US (10 * G_USEC_PER_SEC)

struct ring {
    uint8_t *ram;
    struct vring_desc *desc;
    struct vring_avail *avail;
    struct vring_used *used;
    size_t *next_buf;          /* shared by both rings */
    unsigned next_desc;
    unsigned n;
    uint32_t in_room[RING_NUM];
    uint32_t want_len[RING_NUM];   /* UINT32_MAX: any length within in_room */
    struct virtqueue vq;
};

struct harness {
    struct vscsi_dev *dev;
    struct ring *req, *ctrl;
};

static const uint32_t tmf_subtypes[] = {
    VIRTIO_SCSI_T_TMF_ABORT_TASK, VIRTIO_SCSI_T_TMF_ABORT_TASK_SET,
    VIRTIO_SCSI_T_TMF_CLEAR_ACA, VIRTIO_SCSI_T_TMF_CLEAR_TASK_SET,
    VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET,
    VIRTIO_SCSI_T_TMF_QUERY_TASK, VIRTIO_SCSI_T_TMF_QUERY_TASK_SET,
};

static void ring_init(struct ring *r, uint8_t *ram, size_t area, size_t *next_buf, unsigned idx)
{
    memset(r, 0, sizeof(*r));
    r->ram = ram;
    r->desc = (struct vring_desc *)(ram + area);
    r->avail = (struct vring_avail *)(ram + area + 0x100);
    r->used = (struct vring_used *)(ram + area + 0x200);
    r->next_buf = next_buf;
    vq_init(&r->vq, idx, idx == VSCSI_CTRL_QUEUE ? "fuzz-ctrl" : "fuzz-req");
}

/* Appends len bytes in parts descriptors (data copied from src, if any), chained
 * after prev (-1: none); returns the last descriptor, -2 if out of room. */
static int ring_add(struct ring *r, const void *src, size_t len, unsigned parts, bool writable,
                    int prev, int *first)
{
    size_t done = 0;

    parts = MAX(1u, MIN(parts, (unsigned)MAX(len, 1)));
    for (unsigned p = 0; p < parts; p++) {
        size_t chunk = p == parts - 1 ? len - done : len / parts;
        unsigned d;

        if (r->next_desc >= RING_NUM || *r->next_buf + chunk > FUZZ_RAM_SIZE) {
            return -2;
        }
        d = r->next_desc++;
        r->desc[d] = (struct vring_desc){ .addr = FUZZ_RAM_GPA + *r->next_buf,
                                          .len = (uint32_t)chunk,
                                          .flags = writable ? VRING_DESC_F_WRITE : 0 };
        if (src) {
            memcpy(r->ram + *r->next_buf, (const uint8_t *)src + done, chunk);
        }
        if (prev >= 0) {
            r->desc[prev].flags |= VRING_DESC_F_NEXT;
            r->desc[prev].next = (uint16_t)d;
        } else {
            *first = (int)d;
        }
        prev = (int)d;
        *r->next_buf += chunk;
        done += chunk;
    }
    return prev;
}

/* One chain: out (readable) then in_len writable bytes; false if out of room. */
static bool ring_chain(struct ring *r, const void *out, size_t out_len, unsigned out_parts,
                       size_t in_len, unsigned in_parts, uint32_t want_len)
{
    unsigned saved_desc = r->next_desc;
    size_t saved_buf = *r->next_buf;
    int head = -1, last;

    last = ring_add(r, out, out_len, out_parts, false, -1, &head);
    if (last >= 0 && in_len) {
        last = ring_add(r, NULL, in_len, in_parts, true, last, &head);
    }
    if (last < 0 || r->n >= RING_NUM) {
        r->next_desc = saved_desc;
        *r->next_buf = saved_buf;
        return false;
    }
    r->in_room[head] = (uint32_t)in_len;
    r->want_len[head] = want_len;
    r->avail->ring[r->n++] = (uint16_t)head;
    return true;
}

static void lun_field(uint8_t lun[8], struct fuzz_in *in, unsigned flags)
{
    if (flags & 1) {
        /* Well formed: target 0 or 1 (1 has no LUNs), LUN 0..3 (2 and 3 unmapped). */
        unsigned v = (unsigned)fuzz_take(in, 1);
        uint8_t good[8] = { 1, (uint8_t)(v & 1), 0x40, (uint8_t)((v >> 1) & 3), 0, 0, 0, 0 };

        memcpy(lun, good, 8);
    } else {
        memset(lun, 0, 8);
        fuzz_copy(in, lun, 8);
    }
}

/* Buffer length around the structure's size: exact, short or long. */
static size_t vary_len(struct fuzz_in *in, size_t exact, unsigned mode)
{
    switch (mode & 3) {
    case 1:
        return fuzz_take(in, 1) % exact;
    case 2:
        return exact + 1 + fuzz_take(in, 1) % 64;
    default:
        return exact;
    }
}

static void add_commands(struct ring *r, struct fuzz_in *in, unsigned ncmds)
{
    for (unsigned i = 0; i < ncmds; i++) {
        unsigned flags = (unsigned)fuzz_take(in, 1);
        unsigned blocks = 1 + (flags >> 4 & 7);
        uint32_t lba = (uint32_t)fuzz_take(in, 1);
        struct virtio_scsi_cmd_req req = { .lun = { 1, 0, 0x40, (uint8_t)(flags >> 1 & 1) },
                                           .tag = htole64(i + 1) };
        size_t data = (size_t)blocks * 512;
        bool write = flags & 1;
        uint8_t out[sizeof(req) + 8 * 512] = { 0 };

        req.cdb[0] = write ? SCSI_OPCODE_WRITE10 : SCSI_OPCODE_READ10;
        req.cdb[2] = (uint8_t)(lba >> 24);
        req.cdb[3] = (uint8_t)(lba >> 16);
        req.cdb[4] = (uint8_t)(lba >> 8);
        req.cdb[5] = (uint8_t)lba;
        req.cdb[8] = (uint8_t)blocks;
        memcpy(out, &req, sizeof(req));
        if (!ring_chain(r, out, sizeof(req) + (write ? data : 0), 1 + (flags >> 2 & 1),
                        sizeof(struct virtio_scsi_cmd_resp) + (write ? 0 : data), 1,
                        UINT32_MAX)) {
            return;
        }
    }
}

static void add_ctrl_requests(struct ring *r, struct fuzz_in *in, unsigned ncmds)
{
    while (in->left) {
        unsigned kind = (unsigned)fuzz_take(in, 1);
        unsigned flags = (unsigned)fuzz_take(in, 1);
        uint8_t out[256] = { 0 };
        size_t exact, out_len, in_exact, in_len;
        uint32_t want;

        if ((kind & 3) <= 1) {
            struct virtio_scsi_ctrl_tmf_req tmf = { .type = htole32(VIRTIO_SCSI_T_TMF) };
            unsigned sub = (unsigned)fuzz_take(in, 1);

            tmf.subtype = htole32(sub < 0xf0 ? tmf_subtypes[sub % G_N_ELEMENTS(tmf_subtypes)]
                                             : (uint32_t)fuzz_take(in, 4));
            lun_field(tmf.lun, in, flags);
            /* Mostly the tag of a command on the request queue, racing it. */
            tmf.tag = htole64(flags & 2 ? fuzz_take(in, 8) : 1 + fuzz_take(in, 1) % MAX(ncmds, 1));
            memcpy(out, &tmf, sizeof(tmf));
            exact = sizeof(tmf);
            in_exact = sizeof(struct virtio_scsi_ctrl_tmf_resp);
        } else if ((kind & 3) == 2) {
            struct virtio_scsi_ctrl_an_req an = {
                .type = htole32(flags & 2 ? VIRTIO_SCSI_T_AN_SUBSCRIBE : VIRTIO_SCSI_T_AN_QUERY),
            };

            lun_field(an.lun, in, flags);
            an.event_requested = htole32((uint32_t)fuzz_take(in, 4));
            memcpy(out, &an, sizeof(an));
            exact = sizeof(an);
            in_exact = sizeof(struct virtio_scsi_ctrl_an_resp);
        } else {
            uint32_t type = htole32((uint32_t)fuzz_take(in, 4));

            memcpy(out, &type, sizeof(type));
            fuzz_copy(in, out + sizeof(type), 20);
            exact = 24;
            in_exact = 1;
        }
        out_len = vary_len(in, exact, flags >> 2);
        in_len = (flags >> 4 & 3) == 3 ? 0 : vary_len(in, in_exact, flags >> 4);
        /* A complete TMF or AN request with room for its response gets just that. */
        want = (kind & 3) <= 2 && out_len >= exact && in_len >= in_exact ? (uint32_t)in_exact
               : (kind & 3) <= 2 ? 0 : UINT32_MAX;
        if (!ring_chain(r, out, out_len, 1 + (flags >> 6 & 1), in_len, 1 + (flags >> 7), want)) {
            return;
        }
    }
}

static void start_on_main(void *opaque)
{
    struct harness *h = opaque;

    if (vscsi_queue_start(h->dev, VSCSI_CTRL_QUEUE, &h->ctrl->vq) < 0 ||
        vscsi_queue_start(h->dev, VSCSI_FIRST_REQ_QUEUE, &h->req->vq) < 0) {
        abort();
    }
}

static void free_on_main(void *opaque)
{
    struct harness *h = opaque;

    vscsi_dev_free(h->dev);
}

static void kick(struct ring *r)
{
    uint64_t one = 1;

    if (write(r->vq.kick_fd, &one, sizeof(one)) != sizeof(one)) {
        abort();
    }
}

/* Every chain came back once within its buffers (and at the wanted length). */
static void check_used(const struct ring *r, gint64 deadline)
{
    bool seen[RING_NUM] = { false };

    while (__atomic_load_n(&r->used->idx, __ATOMIC_ACQUIRE) != r->n) {
        if (g_get_monotonic_time() > deadline) {
            abort();   /* a request that never came back */
        }
        g_thread_yield();
    }
    for (unsigned i = 0; i < r->n; i++) {
        unsigned id = r->used->ring[i].id;
        uint32_t len = r->used->ring[i].len;

        if (id >= RING_NUM || seen[id] || len > r->in_room[id] ||
            (r->want_len[id] != UINT32_MAX && len != r->want_len[id])) {
            abort();
        }
        seen[id] = true;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t *ram;
    static struct scsi_target *target;
    static struct iothread *main_thread, *io_thread;
    struct fuzz_in in = { data, size };
    struct guest_mem mem;
    struct vscsi_dev_config cfg = { 0 };
    struct ring req, ctrl;
    struct harness h = { .req = &req, .ctrl = &ctrl };
    size_t next_buf = BUF_OFF;
    unsigned ncmds;
    gint64 deadline;

    fuzz_quiet_logs();
    if (!ram) {
        ram = aligned_alloc(4096, FUZZ_RAM_SIZE);
        target = fuzz_target_new();
        main_thread = iothread_new("fuzz-main", 0, 0);
        io_thread = iothread_new("fuzz-io", 1, 0);
        if (iothread_start(main_thread) < 0 || iothread_start(io_thread) < 0) {
            abort();
        }
    }
    memset(ram, 0, FUZZ_RAM_SIZE);
    ring_init(&req, ram, REQ_AREA, &next_buf, VSCSI_FIRST_REQ_QUEUE);
    ring_init(&ctrl, ram, CTRL_AREA, &next_buf, VSCSI_CTRL_QUEUE);
    ncmds = (unsigned)fuzz_take(&in, 1) % (MAX_CMDS + 1);
    add_commands(&req, &in, ncmds);
    add_ctrl_requests(&ctrl, &in, ncmds);
    req.avail->idx = (uint16_t)req.n;
    ctrl.avail->idx = (uint16_t)ctrl.n;

    fuzz_mem_init(&mem, ram);
    for (struct ring *r = &req; r; r = r == &req ? &ctrl : NULL) {
        if (vq_setup(&r->vq, &mem, RING_NUM, r->desc, r->avail, r->used, 0, 0) < 0) {
            abort();
        }
        r->vq.kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        r->vq.call_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (r->vq.kick_fd < 0 || r->vq.call_fd < 0) {
            abort();
        }
    }
    cfg.name = "fuzz";
    cfg.target = target;
    cfg.main_thread = main_thread;
    cfg.threads = &io_thread;
    cfg.nthreads = 1;
    cfg.num_request_queues = 1;
    h.dev = vscsi_dev_new(&cfg);
    iothread_run_sync(main_thread, start_on_main, &h);
    /* The commands first, so that the TMFs naming them race their completion. */
    kick(&req);
    kick(&ctrl);

    deadline = g_get_monotonic_time() + WAIT_US;
    check_used(&req, deadline);
    check_used(&ctrl, deadline);
    iothread_run_sync(main_thread, free_on_main, &h);
    for (struct ring *r = &req; r; r = r == &req ? &ctrl : NULL) {
        close(r->vq.kick_fd);
        close(r->vq.call_fd);
        vq_cleanup(&r->vq);
    }
    guest_mem_clear(&mem);
    return 0;
}
