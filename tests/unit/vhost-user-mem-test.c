/*
 * Specification of what a vhost-user front-end maps into the back-end
 * (hw/virtio/vhost-user-mem.c): the memory table, whose changes stop and
 * restart running queues on the new mapping (or leave stopped one it no
 * longer holds), and whose regions ADD_MEM_REG and REM_MEM_REG add and
 * remove one at a time, refusing overlaps and regions their file cannot
 * back; and the inflight area, handed out zeroed and sealed, tracked in
 * by each starting queue in its ring's layout (split or packed), voided
 * by a reset, refused for geometry it cannot serve, and given back to a
 * restarted back-end, which resumes where its predecessor left each ring
 * and resubmits what it had not completed.  The front-end is
 * vhost-user-server-fixture.h.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "shared-writer.h"
#include "vhost-user-server.h"
#include "vhost-user-server-fixture.h"

/*
 * Ring addresses may come before the memory table; the queue starts when
 * they become translatable.  A new table stops and restarts running queues
 * on the new mapping; one that no longer holds the ring leaves it stopped.
 */
static void test_memory_table_changes(void)
{
    struct fixture fx;
    struct virtqueue *vq;
    int memfd2;
    void *old_desc;

    fixture_init(&fx, 0);
    set_u64(&fx, VHOST_USER_SET_FEATURES, ring_features | proto_bit);
    configure_queue(&fx, 0, 5, fx_eventfd(&fx), fx_eventfd(&fx));
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 0, 1);
    g_assert_false(vu_dev_queue_running(fx.dev, 0));

    set_mem_table(&fx, fx.memfd, MEM_GPA, MEM_UVA);
    g_assert_true(vu_dev_queue_running(fx.dev, 0));
    g_assert_cmpuint(fx.fake.starts[0], ==, 1);
    g_assert_cmpuint(fx.fake.mem_changes, ==, 1);
    vq = vu_dev_queue(fx.dev, 0);
    old_desc = vq->desc;

    /* Same layout, new backing file: the ring is re-translated. */
    memfd2 = memfd_create("guest-ram-2", MFD_CLOEXEC);
    g_assert_cmpint(ftruncate(memfd2, MEM_SIZE), ==, 0);
    vq->last_avail_idx = 9;
    set_mem_table(&fx, memfd2, MEM_GPA, MEM_UVA);
    g_assert_cmpuint(fx.fake.stops[0], ==, 1);
    g_assert_cmpuint(fx.fake.starts[0], ==, 2);
    g_assert_cmpuint(fx.fake.start_base[0], ==, 9);
    g_assert_true((void *)vq->desc != old_desc);
    g_assert_true((void *)vq->desc ==
                  (void *)((uint8_t *)vu_dev_mem(fx.dev)->r[0].host + DESC_OFF(0)));
    g_assert_cmpuint(vu_dev_mem(fx.dev)->nregions, ==, 1);

    /* A table at other UVAs no longer holds the ring: stopped, and logged. */
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    set_mem_table(&fx, memfd2, MEM_GPA, MEM_UVA + 0x40000000);
    g_assert_cmpuint(fx.fake.stops[0], ==, 2);
    g_assert_cmpuint(fx.fake.starts[0], ==, 2);
    g_assert_false(vu_dev_queue_running(fx.dev, 0));

    /* A table with a region but no fd for it is refused; the old one stays. */
    {
        struct vhost_user_memory m = { .nregions = 2 };

        g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_MEM_TABLE, &m,
                                     offsetof(struct vhost_user_memory, regions[2]),
                                     &memfd2, 1), !=, 0);
        g_assert_cmpuint(vu_dev_mem(fx.dev)->nregions, ==, 1);
    }
    close(memfd2);
    fixture_fini(&fx);
}

