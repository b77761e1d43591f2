/*
 * LIO backstores (target/core/HBA/NAME) for vhost-scsi-ctl's LUNs: mapping
 * a LUN spec of the daemon's grammar onto one (and refusing, before
 * anything is made, what LIO cannot express), their names (derived from
 * WWPN, TPG and LUN, which is how delete recognises the ones it may
 * remove), the backing file made to exist with the wanted size, creation
 * step by step with every step undone when a later one fails, reading one
 * back (type, size and options from its info and attributes), and deletion
 * with the HBA when it is left empty.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "lio-int.h"
#include "lun-spec.h"
#include "vs-error.h"

#define BACKSTORE_PREFIX "vs-"

/* The HBA kind each backstore type lives under (core/KIND_N). */
static const char *const hba_kind[] = {
    [LIO_LUN_FILE] = "fileio", [LIO_LUN_BLOCK] = "iblock",
    [LIO_LUN_RAM] = "rd_mcp", [LIO_LUN_NULL] = "rd_mcp",
};

char *lio_backstore_name(const char *wwpn, unsigned tpgt, unsigned lun)
{
    GString *s = g_string_new(BACKSTORE_PREFIX);
    for (const char *p = wwpn; *p; p++) {
        g_string_append_c(s, isalnum((unsigned char)*p) ? *p : '_');
    }
    g_string_append_printf(s, "-t%u-l%u", tpgt, lun);
    return g_string_free(s, FALSE);
}

char *lio_backstore_kind(enum lio_lun_type type)
{
    return g_strdup_printf("%s_", hba_kind[type]);
}

/* The kernel parses control options separated by ',' and newlines. */
bool lio_backing_path_ok(const char *path)
{
    return path[0] == '/' && !strpbrk(path, ",\n=");
}

bool lio_name_ok(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max || !strcmp(s, ".") || !strcmp(s, "..")) {
        return false;
    }
    for (const char *p = s; *p; p++) {
        if (!g_ascii_isgraph(*p) || *p == '/') {
            return false;
        }
    }
    return true;
}

/* rd_mcp counts its size in pages of the kernel's, as an int (rd_pages=). */
static uint64_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (uint64_t)p : 4096;
}

char *lio_backing_refusal(const struct lio_backing *b)
{
    const char *path = b->path ? b->path : "";
    bool rd = b->type == LIO_LUN_RAM || b->type == LIO_LUN_NULL;
    uint32_t bs = b->block_size ? b->block_size : 512;
    /* configfs names (NAME_MAX) and the kernel's INQUIRY_VPD_SERIAL_LEN. */
    const struct { const char *what, *v; size_t max; } names[] = {
        { "backstore name", b->name, 255 }, { "unit serial", b->serial, 254 },
        { "LUN link name", b->alias, 255 },
    };

    if (b->type > LIO_LUN_NULL) {
        return g_strdup("only file, block, ram and null LUNs can be created");
    }
    if (rd ? path[0] != 0 : !lio_backing_path_ok(path)) {
        return g_strdup(rd ? "ram and null LUNs have no path" :
                        "path must be absolute without ',', '=' or newlines");
    }
    if (b->block_size != 0 && b->block_size != 512 && b->block_size != 4096) {
        return g_strdup_printf("block size %" PRIu32 " (expected 512 or 4096)", b->block_size);
    }
    if (b->ro && b->type != LIO_LUN_BLOCK) {
        /* Only target_core_iblock parses a readonly= option. */
        return g_strdup_printf("option \"ro\": LIO's %s backstore has no read-only mode "
                               "(only a block device, through iblock, can be read-only)",
                               hba_kind[b->type]);
    }
    if (b->direct && rd) {
        return g_strdup("option \"direct\": ram and null LUNs have no page cache to bypass");
    }
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        if (names[i].v && names[i].v[0] && !lio_name_ok(names[i].v, names[i].max)) {
            return g_strdup_printf("%s \"%s\": expected 1 to %zu printable ASCII characters "
                                   "without spaces or '/'", names[i].what, names[i].v,
                                   names[i].max);
        }
    }
    if (b->type == LIO_LUN_BLOCK && b->size) {
        return g_strdup("option \"size\": LIO's iblock backstore exports the whole device");
    }
    if (rd && (b->size == 0 || b->size % page_size() || b->size / page_size() > INT_MAX)) {
        return g_strdup_printf("size %" PRIu64 ": LIO's rd_mcp takes a whole number of "
                               "%" PRIu64 "-byte pages, 1 to %d", b->size, page_size(), INT_MAX);
    }
    if (b->size % bs) {
        return g_strdup_printf("size %" PRIu64 " is not a multiple of the block size %" PRIu32,
                               b->size, bs);
    }
    return NULL;
}

