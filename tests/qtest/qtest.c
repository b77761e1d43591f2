/*
 * A QEMU process under test and its two sockets.  We listen on a qtest
 * socket and a QMP socket, start QEMU with -qtest and -mon pointing at
 * them, and then speak the qtest text protocol (one command per line,
 * answered "OK [value]" or "ERR ...") and QMP (one JSON object per line).
 * By default the vCPU runs TCG and executes only HLT (the BIOS is 64 KiB
 * of 0xF4), so guest RAM and devices change only because the test or a
 * device says so.  In the KVM mode (struct qts_opts) the firmware is
 * firmware/irq-count.S instead: the vCPU takes interrupts and counts them
 * by vector, and that is all it ever does to guest RAM.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "libqt.h"
#include "irq-count.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/kvm.h>

struct qts {
    pid_t pid;
    int status;             /* waitpid status once reaped */
    bool reaped;
    int qtest_fd, qmp_fd;
    GString *qtest_buf, *qmp_buf;
    GQueue events;          /* QMP event lines not yet consumed */
    char *dir;              /* temporary directory for sockets and BIOS */
    bool counts_irqs;       /* runs firmware/irq-count.S */
};

const char *qt_qemu_binary(void)
{
    const char *q = g_getenv("QEMU");
    return q && *q ? q : "qemu-system-x86_64";
}

void qt_qemu_version(int *major, int *minor)
{
    static int maj = -1, min;
    if (maj < 0) {
        char *argv[] = { (char *)qt_qemu_binary(), "--version", NULL };
        char *out = NULL;
        maj = 0;
        if (g_spawn_sync(NULL, argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out,
                         NULL, NULL, NULL) && out) {
            const char *v = strstr(out, "version ");
            if (v) {
                sscanf(v + 8, "%d.%d", &maj, &min);
            }
        }
        g_free(out);
    }
    *major = maj;
    *minor = min;
}

static int listen_unix(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpuint(strlen(path), <, sizeof(sa.sun_path));
    strcpy(sa.sun_path, path);
    g_assert_cmpint(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
    g_assert_cmpint(listen(fd, 1), ==, 0);
    return fd;
}

static void reap(struct qts *s, int flags)
{
    if (!s->reaped && s->pid > 0) {
        int st;
        pid_t r = waitpid(s->pid, &st, flags);
        if (r == s->pid) {
            s->reaped = true;
            s->status = st;
        }
    }
}

bool qts_alive(struct qts *s)
{
    reap(s, WNOHANG);
    return !s->reaped;
}

int qts_wait_status(struct qts *s)
{
    reap(s, WNOHANG);
    return s->reaped ? s->status : -1;
}

/* Accepts QEMU's connection, failing early if QEMU exits instead. */
static int accept_qemu(struct qts *s, int lfd, const char *what)
{
    gint64 deadline = g_get_monotonic_time() + QT_TIMEOUT_US;
    for (;;) {
        struct pollfd p = { .fd = lfd, .events = POLLIN };
        int r = poll(&p, 1, 100);
        if (r > 0) {
            int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            g_assert_cmpint(fd, >=, 0);
            return fd;
        }
        if (!qts_alive(s)) {
            g_error("QEMU exited (status 0x%x) before connecting its %s socket",
                    s->status, what);
        }
        if (g_get_monotonic_time() > deadline) {
            g_error("QEMU did not connect its %s socket", what);
        }
    }
}

/* Reads one '\n'-terminated line from fd; NULL on EOF or timeout. */
static char *read_line(struct qts *s, int fd, GString *buf, gint64 timeout_us)
{
    gint64 deadline = g_get_monotonic_time() + timeout_us;
    for (;;) {
        char *nl = memchr(buf->str, '\n', buf->len);
        if (nl) {
            size_t n = nl - buf->str;
            char *line = g_strndup(buf->str, n);
            g_string_erase(buf, 0, n + 1);
            return line;
        }
        gint64 left = deadline - g_get_monotonic_time();
        if (left <= 0) {
            return NULL;
        }
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int r = poll(&p, 1, MIN(left / 1000 + 1, 100));
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r == 0) {
            continue;
        }
        char tmp[4096];
        ssize_t got = read(fd, tmp, sizeof(tmp));
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) {
            continue;
        }
        if (got <= 0) {
            return NULL;
        }
        g_string_append_len(buf, tmp, got);
    }
}

