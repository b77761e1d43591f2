/*
 * The APTPL state file (scsi-pr-file.h): formatting, strict parsing and
 * the atomic replacement.  The file is a GLib key file, readable by a
 * person debugging a cluster's fencing, but it is the daemon's: anything
 * it did not write the way it writes (another format version, another
 * LUN's designator, a missing or malformed field, a duplicate nexus, more
 * registrations than a LUN keeps) is refused whole rather than half
 * believed, since a half-restored reservation could let a fenced node
 * write.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "scsi-pr-file.h"

#define GROUP "reservations"
#define NAME_MAX_LEN 255      /* an iSCSI name is at most 223 bytes; target port names alike */

void pr_file_state_clear(struct pr_file_state *s)
{
    for (unsigned i = 0; i < s->nregs; i++) {
        g_free(s->regs[i].initiator);
        g_free(s->regs[i].target);
    }
    g_free(s->regs);
    *s = (struct pr_file_state) { .holder = -1 };
}

static char *reg_group(unsigned i)
{
    return g_strdup_printf("registration %u", i);
}

char *pr_file_format(const struct pr_file_state *s, size_t *len)
{
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autofree char *naa = g_strdup_printf("naa.%016" PRIx64, s->naa);
    gsize n;
    char *text;

    g_key_file_set_integer(kf, GROUP, "format", PR_FILE_FORMAT);
    g_key_file_set_comment(kf, NULL, NULL,
                           " Persistent reservations of one LUN, kept while APTPL is on.\n"
                           " Rewritten by vhost-scsi-target at every change: do not edit.",
                           NULL);
    g_key_file_set_string(kf, GROUP, "lun", naa);
    g_key_file_set_uint64(kf, GROUP, "generation", s->generation);
    g_key_file_set_integer(kf, GROUP, "registrations", (int)s->nregs);
    if (s->type) {
        g_key_file_set_integer(kf, GROUP, "type", s->type);
        if (s->holder >= 0) {
            g_key_file_set_integer(kf, GROUP, "holder", s->holder);
        }
    }
    for (unsigned i = 0; i < s->nregs; i++) {
        g_autofree char *group = reg_group(i);
        g_autofree char *key = g_strdup_printf("%016" PRIx64, s->regs[i].key);

        g_key_file_set_string(kf, group, "key", key);
        g_key_file_set_string(kf, group, "initiator", s->regs[i].initiator);
        g_key_file_set_string(kf, group, "target", s->regs[i].target);
        g_key_file_set_integer(kf, group, "relative-target-port", s->regs[i].rtpi);
    }
    text = g_key_file_to_data(kf, &n, NULL);
    *len = n;
    return text;
}

/* The unsigned value of group's key in base, within [min, max]. */
static bool get_unsigned(GKeyFile *kf, const char *group, const char *key, unsigned base,
                         uint64_t min, uint64_t max, uint64_t *out, char **why)
{
    g_autofree char *v = g_key_file_get_string(kf, group, key, NULL);

    if (!v) {
        *why = g_strdup_printf("[%s] has no %s", group, key);
        return false;
    }
    g_strstrip(v);
    if (!g_ascii_string_to_unsigned(v, base, min, max, out, NULL)) {
        *why = g_strdup_printf("[%s] %s=%s is not a number in %" PRIu64 "..%" PRIu64, group,
                               key, v, min, max);
        return false;
    }
    return true;
}

static char *get_name(GKeyFile *kf, const char *group, const char *key, char **why)
{
    char *v = g_key_file_get_string(kf, group, key, NULL);

    if (!v || strlen(v) > NAME_MAX_LEN || !g_utf8_validate(v, -1, NULL)) {
        *why = g_strdup_printf("[%s] has no valid %s", group, key);
        g_free(v);
        return NULL;
    }
    return v;
}

static bool type_ok(uint64_t t)
{
    return t == 1 || t == 3 || (t >= 5 && t <= 8);
}