int lio_backing_from_spec(const struct lio *lio, const char *spec, struct lio_backing *out,
                          char **path, GError **err)
{
    g_autofree char *why = NULL, *shown = lun_spec_redact(spec);
    g_autoptr(GError) bad = NULL;
    struct lun_spec s;
    struct stat st;

    memset(out, 0, sizeof(*out));
    if (lun_spec_parse_backend(spec, &s, &bad) < 0) {
        return vs_error_set(err, -EINVAL, "%s%s", bad->message,
                            g_str_has_prefix(spec, "block:") ? " (a block device is file:DEV)" :
                            "");
    }
    switch (s.kind) {
    case LUN_SPEC_FILE:
        out->type = lio->ops->stat(lio->opaque, s.path, true, &st) == 0 && S_ISBLK(st.st_mode) ?
                    LIO_LUN_BLOCK : LIO_LUN_FILE;
        break;
    case LUN_SPEC_RAM:
        out->type = LIO_LUN_RAM;
        break;
    case LUN_SPEC_NULL:
        out->type = LIO_LUN_NULL;
        break;
    case LUN_SPEC_ISCSI:
        why = g_strdup("iscsi:// LUNs are vhost-scsi-target's: LIO has no backstore that is "
                       "an iSCSI initiator");
        break;
    case LUN_SPEC_RBD:
        why = g_strdup("rbd: LUNs are vhost-scsi-target's: LIO reaches RBD only through "
                       "tcmu-runner, which vhost-scsi-ctl does not configure");
        break;
    case LUN_SPEC_HOLD:
        why = g_strdup("hold: is a test backend of vhost-scsi-target");
        break;
    }
    if (!why && s.sanitize) {
        why = g_strdup("option \"sanitize\": SANITIZE is vhost-scsi-target's; LIO's "
                       "backstores do not have it");
    }
    out->size = s.size;
    out->block_size = s.block_size;
    out->ro = s.ro;
    /* iblock never goes through the page cache: direct or not, it is direct. */
    out->direct = s.direct && out->type == LIO_LUN_FILE;
    out->path = s.path;
    if (!why) {
        why = lio_backing_refusal(out);
    }
    if (why) {
        vs_error_set(err, -EINVAL, "LUN spec \"%s\": %s", shown, why);
        lun_spec_clear(&s);
        memset(out, 0, sizeof(*out));
        return -EINVAL;
    }
    *path = g_steal_pointer(&s.path);
    lun_spec_clear(&s);
    return 0;
}

uint64_t lio_device_size(const struct lio *lio, const char *path)
{
    struct stat st;
    uint64_t sz = 0;
    if (lio->ops->stat(lio->opaque, path, true, &st) < 0) {
        return 0;
    }
    if (S_ISREG(st.st_mode)) {
        return st.st_size;
    }
    if (S_ISBLK(st.st_mode) && lio->ops->blockdev_size(lio->opaque, path, &sz) == 0) {
        return sz;
    }
    return 0;
}

/*
 * Makes a file backing exist with at least the wanted size (*size: 0 takes
 * the file's own, and is then filled in); *created says whether the file
 * is new, so that a failure later can remove it again.  A block device is
 * taken as it is.
 */
