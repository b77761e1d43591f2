/*
 * Per-VM controllers (controller-add, -remove, -list; docs/control.md),
 * against the real daemon with real front-end connections:
 *  - a controller added over the control socket listens on a socket of its
 *    own (mode 0600) with its own queue count; a front-end connected to it
 *    sees only its LUNs (REPORT LUNS, INQUIRY, READ CAPACITY), and the
 *    default controller's front-end only the default's; LUN 0 of each is
 *    its own disk;
 *  - a backend mapped in two controllers is one disk: what is written
 *    through one is read back through the other, a resize is seen through
 *    both, and it cannot be closed while either maps it;
 *  - controller-remove is refused for "default", for an unknown name, and
 *    while the controller has LUNs or connections (the connected front-end
 *    keeps being served); once both are gone it succeeds, the socket file
 *    is gone and the name can be used again;
 *  - controller-list and connection-list say which controller each
 *    connection is on, with the peer's pid from SO_PEERCRED (one front-end
 *    in a child process) and the controller's queue count;
 *  - controller-add with a name in use, a socket in use (another
 *    controller's, under another spelling too, or the control socket), a
 *    file that is not a socket, or params of the wrong type is a JSON-RPC
 *    error that adds nothing, and both controllers go on serving I/O, to
 *    the front-ends already connected and to new ones;
 *  - config-save, then a daemon started with --config on that file, brings
 *    both controllers back with their sockets (and socket group), queues,
 *    allowed peers and mappings, and the data on them.
 *  - controller-add refuses an initiator name that is empty, longer than
 *    223 characters or holds anything but A-Z a-z 0-9 . - : _; a config
 *    file gives the default controller its initiator, and a file without
 *    the optional members loads without a warning.
 *  - vhost-scsi-ctl target mirrors the methods: controller add/list/remove
 *    and lun commands with --controller act on that controller, a refusal
 *    exits 1 with the daemon's message, a usage error exits 2.
 * Nothing waits by sleeping: a change a connection causes is polled for
 * through controller-list, within PU_TIMEOUT_MS.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <json-glib/json-glib.h>

#include "control-client.h"
#include "control-server.h"
#include "proto-util.h"
#include "scsi-cmd.h"

/* A daemon with a control socket, and the socket of its second controller "vm2". */
struct two {
    struct pu_daemon d;
    char *ctl;
    char *sock2;
    int fd;             /* a control connection */
};

/* Starts the daemon: the default controller has LUN 0 (lun0) and 2 queues. */
static void start(struct two *t, const char *lun0)
{
    pu_daemon_init(&t->d);
    t->ctl = g_build_filename(t->d.dir, "control.sock", NULL);
    t->sock2 = g_build_filename(t->d.dir, "vm2.sock", NULL);
    {
        const char *args[] = { "--lun", lun0, "--control", t->ctl, "--queues", "2", NULL };

        pu_daemon_start(&t->d, args);
    }
    t->fd = ctl_client_connect(t->ctl);
    g_assert_cmpint(t->fd, >=, 0);
}

static void stop(struct two *t)
{
    close(t->fd);
    g_assert_cmpint(pu_daemon_stop(&t->d, false), ==, 0);
    pu_daemon_cleanup(&t->d);
    g_free(t->ctl);
    g_free(t->sock2);
}

static JsonNode *controller_params(const char *name, const char *sock, gint64 queues)
{
    return pu_jobj("name", pu_jstr(name), "socket", pu_jstr(sock), "queues", pu_jint(queues),
                   NULL);
}

/* Adds vm2 (1 queue) and checks what controller-add answers. */
static void add_vm2(struct two *t)
{
    JsonNode *r = pu_ctl_ok(t->fd, "controller-add", controller_params("vm2", t->sock2, 1));
    JsonObject *o = json_node_get_object(r);

    g_assert_cmpstr(json_object_get_string_member(o, "name"), ==, "vm2");
    g_assert_cmpstr(json_object_get_string_member(o, "socket"), ==, t->sock2);
    g_assert_cmpint(json_object_get_int_member(o, "queues"), ==, 1);
    g_assert_cmpint(json_object_get_int_member(o, "luns"), ==, 0);
    g_assert_cmpint(json_object_get_int_member(o, "connections"), ==, 0);
    json_node_unref(r);
}

static void ok_null(int fd, const char *method, JsonNode *params)
{
    JsonNode *r = pu_ctl_ok(fd, method, params);

    g_assert_true(JSON_NODE_HOLDS_NULL(r));
    json_node_unref(r);
}

static void lun_add(int fd, const char *ctrl, const char *arg)
{
    json_node_unref(pu_ctl_ok(fd, "lun-add",
                              pu_jobj("controller", pu_jstr(ctrl), "lun", pu_jstr(arg), NULL)));
}

static void lun_map(int fd, const char *ctrl, unsigned lun, const char *backend)
{
    json_node_unref(pu_ctl_ok(fd, "lun-map", pu_jobj("controller", pu_jstr(ctrl), "lun",
                                                     pu_jint(lun), "backend", pu_jstr(backend),
                                                     NULL)));
}

static void lun_unmap(int fd, const char *ctrl, unsigned lun)
{
    ok_null(fd, "lun-unmap", pu_jobj("controller", pu_jstr(ctrl), "lun", pu_jint(lun), NULL));
}

/* The element of array a whose member key is the string value; NULL if none. */
static JsonObject *find_by(JsonArray *a, const char *key, const char *value)
{
    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonObject *o = json_array_get_object_element(a, i);

        if (!g_strcmp0(json_object_get_string_member_with_default(o, key, NULL), value)) {
            return o;
        }
    }
    return NULL;
}

