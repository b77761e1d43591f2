/*
 * Specification of the file backend (hw/block/backend-uring.c): what it
 * accepts at open, and that every operation leaves the file in the state
 * the SCSI layer relies on, both through an iothread's io_uring ("async"
 * tests) and through the synchronous fallback used without a ring ("sync"
 * tests).  Files live in $TMPDIR; tmpfs cases use /dev/shm when present.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "backend-uring.h"
#include "iothread.h"
#include "read-only-file.h"

#define FILE_SIZE (1024 * 1024)
#define IO_TIMEOUT_S 10

struct fixture {
    struct iothread *t;        /* NULL: the synchronous path */
    int kick_fd;               /* eventfd the iothread watches, like a virtqueue kick */
    GAsyncQueue *jobs;         /* struct job, run on the iothread when kicked */
    char *path;
    char *loop_dev;            /* a loop device to detach at teardown */
    struct lun_backend *be;
};

struct job {
    void (*fn)(void *opaque);
    void *opaque;
};

/* One request in flight, and how the test waits for it. */
struct waiter {
    struct backend_io io;
    struct lun_backend *be;
    GMutex lock;
    GCond cond;
    bool submitted;
    bool done;
    int ret;
    int submit_ret;
};

static void waiter_complete(struct backend_io *io, int ret)
{
    struct waiter *w = io->opaque;

    g_mutex_lock(&w->lock);
    g_assert_false(w->done);
    w->ret = ret;
    w->done = true;
    g_cond_broadcast(&w->cond);
    g_mutex_unlock(&w->lock);
}

static void waiter_init(struct waiter *w, struct fixture *f, enum backend_op op,
                        uint64_t offset, uint64_t len, const struct iovec *iov,
                        unsigned iovcnt)
{
    memset(w, 0, sizeof(*w));
    g_mutex_init(&w->lock);
    g_cond_init(&w->cond);
    w->be = f->be;
    w->io.op = op;
    w->io.offset = offset;
    w->io.len = len;
    w->io.iov = iov;
    w->io.iovcnt = iovcnt;
    w->io.thread = f->t;
    w->io.complete = waiter_complete;
    w->io.opaque = w;
}

static void waiter_submit(void *opaque)
{
    struct waiter *w = opaque;
    int ret = w->be->ops->submit(w->be, &w->io);

    g_mutex_lock(&w->lock);
    w->submit_ret = ret;
    w->submitted = true;
    g_cond_broadcast(&w->cond);
    g_mutex_unlock(&w->lock);
}

/* Returns the request's final status: submit()'s error or complete()'s. */
static int waiter_wait(struct waiter *w)
{
    gint64 deadline = g_get_monotonic_time() + IO_TIMEOUT_S * G_TIME_SPAN_SECOND;
    int ret;

    g_mutex_lock(&w->lock);
    while (!w->submitted || (w->submit_ret == 0 && !w->done)) {
        if (!g_cond_wait_until(&w->cond, &w->lock, deadline)) {
            g_error("I/O did not complete within %d s", IO_TIMEOUT_S);
        }
    }
    if (w->submit_ret < 0) {
        /* A refused request is never completed. */
        g_assert_false(w->done);
        ret = w->submit_ret;
    } else {
        ret = w->ret;
    }
    g_mutex_unlock(&w->lock);
    g_mutex_clear(&w->lock);
    g_cond_clear(&w->cond);
    return ret;
}

/* Runs on the iothread when kicked, as a virtqueue handler would. */
static void kick_cb(void *opaque, uint32_t events)
{
    struct fixture *f = opaque;
    struct job *j;
    uint64_t v;

    g_assert_cmpint(read(f->kick_fd, &v, sizeof(v)), ==, sizeof(v));
    while ((j = g_async_queue_try_pop(f->jobs))) {
        j->fn(j->opaque);
        g_free(j);
    }
}

static void submit_on(struct fixture *f, void (*fn)(void *), void *opaque)
{
    struct job *j;
    uint64_t one = 1;

    if (!f->t) {
        fn(opaque);
        return;
    }
    j = g_new(struct job, 1);
    *j = (struct job){ fn, opaque };
    g_async_queue_push(f->jobs, j);
    g_assert_cmpint(write(f->kick_fd, &one, sizeof(one)), ==, sizeof(one));
}

static int do_io(struct fixture *f, enum backend_op op, uint64_t offset,
                 const struct iovec *iov, unsigned iovcnt, uint64_t len, bool fua)
{
    struct waiter w;

    waiter_init(&w, f, op, offset, len, iov, iovcnt);
    w.io.fua = fua;
    submit_on(f, waiter_submit, &w);
    if (!f->t) {
        /* Without a ring the backend must have finished inside submit(). */
        g_assert_true(w.submitted);
        g_assert_true(w.submit_ret < 0 || w.done);
    }
    return waiter_wait(&w);
}

