/*
 * Opening, watching and closing an RBD LUN: connect to the cluster as the
 * spec's client (its configuration file and keyring), open the image or
 * its snapshot, take the exclusive lock of a writable image that has the
 * feature (refusing one whose lock another client holds: two writers
 * without cooperation would corrupt a non-cluster filesystem), and read
 * the geometry and identity.  A header watch (rbd_update_watch) tells the
 * owner when another client resizes the image.  Every librados/librbd
 * call here blocks; the owner opens on a thread of its own when it must
 * stay responsive (hw/daemon/target-opening.c).  See docs/rbd.md.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "backend-rbd-int.h"

static bool cancelled(int cancel_fd)
{
    struct pollfd p = { .fd = cancel_fd, .events = POLLIN };

    return cancel_fd >= 0 && poll(&p, 1, 0) > 0;
}

/* Sets option unless the configuration (file or CEPH_ARGS) already did. */
static void set_default(struct rbd_lun *rl, const char *option, int value,
                        double librados_default)
{
    char now[64];
    g_autofree char *v = g_strdup_printf("%d", value);

    if (rados_conf_get(rl->cluster, option, now, sizeof(now)) == 0 &&
        g_ascii_strtod(now, NULL) != librados_default) {
        return;
    }
    if (rados_conf_set(rl->cluster, option, v) < 0) {
        g_warning("%s: cannot set %s: the default stays", rl->be.name, option);
    }
}

static int connect_cluster(struct rbd_lun *rl, const struct backend_rbd_opts *o, GError **err)
{
    g_autofree char *name = g_strdup_printf("client.%s", o->client_id ? o->client_id : "admin");
    int ret;

    ret = rados_create2(&rl->cluster, "ceph", name, 0);
    if (ret < 0) {
        rl->cluster = NULL;
        return vs_error_set(err, ret, "cannot create a cluster handle for %s: %s", name,
                            g_strerror(-ret));
    }
    ret = rados_conf_read_file(rl->cluster, o->conf);
    if (ret < 0) {
        return vs_error_set(err, ret, "cannot read the Ceph configuration %s: %s",
                            o->conf ? o->conf : "(default search path)", g_strerror(-ret));
    }
    rados_conf_parse_env(rl->cluster, NULL);
    if (o->keyring && (ret = rados_conf_set(rl->cluster, "keyring", o->keyring)) < 0) {
        return vs_error_set(err, ret, "keyring %s: %s", o->keyring, g_strerror(-ret));
    }
    /* Bounded waits unless the configuration chose otherwise (librados: 300 s, 0 = none). */
    set_default(rl, "client_mount_timeout", RBD_MOUNT_TIMEOUT_S, 300);
    /* Half the busy-timeout: a request answers BUSY at least once before NOT READY. */
    set_default(rl, "rados_osd_op_timeout",
                (int)MAX(1, MIN(RBD_OSD_OP_TIMEOUT_S, rl->busy_us / G_USEC_PER_SEC / 2)), 0);
    if (cancelled(o->cancel_fd)) {
        return vs_error_set(err, -ECANCELED, "the open was called off");
    }
    ret = rados_connect(rl->cluster);
    if (ret < 0) {
        vs_error_set(err, ret, "cannot connect to the cluster as %s: %s%s", name,
                     g_strerror(-ret), ret == -ETIMEDOUT ? " (no monitor answered)"
                     : ret == -EACCES || ret == -EPERM ? " (check the keyring and the client's "
                     "caps)" : "");
        rados_shutdown(rl->cluster);
        rl->cluster = NULL;
        return ret;
    }
    return 0;
}

/*
 * Whether the lock owner (its client address, as rbd_lock_get_owners
 * gives it, or "auto WATCH-COOKIE") still watches the image header.  A client that crashed or was blocklisted has no watch
 * (the OSDs drop a blocklisted client's watches, a crashed one's expire):
 * its lock is stale, and librbd's acquire breaks it (blocklisting that
 * client, rbd_blocklist_on_break_lock), which is what lets a fenced LUN be
 * added again.  When the watchers cannot be listed the owner counts as
 * alive: refusing is the safe side.
 */