/* controller-list: the controller's "connections"; -1 if it is not listed. */
static gint64 connections_of(int fd, const char *name)
{
    JsonNode *r = pu_ctl_ok(fd, "controller-list", NULL);
    JsonObject *o = find_by(json_node_get_array(r), "name", name);
    gint64 n = o ? json_object_get_int_member(o, "connections") : -1;

    json_node_unref(r);
    return n;
}

/* Polls controller-list until the controller has n connections (a hang-up is asynchronous). */
static void wait_connections(int fd, const char *name, gint64 n)
{
    gint64 deadline = g_get_monotonic_time() + PU_TIMEOUT_MS * G_TIME_SPAN_MILLISECOND;
    gint64 got;

    while ((got = connections_of(fd, name)) != n) {
        if (g_get_monotonic_time() > deadline) {
            g_error("controller %s: %" G_GINT64_FORMAT " connections after %d ms, expected %"
                    G_GINT64_FORMAT, name, got, PU_TIMEOUT_MS, n);
        }
    }
}

/* controller-list as "name:queues:luns[:uidN...]" words, in order. */
static char *controller_words(int fd)
{
    JsonNode *r = pu_ctl_ok(fd, "controller-list", NULL);
    JsonArray *a = json_node_get_array(r);
    GString *s = g_string_new(NULL);

    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonObject *o = json_array_get_object_element(a, i);
        JsonArray *uids = json_object_get_array_member(o, "allow_uid");

        g_string_append_printf(s, "%s%s:%" G_GINT64_FORMAT ":%" G_GINT64_FORMAT, i ? " " : "",
                               json_object_get_string_member(o, "name"),
                               json_object_get_int_member(o, "queues"),
                               json_object_get_int_member(o, "luns"));
        for (guint j = 0; j < json_array_get_length(uids); j++) {
            g_string_append_printf(s, ":uid%" G_GINT64_FORMAT,
                                   json_array_get_int_element(uids, j));
        }
    }
    json_node_unref(r);
    return g_string_free(s, FALSE);
}

/* The initiator name controller-list gives controller name (static: the last answer's). */
static const char *initiator_of(int fd, const char *name)
{
    static char *last;
    JsonNode *r = pu_ctl_ok(fd, "controller-list", NULL);
    JsonArray *a = json_node_get_array(r);

    g_clear_pointer(&last, g_free);
    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonObject *o = json_array_get_object_element(a, i);

        if (!strcmp(json_object_get_string_member(o, "name"), name)) {
            last = g_strdup(json_object_get_string_member_with_default(o, "initiator", ""));
        }
    }
    json_node_unref(r);
    return last;
}

/* lun-list as "controller/T:L=backend" words. */
static char *lun_words(int fd, const char *only)
{
    JsonNode *r = pu_ctl_ok(fd, "lun-list",
                            only ? pu_jobj("controller", pu_jstr(only), NULL) : NULL);
    JsonArray *a = json_node_get_array(r);
    GString *s = g_string_new(NULL);

    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonObject *o = json_array_get_object_element(a, i);

        g_string_append_printf(s, "%s%s/%" G_GINT64_FORMAT ":%" G_GINT64_FORMAT "=%s",
                               i ? " " : "", json_object_get_string_member(o, "controller"),
                               json_object_get_int_member(o, "target"),
                               json_object_get_int_member(o, "lun"),
                               json_object_get_string_member(o, "backend"));
    }
    json_node_unref(r);
    return g_string_free(s, FALSE);
}

struct seen {
    unsigned lun;
    uint64_t bytes;
};

/*
 * fe sees exactly the LUNs want (ascending), each a disk of its size, and
 * the LUNs absent not at all.
 */
static void assert_sees(struct vfe *fe, const struct seen *want, unsigned n,
                        const unsigned *absent, unsigned nabsent)
{
    uint16_t ids[16];

    for (unsigned i = 0; i < n; i++) {
        pu_make_ready(fe, want[i].lun);
    }
    g_assert_cmpuint(pu_report_luns(fe, ids, G_N_ELEMENTS(ids)), ==, n);
    for (unsigned i = 0; i < n; i++) {
        uint64_t blocks;
        uint32_t bsize;

        g_assert_cmpuint(ids[i], ==, want[i].lun);
        g_assert_cmpint(pu_inquiry_qualifier(fe, want[i].lun), ==,
                        SCSI_INQUIRY_PERIPHERAL_QUALIFIER_CONNECTED);
        pu_read_capacity16(fe, want[i].lun, &blocks, &bsize);
        g_assert_cmpuint(blocks * bsize, ==, want[i].bytes);
    }
    for (unsigned i = 0; i < nabsent; i++) {
        struct vfe_req r = pu_tur(fe, 0, absent[i]);

        g_assert_cmpint(pu_inquiry_qualifier(fe, absent[i]), ==,
                        SCSI_INQUIRY_PERIPHERAL_QUALIFIER_NOT_SUPPORTED);
        /* As for a LUN removed (docs/control.md): BAD_TARGET; INQUIRY alone answers. */
        g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_BAD_TARGET);
    }
}

/* Writes (or, verify_only, checks) the pattern of seed on lun and reads it back. */
static void rw(struct vfe *fe, unsigned lun, uint64_t seed, bool verify_only)
{
    const struct pu_rw_spec s = { .lun = lun, .queues = 1, .n_io = 16, .io_bytes = 4096,
                                  .seed = seed, .verify_only = verify_only };

    pu_write_read_compare(fe, &s);
}

/* ---- a controller of its own ------------------------------------------ */

static const struct seen dflt_luns[] = { { 0, 8u << 20 }, { 2, 1u << 30 } };
static const struct seen vm2_luns[] = { { 0, 4u << 20 }, { 5, 64u << 20 } };
static const unsigned dflt_absent[] = { 5 };
static const unsigned vm2_absent[] = { 2 };