static int do_rw(struct fixture *f, enum backend_op op, uint64_t offset,
                 void *buf, size_t len, bool fua)
{
    struct iovec iov = { .iov_base = buf, .iov_len = len };

    return do_io(f, op, offset, &iov, 1, len, fua);
}

static void fill_pattern(uint8_t *buf, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++) {
        buf[i] = (uint8_t)(i * 7 + seed * 13 + (i >> 9));
    }
}

static bool is_zero(const uint8_t *buf, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (buf[i]) {
            return false;
        }
    }
    return true;
}

/* Reads the file behind the backend's back. */
static void file_pread(const char *path, uint64_t offset, void *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(pread(fd, buf, len, offset), ==, (ssize_t)len);
    close(fd);
}

static char *make_file(const char *dir, uint64_t size)
{
    char *path = g_build_filename(dir, "backend-uring-XXXXXX", NULL);
    int fd = g_mkstemp(path);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, size), ==, 0);
    close(fd);
    return path;
}

static int open_file(struct fixture *f, bool ro, bool direct, uint32_t bs, uint64_t size)
{
    struct backend_file_opts o = {
        .path = f->path, .read_only = ro, .direct = direct, .block_size = bs, .size = size,
    };

    return backend_file_open(&o, &f->be, NULL);
}

/*
 * Opening with o is refused with errno code and an error saying exactly
 * msg; nothing is opened, and nothing is logged (a warning fails the test).
 */
static void open_refused(const struct backend_file_opts *o, int code, const char *msg)
{
    g_autoptr(GError) err = NULL;
    struct lun_backend *be = NULL;

    g_assert_cmpint(backend_file_open(o, &be, &err), ==, -code);
    g_assert_null(be);
    g_assert_error(err, VS_ERROR, code);
    g_assert_cmpstr(err->message, ==, msg);
}

static void fixture_setup_in(struct fixture *f, const void *data, const char *dir)
{
    bool async = GPOINTER_TO_INT(data);

    memset(f, 0, sizeof(*f));
    f->path = make_file(dir, FILE_SIZE);
    if (async) {
        f->t = iothread_new("uring-test", 0, 64);
        g_assert_nonnull(f->t);
        f->kick_fd = eventfd(0, EFD_CLOEXEC);
        g_assert_cmpint(f->kick_fd, >=, 0);
        f->jobs = g_async_queue_new();
        g_assert_cmpint(iothread_add_fd(f->t, f->kick_fd, EPOLLIN, kick_cb, f), ==, 0);
        g_assert_cmpint(iothread_start(f->t), ==, 0);
    }
}

static void fixture_setup(struct fixture *f, const void *data)
{
    fixture_setup_in(f, data, g_get_tmp_dir());
}

/* Runs a command; returns its stdout (stripped) or NULL if it failed. */
static char *run_cmd(const char *const *argv)
{
    g_autofree char *out = NULL;
    int status;

    if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH |
                      G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out, NULL, &status, NULL) ||
        !g_spawn_check_wait_status(status, NULL)) {
        return NULL;
    }
    return g_strstrip(g_steal_pointer(&out));
}

static void fixture_teardown(struct fixture *f, const void *data)
{
    if (f->be) {
        f->be->ops->close(f->be);
    }
    if (f->t) {
        iothread_free(f->t);
        close(f->kick_fd);
        g_async_queue_unref(f->jobs);
    }
    if (f->loop_dev) {
        const char *detach[] = { "losetup", "-d", f->loop_dev, NULL };
        g_autofree char *out = run_cmd(detach);

        g_assert_nonnull(out);
        g_free(f->loop_dev);
    } else {
        g_unlink(f->path);
    }
    g_free(f->path);
}

/* ---- open-time validation (no I/O thread needed) ---- */

static void test_open_defaults(struct fixture *f, const void *data)
{
    g_assert_cmpint(open_file(f, false, false, 0, 0), ==, 0);
    g_assert_cmpuint(f->be->size, ==, FILE_SIZE);
    g_assert_cmpuint(f->be->block_size, ==, 512);
    g_assert_false(f->be->read_only);
    g_assert_true(f->be->write_cache);
    g_assert_nonnull(strstr(f->be->name, f->path));
}

static void test_open_rounds_down_to_blocks(struct fixture *f, const void *data)
{
    g_assert_cmpint(truncate(f->path, FILE_SIZE + 100), ==, 0);
    g_assert_cmpint(open_file(f, false, false, 4096, 0), ==, 0);
    g_assert_cmpuint(f->be->size, ==, FILE_SIZE);
    g_assert_cmpuint(f->be->block_size, ==, 4096);
}