static bool owner_alive(struct rbd_lun *rl, const char *owner)
{
    rbd_image_watcher_t w[16];
    size_t n = G_N_ELEMENTS(w);
    guint64 cookie = 0;
    bool by_cookie = g_str_has_prefix(owner, "auto "), alive = false;

    if ((by_cookie &&
         !g_ascii_string_to_unsigned(owner + 5, 10, 0, G_MAXUINT64, &cookie, NULL)) ||
        rbd_watchers_list(rl->image, w, &n) < 0) {
        return true;
    }
    for (size_t i = 0; i < n; i++) {
        alive |= by_cookie ? w[i].cookie == cookie : !g_strcmp0(w[i].addr, owner);
    }
    rbd_watchers_list_cleanup(w, n);
    return alive;
}

/*
 * Takes the exclusive lock of a writable image that has the feature, so
 * that no other client writes beside us; -EBUSY if a live client already
 * holds it.
 */
static int take_lock(struct rbd_lun *rl, GError **err)
{
    uint64_t features = 0;
    rbd_lock_mode_t mode;
    char *owners[4];
    size_t n = G_N_ELEMENTS(owners);
    int ret;

    if (rbd_get_features(rl->image, &features) < 0 ||
        !(features & RBD_FEATURE_EXCLUSIVE_LOCK)) {
        return 0;
    }
    ret = rbd_lock_get_owners(rl->image, &mode, owners, &n);
    if (ret == 0 && n > 0 && !owner_alive(rl, owners[0])) {
        g_message("%s: the image's lock owner (%s) no longer watches it (crashed or "
                  "blocklisted): breaking its stale lock", rl->be.name, owners[0]);
        rbd_lock_get_owners_cleanup(owners, n);
    } else if (ret == 0 && n > 0) {
        vs_error_set(err, -EBUSY, "the image's exclusive lock is held by another client (%s): "
                     "refusing a second writer; open it read-only (ro, or a snapshot), or "
                     "disable the exclusive-lock feature for a shared disk (docs/rbd.md)",
                     owners[0]);
        rbd_lock_get_owners_cleanup(owners, n);
        return -EBUSY;
    }
    if (ret < 0 && ret != -ENOENT) {
        return vs_error_set(err, ret, "cannot read the image's lock owners: %s",
                            g_strerror(-ret));
    }
    /* Exclusive mode: librbd does not hand the lock over when another client asks. */
    ret = rbd_lock_acquire(rl->image, RBD_LOCK_MODE_EXCLUSIVE);
    if (ret < 0) {
        return vs_error_set(err, ret == -EROFS ? -EBUSY : ret, "cannot take the image's "
                            "exclusive lock: %s%s", g_strerror(-ret), ret == -EROFS ||
                            ret == -EBUSY ? " (another client took it meanwhile)" : "");
    }
    rl->locked = true;
    return 0;
}

/* librbd's thread, on any header change: tell the owner when the size changed. */
static void watch_cb(void *arg)
{
    struct rbd_lun *rl = arg;
    void (*changed)(struct lun_backend *, void *) =
        __atomic_load_n(&rl->be.changed, __ATOMIC_ACQUIRE);
    uint64_t size = 0;

    if (rbd_get_size(rl->image, &size) < 0 || size == backend_size(&rl->be)) {
        return;
    }
    g_message("%s: the image is now %" PRIu64 " bytes (was %" PRIu64 ")", rl->be.name, size,
              backend_size(&rl->be));
    if (changed) {
        changed(&rl->be, rl->be.changed_opaque);
    }
}

static int read_geometry(struct rbd_lun *rl, const struct backend_rbd_opts *o, GError **err)
{
    rbd_image_info_t st;
    char id[64] = "";
    uint64_t snap_id = 0;
    int ret = rbd_stat(rl->image, &st, sizeof(st));

    if (ret < 0) {
        return vs_error_set(err, ret, "cannot stat the image: %s", g_strerror(-ret));
    }
    if (st.size < 512) {
        return vs_error_set(err, -EINVAL, "the image is %" PRIu64 " bytes, less than one block",
                            st.size);
    }
    ret = rbd_get_id(rl->image, id, sizeof(id));
    if (ret < 0) {
        /* Format 1 images have no id: their name stands in (stable, if not unique). */
        g_strlcpy(id, o->image, sizeof(id));
    }
    if (o->snap) {
        rbd_snap_get_id(rl->image, o->snap, &snap_id);
    }
    rl->be.block_size = 512;
    rl->be.size = st.size - st.size % 512;
    if (st.obj_size <= UINT32_MAX) {
        rl->be.opt_granularity = (uint32_t)st.obj_size;
    }
    /* Pool id, image id and snapshot id: the same disk for every client, unique per cluster. */
    if (snap_id) {
        snprintf(rl->serial, sizeof(rl->serial), "%" PRId64 ".%s@%" PRIu64,
                 rados_ioctx_get_id(rl->ioctx), id, snap_id);
    } else {
        snprintf(rl->serial, sizeof(rl->serial), "%" PRId64 ".%s",
                 rados_ioctx_get_id(rl->ioctx), id);
    }
    rl->info.serial = rl->serial;
    return 0;
}

