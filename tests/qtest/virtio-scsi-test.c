/*
 * The qtest scenarios: a guest driver built from libqt exercises a
 * virtio-scsi PCI device in a real QEMU.  Every scenario runs against
 * QEMU's own virtio-scsi-pci + scsi-hd (the reference behaviour, needs
 * nothing of ours) and, when VHOST_SCSI_TARGET names the binary, against
 * vhost-user-scsi-pci served by vhost-scsi-target.  Scenarios that only
 * make sense for a vhost-user back-end (killing it, several front-ends
 * on one socket) run only in the second flavour.  A third flavour,
 * "kernel", runs the scenarios that need no back-end control against
 * vhost-scsi-pci served by the kernel's vhost-scsi (LIO): it is registered
 * when VHOST_SCSI_WWPN names a target whose TPG 0 holds a 64 MiB LUN 0
 * (tests/guest/kernel-qtest-guest.sh sets that up inside a guest).  The
 * flavour "vhost-user-kvm" runs vhost-user-scsi-pci under -accel kvm with
 * the interrupt-counting firmware (QTEST_FIRMWARE), so completions arrive
 * through KVM's irqfd and are seen as interrupts the vCPU took; its cases
 * are skipped, by name, where /dev/kvm is not usable.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "control-client.h"
#include "libqt.h"
#include "scsi-cmd.h"
#include "test-hooks.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/virtio_config.h>
#include <linux/virtio_pci.h>
#include <linux/virtio_ring.h>
#include <linux/virtio_scsi.h>

#define DISK_SIZE (64u << 20)
#define BLOCK 512u
#define NQ 4

/* What the scenario runs against; one per registered test case. */
struct flavour {
    const char *name;
    bool vhost;            /* vhost-user back-end process of ours */
    bool kernel;           /* kernel vhost-scsi: LIO owns the medium */
    bool kvm;              /* -accel kvm, interrupts counted by the vCPU */
};

static const struct flavour builtin = { "builtin", false, false, false };
static const struct flavour vhost_user = { "vhost-user", true, false, false };
static const struct flavour kernel_vhost = { "kernel", false, true, false };
static const struct flavour vhost_user_kvm = { "vhost-user-kvm", true, false, true };
static const struct flavour builtin_kvm = { "builtin-kvm", false, false, true };

struct env {
    const struct flavour *f;
    char *dir;
    char *sock;            /* back-end socket (vhost-user) */
    char *ctl;             /* its control socket */
    char *img;             /* raw image (built-in) */
    pid_t target;          /* vhost-scsi-target, or 0 */
    char *lun_spec;        /* --lun argument; NULL: 0=ram:64M */
    char *hold;            /* vhost-user: LUN 1 holds its I/O while this file exists */
    bool packed;           /* the device offers VIRTIO_F_RING_PACKED (packed=on) */
    unsigned delay_ms;     /* built-in: a null-co drive completing after this long */
    struct qts *qts;
    struct qt_vscsi dev;
};

/* ---- back-end process ---- */