/* CONFIGURE_MEM_SLOTS: regions come and go one at a time. */
static void test_add_remove_regions(void)
{
    struct fixture fx;
    struct vhost_user_mem_reg reg = {
        .region = { .guest_phys_addr = MEM_GPA, .memory_size = MEM_SIZE,
                    .userspace_addr = MEM_UVA },
    };
    int memfd2 = memfd_create("guest-ram-high", MFD_CLOEXEC);
    const struct guest_mem *mem;
    unsigned baseline;
    uint8_t *p;

    fixture_init(&fx, 0);
    g_assert_cmpint(ftruncate(memfd2, 2 * MEM_SIZE), ==, 0);
    baseline = count_open_fds();

    g_assert_cmpuint(request_ack(&fx, VHOST_USER_ADD_MEM_REG, &reg, sizeof(reg), &fx.memfd,
                                 1), ==, 0);
    /* The second region starts MEM_SIZE into its file (mmap_offset). */
    reg.region = (struct vhost_user_mem_region){
        .guest_phys_addr = 0x100000000ull, .memory_size = MEM_SIZE,
        .userspace_addr = MEM_UVA + 0x10000000, .mmap_offset = MEM_SIZE,
    };
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_ADD_MEM_REG, &reg, sizeof(reg), &memfd2, 1),
                     ==, 0);
    mem = vu_dev_mem(fx.dev);
    g_assert_cmpuint(mem->nregions, ==, 2);
    /* What the guest writes is what we read, at the right offsets. */
    fx.ram[0x1234] = 0xab;
    p = guest_mem_gpa_ptr(mem, MEM_GPA + 0x1234, 1);
    g_assert_nonnull(p);
    g_assert_cmpuint(*p, ==, 0xab);
    g_assert_nonnull(guest_mem_gpa_ptr(mem, 0x100000000ull + MEM_SIZE - 1, 1));
    g_assert_null(guest_mem_gpa_ptr(mem, 0x100000000ull + MEM_SIZE, 1));

    /*
     * QEMU re-adds every region when a device is re-created on the same
     * connection: an identical region replaces the old mapping.
     */
    reg.region = (struct vhost_user_mem_region){
        .guest_phys_addr = MEM_GPA, .memory_size = MEM_SIZE, .userspace_addr = MEM_UVA,
    };
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_ADD_MEM_REG, &reg, sizeof(reg), &fx.memfd,
                                 1), ==, 0);
    g_assert_cmpuint(mem->nregions, ==, 2);
    p = guest_mem_gpa_ptr(mem, MEM_GPA + 0x1234, 1);
    g_assert_nonnull(p);
    g_assert_cmpuint(*p, ==, 0xab);

    /* Overlapping an existing region is refused. */
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    reg.region.guest_phys_addr = MEM_GPA + 0x1000;
    reg.region.userspace_addr = MEM_UVA + 0x20000000;
    reg.region.mmap_offset = 0;
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_ADD_MEM_REG, &reg, sizeof(reg), &memfd2, 1),
                     !=, 0);
    g_assert_cmpuint(mem->nregions, ==, 2);
    /* A region its file cannot back (we would SIGBUS on access) is refused. */
    reg.region = (struct vhost_user_mem_region){
        .guest_phys_addr = 0x200000000ull, .memory_size = MEM_SIZE,
        .userspace_addr = MEM_UVA + 0x30000000, .mmap_offset = MEM_SIZE + 4096,
    };
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_ADD_MEM_REG, &reg, sizeof(reg), &memfd2, 1),
                     ==, EINVAL);
    g_assert_cmpuint(mem->nregions, ==, 2);
    /* ADD_MEM_REG needs its fd. */
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_ADD_MEM_REG, &reg, sizeof(reg), NULL, 0),
                     !=, 0);

    /* REM_MEM_REG matches gpa, size and uva. */
    reg.region = (struct vhost_user_mem_region){
        .guest_phys_addr = MEM_GPA, .memory_size = MEM_SIZE, .userspace_addr = MEM_UVA + 1,
    };
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_REM_MEM_REG, &reg, sizeof(reg), NULL, 0), ==,
                     ENOENT);
    g_assert_cmpuint(mem->nregions, ==, 2);
    /* QEMU may pass the region's fd along: it is closed, the region removed. */
    reg.region.userspace_addr = MEM_UVA;
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_REM_MEM_REG, &reg, sizeof(reg), &fx.memfd,
                                 1), ==, 0);
    g_assert_cmpuint(mem->nregions, ==, 1);
    g_assert_null(guest_mem_gpa_ptr(mem, MEM_GPA, 1));
    g_assert_cmpuint(mem->r[0].gpa, ==, 0x100000000ull);
    g_assert_cmpuint(count_open_fds(), ==, baseline);
    close(memfd2);
    fixture_fini(&fx);
}

/* A queue's slice of an area we make: room for the larger, packed, layout. */
static const size_t qbytes = sizeof(struct vhost_user_inflight_queue_packed) +
                             RING_SIZE * sizeof(struct vhost_user_inflight_desc_packed);
