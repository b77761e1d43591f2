/*
 * LIO/tcm_vhost configuration through configfs, for vhost-scsi-ctl: target
 * WWPNs and TPGs with their I_T nexus, LUN links onto backstores
 * (lio-backstore.c), deletion and listing.  Every operation is idempotent
 * (it drives the tree towards a wanted state) and undoes its own steps when
 * one fails, so a refused or failed command leaves the tree as it was.  All
 * filesystem and kernel access goes through the root's operations table
 * (include/lio/lio-fs.h, helpers in lio-tree.c), so the unit tests run this
 * very code against a fake.  The saved form of a configuration (list
 * --json, save, restore) is lio-config.c's.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lio-int.h"
#include "vs-error.h"

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

static int random_bytes(uint8_t *buf, size_t len, GError **err)
{
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return vs_error_set(err, -e, "cannot open /dev/urandom: %s", g_strerror(e));
    }
    ssize_t n = read(fd, buf, len);
    int e = errno;
    close(fd);
    if (n != (ssize_t)len) {
        return vs_error_set(err, n < 0 ? -e : -EIO, "cannot read /dev/urandom: %s",
                            n < 0 ? g_strerror(e) : "short read");
    }
    return 0;
}

int lio_wwpn_generate(char *out, GError **err)
{
    uint8_t r[5];
    int ret = random_bytes(r, sizeof(r), err);
    if (ret < 0) {
        return ret;
    }
    /* 5 + OUI 001405 (Linux-iSCSI.org, as targetcli does) + 36 random bits */
    snprintf(out, LIO_WWPN_MAX, "naa.5001405%01x%02x%02x%02x%02x",
             r[0] & 0xf, r[1], r[2], r[3], r[4]);
    return 0;
}

/* A nexus name the kernel accepts for a target of this WWPN's protocol. */
static int nexus_generate(const char *wwpn, char *out, GError **err)
{
    if (g_str_has_prefix(wwpn, "iqn.")) {
        uint8_t r[6];
        int ret = random_bytes(r, sizeof(r), err);
        if (ret < 0) {
            return ret;
        }
        snprintf(out, LIO_WWPN_MAX,
                 "iqn.2003-01.org.linux-iscsi.vhost-scsi:%02x%02x%02x%02x%02x%02x",
                 r[0], r[1], r[2], r[3], r[4], r[5]);
        return 0;
    }
    return lio_wwpn_generate(out, err);
}

static char *tpgt_dir(const struct lio *lio, const char *wwpn, unsigned tpgt)
{
    g_autofree char *t = g_strdup_printf("tpgt_%u", tpgt);
    return lio_path(lio, "target", "vhost", wwpn, t, NULL);
}

/* --------------------------------------------------------------- targets */

static int check_wwpn(const char *wwpn, GError **err)
{
    if (!lio_wwpn_valid(wwpn)) {
        return vs_error_set(err, -EINVAL, "invalid WWPN '%s': expected naa.5<15 hex> / "
                            "naa.6<31 hex> (lowercase), iqn.YYYY-MM.domain[:id] or "
                            "eui.<16 hex>", wwpn ? wwpn : "");
    }
    return 0;
}

static int check_tpgt(unsigned tpgt, GError **err)
{
    if (tpgt > LIO_TPGT_MAX) {
        return vs_error_set(err, -ERANGE, "TPGT %u out of range 0..%u", tpgt, LIO_TPGT_MAX);
    }
    return 0;
}

static int check_lun(unsigned lun, GError **err)
{
    if (lun > LIO_LUN_MAX) {
        return vs_error_set(err, -ERANGE, "LUN %u out of range 0..%u", lun, LIO_LUN_MAX);
    }
    return 0;
}

/* The WWPN, the TPGT and (unless NULL) the LUN a call names. */
static int check_names(const char *wwpn, unsigned tpgt, const unsigned *lun, GError **err)
{
    int ret = check_wwpn(wwpn, err);
    if (ret == 0) {
        ret = check_tpgt(tpgt, err);
    }
    if (ret == 0 && lun) {
        ret = check_lun(*lun, err);
    }
    return ret;
}