/* vm2 added with its LUNs 0 and 5; the default has 0 and 2. */
static void start_two(struct two *t)
{
    start(t, "0=ram:8M");
    lun_add(t->fd, "default", "2=null:1G");
    add_vm2(t);
    lun_add(t->fd, "vm2", "0=ram:4M");
    lun_add(t->fd, "vm2", "5=null:64M");
}

/* A front-end on each controller; each sees its controller's LUNs and no others. */
static void connect_two(struct two *t, struct vfe **fe1, struct vfe **fe2)
{
    *fe1 = pu_connect(&t->d, 1);
    *fe2 = pu_connect_at(t->sock2, 1);
    assert_sees(*fe2, vm2_luns, G_N_ELEMENTS(vm2_luns), vm2_absent, G_N_ELEMENTS(vm2_absent));
    assert_sees(*fe1, dflt_luns, G_N_ELEMENTS(dflt_luns), dflt_absent,
                G_N_ELEMENTS(dflt_absent));
}

static void test_own_socket_own_luns(void)
{
    struct two t;
    g_autofree char *all = NULL, *only = NULL;
    struct stat st;
    struct vfe *fe1, *fe2;

    start_two(&t);
    g_assert_cmpint(stat(t.sock2, &st), ==, 0);
    g_assert_true(S_ISSOCK(st.st_mode));
    g_assert_cmpuint(st.st_mode & 0777, ==, 0600);
    all = lun_words(t.fd, NULL);
    g_assert_cmpstr(all, ==, "default/0:0=lun0:0 default/0:2=lun0:2 vm2/0:0=vm2/lun0:0 "
                             "vm2/0:5=vm2/lun0:5");
    only = lun_words(t.fd, "vm2");
    g_assert_cmpstr(only, ==, "vm2/0:0=vm2/lun0:0 vm2/0:5=vm2/lun0:5");

    connect_two(&t, &fe1, &fe2);
    /* LUN 0 of each is a disk of its own: a write through vm2 leaves the default's as it was. */
    rw(fe1, 0, 1, false);
    rw(fe2, 0, 2, false);
    rw(fe1, 0, 1, true);
    vfe_close(fe1);
    vfe_close(fe2);
    stop(&t);
}

/* ---- one backend in two controllers ------------------------------------ */

static void assert_capacity_changed(struct vfe *fe, unsigned lun, uint64_t bytes)
{
    struct vfe_req r = pu_tur(fe, 0, lun);
    uint64_t blocks;
    uint32_t bsize;

    g_assert_cmpuint(r.resp.status, ==, 2);
    g_assert_cmphex(pu_sense_of(&r.resp).code, ==, SCSI_SENSE_ASCQ_CAPACITY_DATA_HAS_CHANGED);
    pu_read_capacity16(fe, lun, &blocks, &bsize);
    g_assert_cmpuint(blocks * bsize, ==, bytes);
}

static void test_shared_backend(void)
{
    struct two t;
    g_autofree char *img = NULL, *spec = NULL, *busy2 = NULL, *busy1 = NULL;
    struct vfe *fe1, *fe2;
    JsonNode *r;
    JsonArray *at;

    start_two(&t);
    img = g_build_filename(t.d.dir, "shared.img", NULL);
    g_assert_true(g_file_set_contents(img, "", 0, NULL));
    spec = g_strdup_printf("file:%s,size=8M", img);
    json_node_unref(pu_ctl_ok(t.fd, "backend-add",
                              pu_jobj("name", pu_jstr("shared"), "spec", pu_jstr(spec), NULL)));
    lun_map(t.fd, "default", 1, "shared");
    lun_map(t.fd, "vm2", 3, "shared");
    r = pu_ctl_ok(t.fd, "backend-list", NULL);
    at = json_object_get_array_member(find_by(json_node_get_array(r), "name", "shared"),
                                      "mapped_at");
    g_assert_cmpuint(json_array_get_length(at), ==, 2);
    g_assert_cmpstr(json_object_get_string_member(json_array_get_object_element(at, 0),
                                                  "controller"), ==, "default");
    g_assert_cmpint(json_object_get_int_member(json_array_get_object_element(at, 0), "lun"),
                    ==, 1);
    g_assert_cmpstr(json_object_get_string_member(json_array_get_object_element(at, 1),
                                                  "controller"), ==, "vm2");
    g_assert_cmpint(json_object_get_int_member(json_array_get_object_element(at, 1), "lun"),
                    ==, 3);
    json_node_unref(r);

    fe1 = pu_connect(&t.d, 1);
    fe2 = pu_connect_at(t.sock2, 1);
    pu_make_ready(fe1, 1);
    pu_make_ready(fe2, 3);
    /* Written through the default controller, read through vm2, and back. */
    rw(fe1, 1, 11, false);
    rw(fe2, 3, 11, true);
    rw(fe2, 3, 12, false);
    rw(fe1, 1, 12, true);
    /* One logical unit: grown once, both front-ends are told and see the new size. */
    json_node_unref(pu_ctl_ok(t.fd, "backend-resize",
                              pu_jobj("name", pu_jstr("shared"), "size", pu_jstr("16M"), NULL)));
    assert_capacity_changed(fe1, 1, 16u << 20);
    assert_capacity_changed(fe2, 3, 16u << 20);
    /* (The pattern's places depend on the size: written again at the new one.) */
    rw(fe1, 1, 13, false);
    rw(fe2, 3, 13, true);

    /* Not closed while either controller maps it; the other keeps its data meanwhile. */
    busy2 = pu_ctl_err(t.fd, "backend-remove", pu_jobj("name", pu_jstr("shared"), NULL),
                       CTL_E_FAILED);
    g_assert_nonnull(strstr(busy2, "mapped 2 time"));
    lun_unmap(t.fd, "default", 1);
    busy1 = pu_ctl_err(t.fd, "backend-remove", pu_jobj("name", pu_jstr("shared"), NULL),
                       CTL_E_FAILED);
    g_assert_nonnull(strstr(busy1, "mapped 1 time"));
    g_assert_cmpuint(pu_tur(fe1, 0, 1).resp.response, ==, VIRTIO_SCSI_S_BAD_TARGET);
    /* The default's LUN list changed, not vm2's: no unit attention there. */
    g_assert_cmpuint(pu_tur(fe2, 0, 3).resp.status, ==, 0);
    rw(fe2, 3, 13, true);
    lun_unmap(t.fd, "vm2", 3);
    ok_null(t.fd, "backend-remove", pu_jobj("name", pu_jstr("shared"), NULL));
    vfe_close(fe1);
    vfe_close(fe2);
    stop(&t);
}