/* ... and of one an earlier version of ours made, for split rings only. */
static const size_t split_qbytes = sizeof(struct vhost_user_inflight_queue) +
                                   RING_SIZE * sizeof(struct vhost_user_inflight_desc);

/*
 * GET_INFLIGHT_FD hands out a zeroed, sealed area sized for the queues,
 * in whichever layout their rings turn out to need (it may come before
 * SET_FEATURES); after SET_INFLIGHT_FD each starting queue tracks its
 * requests there.
 */
static void test_inflight_area(void)
{
    struct fixture fx;
    struct vhost_user_inflight in = { .num_queues = NUM_QUEUES, .queue_size = RING_SIZE };
    struct vhost_user_inflight_queue *iq;
    struct reply r;
    struct stat st;
    uint8_t *area;

    fixture_init(&fx, 0);
    send_msg(fx.sock, VHOST_USER_GET_INFLIGHT_FD, VHOST_USER_VERSION, &in, sizeof(in));
    g_assert_cmpint(vu_dev_dispatch(fx.dev), ==, 0);
    r = recv_reply(fx.sock);
    g_assert_cmpuint(r.hdr.request, ==, VHOST_USER_GET_INFLIGHT_FD);
    g_assert_cmpuint(r.hdr.size, ==, sizeof(in));
    g_assert_cmpuint(r.p.inflight.mmap_size, ==, NUM_QUEUES * qbytes);
    g_assert_cmpuint(r.p.inflight.mmap_offset, ==, 0);
    g_assert_cmpuint(r.p.inflight.num_queues, ==, NUM_QUEUES);
    g_assert_cmpuint(r.p.inflight.queue_size, ==, RING_SIZE);
    g_assert_cmpint(r.fd, >=, 0);
    g_assert_cmpint(fstat(r.fd, &st), ==, 0);
    g_assert_cmpuint(st.st_size, ==, NUM_QUEUES * qbytes);
    /* We cannot shrink it under the back-end. */
    g_assert_cmpint(ftruncate(r.fd, 16), <, 0);
    area = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd, 0);
    g_assert_true(area != MAP_FAILED);
    for (off_t i = 0; i < st.st_size; i++) {
        g_assert_cmpuint(area[i], ==, 0);
    }

    /* QEMU sends it back (SET_INFLIGHT_FD), then starts the rings. */
    in = r.p.inflight;
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_INFLIGHT_FD, &in, sizeof(in), &r.fd, 1),
                     ==, 0);
    negotiate(&fx, 0);
    configure_queue(&fx, 1, 0, fx_eventfd(&fx), fx_eventfd(&fx));
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 1, 1);
    g_assert_true(vu_dev_queue_running(fx.dev, 1));
    g_assert_true(fx.fake.inflight_at_start[1]);
    /* Queue 1 tracks in its own slice, now marked as initialized. */
    iq = (struct vhost_user_inflight_queue *)(area + qbytes);
    g_assert_cmpuint(iq->version, ==, 1);
    g_assert_cmpuint(iq->desc_num, ==, RING_SIZE);
    iq->desc[7].counter = 0x5a5a;
    g_assert_cmpuint(vu_dev_queue(fx.dev, 1)->inflight_region->desc[7].counter, ==, 0x5a5a);
    g_assert_cmpuint(((struct vhost_user_inflight_queue *)area)->version, ==, 0);
    /*
     * A virtio reset voids all tracking: the next driver starts afresh.
     * Only the slices' versions are cleared (the entries are, when a
     * queue next starts), so a reset commits none of the area's pages.
     */
    iq->desc[7].inflight = 1;
    request(&fx, VHOST_USER_RESET_DEVICE, NULL, 0, NULL, 0);
    g_assert_cmpuint(iq->version, ==, 0);
    configure_queue(&fx, 1, 0, fx_eventfd(&fx), fx_eventfd(&fx));
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 1, 1);
    g_assert_true(vu_dev_queue_running(fx.dev, 1));
    g_assert_cmpuint(iq->version, ==, 1);
    g_assert_cmpuint(iq->desc[7].inflight, ==, 0);
    g_assert_cmpuint(fx.fake.resubmit_at_start, ==, 0);

    close(r.fd);

    /* Geometry we cannot serve: an empty area (the front-end goes on without one). */
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    in = (struct vhost_user_inflight){ .num_queues = NUM_QUEUES + 1, .queue_size = RING_SIZE };
    send_msg(fx.sock, VHOST_USER_GET_INFLIGHT_FD, VHOST_USER_VERSION, &in, sizeof(in));
    g_assert_cmpint(vu_dev_dispatch(fx.dev), ==, 0);
    r = recv_reply(fx.sock);
    g_assert_cmpuint(r.hdr.size, ==, sizeof(in));
    g_assert_cmpuint(r.p.inflight.mmap_size, ==, 0);
    g_assert_cmpint(r.fd, ==, -1);
    /*
     * Rings larger than QEMU's largest (1024) are not tracked: 66 queues
     * of 32768 entries would be 33 MiB per connection.
     */
    in = (struct vhost_user_inflight){ .num_queues = NUM_QUEUES, .queue_size = 2048 };
    send_msg(fx.sock, VHOST_USER_GET_INFLIGHT_FD, VHOST_USER_VERSION, &in, sizeof(in));
    g_assert_cmpint(vu_dev_dispatch(fx.dev), ==, 0);
    r = recv_reply(fx.sock);
    g_assert_cmpuint(r.p.inflight.mmap_size, ==, 0);
    g_assert_cmpint(r.fd, ==, -1);
    /* SET_INFLIGHT_FD whose file is smaller than it claims is refused. */
    {
        int small = memfd_create("small", MFD_CLOEXEC);

        g_assert_cmpint(ftruncate(small, 4096), ==, 0);
        in = (struct vhost_user_inflight){
            .mmap_size = NUM_QUEUES * qbytes, .num_queues = NUM_QUEUES, .queue_size = RING_SIZE,
        };
        g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_INFLIGHT_FD, &in, sizeof(in), &small,
                                     1), !=, 0);
        close(small);
    }
    /* The running queue kept its area. */
    g_assert_true(vu_dev_queue_running(fx.dev, 1));
    munmap(area, st.st_size);
    fixture_fini(&fx);
}

