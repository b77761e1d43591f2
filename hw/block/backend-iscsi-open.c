/*
 * Opening an iSCSI LUN: the iscsi:// URL and its LUN field, the CHAP
 * secret file, one login to read the LUN's geometry (READ CAPACITY, block
 * limits) and identity (INQUIRY and its VPD pages), then the backend
 * object the I/O threads attach to.  The login and the reads run on the
 * calling thread through libiscsi's asynchronous calls and a poll loop of
 * our own rather than its synchronous ones, so that the whole open has one
 * deadline (libiscsi's sync calls know only its per-PDU timeout, which no
 * PDU carries while TCP connects into the void) and another thread can
 * call it off (the daemon, shutting down while a control call opens a
 * LUN).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "backend-iscsi-int.h"

/* ---- one open's conversation with the target --------------------------- */

/* One asynchronous call: what its callback reported. */
struct op {
    bool done;
    int status;
};

struct opener {
    struct iscsi_context *ctx;
    const char *name;           /* for log lines: the LUN's URL without its password */
    int cancel_fd;              /* -1: none */
    int64_t deadline;           /* monotonic us */
    int failed;                 /* a wait ran out or was called off: later steps fail at once */
    /*
     * The call in progress.  Here rather than on a step's stack: destroying
     * the context calls back for what it still holds, after that step.
     */
    struct op op;
    struct scsi_task *stranded; /* the task a failed wait left with libiscsi: freed after it */
};

static void op_cb(struct iscsi_context *ctx, int status, void *command_data, void *priv)
{
    struct op *op = priv;

    op->done = true;
    op->status = status;
}

/* Starts a call: its callback data (op_cb's) is the return value. */
static struct op *op_start(struct opener *o)
{
    o->op = (struct op) { 0 };
    return &o->op;
}

/*
 * Services the context until the call is done: 0, or -ETIMEDOUT past the
 * deadline, -ECANCELED once cancel_fd is readable, -EIO if the connection
 * failed.  A failure sticks (o->failed): the open is over.
 */
static int op_wait(struct opener *o)
{
    while (!o->op.done && !o->failed) {
        struct pollfd p[2] = {
            { .fd = iscsi_get_fd(o->ctx), .events = (short)iscsi_which_events(o->ctx) },
            { .fd = o->cancel_fd, .events = POLLIN },
        };
        int64_t left = o->deadline - g_get_monotonic_time();
        int n;

        if (left <= 0) {
            o->failed = -ETIMEDOUT;
            break;
        }
        /* At least once a second: libiscsi checks its task timeouts in iscsi_service. */
        n = poll(p, o->cancel_fd >= 0 ? 2 : 1, (int)MIN((left + 999) / 1000, 1000));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            o->failed = -errno;
            break;
        }
        if (o->cancel_fd >= 0 && p[1].revents) {
            o->failed = -ECANCELED;
            break;
        }
        if (iscsi_service(o->ctx, n > 0 ? p[0].revents : 0) < 0) {
            o->failed = -EIO;
            break;
        }
    }
    return o->failed;
}

/*
 * Waits for task, issued with op_start(o) as its callback's data: the task
 * (the caller frees it), or NULL if it could not be issued or did not end.
 */
static struct scsi_task *task_wait(struct opener *o, struct scsi_task *task)
{
    if (!task) {
        return NULL;
    }
    if (op_wait(o) < 0) {
        /* Still libiscsi's: freed once the context that holds it is gone. */
        o->stranded = task;
        return NULL;
    }
    return task;
}

/* Ends the conversation: the context first, then what it still held. */
static void opener_end(struct opener *o)
{
    if (o->ctx) {
        iscsi_destroy_context(o->ctx);
        o->ctx = NULL;
    }
    if (o->stranded) {
        scsi_free_scsi_task(o->stranded);
        o->stranded = NULL;
    }
}

/* ---- opening ------------------------------------------------------------ */

/*
 * Reads a CHAP secret.  The file must be ours and unreadable by others, as
 * ssh does for keys: a password in a world-readable file is no secret.
 */
/* -errno with *err naming the secret file and what is wrong with it. */
static int secret_error(GError **err, int neg_errno, const char *path, const char *why)
{
    return vs_error_set(err, neg_errno, "secret file %s: %s", path, why);
}