/* ---- removing a controller --------------------------------------------- */

static void test_remove_refused_while_busy(void)
{
    struct two t;
    g_autofree char *e_dflt = NULL, *e_none = NULL, *e_luns = NULL, *e_both = NULL;
    g_autofree char *e_conn = NULL, *e_gone = NULL, *names = NULL;
    struct stat st;
    struct vfe *fe1, *fe2;
    JsonNode *vm2 = pu_jobj("name", pu_jstr("vm2"), NULL);

    start_two(&t);
    e_dflt = pu_ctl_err(t.fd, "controller-remove", pu_jobj("name", pu_jstr("default"), NULL),
                        CTL_E_FAILED);
    g_assert_nonnull(strstr(e_dflt, "default controller stays"));
    e_none = pu_ctl_err(t.fd, "controller-remove", pu_jobj("name", pu_jstr("vm9"), NULL),
                        CTL_E_FAILED);
    g_assert_nonnull(strstr(e_none, "no controller"));
    /* LUNs, no connection: refused. */
    e_luns = pu_ctl_err(t.fd, "controller-remove", json_node_copy(vm2), CTL_E_FAILED);
    g_assert_nonnull(strstr(e_luns, "0 connection(s) and 2 LUN(s)"));
    /* LUNs and a front-end: refused, and the front-end goes on being served. */
    fe1 = pu_connect(&t.d, 1);
    fe2 = pu_connect_at(t.sock2, 1);
    pu_make_ready(fe2, 0);
    g_assert_cmpint(connections_of(t.fd, "vm2"), ==, 1);
    e_both = pu_ctl_err(t.fd, "controller-remove", json_node_copy(vm2), CTL_E_FAILED);
    g_assert_nonnull(strstr(e_both, "1 connection(s) and 2 LUN(s)"));
    rw(fe2, 0, 3, false);
    /* A front-end and no LUNs: still refused; the socket is still there. */
    lun_unmap(t.fd, "vm2", 0);
    lun_unmap(t.fd, "vm2", 5);
    e_conn = pu_ctl_err(t.fd, "controller-remove", json_node_copy(vm2), CTL_E_FAILED);
    g_assert_nonnull(strstr(e_conn, "1 connection(s) and 0 LUN(s)"));
    g_assert_cmpint(stat(t.sock2, &st), ==, 0);
    g_assert_cmpuint(pu_tur(fe2, 0, 0).resp.response, ==, VIRTIO_SCSI_S_BAD_TARGET);

    /* Its VM gone, it goes, and so does its socket file. */
    vfe_close(fe2);
    wait_connections(t.fd, "vm2", 0);
    ok_null(t.fd, "controller-remove", json_node_copy(vm2));
    g_assert_cmpint(stat(t.sock2, &st), ==, -1);
    g_assert_cmpint(errno, ==, ENOENT);
    names = controller_words(t.fd);
    g_assert_cmpstr(names, ==, "default:2:2");
    e_gone = pu_ctl_err(t.fd, "lun-add",
                        pu_jobj("controller", pu_jstr("vm2"), "lun", pu_jstr("0=null:1M"), NULL),
                        CTL_E_FAILED);
    g_assert_nonnull(strstr(e_gone, "no such controller"));
    /* The default controller did not notice. */
    assert_sees(fe1, dflt_luns, G_N_ELEMENTS(dflt_luns), dflt_absent, G_N_ELEMENTS(dflt_absent));
    rw(fe1, 0, 4, false);
    /* The name and the socket path can be used again. */
    add_vm2(&t);
    lun_add(t.fd, "vm2", "0=ram:4M");
    fe2 = pu_connect_at(t.sock2, 1);
    pu_make_ready(fe2, 0);
    rw(fe2, 0, 5, false);
    vfe_close(fe2);
    vfe_close(fe1);
    json_node_unref(vm2);
    stop(&t);
}

/* ---- who is connected where -------------------------------------------- */

/*
 * A front-end in a child process (another pid for SO_PEERCRED), connected
 * to sock until *go is closed; returns once it is connected and ready.
 */
static void child_front_end(struct pu_proc *p, int *go, const char *sock, unsigned nrq)
{
    int ready[2], gop[2];
    struct pollfd pf;
    char c = 0;

    g_assert_cmpint(pipe2(ready, O_CLOEXEC), ==, 0);
    g_assert_cmpint(pipe2(gop, O_CLOEXEC), ==, 0);
    p->pid = fork();
    g_assert_cmpint(p->pid, >=, 0);
    if (p->pid == 0) {
        struct vfe *fe;

        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(ready[0]);
        close(gop[1]);
        fe = pu_connect_at(sock, nrq);
        pu_make_ready(fe, 0);
        if (write(ready[1], "r", 1) != 1) {
            _exit(1);
        }
        pf = (struct pollfd){ .fd = gop[0], .events = POLLIN };
        /* Bounded: the parent closes gop[1] (or dies) well before. */
        if (poll(&pf, 1, 6 * PU_TIMEOUT_MS) != 1) {
            _exit(2);
        }
        vfe_close(fe);
        _exit(0);
    }
    close(ready[1]);
    close(gop[0]);
    p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
    g_assert_cmpint(p->pidfd, >=, 0);
    pf = (struct pollfd){ .fd = ready[0], .events = POLLIN };
    g_assert_cmpint(poll(&pf, 1, 2 * PU_TIMEOUT_MS), ==, 1);
    g_assert_cmpint(read(ready[0], &c, 1), ==, 1);
    g_assert_cmpint(c, ==, 'r');
    close(ready[0]);
    *go = gop[1];
}

