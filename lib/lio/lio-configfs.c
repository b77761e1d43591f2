/*
 * LIO/tcm_vhost configuration through configfs, for vhost-scsi-ctl.  Every
 * operation is idempotent (it drives the tree towards a wanted state), and
 * every path is built from a configurable root so the unit tests can run it
 * against a plain directory: there the attribute files the kernel would
 * provide are created on write and directories are removed recursively,
 * while on the real configfs attributes are only ever written in place and
 * directories only rmdir'ed (the kernel tears down default groups itself).
 * Backstores created here get a name derived from WWPN, TPGT and LUN, which
 * is how delete recognises the ones it may remove.  The saved form of a
 * configuration (list --json, save, restore) is lio-config.c's, the
 * filesystem and kernel modules under it lio-fs.c's.  The file is a little
 * over 1,000 lines because it still parses LUN specs itself (lun_spec_parse):
 * that grammar should be lib/config/lun-spec.c's, once its parsing no
 * longer pulls in the backends' libraries (noted on issue 12).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <linux/fs.h>

#include "lio-configfs.h"
#include "lio-int.h"
#include "size.h"

#define BACKSTORE_PREFIX "vs-"

/* ---------------------------------------------------------------- helpers */

static bool is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i])) {
            return false;
        }
    }
    return true;
}

bool lio_wwpn_valid(const char *w)
{
    if (!w || strlen(w) >= LIO_WWPN_MAX) {
        return false;
    }
    if (g_str_has_prefix(w, "naa.")) {
        const char *h = w + 4;
        size_t n = strlen(h);
        /* NAA 5 (IEEE Registered) is 64 bits, NAA 6 (Extended) 128. */
        return ((h[0] == '5' && n == 16) || (h[0] == '6' && n == 32)) && is_hex(h, n);
    }
    if (g_str_has_prefix(w, "eui.")) {
        return strlen(w + 4) == 16 && is_hex(w + 4, 16);
    }
    if (g_str_has_prefix(w, "iqn.")) {
        /* iqn.YYYY-MM.naming-authority[:unique], RFC 3720 3.2.6.3.1 */
        const char *p = w + 4;
        for (int i = 0; i < 7; i++) {
            if (i == 4 ? p[i] != '-' : !isdigit((unsigned char)p[i])) {
                return false;
            }
        }
        if (p[7] != '.' || !p[8]) {
            return false;
        }
        for (p += 8; *p; p++) {
            if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) ||
                  *p == '-' || *p == '.' || *p == ':')) {
                return false;
            }
        }
        return true;
    }
    return false;
}

static int random_bytes(uint8_t *buf, size_t len)
{
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        g_warning("lio: cannot open /dev/urandom: %s", g_strerror(e));
        return -e;
    }
    ssize_t n = read(fd, buf, len);
    int e = errno;
    close(fd);
    if (n != (ssize_t)len) {
        g_warning("lio: short read from /dev/urandom");
        return n < 0 ? -e : -EIO;
    }
    return 0;
}

int lio_wwpn_generate(char *out)
{
    uint8_t r[5];
    int ret = random_bytes(r, sizeof(r));
    if (ret < 0) {
        return ret;
    }
    /* 5 + OUI 001405 (Linux-iSCSI.org, as targetcli does) + 36 random bits */
    snprintf(out, LIO_WWPN_MAX, "naa.5001405%01x%02x%02x%02x%02x",
             r[0] & 0xf, r[1], r[2], r[3], r[4]);
    return 0;
}

/* A nexus name the kernel accepts for a target of this WWPN's protocol. */
static int nexus_generate(const char *wwpn, char *out)
{
    if (g_str_has_prefix(wwpn, "iqn.")) {
        uint8_t r[6];
        int ret = random_bytes(r, sizeof(r));
        if (ret < 0) {
            return ret;
        }
        snprintf(out, LIO_WWPN_MAX,
                 "iqn.2003-01.org.linux-iscsi.vhost-scsi:%02x%02x%02x%02x%02x%02x",
                 r[0], r[1], r[2], r[3], r[4], r[5]);
        return 0;
    }
    return lio_wwpn_generate(out);
}

static char *tpgt_dir(const struct lio *lio, const char *wwpn, unsigned tpgt)
{
    g_autofree char *t = g_strdup_printf("tpgt_%u", tpgt);
    return lio_path(lio, "target", "vhost", wwpn, t, NULL);
}

/*
 * configfs attributes take the whole value in one write(); on a plain tree
 * the file is created, since there is no kernel to provide it.
 */
/* ------------------------------------------------------------ backstores */

static char *backstore_name(const char *wwpn, unsigned tpgt, unsigned lun)
{
    GString *s = g_string_new(BACKSTORE_PREFIX);
    for (const char *p = wwpn; *p; p++) {
        g_string_append_c(s, isalnum((unsigned char)*p) ? *p : '_');
    }
    g_string_append_printf(s, "-t%u-l%u", tpgt, lun);
    return g_string_free(s, FALSE);
}

