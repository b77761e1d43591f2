/*
 * Specification of the daemon's backend registry and LUN mappings
 * (hw/daemon/target-backends.c), in-process: a backend is a named, opened
 * LUN the registry finds by name and by LUN; a name is taken once; one
 * file backs one backend, however it is spelt; a backend mapped
 * somewhere is not removed; an unmapping lets go of its LUN once its
 * commands have drained, and an implicit backend (--lun, lun-add) goes
 * with its last mapping.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "target-fixture.h"

#define assert_err(err, words) do {                                              \
        g_assert_nonnull(err);                                                   \
        g_assert_true((err)->domain == VS_ERROR);                                \
        if (!strstr((err)->message, (words))) {                                  \
            g_error("\"%s\" does not say \"%s\"", (err)->message, (words));      \
        }                                                                        \
    } while (0)

static void test_add_find(void)
{
    struct target_fixture f = { 0 };
    struct target_backend *b = NULL;
    g_autoptr(GError) err = NULL;

    target_fixture_start(&f, false);
    g_assert_null(target_backend_find(&f.tgt, "data"));
    g_assert_cmpint(target_backend_add(&f.tgt, "data", "ram:1M", false, &b, &err), ==, 0);
    g_assert_null(err);
    g_assert_nonnull(b);
    g_assert_true(target_backend_find(&f.tgt, "data") == b);
    g_assert_cmpstr(b->name, ==, "data");
    g_assert_cmpstr(b->spec, ==, "ram:1M");
    g_assert_false(b->implicit);
    g_assert_cmpuint(b->mappings, ==, 0);
    g_assert_true(target_backend_of(&f.tgt, b->lun) == b);
    target_fixture_end(&f);
}

static void test_add_refused(void)
{
    struct target_fixture f = { 0 };
    struct target_backend *b = NULL;
    GError *err = NULL;

    target_fixture_start(&f, false);
    g_assert_cmpint(target_backend_add(&f.tgt, "data", "ram:1M", false, &b, &err), ==, 0);

    g_assert_cmpint(target_backend_add(&f.tgt, "data", "null:1M", false, NULL, &err), ==,
                    -EEXIST);
    assert_err(err, "a backend named 'data' exists");
    g_clear_error(&err);
    /* The one there stays what it was. */
    g_assert_cmpstr(target_backend_find(&f.tgt, "data")->spec, ==, "ram:1M");

    g_assert_cmpint(target_backend_add(&f.tgt, "a b", "ram:1M", false, NULL, &err), ==,
                    -EINVAL);
    assert_err(err, "backend name 'a b'");
    g_clear_error(&err);

    g_assert_cmpint(target_backend_add(&f.tgt, "nosize", "ram:", false, NULL, &err), <, 0);
    g_assert_nonnull(err);
    g_clear_error(&err);
    g_assert_null(target_backend_find(&f.tgt, "nosize"));

    g_assert_cmpint(target_backend_add(&f.tgt, "missing", "file:/nonexistent/disk.img", false,
                                       NULL, &err), <, 0);
    assert_err(err, "/nonexistent/disk.img");
    g_clear_error(&err);
    g_assert_null(target_backend_find(&f.tgt, "missing"));
    target_fixture_end(&f);
}

/* Two backends over one file would be two LUNs whose reservations know nothing of each other. */
static void test_one_backing_object(void)
{
    struct target_fixture f = { 0 };
    g_autofree char *disk = NULL, *link = NULL, *spec = NULL, *spec2 = NULL;
    GError *err = NULL;

    target_fixture_start(&f, false);
    disk = target_fixture_file(&f, "disk.img", 1 << 20);
    link = target_fixture_path(&f, "other-name.img");
    g_assert_cmpint(symlink(disk, link), ==, 0);
    spec = g_strdup_printf("file:%s", disk);
    spec2 = g_strdup_printf("file:%s,ro", link);

    g_assert_cmpint(target_backend_add(&f.tgt, "a", spec, false, NULL, &err), ==, 0);
    g_assert_cmpint(target_backend_add(&f.tgt, "b", spec, false, NULL, &err), ==, -EEXIST);
    assert_err(err, "one file backs one backend");
    assert_err(err, "backend a");
    g_clear_error(&err);
    /* Another spelling of the same file is the same file. */
    g_assert_cmpint(target_backend_add(&f.tgt, "c", spec2, false, NULL, &err), ==, -EEXIST);
    assert_err(err, "backend a");
    g_clear_error(&err);
    g_assert_null(target_backend_find(&f.tgt, "b"));
    g_assert_null(target_backend_find(&f.tgt, "c"));

    /* Once it is gone, the file may back another. */
    g_assert_cmpint(target_backend_remove(&f.tgt, "a", &err), ==, 0);
    g_assert_cmpint(target_backend_add(&f.tgt, "b", spec, false, NULL, &err), ==, 0);
    target_fixture_end(&f);
}

/* Unmappings are answered on the main loop, once their LUN's commands have drained. */
struct unmaps {
    struct target_fixture *f;
    unsigned left;
    void (*then)(struct unmaps *u);     /* once none is left, in the loop */
    int ret[4];
    unsigned n;
    struct target_backend *b;
};

static void unmapped(int ret, void *opaque)
{
    struct unmaps *u = opaque;

    u->ret[u->n++] = ret;
    if (--u->left == 0 && u->then) {
        u->then(u);
    }
}