/* Lets the child's front-end disconnect and the child exit (status 0). */
static void child_release(struct pu_proc *p, int go)
{
    int status;

    close(go);
    g_assert_true(pu_proc_exited(p, PU_TIMEOUT_MS));
    g_assert_cmpint(waitpid(p->pid, &status, 0), ==, p->pid);
    close(p->pidfd);
    p->pidfd = -1;
    g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* The connections connection-list shows on controller ctrl, with their pid and queues. */
static unsigned count_connections(JsonArray *a, const char *ctrl, pid_t pid, guint queues)
{
    unsigned n = 0;

    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonObject *o = json_array_get_object_element(a, i);

        if (g_strcmp0(json_object_get_string_member(o, "controller"), ctrl)) {
            continue;
        }
        g_assert_cmpint(json_object_get_int_member(o, "pid"), ==, pid);
        g_assert_cmpint(json_object_get_int_member(o, "uid"), ==, getuid());
        g_assert_cmpstr(json_object_get_string_member(o, "state"), ==, "connected");
        g_assert_cmpuint(json_array_get_length(json_object_get_array_member(o, "queues")), ==,
                         queues);
        n++;
    }
    return n;
}

static void test_connections_listed(void)
{
    struct two t;
    struct pu_proc child;
    struct vfe *fe1, *fe1b;
    JsonNode *r;
    int go;

    start_two(&t);
    g_assert_cmpint(connections_of(t.fd, "default"), ==, 0);
    g_assert_cmpint(connections_of(t.fd, "vm2"), ==, 0);
    fe1 = pu_connect(&t.d, 2);
    child_front_end(&child, &go, t.sock2, 1);
    g_assert_cmpint(child.pid, !=, getpid());
    /* Counted where they connected: both front-ends are through with their set-up. */
    g_assert_cmpint(connections_of(t.fd, "default"), ==, 1);
    g_assert_cmpint(connections_of(t.fd, "vm2"), ==, 1);
    r = pu_ctl_ok(t.fd, "connection-list", NULL);
    g_assert_cmpuint(json_array_get_length(json_node_get_array(r)), ==, 2);
    /* Ours on the default controller's 2 queues, the child's on vm2's 1. */
    g_assert_cmpuint(count_connections(json_node_get_array(r), "default", getpid(), 2), ==, 1);
    g_assert_cmpuint(count_connections(json_node_get_array(r), "vm2", child.pid, 1), ==, 1);
    json_node_unref(r);

    /* A second one on the default controller; the child's goes away. */
    fe1b = pu_connect(&t.d, 1);
    child_release(&child, go);
    wait_connections(t.fd, "vm2", 0);
    g_assert_cmpint(connections_of(t.fd, "default"), ==, 2);
    r = pu_ctl_ok(t.fd, "connection-list", NULL);
    g_assert_cmpuint(json_array_get_length(json_node_get_array(r)), ==, 2);
    g_assert_cmpuint(count_connections(json_node_get_array(r), "default", getpid(), 2), ==, 2);
    g_assert_cmpuint(count_connections(json_node_get_array(r), "vm2", 0, 1), ==, 0);
    json_node_unref(r);
    vfe_close(fe1b);
    wait_connections(t.fd, "default", 1);
    pu_make_ready(fe1, 0);
    rw(fe1, 0, 6, false);
    vfe_close(fe1);
    wait_connections(t.fd, "default", 0);
    r = pu_ctl_ok(t.fd, "connection-list", NULL);
    g_assert_cmpuint(json_array_get_length(json_node_get_array(r)), ==, 0);
    json_node_unref(r);
    stop(&t);
}

/* ---- bad input ---------------------------------------------------------- */

/* controller-add with params, refused with code; the message must name want. */
static void add_refused(int fd, JsonNode *params, int code, const char *want)
{
    g_autofree char *e = pu_ctl_err(fd, "controller-add", params, code);

    if (!strstr(e, want)) {
        g_error("controller-add refused with \"%s\", which does not say \"%s\"", e, want);
    }
}

static JsonNode *jarr1(JsonNode *v)
{
    JsonArray *a = json_array_new();
    JsonNode *n = json_node_new(JSON_NODE_ARRAY);

    json_array_add_element(a, v);
    json_node_take_array(n, a);
    return n;
}