static int prepare_backing(const struct lio *lio, const struct lio_backing *b, uint64_t *size,
                           bool *created, GError **err)
{
    struct stat st;
    int ret = lio->ops->stat(lio->opaque, b->path, true, &st);

    *created = false;
    *size = b->size;
    if (b->type == LIO_LUN_BLOCK) {
        if (ret < 0 || !S_ISBLK(st.st_mode)) {
            return vs_error_set(err, -ENODEV, "%s is not a block device", b->path);
        }
        return 0;
    }
    if (ret == 0 && S_ISBLK(st.st_mode)) {
        /* A fileio backstore on a device, as an older version made them. */
        *size = lio_device_size(lio, b->path);
        return 0;
    }
    if (ret == 0 && !S_ISREG(st.st_mode)) {
        return vs_error_set(err, -EINVAL, "%s is neither a regular file nor a block device",
                            b->path);
    }
    uint32_t bs = b->block_size ? b->block_size : 512;
    if (*size == 0) {
        if (ret < 0) {
            return vs_error_set(err, -ENOENT, "file %s does not exist (give ,size=BYTES to "
                                "create it)", b->path);
        }
        if (st.st_size == 0 || st.st_size % bs) {
            return vs_error_set(err, -EINVAL, "file %s size %jd is not a positive multiple of "
                                "%" PRIu32, b->path, (intmax_t)st.st_size, bs);
        }
        *size = st.st_size;
        return 0;
    }
    if (ret < 0) {
        ret = lio->ops->create_file(lio->opaque, b->path);
        if (ret < 0) {
            return vs_error_set(err, ret, "cannot create %s: %s", b->path, g_strerror(-ret));
        }
        *created = true;
        st.st_size = 0;
    }
    if ((uint64_t)st.st_size < *size) {
        ret = lio->ops->truncate(lio->opaque, b->path, *size);
        if (ret < 0) {
            vs_error_set(err, ret, "cannot size %s to %" PRIu64 ": %s", b->path, *size,
                         g_strerror(-ret));
            if (*created) {
                lio->ops->unlink(lio->opaque, b->path);
                *created = false;
            }
            return ret;
        }
    }
    return 0;
}

/* What target_core_{file,iblock,rd}.c parse from "control". */
static char *control_string(const struct lio_backing *b, uint64_t size)
{
    switch (b->type) {
    case LIO_LUN_FILE:
        /*
         * The daemon's file: goes through the page cache with a write-back
         * cache the guest flushes, which is fd_buffered_io=1 (WCE=1);
         * direct is O_DIRECT, which fileio does with fd_async_io=1
         * (IOCB_DIRECT).  The kernel refuses fd_buffered_io=0.
         */
        return g_strdup_printf("fd_dev_name=%s,fd_dev_size=%" PRIu64 ",%s", b->path, size,
                               b->direct ? "fd_async_io=1" : "fd_buffered_io=1");
    case LIO_LUN_BLOCK:
        return g_strdup_printf("udev_path=%s%s", b->path, b->ro ? ",readonly=1" : "");
    case LIO_LUN_RAM:
    case LIO_LUN_NULL:
        return g_strdup_printf("rd_pages=%" PRIu64 "%s", size / page_size(),
                               b->type == LIO_LUN_NULL ? ",rd_nullio=1" : "");
    case LIO_LUN_OTHER:
        break;
    }
    g_assert_not_reached();
}

static void bs_entry_free(gpointer p)
{
    struct lio_bs_entry *e = p;
    g_free(e->rel);
    g_free(e->path);
    g_free(e);
}

GPtrArray *lio_backstores(const struct lio *lio)
{
    GPtrArray *a = g_ptr_array_new_with_free_func(bs_entry_free);
    g_autofree char *core = lio_path(lio, "target", "core", NULL);
    g_autoptr(GPtrArray) hbas = lio_readdir(lio, core);
    for (guint i = 0; i < hbas->len; i++) {
        const char *h = hbas->pdata[i];
        g_autofree char *hba = g_build_filename(core, h, NULL);
        /* core/alua holds ALUA groups, not storage objects. */
        if (h[0] == '.' || !strcmp(h, "alua") || !lio_is_dir(lio, hba)) {
            continue;
        }
        g_autoptr(GPtrArray) sos = lio_readdir(lio, hba);
        for (guint j = 0; j < sos->len; j++) {
            const char *n = sos->pdata[j];
            g_autofree char *so = g_build_filename(hba, n, NULL);
            if (n[0] == '.' || !lio_is_dir(lio, so)) {
                continue;
            }
            g_autofree char *up = g_build_filename(so, "udev_path", NULL);
            struct lio_bs_entry *e = g_new0(struct lio_bs_entry, 1);
            e->rel = g_strdup_printf("%s/%s", h, n);
            e->path = lio_read_attr(lio, up);
            if (!e->path) {
                e->path = g_strdup("");
            }
            g_ptr_array_add(a, e);
        }
    }
    return a;
}