static void test_open_rejects(struct fixture *f, const void *data)
{
    struct backend_file_opts o = { .path = f->path };
    g_autofree char *empty = make_file(g_get_tmp_dir(), 100);

    /* Block sizes other than 512 and 4096. */
    o.block_size = 1024;
    open_refused(&o, EINVAL, "block size 1024 is not 512 or 4096");
    o.block_size = 520;
    open_refused(&o, EINVAL, "block size 520 is not 512 or 4096");
    /* Sizes that are not whole blocks. */
    o.block_size = 4096;
    o.size = 4096 * 3 + 512;
    open_refused(&o, EINVAL, "size 12800 is not a multiple of the block size 4096");
    o.block_size = 0;
    o.size = 1000;
    open_refused(&o, EINVAL, "size 1000 is not a multiple of the block size 512");
    /* A read-only file cannot grow to a larger size: the error says so, not EINVAL's words. */
    o.read_only = true;
    o.size = 2 * FILE_SIZE;
    open_refused(&o, EINVAL, "size 2097152 is larger than the read-only file (1048576 bytes)");
    o.size = 0;
    /* Not a file or block device. */
    o.path = g_get_tmp_dir();
    open_refused(&o, EINVAL, "not a regular file or block device");
    o.read_only = false;
    open_refused(&o, EISDIR, "Is a directory");
    o.path = "/dev/null";
    open_refused(&o, EINVAL, "not a regular file or block device");
    o.path = "/nonexistent/disk.img";
    open_refused(&o, ENOENT, "No such file or directory");
    o.direct = true;
    open_refused(&o, ENOENT, "opening with O_DIRECT: No such file or directory");
    o.direct = false;
    o.path = "";
    open_refused(&o, EINVAL, "no path given");
    /* Smaller than one block, no size given. */
    o.path = empty;
    open_refused(&o, EINVAL, "the file is smaller than one block (100 bytes); give size=");
    g_unlink(empty);
    g_assert_null(f->be);
}

/* A file this process may only read, opened for writing: the error hints at ,ro. */
static void test_open_read_only_file_hints_ro(struct fixture *f, const void *data)
{
    g_autofree char *path = read_only_file(f->path);
    struct backend_file_opts o = { .path = path };

    if (!path) {
        g_test_skip("no file here that this user may only read");
        return;
    }
    open_refused(&o, EACCES, "Permission denied (use ,ro?)");
}

static void test_open_extends_writable_file(struct fixture *f, const void *data)
{
    struct stat st;

    g_assert_cmpint(open_file(f, false, false, 0, 4 * FILE_SIZE), ==, 0);
    g_assert_cmpuint(f->be->size, ==, 4 * FILE_SIZE);
    g_assert_cmpint(stat(f->path, &st), ==, 0);
    g_assert_cmpint(st.st_size, ==, 4 * FILE_SIZE);
    f->be->ops->close(f->be);

    /* A smaller size uses a prefix and never shrinks the file. */
    g_assert_cmpint(open_file(f, false, false, 0, 8192), ==, 0);
    g_assert_cmpuint(f->be->size, ==, 8192);
    g_assert_cmpint(stat(f->path, &st), ==, 0);
    g_assert_cmpint(st.st_size, ==, 4 * FILE_SIZE);
}

/* ---- I/O, run both through the iothread and synchronously ---- */

static void test_rw_scattered(struct fixture *f, const void *data)
{
    /* Uneven guest segments, written and read back with another layout. */
    static const size_t wlens[] = { 512, 3584, 1, 4095, 7680, 100, 412 };
    static const size_t rlens[] = { 4096, 4096, 4096, 4096 };
    size_t total = 16384;
    g_autofree uint8_t *src = g_malloc(total);
    g_autofree uint8_t *dst = g_malloc0(total);
    g_autofree uint8_t *onfile = g_malloc(total);
    struct iovec wiov[G_N_ELEMENTS(wlens)], riov[G_N_ELEMENTS(rlens)];
    size_t off = 0;

    g_assert_cmpint(open_file(f, false, false, 0, 0), ==, 0);
    fill_pattern(src, total, 1);
    for (unsigned i = 0; i < G_N_ELEMENTS(wlens); i++) {
        wiov[i] = (struct iovec){ src + off, wlens[i] };
        off += wlens[i];
    }
    g_assert_cmpuint(off, ==, total);
    off = 0;
    for (unsigned i = 0; i < G_N_ELEMENTS(rlens); i++) {
        riov[i] = (struct iovec){ dst + off, rlens[i] };
        off += rlens[i];
    }

    g_assert_cmpint(do_io(f, BACKEND_WRITE, 65536, wiov, G_N_ELEMENTS(wiov), total,
                          false), ==, 0);
    file_pread(f->path, 65536, onfile, total);
    g_assert_cmpmem(onfile, total, src, total);

    g_assert_cmpint(do_io(f, BACKEND_READ, 65536, riov, G_N_ELEMENTS(riov), total,
                          false), ==, 0);
    g_assert_cmpmem(dst, total, src, total);
}