struct lun_spec {
    enum lio_lun_type type;
    char *path;
    uint64_t size;             /* 0: take it from the file */
};

static void lun_spec_clear(struct lun_spec *s)
{
    g_free(s->path);
}

/* The kernel parses control options separated by ',' and newlines. */
bool lio_backing_path_ok(const char *path)
{
    return path[0] == '/' && !strpbrk(path, ",\n=");
}

static int lun_spec_parse(const char *spec, struct lun_spec *out)
{
    memset(out, 0, sizeof(*out));
    const char *rest;
    if (g_str_has_prefix(spec, "file:")) {
        out->type = LIO_LUN_FILE;
        rest = spec + 5;
    } else if (g_str_has_prefix(spec, "block:")) {
        out->type = LIO_LUN_BLOCK;
        rest = spec + 6;
    } else {
        g_warning("lio: LUN spec '%s': expected file:PATH[,size=BYTES] or block:DEV", spec);
        return -EINVAL;
    }
    const char *comma = strchr(rest, ',');
    out->path = comma ? g_strndup(rest, comma - rest) : g_strdup(rest);
    if (comma) {
        if (out->type != LIO_LUN_FILE || !g_str_has_prefix(comma + 1, "size=") ||
            size_parse(comma + 6, &out->size) < 0 || out->size == 0) {
            g_warning("lio: LUN spec '%s': only file LUNs take ',size=BYTES[KMGT]' (> 0)", spec);
            lun_spec_clear(out);
            return -EINVAL;
        }
        if (out->size % 512) {
            g_warning("lio: LUN spec '%s': size must be a multiple of 512", spec);
            lun_spec_clear(out);
            return -EINVAL;
        }
    }
    if (!lio_backing_path_ok(out->path)) {
        g_warning("lio: LUN spec '%s': path must be absolute without ',', '=' or newlines",
                  spec);
        lun_spec_clear(out);
        return -EINVAL;
    }
    return 0;
}

static uint64_t device_size(const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0) {
        return 0;
    }
    if (S_ISREG(st.st_mode)) {
        return st.st_size;
    }
    if (S_ISBLK(st.st_mode)) {
        uint64_t sz = 0;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            if (ioctl(fd, BLKGETSIZE64, &sz) < 0) {
                sz = 0;
            }
            close(fd);
        }
        return sz;
    }
    return 0;
}

/* Makes the file exist with the wanted size; fills in the size if unset. */
static int prepare_backing(struct lun_spec *s)
{
    struct stat st;
    if (s->type == LIO_LUN_BLOCK) {
        if (stat(s->path, &st) < 0 || !S_ISBLK(st.st_mode)) {
            g_warning("lio: %s is not a block device", s->path);
            return -ENODEV;
        }
        return 0;
    }
    if (stat(s->path, &st) == 0 && S_ISBLK(st.st_mode)) {
        s->size = device_size(s->path);
        return 0;
    }
    if (stat(s->path, &st) == 0 && !S_ISREG(st.st_mode)) {
        g_warning("lio: %s is neither a regular file nor a block device", s->path);
        return -EINVAL;
    }
    if (s->size == 0) {
        if (stat(s->path, &st) < 0) {
            g_warning("lio: file %s does not exist (give ,size=BYTES to create it)", s->path);
            return -ENOENT;
        }
        if (st.st_size == 0 || st.st_size % 512) {
            g_warning("lio: file %s size %jd is not a positive multiple of 512",
                      s->path, (intmax_t)st.st_size);
            return -EINVAL;
        }
        s->size = st.st_size;
        return 0;
    }
    int fd = open(s->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || fstat(fd, &st) < 0) {
        int e = errno;
        g_warning("lio: cannot create %s: %s", s->path, g_strerror(e));
        if (fd >= 0) {
            close(fd);
        }
        return -e;
    }
    int ret = 0;
    if ((uint64_t)st.st_size < s->size && ftruncate(fd, s->size) < 0) {
        ret = -errno;
        g_warning("lio: cannot size %s to %" PRIu64 ": %s", s->path, s->size,
                  g_strerror(-ret));
    }
    close(fd);
    return ret;
}

/* Backstore dirs as core-relative "hba/name", each with its udev_path. */
struct bs_entry {
    char *rel;
    char *path;
};

static void bs_entry_free(gpointer p)
{
    struct bs_entry *e = p;
    g_free(e->rel);
    g_free(e->path);
    g_free(e);
}