static void target_start(struct env *e)
{
    const char *lun = e->lun_spec ? e->lun_spec : "0=ram:64M";
    const char *bin = g_getenv("VHOST_SCSI_TARGET");
    char *queues = g_strdup_printf("%u", NQ);
    g_autofree char *hold = e->hold ? g_strdup_printf("1=hold:1M,while=%s", e->hold) : NULL;
    char *argv[] = { (char *)bin, "--socket-path", e->sock, "--lun", (char *)lun,
                     "--queues", queues, "--control", e->ctl, hold ? "--lun" : NULL, hold,
                     NULL };
    g_auto(GStrv) envp = g_get_environ();
    if (hold) {
        /* The test backend hold: is refused unless the daemon's environment allows it. */
        envp = g_environ_setenv(envp, "VHOST_SCSI_TEST_BACKENDS", "1", TRUE);
    }
    e->target = fork();
    g_assert_cmpint(e->target, >=, 0);
    if (e->target == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* stdout carries TAP: the daemon's banner goes to stderr. */
        dup2(2, 1);
        execve(bin, argv, envp);
        _exit(127);
    }
    g_free(queues);
    /* Bounded wait for the listening socket to appear. */
    gint64 deadline = g_get_monotonic_time() + QT_TIMEOUT_US;
    struct stat st;
    while (stat(e->sock, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        int status;
        if (waitpid(e->target, &status, WNOHANG) == e->target) {
            g_error("vhost-scsi-target exited (status 0x%x) before listening", status);
        }
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(10000);
    }
}

static void target_kill(struct env *e)
{
    if (e->target > 0) {
        kill(e->target, SIGKILL);
        waitpid(e->target, NULL, 0);
        e->target = 0;
        /* A restarted daemon must not be mistaken for listening on the old file. */
        unlink(e->sock);
    }
}

/* True if the daemon is still running (it must survive bad guests). */
static bool target_alive(struct env *e)
{
    int status;
    return e->target > 0 && waitpid(e->target, &status, WNOHANG) == 0;
}

/* ---- environment ---- */

#define RP_DEVFN (0x10 << 3)

static char *device_args(struct env *e, const char *id, const char *bus, bool reconnect)
{
    int maj, min;
    qt_qemu_version(&maj, &min);
    if (e->f->kernel) {
        /* romfile= keeps QEMU from looking for an iPXE ROM it has no use for. */
        return g_strdup_printf("-device vhost-scsi-pci,id=%s,wwpn=%s,num_queues=%u,romfile=%s%s",
                               id, g_getenv("VHOST_SCSI_WWPN"), NQ, bus ? ",bus=" : "",
                               bus ? bus : "");
    }
    const char *packed = e->packed ? ",packed=on" : "";
    if (e->f->vhost) {
        /* reconnect-ms replaced reconnect (seconds) in QEMU 9.2. */
    bool ms = maj > 9 || (maj == 9 && min >= 2);
    const char *rc = !reconnect ? "" : ms ? ",reconnect-ms=500" : ",reconnect=1";
        return g_strdup_printf("-chardev socket,id=c_%s,path=%s%s "
                               "-device vhost-user-scsi-pci,id=%s,chardev=c_%s,num_queues=%u%s%s%s",
                               id, e->sock, rc, id, id, NQ, packed, bus ? ",bus=" : "",
                               bus ? bus : "");
    }
    g_autofree char *medium = e->delay_ms
        ? g_strdup_printf("driver=null-co,size=%u,read-zeroes=on,latency-ns=%" PRIu64,
                          DISK_SIZE, (uint64_t)e->delay_ms * 1000000)
        : g_strdup_printf("file=%s,format=raw", e->img);
    return g_strdup_printf("-drive if=none,id=d_%s,%s "
                           "-device virtio-scsi-pci,id=%s,num_queues=%u%s%s%s "
                           "-device scsi-hd,drive=d_%s,bus=%s.0,scsi-id=0,lun=0",
                           id, medium, id, NQ, packed, bus ? ",bus=" : "", bus ? bus : "", id,
                           id);
}

struct env_opts {
    bool root_port;        /* device behind a hot-plug capable root port */
    bool reconnect;        /* vhost-user chardev reconnects */
    bool no_device;        /* start without the device (hot-plug later) */
    bool file_lun;         /* vhost-user: LUN 0 is a file that survives restarts */
    bool packed;           /* the device offers packed rings (packed=on) */
    bool hold_lun;         /* vhost-user: LUN 1 is hold: (e->hold; docs/testing.md) */
    unsigned delay_ms;     /* built-in: LUN 0 a null-co drive completing after this long */
};

/* A case whose hold: LUN this build cannot give it is skipped (tests/test-hooks.h). */
static bool hold_lun_missing(const struct flavour *f, const struct env_opts *o)
{
    return f->vhost && o->hold_lun && test_hooks_missing();
}

/*
 * A KVM case where /dev/kvm is not usable, or the build gave no firmware,
 * is skipped with the reason.  QTEST_KVM_ACCEL appends to -accel kvm, to
 * show what a case sees with part of KVM turned off (docs/testing.md).
 */
static bool kvm_missing(const struct flavour *f)
{
    g_autofree char *why = NULL;
    if (!f->kvm) {
        return false;
    }
    if (!g_getenv("QTEST_FIRMWARE")) {
        g_test_skip("QTEST_FIRMWARE names no interrupt-counting firmware");
        return true;
    }
    if (!qt_kvm_usable(&why)) {
        g_test_skip(why);
        return true;
    }
    return false;
}

/* NULL (the case is skipped) for a KVM flavour without KVM. */
static struct env *env_new(const struct flavour *f, const struct env_opts *o)
{
    static const struct env_opts none;
    GError *err = NULL;
    o = o ? o : &none;
    if (kvm_missing(f)) {
        return NULL;
    }
    struct env *e = g_new0(struct env, 1);
    e->f = f;
    e->dir = g_dir_make_tmp("vhost-scsi-env-XXXXXX", &err);
    g_assert_no_error(err);
    e->sock = g_build_filename(e->dir, "vhost.sock", NULL);
    e->ctl = g_build_filename(e->dir, "control.sock", NULL);
    e->img = g_build_filename(e->dir, "disk.img", NULL);
    e->packed = o->packed;
    e->delay_ms = f->vhost ? 0 : o->delay_ms;
    if (f->vhost && o->hold_lun) {
        e->hold = g_build_filename(e->dir, "hold", NULL);
    }
    if ((!f->vhost && !f->kernel) || o->file_lun) {
        int fd = open(e->img, O_CREAT | O_RDWR | O_TRUNC, 0600);
        g_assert_cmpint(fd, >=, 0);
        g_assert_cmpint(ftruncate(fd, DISK_SIZE), ==, 0);
        close(fd);
    }
    if (f->vhost) {
        if (o->file_lun) {
            e->lun_spec = g_strdup_printf("0=file:%s", e->img);
        }
        target_start(e);
    }
    char *dev = o->no_device ? g_strdup("")
                             : device_args(e, "scsi0", o->root_port ? "rp0" : NULL, o->reconnect);
    struct qts_opts qo = { .kvm = f->kvm,
                           .firmware = f->kvm ? g_getenv("QTEST_FIRMWARE") : NULL,
                           .accel_extra = f->kvm ? g_getenv("QTEST_KVM_ACCEL") : NULL };
    e->qts = qts_start_opts(&qo, "%s %s", o->root_port ?
                       "-global ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off "
                       "-device pcie-root-port,id=rp0,slot=1,chassis=1,bus=pcie.0,addr=0x10" : "",
                       dev);
    g_free(dev);
    return e;
}

static void env_free(struct env *e)
{
    qt_vscsi_cleanup(&e->dev);
    qts_quit(e->qts);
    target_kill(e);
    unlink(e->img);
    if (e->hold) {
        unlink(e->hold);
    }
    unlink(e->sock);
    unlink(e->ctl);
    /* The files behind LUNs plugged by QMP (lun_plug). */
    for (unsigned lun = 0; lun < 4; lun++) {
        g_autofree char *file = g_strdup_printf("%s/lun%u.img", e->dir, lun);

        unlink(file);
    }
    rmdir(e->dir);
    g_free(e->img);
    g_free(e->lun_spec);
    g_free(e->hold);
    g_free(e->sock);
    g_free(e->ctl);
    g_free(e->dir);
    g_free(e);
}

/* ---- SCSI helpers ---- */

static struct sc_sense sense_of(const struct qt_scsi_resp *r)
{
    return sc_sense_of(r->sense, MIN(r->sense_len, sizeof(r->sense)));
}

static void check_sense(const struct qt_scsi_resp *r, uint8_t key, uint8_t asc)
{
    struct sc_sense s = sense_of(r);

    g_assert_cmpuint(r->status, ==, 0x02);   /* CHECK CONDITION */
    g_assert_cmpuint(r->sense_len, >=, 14);
    g_assert_cmphex(s.response_code, ==, SCSI_SENSE_FIXED_CURRENT);
    g_assert_cmphex(s.key, ==, key);
    g_assert_cmphex(s.asc, ==, asc);
}

/* Writes blocks of the pattern seed at lba of lun on vq. */
static void write_blocks(struct qt_vscsi *d, struct qt_vring *vq, uint8_t lun, uint32_t lba,
                         uint16_t blocks, uint32_t seed)
{
    uint8_t cdb[10];
    size_t len = (size_t)blocks * BLOCK;
    g_autofree uint8_t *out = g_malloc(len);
    struct qt_scsi_resp resp;

    qt_fill_pattern(out, len, seed);
    qt_cdb_rw10(cdb, true, lba, blocks);
    g_assert_cmpuint(qt_vscsi_cmd(d, vq, lun, cdb, 10, out, len, NULL, 0, &resp), ==, 0);
    g_assert_cmpuint(resp.resid, ==, 0);
}

/* Reads blocks at lba of lun on vq: they hold the pattern seed. */
static void read_verify(struct qt_vscsi *d, struct qt_vring *vq, uint8_t lun, uint32_t lba,
                        uint16_t blocks, uint32_t seed)
{
    uint8_t cdb[10];
    size_t len = (size_t)blocks * BLOCK;
    g_autofree uint8_t *want = g_malloc(len), *in = g_malloc(len);
    struct qt_scsi_resp resp;

    qt_fill_pattern(want, len, seed);
    qt_cdb_rw10(cdb, false, lba, blocks);
    g_assert_cmpuint(qt_vscsi_cmd(d, vq, lun, cdb, 10, NULL, 0, in, len, &resp), ==, 0);
    g_assert_cmpuint(resp.resid, ==, 0);
    g_assert(memcmp(in, want, len) == 0);
}

/* Writes blocks at lba on vq and reads them back. */
static void write_read_verify(struct qt_vscsi *d, struct qt_vring *vq, uint32_t lba,
                              uint16_t blocks, uint32_t seed)
{
    write_blocks(d, vq, 0, lba, blocks, seed);
    read_verify(d, vq, 0, lba, blocks, seed);
}

/* ---- shared steps ---- */

/*
 * After DRIVER_OK, QEMU (7.2 and 10.0 alike) re-sends SET_VRING_CALL for
 * every running ring (vhost-scsi-common's "unmask everything"), and a
 * vhost-user back-end signals each new call fd once so that a completion
 * signalled on the masked fd is not lost (vhost-user-server.c;
 * libvhost-user does the same).  These interrupts land whenever the daemon
 * gets to the messages -- with 7.2 often after the driver's first I/O -- so
 * they are waited for and consumed here, before any I/O, and scenarios that
 * count interrupts start clean.
 */
static void wait_startup_interrupts(struct env *e, const struct qt_vscsi_opts *o)
{
    struct qt_vscsi *d = &e->dev;
    if (!e->f->vhost || !d->use_msix || (o && o->no_driver_ok)) {
        return;
    }
    for (unsigned q = 0; q < 2 + d->nq; q++) {
        uint16_t v = d->vq[q].vector;
        if (v != VIRTIO_MSI_NO_VECTOR && !qt_msix_wait(&d->vpci.msix, v, QT_TIMEOUT_US)) {
            g_error("queue %u: no interrupt on vector %u for its new call fd after DRIVER_OK",
                    q, v);
        }
    }
}

/* qt_vscsi_init, knowing what the flavour's device does differently. */
static void vscsi_init(struct env *e, const struct qt_vscsi_opts *o)
{
    qt_vscsi_init(&e->dev, e->qts, o);
    /* Linux (6.1) vhost-scsi completes every command with used.len 0. */
    e->dev.used_len_zero_ok = e->f->kernel;
    wait_startup_interrupts(e, o);
}

static void start_driver(struct env *e, const struct qt_vscsi_opts *o)
{
    vscsi_init(e, o);
    qt_vscsi_clear_ua(&e->dev, qt_vscsi_rq(&e->dev, 0), 0);
}

/* Negotiates packed rings: offered, accepted with FEATURES_OK, every queue set up packed. */
static void start_packed(struct env *e, struct qt_vscsi_opts *o)
{
    struct qt_vscsi *d = &e->dev;

    o->packed = true;
    vscsi_init(e, o);
    g_assert(d->offered & (1ull << VIRTIO_F_RING_PACKED));
    g_assert(d->features & (1ull << VIRTIO_F_RING_PACKED));
    g_assert_cmphex(qt_vpci_status(&d->vpci) & VIRTIO_CONFIG_S_FEATURES_OK, ==,
                    VIRTIO_CONFIG_S_FEATURES_OK);
    g_assert(!o->event_idx || (d->features & (1ull << VIRTIO_RING_F_EVENT_IDX)));
    for (unsigned q = 0; q < 2 + d->nq; q++) {
        g_assert(d->vq[q].packed);
    }
}

/* Submits one READ per request queue, round robin, without waiting. */
static void submit_reads(struct qt_vscsi *d, struct qt_scsi_req *r, unsigned n,
                         uint16_t blocks)
{
    uint8_t cdb[10];
    for (unsigned i = 0; i < n; i++) {
        qt_cdb_rw10(cdb, false, 8 * i, blocks);
        qt_vscsi_submit(d, qt_vscsi_rq(d, i % d->nq), 0, cdb, 10, NULL,
                        (uint32_t)blocks * BLOCK, 0, &r[i], false);
    }
}

/* Consumes every vector's slot so the next observation starts clean. */
static void drain_vectors(struct qt_vscsi *d)
{
    for (unsigned v = 0; v < d->vpci.msix.nvec; v++) {
        qt_msix_fired(&d->vpci.msix, v);
    }
}

static void read_one(struct qt_vscsi *d, struct qt_vring *vq, uint32_t lba)
{
    uint8_t cdb[10], buf[BLOCK];
    qt_cdb_rw10(cdb, false, lba, 1);
    g_assert_cmpuint(qt_vscsi_cmd(d, vq, 0, cdb, 10, NULL, 0, buf, BLOCK, NULL), ==, 0);
}

/* After a reset of any kind: the driver starts over and I/O works. */
static void reinit_and_verify(struct env *e, const struct qt_vscsi_opts *o, uint32_t seed)
{
    qt_vscsi_reinit(&e->dev, o);
    qt_vscsi_clear_ua(&e->dev, qt_vscsi_rq(&e->dev, 0), 0);
    for (unsigned q = 0; q < e->dev.nq; q++) {
        write_read_verify(&e->dev, qt_vscsi_rq(&e->dev, q), 512 + 16 * q, 4, seed + q);
    }
}

/* ---- scenario 1 ---- */

/* INQUIRY: a direct-access disk (LIO's for the kernel flavour); READ CAPACITY: DISK_SIZE. */
static void check_inquiry_and_capacity(struct env *e, struct qt_vring *vq)
{
    struct qt_vscsi *d = &e->dev;
    struct qt_scsi_resp resp;
    uint8_t inq_cdb[SC_CDB_MAX];
    unsigned inq_len = sc_cdb(scsi_cdb_inquiry(0, 0, 96), inq_cdb);
    uint8_t inq[96];
    struct sc_datain dec;
    g_assert_cmpuint(qt_vscsi_cmd(d, vq, 0, inq_cdb, inq_len, NULL, 0, inq, 96, &resp), ==, 0);
    struct scsi_inquiry_standard *std = sc_datain_decode(&dec, inq_cdb, inq_len, inq, 96);
    g_assert_nonnull(std);
    g_assert_cmpint(std->device_type, ==, SCSI_INQUIRY_PERIPHERAL_DEVICE_TYPE_DIRECT_ACCESS);
    g_assert_cmpuint(inq[4] + 5, >=, 36);           /* standard data is complete */
    g_assert_cmpint(std->version, >=, 5);           /* claims SPC-3 or later */
    if (e->f->kernel) {
        g_assert(memcmp(inq + 8, "LIO-ORG ", 8) == 0);  /* LIO answers, not QEMU */
    }
    sc_datain_free(&dec);

    uint8_t rc_cdb[SC_CDB_MAX];
    unsigned rc_len = sc_cdb(scsi_cdb_readcapacity10(0, 0), rc_cdb);
    uint8_t cap[8];
    g_assert_cmpuint(qt_vscsi_cmd(d, vq, 0, rc_cdb, rc_len, NULL, 0, cap, 8, &resp), ==, 0);
    struct scsi_readcapacity10 *rc10 = sc_datain_decode(&dec, rc_cdb, rc_len, cap, 8);
    g_assert_nonnull(rc10);
    g_assert_cmpuint(rc10->block_size, ==, BLOCK);
    g_assert_cmpuint(((uint64_t)rc10->lba + 1) * rc10->block_size, ==, DISK_SIZE);
    sc_datain_free(&dec);
}

static void test_bring_up(gconstpointer data)
{
    struct env *e = env_new(data, NULL);
    if (!e) {
        return;
    }
    struct qt_vscsi *d = &e->dev;
    struct qt_scsi_resp resp;
    static const uint8_t tur[6] = { 0 };

    vscsi_init(e, NULL);
    g_assert_cmpuint(d->nq, ==, NQ);

    /* The first command after power-on reports it (SAM-5 5.14). */
    uint8_t st = qt_vscsi_cmd(d, qt_vscsi_rq(d, 0), 0, tur, 6, NULL, 0, NULL, 0, &resp);
    if (e->f->kernel) {
        g_test_message("first command after power-on: status 0x%02x, sense key 0x%x asc 0x%02x",
                       st, st ? sense_of(&resp).key : 0, st ? sense_of(&resp).asc : 0);
    }
    if (st != 0 || !e->f->kernel) {
        /*
         * LIO's LUN was "powered on" when it was configured, long before
         * this VM, and its I_T nexus outlives the VM: GOOD is allowed, and
         * so is a unit attention left by configuration (3Fh, e.g. REPORTED
         * LUNS DATA HAS CHANGED) instead of 29h.
         */
        uint8_t changed = SCSI_SENSE_ASCQ_INQUIRY_DATA_HAS_CHANGED >> 8;   /* 3Fh */

        check_sense(&resp, SCSI_SENSE_UNIT_ATTENTION,
                    e->f->kernel && sense_of(&resp).asc == changed
                        ? changed : SCSI_SENSE_ASCQ_BUS_RESET >> 8);
        /* Reported once: the next command succeeds. */
        g_assert_cmpuint(qt_vscsi_cmd(d, qt_vscsi_rq(d, 0), 0, tur, 6, NULL, 0, NULL, 0,
                                      &resp), ==, 0);
    }

    check_inquiry_and_capacity(e, qt_vscsi_rq(d, 0));

    for (unsigned q = 0; q < d->nq; q++) {
        write_read_verify(d, qt_vscsi_rq(d, q), 64 * q, 8, q + 1);
    }
    /* Data written on one queue is visible on another (one LUN, one medium). */
    uint8_t rd[10], buf[BLOCK], want[BLOCK];
    qt_fill_pattern(want, BLOCK, 1);
    qt_cdb_rw10(rd, false, 0, 1);
    g_assert_cmpuint(qt_vscsi_cmd(d, qt_vscsi_rq(d, d->nq - 1), 0, rd, 10, NULL, 0, buf, BLOCK,
                                  &resp), ==, 0);
    g_assert(memcmp(buf, want, BLOCK) == 0);
    env_free(e);
}

/* A driver may pick any power-of-two ring size up to the device's maximum. */
static void test_bring_up_small_rings(gconstpointer data)
{
    struct env *e = env_new(data, NULL);
    struct qt_vscsi *d = &e->dev;
    struct qt_vscsi_opts o = { .queue_size = 16 };

    vscsi_init(e, &o);
    g_assert_cmpuint(qt_vscsi_rq(d, 0)->size, ==, 16);
    qt_vscsi_clear_ua(d, qt_vscsi_rq(d, 0), 0);
    for (unsigned q = 0; q < d->nq; q++) {
        /* More requests than ring entries: the ring wraps several times. */
        for (unsigned i = 0; i < 40; i++) {
            write_read_verify(d, qt_vscsi_rq(d, q), 8 * i, 1, 1000 * q + i);
        }
    }
    env_free(e);
}

/* ---- task management ---- */

/* The spec's FUNCTION COMPLETE; linux/virtio_scsi.h only names it S_OK. */
#define TMF_FUNCTION_COMPLETE VIRTIO_SCSI_S_OK

static void test_tmf_lun_reset_then_unit_attention(gconstpointer data)
{
    struct env *e = env_new(data, NULL);
    struct qt_vscsi *d = &e->dev;
    struct qt_scsi_resp resp;
    static const uint8_t tur[6];

    start_driver(e, NULL);
    write_read_verify(d, qt_vscsi_rq(d, 0), 40, 2, 300);
    /* Aborting a task the LUN never saw is not an error (SAM-5 7.2). */
    g_assert_cmpuint(qt_vscsi_tmf(d, VIRTIO_SCSI_T_TMF_ABORT_TASK, 0, 0xdead), ==,
                     TMF_FUNCTION_COMPLETE);
    g_assert_cmpuint(qt_vscsi_tmf(d, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0, 0), ==,
                     TMF_FUNCTION_COMPLETE);
    /* The reset is reported once to the next command, on any queue. */
    qt_vscsi_cmd(d, qt_vscsi_rq(d, 1), 0, tur, 6, NULL, 0, NULL, 0, &resp);
    check_sense(&resp, SCSI_SENSE_UNIT_ATTENTION, SCSI_SENSE_ASCQ_BUS_RESET >> 8);
    g_assert_cmpuint(qt_vscsi_cmd(d, qt_vscsi_rq(d, 1), 0, tur, 6, NULL, 0, NULL, 0, &resp),
                     ==, 0);
    /* A LUN reset does not touch the medium. */
    uint8_t cdb[10], buf[2 * BLOCK], want[2 * BLOCK];
    qt_fill_pattern(want, sizeof(want), 300);
    qt_cdb_rw10(cdb, false, 40, 2);
    g_assert_cmpuint(qt_vscsi_cmd(d, qt_vscsi_rq(d, 2), 0, cdb, 10, NULL, 0, buf, sizeof(buf),
                                  NULL), ==, 0);
    g_assert(memcmp(buf, want, sizeof(buf)) == 0);
    env_free(e);
}

/* ---- events (QEMU's device: our target has no LUN hot-plug) ---- */

/*
 * LUN changes, made the way each flavour makes them: QEMU's own disk by
 * QMP (blockdev-add + device_add, device_del, block_resize), ours through
 * vhost-scsi-target's control socket.  Each is a 1 MiB null LUN.
 */
static void control_call(struct env *e, const char *method, JsonNode *params)
{
    JsonNode *result = NULL;
    g_autofree char *err = NULL;
    int fd = ctl_client_connect(e->ctl), code;

    g_assert_cmpint(fd, >=, 0);
    if (ctl_client_call(fd, method, params, 10000, &result, &code, &err) < 0) {
        g_error("%s: %s", method, err);
    }
    if (result) {
        json_node_unref(result);
    }
    close(fd);
}

static JsonNode *lun_params(unsigned lun, const char *key, JsonNode *value)
{
    JsonNode *n = json_node_new(JSON_NODE_OBJECT);
    JsonObject *o = json_object_new();

    json_object_set_int_member(o, "lun", lun);
    if (key) {
        json_object_set_member(o, key, value);
    }
    json_node_take_object(n, o);
    return n;
}

static void lun_plug(struct env *e, unsigned lun)
{
    if (e->f->vhost) {
        JsonNode *n = json_node_new(JSON_NODE_OBJECT);
        JsonObject *o = json_object_new();
        g_autofree char *spec = g_strdup_printf("%u=null:1M", lun);

        json_object_set_string_member(o, "lun", spec);
        json_node_take_object(n, o);
        control_call(e, "lun-add", n);
        return;
    }
    /* A file, so that block_resize can grow it (null-co cannot). */
    g_autofree char *file = g_strdup_printf("%s/lun%u.img", e->dir, lun);
    int fd = open(file, O_CREAT | O_RDWR | O_TRUNC, 0600);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, 1 << 20), ==, 0);
    close(fd);
    g_autofree char *add = g_strdup_printf("{'execute': 'blockdev-add', 'arguments': "
                                           "{'driver': 'file', 'node-name': 'nul%u', "
                                           "'filename': '%s'}}", lun, file);
    g_autofree char *dev = g_strdup_printf("'driver': 'scsi-hd', 'id': 'lun%u', "
                                           "'drive': 'nul%u', 'bus': 'scsi0.0', "
                                           "'scsi-id': 0, 'lun': %u", lun, lun, lun);
    char *rep = qmp(e->qts, "%s", add);

    g_assert(qmp_ok(rep));
    g_free(rep);
    qmp_device_add(e->qts, dev);
}