static void test_rw_more_than_iov_max(struct fixture *f, const void *data)
{
    /* The kernel takes at most IOV_MAX segments per call: the backend splits. */
    unsigned n = 2 * IOV_MAX + 4;
    size_t total = (size_t)n * 256;
    g_autofree uint8_t *src = g_malloc(total);
    g_autofree uint8_t *dst = g_malloc0(total);
    g_autofree struct iovec *iov = g_new(struct iovec, n);

    g_assert_cmpint(open_file(f, false, false, 0, 0), ==, 0);
    fill_pattern(src, total, 2);
    for (unsigned i = 0; i < n; i++) {
        iov[i] = (struct iovec){ src + i * 256, 256 };
    }
    g_assert_cmpint(do_io(f, BACKEND_WRITE, 0, iov, n, total, false), ==, 0);
    for (unsigned i = 0; i < n; i++) {
        /* Read into the segments in reverse order of memory. */
        iov[i] = (struct iovec){ dst + (n - 1 - i) * 256, 256 };
    }
    g_assert_cmpint(do_io(f, BACKEND_READ, 0, iov, n, total, false), ==, 0);
    for (unsigned i = 0; i < n; i++) {
        g_assert_cmpmem(dst + (n - 1 - i) * 256, 256, src + i * 256, 256);
    }
}

static void test_rw_fua_and_flush(struct fixture *f, const void *data)
{
    uint8_t buf[4096], back[4096];

    g_assert_cmpint(open_file(f, false, false, 0, 0), ==, 0);
    fill_pattern(buf, sizeof(buf), 3);
    g_assert_cmpint(do_rw(f, BACKEND_WRITE, 8192, buf, sizeof(buf), true), ==, 0);
    file_pread(f->path, 8192, back, sizeof(back));
    g_assert_cmpmem(back, sizeof(back), buf, sizeof(buf));
    g_assert_cmpint(do_io(f, BACKEND_FLUSH, 0, NULL, 0, 0, false), ==, 0);
}

static void test_rw_bounds(struct fixture *f, const void *data)
{
    uint8_t buf[1024];
    struct iovec iov = { buf, sizeof(buf) };

    g_assert_cmpint(open_file(f, false, false, 0, 0), ==, 0);
    /* Past the end, straddling the end, and a length that disagrees with the iovecs. */
    g_assert_cmpint(do_rw(f, BACKEND_READ, FILE_SIZE, buf, 512, false), ==, -EINVAL);
    g_assert_cmpint(do_rw(f, BACKEND_WRITE, FILE_SIZE - 512, buf, 1024, false), ==, -EINVAL);
    g_assert_cmpint(do_io(f, BACKEND_READ, 0, &iov, 1, 512, false), ==, -EINVAL);
    g_assert_cmpint(do_io(f, BACKEND_DISCARD, UINT64_MAX - 511, NULL, 0, 1024, false),
                    ==, -EINVAL);
    /* The last block is fine. */
    g_assert_cmpint(do_rw(f, BACKEND_WRITE, FILE_SIZE - 1024, buf, 1024, false), ==, 0);
}

static void test_read_after_truncation_fails(struct fixture *f, const void *data)
{
    /*
     * The file shrinks under the LUN so a read ends early: the backend
     * retries the remainder, gets nothing, and reports an error rather
     * than a short success.  EOF falls inside a guest segment.
     */
    g_autofree uint8_t *buf = g_malloc(16384);
    struct iovec iov[2] = { { buf, 8192 }, { buf + 8192, 8192 } };

    g_assert_cmpint(open_file(f, false, false, 0, 0), ==, 0);
    g_assert_cmpint(truncate(f->path, 4096 + 10240), ==, 0);
    g_test_expect_message("vhost-scsi", G_LOG_LEVEL_WARNING, "*made no progress*");
    g_assert_cmpint(do_io(f, BACKEND_READ, 4096, iov, 2, 16384, false), ==, -EIO);
    g_test_assert_expected_messages();
}

static void check_range(const char *path, uint64_t off, size_t len, const uint8_t *expect)
{
    g_autofree uint8_t *got = g_malloc(len);

    file_pread(path, off, got, len);
    if (expect) {
        g_assert_cmpmem(got, len, expect, len);
    } else {
        g_assert_true(is_zero(got, len));
    }
}