static void write_all(int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t r = write(fd, p, len);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            g_error("write to QEMU failed: %s", r < 0 ? g_strerror(errno) : "EOF");
        }
        p += r;
        len -= r;
    }
}

bool qt_kvm_usable(char **why)
{
    int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        *why = g_strdup_printf("/dev/kvm: %s", g_strerror(errno));
        return false;
    }
    int version = ioctl(fd, KVM_GET_API_VERSION, 0);
    int err = errno;
    close(fd);
    if (version < 0) {
        *why = g_strdup_printf("/dev/kvm: KVM_GET_API_VERSION: %s", g_strerror(err));
        return false;
    }
    if (version != KVM_API_VERSION) {
        *why = g_strdup_printf("/dev/kvm answers API version %d, not %d", version,
                               KVM_API_VERSION);
        return false;
    }
    return true;
}

/* The firmware sets its flag last, once the interrupt table and LAPIC are ready. */
static void wait_firmware_ready(struct qts *s)
{
    gint64 deadline = g_get_monotonic_time() + QT_TIMEOUT_US;
    while (qts_readl(s, QT_FW_READY) != QT_FW_MAGIC) {
        if (g_get_monotonic_time() > deadline) {
            g_error("the interrupt-counting firmware never became ready (QEMU %s)",
                    qts_alive(s) ? "alive" : "exited");
        }
    }
}

pid_t qts_pid(struct qts *s)
{
    return s->pid;
}

bool qts_counts_irqs(struct qts *s)
{
    return s->counts_irqs;
}

uint32_t qts_irq_count(struct qts *s, unsigned vector)
{
    g_assert(s->counts_irqs);
    g_assert_cmpuint(vector, <, 256);
    return qts_readl(s, QT_FW_COUNTERS + 4ull * vector);
}

unsigned qts_exceptions(struct qts *s)
{
    unsigned n = 0;
    for (unsigned v = 0; v < QT_FW_FIRST_IRQ; v++) {
        n += qts_irq_count(s, v);
    }
    return n;
}

static struct qts *qts_vstart(const struct qts_opts *o, const char *fmt, va_list ap);

struct qts *qts_start(const char *fmt, ...)
{
    static const struct qts_opts tcg;
    va_list ap;
    va_start(ap, fmt);
    struct qts *s = qts_vstart(&tcg, fmt, ap);
    va_end(ap);
    return s;
}

struct qts *qts_start_opts(const struct qts_opts *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    struct qts *s = qts_vstart(o, fmt, ap);
    va_end(ap);
    return s;
}

static struct qts *qts_vstart(const struct qts_opts *o, const char *fmt, va_list ap)
{
    struct qts *s = g_new0(struct qts, 1);
    GError *err = NULL;

    s->dir = g_dir_make_tmp("vhost-scsi-qtest-XXXXXX", &err);
    g_assert_no_error(err);
    char *qtest_path = g_build_filename(s->dir, "qtest.sock", NULL);
    char *qmp_path = g_build_filename(s->dir, "qmp.sock", NULL);
    char *bios = g_build_filename(s->dir, "hlt.bin", NULL);
    char hlt[65536];
    memset(hlt, 0xf4, sizeof(hlt));
    g_assert(g_file_set_contents(bios, hlt, sizeof(hlt), NULL));
    s->counts_irqs = o->firmware != NULL;

    int qtest_l = listen_unix(qtest_path);
    int qmp_l = listen_unix(qmp_path);