static void test_bad_input(void)
{
    struct two t;
    g_autofree char *sock3 = NULL, *alias = NULL, *plain = NULL, *nodir = NULL;
    g_autofree char *names = NULL, *text = NULL;
    struct stat st;
    struct vfe *fe1, *fe2;
    int fd2;

    start_two(&t);
    sock3 = g_build_filename(t.d.dir, "vm3.sock", NULL);
    alias = g_build_filename(t.d.dir, ".", "target.sock", NULL);
    g_assert_cmpstr(alias, !=, t.d.sock);
    plain = g_build_filename(t.d.dir, "plain", NULL);
    g_assert_true(g_file_set_contents(plain, "not a socket", -1, NULL));
    nodir = g_build_filename(t.d.dir, "no-such-dir", "vm3.sock", NULL);
    connect_two(&t, &fe1, &fe2);
    rw(fe1, 0, 21, false);
    rw(fe2, 0, 22, false);

    /* Names in use, or not names. */
    add_refused(t.fd, controller_params("vm2", sock3, 1), CTL_E_FAILED, "exists");
    add_refused(t.fd, controller_params("default", sock3, 1), CTL_E_FAILED, "exists");
    add_refused(t.fd, controller_params("a/b", sock3, 1), CTL_E_FAILED, "controller name");
    add_refused(t.fd, controller_params("", sock3, 1), CTL_E_FAILED, "controller name");
    g_assert_cmpint(stat(sock3, &st), ==, -1);
    /* Sockets in use: another controller's (as named, and spelt otherwise), the control one's. */
    add_refused(t.fd, controller_params("vm3", t.d.sock, 1), CTL_E_FAILED, "default");
    add_refused(t.fd, controller_params("vm3", t.sock2, 1), CTL_E_FAILED, "vm2");
    add_refused(t.fd, controller_params("vm3", alias, 1), CTL_E_FAILED,
                "something listens there already");
    add_refused(t.fd, controller_params("vm3", t.ctl, 1), CTL_E_FAILED,
                "something listens there already");
    /* Not a socket, or nowhere to make one. */
    add_refused(t.fd, controller_params("vm3", plain, 1), CTL_E_FAILED,
                "a file that is not a socket is in the way");
    add_refused(t.fd, controller_params("vm3", nodir, 1), CTL_E_FAILED,
                "No such file or directory");
    g_assert_true(g_file_get_contents(plain, &text, NULL, NULL));
    g_assert_cmpstr(text, ==, "not a socket");
    /* Wrong types, missing and unknown members, values out of range. */
    add_refused(t.fd, pu_jobj("name", pu_jint(3), "socket", pu_jstr(sock3), NULL),
                CTL_E_INVALID_PARAMS, "\"name\"");
    add_refused(t.fd, pu_jobj("name", pu_jstr("vm3"), NULL), CTL_E_INVALID_PARAMS, "\"socket\"");
    add_refused(t.fd, pu_jobj("name", pu_jstr("vm3"), "socket", pu_jstr(sock3), "queues",
                              pu_jstr("1"), NULL), CTL_E_INVALID_PARAMS, "\"queues\"");
    add_refused(t.fd, controller_params("vm3", sock3, 0), CTL_E_INVALID_PARAMS, "queues");
    add_refused(t.fd, controller_params("vm3", sock3, 3), CTL_E_INVALID_PARAMS, "queues");
    add_refused(t.fd, pu_jobj("name", pu_jstr("vm3"), "socket", pu_jstr(sock3), "allow_uid",
                              pu_jstr("0"), NULL), CTL_E_INVALID_PARAMS, "\"allow_uid\"");
    add_refused(t.fd, pu_jobj("name", pu_jstr("vm3"), "socket", pu_jstr(sock3), "allow_gid",
                              jarr1(pu_jint(-1)), NULL), CTL_E_INVALID_PARAMS, "allow_gid[0]");
    add_refused(t.fd, pu_jobj("name", pu_jstr("vm3"), "socket", pu_jstr(sock3), "luns",
                              pu_jint(1), NULL), CTL_E_INVALID_PARAMS, "\"luns\"");
    /* Initiator names: 1-223 of A-Z a-z 0-9 . - : _ (an iSCSI name's bound). */
    {
        g_autofree char *long_iqn = g_strnfill(224, 'a');
        const char *bad[] = { "", "iqn.2026-12.org:vm 3", "iqn/vm3", "iqn.x,y", long_iqn };

        for (unsigned i = 0; i < G_N_ELEMENTS(bad); i++) {
            add_refused(t.fd, pu_jobj("name", pu_jstr("vm3"), "socket", pu_jstr(sock3),
                                      "initiator", pu_jstr(bad[i]), NULL),
                        CTL_E_INVALID_PARAMS, "initiator");
        }
        add_refused(t.fd, pu_jobj("name", pu_jstr("vm3"), "socket", pu_jstr(sock3),
                                  "initiator", pu_jint(1), NULL),
                    CTL_E_INVALID_PARAMS, "\"initiator\"");
    }
    g_assert_cmpint(stat(sock3, &st), ==, -1);

    /* Nothing was added, and both controllers go on serving. */
    names = controller_words(t.fd);
    g_assert_cmpstr(names, ==, "default:2:2 vm2:1:2");
    rw(fe1, 0, 21, true);
    rw(fe2, 0, 22, true);
    rw(fe1, 0, 23, false);
    rw(fe2, 0, 24, false);
    vfe_close(fe1);
    vfe_close(fe2);
    /* New front-ends reach the controller they ask for, and the control socket its server. */
    connect_two(&t, &fe1, &fe2);
    rw(fe1, 0, 23, true);
    rw(fe2, 0, 24, true);
    fd2 = ctl_client_connect(t.ctl);
    g_assert_cmpint(fd2, >=, 0);
    json_node_unref(pu_ctl_ok(fd2, "version", NULL));
    close(fd2);
    vfe_close(fe1);
    vfe_close(fe2);
    stop(&t);
}

/* ---- saved and restored -------------------------------------------------- */