static void lun_unplug(struct env *e, unsigned lun)
{
    if (e->f->vhost) {
        control_call(e, "lun-remove", lun_params(lun, NULL, NULL));
        return;
    }
    g_autofree char *del = g_strdup_printf("{'execute': 'device_del', 'arguments': "
                                           "{'id': 'lun%u'}}", lun);
    char *rep = qmp(e->qts, "%s", del);

    g_assert(qmp_ok(rep));
    g_free(rep);
}

static void lun_grow(struct env *e, unsigned lun, uint64_t size)
{
    if (e->f->vhost) {
        control_call(e, "lun-resize",
                     lun_params(lun, "size", json_node_init_int(json_node_alloc(), (gint64)size)));
        return;
    }
    g_autofree char *rs = g_strdup_printf("{'execute': 'block_resize', 'arguments': "
                                          "{'node-name': 'nul%u', 'size': %" PRIu64 "}}",
                                          lun, size);
    char *rep = qmp(e->qts, "%s", rs);

    g_assert(qmp_ok(rep));
    g_free(rep);
}

/* The next event, which must come: its type (flags included) and reason; LUN checked. */
static uint32_t expect_event(struct qt_vscsi *d, unsigned want_lun, uint32_t *reason)
{
    uint32_t event;
    uint8_t lun[8];

    g_assert(qt_vscsi_get_event(d, &event, lun, reason));
    if ((event & ~VIRTIO_SCSI_T_EVENTS_MISSED) != VIRTIO_SCSI_T_NO_EVENT) {
        g_assert_cmphex(lun[0], ==, 1);
        g_assert_cmphex(lun[1], ==, 0);
        g_assert_cmphex((lun[2] << 8 | lun[3]) & 0x3fff, ==, want_lun);
    }
    return event;
}

static void test_event_lun_hotplug_rescan(gconstpointer data)
{
    struct env *e = env_new(data, NULL);
    struct qt_vscsi *d = &e->dev;
    struct qt_vscsi_opts o = { .hotplug = true };
    uint32_t reason;

    start_driver(e, &o);
    g_assert(d->features & (1ull << VIRTIO_SCSI_F_HOTPLUG));
    qt_vscsi_post_events(d, 4);
    drain_vectors(d);
    lun_plug(e, 1);
    g_assert_cmpuint(expect_event(d, 1, &reason), ==, VIRTIO_SCSI_T_TRANSPORT_RESET);
    g_assert_cmpuint(reason, ==, VIRTIO_SCSI_EVT_RESET_RESCAN);
    g_assert(qt_msix_wait(&d->vpci.msix, d->vq[1].vector, QT_TIMEOUT_US));

    /* REPORT LUNS now lists both, and the new LUN answers. */
    uint8_t rl[SC_CDB_MAX];
    unsigned rl_len = sc_cdb(scsi_reportluns_cdb(0, 256), rl);
    uint8_t buf[BLOCK];
    struct sc_datain dec;
    struct qt_scsi_resp resp;
    qt_vscsi_clear_ua(d, qt_vscsi_rq(d, 0), 0);
    g_assert_cmpuint(qt_vscsi_cmd(d, qt_vscsi_rq(d, 0), 0, rl, rl_len, NULL, 0, buf, sizeof(buf),
                                  &resp), ==, 0);
    /* libiscsi decodes only the bytes the device returned. */
    g_assert_cmpuint(resp.resid, <=, sizeof(buf));
    struct scsi_reportluns_list *luns = sc_datain_decode(&dec, rl, rl_len, buf,
                                                         sizeof(buf) - resp.resid);
    g_assert_nonnull(luns);
    g_assert_cmpuint(luns->num, ==, 2);             /* a LUN list of 16 bytes */
    sc_datain_free(&dec);
    qt_vscsi_clear_ua(d, qt_vscsi_rq(d, 1), 1);
    uint8_t rd[10];
    qt_cdb_rw10(rd, false, 0, 1);
    g_assert_cmpuint(qt_vscsi_cmd(d, qt_vscsi_rq(d, 1), 1, rd, 10, NULL, 0, buf, BLOCK, NULL),
                     ==, 0);
    env_free(e);
}

static void test_event_lun_unplug_removed(gconstpointer data)
{
    struct env *e = env_new(data, NULL);
    struct qt_vscsi *d = &e->dev;
    struct qt_vscsi_opts o = { .hotplug = true };
    struct qt_scsi_resp resp;
    uint8_t tur[6] = { 0 };
    uint32_t reason;

    start_driver(e, &o);
    g_assert(d->features & (1ull << VIRTIO_SCSI_F_HOTPLUG));
    qt_vscsi_post_events(d, 4);
    lun_plug(e, 1);
    g_assert_cmpuint(expect_event(d, 1, &reason), ==, VIRTIO_SCSI_T_TRANSPORT_RESET);
    qt_vscsi_clear_ua(d, qt_vscsi_rq(d, 0), 1);
    lun_unplug(e, 1);
    g_assert_cmpuint(expect_event(d, 1, &reason), ==, VIRTIO_SCSI_T_TRANSPORT_RESET);
    g_assert_cmpuint(reason, ==, VIRTIO_SCSI_EVT_RESET_REMOVED);
    /*
     * Gone: a command to it fails.  QEMU's own HBA answers for its target
     * (CHECK CONDITION, LOGICAL UNIT NOT SUPPORTED); ours refuses it at
     * the transport (BAD_TARGET), as it does any LUN it does not serve.
     */
    struct qt_scsi_req r;

    /* QEMU first reports the unit attentions its target device has pending. */
    for (unsigned i = 0; i < 4; i++) {
        qt_vscsi_submit(d, qt_vscsi_rq(d, 0), 1, tur, 6, NULL, 0, 0, &r, false);
        qt_vscsi_complete(d, qt_vscsi_rq(d, 0), &r, &resp, NULL, 0);
        if (resp.response != VIRTIO_SCSI_S_OK || sense_of(&resp).key != SCSI_SENSE_UNIT_ATTENTION) {
            break;
        }
    }
    if (e->f->vhost) {
        g_assert_cmpuint(resp.response, ==, VIRTIO_SCSI_S_BAD_TARGET);
    } else {
        g_assert_cmpuint(resp.response, ==, VIRTIO_SCSI_S_OK);
        check_sense(&resp, SCSI_SENSE_ILLEGAL_REQUEST, 0x25);
    }
    env_free(e);
}

static void test_event_lun_resize_param_change(gconstpointer data)
{
    struct env *e = env_new(data, NULL);
    struct qt_vscsi *d = &e->dev;
    struct qt_vscsi_opts o = { .hotplug = true, .change = true };
    uint32_t reason;

    start_driver(e, &o);
    g_assert(d->features & (1ull << VIRTIO_SCSI_F_CHANGE));
    qt_vscsi_post_events(d, 4);
    lun_plug(e, 1);
    g_assert_cmpuint(expect_event(d, 1, &reason), ==, VIRTIO_SCSI_T_TRANSPORT_RESET);
    lun_grow(e, 1, 4u << 20);
    g_assert_cmpuint(expect_event(d, 1, &reason), ==, VIRTIO_SCSI_T_PARAM_CHANGE);
    /* ASC in the low byte, ASCQ above it: CAPACITY DATA HAS CHANGED. */
    g_assert_cmphex(reason, ==, 0x2a | 0x09 << 8);
    env_free(e);
}

static void test_event_missed_flagged(gconstpointer data)
{
    struct env *e = env_new(data, NULL);
    struct qt_vscsi *d = &e->dev;
    struct qt_vscsi_opts o = { .hotplug = true };
    uint32_t reason;

    start_driver(e, &o);
    g_assert(d->features & (1ull << VIRTIO_SCSI_F_HOTPLUG));
    /* No event buffer when the LUN comes: the event is lost. */
    lun_plug(e, 1);
    /* The first buffer posted says so at once. */
    qt_vscsi_post_events(d, 1);
    g_assert_cmphex(expect_event(d, 0, &reason), ==,
                    VIRTIO_SCSI_T_NO_EVENT | VIRTIO_SCSI_T_EVENTS_MISSED);
    /* And the next event comes whole. */
    qt_vscsi_post_events(d, 1);
    lun_unplug(e, 1);
    g_assert_cmphex(expect_event(d, 1, &reason), ==, VIRTIO_SCSI_T_TRANSPORT_RESET);
    g_assert_cmpuint(reason, ==, VIRTIO_SCSI_EVT_RESET_REMOVED);
    env_free(e);
}

/* ---- scenario 2: MSI-X ---- */

static void test_msix_per_queue_vectors(gconstpointer data)
{
    struct env *e = env_new(data, NULL);
    if (!e) {
        return;
    }
    struct qt_vscsi *d = &e->dev;
    struct qt_msix *m = &d->vpci.msix;

    start_driver(e, NULL);
    g_assert_cmpuint(m->nvec, >=, d->nq + 3);
    for (unsigned q = 0; q < d->nq; q++) {
        struct qt_vring *vq = qt_vscsi_rq(d, q);
        g_assert_cmpuint(vq->vector, ==, 3 + q);   /* config 0, ctrl 1, event 2 */
        drain_vectors(d);
        read_one(d, vq, q);
        g_assert(qt_msix_wait(m, vq->vector, QT_TIMEOUT_US));
        /* Only this queue's vector was written. */
        for (unsigned v = 0; v < m->nvec; v++) {
            if (v != vq->vector) {
                g_assert_false(qt_msix_fired(m, v));
            }
        }
    }
    env_free(e);
}