    char *extra = g_strdup_vprintf(fmt, ap);
    /* The firmware reaches the LAPIC as x2APIC; KVM offers it, TCG's default CPU not. */
    /* Named threads: observe.c tells the vCPU ("CPU 0/KVM") from QEMU's others. */
    char *accel = o->kvm ? g_strdup_printf("-accel kvm%s -name qtest,debug-threads=on",
                                           o->accel_extra ? o->accel_extra : "")
                         : g_strdup(o->firmware ? "-accel tcg -cpu qemu64,+x2apic" : "");
    const char *log = g_getenv("QTEST_LOG");
    char *found = g_find_program_in_path(qt_qemu_binary());
    if (!found) {
        g_error("QEMU binary '%s' not found (QEMU=; for 7.2 run scripts/qemu-7.2.sh)",
                qt_qemu_binary());
    }
    g_free(found);
    /* A QEMU unpacked outside /usr (scripts/qemu-7.2.sh) is told where its firmware is. */
    const char *datadir = g_getenv("QEMU_DATADIR");
    char *qdatadir = datadir && *datadir ? g_shell_quote(datadir) : NULL;
    char *cmd = g_strdup_printf(
        "%s%s%s -machine q35,memory-backend=mem -m 256M "
        "-object memory-backend-memfd,id=mem,size=256M,share=on "
        "%s -bios %s -nodefaults -display none -serial none -monitor none "
        "-qtest unix:%s -qtest-log %s "
        "-chardev socket,path=%s,id=qmp0 -mon chardev=qmp0,mode=control %s",
        qt_qemu_binary(), qdatadir ? " -L " : "", qdatadir ? qdatadir : "", accel,
        o->firmware ? o->firmware : bios,
        qtest_path, log ? "/dev/fd/2" : "/dev/null", qmp_path, extra);
    gchar **argv = NULL;
    g_assert(g_shell_parse_argv(cmd, NULL, &argv, &err));
    g_assert_no_error(err);
    if (g_getenv("QTEST_VERBOSE")) {
        g_printerr("# %s\n", cmd);
    }

    s->pid = fork();
    g_assert_cmpint(s->pid, >=, 0);
    if (s->pid == 0) {
        /* Die with the test so a failed assertion never leaks a QEMU. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, 0);
        dup2(2, 1);          /* stdout carries TAP */
        execvp(argv[0], argv);
        _exit(127);
    }
    s->qtest_fd = accept_qemu(s, qtest_l, "qtest");
    s->qmp_fd = accept_qemu(s, qmp_l, "QMP");
    close(qtest_l);
    close(qmp_l);
    s->qtest_buf = g_string_new(NULL);
    s->qmp_buf = g_string_new(NULL);
    g_queue_init(&s->events);

    /* QEMU greets once machine init is done: a hung device realize shows here. */
    char *greeting = read_line(s, s->qmp_fd, s->qmp_buf, QT_TIMEOUT_US);
    if (!greeting || !strstr(greeting, "\"QMP\"")) {
        g_error("QEMU (%s) sent no QMP greeting: stuck in start-up (a vhost-user "
                "back-end not answering?) or exited", qts_alive(s) ? "alive" : "exited");
    }
    g_free(greeting);
    char *r = qmp(s, "{'execute': 'qmp_capabilities'}");
    g_assert(qmp_ok(r));
    g_free(r);
    if (s->counts_irqs) {
        wait_firmware_ready(s);
    }

    unlink(qtest_path);
    unlink(qmp_path);
    g_strfreev(argv);
    g_free(cmd);
    g_free(extra);
    g_free(accel);
    g_free(qdatadir);
    g_free(qtest_path);
    g_free(qmp_path);
    g_free(bios);
    return s;
}

void qts_quit(struct qts *s)
{
    if (qts_alive(s)) {
        const char quit[] = "{\"execute\": \"quit\"}\n";
        if (write(s->qmp_fd, quit, sizeof(quit) - 1) < 0) {
            /* QEMU is on its way out anyway; the wait below settles it. */
        }
        gint64 deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
        while (qts_alive(s) && g_get_monotonic_time() < deadline) {
            /* Waiting for exit: drain QMP so QEMU never blocks writing to us. */
            char *l = read_line(s, s->qmp_fd, s->qmp_buf, 50000);
            g_free(l);
        }
        if (qts_alive(s)) {
            kill(s->pid, SIGKILL);
            reap(s, 0);
        }
    }
    close(s->qtest_fd);
    close(s->qmp_fd);
    g_string_free(s->qtest_buf, TRUE);
    g_string_free(s->qmp_buf, TRUE);
    g_queue_clear_full(&s->events, g_free);
    char *bios = g_build_filename(s->dir, "hlt.bin", NULL);
    unlink(bios);
    g_free(bios);
    rmdir(s->dir);
    g_free(s->dir);
    g_free(s);
}