static int read_secret(const char *path, char **user, char **password, GError **err)
{
    g_autofree char *why = NULL;
    char buf[ISCSI_MAX_SECRET + 2];
    struct stat st;
    ssize_t n;
    char *colon;
    int fd, ret = 0;

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return secret_error(err, -errno, path, g_strerror(errno));
    }
    if (fstat(fd, &st) < 0) {
        ret = secret_error(err, -errno, path, g_strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        ret = secret_error(err, -EINVAL, path, "not a regular file");
        goto out;
    }
    if (st.st_uid != geteuid()) {
        why = g_strdup_printf("owned by uid %u, not by us (uid %u); refusing it",
                              (unsigned)st.st_uid, (unsigned)geteuid());
        ret = secret_error(err, -EPERM, path, why);
        goto out;
    }
    if (st.st_mode & 077) {
        why = g_strdup_printf("mode %04o lets others read it; chmod 600 it",
                              (unsigned)(st.st_mode & 07777));
        ret = secret_error(err, -EPERM, path, why);
        goto out;
    }
    n = read(fd, buf, sizeof(buf) - 1);
    if (n < 0) {
        ret = secret_error(err, -errno, path, g_strerror(errno));
        goto out;
    }
    if (n > ISCSI_MAX_SECRET) {
        why = g_strdup_printf("longer than %d bytes", ISCSI_MAX_SECRET);
        ret = secret_error(err, -EINVAL, path, why);
        goto out;
    }
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    colon = strchr(buf, ':');
    if (colon) {
        *colon = '\0';
        *user = g_strdup(buf);
        *password = g_strdup(colon + 1);
    } else {
        *user = NULL;
        *password = g_strdup(buf);
    }
    if (!**password || (*user && !**user)) {
        g_clear_pointer(user, g_free);
        g_clear_pointer(password, g_free);
        ret = secret_error(err, -EINVAL, path, "expected USER:PASSWORD or PASSWORD");
    }
out:
    memset(buf, 0, sizeof(buf));
    close(fd);
    return ret;
}

/*
 * Resolves "HOST[:PORT]" once, here at the open: libiscsi resolves the
 * portal on every login, and a DNS lookup must not stall an I/O thread
 * while it reconnects.  Returns "ADDR:PORT" (IPv6 in brackets), or NULL
 * with *err.
 */
static char *resolve_portal(const char *portal, GError **err)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG };
    struct addrinfo *res = NULL;
    char addr[NI_MAXHOST];
    g_autofree char *host = NULL;
    const char *port = "3260";
    const char *colon;
    int gai;

    if (portal[0] == '[') {
        const char *end = strchr(portal, ']');

        if (!end) {
            vs_error_set(err, -EINVAL, "bad iSCSI portal \"%s\"", portal);
            return NULL;
        }
        host = g_strndup(portal + 1, end - portal - 1);
        if (end[1] == ':') {
            port = end + 2;
        }
    } else if ((colon = strchr(portal, ':')) && !strchr(colon + 1, ':')) {
        host = g_strndup(portal, colon - portal);
        port = colon + 1;
    } else {
        host = g_strdup(portal);     /* no port, or a bare IPv6 address */
    }
    gai = getaddrinfo(host, port, &hints, &res);
    if (gai || !res) {
        vs_error_set(err, -EHOSTUNREACH, "iSCSI portal %s: %s", portal,
                     gai ? gai_strerror(gai) : "no address");
        return NULL;
    }
    gai = getnameinfo(res->ai_addr, res->ai_addrlen, addr, sizeof(addr), NULL, 0,
                      NI_NUMERICHOST);
    if (gai) {
        vs_error_set(err, -EHOSTUNREACH, "iSCSI portal %s: %s", portal, gai_strerror(gai));
        freeaddrinfo(res);
        return NULL;
    }
    freeaddrinfo(res);
    return g_strdup_printf(strchr(addr, ':') ? "[%s]:%s" : "%s:%s", addr, port);
}