static int parse(GKeyFile *kf, uint64_t naa, unsigned max_regs, struct pr_file_state *s,
                 char **why)
{
    g_autofree char *lun = g_key_file_get_string(kf, GROUP, "lun", NULL);
    g_autofree char *want = g_strdup_printf("naa.%016" PRIx64, naa);
    uint64_t v, n;

    if (!get_unsigned(kf, GROUP, "format", 10, 0, UINT32_MAX, &v, why)) {
        return -EINVAL;
    }
    if (v != PR_FILE_FORMAT) {
        *why = g_strdup_printf("format %" PRIu64 ", this daemon reads format %d", v,
                               PR_FILE_FORMAT);
        return -EINVAL;
    }
    if (!lun || g_ascii_strcasecmp(g_strstrip(lun), want) != 0) {
        *why = g_strdup_printf("it belongs to LUN %s, not this one (%s)", lun ? lun : "(none)",
                               want);
        return -EINVAL;
    }
    s->naa = naa;
    if (!get_unsigned(kf, GROUP, "generation", 10, 0, UINT32_MAX, &v, why) ||
        !get_unsigned(kf, GROUP, "registrations", 10, 0, max_regs, &n, why)) {
        return -EINVAL;
    }
    s->generation = (uint32_t)v;
    s->regs = g_new0(struct pr_file_reg, n);
    for (unsigned i = 0; i < n; i++) {
        g_autofree char *group = reg_group(i);
        struct pr_file_reg *r = &s->regs[i];

        s->nregs = i + 1;
        if (!get_unsigned(kf, group, "key", 16, 1, UINT64_MAX, &r->key, why) ||
            !(r->initiator = get_name(kf, group, "initiator", why)) ||
            !(r->target = get_name(kf, group, "target", why)) ||
            !get_unsigned(kf, group, "relative-target-port", 10, 0, UINT16_MAX, &v, why)) {
            return -EINVAL;
        }
        r->rtpi = (uint16_t)v;
        for (unsigned j = 0; j < i; j++) {
            if (s->regs[j].rtpi == r->rtpi && !strcmp(s->regs[j].initiator, r->initiator) &&
                !strcmp(s->regs[j].target, r->target)) {
                *why = g_strdup_printf("[%s] registers the nexus of [registration %u] again",
                                       group, j);
                return -EINVAL;
            }
        }
    }
    if (g_key_file_has_key(kf, GROUP, "type", NULL)) {
        if (!get_unsigned(kf, GROUP, "type", 10, 1, 8, &v, why)) {
            return -EINVAL;
        }
        if (!type_ok(v)) {
            *why = g_strdup_printf("type=%" PRIu64 " is no reservation type", v);
            return -EINVAL;
        }
        s->type = (uint8_t)v;
    }
    if (s->type && n == 0) {
        *why = g_strdup("a reservation without registrations");
        return -EINVAL;
    }
    if (s->type && s->type < 7) {
        /* One registered nexus holds it. */
        if (!get_unsigned(kf, GROUP, "holder", 10, 0, n - 1, &v, why)) {
            return -EINVAL;
        }
        s->holder = (int)v;
    } else if (g_key_file_has_key(kf, GROUP, "holder", NULL)) {
        *why = g_strdup("holder= without a one-holder reservation type");
        return -EINVAL;
    }
    return 0;
}

int pr_file_parse(const char *text, size_t len, uint64_t naa, unsigned max_regs,
                  struct pr_file_state *s, char **why)
{
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autoptr(GError) err = NULL;
    int ret;

    pr_file_state_clear(s);
    *why = NULL;
    if (memchr(text, '\0', len)) {
        *why = g_strdup("not a text file");
        return -EINVAL;
    }
    if (!g_key_file_load_from_data(kf, text, len, G_KEY_FILE_NONE, &err)) {
        *why = g_strdup_printf("not a key file: %s", err->message);
        return -EINVAL;
    }
    if (!g_key_file_has_group(kf, GROUP)) {
        *why = g_strdup("no [" GROUP "] group");
        return -EINVAL;
    }
    ret = parse(kf, naa, max_regs, s, why);
    if (ret < 0) {
        pr_file_state_clear(s);
    }
    return ret;
}

static int fsync_dir_of(const char *path, char **why)
{
    g_autofree char *dir = g_path_get_dirname(path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int ret = 0;

    if (fd < 0 || fsync(fd) < 0) {
        ret = -errno;
        *why = g_strdup_printf("cannot sync directory %s: %s", dir, g_strerror(-ret));
    }
    if (fd >= 0) {
        close(fd);
    }
    return ret;
}

int pr_file_write(const char *path, const char *data, size_t len, char **why)
{
    g_autofree char *tmp = g_strdup_printf("%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    size_t done = 0;
    int ret;

    if (fd < 0) {
        ret = -errno;
        *why = g_strdup_printf("cannot create %s: %s", tmp, g_strerror(-ret));
        return ret;
    }
    while (done < len) {
        ssize_t n = write(fd, data + done, len - done);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            ret = n < 0 ? -errno : -EIO;
            *why = g_strdup_printf("cannot write %s: %s", tmp, g_strerror(-ret));
            goto fail;
        }
        done += (size_t)n;
    }
    if (fsync(fd) < 0) {
        ret = -errno;
        *why = g_strdup_printf("cannot sync %s: %s", tmp, g_strerror(-ret));
        goto fail;
    }
    close(fd);
    fd = -1;
    if (rename(tmp, path) < 0) {
        ret = -errno;
        *why = g_strdup_printf("cannot rename %s to %s: %s", tmp, path, g_strerror(-ret));
        goto fail;
    }
    return fsync_dir_of(path, why);

fail:
    if (fd >= 0) {
        close(fd);
    }
    unlink(tmp);
    return ret;
}

int pr_file_remove(const char *path, char **why)
{
    if (unlink(path) < 0) {
        int e = errno;

        if (e == ENOENT) {
            return 0;
        }
        *why = g_strdup_printf("cannot remove %s: %s", path, g_strerror(e));
        return -e;
    }
    return fsync_dir_of(path, why);
}