static void test_discard_reads_zeros(struct fixture *f, const void *data)
{
    size_t len = 256 * 1024;
    g_autofree uint8_t *buf = g_malloc(len);
    g_autofree uint8_t *back = g_malloc(len);
    struct stat before, after;

    g_assert_cmpint(open_file(f, false, false, 4096, 0), ==, 0);
    g_assert_true(f->be->can_discard);
    fill_pattern(buf, len, 4);
    g_assert_cmpint(do_rw(f, BACKEND_WRITE, 0, buf, len, false), ==, 0);
    g_assert_cmpint(do_io(f, BACKEND_FLUSH, 0, NULL, 0, 0, false), ==, 0);
    g_assert_cmpint(stat(f->path, &before), ==, 0);

    g_assert_cmpint(do_io(f, BACKEND_DISCARD, 65536, NULL, 0, 131072, false), ==, 0);
    g_assert_cmpint(stat(f->path, &after), ==, 0);
    /* The space is given back and the size kept. */
    g_assert_cmpint(after.st_blocks, <, before.st_blocks);
    g_assert_cmpint(after.st_size, ==, FILE_SIZE);
    g_assert_cmpint(do_rw(f, BACKEND_READ, 0, back, len, false), ==, 0);
    g_assert_cmpmem(back, 65536, buf, 65536);
    g_assert_true(is_zero(back + 65536, 131072));
    g_assert_cmpmem(back + 196608, 65536, buf + 196608, 65536);
}

/*
 * GET LBA STATUS's view of a sparse file: the hole before a write, the
 * written blocks, the hole after, each run from the byte asked for (a
 * 512-byte block inside a file system block too); and discards are
 * counted in the file system's blocks.  PRE-FETCH: readahead without O_DIRECT, no cache with.
 */
static void test_block_status_and_prefetch(struct fixture *f, const void *data)
{
    size_t len = 64 * 1024;
    g_autofree uint8_t *buf = g_malloc(len);
    struct stat st;
    bool mapped;
    uint64_t run;

    g_assert_cmpint(open_file(f, false, false, 4096, 0), ==, 0);
    g_assert_cmpint(stat(f->path, &st), ==, 0);
    g_assert_cmpuint(f->be->discard_granularity, ==, st.st_blksize);
    fill_pattern(buf, len, 6);
    g_assert_cmpint(do_rw(f, BACKEND_WRITE, 256 * 1024, buf, len, false), ==, 0);
    g_assert_cmpint(do_io(f, BACKEND_FLUSH, 0, NULL, 0, 0, false), ==, 0);

    g_assert_cmpint(f->be->ops->block_status(f->be, 0, FILE_SIZE, &mapped, &run), ==, 0);
    g_assert_false(mapped);
    g_assert_cmpuint(run, ==, 256 * 1024);
    g_assert_cmpint(f->be->ops->block_status(f->be, 256 * 1024, FILE_SIZE - 256 * 1024, &mapped,
                                             &run), ==, 0);
    g_assert_true(mapped);
    g_assert_cmpuint(run, ==, len);
    /* Asked for less than the run: at most what was asked. */
    g_assert_cmpint(f->be->ops->block_status(f->be, 260 * 1024, 4096, &mapped, &run), ==, 0);
    g_assert_true(mapped);
    g_assert_cmpuint(run, ==, 4096);
    g_assert_cmpint(f->be->ops->block_status(f->be, 320 * 1024, FILE_SIZE - 320 * 1024, &mapped,
                                             &run), ==, 0);
    g_assert_false(mapped);
    g_assert_cmpuint(run, ==, FILE_SIZE - 320 * 1024);
    /*
     * From a 512-byte block inside a file system block (a 512e LUN's
     * LBA inside a physical block): the run starts there, in the data and
     * in the hole, not at the block's or the extent's start.
     */
    f->be->ops->close(f->be);
    f->be = NULL;
    g_assert_cmpint(open_file(f, false, false, 512, 0), ==, 0);
    g_assert_cmpint(f->be->ops->block_status(f->be, 256 * 1024 + 512, FILE_SIZE - 256 * 1024 - 512,
                                             &mapped, &run), ==, 0);
    g_assert_true(mapped);
    g_assert_cmpuint(run, ==, len - 512);
    g_assert_cmpint(f->be->ops->block_status(f->be, 3584, FILE_SIZE - 3584, &mapped, &run), ==,
                    0);
    g_assert_false(mapped);
    g_assert_cmpuint(run, ==, 256 * 1024 - 3584);

    g_assert_cmpint(f->be->ops->prefetch(f->be, 0, FILE_SIZE), ==, 0);
    f->be->ops->close(f->be);
    f->be = NULL;
    g_assert_cmpint(open_file(f, false, true, 4096, 0), ==, 0);
    g_assert_cmpint(f->be->ops->prefetch(f->be, 0, FILE_SIZE), ==, -EOPNOTSUPP);
}