/*
 * A completion on masked vector vec becomes its pending bit, not a message;
 * unmasking delivers it.
 */
static void pending_then_delivered_on_unmask(struct qt_msix *m, unsigned vec)
{
    gint64 deadline = g_get_monotonic_time() + QT_TIMEOUT_US;
    while (!qt_msix_pending(m, vec)) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
    }
    g_assert_false(qt_msix_fired(m, vec));
    qt_msix_mask(m, vec, false);
    g_assert(qt_msix_wait(m, vec, QT_TIMEOUT_US));
}

static void test_msix_masked_vector_pends(gconstpointer data)
{
    struct env *e = env_new(data, NULL);
    if (!e) {
        return;
    }
    struct qt_vscsi *d = &e->dev;
    struct qt_msix *m = &d->vpci.msix;

    start_driver(e, NULL);
    struct qt_vring *vq = qt_vscsi_rq(d, 1);
    drain_vectors(d);
    g_assert_false(qt_msix_pending(m, vq->vector));
    qt_msix_mask(m, vq->vector, true);

    read_one(d, vq, 0);
    pending_then_delivered_on_unmask(m, vq->vector);
    g_assert_false(qt_msix_pending(m, vq->vector));

    /* And the vector works normally afterwards. */
    read_one(d, vq, 1);
    g_assert(qt_msix_wait(m, vq->vector, QT_TIMEOUT_US));
    env_free(e);
}

/* ---- scenario 3: vector (un)assignment, INTx, reset with vectors set ---- */

/* Every queue's vector set to none, as a driver does when it falls back from per-queue vectors. */
static void unset_all_vectors(struct qt_vscsi *d)
{
    for (unsigned q = 0; q < 2 + d->nq; q++) {
        g_assert_cmphex(qt_vpci_set_vector(&d->vpci, q, VIRTIO_MSI_NO_VECTOR), ==,
                        VIRTIO_MSI_NO_VECTOR);
        d->vq[q].vector = VIRTIO_MSI_NO_VECTOR;
    }
    g_assert_cmphex(qt_vpci_set_vector(&d->vpci, 0xffff, VIRTIO_MSI_NO_VECTOR), ==,
                    VIRTIO_MSI_NO_VECTOR);
}

static void test_vectors_unassigned_before_driver_ok(gconstpointer data)
{
    struct env *e = env_new(data, NULL);
    if (!e) {
        return;
    }
    struct qt_vscsi *d = &e->dev;
    struct qt_vscsi_opts o = { .no_driver_ok = true };

    vscsi_init(e, &o);
    unset_all_vectors(d);
    qt_vpci_set_status(&d->vpci, qt_vpci_status(&d->vpci) | VIRTIO_CONFIG_S_DRIVER_OK);
    g_assert(qmp_responsive(e->qts));

    qt_vscsi_clear_ua(d, qt_vscsi_rq(d, 0), 0);
    drain_vectors(d);
    write_read_verify(d, qt_vscsi_rq(d, 0), 0, 4, 7);
    /* No vector: completions are in the used ring but no message is sent. */
    for (unsigned v = 0; v < d->vpci.msix.nvec; v++) {
        g_assert_false(qt_msix_fired(&d->vpci.msix, v));
    }
    env_free(e);
}

static void test_msix_disabled_intx_isr(gconstpointer data)
{
    struct env *e = env_new(data, NULL);
    struct qt_vscsi *d = &e->dev;
    struct qt_vscsi_opts o = { .no_msix = true };

    vscsi_init(e, &o);
    qt_vscsi_clear_ua(d, qt_vscsi_rq(d, 0), 0);
    qt_vpci_isr(&d->vpci);           /* acknowledge whatever is left */

    read_one(d, qt_vscsi_rq(d, 2), 3);
    /* The queue interrupt shows in ISR bit 0; reading ISR acknowledges it. */
    gint64 deadline = g_get_monotonic_time() + QT_TIMEOUT_US;
    uint8_t isr;
    while (!((isr = qt_vpci_isr(&d->vpci)) & 1)) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
    }
    g_assert_cmphex(isr & 2, ==, 0);          /* not a config change */
    /*
     * Reading acknowledged it.  A vhost-user back-end's one interrupt per
     * new call fd after DRIVER_OK (see wait_startup_interrupts) can only
     * show in this shared bit, and may land late: allow one per queue.
     */
    unsigned late = 0;
    while ((isr = qt_vpci_isr(&d->vpci)) != 0) {
        g_assert_cmphex(isr, ==, 1);
        g_assert_true(e->f->vhost && ++late <= 2 + d->nq);
    }
    for (unsigned v = 0; v < d->vpci.msix.nvec; v++) {
        g_assert_false(qt_msix_fired(&d->vpci.msix, v));
    }
    env_free(e);
}

static void test_reset_with_vectors_set(gconstpointer data)
{
    struct env *e = env_new(data, NULL);
    if (!e) {
        return;
    }
    struct qt_vscsi *d = &e->dev;

    start_driver(e, NULL);
    write_read_verify(d, qt_vscsi_rq(d, 0), 0, 4, 11);
    /* Reset while every queue still has its vector and MSI-X is enabled. */
    qt_vpci_reset(&d->vpci);
    g_assert(qmp_responsive(e->qts));
    reinit_and_verify(e, NULL, 20);
    /* A second reset straight after DRIVER_OK, before any I/O. */
    qt_vpci_reset(&d->vpci);
    g_assert(qmp_responsive(e->qts));
    reinit_and_verify(e, NULL, 30);
    env_free(e);
}

/* ---- scenario 4: resets with requests in flight ---- */

static void test_device_reset_in_flight(gconstpointer data)
{
    struct env *e = env_new(data, NULL);
    if (!e) {
        return;
    }
    struct qt_vscsi *d = &e->dev;
    struct qt_scsi_req r[32];

    start_driver(e, NULL);
    submit_reads(d, r, 32, 64);
    qt_vpci_reset(&d->vpci);
    g_assert(qmp_responsive(e->qts));
    reinit_and_verify(e, NULL, 40);
    env_free(e);
}

static void test_system_reset_in_flight(gconstpointer data)
{
    struct env *e = env_new(data, NULL);
    struct qt_vscsi *d = &e->dev;
    struct qt_scsi_req r[32];

    start_driver(e, NULL);
    write_read_verify(d, qt_vscsi_rq(d, 1), 100, 8, 50);
    submit_reads(d, r, 32, 64);
    char *rep = qmp(e->qts, "{'execute': 'system_reset'}");
    g_assert(qmp_ok(rep));
    g_free(rep);
    char *ev = qmp_wait_event(e->qts, "RESET", NULL, QT_TIMEOUT_US);
    g_assert(ev);
    g_free(ev);
    g_assert(qmp_responsive(e->qts));
    /* PCI config was reset too: BARs, MSI-X and the driver start from scratch. */
    g_assert_cmphex(qt_pci_cfg_readw(&d->vpci.pci, 0x04) & 0x7, ==, 0);
    reinit_and_verify(e, NULL, 60);
    /* Data written before the reset is still on the medium. */
    uint8_t cdb[10], buf[8 * BLOCK], want[8 * BLOCK];
    qt_fill_pattern(want, sizeof(want), 50);
    qt_cdb_rw10(cdb, false, 100, 8);
    g_assert_cmpuint(qt_vscsi_cmd(d, qt_vscsi_rq(d, 0), 0, cdb, 10, NULL, 0, buf,
                                  sizeof(buf), NULL), ==, 0);
    g_assert(memcmp(buf, want, sizeof(buf)) == 0);
    env_free(e);
}

/* ---- scenario 5: hot-unplug with requests in flight, hot-plug again ---- */

static void hotplug_device(struct env *e, unsigned gen)
{
    if (e->f->vhost) {
        char *args = g_strdup_printf("'driver': 'vhost-user-scsi-pci', 'id': 'scsi0', "
                                     "'bus': 'rp0', 'chardev': 'c_scsi0', 'num_queues': %u", NQ);
        qmp_device_add(e->qts, args);
        g_free(args);
    } else {
        char *rep = qmp(e->qts, "{'execute': 'blockdev-add', 'arguments': {'driver': 'raw', "
                        "'node-name': 'n%u', 'file': {'driver': 'file', 'filename': '%s'}}}",
                        gen, e->img);
        g_assert(qmp_ok(rep));
        g_free(rep);
        char *args = g_strdup_printf("'driver': 'virtio-scsi-pci', 'id': 'scsi0', "
                                     "'bus': 'rp0', 'num_queues': %u", NQ);
        qmp_device_add(e->qts, args);
        g_free(args);
        args = g_strdup_printf("'driver': 'scsi-hd', 'id': 'hd%u', 'drive': 'n%u', "
                               "'bus': 'scsi0.0', 'scsi-id': 0, 'lun': 0", gen, gen);
        qmp_device_add(e->qts, args);
        g_free(args);
    }
    /* The guest powers the slot after the presence-detect event. */
    qt_pcie_slot_power(&e->dev.bus, RP_DEVFN, true);
}

static void unplug_device(struct env *e)
{
    char *rep = qmp(e->qts, "{'execute': 'device_del', 'arguments': {'id': 'scsi0'}}");
    g_assert(qmp_ok(rep));
    g_free(rep);
    /* The guest answers the attention button by powering the slot off. */
    qt_pcie_slot_power(&e->dev.bus, RP_DEVFN, false);
    char *ev = qmp_wait_event(e->qts, "DEVICE_DELETED", "\"device\": \"scsi0\"",
                              QT_TIMEOUT_US);
    g_assert(ev);
    g_free(ev);
}

static void test_hot_unplug_in_flight_and_replug(gconstpointer data)
{
    struct env_opts eo = { .root_port = true };
    struct env *e = env_new(data, &eo);
    struct qt_vscsi *d = &e->dev;
    struct qt_vscsi_opts o = { .busnr = 1 };
    struct qt_scsi_req r[32];
    struct qt_pci_dev probe;

    struct qt_pci_bus bus;
    qt_pci_bus_init(&bus, e->qts);
    qt_pci_bridge_setup(&bus, RP_DEVFN, 1);
    vscsi_init(e, &o);
    g_assert(qmp_pci_has_device(e->qts, "scsi0"));
    qt_vscsi_clear_ua(d, qt_vscsi_rq(d, 0), 0);
    write_read_verify(d, qt_vscsi_rq(d, 0), 200, 8, 70);

    for (unsigned gen = 1; gen <= 2; gen++) {
        submit_reads(d, r, 32, 64);
        unplug_device(e);
        g_assert(qmp_responsive(e->qts));
        g_assert_false(qmp_pci_has_device(e->qts, "scsi0"));
        g_assert_false(qt_pci_find(&d->bus, 1, 0x1af4, 0, &probe));

        hotplug_device(e, gen);
        g_assert(qmp_pci_has_device(e->qts, "scsi0"));
        g_assert(qt_pci_find(&d->bus, 1, 0x1af4, 0, &probe));
        reinit_and_verify(e, &o, 80 + gen);
        /* The medium outlives the device. */
        uint8_t cdb[10], buf[8 * BLOCK], want[8 * BLOCK];
        qt_fill_pattern(want, sizeof(want), 70);
        qt_cdb_rw10(cdb, false, 200, 8);
        g_assert_cmpuint(qt_vscsi_cmd(d, qt_vscsi_rq(d, 0), 0, cdb, 10, NULL, 0, buf,
                                      sizeof(buf), NULL), ==, 0);
        g_assert(memcmp(buf, want, sizeof(buf)) == 0);
    }
    env_free(e);
}
/* ---- scenario 6: back-end killed and restarted ---- */

/* Waits for a request that may first hit the restarted LUN's unit attention. */
static bool complete_ok_or_ua(struct qt_vscsi *d, struct qt_vring *vq, struct qt_scsi_req *r)
{
    struct qt_scsi_resp resp;
    qt_vscsi_complete(d, vq, r, &resp, NULL, 0);
    g_assert_cmpuint(resp.response, ==, VIRTIO_SCSI_S_OK);
    if (resp.status == 0) {
        return true;
    }
    check_sense(&resp, SCSI_SENSE_UNIT_ATTENTION, SCSI_SENSE_ASCQ_BUS_RESET >> 8);
    return false;
}

/*
 * Packed rings: QEMU cannot give the new back-end a packed ring's
 * position (it is not in guest memory), only the base of the ring's last
 * start; the inflight area's record says where each ring stands.  Their
 * rings are small and some way into their lap, so the requests in flight
 * and queued go on around the end; and each holds a read on LUN 1 (hold:)
 * that the requests after it pass, their used descriptors written over
 * its slots: the new back-end has only the record to resubmit it from.
 */