static GPtrArray *backstores(const struct lio *lio)
{
    GPtrArray *a = g_ptr_array_new_with_free_func(bs_entry_free);
    g_autofree char *core = lio_path(lio, "target", "core", NULL);
    DIR *d = opendir(core);
    if (!d) {
        return a;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        /* core/alua holds ALUA groups, not storage objects. */
        if (de->d_name[0] == '.' || !strcmp(de->d_name, "alua")) {
            continue;
        }
        g_autofree char *hba = g_build_filename(core, de->d_name, NULL);
        if (!lio_is_dir(hba)) {
            continue;
        }
        DIR *h = opendir(hba);
        if (!h) {
            continue;
        }
        struct dirent *se;
        while ((se = readdir(h))) {
            g_autofree char *so = g_build_filename(hba, se->d_name, NULL);
            if (se->d_name[0] == '.' || !lio_is_dir(so)) {
                continue;
            }
            g_autofree char *up = g_build_filename(so, "udev_path", NULL);
            struct bs_entry *e = g_new0(struct bs_entry, 1);
            e->rel = g_strdup_printf("%s/%s", de->d_name, se->d_name);
            e->path = lio_read_attr(up);
            if (!e->path) {
                e->path = g_strdup("");
            }
            g_ptr_array_add(a, e);
        }
        closedir(h);
    }
    closedir(d);
    return a;
}

static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (!a[0] || !b[0]) {
        return false;
    }
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0) {
        if (S_ISBLK(sa.st_mode) && S_ISBLK(sb.st_mode)) {
            return sa.st_rdev == sb.st_rdev;
        }
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    }
    return !strcmp(a, b);
}

/* The LUN symlink in lun_dir and the "hba/name" it points to. */
static bool lun_link(const char *lun_dir, char **link_path, char **rel)
{
    DIR *d = opendir(lun_dir);
    if (!d) {
        return false;
    }
    struct dirent *de;
    bool found = false;
    while (!found && (de = readdir(d))) {
        g_autofree char *p = g_build_filename(lun_dir, de->d_name, NULL);
        struct stat st;
        if (lstat(p, &st) < 0 || !S_ISLNK(st.st_mode)) {
            continue;
        }
        g_autofree char *tgt = g_file_read_link(p, NULL);
        if (!tgt) {
            continue;
        }
        g_autofree char *base = g_path_get_basename(tgt);
        g_autofree char *dir = g_path_get_dirname(tgt);
        g_autofree char *hba = g_path_get_basename(dir);
        if (rel) {
            *rel = g_strdup_printf("%s/%s", hba, base);
        }
        if (link_path) {
            *link_path = g_steal_pointer(&p);
        }
        found = true;
    }
    closedir(d);
    return found;
}

/* Every LUN link of every fabric pointing to core-relative rel. */
static GPtrArray *links_to(const struct lio *lio, const char *rel)
{
    GPtrArray *users = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *target = lio_path(lio, "target", NULL);
    DIR *fd = opendir(target);
    if (!fd) {
        return users;
    }
    struct dirent *fe;
    while ((fe = readdir(fd))) {
        if (fe->d_name[0] == '.' || !strcmp(fe->d_name, "core")) {
            continue;
        }
        g_autofree char *fab = g_build_filename(target, fe->d_name, NULL);
        DIR *wd = opendir(fab);
        if (!wd) {
            continue;
        }
        struct dirent *we;
        while ((we = readdir(wd))) {
            g_autofree char *wdir = g_build_filename(fab, we->d_name, NULL);
            if (we->d_name[0] == '.' || !lio_is_dir(wdir)) {
                continue;
            }
            g_autoptr(GArray) tpgts = lio_numbered_entries(wdir, "tpgt_", UINT16_MAX);
            for (guint i = 0; i < tpgts->len; i++) {
                g_autofree char *ld = g_strdup_printf("%s/tpgt_%u/lun", wdir,
                                                      g_array_index(tpgts, unsigned, i));
                g_autoptr(GArray) luns = lio_numbered_entries(ld, "lun_", UINT_MAX);
                for (guint j = 0; j < luns->len; j++) {
                    g_autofree char *lp = g_strdup_printf("%s/lun_%u", ld,
                                                          g_array_index(luns, unsigned, j));
                    g_autofree char *r = NULL;
                    if (lun_link(lp, NULL, &r) && !strcmp(r, rel)) {
                        g_ptr_array_add(users, g_strdup(lp));
                    }
                }
            }
        }
        closedir(wd);
    }
    closedir(fd);
    return users;
}

