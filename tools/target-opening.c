/*
 * The control socket's backend-add and lun-add (tools/target.h), which
 * may finish later: a backend whose open waits on the network (iSCSI:
 * connect and log in, bounded by its login-timeout) is opened on a thread
 * of its own, so that the main thread goes on serving every front-end's
 * vhost-user messages and every other control call meanwhile.  Until the
 * thread posts back, the backend's name and, for lun-add, its (target,
 * LUN) address are reserved: another add of either is refused -EBUSY
 * ("still opening"), and nothing of the backend is listed.  The main
 * thread then finishes the add exactly as the synchronous path does
 * (target-backends.c: SCSI disk, attach to the I/O threads, map, events
 * to the front-ends).  A failed open leaves nothing behind; a daemon
 * asked to stop calls the opens off (their adds fail -ECANCELED at once)
 * and quits once their threads have ended.  Backends that open at once
 * (files, RAM, null) stay synchronous.  Main thread only, but for
 * open_thread.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <glib.h>

#include "backend.h"
#include "lun-open.h"
#include "target.h"

/*
 * Each open holds a thread and an eventfd until the remote answers or
 * its timeout ends; beyond this many at once an add is refused (-EAGAIN)
 * rather than let control clients pile threads up.
 */
#define MAX_OPENINGS 16

struct target_opening {
    struct target *tgt;
    char *name;              /* the backend name it reserves */
    char *spec;              /* SPEC, without "ID=" */
    bool implicit;
    /* lun-add: its controller, looked up again at the end (NULL: backend-add). */
    char *ctrl_name;
    unsigned port, lun;      /* lun-add: the address it reserves */
    struct lun_spec ls;      /* read by the thread */
    int cancel_fd;           /* an eventfd: written to call the open off */
    GThread *thread;
    target_added_fn *done;   /* NULL once answered (called off) */
    void *opaque;
    /* The thread's result, read by the main thread once it has posted. */
    struct lun_backend *be;
    int ret;
};

bool target_opening_name(struct target *tgt, const char *name)
{
    for (GList *l = tgt->openings; l; l = l->next) {
        if (!strcmp(((struct target_opening *)l->data)->name, name)) {
            return true;
        }
    }
    return false;
}

bool target_opening_slot(struct controller *ctrl, unsigned port, unsigned lun)
{
    for (GList *l = ctrl->tgt->openings; l; l = l->next) {
        struct target_opening *o = l->data;

        if (o->ctrl_name && !strcmp(o->ctrl_name, ctrl->name) && o->port == port &&
            o->lun == lun) {
            return true;
        }
    }
    return false;
}

static void opening_free(struct target_opening *o)
{
    lun_spec_clear(&o->ls);
    if (o->cancel_fd >= 0) {
        close(o->cancel_fd);
    }
    g_free(o->name);
    g_free(o->spec);
    g_free(o->ctrl_name);
    g_free(o);
}

static void answer(struct target_opening *o, struct target_added *a)
{
    target_added_fn *done = o->done;

    o->done = NULL;
    a->tgt = o->tgt;
    done(a, o->opaque);
}

/* The rest of the add, on the main thread, as the synchronous path does it. */
static void finish(struct target_opening *o, struct target_added *a, char **err)
{
    struct target *tgt = o->tgt;

    if (o->ret < 0) {
        g_autofree char *shown = lun_spec_redact(o->spec);

        *err = g_strdup_printf("%s: cannot open: %s", shown, g_strerror(-o->ret));
        a->ret = o->ret;
        return;
    }
    a->ret = target_backend_install(tgt, o->name, o->spec, o->implicit, o->be, &a->backend,
                                    err);
    if (a->ret < 0 || !o->ctrl_name) {
        return;
    }
    a->ctrl = target_controller_find(tgt, o->ctrl_name);
    if (!a->ctrl) {
        g_autofree char *ignored = NULL;

        *err = g_strdup_printf("controller %s was removed while the LUN opened", o->ctrl_name);
        a->ret = -ENOENT;
        target_backend_remove(tgt, o->name, &ignored);
        return;
    }
    a->port = o->port;
    a->lun = o->lun;
    a->ret = target_lun_map_implicit(a->ctrl, o->port, o->lun, o->name, err);
}

/* Posted by the thread as its last act: the thread is ending, the reservation goes. */
static void opened(void *opaque)
{
    struct target_opening *o = opaque;
    struct target *tgt = o->tgt;
    g_autofree char *err = NULL;
    struct target_added a = { 0 };

    g_thread_join(o->thread);
    tgt->openings = g_list_remove(tgt->openings, o);
    if (o->done) {
        finish(o, &a, &err);
        a.err = err;
        answer(o, &a);
    } else if (o->ret == 0) {
        /* Called off, and answered so, after all: it opened too late. */
        backend_close(o->be);
    }
    opening_free(o);
    target_maybe_quit(tgt);
}