static void test_config_save_and_restart(void)
{
    struct two t;
    g_autofree char *conf = NULL, *img = NULL, *spec = NULL, *ctrls = NULL, *luns = NULL;
    g_autofree char *ctrls2 = NULL, *luns2 = NULL, *want = NULL;
    static const struct seen vm2_saved[] = { { 0, 4u << 20 }, { 2, 8u << 20 } };
    static const struct seen dflt_saved[] = { { 0, 1u << 30 }, { 1, 8u << 20 } };
    static const unsigned none[] = { 3 };
    const struct group *gr = getgrnam("daemon");
    struct stat st;
    struct vfe *fe1, *fe2;
    JsonNode *r;

    /* A group other than ours, so that its ownership shows. */
    g_assert_nonnull(gr);
    g_assert_cmpuint(gr->gr_gid, !=, getgid());
    start(&t, "0=null:1G");
    conf = g_build_filename(t.d.dir, "target.json", NULL);
    img = g_build_filename(t.d.dir, "vm2.img", NULL);
    g_assert_true(g_file_set_contents(img, "", 0, NULL));
    spec = g_strdup_printf("file:%s,size=8M", img);
    json_node_unref(pu_ctl_ok(t.fd, "controller-add",
                              pu_jobj("name", pu_jstr("vm2"), "socket", pu_jstr(t.sock2),
                                      "queues", pu_jint(1), "allow_uid",
                                      jarr1(pu_jint(getuid())), "socket_group",
                                      pu_jstr("daemon"), NULL)));
    /* Its group may connect: 0660 (as --socket-group). */
    g_assert_cmpint(stat(t.sock2, &st), ==, 0);
    g_assert_cmpuint(st.st_mode & 0777, ==, 0660);
    g_assert_cmpuint(st.st_gid, ==, gr->gr_gid);
    json_node_unref(pu_ctl_ok(t.fd, "backend-add",
                              pu_jobj("name", pu_jstr("disk"), "spec", pu_jstr(spec), NULL)));
    lun_add(t.fd, "vm2", "0=ram:4M");
    lun_map(t.fd, "vm2", 2, "disk");
    lun_map(t.fd, "default", 1, "disk");
    fe2 = pu_connect_at(t.sock2, 1);
    pu_make_ready(fe2, 2);
    rw(fe2, 2, 31, false);
    vfe_close(fe2);
    ctrls = controller_words(t.fd);
    want = g_strdup_printf("default:2:2 vm2:1:2:uid%u", (unsigned)getuid());
    g_assert_cmpstr(ctrls, ==, want);
    luns = lun_words(t.fd, NULL);
    g_assert_cmpstr(luns, ==, "default/0:0=lun0:0 default/0:1=disk vm2/0:0=vm2/lun0:0 "
                              "vm2/0:2=disk");
    r = pu_ctl_ok(t.fd, "config-save", pu_jobj("file", pu_jstr(conf), NULL));
    g_assert_cmpstr(json_node_get_string(r), ==, conf);
    json_node_unref(r);
    g_assert_cmpint(stat(conf, &st), ==, 0);
    g_assert_cmpuint(st.st_mode & 0777, ==, 0600);
    close(t.fd);
    g_assert_cmpint(pu_daemon_stop(&t.d, false), ==, 0);
    /* Every controller's socket goes at exit. */
    g_assert_cmpint(stat(t.sock2, &st), ==, -1);

    /* The file alone brings both back: vm2 listens before the default does. */
    {
        const char *args[] = { "--config", conf, "--control", t.ctl, "--queues", "2", NULL };

        pu_daemon_start(&t.d, args);
    }
    t.fd = ctl_client_connect(t.ctl);
    g_assert_cmpint(t.fd, >=, 0);
    ctrls2 = controller_words(t.fd);
    g_assert_cmpstr(ctrls2, ==, ctrls);
    luns2 = lun_words(t.fd, NULL);
    g_assert_cmpstr(luns2, ==, luns);
    g_assert_cmpint(stat(t.sock2, &st), ==, 0);
    g_assert_cmpuint(st.st_mode & 0777, ==, 0660);
    g_assert_cmpuint(st.st_gid, ==, gr->gr_gid);
    fe2 = pu_connect_at(t.sock2, 1);
    fe1 = pu_connect(&t.d, 1);
    assert_sees(fe2, vm2_saved, G_N_ELEMENTS(vm2_saved), none, G_N_ELEMENTS(none));
    assert_sees(fe1, dflt_saved, G_N_ELEMENTS(dflt_saved), none, G_N_ELEMENTS(none));
    /* The data, through vm2 again and through the default controller that shares the disk. */
    rw(fe2, 2, 31, true);
    rw(fe1, 1, 31, true);
    vfe_close(fe1);
    vfe_close(fe2);
    stop(&t);
}

/*
 * A configuration file written by hand, without the optional members
 * (no qos, no implicit, no socket): the default controller takes its
 * initiator from it, the daemon logs no json-glib CRITICAL for what is
 * absent, and a file with a bad initiator name is refused at start.
 */
static void test_config_default_initiator(void)
{
    struct pu_daemon d;
    g_autofree char *conf = NULL, *ctl = NULL, *bad = NULL, *log = NULL;
    static const char good_json[] =
        "{\"version\": 1, \"backends\": [{\"name\": \"disk\", \"spec\": \"ram:4M\"}],"
        " \"controllers\": [{\"name\": \"default\", \"initiator\": \"iqn.2026-12.com.example:vm1\","
        " \"luns\": [{\"target\": 0, \"lun\": 0, \"backend\": \"disk\"}]}]}";
    static const char bad_json[] =
        "{\"version\": 1, \"backends\": [],"
        " \"controllers\": [{\"name\": \"default\", \"initiator\": \"iqn.2026-12 vm1\","
        " \"luns\": []}]}";
    int fd, status;

    pu_daemon_init(&d);
    d.capture_log = true;
    conf = g_build_filename(d.dir, "target.json", NULL);
    ctl = g_build_filename(d.dir, "control.sock", NULL);
    g_assert_true(g_file_set_contents(conf, good_json, -1, NULL));
    {
        const char *args[] = { "--config", conf, "--control", ctl, NULL };

        pu_daemon_start(&d, args);
    }
    fd = ctl_client_connect(ctl);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpstr(initiator_of(fd, "default"), ==, "iqn.2026-12.com.example:vm1");
    close(fd);
    g_assert_cmpint(pu_daemon_stop(&d, false), ==, 0);
    log = pu_daemon_log_read(&d, 0, 1 << 20);
    if (strstr(log, "CRITICAL") || strstr(log, "WARNING")) {
        g_error("the daemon warned about a configuration without optional members:\n%s", log);
    }

    bad = g_build_filename(d.dir, "bad.json", NULL);
    g_assert_true(g_file_set_contents(bad, bad_json, -1, NULL));
    {
        const char *args[] = { "--config", bad, NULL };
        size_t from = pu_daemon_log_size(&d);

        g_assert_false(pu_daemon_try_start(&d, args, &status));
        g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
        g_assert_cmpuint(pu_daemon_log_count(&d, from, "initiator 'iqn.2026-12 vm1'"), ==, 1);
    }
    pu_daemon_cleanup(&d);
}