static int backstore_create(struct lio *lio, const char *name, const struct lun_spec *s,
                            char **rel_out)
{
    const char *kind = s->type == LIO_LUN_FILE ? "fileio" : "iblock";
    g_autofree char *core = lio_path(lio, "target", "core", NULL);
    g_autofree char *hba = NULL;
    int ret;

    /* One HBA per backstore, first free index, as rtslib does. */
    for (unsigned i = 0;; i++) {
        g_free(hba);
        hba = g_strdup_printf("%s/%s_%u", core, kind, i);
        if (mkdir(hba, 0755) == 0) {
            break;
        }
        if (errno != EEXIST || i > 100000) {
            ret = -errno;
            g_warning("lio: cannot create HBA %s: %s", hba, g_strerror(errno));
            return ret;
        }
    }
    g_autofree char *so = g_build_filename(hba, name, NULL);
    if (mkdir(so, 0755) < 0) {
        ret = -errno;
        g_warning("lio: cannot create backstore %s: %s", so, g_strerror(-ret));
        rmdir(hba);
        return ret;
    }
    g_autofree char *control = NULL;
    if (s->type == LIO_LUN_FILE) {
        control = g_strdup_printf("fd_dev_name=%s,fd_dev_size=%" PRIu64, s->path, s->size);
    } else {
        control = g_strdup_printf("udev_path=%s", s->path);
    }
    const char *steps[][2] = {
        { "control", control }, { "udev_path", s->path }, { "enable", "1" },
    };
    for (size_t i = 0; i < G_N_ELEMENTS(steps); i++) {
        g_autofree char *attr = g_build_filename(so, steps[i][0], NULL);
        ret = lio_write_attr(lio, attr, steps[i][1]);
        if (ret < 0) {
            g_warning("lio: backstore %s: writing %s='%s' failed: %s%s", so, steps[i][0],
                      steps[i][1], g_strerror(-ret),
                      ret == -EEXIST || ret == -EBUSY ? " (device busy/claimed?)" : "");
            lio_remove_dir(lio, so);
            rmdir(hba);
            return ret;
        }
    }
    *rel_out = g_strdup_printf("%s_%s/%s", kind, strrchr(hba, '_') + 1, name);
    return 0;
}

static int backstore_delete(struct lio *lio, const char *rel)
{
    g_autofree char *so = lio_path(lio, "target", "core", rel, NULL);
    g_autofree char *hba = g_path_get_dirname(so);
    if (!lio_is_dir(so)) {
        return 0;
    }
    int ret = lio_remove_dir(lio, so);
    if (ret < 0) {
        g_warning("lio: removing backstore core/%s failed: %s", rel, g_strerror(-ret));
        return ret;
    }
    /* The HBA goes too when we left it empty; a shared one stays. */
    if (lio->configfs) {
        rmdir(hba);
    } else {
        bool empty = true;
        DIR *d = opendir(hba);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            g_autofree char *c = g_build_filename(hba, de->d_name, NULL);
            if (de->d_name[0] != '.' && lio_is_dir(c)) {
                empty = false;
            }
        }
        if (d) {
            closedir(d);
        }
        if (empty) {
            lio_remove_tree(hba);
        }
    }
    return 0;
}

/* --------------------------------------------------------------- targets */

static int check_wwpn(const char *wwpn)
{
    if (!lio_wwpn_valid(wwpn)) {
        g_warning("lio: invalid WWPN '%s': expected naa.5<15 hex> / naa.6<31 hex> "
                  "(lowercase), iqn.YYYY-MM.domain[:id] or eui.<16 hex>", wwpn ? wwpn : "");
        return -EINVAL;
    }
    return 0;
}

static int check_tpgt(unsigned tpgt)
{
    if (tpgt > LIO_TPGT_MAX) {
        g_warning("lio: TPGT %u out of range 0..%u", tpgt, LIO_TPGT_MAX);
        return -ERANGE;
    }
    return 0;
}

static int check_lun(unsigned lun)
{
    if (lun > LIO_LUN_MAX) {
        g_warning("lio: LUN %u out of range 0..%u", lun, LIO_LUN_MAX);
        return -ERANGE;
    }
    return 0;
}