static gpointer open_thread(gpointer opaque)
{
    struct target_opening *o = opaque;

    o->ret = lun_spec_open_cancellable(&o->ls, o->cancel_fd, &o->be);
    iothread_post(o->tgt->main, opened, o);
    return NULL;
}

/*
 * Starts the open of o (its name, spec and address filled in); answers it
 * at once if it cannot start.
 */
static void start(struct target_opening *o)
{
    struct target *tgt = o->tgt;
    g_autoptr(GError) gerr = NULL;
    struct target_added a = { 0 };

    if (g_list_length(tgt->openings) >= MAX_OPENINGS) {
        g_autofree char *err = g_strdup_printf("%s: %u backends are opening already; try "
                                               "again when one has finished", o->name,
                                               MAX_OPENINGS);

        a.ret = -EAGAIN;
        a.err = err;
        answer(o, &a);
        opening_free(o);
        return;
    }
    o->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (o->cancel_fd >= 0) {
        /* The thread reads o->ls and writes o->be / o->ret until it posts. */
        o->thread = g_thread_try_new("vs-open", open_thread, o, &gerr);
    }
    if (!o->thread) {
        g_autofree char *err = g_strdup_printf("%s: cannot start opening it: %s", o->name,
                                               gerr ? gerr->message : g_strerror(errno));

        a.ret = -EAGAIN;
        a.err = err;
        answer(o, &a);
        opening_free(o);
        return;
    }
    tgt->openings = g_list_prepend(tgt->openings, o);
    g_message("backend %s: opening", o->name);
}

static struct target_opening *opening_new(struct target *tgt, target_added_fn *done,
                                          void *opaque)
{
    struct target_opening *o = g_new0(struct target_opening, 1);

    o->tgt = tgt;
    o->cancel_fd = -1;
    o->done = done;
    o->opaque = opaque;
    return o;
}

void target_backend_add_async(struct target *tgt, const char *name, const char *spec,
                              target_added_fn *done, void *opaque)
{
    struct target_opening *o = opening_new(tgt, done, opaque);
    g_autofree char *err = NULL;
    struct target_added a = { 0 };

    a.ret = target_backend_name_free(tgt, name, &err);
    if (a.ret == 0) {
        a.ret = target_backend_parse(spec, &o->ls, &err);
    }
    if (a.ret == 0 && lun_spec_opens_slowly(&o->ls)) {
        o->name = g_strdup(name);
        o->spec = g_strdup(spec);
        start(o);
        return;
    }
    if (a.ret == 0) {
        a.ret = target_backend_add(tgt, name, spec, false, &a.backend, &err);
    }
    a.err = err;
    answer(o, &a);
    opening_free(o);
}

void target_lun_add_async(struct controller *ctrl, const char *arg, target_added_fn *done,
                          void *opaque)
{
    struct target_opening *o = opening_new(ctrl->tgt, done, opaque);
    g_autofree char *err = NULL;
    struct target_added a = { 0 };

    a.ret = target_lun_add_check(ctrl, arg, &o->port, &o->lun, &o->name, &err);
    if (a.ret == 0) {
        a.ret = target_backend_parse(strchr(arg, '=') + 1, &o->ls, &err);
    }
    if (a.ret == 0 && lun_spec_opens_slowly(&o->ls)) {
        o->spec = g_strdup(strchr(arg, '=') + 1);
        o->implicit = true;
        o->ctrl_name = g_strdup(ctrl->name);
        start(o);
        return;
    }
    if (a.ret == 0) {
        a.ret = target_lun_add(ctrl, arg, &a.port, &a.lun, &err);
        a.ctrl = ctrl;
    }
    a.err = err;
    answer(o, &a);
    opening_free(o);
}

void target_openings_cancel(struct target *tgt)
{
    for (GList *l = tgt->openings; l; l = l->next) {
        struct target_opening *o = l->data;
        struct target_added a = { .ret = -ECANCELED, .err = "the daemon is shutting down" };
        uint64_t one = 1;

        if (!o->done) {
            continue;
        }
        /* An eventfd write of 1 cannot block: the counter is far from full. */
        if (write(o->cancel_fd, &one, sizeof(one)) != sizeof(one)) {
            g_warning("backend %s: cannot call its open off: %s", o->name, g_strerror(errno));
        }
        answer(o, &a);
    }
}
