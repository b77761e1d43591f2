/*
 * Parsing LUN specs with the backends' checks, and opening the backend a
 * struct lun_spec describes: the grammar is hw/block/lun-spec.c's, the
 * backends are the scsi (RAM, null, hold), uring (files and block devices),
 * iscsi and rbd layers'.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>

#include "lun-open.h"

int lun_spec_parse_full(const char *arg, struct lun_spec *out, GError **err)
{
    static const struct lun_spec_checks checks = {
        .iscsi_url_lun = backend_iscsi_url_lun,
        .iscsi_max_lun = BACKEND_ISCSI_MAX_LUN,
    };

    return lun_spec_parse_checked(arg, &checks, out, err);
}

bool lun_spec_opens_slowly(const struct lun_spec *s)
{
    return s->kind == LUN_SPEC_ISCSI || s->kind == LUN_SPEC_RBD;
}

int lun_spec_open(const struct lun_spec *s, struct lun_backend **out, GError **err)
{
    return lun_spec_open_cancellable(s, -1, out, err);
}

static int open_kind(const struct lun_spec *s, int cancel_fd, struct lun_backend **out,
                     GError **err);

int lun_spec_open_cancellable(const struct lun_spec *s, int cancel_fd, struct lun_backend **out,
                              GError **err)
{
    GError *why = NULL;
    int ret = open_kind(s, cancel_fd, out, &why);

    if (ret == 0) {
        (*out)->allow_sanitize = s->sanitize;
        return 0;
    }
    /* A backend that failed without saying why still gets its errno said. */
    if (!why) {
        vs_error_set(&why, ret, "%s", g_strerror(-ret));
    }
    g_propagate_error(err, why);
    return ret;
}

/* Opens the backend of s's kind with its options. */
static int open_kind(const struct lun_spec *s, int cancel_fd, struct lun_backend **out,
                     GError **err)
{
    struct backend_file_opts fo;
    uint32_t bs = s->block_size ? s->block_size : 512;
    int ret;

    switch (s->kind) {
    case LUN_SPEC_FILE:
        fo = (struct backend_file_opts) {
            .path = s->path,
            .read_only = s->ro,
            .direct = s->direct,
            .block_size = s->block_size,
            .size = s->size,
            .phys_block_size = s->phys_block_size,
        };
        return backend_file_open(&fo, out, err);
    case LUN_SPEC_HOLD:
#ifdef VHOST_SCSI_TEST_HOOKS
        return backend_hold_new(s->size, bs, s->path, out, err);
#else
        /* the grammar has no hold: without the hooks */
        return vs_error_set(err, -ENOTSUP, "no hold: backend in this build");
#endif
    case LUN_SPEC_RAM:
    case LUN_SPEC_NULL:
        ret = s->kind == LUN_SPEC_RAM ? backend_ram_new(s->size, bs, out, err)
              : s->null_no_fill       ? backend_null_nofill_new(s->size, bs, out, err)
                                      : backend_null_new(s->size, bs, out, err);
        if (ret == 0 && s->ro) {
            (*out)->read_only = true;
        }
        if (ret == 0) {
            (*out)->phys_block_size = s->phys_block_size;
        }
        return ret;
    case LUN_SPEC_ISCSI: {
        struct backend_iscsi_opts io = {
            .url = s->path,
            .read_only = s->ro,
            .queue_depth = s->queue_depth,
            .sessions = s->sessions,
            .secret_file = s->secret_file,
            .initiator_name = s->initiator_name,
            .login_timeout_s = s->login_timeout,
            .cancel_fd = cancel_fd,
        };

        return backend_iscsi_open(&io, out, err);
    }
    case LUN_SPEC_RBD: {
        struct backend_rbd_opts ro = {
            .pool = s->rbd_pool,
            .image = s->rbd_image,
            .snap = s->rbd_snap,
            .conf = s->rbd_conf,
            .client_id = s->rbd_id,
            .keyring = s->rbd_keyring,
            .read_only = s->ro,
            .busy_timeout_s = s->busy_timeout,
            .cancel_fd = cancel_fd,
        };

        return backend_rbd_open(&ro, out, err);
    }
    }
    return vs_error_set(err, -EINVAL, "no backend of kind %d", (int)s->kind);
}