static void backend_killed_and_restarted(gconstpointer data, bool packed)
{
    struct env_opts eo = { .reconnect = true, .file_lun = true, .packed = packed,
                           .hold_lun = packed };
    struct qt_vscsi_opts o = { .queue_size = packed ? 32 : 0 };
    struct qt_scsi_req held[NQ];
    int maj, min;

    if (hold_lun_missing(data, &eo)) {
        return;
    }
    qt_qemu_version(&maj, &min);
    if (maj < 8 || (maj == 8 && min < 2)) {
        /* Before 8.2 vhost-user-scsi cannot use a reconnecting chardev at all:
         * realize fails with "Failed to set msg fds" (7.2 measured). */
        g_test_skip("vhost-user-scsi reconnect needs QEMU >= 8.2");
        return;
    }
    struct env *e = env_new(data, &eo);
    struct qt_vscsi *d = &e->dev;
    enum { N = 16, BLKS = 8 };
    struct qt_scsi_req r[2 * N];
    g_autofree uint8_t *buf = g_malloc(BLKS * BLOCK);
    uint8_t cdb[10];

    if (packed) {
        start_packed(e, &o);
        qt_vscsi_clear_ua(d, qt_vscsi_rq(d, 0), 0);
        qt_vscsi_clear_ua(d, qt_vscsi_rq(d, 0), 1);
        g_assert(g_file_set_contents(e->hold, "", 0, NULL));
        for (unsigned q = 0; q < d->nq; q++) {
            qt_cdb_rw10(cdb, false, 8 * q, 2);
            qt_vscsi_submit(d, qt_vscsi_rq(d, q), 1, cdb, 10, NULL, 2 * BLOCK, 0, &held[q],
                            false);
            for (unsigned i = 0; i < 3; i++) {
                write_read_verify(d, qt_vscsi_rq(d, q), 4000 + 64 * q + 8 * i, 2, 50 + i);
            }
        }
    } else {
        start_driver(e, NULL);
    }
    write_read_verify(d, qt_vscsi_rq(d, 0), 1000, BLKS, 90);

    /* Writes in flight when the back-end dies ... */
    for (unsigned i = 0; i < N; i++) {
        qt_fill_pattern(buf, BLKS * BLOCK, 100 + i);
        qt_cdb_rw10(cdb, true, 2000 + BLKS * i, BLKS);
        qt_vscsi_submit(d, qt_vscsi_rq(d, i % d->nq), 0, cdb, 10, buf, 0, BLKS * BLOCK,
                        &r[i], false);
    }
    target_kill(e);
    /* ... and writes queued while it is gone. */
    for (unsigned i = N; i < 2 * N; i++) {
        qt_fill_pattern(buf, BLKS * BLOCK, 100 + i);
        qt_cdb_rw10(cdb, true, 2000 + BLKS * i, BLKS);
        qt_vscsi_submit(d, qt_vscsi_rq(d, i % d->nq), 0, cdb, 10, buf, 0, BLKS * BLOCK,
                        &r[i], false);
    }
    g_assert(qmp_responsive(e->qts));
    if (packed) {
        g_assert_cmpuint(unlink(e->hold), ==, 0);
    }
    target_start(e);

    /* QEMU reconnects and restarts the rings; every request completes. */
    for (unsigned i = 0; i < 2 * N; i++) {
        struct qt_vring *vq = qt_vscsi_rq(d, i % d->nq);
        if (!complete_ok_or_ua(d, vq, &r[i])) {
            /* Retried like an initiator does after a unit attention. */
            qt_fill_pattern(buf, BLKS * BLOCK, 100 + i);
            qt_cdb_rw10(cdb, true, 2000 + BLKS * i, BLKS);
            g_assert_cmpuint(qt_vscsi_cmd(d, vq, 0, cdb, 10, buf, BLKS * BLOCK, NULL, 0,
                                          NULL), ==, 0);
        }
    }
    /* The held reads too (the new back-end's LUN 1 may answer with its power-on UA). */
    for (unsigned q = 0; packed && q < d->nq; q++) {
        complete_ok_or_ua(d, qt_vscsi_rq(d, q), &held[q]);
    }
    qt_vscsi_clear_ua(d, qt_vscsi_rq(d, 0), 0);
    g_autofree uint8_t *want = g_malloc(BLKS * BLOCK);
    for (unsigned i = 0; i < 2 * N; i++) {
        qt_fill_pattern(want, BLKS * BLOCK, 100 + i);
        qt_cdb_rw10(cdb, false, 2000 + BLKS * i, BLKS);
        g_assert_cmpuint(qt_vscsi_cmd(d, qt_vscsi_rq(d, (i + 1) % d->nq), 0, cdb, 10, NULL, 0,
                                      buf, BLKS * BLOCK, NULL), ==, 0);
        g_assert(memcmp(buf, want, BLKS * BLOCK) == 0);
    }
    /* The data written before the kill survived as well. */
    qt_fill_pattern(want, BLKS * BLOCK, 90);
    qt_cdb_rw10(cdb, false, 1000, BLKS);
    g_assert_cmpuint(qt_vscsi_cmd(d, qt_vscsi_rq(d, 0), 0, cdb, 10, NULL, 0, buf,
                                  BLKS * BLOCK, NULL), ==, 0);
    g_assert(memcmp(buf, want, BLKS * BLOCK) == 0);
    env_free(e);
}

static void test_backend_killed_and_restarted(gconstpointer data)
{
    backend_killed_and_restarted(data, false);
}

static void test_backend_killed_and_restarted_packed(gconstpointer data)
{
    backend_killed_and_restarted(data, true);
}

/* ---- scenario 7: EVENT_IDX interrupt suppression ---- */

/*
 * Negotiates EVENT_IDX and has every request queue interrupt once: a
 * device may always notify for its first completion after a reset (QEMU
 * does), so suppression is only measured from the second on.
 */
static struct env *start_event_idx(gconstpointer data)
{
    struct env *e = env_new(data, NULL);
    struct qt_vscsi_opts o = { .event_idx = true };
    struct qt_vscsi *d = &e->dev;
    start_driver(e, &o);
    g_assert(d->features & (1ull << VIRTIO_RING_F_EVENT_IDX));
    for (unsigned q = 0; q < d->nq; q++) {
        struct qt_vring *vq = qt_vscsi_rq(d, q);
        qt_vring_set_used_event(vq, vq->last_used);
        read_one(d, vq, q);
        g_assert(qt_msix_wait(&d->vpci.msix, vq->vector, QT_TIMEOUT_US));
    }
    return e;
}

static void test_event_idx_used_event_selects_interrupt(gconstpointer data)
{
    struct env *e = start_event_idx(data);
    struct qt_vscsi *d = &e->dev;
    struct qt_msix *m = &d->vpci.msix;
    struct qt_vring *vq = qt_vscsi_rq(d, 1);

    /* Eight completions, one at a time; used_event asks for the eighth only. */
    qt_vring_set_used_event(vq, vq->last_used + 7);
    drain_vectors(d);
    for (unsigned i = 0; i < 8; i++) {
        read_one(d, vq, i);
        if (i < 7) {
            g_assert_false(qt_msix_fired(m, vq->vector));
        }
    }
    g_assert(qt_msix_wait(m, vq->vector, QT_TIMEOUT_US));

    /* used_event == the next index: every completion interrupts. */
    for (unsigned i = 0; i < 8; i++) {
        qt_vring_set_used_event(vq, vq->last_used);
        read_one(d, vq, i);
        g_assert(qt_msix_wait(m, vq->vector, QT_TIMEOUT_US));
    }
    env_free(e);
}

static void test_event_idx_batch_one_interrupt(gconstpointer data)
{
    struct env *e = start_event_idx(data);
    struct qt_vscsi *d = &e->dev;
    struct qt_msix *m = &d->vpci.msix;
    struct qt_vring *vq = qt_vscsi_rq(d, 2);
    struct qt_scsi_req r[8];
    struct qt_scsi_resp resp;
    uint8_t cdb[10];

    qt_vring_set_used_event(vq, vq->last_used + 7);
    drain_vectors(d);
    for (unsigned i = 0; i < 8; i++) {
        qt_cdb_rw10(cdb, false, 16 * i, 16);
        qt_vscsi_submit(d, vq, 0, cdb, 10, NULL, 16 * BLOCK, 0, &r[i], i < 7);
    }
    for (unsigned i = 0; i < 8; i++) {
        qt_vscsi_complete(d, vq, &r[i], &resp, NULL, 0);
        g_assert_cmpuint(resp.response, ==, VIRTIO_SCSI_S_OK);
        g_assert_cmpuint(resp.status, ==, 0);
    }
    g_assert(qt_msix_wait(m, vq->vector, QT_TIMEOUT_US));
    /* One message for the batch; the other queues stayed silent. */
    for (unsigned v = 0; v < m->nvec; v++) {
        g_assert_false(qt_msix_fired(m, v));
    }
    env_free(e);
}

static void test_no_interrupt_flag_without_event_idx(gconstpointer data)
{
    struct env *e = env_new(data, NULL);
    struct qt_vscsi *d = &e->dev;
    struct qt_msix *m = &d->vpci.msix;
    struct qt_vring *vq;

    start_driver(e, NULL);
    vq = qt_vscsi_rq(d, 0);
    g_assert_false(d->features & (1ull << VIRTIO_RING_F_EVENT_IDX));
    drain_vectors(d);
    qt_vring_set_no_interrupt(vq, true);
    for (unsigned i = 0; i < 4; i++) {
        read_one(d, vq, i);
        g_assert_false(qt_msix_fired(m, vq->vector));
    }
    qt_vring_set_no_interrupt(vq, false);
    read_one(d, vq, 9);
    g_assert(qt_msix_wait(m, vq->vector, QT_TIMEOUT_US));
    env_free(e);
}

/* ---- scenario 8: a misbehaving driver ---- */

enum outcome { OUT_COMPLETED, OUT_NEEDS_RESET, OUT_VQ_ERROR };

/*
 * The device must react to a bad request visibly: complete it with a
 * non-success response, or set DEVICE_NEEDS_RESET.  A vhost-user back-end
 * cannot set NEEDS_RESET (QEMU owns the status byte); its equivalent is
 * signalling the vring error fd, which QEMU 8.2+ reports as a
 * VIRTQUEUE_ERROR event.  Silence fails.
 */
static enum outcome wait_bad_outcome(struct env *e, struct qt_vring *vq, int head,
                                     uint64_t resp_addr)
{
    struct qt_vscsi *d = &e->dev;
    /* Answering takes milliseconds; 5 s keeps a failing run short. */
    gint64 deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
    for (;;) {
        uint32_t id;
        if (qt_vring_pop(vq, &id, NULL)) {
            g_assert_cmpuint(id, ==, head);
            qt_vring_free_chain(vq, id);
            struct virtio_scsi_cmd_resp r;
            qts_memread(e->qts, resp_addr, &r, sizeof(r));
            g_assert_false(r.response == VIRTIO_SCSI_S_OK && r.status == 0);
            return OUT_COMPLETED;
        }
        if (qt_vpci_status(&d->vpci) & VIRTIO_CONFIG_S_NEEDS_RESET) {
            return OUT_NEEDS_RESET;
        }
        if (e->f->vhost) {
            char *match = g_strdup_printf("\"virtqueue\": %u", vq->index);
            char *ev = qmp_wait_event(e->qts, "VIRTQUEUE_ERROR", match, 1000);
            g_free(match);
            if (ev) {
                g_assert(strstr(ev, "\"device\": \"scsi0\""));
                g_free(ev);
                return OUT_VQ_ERROR;
            }
        }
        if (g_get_monotonic_time() > deadline) {
            g_error("queue %u: bad request neither completed nor NEEDS_RESET (QEMU %s)",
                    vq->index, qts_alive(e->qts) ? "alive" : "dead");
        }
    }
}

/* After the bad request: QEMU and the daemon live, and still serve I/O. */
static void check_survived(struct env *e, enum outcome out)
{
    struct qt_vscsi *d = &e->dev;
    g_assert(qmp_responsive(e->qts));
    if (out != OUT_NEEDS_RESET) {
        /* The device carried on: the other queues were never affected. */
        write_read_verify(d, qt_vscsi_rq(d, 3), 3000, 4, 200);
    }
    qt_vpci_reset(&d->vpci);
    reinit_and_verify(e, NULL, 210);
    if (e->f->vhost) {
        g_assert(target_alive(e));
        /* A second front-end on the same daemon socket is served normally. */
        char *dev = device_args(e, "scsi1", NULL, false);
        struct qts *q2 = qts_start("%s", dev);
        struct qt_vscsi d2;
        qt_vscsi_init(&d2, q2, NULL);
        qt_vscsi_clear_ua(&d2, qt_vscsi_rq(&d2, 0), 0);
        write_read_verify(&d2, qt_vscsi_rq(&d2, 1), 4000, 4, 220);
        qt_vscsi_cleanup(&d2);
        qts_quit(q2);
        g_free(dev);
        g_assert(target_alive(e));
    }
}