/* librbd's cache (rbd_cache, on by default): FLUSH and FUA matter only with it. */
static bool cache_on(struct rbd_lun *rl)
{
    char v[16] = "";

    return rados_conf_get(rl->cluster, "rbd_cache", v, sizeof(v)) == 0 &&
           (!strcmp(v, "true") || !strcmp(v, "1"));
}

static const struct scsi_lun_info *rbd_identity(struct lun_backend *be)
{
    return &to_rl(be)->info;
}

static int rbd_be_resize(struct lun_backend *be, uint64_t size, uint64_t *out, GError **err);
static void rbd_be_close(struct lun_backend *be);

/* The data path's operations (backend-rbd.c) with this file's resize and close. */
static const struct backend_ops rbd_be_ops = {
    .name = "rbd",
    .submit = rbd_be_submit,
    .attach_thread = rbd_be_attach_thread,
    .detach_thread = rbd_be_detach_thread,
    .identity = rbd_identity,
    .resize = rbd_be_resize,
    .close = rbd_be_close,
};

int backend_rbd_open(const struct backend_rbd_opts *o, struct lun_backend **out, GError **err)
{
    struct rbd_lun *rl = g_new0(struct rbd_lun, 1);
    int ret;

    *out = NULL;
    rl->spec = o->snap ? g_strdup_printf("%s/%s@%s", o->pool, o->image, o->snap)
                       : g_strdup_printf("%s/%s", o->pool, o->image);
    rl->be.ops = &rbd_be_ops;
    rl->be.name = g_strdup_printf("rbd:%s", rl->spec);
    rl->be.read_only = o->read_only || o->snap;
    rl->busy_us = (int64_t)(o->busy_timeout_s ? o->busy_timeout_s : RBD_BUSY_TIMEOUT_S) *
                  G_USEC_PER_SEC;
    atomic_init(&rl->timeouts_since, 0);
    atomic_init(&rl->unreachable_logged, false);
    atomic_init(&rl->fenced, false);

    ret = connect_cluster(rl, o, err);
    if (ret < 0) {
        goto fail;
    }
    ret = rados_ioctx_create(rl->cluster, o->pool, &rl->ioctx);
    if (ret < 0) {
        vs_error_set(err, ret, "cannot open pool %s: %s", o->pool, g_strerror(-ret));
        rl->ioctx = NULL;
        goto fail;
    }
    if (cancelled(o->cancel_fd)) {
        ret = vs_error_set(err, -ECANCELED, "the open was called off");
        goto fail;
    }
    ret = rl->be.read_only ? rbd_open_read_only(rl->ioctx, o->image, &rl->image, o->snap)
                           : rbd_open(rl->ioctx, o->image, &rl->image, NULL);
    if (ret < 0) {
        vs_error_set(err, ret, "cannot open the image%s: %s", o->snap ? " snapshot" : "",
                     g_strerror(-ret));
        rl->image = NULL;
        goto fail;
    }
    if (!rl->be.read_only && (ret = take_lock(rl, err)) < 0) {
        goto fail;
    }
    ret = read_geometry(rl, o, err);
    if (ret < 0) {
        goto fail;
    }
    rl->be.can_discard = !rl->be.read_only;
    /* librbd skips the parts of a discard that do not cover whole objects. */
    rl->be.discard_zeroes = false;
    rl->be.write_cache = cache_on(rl);
    /* A snapshot never changes size. */
    if (!o->snap) {
        ret = rbd_update_watch(rl->image, &rl->watch_handle, watch_cb, rl);
        if (ret < 0) {
            g_warning("%s: cannot watch the image header (%s): a resize elsewhere will go "
                      "unnoticed", rl->be.name, g_strerror(-ret));
        } else {
            rl->watching = true;
        }
    }
    g_message("%s: %" PRIu64 " bytes, objects of %" PRIu32 " bytes, %s%s%s, serial %s",
              rl->be.name, rl->be.size, rl->be.opt_granularity,
              rl->be.read_only ? "read-only" : "read-write",
              rl->locked ? ", exclusive lock held" : "",
              rl->be.write_cache ? ", rbd cache on" : "", rl->serial);
    *out = &rl->be;
    return 0;

fail:
    rbd_be_close(&rl->be);
    return ret;
}