int lio_target_create(struct lio *lio, const char *wwpn, unsigned tpgt, const char *nexus)
{
    int ret = check_wwpn(wwpn);
    if (ret == 0) {
        ret = check_tpgt(tpgt);
    }
    if (ret < 0) {
        return ret;
    }
    if (g_str_has_prefix(wwpn, "eui.")) {
        /* vhost_scsi_make_tport() only knows naa., fc. and iqn. */
        g_warning("lio: WWPN %s: the kernel vhost fabric accepts only naa. and iqn. names",
                  wwpn);
        return -EINVAL;
    }
    char gen[LIO_WWPN_MAX];
    if (nexus) {
        /* The kernel wants the initiator's protocol to match the target's. */
        if (!lio_wwpn_valid(nexus) || strncmp(nexus, wwpn, 4)) {
            g_warning("lio: nexus '%s' for %s must be a valid name with the prefix %.4s",
                      nexus, wwpn, wwpn);
            return -EINVAL;
        }
    } else {
        ret = nexus_generate(wwpn, gen);
        if (ret < 0) {
            return ret;
        }
        nexus = gen;
    }
    g_autofree char *wdir = lio_path(lio, "target", "vhost", wwpn, NULL);
    g_autofree char *tdir = tpgt_dir(lio, wwpn, tpgt);
    g_autofree char *ldir = g_build_filename(tdir, "lun", NULL);
    g_autofree char *nfile = g_build_filename(tdir, "nexus", NULL);
    bool existed = lio_is_dir(tdir);

    ret = lio_make_dir(wdir);
    if (ret == 0) {
        ret = lio_make_dir(tdir);
    }
    if (ret == 0 && !lio->configfs) {
        ret = lio_make_dir(ldir);
    }
    if (ret < 0) {
        g_warning("lio: cannot create %s: %s", tdir, g_strerror(-ret));
        return ret;
    }
    g_autofree char *cur = lio_read_attr(nfile);
    if (cur && cur[0] && nexus != gen && strcmp(cur, nexus)) {
        g_warning("lio: target %s tpgt %u already has nexus %s, not %s", wwpn, tpgt, cur, nexus);
        return -EEXIST;
    }
    if (cur && cur[0]) {
        if (existed) {
            g_info("lio: target %s tpgt %u already exists (nexus %s)", wwpn, tpgt, cur);
        }
        return 0;
    }
    /* tcm_vhost: the nexus must exist before LUNs are linked. */
    ret = lio_write_attr(lio, nfile, nexus);
    if (ret < 0) {
        g_warning("lio: target %s tpgt %u: setting nexus %s failed: %s", wwpn, tpgt, nexus,
                  g_strerror(-ret));
        if (!existed) {
            lio_remove_dir(lio, tdir);
            rmdir(wdir);
        }
        return ret;
    }
    return 0;
}

/*
 * Any process holding /dev/vhost-scsi open may have SET_ENDPOINT on this
 * WWPN; the kernel does not say which WWPN a vhost fd uses, so this is the
 * cautious check (unlinking a LUN under a running guest hot-unplugs it).
 */
static int vhost_device_holder(char **comm)
{
    struct stat vs;
    if (stat("/dev/vhost-scsi", &vs) < 0 || !S_ISCHR(vs.st_mode)) {
        return 0;
    }
    int found = 0;
    DIR *proc = opendir("/proc");
    struct dirent *pe;
    while (proc && !found && (pe = readdir(proc))) {
        if (!isdigit((unsigned char)pe->d_name[0]) || atoi(pe->d_name) == getpid()) {
            continue;
        }
        g_autofree char *fdd = g_strdup_printf("/proc/%s/fd", pe->d_name);
        DIR *fds = opendir(fdd);
        struct dirent *fe;
        while (fds && !found && (fe = readdir(fds))) {
            g_autofree char *f = g_build_filename(fdd, fe->d_name, NULL);
            struct stat st;
            if (fe->d_name[0] != '.' && stat(f, &st) == 0 && S_ISCHR(st.st_mode) &&
                st.st_rdev == vs.st_rdev) {
                found = atoi(pe->d_name);
            }
        }
        if (fds) {
            closedir(fds);
        }
    }
    if (proc) {
        closedir(proc);
    }
    if (found) {
        g_autofree char *cp = g_strdup_printf("/proc/%d/comm", found);
        *comm = lio_read_attr(cp);
    }
    return found;
}

static int lun_remove_dir(struct lio *lio, const char *wwpn, unsigned tpgt, unsigned lun,
                          bool check_only)
{
    g_autofree char *tdir = tpgt_dir(lio, wwpn, tpgt);
    g_autofree char *ld = g_strdup_printf("%s/lun/lun_%u", tdir, lun);
    g_autofree char *link = NULL, *rel = NULL;
    if (!lio_is_dir(ld)) {
        return 0;
    }
    bool linked = lun_link(ld, &link, &rel);
    g_autofree char *mine = backstore_name(wwpn, tpgt, lun);
    g_autofree char *rel_base = rel ? g_path_get_basename(rel) : NULL;
    bool owned = linked && !strcmp(rel_base, mine);
    if (owned) {
        g_autoptr(GPtrArray) users = links_to(lio, rel);
        for (guint i = 0; i < users->len; i++) {
            if (strcmp(users->pdata[i], ld)) {
                g_warning("lio: backstore core/%s of %s LUN %u is busy: also linked from %s",
                          rel, wwpn, lun, (char *)users->pdata[i]);
                return -EBUSY;
            }
        }
    }
    if (check_only) {
        return 0;
    }
    if (linked && unlink(link) < 0) {
        int e = errno;
        g_warning("lio: unlinking %s failed: %s", link, g_strerror(e));
        return -e;
    }
    int ret = lio_remove_dir(lio, ld);
    if (ret < 0) {
        g_warning("lio: removing %s failed: %s", ld, g_strerror(-ret));
        return ret;
    }
    return owned ? backstore_delete(lio, rel) : 0;
}