/*
 * What QEMU does before it starts the rings: GET_INFLIGHT_FD for in's
 * geometry, then SET_INFLIGHT_FD of the area it got.  Returns the area's
 * fd; *in becomes what the back-end answered.
 */
static int inflight_handshake(struct fixture *fx, struct vhost_user_inflight *in)
{
    struct reply r;

    send_msg(fx->sock, VHOST_USER_GET_INFLIGHT_FD, VHOST_USER_VERSION, in, sizeof(*in));
    g_assert_cmpint(vu_dev_dispatch(fx->dev), ==, 0);
    r = recv_reply(fx->sock);
    *in = r.p.inflight;
    g_assert_cmpuint(request_ack(fx, VHOST_USER_SET_INFLIGHT_FD, in, sizeof(*in), &r.fd, 1),
                     ==, 0);
    return r.fd;
}

/*
 * A front-end rewriting queue 2's slice of the area while the queue
 * starts: its version and ring size (read once each, when the queue
 * attaches), its recorded indices, links and every flag.
 */
static void scramble_slice(void *shared, GRand *rand)
{
    struct vhost_user_inflight_queue *iq = shared;

    __atomic_store_n(&iq->version, (uint16_t)g_rand_int_range(rand, 0, 2), __ATOMIC_RELAXED);
    __atomic_store_n(&iq->desc_num, (uint16_t)(g_rand_int_range(rand, 0, 4) ? RING_SIZE
                                                                           : g_rand_int(rand)),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&iq->used_idx, (uint16_t)g_rand_int(rand), __ATOMIC_RELAXED);
    __atomic_store_n(&iq->last_batch_head, (uint16_t)g_rand_int(rand), __ATOMIC_RELAXED);
    for (unsigned i = 0; i < RING_SIZE; i++) {
        __atomic_store_n(&iq->desc[i].inflight, (uint8_t)(i & 1) ^ g_rand_boolean(rand),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&iq->desc[i].next, (uint16_t)g_rand_int(rand), __ATOMIC_RELAXED);
    }
}

static void count_warning(const gchar *domain, GLogLevelFlags level, const gchar *msg,
                          gpointer counter)
{
    (*(unsigned *)counter)++;
}

/*
 * Each start of the queue either runs it with what the slice said when
 * it was read (at most a ring of requests to resubmit) or leaves it
 * stopped with a warning; the back-end never reads past the slice.
 */