/* A READ whose request header lies far beyond guest RAM. */
static void test_bad_desc_outside_ram(gconstpointer data)
{
    struct env *e = env_new(data, NULL);
    struct qt_vscsi *d = &e->dev;
    struct qt_vring *vq;
    struct qt_scsi_req r;
    uint8_t cdb[10];

    start_driver(e, NULL);
    vq = qt_vscsi_rq(d, 0);
    qt_cdb_rw10(cdb, false, 0, 8);
    qt_vscsi_submit(d, vq, 0, cdb, 10, NULL, 8 * BLOCK, 0, &r, true);
    /* Chain: req, resp, data-in; retarget req at 64 GiB (RAM ends at 256 MiB). */
    qt_vring_write_desc(vq, r.head, 64ull << 30, sizeof(struct virtio_scsi_cmd_req),
                        VRING_DESC_F_NEXT, vq->next_free[r.head]);
    qt_vpci_notify(&d->vpci, vq);
    check_survived(e, wait_bad_outcome(e, vq, r.head, r.resp));
    env_free(e);
}

/* A chain whose last descriptor points back at an earlier one. */
static void test_bad_desc_chain_loop(gconstpointer data)
{
    struct env *e = env_new(data, NULL);
    struct qt_vscsi *d = &e->dev;
    struct qt_vring *vq;
    struct qt_scsi_req r;
    uint8_t cdb[10];

    start_driver(e, NULL);
    vq = qt_vscsi_rq(d, 0);
    qt_cdb_rw10(cdb, false, 0, 1);
    qt_vscsi_submit(d, vq, 0, cdb, 10, NULL, BLOCK, 0, &r, true);
    uint16_t resp_desc = vq->next_free[r.head];
    uint16_t data_desc = vq->next_free[resp_desc];
    /* Writable descriptors only, so the loop is the sole defect. */
    qt_vring_write_desc(vq, data_desc, r.data, BLOCK,
                        VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, resp_desc);
    qt_vpci_notify(&d->vpci, vq);
    check_survived(e, wait_bad_outcome(e, vq, r.head, r.resp));
    env_free(e);
}

/* A request whose header descriptor has length zero. */
static void test_bad_zero_length_request(gconstpointer data)
{
    struct env *e = env_new(data, NULL);
    struct qt_vscsi *d = &e->dev;
    struct qt_vring *vq;
    struct qt_scsi_req r;
    static const uint8_t tur[6];

    start_driver(e, NULL);
    vq = qt_vscsi_rq(d, 0);
    qt_vscsi_submit(d, vq, 0, tur, 6, NULL, 0, 0, &r, true);
    qt_vring_write_desc(vq, r.head, r.req, 0, VRING_DESC_F_NEXT, vq->next_free[r.head]);
    qt_vpci_notify(&d->vpci, vq);
    check_survived(e, wait_bad_outcome(e, vq, r.head, r.resp));
    env_free(e);
}

/* CDBs whose transfer length dwarfs the buffer and the medium. */
static void test_bad_absurd_transfer_length(gconstpointer data)
{
    struct env *e = env_new(data, NULL);
    struct qt_vscsi *d = &e->dev;
    struct qt_vring *vq;
    struct qt_scsi_req r;
    struct qt_scsi_resp resp;
    uint8_t buf[8 * BLOCK] = { 0 };
    /* READ(16), LBA 0, 0xffffffff blocks, into 4 KiB. */
    uint8_t rd16[SC_CDB_MAX];
    sc_cdb(scsi_cdb_read16(0, 0xffffffffu, 1, 0, 0, 0, 0, 0), rd16);
    uint8_t wr10[10];

    start_driver(e, NULL);
    vq = qt_vscsi_rq(d, 0);
    qt_cdb_rw10(wr10, true, 0, 0xffff);
    const uint8_t *cdbs[] = { rd16, wr10 };
    const unsigned lens[] = { 16, 10 };
    for (unsigned i = 0; i < 2; i++) {
        bool wr = i == 1;
        qt_vscsi_submit(d, vq, 0, cdbs[i], lens[i], wr ? buf : NULL, wr ? 0 : sizeof(buf),
                        wr ? sizeof(buf) : 0, &r, false);
        qt_vscsi_complete(d, vq, &r, &resp, NULL, 0);
        g_assert_cmphex(qt_vpci_status(&d->vpci) & VIRTIO_CONFIG_S_NEEDS_RESET, ==, 0);
        if (resp.response == VIRTIO_SCSI_S_OK) {
            /* SBC-3: a range past the medium is ILLEGAL REQUEST (LBA out of range / invalid field). */
            unsigned asc = sense_of(&resp).asc;

            check_sense(&resp, SCSI_SENSE_ILLEGAL_REQUEST, asc);
            g_assert(asc == SCSI_SENSE_ASCQ_LBA_OUT_OF_RANGE >> 8 ||
                     asc == SCSI_SENSE_ASCQ_INVALID_FIELD_IN_CDB >> 8);
        } else {
            g_assert_cmpuint(resp.response, ==, VIRTIO_SCSI_S_OVERRUN);
        }
    }
    check_survived(e, OUT_COMPLETED);
    env_free(e);
}

/* ---- scenario 9: packed virtqueues ---- */

/*
 * An idle device asks for kicks in its event area: ENABLE, or with
 * EVENT_IDX DESC at the driver's next slot and lap.  While it drains or
 * polls it may say DISABLE, so this waits (bounded) for it to settle.
 */
static void wait_device_wants_kick(struct qt_vring *vq)
{
    uint16_t want = vq->event_idx ? VRING_PACKED_EVENT_FLAG_DESC : VRING_PACKED_EVENT_FLAG_ENABLE;
    uint16_t want_off = vq->avail_idx | (vq->avail_wrap ? 1u << VRING_PACKED_EVENT_F_WRAP_CTR : 0);
    gint64 deadline = g_get_monotonic_time() + QT_TIMEOUT_US;
    uint16_t flags, off_wrap;

    for (;;) {
        qt_vring_packed_device_event(vq, &flags, &off_wrap);
        if (flags == want && (want != VRING_PACKED_EVENT_FLAG_DESC || off_wrap == want_off)) {
            return;
        }
        if (g_get_monotonic_time() > deadline) {
            g_error("queue %u idle: device event area flags %u off_wrap 0x%04x, want %u 0x%04x",
                    vq->index, flags, off_wrap, want, want_off);
        }
    }
}

/* Laps begun and chains that straddled the ring's end, from the driver's next slot. */
struct ring_walk {
    uint16_t at;
    unsigned laps, straddles;
};

static void ring_walk_step(struct ring_walk *w, const struct qt_vring *vq)
{
    if (vq->avail_idx < w->at) {
        w->laps++;
        w->straddles += vq->avail_idx > 0;
    }
    w->at = vq->avail_idx;
}

/*
 * Requests on a 16-slot packed ring: INQUIRY and READ CAPACITY (and a
 * TMF on the control queue, packed as well), then
 * WRITE (3 slots), READ (3) and now and then TEST UNIT READY (2) around the
 * ring many times, so chains straddle its end; then several in flight at
 * once, completing in whatever order the device chooses; with a hold:
 * LUN (vhost-user), a read held while the others pass it, for laps.
 */
static void test_packed_io_wraps(gconstpointer data)
{
    struct env_opts eo = { .packed = true, .hold_lun = true };

    if (hold_lun_missing(data, &eo)) {
        return;
    }
    struct env *e = env_new(data, &eo);
    struct qt_vscsi *d = &e->dev;
    struct qt_vscsi_opts o = { .queue_size = 16 };
    static const uint8_t tur[6];
    struct ring_walk w = { 0 };
    struct qt_scsi_resp resp;
    struct qt_vring *vq;

    start_packed(e, &o);
    vq = qt_vscsi_rq(d, 0);
    g_assert_cmpuint(vq->size, ==, 16);
    qt_vscsi_clear_ua(d, vq, 0);
    check_inquiry_and_capacity(e, vq);
    /* The control queue is packed too. */
    g_assert_cmpuint(qt_vscsi_tmf(d, VIRTIO_SCSI_T_TMF_ABORT_TASK, 0, 0xdead), ==,
                     TMF_FUNCTION_COMPLETE);
    w.at = vq->avail_idx;

    for (unsigned i = 0; i < 40; i++) {
        write_blocks(d, vq, 0, 8 * i, 1 + i % 4, 500 + i);
        ring_walk_step(&w, vq);
        read_verify(d, vq, 0, 8 * i, 1 + i % 4, 500 + i);
        ring_walk_step(&w, vq);
        if (i % 3 == 0) {
            g_assert_cmpuint(qt_vscsi_cmd(d, vq, 0, tur, 6, NULL, 0, NULL, 0, &resp), ==, 0);
            ring_walk_step(&w, vq);
        }
    }
    /* What the loop is for (the arithmetic, not the device, decides these). */
    g_assert_cmpuint(w.laps, >=, 10);
    g_assert_cmpuint(w.straddles, >=, 5);
    wait_device_wants_kick(vq);

    /* Five requests (14 slots) in flight, one kick; the completion order is the device's. */
    enum { N = 5 };
    struct qt_scsi_req r[N];
    uint8_t cdb[10], buf[4 * BLOCK], want[4 * BLOCK];
    for (unsigned i = 0; i < N; i++) {
        bool nokick = i + 1 < N;
        switch (i % 3) {
        case 0:     /* WRITE of new data */
            qt_fill_pattern(buf, sizeof(buf), 700 + i);
            qt_cdb_rw10(cdb, true, 1000 + 8 * i, 4);
            qt_vscsi_submit(d, vq, 0, cdb, 10, buf, 0, sizeof(buf), &r[i], nokick);
            break;
        case 1:     /* READ of what the loop wrote (lba 8 * i, 1 + i % 4 blocks) */
            qt_cdb_rw10(cdb, false, 8 * i, 1 + i % 4);
            qt_vscsi_submit(d, vq, 0, cdb, 10, NULL, (1 + i % 4) * BLOCK, 0, &r[i], nokick);
            break;
        default:
            qt_vscsi_submit(d, vq, 0, tur, 6, NULL, 0, 0, &r[i], nokick);
        }
    }
    g_assert_cmpuint(vq->num_free, ==, 16 - 14);
    for (unsigned i = N; i-- > 0;) {
        qt_vscsi_complete(d, vq, &r[i], &resp, i % 3 == 1 ? buf : NULL, (1 + i % 4) * BLOCK);
        g_assert_cmpuint(resp.response, ==, VIRTIO_SCSI_S_OK);
        g_assert_cmpuint(resp.status, ==, 0);
        if (i % 3 == 1) {
            qt_fill_pattern(want, (1 + i % 4) * BLOCK, 500 + i);
            g_assert(memcmp(buf, want, (1 + i % 4) * BLOCK) == 0);
        }
    }
    g_assert_cmpuint(vq->num_free, ==, 16);
    for (unsigned i = 0; i < N; i += 3) {
        read_verify(d, vq, 0, 1000 + 8 * i, 4, 700 + i);
    }

    if (e->hold) {
        /*
         * A read held by LUN 1 stays in flight while requests behind it
         * complete and the ring goes round: its 3 slots are reused by
         * used descriptors of the others, and its id stays taken.
         */
        struct qt_scsi_req held;
        qt_vscsi_clear_ua(d, vq, 1);
        write_blocks(d, vq, 1, 4, 2, 800);
        g_assert(g_file_set_contents(e->hold, "", 0, NULL));
        qt_cdb_rw10(cdb, false, 4, 2);
        qt_vscsi_submit(d, vq, 1, cdb, 10, NULL, 2 * BLOCK, 0, &held, false);
        unsigned laps = w.laps;
        w.at = vq->avail_idx;
        for (unsigned i = 0; i < 12; i++) {
            write_read_verify(d, vq, 2000 + 8 * i, 1 + i % 2, 900 + i);
            ring_walk_step(&w, vq);
        }
        g_assert_cmpuint(w.laps - laps, >=, 2);
        /* Everything the device made used has been read: the held read is not among it. */
        uint32_t id;
        while (qt_vring_pop(vq, &id, NULL)) {
            g_assert_cmpuint(id, !=, held.head);
            qt_vring_free_chain(vq, id);
        }
        g_assert_false(vq->done[held.head]);
        g_assert_cmpuint(unlink(e->hold), ==, 0);
        qt_vscsi_complete(d, vq, &held, &resp, buf, 2 * BLOCK);
        g_assert_cmpuint(resp.response, ==, VIRTIO_SCSI_S_OK);
        g_assert_cmpuint(resp.status, ==, 0);
        qt_fill_pattern(want, 2 * BLOCK, 800);
        g_assert(memcmp(buf, want, 2 * BLOCK) == 0);
        write_read_verify(d, vq, 3000, 2, 990);
    }
    g_test_message("queue %u: %u laps, %u chains across the end, %u kicks the device did "
                   "not want", vq->index, w.laps, w.straddles, vq->kicks_skipped);
    env_free(e);
}