static char *tool(struct two *t, int want_code, const char *const *args)
{
    int code;
    g_autofree char *err = NULL;
    char *out = pu_ctl_tool(t->ctl, args, &code, &err);

    if (code != want_code) {
        g_error("vhost-scsi-ctl target %s: exit %d (wanted %d): %s", args[0], code, want_code,
                err);
    }
    return out;
}

static void test_ctl_client(void)
{
    struct two t;
    g_autofree char *added = NULL, *list = NULL, *luns = NULL, *words = NULL, *removed = NULL;
    g_autofree char *refused = NULL, *bad = NULL, *json = NULL;
    g_autofree char *sock4 = NULL, *sock5 = NULL;

    if (!g_getenv("VHOST_SCSI_CTL")) {
        g_test_skip("VHOST_SCSI_CTL is not set (run through meson test)");
        return;
    }
    start(&t, "0=ram:8M");
    sock4 = g_build_filename(t.d.dir, "vm4.sock", NULL);
    sock5 = g_build_filename(t.d.dir, "vm5.sock", NULL);
    added = tool(&t, 0, (const char *const[]){ "controller", "add", "vm2", t.sock2, "--queues",
                                                "1", "--allow-uid", "0", NULL });
    g_assert_nonnull(strstr(added, "vm2"));
    g_assert_true(g_file_test(t.sock2, G_FILE_TEST_EXISTS));
    g_free(tool(&t, 0, (const char *const[]){ "--controller", "vm2", "lun", "add", "4=ram:4M",
                                              NULL }));
    /* The LUN went to vm2, not to default. */
    words = lun_words(t.fd, NULL);
    g_assert_cmpstr(words, ==, "default/0:0=lun0:0 vm2/0:4=vm2/lun0:4");
    luns = tool(&t, 0, (const char *const[]){ "--controller", "vm2", "lun", "list", NULL });
    g_assert_nonnull(strstr(luns, "0:4"));
    g_assert_null(strstr(luns, "0:0 "));
    list = tool(&t, 0, (const char *const[]){ "controller", "list", NULL });
    g_assert_nonnull(strstr(list, "default"));
    g_assert_nonnull(strstr(list, " 1 queues"));
    json = tool(&t, 0, (const char *const[]){ "--json", "controller", "list", NULL });
    g_assert_nonnull(strstr(json, "\"allow_uid\""));
    /* Refused while it has a LUN: the daemon's message, exit 1. */
    refused = tool(&t, 1, (const char *const[]){ "controller", "remove", "vm2", NULL });
    g_free(tool(&t, 0, (const char *const[]){ "--controller", "vm2", "lun", "remove", "4",
                                              NULL }));
    removed = tool(&t, 0, (const char *const[]){ "controller", "remove", "vm2", NULL });
    g_assert_false(g_file_test(t.sock2, G_FILE_TEST_EXISTS));
    /* --initiator names the controller's initiator port; a bad one is the daemon's refusal. */
    g_free(tool(&t, 0, (const char *const[]){ "controller", "add", "vm4", sock4, "--queues=1",
                                              "--initiator", "iqn.2026-12.com.example:vm4",
                                              NULL }));
    g_assert_cmpstr(initiator_of(t.fd, "vm4"), ==, "iqn.2026-12.com.example:vm4");
    g_free(tool(&t, 1, (const char *const[]){ "controller", "add", "vm5", sock5, "--initiator",
                                              "iqn bad", NULL }));
    g_assert_false(g_file_test(sock5, G_FILE_TEST_EXISTS));
    bad = tool(&t, 2, (const char *const[]){ "controller", "add", "vm3", NULL });
    g_free(tool(&t, 2, (const char *const[]){ "controller", "add", "vm3", "x.sock", "--queues",
                                              "zero", NULL }));
    g_free(tool(&t, 2, (const char *const[]){ "qos", "set", "lun0:0", "--iops", NULL }));
    g_free(tool(&t, 2, (const char *const[]){ "controller", "add", "vm3", "x.sock", "--bogus", "1",
                                              NULL }));
    g_free(tool(&t, 2, (const char *const[]){ "controller", "add", "vm3", "x.sock",
                                              "--initiator", NULL }));
    stop(&t);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    signal(SIGPIPE, SIG_IGN);
    g_test_add_func("/controllers/own-socket-own-luns", test_own_socket_own_luns);
    g_test_add_func("/controllers/shared-backend", test_shared_backend);
    g_test_add_func("/controllers/remove-refused-while-busy", test_remove_refused_while_busy);
    g_test_add_func("/controllers/connections-listed", test_connections_listed);
    g_test_add_func("/controllers/bad-input", test_bad_input);
    g_test_add_func("/controllers/config-save-and-restart", test_config_save_and_restart);
    g_test_add_func("/controllers/ctl-client", test_ctl_client);
    g_test_add_func("/controllers/config-default-initiator", test_config_default_initiator);
    return g_test_run();
}