static void test_inflight_area_rewritten_while_queues_start(void)
{
    struct fixture fx;
    struct vhost_user_inflight in = { .num_queues = NUM_QUEUES, .queue_size = RING_SIZE };
    unsigned warnings = 0, ran = 0, resubmitted = 0;
    guint warned = g_log_set_handler(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, count_warning, &warnings);
    guint quiet = g_log_set_handler(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE, count_warning, &(unsigned){ 0 });
    struct shared_writer *w;
    int area_fd, kick, call;
    uint8_t *area;

    fixture_init(&fx, 0);
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    area_fd = inflight_handshake(&fx, &in);
    area = mmap(NULL, in.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, area_fd, 0);
    g_assert_true(area != MAP_FAILED);
    negotiate(&fx, 0);
    kick = fx_eventfd(&fx);
    call = fx_eventfd(&fx);
    w = shared_writer_start(scramble_slice, area + 2 * qbytes);
    for (unsigned round = 0; round < 200; round++) {
        configure_queue(&fx, 2, 0, kick, call);
        set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 2, 1);
        if (vu_dev_queue_running(fx.dev, 2)) {
            g_assert_cmpuint(fx.fake.resubmit_at_start, <=, RING_SIZE);
            resubmitted += fx.fake.resubmit_at_start;
            ran++;
        }
        get_vring_base(&fx, 2);
        g_assert_false(vu_dev_queue_running(fx.dev, 2));
    }
    g_test_message("%" G_GUINT64_FORMAT " passes of the writer; the queue ran %u times of 200 "
                   "(%u requests resubmitted), %u warnings", shared_writer_stop(w), ran,
                   resubmitted, warnings);
    g_assert_cmpuint(ran + warnings, >=, 200);
    g_log_remove_handler(G_LOG_DOMAIN, quiet);
    g_log_remove_handler(G_LOG_DOMAIN, warned);
    munmap(area, in.mmap_size);
    close(area_fd);
    fixture_fini(&fx);
}

/*
 * INFLIGHT_SHMFD across a back-end restart: the new instance gets the old
 * area back (SET_INFLIGHT_FD) and resubmits the request the old one had
 * popped but not completed.
 */
static void test_inflight_resubmit_after_restart(void)
{
    struct fixture fx;
    struct vhost_user_inflight in = { .num_queues = NUM_QUEUES, .queue_size = RING_SIZE };
    int area_fd;

    fixture_init(&fx, 0);
    area_fd = inflight_handshake(&fx, &in);
    negotiate(&fx, 0);
    guest_post_requests(&fx, 2, 2);
    fx.fake.pop = 2;
    fx.fake.complete = 1;
    configure_queue(&fx, 2, 0, fx_eventfd(&fx), fx_eventfd(&fx));
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 2, 1);
    g_assert_cmpuint(fx.fake.popped, ==, 2);
    g_assert_cmpuint(fx.fake.resubmit_at_start, ==, 0);
    g_assert_cmpuint(guest_used_idx(&fx, 2), ==, 1);

    /* Restart: QEMU hands the area back and resumes at the used index. */
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    fixture_reconnect(&fx);
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_INFLIGHT_FD, &in, sizeof(in), &area_fd,
                                 1), ==, 0);
    negotiate(&fx, 0);
    fx.fake.pop = 1;
    fx.fake.complete = 1;
    configure_queue(&fx, 2, guest_used_idx(&fx, 2), fx_eventfd(&fx), fx_eventfd(&fx));
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 2, 1);
    g_assert_cmpuint(fx.fake.resubmit_at_start, ==, 1);
    g_assert_cmpuint(fx.fake.popped, ==, 1);
    g_assert_cmpuint(fx.fake.heads[0], ==, 1);
    g_assert_cmpstr(fx.fake.first_bytes[0], ==, "request 1");
    g_assert_cmpuint(guest_used_idx(&fx, 2), ==, 2);
    close(area_fd);
    fixture_fini(&fx);
}

/*
 * The same on a packed ring, whose position QEMU cannot give a new
 * back-end (it sends the base of the ring's last start): the record in
 * the area says where the ring stands and what to resubmit, before what
 * the guest added meanwhile.
 */
static const uint64_t packed = 1ull << VIRTIO_F_RING_PACKED;

/*
 * A fresh inflight area and a packed queue 2 that pops requests 0 and 1
 * and completes request 0: request 1 stays in flight.  Returns the area's fd.
 */