static char *default_initiator_name(void)
{
    char host[256] = "localhost";

    gethostname(host, sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    return g_strdup_printf("iqn.2026-12.org.vhost-scsi:%s", host);
}

/* Runs an INQUIRY; returns the unmarshalled task or NULL. */
static struct scsi_task *inquiry(struct opener *o, int lun, int evpd, int page, void **data)
{
    struct scsi_task *task = o->failed ? NULL
                                       : task_wait(o, iscsi_inquiry_task(o->ctx, lun, evpd, page,
                                                                         255, op_cb, op_start(o)));

    if (!task || task->status != SCSI_STATUS_GOOD ||
        !(*data = scsi_datain_unmarshall(task))) {
        if (task) {
            scsi_free_scsi_task(task);
        }
        return NULL;
    }
    return task;
}

/* Reads geometry, identity and provisioning over the open's session. */
static int probe(struct iscsi_lun *il, struct opener *o, GError **err)
{
    struct iscsi_context *ctx = o->ctx;
    struct scsi_task *task;
    struct scsi_readcapacity16 *rc;
    struct scsi_inquiry_standard *std;
    void *data;
    bool lbpme;
    int ret;

    task = task_wait(o, iscsi_readcapacity16_task(ctx, il->lun, op_cb, op_start(o)));
    if (!task || task->status != SCSI_STATUS_GOOD || !(rc = scsi_datain_unmarshall(task))) {
        if (task) {
            scsi_free_scsi_task(task);
        }
        return o->failed ? o->failed
                         : vs_error_set(err, -EIO, "READ CAPACITY(16) failed: %s",
                                        iscsi_get_error(ctx));
    }
    il->be.block_size = rc->block_length;
    il->be.size = (rc->returned_lba + 1) * (uint64_t)rc->block_length;
    lbpme = rc->lbpme;
    il->be.discard_zeroes = rc->lbprz;
    scsi_free_scsi_task(task);
    if (il->be.block_size != 512 && il->be.block_size != 4096) {
        return vs_error_set(err, -ENOTSUP, "remote block size %u is not supported (512 or 4096)",
                            il->be.block_size);
    }

    task = inquiry(o, il->lun, 0, 0, &data);
    if (!task) {
        return o->failed ? o->failed
                         : vs_error_set(err, -EIO, "INQUIRY failed: %s", iscsi_get_error(ctx));
    }
    std = data;
    if (std->qualifier != 0 || std->device_type != 0) {
        ret = vs_error_set(err, -ENOTSUP, "remote LUN is not a disk (qualifier %d, device type "
                           "%d)", std->qualifier, std->device_type);
        scsi_free_scsi_task(task);
        return ret;
    }
    g_strlcpy(il->vendor, g_strstrip(std->vendor_identification), sizeof(il->vendor));
    g_strlcpy(il->product, g_strstrip(std->product_identification), sizeof(il->product));
    scsi_free_scsi_task(task);

    task = inquiry(o, il->lun, 1, SCSI_INQUIRY_PAGECODE_UNIT_SERIAL_NUMBER, &data);
    if (task) {
        struct scsi_inquiry_unit_serial_number *sn = data;

        if (sn->usn) {
            g_strlcpy(il->serial, sn->usn, sizeof(il->serial));
            g_strstrip(il->serial);
        }
        scsi_free_scsi_task(task);
    }

    task = inquiry(o, il->lun, 1, SCSI_INQUIRY_PAGECODE_DEVICE_IDENTIFICATION, &data);
    if (task) {
        struct scsi_inquiry_device_identification *di = data;

        for (struct scsi_inquiry_device_designator *d = di->designators; d; d = d->next) {
            if (d->association == SCSI_ASSOCIATION_LOGICAL_UNIT &&
                d->designator_type == SCSI_DESIGNATOR_TYPE_NAA && d->designator_length >= 8) {
                uint64_t v = 0;

                for (int i = 0; i < 8; i++) {
                    v = v << 8 | (uint8_t)d->designator[i];
                }
                il->info.naa_id = v & ((1ull << 60) - 1);
                break;
            }
        }
        scsi_free_scsi_task(task);
    }

    task = inquiry(o, il->lun, 1, SCSI_INQUIRY_PAGECODE_BLOCK_LIMITS, &data);
    if (task) {
        struct scsi_inquiry_block_limits *bl = data;

        il->max_unmap = bl->max_unmap == 0xffffffffu ? 0 : bl->max_unmap;
        il->max_unmap_bdc = bl->max_unmap_bdc == 0xffffffffu ? 0 : bl->max_unmap_bdc;
        il->max_ws = bl->max_ws_len;
        /* Bigger commands would be refused there: report its limit instead. */
        if (bl->max_xfer_len && bl->max_xfer_len != 0xffffffffu) {
            uint64_t bytes = (uint64_t)bl->max_xfer_len * il->be.block_size;

            il->be.max_transfer = (uint32_t)MIN(bytes, (uint64_t)UINT32_MAX / il->be.block_size *
                                                il->be.block_size);
        }
        scsi_free_scsi_task(task);
    }

    if (lbpme) {
        task = inquiry(o, il->lun, 1, SCSI_INQUIRY_PAGECODE_LOGICAL_BLOCK_PROVISIONING,
                       &data);
        if (task) {
            struct scsi_inquiry_logical_block_provisioning *lbp = data;

            il->be.can_discard = lbp->lbpu;
            il->be.discard_zeroes = il->be.discard_zeroes || lbp->lbprz;
            scsi_free_scsi_task(task);
        } else {
            /* LBPME without the VPD page: UNMAP is what SBC-3 implies. */
            il->be.can_discard = true;
        }
    }
    if (!il->be.can_discard) {
        il->be.discard_zeroes = false;
    }
    /* The optional pages above are skipped when they fail, but not when the open ran out. */
    return o->failed;
}

int backend_iscsi_url_lun(const char *url, unsigned *lun, char **field)
{
    g_autofree char *rest = NULL;
    char *host, *iqn, *text;
    guint64 v;
    bool ok;

    if (field) {
        *field = NULL;
    }
    if (!g_str_has_prefix(url, "iscsi://")) {
        return -EINVAL;
    }
    /* libiscsi's order: cut the query, then USER[%PASSWORD]@, then HOST/IQN/LUN. */
    url += strlen("iscsi://");
    rest = g_strndup(url, strcspn(url, "?"));
    host = strchr(rest, '@');
    host = host ? host + 1 : rest;
    iqn = strchr(host, '/');
    text = iqn ? strchr(iqn + 1, '/') : NULL;
    if (!text) {
        return -EINVAL;
    }
    text++;
    /* No sign, no whitespace, nothing after the digits, no wrap-around. */
    ok = g_ascii_string_to_unsigned(text, 10, 0, BACKEND_ISCSI_MAX_LUN, &v, NULL);
    if (field) {
        *field = g_strdup(text);
    }
    if (!ok) {
        return -EINVAL;
    }
    *lun = v;
    return 0;
}

int backend_iscsi_open(const struct backend_iscsi_opts *o, struct lun_backend **out,
                       GError **err)
{
    g_autofree char *lun_text = NULL;
    unsigned lun;
    struct iscsi_lun *il = g_new0(struct iscsi_lun, 1);
    struct iscsi_context *ctx = NULL;
    struct opener conv = { .cancel_fd = -1 };
    struct iscsi_url *url = NULL;
    g_autofree char *file_user = NULL, *file_pass = NULL;
    int ret;

    il->be.ops = &iscsi_be_ops;
    il->be.name = g_strdup("iscsi");
    il->queue_depth = o->queue_depth ? o->queue_depth : ISCSI_DEFAULT_QUEUE_DEPTH;
    il->nsessions = o->sessions ? o->sessions : 1;
    il->login_timeout_s = o->login_timeout_s ? o->login_timeout_s : ISCSI_LOGIN_TIMEOUT_S;
    il->initiator = o->initiator_name ? g_strdup(o->initiator_name) : default_initiator_name();

    ctx = iscsi_create_context(il->initiator);
    if (!ctx) {
        ret = vs_error_set(err, -ENOMEM, "cannot make an iSCSI context");
        goto fail;
    }
    /* libiscsi's parser also knows the URL's CHAP and target-CHAP parts. */
    url = iscsi_parse_full_url(ctx, o->url);
    if (!url) {
        /* The URL may hold a password: name the problem, not the text. */
        ret = vs_error_set(err, -EINVAL, "bad iSCSI URL (expected iscsi://[USER[%%PASSWORD]@]"
                           "HOST[:PORT]/IQN/LUN): %s", iscsi_get_error(ctx));
        goto fail;
    }
    /* Not url->lun: libiscsi lets "-1" through and wraps 4294967296 to 0. */
    if (backend_iscsi_url_lun(o->url, &lun, &lun_text) < 0) {
        ret = vs_error_set(err, -EINVAL, "bad iSCSI LUN \"%s\" at the end of the URL "
                           "(expected 0-%d)", lun_text ? lun_text : "", BACKEND_ISCSI_MAX_LUN);
        goto fail;
    }
    il->portal = resolve_portal(url->portal, err);
    if (!il->portal) {
        ret = -EHOSTUNREACH;
        goto fail;
    }
    il->target = g_strdup(url->target);
    il->lun = lun;
    g_free(il->be.name);
    il->be.name = g_strdup_printf("iscsi://%s/%s/%d", url->portal, il->target, il->lun);
    if (url->user[0]) {
        il->user = g_strdup(url->user);
    } else {
        /* libiscsi drops a "USER@" that has no "%PASSWORD": take it ourselves. */
        const char *auth = o->url + strlen("iscsi://");
        const char *at = strchr(auth, '@'), *slash = strchr(auth, '/');

        if (at && at > auth && (!slash || at < slash) && !memchr(auth, '%', at - auth)) {
            il->user = g_strndup(auth, at - auth);
        }
    }
    if (url->passwd[0]) {
        il->password = g_strdup(url->passwd);
    }
    if (o->secret_file) {
        ret = read_secret(o->secret_file, &file_user, &file_pass, err);
        if (ret < 0) {
            goto fail;
        }
        if (il->password) {
            ret = vs_error_set(err, -EINVAL, "a password in both the URL and secret-file=; "
                               "give only one");
            goto fail;
        }
        if (file_user && il->user && strcmp(file_user, il->user)) {
            ret = vs_error_set(err, -EINVAL, "the secret file names user \"%s\" but the URL "
                               "\"%s\"", file_user, il->user);
            goto fail;
        }
        if (!file_user && !il->user) {
            ret = vs_error_set(err, -EINVAL, "the secret file holds only a password: put USER@ "
                               "in the URL or USER:PASSWORD in the file");
            goto fail;
        }
        if (file_user && !il->user) {
            il->user = g_steal_pointer(&file_user);
        }
        il->password = g_steal_pointer(&file_pass);
    }
    iscsi_destroy_url(url);
    url = NULL;

    iscsi_destroy_context(ctx);
    ctx = NULL;
    conv.ctx = iscsi_be_new_context(il, g_random_int() & 0xffffff);
    if (!conv.ctx) {
        ret = vs_error_set(err, -ENOMEM, "cannot make an iSCSI context");
        goto fail;
    }
    conv.name = il->be.name;
    conv.cancel_fd = o->cancel_fd;
    conv.deadline = g_get_monotonic_time() + (int64_t)il->login_timeout_s * G_USEC_PER_SEC;
    if (iscsi_full_connect_async(conv.ctx, il->portal, il->lun, op_cb, op_start(&conv)) != 0 ||
        (op_wait(&conv) == 0 && conv.op.status != SCSI_STATUS_GOOD) || conv.failed == -EIO) {
        g_autofree char *why = g_strstrip(g_strdup(iscsi_get_error(conv.ctx)));

        ret = strstr(why, "uthentication") || strstr(why, "uthorization") ? -EACCES
              : strstr(why, "timed out")                                  ? -ETIMEDOUT
                                                                          : -ECONNREFUSED;
        vs_error_set(err, ret, "cannot log in to %s as %s%s%s: %s", il->portal, il->initiator,
                     il->user ? " with CHAP user " : "", il->user ? il->user : "", why);
        goto fail;
    }
    iscsi_set_timeout(conv.ctx, ISCSI_TASK_TIMEOUT_S);
    /* Timed out or called off (op_wait said which). */
    ret = conv.failed;
    if (ret == 0) {
        ret = probe(il, &conv, err);
    }
    if (ret < 0) {
        /* A wait that ran out or was called off (op_wait) said nothing yet. */
        if (ret == -ETIMEDOUT && err && !*err) {
            vs_error_set(err, ret, "no answer within the login timeout (%u s)",
                         il->login_timeout_s);
        } else if (err && !*err) {
            vs_error_set(err, ret, "%s", ret == -ECANCELED ? "the open was called off"
                                                           : g_strerror(-ret));
        }
        goto fail;
    }
    /* A target that does not answer the logout costs at most what is left of the deadline. */
    if (iscsi_logout_async(conv.ctx, op_cb, op_start(&conv)) == 0) {
        op_wait(&conv);
    }
    opener_end(&conv);

    il->be.read_only = o->read_only;
    il->be.write_cache = true;
    il->zero_block = g_malloc0(il->be.block_size);
    if (il->max_ws == 0 || il->max_ws > 0x400000) {
        il->max_ws = 0x400000;
    }
    il->info.vendor = il->vendor;
    il->info.product = il->product;
    il->info.serial = il->serial[0] ? il->serial : NULL;
    g_message("%s: %s %s serial \"%s\", %" PRIu64 " bytes, %u-byte blocks%s, %u session(s) "
              "per thread, queue depth %u", il->be.name, il->vendor, il->product, il->serial,
              il->be.size, il->be.block_size, il->be.can_discard ? ", UNMAP" : "",
              il->nsessions, il->queue_depth);
    *out = &il->be;
    return 0;

fail:
    if (url) {
        iscsi_destroy_url(url);
    }
    if (ctx) {
        iscsi_destroy_context(ctx);
    }
    opener_end(&conv);
    iscsi_be_close(&il->be);
    return ret;
}