bool lio_same_file(const struct lio *lio, const char *a, const char *b)
{
    struct stat sa, sb;
    if (!a || !b || !a[0] || !b[0]) {
        return false;
    }
    if (lio->ops->stat(lio->opaque, a, true, &sa) == 0 &&
        lio->ops->stat(lio->opaque, b, true, &sb) == 0) {
        if (S_ISBLK(sa.st_mode) && S_ISBLK(sb.st_mode)) {
            return sa.st_rdev == sb.st_rdev;
        }
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    }
    return !strcmp(a, b);
}

/* The number after "key" in info, 0 when absent. */
static uint64_t info_number(const char *info, const char *key)
{
    const char *p = info ? strstr(info, key) : NULL;
    return p ? g_ascii_strtoull(p + strlen(key), NULL, 10) : 0;
}

/* fileio's info has "File: X  Size: N"; the status line has "SectorSize: N". */
static uint64_t info_size(const char *info)
{
    for (const char *p = info; p && (p = strstr(p, "Size: ")); p += 6) {
        if (p == info || p[-1] == ' ') {
            return g_ascii_strtoull(p + 6, NULL, 10);
        }
    }
    return 0;
}

void lio_backstore_describe(const struct lio *lio, const char *rel, struct lio_lun *l)
{
    g_autofree char *so = lio_path(lio, "target", "core", rel, NULL);
    g_autofree char *up = g_build_filename(so, "udev_path", NULL);
    g_autofree char *ip = g_build_filename(so, "info", NULL);
    g_autofree char *bp = g_build_filename(so, "attrib", "block_size", NULL);
    g_autofree char *info = lio_read_attr(lio, ip);
    g_autofree char *bs = lio_read_attr(lio, bp);
    const char *pages = info ? strstr(info, "PAGES/PAGE_SIZE: ") : NULL;

    l->type = g_str_has_prefix(rel, "fileio_") ? LIO_LUN_FILE :
              g_str_has_prefix(rel, "iblock_") ? LIO_LUN_BLOCK :
              !g_str_has_prefix(rel, "rd_mcp_") ? LIO_LUN_OTHER :
              info_number(info, "nullio: ") ? LIO_LUN_NULL : LIO_LUN_RAM;
    l->path = lio_read_attr(lio, up);
    if (!l->path) {
        l->path = g_strdup("");
    }
    l->ro = l->type == LIO_LUN_BLOCK && info_number(info, "readonly: ");
    l->direct = l->type == LIO_LUN_FILE && info_number(info, "Async: ");
    l->block_size = bs ? g_ascii_strtoull(bs, NULL, 10) : 0;
    /* The kernel shows "T10 VPD Unit Serial Number: SERIAL". */
    g_autofree char *sp = g_build_filename(so, "wwn", "vpd_unit_serial", NULL);
    g_autofree char *serial = lio_read_attr(lio, sp);
    const char *colon = serial ? strchr(serial, ':') : NULL;
    l->serial = g_strdup(colon ? g_strstrip((char *)colon + 1) : "");
    if (pages) {
        /* "PAGES/PAGE_SIZE: 256*4096" */
        const char *star = strchr(pages, '*');
        l->size = info_number(pages, ": ") * (star ? g_ascii_strtoull(star + 1, NULL, 10) : 0);
    } else {
        l->size = info_size(info);
    }
    if (!l->size && l->path[0]) {
        l->size = lio_device_size(lio, l->path);
    }
}

bool lio_backing_matches(const struct lio *lio, const struct lio_lun *cur,
                         const struct lio_backing *b)
{
    bool rd = b->type == LIO_LUN_RAM || b->type == LIO_LUN_NULL;
    return cur->type == b->type &&
           (rd ? cur->size == b->size : lio_same_file(lio, cur->path, b->path)) &&
           cur->ro == b->ro && (b->type != LIO_LUN_FILE || cur->direct == b->direct) &&
           (!b->block_size || cur->block_size == b->block_size) &&
           (!b->serial || !b->serial[0] || !strcmp(cur->serial ? cur->serial : "", b->serial));
}