static int packed_ring_with_one_in_flight(struct fixture *fx, struct vhost_user_inflight *in)
{
    int area_fd;

    fixture_init(fx, 0);
    area_fd = inflight_handshake(fx, in);
    negotiate(fx, packed);
    guest_post_packed_requests(fx, 2, 0, 2);
    fx->fake.pop = 2;
    fx->fake.complete = 1;
    configure_queue(fx, 2, PACKED_FRESH_BASE, fx_eventfd(fx), fx_eventfd(fx));
    set_state(fx, VHOST_USER_SET_VRING_ENABLE, 2, 1);
    return area_fd;
}

static void test_inflight_packed_resubmit_after_restart(void)
{
    struct fixture fx;
    struct vhost_user_inflight in = { .num_queues = NUM_QUEUES, .queue_size = RING_SIZE };
    int area_fd = packed_ring_with_one_in_flight(&fx, &in);

    g_assert_true(vu_dev_queue(fx.dev, 2)->packed);
    g_assert_true(fx.fake.inflight_at_start[2]);
    g_assert_cmpuint(fx.fake.popped, ==, 2);
    g_assert_cmpint(guest_packed_used_id(&fx, 2, 0), ==, 0);
    g_assert_cmpint(guest_packed_used_id(&fx, 2, 1), ==, -1);

    /* Restart: the area back, the base QEMU had at the start, one more request posted. */
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    fixture_reconnect(&fx);
    guest_post_packed_requests(&fx, 2, 2, 1);
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_INFLIGHT_FD, &in, sizeof(in), &area_fd,
                                 1), ==, 0);
    negotiate(&fx, packed);
    fx.fake.pop = 2;
    fx.fake.complete = 2;
    configure_queue(&fx, 2, PACKED_FRESH_BASE, fx_eventfd(&fx), fx_eventfd(&fx));
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 2, 1);
    g_assert_cmpuint(fx.fake.resubmit_at_start, ==, 1);
    g_assert_cmpuint(fx.fake.start_base[2], ==, 2);     /* the avail slot past request 1 */
    g_assert_cmpuint(fx.fake.popped, ==, 2);
    g_assert_cmpuint(fx.fake.heads[0], ==, 1);
    g_assert_cmpstr(fx.fake.first_bytes[0], ==, "request 1");
    g_assert_cmpuint(fx.fake.heads[1], ==, 2);
    g_assert_cmpint(guest_packed_used_id(&fx, 2, 1), ==, 1);
    g_assert_cmpint(guest_packed_used_id(&fx, 2, 2), ==, 2);
    close(area_fd);
    fixture_fini(&fx);
}

/*
 * A packed ring stopped and started again on the same connection resumes
 * from the record where the front-end's base is where it stopped (what
 * was in flight comes back); a base the front-end moved (a virtio reset
 * that did not say RESET_DEVICE) wins, and the record starts afresh.
 */
static void test_inflight_packed_restart_on_the_connection(void)
{
    struct fixture fx;
    struct vhost_user_inflight in = { .num_queues = NUM_QUEUES, .queue_size = RING_SIZE };
    int area_fd = packed_ring_with_one_in_flight(&fx, &in);

    /* The fake's stop completes nothing: request 1 stays in flight. */
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 2, 0);
    fx.fake.pop = 0;
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 2, 1);
    g_assert_cmpuint(fx.fake.starts[2], ==, 2);
    g_assert_cmpuint(fx.fake.resubmit_at_start, ==, 1);
    g_assert_cmpuint(fx.fake.start_base[2], ==, 2);

    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 2, 0);
    set_state(&fx, VHOST_USER_SET_VRING_BASE, 2, PACKED_FRESH_BASE);
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 2, 1);
    g_assert_cmpuint(fx.fake.starts[2], ==, 3);
    g_assert_cmpuint(fx.fake.resubmit_at_start, ==, 0);
    g_assert_cmpuint(fx.fake.start_base[2], ==, 0);
    close(area_fd);
    fixture_fini(&fx);
}

/*
 * An area an earlier version of ours made has split-sized slices (it
 * comes back after an upgrade): split rings go on tracking in it at that
 * stride, a packed ring runs untracked and says why.
 */