/*
 * A READ whose completion must not interrupt.  QEMU's own device forgets
 * what it signalled when its used index wraps (virtqueue_packed_flush
 * clears signalled_used_valid) and then interrupts whatever the event
 * area says but DISABLE: a spurious interrupt, which the spec allows;
 * that one completion is let pass for the builtin flavour only.
 */
static void read_one_silent(struct env *e, struct qt_vring *vq, uint32_t lba)
{
    uint16_t before = vq->last_used;

    read_one(&e->dev, vq, lba);
    bool fired = qt_msix_fired(&e->dev.vpci.msix, vq->vector);
    if (e->f->vhost || vq->last_used > before) {
        g_assert_false(fired);
    }
}

/*
 * Interrupts as the driver event area asks: none with DISABLE, one per
 * completion with ENABLE, and with EVENT_IDX and DESC, one when the used
 * index passes the chosen slot, in this lap or the next.  Counted one
 * request at a time, as scenario 7 counts them.
 */
static void test_packed_event_area_interrupts(gconstpointer data)
{
    struct env_opts eo = { .packed = true };
    struct env *e = env_new(data, &eo);
    struct qt_vscsi *d = &e->dev;
    struct qt_vscsi_opts o = { .event_idx = true, .queue_size = 16 };
    struct qt_msix *m = &d->vpci.msix;
    struct qt_vring *vq;

    start_packed(e, &o);
    qt_vscsi_clear_ua(d, qt_vscsi_rq(d, 0), 0);
    vq = qt_vscsi_rq(d, 1);
    /* A device may always interrupt for its first completion after a reset. */
    read_one(d, vq, 0);
    g_assert(qt_msix_wait(m, vq->vector, QT_TIMEOUT_US));
    wait_device_wants_kick(vq);

    qt_vring_packed_set_event(vq, VRING_PACKED_EVENT_FLAG_DISABLE);
    drain_vectors(d);
    for (unsigned i = 0; i < 4; i++) {
        read_one_silent(e, vq, i);
    }
    qt_vring_packed_set_event(vq, VRING_PACKED_EVENT_FLAG_ENABLE);
    for (unsigned i = 0; i < 4; i++) {
        read_one(d, vq, i);
        g_assert(qt_msix_wait(m, vq->vector, QT_TIMEOUT_US));
    }

    /*
     * READs take 3 slots: the chosen slot is one of the (k+1)th next
     * chain's, so k completions pass silently and the next interrupts.
     */
    unsigned next_lap = 0;
    for (unsigned round = 0; round < 9; round++) {
        unsigned k = 1 + round % 4, ahead = 3 * k + round % 3;
        next_lap += vq->last_used + ahead >= vq->size;
        qt_vring_packed_event_desc(vq, ahead);
        drain_vectors(d);
        for (unsigned i = 0; i < k; i++) {
            read_one_silent(e, vq, i);
        }
        read_one(d, vq, k);
        g_assert(qt_msix_wait(m, vq->vector, QT_TIMEOUT_US));
    }
    g_assert_cmpuint(next_lap, >=, 3);
    /* DESC at the next slot: every completion interrupts. */
    for (unsigned i = 0; i < 4; i++) {
        qt_vring_packed_event_desc(vq, 0);
        read_one(d, vq, i);
        g_assert(qt_msix_wait(m, vq->vector, QT_TIMEOUT_US));
    }
    /*
     * DESC at the slot of the last completion, already used: passed in its
     * lap, so no interrupt while the used index goes on over the ring's
     * end and past that slot in the next lap (18 slots).
     */
    qt_vring_packed_event_desc(vq, -3);
    for (unsigned i = 0; i < 6; i++) {
        read_one_silent(e, vq, i);
    }
    qt_vring_packed_event_desc(vq, 0);
    read_one(d, vq, 0);
    g_assert(qt_msix_wait(m, vq->vector, QT_TIMEOUT_US));
    /* Many laps on: the device still asks for its kick at our next slot and lap. */
    wait_device_wants_kick(vq);
    env_free(e);
}

/* Virtio reset with reads in flight on every queue, the rings a lap on (wrap counters 0). */
static void test_packed_reset_in_flight(gconstpointer data)
{
    struct env_opts eo = { .packed = true };
    struct env *e = env_new(data, &eo);
    struct qt_vscsi *d = &e->dev;
    struct qt_vscsi_opts o = { .queue_size = 16 };
    struct qt_scsi_req r[16];

    start_packed(e, &o);
    qt_vscsi_clear_ua(d, qt_vscsi_rq(d, 0), 0);
    for (unsigned q = 0; q < d->nq; q++) {
        for (unsigned i = 0; i < 3; i++) {
            write_read_verify(d, qt_vscsi_rq(d, q), 64 * q + 8 * i, 2, 100 * q + i);
        }
        g_assert_false(qt_vscsi_rq(d, q)->avail_wrap);
    }
    submit_reads(d, r, 16, 64);
    qt_vpci_reset(&d->vpci);
    g_assert(qmp_responsive(e->qts));

    /* Set up again, packed: both sides start over in the first lap. */
    reinit_and_verify(e, &o, 240);
    g_assert(d->features & (1ull << VIRTIO_F_RING_PACKED));
    for (unsigned q = 0; q < d->nq; q++) {
        struct qt_vring *vq = qt_vscsi_rq(d, q);

        g_assert(vq->packed);
        for (unsigned i = 0; i < 6; i++) {
            write_read_verify(d, vq, 1024 + 64 * q + 8 * i, 2, 300 + 10 * q + i);
        }
        for (unsigned i = 0; i < 3; i++) {
            read_verify(d, vq, 0, 64 * q + 8 * i, 2, 100 * q + i);
        }
    }
    env_free(e);
}

/* ---- scenario: interrupts the vCPU takes, under KVM ---- */

/* Bounded wait for the vCPU to have taken at least `want` interrupts on vec. */
static void wait_taken(struct qt_msix *m, unsigned vec, uint32_t want)
{
    gint64 deadline = g_get_monotonic_time() + QT_TIMEOUT_US;
    uint32_t n;
    while ((n = qt_msix_taken(m, vec)) < want) {
        if (g_get_monotonic_time() > deadline) {
            g_error("vector %u: the vCPU took %u interrupts, expected %u", vec, n, want);
        }
    }
}

/* One READ on vq whose completion must reach the vCPU as one more interrupt. */
static void read_one_interrupting(struct env *e, struct qt_vring *vq, uint32_t lba)
{
    struct qt_msix *m = &e->dev.vpci.msix;
    uint32_t n = qt_msix_taken(m, vq->vector);
    read_one(&e->dev, vq, lba);
    wait_taken(m, vq->vector, n + 1);
}

#define KVM_READS_PER_QUEUE 8

static void test_irq_completions_reach_the_vcpu(gconstpointer data)
{
    struct env *e = env_new(data, NULL);
    if (!e) {
        return;
    }
    struct qt_vscsi *d = &e->dev;
    struct qt_msix *m = &d->vpci.msix;
    uint32_t before[QT_MSIX_MAX_CPU_VECTORS];

    start_driver(e, NULL);
    for (unsigned v = 0; v < m->nvec; v++) {
        before[v] = qt_msix_taken(m, v);
    }
    for (unsigned q = 0; q < d->nq; q++) {
        struct qt_vring *vq = qt_vscsi_rq(d, q);
        for (unsigned i = 0; i < KVM_READS_PER_QUEUE; i++) {
            read_one_interrupting(e, vq, 8 * q + i);
        }
        /* Exactly one interrupt per completion, on this queue's vector. */
        g_assert_cmpuint(qt_msix_taken(m, vq->vector), ==,
                         before[vq->vector] + KVM_READS_PER_QUEUE);
    }
    /* Config, control and event vectors took none; the vCPU never faulted. */
    for (unsigned v = 0; v < 3; v++) {
        g_assert_cmpuint(qt_msix_taken(m, v), ==, before[v]);
    }
    g_assert_cmpuint(qts_exceptions(e->qts), ==, 0);
    env_free(e);
}

/*
 * Completions through irqfd: the back-end's signal goes from its thread
 * to KVM to the vCPU, and none of QEMU's threads runs for it.  Each read
 * is held -- by the hold: LUN, released with an unlink; for QEMU's own
 * device, by a null-co drive's latency -- until QEMU's main thread sleeps
 * and its threads' context switches are counted; the test then waits on
 * the vCPU's counter read through QEMU's memfd, so nothing it does in that
 * window is addressed to QEMU.  QEMU's own device is the comparison: QEMU
 * completes and injects each one itself, so its threads wake for every
 * completion, and this is what the count would show for ours if its
 * interrupts went through QEMU.
 */
#define IRQFD_COMPLETIONS 16
#define BUILTIN_DELAY_MS 100

/* Counts QEMU's wake-ups while one held read completes; false if it completed too early. */
static bool held_read_wakeups(struct env *e, struct qt_vring *vq, const volatile uint32_t *taken,
                              unsigned lba, uint64_t *woken)
{
    struct qt_vscsi *d = &e->dev;
    struct qt_scsi_resp resp;
    struct qt_scsi_req r;
    uint8_t cdb[10], buf[BLOCK];
    uint32_t n = *taken;
    bool held = e->hold != NULL;

    if (held) {
        g_assert(g_file_set_contents(e->hold, "", 0, NULL));
    }
    qt_cdb_rw10(cdb, false, lba, 1);
    qt_vscsi_submit(d, vq, held ? 1 : 0, cdb, 10, NULL, BLOCK, 0, &r, false);
    qts_wait_asleep(e->qts);
    uint64_t before = qts_wakeups(e->qts);
    /* Only the drive's latency holds QEMU's device: a completion already taken proves nothing. */
    bool in_window = *taken == n;
    if (held) {
        g_assert_cmpuint(unlink(e->hold), ==, 0);
    }
    gint64 deadline = g_get_monotonic_time() + QT_TIMEOUT_US;
    while (*taken == n) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_thread_yield();
    }
    *woken = qts_wakeups(e->qts) - before;
    g_assert_cmpuint(*taken, ==, n + 1);
    qt_vscsi_complete(d, vq, &r, &resp, buf, BLOCK);
    g_assert_cmpuint(resp.response, ==, VIRTIO_SCSI_S_OK);
    g_assert_cmpuint(resp.status, ==, 0);
    return in_window;
}

/* env_new, or NULL with the case skipped where the hold: LUN or KVM is missing. */
static struct env *env_new_held(gconstpointer data, const struct env_opts *eo)
{
    return hold_lun_missing(data, eo) ? NULL : env_new(data, eo);
}

static void test_irq_completions_bypass_qemu(gconstpointer data)
{
    const struct flavour *f = data;
    struct env_opts eo = { .hold_lun = f->vhost, .delay_ms = BUILTIN_DELAY_MS };
    struct env *e = env_new_held(data, &eo);
    if (!e) {
        return;
    }
    struct qt_vscsi *d = &e->dev;
    struct qt_msix *m = &d->vpci.msix;
    uint64_t woken = 0;
    unsigned counted = 0, early = 0;

    start_driver(e, NULL);
    if (e->hold) {
        qt_vscsi_clear_ua(d, qt_vscsi_rq(d, 0), 1);
    }
    const volatile uint8_t *ram = qt_ram_map(e->qts);
    for (unsigned i = 0; counted < IRQFD_COMPLETIONS; i++) {
        struct qt_vring *vq = qt_vscsi_rq(d, i % d->nq);
        const volatile uint32_t *taken = qt_ram_irq_counter(ram, qt_msix_data(m, vq->vector));
        uint64_t w;
        if (held_read_wakeups(e, vq, taken, i, &w)) {
            woken += w;
            counted++;
        } else {
            g_assert_cmpuint(++early, <, IRQFD_COMPLETIONS);
        }
    }
    qt_ram_unmap(ram);
    g_test_message("QEMU's threads woke %" PRIu64 " times for %u completions", woken, counted);
    if (f->vhost) {
        /* Room for stray timers (2 seen in 1 of 6 loaded runs); QEMU injecting wakes for each. */
        g_assert_cmpuint(woken, <, IRQFD_COMPLETIONS / 2);
    } else {
        g_assert_cmpuint(woken, >=, IRQFD_COMPLETIONS);
    }
    env_free(e);
}