int lio_target_create(struct lio *lio, const char *wwpn, unsigned tpgt, const char *nexus,
                      GError **err)
{
    int ret = check_names(wwpn, tpgt, NULL, err);
    if (ret < 0) {
        return ret;
    }
    if (g_str_has_prefix(wwpn, "eui.")) {
        /* vhost_scsi_make_tport() only knows naa., fc. and iqn. */
        return vs_error_set(err, -EINVAL, "WWPN %s: the kernel vhost fabric accepts only "
                            "naa. and iqn. names", wwpn);
    }
    char gen[LIO_WWPN_MAX];
    if (nexus) {
        /* The kernel wants the initiator's protocol to match the target's. */
        if (!lio_wwpn_valid(nexus) || strncmp(nexus, wwpn, 4)) {
            return vs_error_set(err, -EINVAL, "nexus '%s' for %s must be a valid name with "
                                "the prefix %.4s", nexus, wwpn, wwpn);
        }
    } else {
        ret = nexus_generate(wwpn, gen, err);
        if (ret < 0) {
            return ret;
        }
        nexus = gen;
    }
    g_autofree char *wdir = lio_path(lio, "target", "vhost", wwpn, NULL);
    g_autofree char *tdir = tpgt_dir(lio, wwpn, tpgt);
    g_autofree char *nfile = g_build_filename(tdir, "nexus", NULL);
    g_autofree char *cur = NULL;
    bool made_wdir = false, made_tdir = false;

    if (!lio_is_dir(lio, wdir)) {
        ret = lio->ops->mkdir(lio->opaque, wdir);
        made_wdir = ret == 0;
    }
    if (ret == 0 && !lio_is_dir(lio, tdir)) {
        ret = lio->ops->mkdir(lio->opaque, tdir);
        made_tdir = ret == 0;
    }
    if (ret < 0) {
        vs_error_set(err, ret, "cannot create %s: %s", tdir, g_strerror(-ret));
        goto undo;
    }
    cur = lio_read_attr(lio, nfile);
    if (cur && cur[0] && nexus != gen && strcmp(cur, nexus)) {
        return vs_error_set(err, -EEXIST, "target %s tpgt %u already has nexus %s, not %s",
                            wwpn, tpgt, cur, nexus);
    }
    if (cur && cur[0]) {
        g_info("lio: target %s tpgt %u already exists (nexus %s)", wwpn, tpgt, cur);
        return 0;
    }
    /* tcm_vhost: the nexus must exist before LUNs are linked. */
    ret = lio_write_attr(lio, nfile, nexus);
    if (ret < 0) {
        vs_error_set(err, ret, "target %s tpgt %u: writing nexus=%s to %s failed: %s", wwpn,
                     tpgt, nexus, nfile, g_strerror(-ret));
        goto undo;
    }
    return 0;
undo:
    if (made_tdir) {
        lio_remove_dir(lio, tdir);
    }
    if (made_wdir) {
        lio_remove_dir(lio, wdir);
    }
    return ret;
}

/* ------------------------------------------------------------------- LUNs */