int lio_lun_remove(struct lio *lio, const char *wwpn, unsigned tpgt, unsigned lun)
{
    int ret = check_wwpn(wwpn);
    if (ret == 0) {
        ret = check_tpgt(tpgt);
    }
    if (ret == 0) {
        ret = check_lun(lun);
    }
    return ret < 0 ? ret : lun_remove_dir(lio, wwpn, tpgt, lun, false);
}

/*
 * Before Linux 6.4 ("vhost-scsi: Fix crash during LUN unmapping") a LUN
 * RESET on a TPG with several LUNs corrupts the TPG's TMF list, and
 * unmapping its LUNs later crashes the host.  Seen with Debian 12's 6.1.
 */
static void warn_tmf_bug(const struct lio *lio, const char *tdir, const char *wwpn,
                         unsigned tpgt)
{
    struct utsname u;
    unsigned major = 0, minor = 0;
    if (!lio->configfs || uname(&u) < 0 || sscanf(u.release, "%u.%u", &major, &minor) != 2 ||
        major > 6 || (major == 6 && minor >= 4)) {
        return;
    }
    g_autofree char *ldir = g_build_filename(tdir, "lun", NULL);
    g_autoptr(GArray) luns = lio_numbered_entries(ldir, "lun_", UINT_MAX);
    if (luns->len) {
        g_message("lio: %s tpgt %u gets a second LUN: on kernel %s (< 6.4) a guest's LUN reset "
                  "then makes unmapping these LUNs crash the host; prefer one LUN per TPG",
                  wwpn, tpgt, u.release);
    }
}

static int lun_add_checks(struct lio *lio, const char *wwpn, unsigned tpgt, unsigned lun)
{
    int ret = check_wwpn(wwpn);
    if (ret == 0) {
        ret = check_tpgt(tpgt);
    }
    if (ret == 0) {
        ret = check_lun(lun);
    }
    if (ret < 0) {
        return ret;
    }
    g_autofree char *tdir = tpgt_dir(lio, wwpn, tpgt);
    if (!lio_is_dir(tdir)) {
        g_warning("lio: target %s tpgt %u does not exist (create it first)", wwpn, tpgt);
        return -ENOENT;
    }
    return 0;
}

static int lun_add_spec(struct lio *lio, const char *wwpn, unsigned tpgt, unsigned lun,
                        struct lun_spec s);

int lio_lun_add(struct lio *lio, const char *wwpn, unsigned tpgt, unsigned lun,
                const char *spec)
{
    int ret = lun_add_checks(lio, wwpn, tpgt, lun);
    if (ret < 0) {
        return ret;
    }
    struct lun_spec s;
    ret = lun_spec_parse(spec, &s);
    return ret < 0 ? ret : lun_add_spec(lio, wwpn, tpgt, lun, s);
}

int lio_lun_add_backing(struct lio *lio, const char *wwpn, unsigned tpgt, unsigned lun,
                        const struct lio_backing *b)
{
    int ret = lun_add_checks(lio, wwpn, tpgt, lun);
    if (ret < 0) {
        return ret;
    }
    const char *path = b->path ? b->path : "";
    if (b->type != LIO_LUN_FILE && b->type != LIO_LUN_BLOCK) {
        g_warning("lio: %s LUN %u: only file and block backstores can be created", wwpn, lun);
        return -EINVAL;
    }
    if (!lio_backing_path_ok(path)) {
        g_warning("lio: %s LUN %u: path '%s': path must be absolute without ',', '=' or "
                  "newlines", wwpn, lun, path);
        return -EINVAL;
    }
    if (b->size && (b->type != LIO_LUN_FILE || b->size % 512)) {
        g_warning("lio: %s LUN %u: size %" PRIu64 ": only file LUNs take a size, "
                  "a multiple of 512", wwpn, lun, b->size);
        return -EINVAL;
    }
    struct lun_spec s = { .type = b->type, .path = g_strdup(path), .size = b->size };
    return lun_add_spec(lio, wwpn, tpgt, lun, s);
}

/* Takes s over; the checks of lun_add_checks have been done. */
static int lun_add_spec(struct lio *lio, const char *wwpn, unsigned tpgt, unsigned lun,
                        struct lun_spec s)
{
    int ret;
    g_autofree char *tdir = tpgt_dir(lio, wwpn, tpgt);
    g_autofree char *name = backstore_name(wwpn, tpgt, lun);
    g_autofree char *ld = g_strdup_printf("%s/lun/lun_%u", tdir, lun);
    g_autofree char *rel = NULL;
    g_autoptr(GPtrArray) bss = backstores(lio);

