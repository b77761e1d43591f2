/*
 * The lio tests' harness (lio-fixture.h): the scratch directory with its
 * fake configfs, paths and attributes below it, snapshots, collected
 * messages, the errors a refusal returns, the step-by-step failure driver
 * and vhost-scsi-ctl.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>

#include "lio-configfs.h"
#include "lio-fs-fake.h"
#include "lio-fixture.h"
#include "vs-error.h"

static void rm_rf(const char *p)
{
    GDir *d = g_dir_open(p, 0, NULL);
    const char *n;
    while (d && (n = g_dir_read_name(d))) {
        g_autofree char *c = g_build_filename(p, n, NULL);
        if (g_file_test(c, G_FILE_TEST_IS_DIR) && !g_file_test(c, G_FILE_TEST_IS_SYMLINK)) {
            rm_rf(c);
        } else {
            unlink(c);
        }
    }
    if (d) {
        g_dir_close(d);
    }
    rmdir(p);
}

void fx_setup(struct fx *f, gconstpointer data)
{
    f->dir = g_dir_make_tmp("lio-test-XXXXXX", NULL);
    g_assert_nonnull(f->dir);
    f->root = g_build_filename(f->dir, "configfs", NULL);
    f->fake = lio_fake_new(f->root);
    struct lio_options o = {
        .configfs = f->root, .setup_kernel = true, .fs = &lio_fake_ops, .fs_opaque = f->fake,
    };
    g_assert_cmpint(lio_open(&o, &f->lio, NULL), ==, 0);
}

void fx_teardown(struct fx *f, gconstpointer data)
{
    lio_close(f->lio);
    lio_fake_free(f->fake);
    rm_rf(f->dir);
    g_free(f->dir);
    g_free(f->root);
}

/* Path under the fake configfs root. */
char *cf(struct fx *f, const char *rel)
{
    return g_build_filename(f->root, rel, NULL);
}

char *scratch(struct fx *f, const char *name)
{
    return g_build_filename(f->dir, name, NULL);
}

char *save_text(struct fx *f, const char *name, enum lio_format format)
{
    g_autofree char *p = scratch(f, name);
    g_assert_cmpint(lio_save(f->lio, p, format, NULL), ==, 0);
    return slurp(p);
}

char *slurp(const char *path)
{
    char *s = NULL;
    g_assert_true(g_file_get_contents(path, &s, NULL, NULL));
    return s;
}

bool exists(struct fx *f, const char *rel)
{
    g_autofree char *p = cf(f, rel);
    return g_file_test(p, G_FILE_TEST_EXISTS) || g_file_test(p, G_FILE_TEST_IS_SYMLINK);
}

unsigned count_entries(struct fx *f, const char *rel)
{
    g_autofree char *p = cf(f, rel);
    GDir *d = g_dir_open(p, 0, NULL);
    unsigned n = 0;
    while (d && g_dir_read_name(d)) {
        n++;
    }
    if (d) {
        g_dir_close(d);
    }
    return n;
}

void assert_error(GError **err, int code, const char *pattern)
{
    g_assert_nonnull(*err);
    if (!g_pattern_match_simple(pattern, (*err)->message)) {
        g_error("error \"%s\" does not match \"%s\"", (*err)->message, pattern);
    }
    g_assert_error(*err, VS_ERROR, code);
    g_clear_error(err);
}

void add_file_lun(struct fx *f, const char *wwpn, unsigned lun, const char *name,
                         const char *size)
{
    g_autofree char *img = scratch(f, name);
    g_autofree char *spec = g_strdup_printf("file:%s,size=%s", img, size);
    g_assert_cmpint(lio_lun_add(f->lio, wwpn, 1, lun, spec, NULL), ==, 0);
}

/* A scratch path the fake presents as a 64 MiB block device. */
char *fake_blockdev(struct fx *f, const char *name)
{
    char *p = scratch(f, name);
    lio_fake_add_blockdev(f->fake, p, 64 << 20);
    return p;
}

char *attr(struct fx *f, const char *rel)
{
    g_autofree char *p = cf(f, rel);
    char *s = NULL;
    return g_file_get_contents(p, &s, NULL, NULL) ? s : NULL;
}

static gint cmp_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The whole scratch directory as text: each entry with its type, a link's
 * target, a file's size and, under the fake configfs, its contents.  Two
 * equal snapshots mean nothing was left behind or taken away.
 */