/* The LUN symlink in lun_dir and the "hba/name" it points to. */
static bool lun_link(const struct lio *lio, const char *lun_dir, char **link_path, char **rel)
{
    g_autoptr(GPtrArray) names = lio_readdir(lio, lun_dir);
    for (guint i = 0; i < names->len; i++) {
        g_autofree char *p = g_build_filename(lun_dir, names->pdata[i], NULL);
        g_autofree char *tgt = NULL;
        if (!lio_is_link(lio, p) || lio->ops->readlink(lio->opaque, p, &tgt) < 0) {
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
        return true;
    }
    return false;
}

/* Every LUN link of every fabric pointing to core-relative rel. */
static GPtrArray *links_to(const struct lio *lio, const char *rel)
{
    GPtrArray *users = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *target = lio_path(lio, "target", NULL);
    g_autoptr(GPtrArray) fabrics = lio_readdir(lio, target);
    for (guint f = 0; f < fabrics->len; f++) {
        if (!strcmp(fabrics->pdata[f], "core")) {
            continue;
        }
        g_autofree char *fab = g_build_filename(target, fabrics->pdata[f], NULL);
        g_autoptr(GPtrArray) wwpns = lio_readdir(lio, fab);
        for (guint w = 0; w < wwpns->len; w++) {
            g_autofree char *wdir = g_build_filename(fab, wwpns->pdata[w], NULL);
            if (!lio_is_dir(lio, wdir)) {
                continue;
            }
            g_autoptr(GArray) tpgts = lio_numbered_entries(lio, wdir, "tpgt_", UINT16_MAX);
            for (guint i = 0; i < tpgts->len; i++) {
                g_autofree char *ld = g_strdup_printf("%s/tpgt_%u/lun", wdir,
                                                      g_array_index(tpgts, unsigned, i));
                g_autoptr(GArray) luns = lio_numbered_entries(lio, ld, "lun_", UINT_MAX);
                for (guint j = 0; j < luns->len; j++) {
                    g_autofree char *lp = g_strdup_printf("%s/lun_%u", ld,
                                                          g_array_index(luns, unsigned, j));
                    g_autofree char *r = NULL;
                    if (lun_link(lio, lp, NULL, &r) && !strcmp(r, rel)) {
                        g_ptr_array_add(users, g_strdup(lp));
                    }
                }
            }
        }
    }
    return users;
}

static int lun_remove_dir(struct lio *lio, const char *wwpn, unsigned tpgt, unsigned lun,
                          bool check_only, GError **err)
{
    g_autofree char *tdir = tpgt_dir(lio, wwpn, tpgt);
    g_autofree char *ld = g_strdup_printf("%s/lun/lun_%u", tdir, lun);
    g_autofree char *link = NULL, *rel = NULL;
    if (!lio_is_dir(lio, ld)) {
        return 0;
    }
    bool linked = lun_link(lio, ld, &link, &rel);
    g_autofree char *mine = lio_backstore_name(wwpn, tpgt, lun);
    g_autofree char *rel_base = rel ? g_path_get_basename(rel) : NULL;
    bool owned = linked && !strcmp(rel_base, mine);
    if (owned) {
        g_autoptr(GPtrArray) users = links_to(lio, rel);
        for (guint i = 0; i < users->len; i++) {
            if (strcmp(users->pdata[i], ld)) {
                return vs_error_set(err, -EBUSY, "backstore core/%s of %s LUN %u is busy: "
                                    "also linked from %s", rel, wwpn, lun,
                                    (char *)users->pdata[i]);
            }
        }
    }
    if (check_only) {
        return 0;
    }
    int ret = linked ? lio->ops->unlink(lio->opaque, link) : 0;
    if (ret < 0) {
        return vs_error_set(err, ret, "unlinking %s failed: %s", link, g_strerror(-ret));
    }
    ret = lio_remove_dir(lio, ld);
    if (ret < 0) {
        return vs_error_set(err, ret, "removing %s failed: %s", ld, g_strerror(-ret));
    }
    return owned ? lio_backstore_delete(lio, rel, err) : 0;
}

int lio_lun_remove(struct lio *lio, const char *wwpn, unsigned tpgt, unsigned lun,
                   GError **err)
{
    int ret = check_names(wwpn, tpgt, &lun, err);
    return ret < 0 ? ret : lun_remove_dir(lio, wwpn, tpgt, lun, false, err);
}

/*
 * Before Linux 6.4 ("vhost-scsi: Fix crash during LUN unmapping") a LUN
 * RESET on a TPG with several LUNs corrupts the TPG's TMF list, and
 * unmapping its LUNs later crashes the host.  Seen with Debian 12's 6.1.
 */
static void warn_tmf_bug(const struct lio *lio, const char *tdir, const char *wwpn,
                         unsigned tpgt)
{
    char rel[256];
    unsigned major = 0, minor = 0;
    if (lio->ops->kernel_release(lio->opaque, rel, sizeof(rel)) < 0 ||
        sscanf(rel, "%u.%u", &major, &minor) != 2 || major > 6 || (major == 6 && minor >= 4)) {
        return;
    }
    g_autofree char *ldir = g_build_filename(tdir, "lun", NULL);
    g_autoptr(GArray) luns = lio_numbered_entries(lio, ldir, "lun_", UINT_MAX);
    if (luns->len) {
        g_message("lio: %s tpgt %u gets a second LUN: on kernel %s (< 6.4) a guest's LUN reset "
                  "then makes unmapping these LUNs crash the host; prefer one LUN per TPG",
                  wwpn, tpgt, rel);
    }
}

static int lun_add_checks(struct lio *lio, const char *wwpn, unsigned tpgt, unsigned lun,
                          GError **err)
{
    int ret = check_names(wwpn, tpgt, &lun, err);
    if (ret < 0) {
        return ret;
    }
    g_autofree char *tdir = tpgt_dir(lio, wwpn, tpgt);
    if (!lio_is_dir(lio, tdir)) {
        return vs_error_set(err, -ENOENT, "target %s tpgt %u does not exist (create it first)",
                            wwpn, tpgt);
    }
    return 0;
}

/* The checks of lun_add_checks and of the backing have been done. */
static int lun_add(struct lio *lio, const char *wwpn, unsigned tpgt, unsigned lun,
                   const struct lio_backing *b, GError **err)
{
    int ret;
    g_autofree char *tdir = tpgt_dir(lio, wwpn, tpgt);
    g_autofree char *name = b->name && b->name[0] ? g_strdup(b->name) :
                            lio_backstore_name(wwpn, tpgt, lun);
    g_autofree char *kind = lio_backstore_kind(b->type);
    g_autofree char *ld = g_strdup_printf("%s/lun/lun_%u", tdir, lun);
    g_autofree char *rel = NULL;
    g_autoptr(GPtrArray) bss = lio_backstores(lio);

    /* An existing LUN is fine if it maps this very backing, options and all. */
    if (lio_is_dir(lio, ld)) {
        g_autofree char *cur = NULL;
        struct lio_lun l = { 0 };
        bool same = lun_link(lio, ld, NULL, &cur);
        if (same) {
            lio_backstore_describe(lio, cur, &l);
            same = lio_backing_matches(lio, &l, b);
            g_free(l.path);
            g_free(l.serial);
        }
        if (same) {
            g_info("lio: %s tpgt %u LUN %u already maps core/%s", wwpn, tpgt, lun, cur);
            return 0;
        }
        return vs_error_set(err, -EEXIST, "%s tpgt %u LUN %u already exists and maps core/%s, "
                            "not %s%s", wwpn, tpgt, lun, cur ? cur : "nothing",
                            b->path && b->path[0] ? b->path : "a new ",
                            b->path && b->path[0] ? "" : lio_lun_type_name(b->type));
    }
    /* The same file behind two backstores would be two caches of one disk. */
    for (guint i = 0; i < bss->len; i++) {
        struct lio_bs_entry *e = bss->pdata[i];
        g_autofree char *base = g_path_get_basename(e->rel);
        if (!strcmp(base, name) && g_str_has_prefix(e->rel, kind)) {
            /*
             * Ours but unlinked (a crash between two steps), or a named one
             * (targetcli's) that another LUN links too: reused if it fits.
             */
            struct lio_lun l = { 0 };
            lio_backstore_describe(lio, e->rel, &l);
            bool fits = lio_backing_matches(lio, &l, b);
            g_free(l.path);
            g_free(l.serial);
            if (!fits) {
                return vs_error_set(err, -EBUSY, "backstore core/%s backs %s, not %s: remove "
                                    "it first", e->rel, e->path[0] ? e->path : "no file",
                                    b->path && b->path[0] ? b->path : "this spec");
            }
            rel = g_strdup(e->rel);
        } else if (lio_same_file(lio, e->path, b->path)) {
            return vs_error_set(err, -EBUSY, "%s is busy: it already backs backstore core/%s",
                                b->path, e->rel);
        }
    }
    bool created = false, file_created = false;
    if (!rel) {
        ret = lio_backstore_create(lio, name, b, &rel, &file_created, err);
        if (ret < 0) {
            return ret;
        }
        created = true;
    }

    warn_tmf_bug(lio, tdir, wwpn, tpgt);
    g_autofree char *target = lio_path(lio, "target", "core", rel, NULL);
    g_autofree char *link = g_build_filename(ld, b->alias && b->alias[0] ? b->alias : name, NULL);
    ret = lio->ops->mkdir(lio->opaque, ld);
    if (ret == 0 && (ret = lio->ops->symlink(lio->opaque, target, link)) < 0) {
        lio_remove_dir(lio, ld);
    }
    if (ret < 0) {
        vs_error_set(err, ret, "%s tpgt %u: linking LUN %u (%s) to core/%s failed: %s", wwpn,
                     tpgt, lun, ld, rel, g_strerror(-ret));
        if (created) {
            lio_backstore_undo_create(lio, rel, b, file_created);
        }
        return ret;
    }
    return 0;
}

int lio_lun_add(struct lio *lio, const char *wwpn, unsigned tpgt, unsigned lun,
                const char *spec, GError **err)
{
    int ret = lun_add_checks(lio, wwpn, tpgt, lun, err);
    if (ret < 0) {
        return ret;
    }
    g_autofree char *path = NULL;
    struct lio_backing b;
    ret = lio_backing_from_spec(lio, spec, &b, &path, err);
    return ret < 0 ? ret : lun_add(lio, wwpn, tpgt, lun, &b, err);
}

int lio_lun_add_backing(struct lio *lio, const char *wwpn, unsigned tpgt, unsigned lun,
                        const struct lio_backing *b, GError **err)
{
    int ret = lun_add_checks(lio, wwpn, tpgt, lun, err);
    if (ret < 0) {
        return ret;
    }
    g_autofree char *why = lio_backing_refusal(b);
    if (why) {
        return vs_error_set(err, -EINVAL, "%s tpgt %u LUN %u (%s '%s'): %s", wwpn, tpgt, lun,
                            lio_lun_type_name(b->type), b->path ? b->path : "", why);
    }
    return lun_add(lio, wwpn, tpgt, lun, b, err);
}

int lio_tpgt_remove(struct lio *lio, const char *wwpn, unsigned tpgt, GError **err)
{
    g_autofree char *tdir = tpgt_dir(lio, wwpn, tpgt);
    g_autofree char *nfile = g_build_filename(tdir, "nexus", NULL);
    g_autofree char *cur = lio_read_attr(lio, nfile);
    int ret;
    if (cur && cur[0]) {
        ret = lio_write_attr(lio, nfile, "NULL");
        if (ret < 0) {
            return vs_error_set(err, ret, "target %s tpgt %u: writing nexus=NULL to %s "
                                "failed: %s%s", wwpn, tpgt, nfile, g_strerror(-ret),
                                ret == -EBUSY ? " (in use by a vhost device)" : "");
        }
    }
    ret = lio_remove_dir(lio, tdir);
    if (ret < 0) {
        vs_error_set(err, ret, "removing %s failed: %s%s", tdir, g_strerror(-ret),
                     ret == -EBUSY ? " (in use by a vhost device)" : "");
    }
    return ret;
}

int lio_target_delete(struct lio *lio, const char *wwpn, bool force, GError **err)
{
    int ret = check_wwpn(wwpn, err);
    if (ret < 0) {
        return ret;
    }
    g_autofree char *wdir = lio_path(lio, "target", "vhost", wwpn, NULL);
    if (!lio_is_dir(lio, wdir)) {
        g_info("lio: target %s does not exist", wwpn);
        return 0;
    }
    if (!force) {
        g_autofree char *comm = NULL;
        int pid = lio->ops->vhost_holder(lio->opaque, &comm);
        if (pid) {
            return vs_error_set(err, -EBUSY, "target %s may be in use: /dev/vhost-scsi is "
                                "open by pid %d (%s); stop the VM or use --force", wwpn, pid,
                                comm ? comm : "?");
        }
    }
    g_autoptr(GArray) tpgts = lio_numbered_entries(lio, wdir, "tpgt_", LIO_TPGT_MAX);
    /* Check every LUN before touching any, so a refusal changes nothing. */
    for (int pass = 0; pass < 2; pass++) {
        for (guint i = 0; i < tpgts->len; i++) {
            unsigned tpgt = g_array_index(tpgts, unsigned, i);
            g_autofree char *tdir = tpgt_dir(lio, wwpn, tpgt);
            g_autofree char *ldir = g_build_filename(tdir, "lun", NULL);
            g_autoptr(GArray) luns = lio_numbered_entries(lio, ldir, "lun_", UINT_MAX);
            for (guint j = 0; j < luns->len; j++) {
                ret = lun_remove_dir(lio, wwpn, tpgt, g_array_index(luns, unsigned, j),
                                     pass == 0, err);
                if (ret < 0) {
                    return ret;
                }
            }
        }
    }
    for (guint i = 0; i < tpgts->len; i++) {
        ret = lio_tpgt_remove(lio, wwpn, g_array_index(tpgts, unsigned, i), err);
        if (ret < 0) {
            return ret;
        }
    }
    ret = lio_remove_dir(lio, wdir);
    if (ret < 0) {
        vs_error_set(err, ret, "removing %s failed: %s", wdir, g_strerror(-ret));
    }
    return ret;
}

/* ------------------------------------------------------------------ list */

const char *lio_lun_type_name(enum lio_lun_type t)
{
    static const char *const names[] = {
        [LIO_LUN_FILE] = "file", [LIO_LUN_BLOCK] = "block", [LIO_LUN_RAM] = "ram",
        [LIO_LUN_NULL] = "null", [LIO_LUN_OTHER] = "other",
    };
    return t <= LIO_LUN_OTHER ? names[t] : "other";
}

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
    g_free(l->serial);
    g_free(l->alias);
    g_free(l);
}