    /* An existing LUN is fine if it maps this very file or device. */
    if (lio_is_dir(ld)) {
        g_autofree char *cur = NULL;
        if (lun_link(ld, NULL, &cur)) {
            for (guint i = 0; i < bss->len; i++) {
                struct bs_entry *e = bss->pdata[i];
                if (!strcmp(e->rel, cur) && same_file(e->path, s.path)) {
                    g_info("lio: %s LUN %u already maps %s", wwpn, lun, s.path);
                    lun_spec_clear(&s);
                    return 0;
                }
            }
        }
        g_warning("lio: %s tpgt %u LUN %u already exists and maps core/%s, not %s",
                  wwpn, tpgt, lun, cur ? cur : "nothing", s.path);
        lun_spec_clear(&s);
        return -EEXIST;
    }
    /* The same file behind two backstores would be two caches of one disk. */
    for (guint i = 0; i < bss->len; i++) {
        struct bs_entry *e = bss->pdata[i];
        g_autofree char *base = g_path_get_basename(e->rel);
        if (!strcmp(base, name)) {
            if (!same_file(e->path, s.path)) {
                g_warning("lio: stale backstore core/%s backs %s, not %s: remove it first",
                          e->rel, e->path, s.path);
                lun_spec_clear(&s);
                return -EBUSY;
            }
            rel = g_strdup(e->rel);
        } else if (same_file(e->path, s.path)) {
            g_warning("lio: %s is busy: it already backs backstore core/%s", s.path, e->rel);
            lun_spec_clear(&s);
            return -EBUSY;
        }
    }
    bool created = false;
    if (!rel) {
        ret = prepare_backing(&s);
        if (ret == 0) {
            ret = backstore_create(lio, name, &s, &rel);
        }
        if (ret < 0) {
            lun_spec_clear(&s);
            return ret;
        }
        created = true;
    }
    lun_spec_clear(&s);

    warn_tmf_bug(lio, tdir, wwpn, tpgt);
    g_autofree char *target = lio_path(lio, "target", "core", rel, NULL);
    g_autofree char *link = g_build_filename(ld, name, NULL);
    ret = lio_make_dir(ld);
    if (ret == 0 && symlink(target, link) < 0) {
        ret = -errno;
        lio_remove_dir(lio, ld);
    }
    if (ret < 0) {
        g_warning("lio: %s tpgt %u: linking LUN %u to core/%s failed: %s", wwpn, tpgt, lun,
                  rel, g_strerror(-ret));
        if (created) {
            backstore_delete(lio, rel);
        }
        return ret;
    }
    return 0;
}

int lio_target_delete(struct lio *lio, const char *wwpn, bool force)
{
    int ret = check_wwpn(wwpn);
    if (ret < 0) {
        return ret;
    }
    g_autofree char *wdir = lio_path(lio, "target", "vhost", wwpn, NULL);
    if (!lio_is_dir(wdir)) {
        g_info("lio: target %s does not exist", wwpn);
        return 0;
    }
    if (lio->configfs && !force) {
        g_autofree char *comm = NULL;
        int pid = vhost_device_holder(&comm);
        if (pid) {
            g_warning("lio: target %s may be in use: /dev/vhost-scsi is open by pid %d (%s); "
                      "stop the VM or use --force", wwpn, pid, comm ? comm : "?");
            return -EBUSY;
        }
    }
    g_autoptr(GArray) tpgts = lio_numbered_entries(wdir, "tpgt_", LIO_TPGT_MAX);
    /* Check every LUN before touching any, so a refusal changes nothing. */
    for (int pass = 0; pass < 2; pass++) {
        for (guint i = 0; i < tpgts->len; i++) {
            unsigned tpgt = g_array_index(tpgts, unsigned, i);
            g_autofree char *tdir = tpgt_dir(lio, wwpn, tpgt);
            g_autofree char *ldir = g_build_filename(tdir, "lun", NULL);
            g_autoptr(GArray) luns = lio_numbered_entries(ldir, "lun_", UINT_MAX);
            for (guint j = 0; j < luns->len; j++) {
                ret = lun_remove_dir(lio, wwpn, tpgt, g_array_index(luns, unsigned, j),
                                     pass == 0);
                if (ret < 0) {
                    return ret;
                }
            }
        }
    }
    for (guint i = 0; i < tpgts->len; i++) {
        unsigned tpgt = g_array_index(tpgts, unsigned, i);
        g_autofree char *tdir = tpgt_dir(lio, wwpn, tpgt);
        g_autofree char *nfile = g_build_filename(tdir, "nexus", NULL);
        g_autofree char *cur = lio_read_attr(nfile);
        if (lio->configfs && cur && cur[0]) {
            ret = lio_write_attr(lio, nfile, "NULL");
            if (ret < 0) {
                g_warning("lio: target %s tpgt %u: dropping the nexus failed: %s%s", wwpn,
                          tpgt, g_strerror(-ret),
                          ret == -EBUSY ? " (in use by a vhost device)" : "");
                return ret;
            }
        }
        ret = lio_remove_dir(lio, tdir);
        if (ret < 0) {
            g_warning("lio: removing %s failed: %s%s", tdir, g_strerror(-ret),
                      ret == -EBUSY ? " (in use by a vhost device)" : "");
            return ret;
        }
    }
    ret = lio_remove_dir(lio, wdir);
    if (ret < 0) {
        g_warning("lio: removing %s failed: %s", wdir, g_strerror(-ret));
    }
    return ret;
}