/* Both mappings handed back: the backend added by name is left, and may go now. */
static void remove_when_unmapped(struct unmaps *u)
{
    struct target *tgt = &u->f->tgt;
    GError *err = NULL;

    g_assert_cmpuint(u->b->mappings, ==, 0);
    g_assert_cmpuint(scsi_target_lun_count(target_controller_find(tgt, NULL)->scsi), ==, 0);
    g_assert_true(target_backend_find(tgt, "data") == u->b);
    g_assert_cmpint(target_backend_remove(tgt, "data", &err), ==, 0);
    g_assert_null(target_backend_find(tgt, "data"));
    g_assert_cmpint(target_backend_remove(tgt, "data", &err), ==, -ENOENT);
    assert_err(err, "no backend named 'data'");
    g_clear_error(&err);
}

static void test_remove_while_mapped(void)
{
    struct target_fixture f = { 0 };
    struct controller *ctrl;
    struct target_backend *b = NULL;
    struct unmaps u = { .f = &f, .left = 2, .then = remove_when_unmapped };
    GError *err = NULL;

    target_fixture_start(&f, false);
    ctrl = target_controller_find(&f.tgt, NULL);
    g_assert_nonnull(ctrl);
    g_assert_cmpint(target_backend_add(&f.tgt, "data", "ram:1M", false, &b, &err), ==, 0);
    u.b = b;

    g_assert_cmpint(target_lun_map(ctrl, 0, 1, "nope", &err), ==, -ENOENT);
    assert_err(err, "no backend named 'nope'");
    g_clear_error(&err);

    g_assert_cmpint(target_lun_map(ctrl, 0, 1, "data", &err), ==, 0);
    g_assert_cmpint(target_lun_map(ctrl, 0, 1, "data", &err), ==, -EEXIST);
    assert_err(err, "LUN 0:1 is already mapped");
    g_clear_error(&err);
    g_assert_cmpint(target_lun_map(ctrl, 0, 2, "data", &err), ==, 0);
    g_assert_cmpuint(b->mappings, ==, 2);
    g_assert_cmpuint(scsi_target_lun_count(ctrl->scsi), ==, 2);

    g_assert_cmpint(target_backend_remove(&f.tgt, "data", &err), ==, -EBUSY);
    assert_err(err, "mapped 2 time(s); unmap it first");
    g_clear_error(&err);
    g_assert_true(target_backend_find(&f.tgt, "data") == b);

    target_lun_unmap(ctrl, 0, 1, unmapped, &u);
    target_lun_unmap(ctrl, 0, 2, unmapped, &u);
    /* While it is being unmapped it is not closed either. */
    g_assert_cmpint(target_backend_remove(&f.tgt, "data", &err), ==, -EBUSY);
    g_clear_error(&err);
    target_fixture_drain(&f);
    target_fixture_run(&f);
    g_assert_cmpuint(u.n, ==, 2);
    g_assert_cmpint(u.ret[0], ==, 0);
    g_assert_cmpint(u.ret[1], ==, 0);
    g_assert_null(target_backend_find(&f.tgt, "data"));
    target_fixture_end(&f);
}

/* --lun and lun-add: a backend of its own, named for its address, gone with its mapping. */
static void test_implicit(void)
{
    struct target_fixture f = { 0 };
    struct controller *ctrl;
    struct target_backend *b;
    struct unmaps u = { .f = &f, .left = 2 };
    unsigned port = 99, lun = 99;
    GError *err = NULL;

    target_fixture_start(&f, false);
    ctrl = target_controller_find(&f.tgt, NULL);
    g_assert_cmpint(target_lun_add(ctrl, "3=ram:1M", &port, &lun, &err), ==, 0);
    g_assert_cmpuint(port, ==, 0);
    g_assert_cmpuint(lun, ==, 3);
    b = target_backend_find(&f.tgt, "lun0:3");
    g_assert_nonnull(b);
    g_assert_true(b->implicit);
    g_assert_cmpuint(b->mappings, ==, 1);

    g_assert_cmpint(target_lun_add(ctrl, "3=null:1M", &port, &lun, &err), ==, -EEXIST);
    assert_err(err, "LUN 0:3 is already mapped");
    g_clear_error(&err);

    /* Nothing at that address: answered at once. */
    target_lun_unmap(ctrl, 0, 4, unmapped, &u);
    g_assert_cmpuint(u.n, ==, 1);
    g_assert_cmpint(u.ret[0], ==, -ENOENT);

    target_lun_unmap(ctrl, 0, 3, unmapped, &u);
    target_fixture_drain(&f);
    target_fixture_run(&f);
    g_assert_cmpuint(u.n, ==, 2);
    g_assert_cmpint(u.ret[1], ==, 0);
    g_assert_null(target_backend_find(&f.tgt, "lun0:3"));
    target_fixture_end(&f);
}

int main(int argc, char **argv)
{
    target_fixture_test_init(&argc, &argv);
    g_test_add_func("/target-backends/add-find", test_add_find);
    g_test_add_func("/target-backends/add-refused", test_add_refused);
    g_test_add_func("/target-backends/one-backing-object", test_one_backing_object);
    g_test_add_func("/target-backends/remove-while-mapped", test_remove_while_mapped);
    g_test_add_func("/target-backends/implicit", test_implicit);
    return g_test_run();
}
