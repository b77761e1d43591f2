/*
 * The daemon's LUN operations (tools/target.h): opening a backend from a
 * --lun argument, attaching it to every I/O thread and mapping it; and
 * live, from the control socket, unmapping (the SCSI target hands the LUN
 * back once no thread can reach it and its commands have drained; then
 * it is detached from the threads and closed) and growing.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include <glib.h>

#include "backend.h"
#include "lun-open.h"
#include "target.h"

/*
 * Backends with per-thread state (iSCSI sessions) set it up on each I/O
 * thread, from that thread, before any request can arrive, and tear it
 * down there once none can.
 */
struct thread_lun_call {
    struct lun_backend *be;
    struct iothread *t;
    int ret;
};

static void call_attach(void *opaque)
{
    struct thread_lun_call *c = opaque;

    c->ret = c->be->ops->attach_thread(c->be, c->t);
}

static void call_detach(void *opaque)
{
    struct thread_lun_call *c = opaque;

    c->be->ops->detach_thread(c->be, c->t);
}

/* Detaches be from threads[0..n). */
static void detach_backend(struct target *tgt, struct lun_backend *be, unsigned n)
{
    for (unsigned j = 0; j < n && be->ops->detach_thread; j++) {
        struct thread_lun_call c = { .be = be, .t = tgt->threads[j] };

        iothread_run_sync(c.t, call_detach, &c);
    }
}

static int attach_backend(struct target *tgt, struct lun_backend *be, char **err)
{
    for (unsigned j = 0; j < tgt->nthreads && tgt->threads[j] && be->ops->attach_thread; j++) {
        struct thread_lun_call c = { .be = be, .t = tgt->threads[j] };

        iothread_run_sync(c.t, call_attach, &c);
        if (c.ret < 0) {
            *err = g_strdup_printf("%s: cannot start on %s: %s", be->name, iothread_name(c.t),
                                   g_strerror(-c.ret));
            detach_backend(tgt, be, j);
            return c.ret;
        }
    }
    return 0;
}

int target_attach_luns(struct target *tgt, bool attach)
{
    for (unsigned i = 0; i < scsi_target_lun_count(tgt->scsi); i++) {
        struct lun_backend *be = scsi_lun_backend(scsi_target_lun_at(tgt->scsi, i));
        g_autofree char *err = NULL;

        if (!attach) {
            detach_backend(tgt, be, tgt->nthreads);
        } else if (attach_backend(tgt, be, &err) < 0) {
            fprintf(stderr, "vhost-scsi-target: %s\n", err);
            return -EIO;
        }
    }
    return 0;
}

int target_lun_add(struct target *tgt, const char *arg, unsigned *port, unsigned *lun_id,
                   char **err)
{
    /* Messages show the argument without an iSCSI password. */
    g_autofree char *shown = lun_spec_redact(arg);
    g_autofree char *why = NULL;
    struct lun_spec spec;
    struct lun_backend *be;
    struct scsi_lun *lun;
    char name[32];
    int ret;

    ret = lun_spec_parse_full(arg, &spec, &why);
    if (ret < 0) {
        *err = g_strdup_printf("%s: %s", shown, why ? why : g_strerror(-ret));
        return ret;
    }
    if (scsi_target_lun(tgt->scsi, spec.target, spec.lun)) {
        *err = g_strdup_printf("%s: LUN %u:%u is already mapped", shown, spec.target, spec.lun);
        lun_spec_clear(&spec);
        return -EEXIST;
    }
    ret = lun_spec_open(&spec, &be);
    if (ret < 0) {
        *err = g_strdup_printf("%s: cannot open: %s", shown, g_strerror(-ret));
        lun_spec_clear(&spec);
        return ret;
    }
    snprintf(name, sizeof(name), "lun%u:%u", spec.target, spec.lun);
    /* A backend may answer INQUIRY with another device's identity (iSCSI). */
    lun = scsi_lun_new(be, name, be->ops->identity ? be->ops->identity(be) : NULL);
    if (!lun) {
        *err = g_strdup_printf("%s: cannot serve it as a SCSI disk", shown);
        lun_spec_clear(&spec);
        return -EINVAL;
    }
    /* Only a daemon already running has threads to attach to; at start they come later. */
    if (tgt->threads && attach_backend(tgt, be, &why) < 0) {
        *err = g_strdup_printf("%s: %s", shown, why);
        scsi_lun_free(lun);
        lun_spec_clear(&spec);
        return -EIO;
    }
    g_message("%s: %s, %" PRIu64 " bytes, %u-byte blocks%s", name, be->name, backend_size(be),
              be->block_size, be->read_only ? ", read-only" : "");
    ret = scsi_target_add_lun(tgt->scsi, spec.target, spec.lun, lun);
    if (ret < 0) {
        *err = g_strdup_printf("%s: %s", shown, ret == -EEXIST ? "LUN given twice"
                                                               : g_strerror(-ret));
        if (tgt->threads) {
            detach_backend(tgt, be, tgt->nthreads);
        }
        scsi_lun_free(lun);
    }
    *port = spec.target;
    *lun_id = spec.lun;
    lun_spec_clear(&spec);
    return ret;
}

struct removal {
    struct target *tgt;
    void (*done)(int ret, void *opaque);
    void *opaque;
};

static void lun_handed_back(struct scsi_lun *lun, void *opaque)
{
    struct removal *r = opaque;

    detach_backend(r->tgt, scsi_lun_backend(lun), r->tgt->nthreads);
    scsi_lun_free(lun);
    r->tgt->removing--;
    if (r->done) {
        r->done(0, r->opaque);
    }
    target_maybe_quit(r->tgt);
    g_free(r);
}

void target_lun_remove(struct target *tgt, unsigned port, unsigned lun,
                       void (*done)(int ret, void *opaque), void *opaque)
{
    struct removal *r = g_new0(struct removal, 1);
    int ret;

    r->tgt = tgt;
    r->done = done;
    r->opaque = opaque;
    tgt->removing++;
    ret = scsi_target_remove_lun(tgt->scsi, port, lun, lun_handed_back, r);
    if (ret < 0) {
        tgt->removing--;
        g_free(r);
        if (done) {
            done(ret, opaque);
        }
    }
}

int target_lun_resize(struct target *tgt, unsigned port, unsigned lun, uint64_t size)
{
    return scsi_target_resize_lun(tgt->scsi, port, lun, size);
}