static void test_inflight_area_of_an_earlier_version(void)
{
    struct fixture fx;
    struct vhost_user_inflight in = {
        .mmap_size = NUM_QUEUES * split_qbytes, .num_queues = NUM_QUEUES,
        .queue_size = RING_SIZE,
    };
    int area_fd = memfd_create("inflight-v1", MFD_CLOEXEC);
    struct vhost_user_inflight_queue *iq;
    uint8_t *area;

    g_assert_cmpint(ftruncate(area_fd, NUM_QUEUES * split_qbytes), ==, 0);
    area = mmap(NULL, NUM_QUEUES * split_qbytes, PROT_READ | PROT_WRITE, MAP_SHARED, area_fd,
                0);
    g_assert_true(area != MAP_FAILED);
    fixture_init(&fx, 0);
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_INFLIGHT_FD, &in, sizeof(in), &area_fd,
                                 1), ==, 0);
    negotiate(&fx, 0);
    configure_queue(&fx, 1, 0, fx_eventfd(&fx), fx_eventfd(&fx));
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 1, 1);
    g_assert_true(fx.fake.inflight_at_start[1]);
    iq = (struct vhost_user_inflight_queue *)(area + split_qbytes);
    g_assert_cmpuint(iq->version, ==, 1);
    iq->desc[7].counter = 0x5a5a;
    g_assert_cmpuint(vu_dev_queue(fx.dev, 1)->inflight_region->desc[7].counter, ==, 0x5a5a);

    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    fixture_reconnect(&fx);
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_INFLIGHT_FD, &in, sizeof(in), &area_fd,
                                 1), ==, 0);
    negotiate(&fx, packed);
    g_test_expect_message("vhost-scsi", G_LOG_LEVEL_WARNING,
                          "*vq2: the inflight area has 4112 bytes per queue, a packed ring's "
                          "record needs 8224*running without inflight tracking");
    configure_queue(&fx, 2, PACKED_FRESH_BASE, fx_eventfd(&fx), fx_eventfd(&fx));
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 2, 1);
    g_test_assert_expected_messages();
    g_assert_true(vu_dev_queue_running(fx.dev, 2));
    g_assert_false(fx.fake.inflight_at_start[2]);
    munmap(area, NUM_QUEUES * split_qbytes);
    close(area_fd);
    fixture_fini(&fx);
}

/* A driver may pick a ring smaller than the inflight area's queue size. */
static void test_inflight_smaller_ring(void)
{
    struct fixture fx;
    struct vhost_user_inflight in = { .num_queues = NUM_QUEUES, .queue_size = 1024 };
    struct reply r;

    fixture_init(&fx, 0);
    send_msg(fx.sock, VHOST_USER_GET_INFLIGHT_FD, VHOST_USER_VERSION, &in, sizeof(in));
    g_assert_cmpint(vu_dev_dispatch(fx.dev), ==, 0);
    r = recv_reply(fx.sock);
    g_assert_cmpint(r.fd, >=, 0);
    in = r.p.inflight;
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_INFLIGHT_FD, &in, sizeof(in), &r.fd, 1),
                     ==, 0);
    close(r.fd);
    negotiate(&fx, 0);
    configure_queue(&fx, 0, 0, fx_eventfd(&fx), fx_eventfd(&fx));
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 0, 1);
    g_assert_true(vu_dev_queue_running(fx.dev, 0));
    g_assert_true(fx.fake.inflight_at_start[0]);
    g_assert_cmpuint(vu_dev_queue(fx.dev, 0)->inflight_region->desc_num, ==, RING_SIZE);
    fixture_fini(&fx);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/vhost-user-server/add-remove-regions", test_add_remove_regions);
    g_test_add_func("/vhost-user-server/inflight-area", test_inflight_area);
    g_test_add_func("/vhost-user-server/inflight-smaller-ring", test_inflight_smaller_ring);
    g_test_add_func("/vhost-user-server/inflight-packed-resubmit-after-restart",
                    test_inflight_packed_resubmit_after_restart);
    g_test_add_func("/vhost-user-server/inflight-packed-restart-on-the-connection",
                    test_inflight_packed_restart_on_the_connection);
    g_test_add_func("/vhost-user-server/inflight-area-of-an-earlier-version",
                    test_inflight_area_of_an_earlier_version);
    g_test_add_func("/vhost-user-server/read-once/inflight-area-rewritten-while-queues-start",
                    test_inflight_area_rewritten_while_queues_start);
    g_test_add_func("/vhost-user-server/inflight-resubmit-after-restart",
                    test_inflight_resubmit_after_restart);
    /* These feed bad input and turn warnings non-fatal for the rest of the run. */
    g_test_add_func("/vhost-user-server/memory-table-changes", test_memory_table_changes);
    return g_test_run();
}