static void snapshot_dir(struct fx *f, const char *dir, GString *out)
{
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *n;
    while (d && (n = g_dir_read_name(d))) {
        g_ptr_array_add(names, g_strdup(n));
    }
    g_ptr_array_sort(names, cmp_names);
    for (guint i = 0; i < names->len; i++) {
        g_autofree char *p = g_build_filename(dir, names->pdata[i], NULL);
        struct stat st;
        g_assert_cmpint(lstat(p, &st), ==, 0);
        if (S_ISLNK(st.st_mode)) {
            g_autofree char *to = g_file_read_link(p, NULL);
            g_string_append_printf(out, "l %s -> %s\n", p, to);
        } else if (S_ISDIR(st.st_mode)) {
            g_string_append_printf(out, "d %s\n", p);
            snapshot_dir(f, p, out);
        } else if (g_str_has_prefix(p, f->root)) {
            g_autofree char *text = slurp(p);
            g_string_append_printf(out, "f %s = %s\n", p, text);
        } else {
            g_string_append_printf(out, "f %s %jd bytes\n", p, (intmax_t)st.st_size);
        }
    }
}

char *snapshot(struct fx *f)
{
    GString *s = g_string_new(NULL);
    snapshot_dir(f, f->dir, s);
    return g_string_free(s, FALSE);
}

static void collect(const gchar *domain, GLogLevelFlags level, const gchar *msg, gpointer data)
{
    g_ptr_array_add(data, g_strdup(msg));
}

void collect_begin(struct collected *c)
{
    c->msgs = g_ptr_array_new_with_free_func(g_free);
    c->handler = g_log_set_handler(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE, collect, c->msgs);
}

void collect_end(struct collected *c)
{
    g_log_remove_handler(G_LOG_DOMAIN, c->handler);
    g_ptr_array_unref(c->msgs);
}

/*
 * Runs fn with each of its changes failing in turn (the first, then the
 * second, ...) until it succeeds: every failure must come back as one
 * VS_ERROR EIO naming one of names (warnings stay fatal: the library logs
 * nothing) and leave the scratch directory as it was.  Returns how many
 * changes the successful run made.
 */
unsigned fail_each_step(struct fx *f, step_fn fn, gconstpointer arg,
                        const char *const *names)
{
    for (unsigned n = 1;; n++) {
        g_autofree char *before = snapshot(f);
        g_autoptr(GError) err = NULL;
        unsigned start = lio_fake_changes(f->fake);
        lio_fake_fail_at(f->fake, n, EIO);
        int ret = fn(f, arg, &err);
        lio_fake_fail_at(f->fake, 0, 0);
        if (ret == 0) {
            g_assert_no_error(err);
            return lio_fake_changes(f->fake) - start;
        }
        g_assert_nonnull(err);
        g_test_message("change %u failing (%s): %s", n, lio_fake_failed(f->fake), err->message);
        g_assert_cmpint(ret, ==, -EIO);
        g_assert_error(err, VS_ERROR, EIO);
        bool named = false;
        for (const char *const *nm = names; *nm; nm++) {
            named = named || strstr(err->message, *nm);
        }
        if (!named) {
            g_error("change %u: \"%s\" names none of the objects", n, err->message);
        }
        g_autofree char *after = snapshot(f);
        g_assert_cmpstr(after, ==, before);
    }
}

bool ctl_available(void)
{
    if (!g_getenv("VHOST_SCSI_CTL")) {
        g_test_skip("VHOST_SCSI_CTL not set (run through meson test)");
        return false;
    }
    return true;
}

int run_ctl(struct fx *f, char **out, char **err, const char *arg, ...)
{
    const char *ctl = g_getenv("VHOST_SCSI_CTL");
    g_assert_nonnull(ctl);
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    const char *fixed[] = { ctl, "lio", "--configfs", f->root };
    for (size_t i = 0; i < G_N_ELEMENTS(fixed); i++) {
        g_ptr_array_add(argv, (char *)fixed[i]);
    }
    va_list ap;
    va_start(ap, arg);
    for (const char *a = arg; a; a = va_arg(ap, const char *)) {
        g_ptr_array_add(argv, (char *)a);
    }
    va_end(ap);
    g_ptr_array_add(argv, NULL);
    int status;
    GError *e = NULL;
    if (!g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, out, err,
                      &status, &e)) {
        g_error("running %s: %s", ctl, e->message);
    }
    g_assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}