/* ---- qtest text protocol ---- */

static char *qtest_cmd(struct qts *s, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static char *qtest_cmd(struct qts *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *line = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    write_all(s->qtest_fd, line, strlen(line));
    for (;;) {
        char *reply = read_line(s, s->qtest_fd, s->qtest_buf, QT_TIMEOUT_US);
        if (!reply) {
            g_error("qtest: no reply to '%.*s' (QEMU %s)", (int)strcspn(line, "\n"),
                    line, qts_alive(s) ? "alive" : "exited");
        }
        /* Interrupt notifications are asynchronous; we never intercept IRQs. */
        if (g_str_has_prefix(reply, "IRQ")) {
            g_free(reply);
            continue;
        }
        if (!g_str_has_prefix(reply, "OK")) {
            g_error("qtest: '%.*s' answered '%s'", (int)strcspn(line, "\n"), line, reply);
        }
        g_free(line);
        return reply;
    }
}

static uint64_t qtest_cmd_val(struct qts *s, const char *cmd, uint64_t addr)
{
    char *r = qtest_cmd(s, "%s 0x%" PRIx64 "\n", cmd, addr);
    uint64_t v = g_ascii_strtoull(r + 2, NULL, 0);
    g_free(r);
    return v;
}

static void qtest_cmd_set(struct qts *s, const char *cmd, uint64_t addr, uint64_t v)
{
    g_free(qtest_cmd(s, "%s 0x%" PRIx64 " 0x%" PRIx64 "\n", cmd, addr, v));
}

void qts_outb(struct qts *s, uint16_t p, uint8_t v) { qtest_cmd_set(s, "outb", p, v); }
void qts_outw(struct qts *s, uint16_t p, uint16_t v) { qtest_cmd_set(s, "outw", p, v); }
void qts_outl(struct qts *s, uint16_t p, uint32_t v) { qtest_cmd_set(s, "outl", p, v); }
uint8_t qts_inb(struct qts *s, uint16_t p) { return qtest_cmd_val(s, "inb", p); }
uint16_t qts_inw(struct qts *s, uint16_t p) { return qtest_cmd_val(s, "inw", p); }
uint32_t qts_inl(struct qts *s, uint16_t p) { return qtest_cmd_val(s, "inl", p); }
uint8_t qts_readb(struct qts *s, uint64_t a) { return qtest_cmd_val(s, "readb", a); }
uint16_t qts_readw(struct qts *s, uint64_t a) { return qtest_cmd_val(s, "readw", a); }
uint32_t qts_readl(struct qts *s, uint64_t a) { return qtest_cmd_val(s, "readl", a); }
uint64_t qts_readq(struct qts *s, uint64_t a) { return qtest_cmd_val(s, "readq", a); }
void qts_writeb(struct qts *s, uint64_t a, uint8_t v) { qtest_cmd_set(s, "writeb", a, v); }
void qts_writew(struct qts *s, uint64_t a, uint16_t v) { qtest_cmd_set(s, "writew", a, v); }
void qts_writel(struct qts *s, uint64_t a, uint32_t v) { qtest_cmd_set(s, "writel", a, v); }
void qts_writeq(struct qts *s, uint64_t a, uint64_t v) { qtest_cmd_set(s, "writeq", a, v); }

void qts_memread(struct qts *s, uint64_t addr, void *buf, size_t len)
{
    if (!len) {
        return;
    }
    char *r = qtest_cmd(s, "b64read 0x%" PRIx64 " 0x%zx\n", addr, len);
    gsize n = 0;
    guchar *data = g_base64_decode(r + 3, &n);
    g_assert_cmpuint(n, ==, len);
    memcpy(buf, data, len);
    g_free(data);
    g_free(r);
}

void qts_memwrite(struct qts *s, uint64_t addr, const void *buf, size_t len)
{
    if (!len) {
        return;
    }
    char *b64 = g_base64_encode(buf, len);
    g_free(qtest_cmd(s, "b64write 0x%" PRIx64 " 0x%zx %s\n", addr, len, b64));
    g_free(b64);
}

void qts_memset(struct qts *s, uint64_t addr, uint8_t c, size_t len)
{
    if (len) {
        g_free(qtest_cmd(s, "memset 0x%" PRIx64 " 0x%zx 0x%02x\n", addr, len, c));
    }
}

/* ---- QMP ---- */

/* QMP accepts single quotes; we write commands with them for readability. */
static void qmp_vsend(struct qts *s, const char *fmt, va_list ap)
{
    char *cmd = g_strdup_vprintf(fmt, ap);
    char *line = g_strconcat(cmd, "\n", NULL);
    write_all(s->qmp_fd, line, strlen(line));
    g_free(line);
    g_free(cmd);
}

void qmp_send(struct qts *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    qmp_vsend(s, fmt, ap);
    va_end(ap);
}

char *qmp_reply(struct qts *s)
{
    for (;;) {
        char *l = read_line(s, s->qmp_fd, s->qmp_buf, QT_TIMEOUT_US);
        if (!l) {
            g_error("QMP: no reply (QEMU %s)", qts_alive(s) ? "alive" : "exited");
        }
        if (strstr(l, "\"event\"") && !strstr(l, "\"return\"")) {
            g_queue_push_tail(&s->events, l);
            continue;
        }
        return l;
    }
}

char *qmp(struct qts *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    qmp_vsend(s, fmt, ap);
    va_end(ap);
    return qmp_reply(s);
}

bool qmp_ok(const char *reply)
{
    return reply && g_str_has_prefix(reply, "{\"return\"");
}

static bool event_matches(const char *line, const char *name, const char *match)
{
    char *key = g_strdup_printf("\"event\": \"%s\"", name);
    bool ok = strstr(line, key) && (!match || strstr(line, match));
    g_free(key);
    return ok;
}

char *qmp_wait_event(struct qts *s, const char *name, const char *match,
                     gint64 timeout_us)
{
    for (GList *l = s->events.head; l; l = l->next) {
        if (event_matches(l->data, name, match)) {
            char *line = l->data;
            g_queue_delete_link(&s->events, l);
            return line;
        }
    }
    gint64 deadline = g_get_monotonic_time() + timeout_us;
    for (;;) {
        gint64 left = deadline - g_get_monotonic_time();
        if (left <= 0) {
            return NULL;
        }
        char *line = read_line(s, s->qmp_fd, s->qmp_buf, left);
        if (!line) {
            return NULL;
        }
        if (event_matches(line, name, match)) {
            return line;
        }
        g_queue_push_tail(&s->events, line);
    }
}

void qmp_device_add(struct qts *s, const char *args)
{
    char *r = qmp(s, "{'execute': 'device_add', 'arguments': {%s}}", args);
    if (!qmp_ok(r)) {
        g_error("device_add {%s} failed: %s", args, r);
    }
    g_free(r);
}

bool qmp_responsive(struct qts *s)
{
    if (!qts_alive(s)) {
        return false;
    }
    char *r = qmp(s, "{'execute': 'query-status'}");
    bool ok = qmp_ok(r);
    g_free(r);
    return ok;
}

bool qmp_pci_has_device(struct qts *s, const char *qdev_id)
{
    char *r = qmp(s, "{'execute': 'query-pci'}");
    char *key = g_strdup_printf("\"qdev_id\": \"%s\"", qdev_id);
    g_assert(qmp_ok(r));
    /* query-pci nests bridges' buses inside their entries; a substring finds any. */
    bool found = strstr(r, key) != NULL;
    g_free(key);
    g_free(r);
    return found;
}