struct lio_target *lio_target_new(void)
{
    struct lio_target *t = g_new0(struct lio_target, 1);
    t->luns = g_ptr_array_new_with_free_func(lun_free);
    return t;
}

static struct lio_lun *list_lun(struct lio *lio, const char *wwpn, unsigned tpgt,
                                const char *ldir, unsigned lun)
{
    struct lio_lun *l = g_new0(struct lio_lun, 1);
    l->lun = lun;
    g_autofree char *ld = g_strdup_printf("%s/lun_%u", ldir, l->lun);
    g_autofree char *link = NULL;
    if (!lun_link(lio, ld, &link, &l->backstore)) {
        l->backstore = g_strdup("");
    }
    l->alias = link ? g_path_get_basename(link) : g_strdup("");
    lio_backstore_describe(lio, l->backstore, l);
    g_autofree char *mine = lio_backstore_name(wwpn, tpgt, l->lun);
    g_autofree char *base = g_path_get_basename(l->backstore);
    l->owned = !strcmp(base, mine);
    return l;
}

int lio_list(struct lio *lio, GPtrArray **out)
{
    GPtrArray *all = g_ptr_array_new_with_free_func((GDestroyNotify)lio_target_free);
    g_autofree char *vdir = lio_path(lio, "target", "vhost", NULL);
    g_autoptr(GPtrArray) names = lio_readdir(lio, vdir);
    for (guint n = 0; n < names->len; n++) {
        const char *wwpn = names->pdata[n];
        g_autofree char *wdir = g_build_filename(vdir, wwpn, NULL);
        if (wwpn[0] == '.' || !lio_is_dir(lio, wdir)) {
            continue;
        }
        g_autoptr(GArray) tpgts = lio_numbered_entries(lio, wdir, "tpgt_", LIO_TPGT_MAX);
        for (guint i = 0; i < tpgts->len; i++) {
            struct lio_target *t = lio_target_new();
            t->wwpn = g_strdup(wwpn);
            t->tpgt = g_array_index(tpgts, unsigned, i);
            g_autofree char *tdir = tpgt_dir(lio, wwpn, t->tpgt);
            g_autofree char *nfile = g_build_filename(tdir, "nexus", NULL);
            t->nexus = lio_read_attr(lio, nfile);
            if (!t->nexus) {
                t->nexus = g_strdup("");
            }
            g_autofree char *ldir = g_build_filename(tdir, "lun", NULL);
            g_autoptr(GArray) luns = lio_numbered_entries(lio, ldir, "lun_", UINT_MAX);
            for (guint j = 0; j < luns->len; j++) {
                g_ptr_array_add(t->luns, list_lun(lio, wwpn, t->tpgt, ldir,
                                                  g_array_index(luns, unsigned, j)));
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