static int rbd_be_resize(struct lun_backend *be, uint64_t size, uint64_t *out, GError **err)
{
    struct rbd_lun *rl = to_rl(be);
    int ret;

    if (size) {
        ret = rbd_resize(rl->image, size);
        if (ret < 0) {
            return vs_error_set(err, ret, "cannot resize the image to %" PRIu64 " bytes: %s",
                                size, g_strerror(-ret));
        }
    }
    ret = rbd_get_size(rl->image, out);
    if (ret < 0) {
        vs_error_set(err, ret, "cannot read the image's size: %s", g_strerror(-ret));
    }
    return ret;
}

/* librbd's thread: the close has finished. */
static void close_cb(rbd_completion_t c, void *arg)
{
    uint64_t one = 1;

    (void)c;
    if (write(*(int *)arg, &one, sizeof(one)) < 0) {
        abort();        /* an eventfd written once cannot overflow */
    }
}

/*
 * Closes the image, bounded by RBD_CLOSE_TIMEOUT_S: flushes librbd's cache
 * (bounded by the OSD operation timeout), then rbd_aio_close, which waits
 * for librbd's requests in flight and releases the exclusive lock.  Ceph
 * 16.2.15's close can wait for ever once the header watch has timed out
 * during an outage (rbd_lock_release as well; tests:
 * cluster-unreachable-busy-then-not-ready): then the image, its cluster
 * handle and the LUN are left behind (false), logged, and the daemon goes
 * on without them.  Nothing is lost that a flush did not already write.
 */
static bool close_image(struct rbd_lun *rl)
{
    int *efd = g_new(int, 1);
    struct pollfd p = { .events = POLLIN };
    rbd_completion_t c;
    int ret;

    ret = rbd_flush(rl->image);
    if (ret < 0) {
        g_warning("%s: flush at close: %s", rl->be.name, g_strerror(-ret));
    }
    *efd = eventfd(0, EFD_CLOEXEC);
    if (*efd < 0 || rbd_aio_create_completion(efd, close_cb, &c) < 0) {
        if (*efd >= 0) {
            close(*efd);
        }
        g_free(efd);
        rbd_close(rl->image);
        return true;
    }
    ret = rbd_aio_close(rl->image, c);
    if (ret < 0) {
        g_warning("%s: cannot close the image: %s", rl->be.name, g_strerror(-ret));
        rbd_aio_release(c);
        close(*efd);
        g_free(efd);
        return false;
    }
    p.fd = *efd;
    if (poll(&p, 1, RBD_CLOSE_TIMEOUT_S * 1000) != 1) {
        /* The callback may still come: its eventfd and completion stay. */
        g_warning("%s: closing the image did not finish within %d s (librbd); leaving it "
                  "open and going on", rl->be.name, RBD_CLOSE_TIMEOUT_S);
        return false;
    }
    rbd_aio_release(c);
    close(*efd);
    g_free(efd);
    return true;
}

static void rbd_be_close(struct lun_backend *be)
{
    struct rbd_lun *rl = to_rl(be);

    if (rl->watching) {
        /* Waits for a watch callback under way: none runs after this. */
        rbd_update_unwatch(rl->image, rl->watch_handle);
    }
    /*
     * Not rbd_lock_release first: the close releases the lock itself, and
     * the explicit release is one more call that can wait for ever.
     */
    if (rl->image && !close_image(rl)) {
        /* librbd may still call back into rl and its threads: they stay. */
        return;
    }
    rbd_be_drain_threads(rl);
    if (rl->ioctx) {
        rados_ioctx_destroy(rl->ioctx);
    }
    if (rl->cluster) {
        rados_shutdown(rl->cluster);
    }
    for (unsigned i = 0; i < RBD_MAX_THREADS; i++) {
        if (rl->threads[i]) {
            close(rl->threads[i]->efd);
            g_free(rl->threads[i]);
        }
    }
    g_free(rl->spec);
    g_free(rl->be.name);
    g_free(rl);
}