static void write_zeroes_check(struct fixture *f)
{
    size_t len = 3 * 1024 * 1024 / 2;     /* more than the 1 MiB zero buffer */
    g_autofree uint8_t *buf = g_malloc(len);

    fill_pattern(buf, len, 5);
    g_assert_cmpint(do_rw(f, BACKEND_WRITE, 0, buf, len, false), ==, 0);
    g_assert_cmpint(do_io(f, BACKEND_WRITE_ZEROES, 4096, NULL, 0, len - 8192, false), ==, 0);
    check_range(f->path, 0, 4096, buf);
    check_range(f->path, 4096, len - 8192, NULL);
    check_range(f->path, len - 4096, 4096, buf + len - 4096);
    /* A second request takes the method the first one settled on. */
    g_assert_cmpint(do_rw(f, BACKEND_WRITE, 0, buf, len, false), ==, 0);
    g_assert_cmpint(do_io(f, BACKEND_WRITE_ZEROES, 0, NULL, 0, 8192, false), ==, 0);
    check_range(f->path, 0, 8192, NULL);
    check_range(f->path, 8192, 4096, buf + 8192);
}

static void test_write_zeroes(struct fixture *f, const void *data)
{
    g_assert_cmpint(open_file(f, false, false, 0, 2 * FILE_SIZE), ==, 0);
    write_zeroes_check(f);
}

static void test_write_zeroes_tmpfs(struct fixture *f, const void *data)
{
    bool expect_fallback = true;

    /* tmpfs has no FALLOC_FL_ZERO_RANGE: the backend falls back to punching. */
    if (!g_file_test("/dev/shm", G_FILE_TEST_IS_DIR)) {
        g_test_skip("no /dev/shm");
        return;
    }
    g_unlink(f->path);
    g_free(f->path);
    f->path = make_file("/dev/shm", 2 * FILE_SIZE);
    g_assert_cmpint(open_file(f, false, false, 0, 0), ==, 0);
    if (expect_fallback) {
        g_test_expect_message("vhost-scsi", G_LOG_LEVEL_INFO, "*no FALLOC_FL_ZERO_RANGE*");
    }
    write_zeroes_check(f);
    g_test_assert_expected_messages();
}

static void test_read_only(struct fixture *f, const void *data)
{
    uint8_t buf[512] = { 1 };

    g_assert_cmpint(open_file(f, true, false, 0, 0), ==, 0);
    g_assert_true(f->be->read_only);
    g_assert_false(f->be->can_discard);
    g_assert_cmpint(do_rw(f, BACKEND_WRITE, 0, buf, sizeof(buf), false), ==, -EROFS);
    g_assert_cmpint(do_io(f, BACKEND_WRITE_ZEROES, 0, NULL, 0, 512, false), ==, -EROFS);
    g_assert_cmpint(do_io(f, BACKEND_DISCARD, 0, NULL, 0, 512, false), ==, -EROFS);
    g_assert_cmpint(do_rw(f, BACKEND_READ, 0, buf, sizeof(buf), false), ==, 0);
    g_assert_true(is_zero(buf, sizeof(buf)));
}

static void test_read_only_file_needs_ro(struct fixture *f, const void *data)
{
    /* A file the process may not write is refused unless opened ro. */
    if (geteuid() == 0) {
        g_test_skip("root may write any file");
        return;
    }
    g_assert_cmpint(chmod(f->path, 0444), ==, 0);
    g_assert_cmpint(open_file(f, false, false, 0, 0), ==, -EACCES);
    g_assert_cmpint(open_file(f, true, false, 0, 0), ==, 0);
}