/* ------------------------------------------------------------------ list */

void lio_target_free(struct lio_target *t)
{
    if (!t) {
        return;
    }
    g_free(t->wwpn);
    g_free(t->nexus);
    if (t->luns) {
        g_ptr_array_unref(t->luns);
    }
    g_free(t);
}

static void lun_free(gpointer p)
{
    struct lio_lun *l = p;
    g_free(l->path);
    g_free(l->backstore);
    g_free(l);
}

struct lio_target *lio_target_new(void)
{
    struct lio_target *t = g_new0(struct lio_target, 1);
    t->luns = g_ptr_array_new_with_free_func(lun_free);
    return t;
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

static gint cmp_str(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int lio_list(struct lio *lio, GPtrArray **out)
{
    GPtrArray *all = g_ptr_array_new_with_free_func((GDestroyNotify)lio_target_free);
    g_autofree char *vdir = lio_path(lio, "target", "vhost", NULL);
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    DIR *d = opendir(vdir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        g_autofree char *p = g_build_filename(vdir, de->d_name, NULL);
        if (de->d_name[0] != '.' && lio_is_dir(p)) {
            g_ptr_array_add(names, g_strdup(de->d_name));
        }
    }
    if (d) {
        closedir(d);
    }
    g_ptr_array_sort(names, cmp_str);
    for (guint n = 0; n < names->len; n++) {
        const char *wwpn = names->pdata[n];
        g_autofree char *wdir = g_build_filename(vdir, wwpn, NULL);
        g_autoptr(GArray) tpgts = lio_numbered_entries(wdir, "tpgt_", LIO_TPGT_MAX);
        for (guint i = 0; i < tpgts->len; i++) {
            struct lio_target *t = lio_target_new();
            t->wwpn = g_strdup(wwpn);
            t->tpgt = g_array_index(tpgts, unsigned, i);
            g_autofree char *tdir = tpgt_dir(lio, wwpn, t->tpgt);
            g_autofree char *nfile = g_build_filename(tdir, "nexus", NULL);
            t->nexus = lio_read_attr(nfile);
            if (!t->nexus) {
                t->nexus = g_strdup("");
            }
            g_autofree char *ldir = g_build_filename(tdir, "lun", NULL);
            g_autoptr(GArray) luns = lio_numbered_entries(ldir, "lun_", UINT_MAX);
            for (guint j = 0; j < luns->len; j++) {
                struct lio_lun *l = g_new0(struct lio_lun, 1);
                l->lun = g_array_index(luns, unsigned, j);
                g_autofree char *ld = g_strdup_printf("%s/lun_%u", ldir, l->lun);
                if (!lun_link(ld, NULL, &l->backstore)) {
                    l->backstore = g_strdup("");
                }
                l->type = g_str_has_prefix(l->backstore, "fileio_") ? LIO_LUN_FILE :
                          g_str_has_prefix(l->backstore, "iblock_") ? LIO_LUN_BLOCK :
                          LIO_LUN_OTHER;
                g_autofree char *so = lio_path(lio, "target", "core", l->backstore, NULL);
                g_autofree char *up = g_build_filename(so, "udev_path", NULL);
                g_autofree char *ip = g_build_filename(so, "info", NULL);
                g_autofree char *info = lio_read_attr(ip);
                l->path = lio_read_attr(up);
                if (!l->path) {
                    l->path = g_strdup("");
                }
                l->size = info_size(info);
                if (!l->size && l->path[0]) {
                    l->size = device_size(l->path);
                }
                g_autofree char *mine = backstore_name(wwpn, t->tpgt, l->lun);
                g_autofree char *base = g_path_get_basename(l->backstore);
                l->owned = !strcmp(base, mine);
                g_ptr_array_add(t->luns, l);
            }
            g_ptr_array_add(all, t);
        }
    }
    *out = all;
    return 0;
}

char *lio_qemu_args(const char *wwpn, const char *bus, unsigned num_queues)
{
    GString *s = g_string_new("-device vhost-scsi-pci,wwpn=");
    g_string_append(s, wwpn);
    if (bus) {
        g_string_append_printf(s, ",bus=%s", bus);
    }
    if (num_queues) {
        g_string_append_printf(s, ",num_queues=%u", num_queues);
    }
    return g_string_free(s, FALSE);
}