/*
 * The driver moves a vector to another CPU vector the way Linux does
 * (mask, rewrite the message, unmask) while a read is in flight: the read
 * completing under the mask is delivered, on unmask, to the new vector;
 * later completions go there too, through irqfd (QEMU's threads asleep),
 * so QEMU moved the KVM route rather than taking the vector over.
 */
static void test_msix_rewritten_vector_moves_the_route(gconstpointer data)
{
    struct env_opts eo = { .hold_lun = true };
    struct env *e = env_new_held(data, &eo);
    if (!e) {
        return;
    }
    struct qt_vscsi *d = &e->dev;
    struct qt_msix *m = &d->vpci.msix;
    struct qt_scsi_resp resp;
    struct qt_scsi_req r;
    uint8_t cdb[10], buf[BLOCK];

    start_driver(e, NULL);
    struct qt_vring *vq = qt_vscsi_rq(d, 0);
    qt_vscsi_clear_ua(d, vq, 1);
    const volatile uint8_t *ram = qt_ram_map(e->qts);
    for (unsigned round = 0; round < 3; round++) {
        uint8_t old = qt_msix_data(m, vq->vector);
        uint8_t moved = (round % 2 ? QT_MSIX_CPU_VECTOR_BASE : 0x80) + vq->vector;
        uint32_t old_taken = qts_irq_count(e->qts, old);

        g_assert(g_file_set_contents(e->hold, "", 0, NULL));
        qt_cdb_rw10(cdb, false, round, 1);
        qt_vscsi_submit(d, vq, 1, cdb, 10, NULL, BLOCK, 0, &r, false);
        qt_msix_mask(m, vq->vector, true);
        qt_msix_retarget(m, vq->vector, moved);
        g_assert_cmpuint(unlink(e->hold), ==, 0);
        qt_vscsi_complete(d, vq, &r, &resp, buf, BLOCK);
        pending_then_delivered_on_unmask(m, vq->vector);

        uint64_t woken = 0;
        for (unsigned i = 0; i < IRQFD_COMPLETIONS / 2; i++) {
            uint64_t w;
            g_assert(held_read_wakeups(e, vq, qt_ram_irq_counter(ram, moved), 100 + i, &w));
            woken += w;
        }
        g_assert_cmpuint(woken, <, IRQFD_COMPLETIONS / 4);
        /* Nothing reached the vCPU on the old vector since the move. */
        g_assert_cmpuint(qts_irq_count(e->qts, old), ==, old_taken);
    }
    qt_ram_unmap(ram);
    g_assert_cmpuint(qts_exceptions(e->qts), ==, 0);
    env_free(e);
}

/*
 * Driver unbind and bind again, as Linux's virtio-pci does them, with
 * requests in flight at each unbind: reset, every vector back to
 * NO_VECTOR, MSI-X off (vectors released); then MSI-X on, vectors,
 * DRIVER_OK.  QEMU tears down and rebuilds vhost's vector notifiers and
 * KVM routes each time: it must not abort, and afterwards every queue's
 * I/O is right and its completions reach the vCPU.
 */
#define REBIND_CYCLES 4

static void test_msix_unbind_rebind_cycles(gconstpointer data)
{
    struct env *e = env_new(data, NULL);
    if (!e) {
        return;
    }
    struct qt_vscsi *d = &e->dev;
    struct qt_scsi_req r[16];

    start_driver(e, NULL);
    for (unsigned c = 0; c < REBIND_CYCLES; c++) {
        submit_reads(d, r, 16, 8);
        qt_vpci_reset(&d->vpci);
        unset_all_vectors(d);
        qt_msix_enable(&d->vpci.msix, false);
        g_assert(qts_alive(e->qts));
        g_assert(qmp_responsive(e->qts));

        qt_vscsi_reinit(d, NULL);
        wait_startup_interrupts(e, NULL);
        qt_vscsi_clear_ua(d, qt_vscsi_rq(d, 0), 0);
        for (unsigned q = 0; q < d->nq; q++) {
            write_read_verify(d, qt_vscsi_rq(d, q), 256 * c + 16 * q, 4, 90 + c * NQ + q);
            read_one_interrupting(e, qt_vscsi_rq(d, q), 256 * c + 16 * q);
        }
    }
    g_assert_cmpuint(qts_exceptions(e->qts), ==, 0);
    env_free(e);
}

/* After a reset: QEMU is alive, and a fresh driver gets I/O and interrupts. */
static void survives_reset(struct env *e, uint32_t seed)
{
    struct qt_vscsi *d = &e->dev;
    qt_vpci_reset(&d->vpci);
    g_assert(qts_alive(e->qts));
    g_assert(qmp_responsive(e->qts));
    reinit_and_verify(e, NULL, seed);
    read_one_interrupting(e, qt_vscsi_rq(d, 0), seed);
}

/*
 * The MSI-X transitions a driver makes, each followed by a device reset,
 * with vectors set and with vectors never set (where vhost's vector
 * notifiers were never installed): QEMU must not abort, I/O must be right
 * and interrupts must reach the vCPU again afterwards.
 */
static void test_msix_transitions_then_reset(gconstpointer data)
{
    struct env *e = env_new(data, NULL);
    if (!e) {
        return;
    }
    struct qt_vscsi *d = &e->dev;
    struct qt_msix *m = &d->vpci.msix;

    /* MSI-X enabled, vectors never set, DRIVER_OK, I/O, reset. */
    struct qt_vscsi_opts unset = { .no_driver_ok = true };
    vscsi_init(e, &unset);
    unset_all_vectors(d);
    qt_vpci_set_status(&d->vpci, qt_vpci_status(&d->vpci) | VIRTIO_CONFIG_S_DRIVER_OK);
    qt_vscsi_clear_ua(d, qt_vscsi_rq(d, 0), 0);
    write_read_verify(d, qt_vscsi_rq(d, 0), 0, 4, 70);
    survives_reset(e, 71);

    /* Vectors set, MSI-X disabled while running (INTx), reset. */
    qt_msix_enable(m, false);
    write_read_verify(d, qt_vscsi_rq(d, 1), 16, 4, 72);
    survives_reset(e, 73);

    /* MSI-X off through DRIVER_OK, enabled afterwards, reset. */
    struct qt_vscsi_opts no_msix = { .no_msix = true };
    qt_vscsi_reinit(d, &no_msix);
    qt_vscsi_clear_ua(d, qt_vscsi_rq(d, 0), 0);
    qt_msix_enable(m, true);
    write_read_verify(d, qt_vscsi_rq(d, 2), 32, 4, 74);
    survives_reset(e, 75);

    /* The function mask held over a completion, then lifted: delivered then. */
    struct qt_vring *vq = qt_vscsi_rq(d, 3);
    uint32_t n = qt_msix_taken(m, vq->vector);
    qt_msix_mask_all(m, true);
    read_one(d, vq, 48);
    gint64 deadline = g_get_monotonic_time() + QT_TIMEOUT_US;
    while (!qt_msix_pending(m, vq->vector)) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
    }
    g_assert_cmpuint(qt_msix_taken(m, vq->vector), ==, n);
    qt_msix_mask_all(m, false);
    wait_taken(m, vq->vector, n + 1);
    survives_reset(e, 76);

    g_assert_cmpuint(qts_exceptions(e->qts), ==, 0);
    env_free(e);
}

static void add(const char *name, const struct flavour *f, GTestDataFunc fn)
{
    char *path = g_strdup_printf("/qtest/%s/%s", f->name, name);
    g_test_add_data_func(path, f, fn);
    g_free(path);
}

static void add_both(const char *name, GTestDataFunc fn)
{
    add(name, &builtin, fn);
    if (g_getenv("VHOST_SCSI_TARGET")) {
        add(name, &vhost_user, fn);
    }
}

/* Scenarios 1-4, which need neither back-end control nor QEMU's own disk. */
static void add_all(const char *name, GTestDataFunc fn)
{
    add_both(name, fn);
    if (g_getenv("VHOST_SCSI_WWPN")) {
        add(name, &kernel_vhost, fn);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    add_all("bring-up", test_bring_up);
    add_all("bring-up-with-rings-smaller-than-maximum", test_bring_up_small_rings);
    add_both("tmf/lun-reset-then-unit-attention", test_tmf_lun_reset_then_unit_attention);
    add_both("events/lun-hotplug-reports-rescan", test_event_lun_hotplug_rescan);
    add_both("events/lun-unplug-reports-removed", test_event_lun_unplug_removed);
    add_both("events/lun-resize-reports-param-change", test_event_lun_resize_param_change);
    add_both("events/missed-events-flagged", test_event_missed_flagged);
    add_all("msix/per-queue-vectors", test_msix_per_queue_vectors);
    add_all("msix/masked-vector-sets-pba-then-fires-on-unmask", test_msix_masked_vector_pends);
    add_all("msix/vectors-unassigned-before-driver-ok", test_vectors_unassigned_before_driver_ok);
    add_all("msix/disabled-uses-intx-isr", test_msix_disabled_intx_isr);
    add_all("msix/device-reset-with-vectors-set", test_reset_with_vectors_set);
    add_all("reset/device-reset-with-requests-in-flight", test_device_reset_in_flight);
    add_all("reset/system-reset-with-requests-in-flight", test_system_reset_in_flight);
    add_both("hotplug/unplug-with-requests-in-flight-and-replug",
             test_hot_unplug_in_flight_and_replug);
    add_both("event-idx/used-event-selects-the-interrupting-completion",
             test_event_idx_used_event_selects_interrupt);
    add_both("event-idx/batch-of-eight-raises-one-interrupt", test_event_idx_batch_one_interrupt);
    add_both("event-idx/no-interrupt-flag-without-event-idx",
             test_no_interrupt_flag_without_event_idx);
    add_both("bad-driver/descriptor-outside-guest-ram", test_bad_desc_outside_ram);
    add_both("bad-driver/descriptor-chain-loop", test_bad_desc_chain_loop);
    add_both("bad-driver/zero-length-request", test_bad_zero_length_request);
    add_both("bad-driver/absurd-transfer-length", test_bad_absurd_transfer_length);
    add_both("packed/requests-wrap-the-ring-in-any-order", test_packed_io_wraps);
    add_both("packed/driver-event-area-selects-interrupts", test_packed_event_area_interrupts);
    add_both("packed/device-reset-with-requests-in-flight", test_packed_reset_in_flight);
    if (g_getenv("VHOST_SCSI_TARGET")) {
        /* Under KVM: completions through irqfd, observed as the vCPU takes them. */
        add("bring-up", &vhost_user_kvm, test_bring_up);
        add("irq/completions-reach-the-vcpu", &vhost_user_kvm,
            test_irq_completions_reach_the_vcpu);
        add("irq/completions-bypass-qemu-threads", &vhost_user_kvm,
            test_irq_completions_bypass_qemu);
        add("irq/completions-bypass-qemu-threads", &builtin_kvm,
            test_irq_completions_bypass_qemu);
        add("irq/completions-reach-the-vcpu", &builtin_kvm, test_irq_completions_reach_the_vcpu);
        add("msix/per-queue-vectors", &vhost_user_kvm, test_msix_per_queue_vectors);
        add("msix/rewritten-vector-moves-the-route", &vhost_user_kvm,
            test_msix_rewritten_vector_moves_the_route);
        add("msix/masked-vector-sets-pba-then-fires-on-unmask", &vhost_user_kvm,
            test_msix_masked_vector_pends);
        add("msix/vectors-unassigned-before-driver-ok", &vhost_user_kvm,
            test_vectors_unassigned_before_driver_ok);
        add("msix/device-reset-with-vectors-set", &vhost_user_kvm, test_reset_with_vectors_set);
        add("msix/unbind-rebind-cycles-with-requests-in-flight", &vhost_user_kvm,
            test_msix_unbind_rebind_cycles);
        add("msix/transitions-then-reset-with-vectors-set-and-never-set", &vhost_user_kvm,
            test_msix_transitions_then_reset);
        add("reset/device-reset-with-requests-in-flight", &vhost_user_kvm,
            test_device_reset_in_flight);
        add("backend/killed-and-restarted-with-requests-in-flight", &vhost_user,
            test_backend_killed_and_restarted);
        add("backend/killed-and-restarted-with-requests-in-flight-packed", &vhost_user,
            test_backend_killed_and_restarted_packed);
    }
    return g_test_run();
}