static void test_direct(struct fixture *f, const void *data)
{
    size_t len = 65536;
    uint8_t *aligned = NULL, *misaligned_mem;
    g_autofree uint8_t *src = g_malloc(len);
    struct iovec iov[2];
    int ret;

    ret = open_file(f, false, true, 4096, 0);
    if (ret == -EINVAL) {
        g_test_skip("no O_DIRECT on this filesystem");
        return;
    }
    g_assert_cmpint(ret, ==, 0);
    g_assert_cmpint(posix_memalign((void **)&aligned, 4096, len), ==, 0);
    misaligned_mem = g_malloc(len + 8);
    fill_pattern(src, len, 6);

    /* Aligned guest buffers go straight to the file. */
    memcpy(aligned, src, len);
    g_assert_cmpint(do_rw(f, BACKEND_WRITE, 0, aligned, len, true), ==, 0);
    check_range(f->path, 0, len, src);

    /* Misaligned ones still work (bounced), in both directions. */
    fill_pattern(src, len, 7);
    memcpy(misaligned_mem + 3, src, len);
    iov[0] = (struct iovec){ misaligned_mem + 3, 1000 };
    iov[1] = (struct iovec){ misaligned_mem + 1003, len - 1000 };
    g_assert_cmpint(do_io(f, BACKEND_WRITE, len, iov, 2, len, false), ==, 0);
    check_range(f->path, len, len, src);
    memset(misaligned_mem, 0, len + 8);
    g_assert_cmpint(do_io(f, BACKEND_READ, len, iov, 2, len, false), ==, 0);
    g_assert_cmpmem(misaligned_mem + 3, len, src, len);

    free(aligned);
    g_free(misaligned_mem);
}

struct many {
    struct waiter *w;
    unsigned n;
};

static void submit_many(void *opaque)
{
    struct many *m = opaque;

    for (unsigned i = 0; i < m->n; i++) {
        waiter_submit(&m->w[i]);
    }
}

/* Many requests in flight on the ring at once, each completing once. */
static void test_queue_depth(struct fixture *f, const void *data)
{
    enum { N = 100, BS = 4096 };   /* more than the ring's 64 entries */
    g_autofree struct waiter *w = g_new0(struct waiter, N);
    g_autofree uint8_t *buf = g_malloc(N * BS);
    g_autofree uint8_t *back = g_malloc(N * BS);
    g_autofree struct iovec *iov = g_new(struct iovec, N);

    g_assert_cmpint(open_file(f, false, false, 0, 0), ==, 0);
    fill_pattern(buf, N * BS, 8);
    for (unsigned i = 0; i < N; i++) {
        iov[i] = (struct iovec){ buf + i * BS, BS };
        waiter_init(&w[i], f, BACKEND_WRITE, (uint64_t)i * BS * 2, BS, &iov[i], 1);
    }
    /* All in one go on the thread, so the ring fills up. */
    submit_on(f, submit_many, &(struct many){ w, N });
    for (unsigned i = 0; i < N; i++) {
        g_assert_cmpint(waiter_wait(&w[i]), ==, 0);
    }
    for (unsigned i = 0; i < N; i++) {
        file_pread(f->path, (uint64_t)i * BS * 2, back + i * BS, BS);
    }
    g_assert_cmpmem(back, N * BS, buf, N * BS);
}

/* Makes f's file a loop device with 4 KiB sectors over a fresh image (needs root). */
static bool use_loop_device(struct fixture *f)
{
    g_autofree char *img = make_file(g_get_tmp_dir(), 8 * FILE_SIZE);
    const char *setup[] = { "losetup", "-f", "--show", "--sector-size", "4096", img, NULL };
    char *dev = run_cmd(setup);

    /* The image is freed with the loop device; the fixture's file is unused. */
    g_unlink(img);
    if (!dev || !dev[0]) {
        g_free(dev);
        g_test_skip("cannot set up a loop device (not root?)");
        return false;
    }
    f->loop_dev = dev;
    g_unlink(f->path);
    g_free(f->path);
    f->path = g_strdup(dev);
    return true;
}

static void test_blockdev(struct fixture *f, const void *data)
{
    uint8_t *buf = NULL, *back = NULL;
    size_t len = 65536;

    if (!use_loop_device(f)) {
        return;
    }

    /* The geometry comes from the device; a smaller block size is refused. */
    g_assert_cmpint(open_file(f, false, true, 0, 0), ==, 0);
    g_assert_cmpuint(f->be->block_size, ==, 4096);
    g_assert_cmpuint(f->be->size, ==, 8 * FILE_SIZE);
    f->be->ops->close(f->be);
    f->be = NULL;
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    g_assert_cmpint(open_file(f, false, false, 512, 0), ==, -EINVAL);
    g_assert_cmpint(open_file(f, false, false, 0, 16 * FILE_SIZE), ==, -EINVAL);
    g_assert_cmpint(open_file(f, false, true, 0, 4 * FILE_SIZE), ==, 0);
    g_assert_cmpuint(f->be->size, ==, 4 * FILE_SIZE);

    g_assert_cmpint(posix_memalign((void **)&buf, 4096, len), ==, 0);
    g_assert_cmpint(posix_memalign((void **)&back, 4096, len), ==, 0);
    fill_pattern(buf, len, 9);
    g_assert_cmpint(do_rw(f, BACKEND_WRITE, 4096, buf, len, true), ==, 0);
    g_assert_cmpint(do_rw(f, BACKEND_READ, 4096, back, len, false), ==, 0);
    g_assert_cmpmem(back, len, buf, len);
    g_assert_cmpint(do_io(f, BACKEND_FLUSH, 0, NULL, 0, 0, false), ==, 0);

    g_assert_cmpint(do_io(f, BACKEND_WRITE_ZEROES, 8192, NULL, 0, 16384, false), ==, 0);
    g_assert_cmpint(do_rw(f, BACKEND_READ, 4096, back, len, false), ==, 0);
    g_assert_cmpmem(back, 4096, buf, 4096);
    g_assert_true(is_zero(back + 4096, 16384));
    g_assert_cmpmem(back + 20480, len - 20480, buf + 20480, len - 20480);
    if (f->be->can_discard) {
        g_assert_cmpint(do_io(f, BACKEND_DISCARD, 0, NULL, 0, 65536, false), ==, 0);
    }
    /* The guest cannot reach past the size it was given. */
    g_assert_cmpint(do_rw(f, BACKEND_READ, 4 * FILE_SIZE, back, 4096, false), ==, -EINVAL);

    free(buf);
    free(back);
}