int lio_backstore_create(const struct lio *lio, const char *name, const struct lio_backing *b,
                         char **rel_out, bool *file_created, GError **err)
{
    const char *kind = hba_kind[b->type];
    bool rd = b->type == LIO_LUN_RAM || b->type == LIO_LUN_NULL;
    g_autofree char *core = lio_path(lio, "target", "core", NULL);
    g_autofree char *hba = NULL, *so = NULL, *control = NULL, *bs = NULL;
    uint64_t size = b->size;
    bool created = false;
    int ret = rd ? 0 : prepare_backing(lio, b, &size, &created, err);
    if (ret < 0) {
        return ret;
    }

    /* One HBA per backstore, first free index, as rtslib does. */
    for (unsigned i = 0;; i++) {
        g_free(hba);
        hba = g_strdup_printf("%s/%s_%u", core, kind, i);
        ret = lio->ops->mkdir(lio->opaque, hba);
        if (ret != -EEXIST || i > 100000) {
            break;
        }
    }
    if (ret < 0) {
        vs_error_set(err, ret, "backstore %s: cannot create HBA %s: %s", name, hba,
                     g_strerror(-ret));
        goto undo_file;
    }
    so = g_build_filename(hba, name, NULL);
    ret = lio->ops->mkdir(lio->opaque, so);
    if (ret < 0) {
        vs_error_set(err, ret, "cannot create backstore %s: %s", so, g_strerror(-ret));
        goto undo_hba;
    }
    control = control_string(b, size);
    bs = b->block_size ? g_strdup_printf("%" PRIu32, b->block_size) : NULL;
    /*
     * Enabling configures the device, which resets block_size to the
     * hardware's: the attribute goes last.  udev_path is what list reads
     * the backing back from.
     */
    const char *steps[][2] = {
        { "control", control }, { "udev_path", rd ? NULL : b->path }, { "enable", "1" },
        { "attrib/block_size", bs },
        /* Before any LUN links it: the kernel refuses a new serial while exported. */
        { "wwn/vpd_unit_serial", b->serial && b->serial[0] ? b->serial : NULL },
    };
    for (size_t i = 0; i < G_N_ELEMENTS(steps); i++) {
        if (!steps[i][1]) {
            continue;
        }
        g_autofree char *attr = g_build_filename(so, steps[i][0], NULL);
        ret = lio_write_attr(lio, attr, steps[i][1]);
        if (ret < 0) {
            vs_error_set(err, ret, "backstore %s: writing %s='%s' to %s failed: %s%s", name,
                         steps[i][0], steps[i][1], attr, g_strerror(-ret),
                         ret == -EEXIST || ret == -EBUSY ? " (device busy/claimed?)" : "");
            goto undo_so;
        }
    }
    *rel_out = g_strdup_printf("%s_%s/%s", kind, strrchr(hba, '_') + 1, name);
    *file_created = created;
    return 0;

undo_so:
    lio_remove_dir(lio, so);
undo_hba:
    lio_remove_dir(lio, hba);
undo_file:
    if (created) {
        lio->ops->unlink(lio->opaque, b->path);
    }
    return ret;
}

void lio_backstore_undo_create(const struct lio *lio, const char *rel,
                               const struct lio_backing *b, bool file_created)
{
    lio_backstore_delete(lio, rel, NULL);
    if (file_created) {
        lio->ops->unlink(lio->opaque, b->path);
    }
}

int lio_backstore_delete(const struct lio *lio, const char *rel, GError **err)
{
    g_autofree char *so = lio_path(lio, "target", "core", rel, NULL);
    g_autofree char *hba = g_path_get_dirname(so);
    if (!lio_is_dir(lio, so)) {
        return 0;
    }
    int ret = lio_remove_dir(lio, so);
    if (ret < 0) {
        return vs_error_set(err, ret, "removing backstore core/%s failed: %s", rel,
                            g_strerror(-ret));
    }
    /* The HBA goes too when we left it empty; a shared one stays (ENOTEMPTY). */
    lio_remove_dir(lio, hba);
    return 0;
}