struct submit_look {
    struct waiter w;
    bool done_inside_submit;
};

static void submit_and_look(void *opaque)
{
    struct submit_look *sl = opaque;

    waiter_submit(&sl->w);
    g_mutex_lock(&sl->w.lock);
    sl->done_inside_submit = sl->w.done;
    g_mutex_unlock(&sl->w.lock);
}

/*
 * A block device's BLKDISCARD (no io_uring opcode) runs on the backend's
 * discard worker, not on the I/O thread: submit() returns before the
 * request completes, and it completes later, on the I/O thread, with the
 * device's answer.
 */
static void test_blockdev_discard_off_thread(struct fixture *f, const void *data)
{
    struct submit_look sl;
    uint8_t *buf = NULL;

    if (!use_loop_device(f)) {
        return;
    }
    g_assert_cmpint(open_file(f, false, true, 0, 0), ==, 0);
    if (!f->be->can_discard) {
        g_test_skip("the loop device does not discard");
        return;
    }
    g_assert_cmpint(posix_memalign((void **)&buf, 4096, 65536), ==, 0);
    fill_pattern(buf, 65536, 3);
    g_assert_cmpint(do_rw(f, BACKEND_WRITE, 0, buf, 65536, true), ==, 0);
    waiter_init(&sl.w, f, BACKEND_DISCARD, 0, 65536, NULL, 0);
    sl.done_inside_submit = true;
    submit_on(f, submit_and_look, &sl);
    g_assert_cmpint(waiter_wait(&sl.w), ==, 0);
    g_assert_false(sl.done_inside_submit);
    free(buf);
}

static void add(const char *name, void (*fn)(struct fixture *, const void *), bool async)
{
    g_autofree char *path = g_strdup_printf("/backend-uring/%s/%s",
                                            async ? "async" : "sync", name);

    g_test_add(path, struct fixture, GINT_TO_POINTER(async), fixture_setup, fn,
               fixture_teardown);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    add("open/defaults", test_open_defaults, false);
    add("open/rounds-down-to-blocks", test_open_rounds_down_to_blocks, false);
    add("open/rejects", test_open_rejects, false);
    add("open/read-only-file-hints-ro", test_open_read_only_file_hints_ro, false);
    add("open/extends-writable-file", test_open_extends_writable_file, false);
    add("open/read-only-file-needs-ro", test_read_only_file_needs_ro, false);
    add("block-status-and-prefetch", test_block_status_and_prefetch, false);
    for (int async = 0; async <= 1; async++) {
        add("rw/scattered", test_rw_scattered, async);
        add("rw/more-than-iov-max", test_rw_more_than_iov_max, async);
        add("rw/fua-and-flush", test_rw_fua_and_flush, async);
        add("rw/bounds", test_rw_bounds, async);
        add("rw/truncated-file-is-an-error", test_read_after_truncation_fails, async);
        add("rw/direct", test_direct, async);
        add("rw/queue-depth", test_queue_depth, async);
        add("discard/reads-zeros", test_discard_reads_zeros, async);
        add("write-zeroes/zero-range", test_write_zeroes, async);
        add("write-zeroes/tmpfs", test_write_zeroes_tmpfs, async);
        add("read-only/refuses-writes", test_read_only, async);
        add("blockdev/loop", test_blockdev, async);
    }
    add("blockdev/discard-off-thread", test_blockdev_discard_off_thread, true);
    return g_test_run();
}
