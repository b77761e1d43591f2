/*
 * vhost-scsi-ctl's lio commands (include/lio/lio-command.h): each
 * command's arity, WWPN and LUN are checked before anything opens the
 * root, since opening the host's loads kernel modules and mounts
 * configfs; then one call of lio-configfs.h does the work.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include "lio-command.h"

G_DEFINE_QUARK(vhost-scsi-lio-command-error-quark, lio_command_error)

static const struct {
    const char *name;           /* the words that name it */
    const char *sub;            /* NULL: none */
    enum lio_command_kind kind;
    int min, max;               /* words, the command's own included */
    int wwpn_at;                /* the word that is a WWPN; 0: none */
} commands[] = {
    { "create", NULL, LIO_CMD_CREATE, 1, 2, 1 },
    { "delete", NULL, LIO_CMD_DELETE, 2, 2, 1 },
    { "lun", "add", LIO_CMD_LUN_ADD, 5, 5, 2 },
    { "lun", "remove", LIO_CMD_LUN_REMOVE, 4, 4, 2 },
    { "list", NULL, LIO_CMD_LIST, 1, 1, 0 },
    { "save", NULL, LIO_CMD_SAVE, 2, 2, 0 },
    { "restore", NULL, LIO_CMD_RESTORE, 2, 2, 0 },
    { "qemu-args", NULL, LIO_CMD_QEMU_ARGS, 2, 2, 1 },
    { "generate-wwpn", NULL, LIO_CMD_GENERATE_WWPN, 1, 1, 0 },
};

static bool usage(GError **err, const char *fmt, const char *arg)
{
    g_set_error(err, LIO_COMMAND_ERROR, LIO_COMMAND_ERROR_USAGE, fmt, arg);
    return false;
}

bool lio_command_parse(const char *const *words, int n, struct lio_command *c, GError **err)
{
    size_t i;

    if (n < 1) {
        return usage(err, "missing command%s", "");
    }
    for (i = 0; i < G_N_ELEMENTS(commands); i++) {
        if (!strcmp(words[0], commands[i].name) &&
            (!commands[i].sub || (n >= 2 && !strcmp(words[1], commands[i].sub)))) {
            break;
        }
    }
    if (i == G_N_ELEMENTS(commands)) {
        return !strcmp(words[0], "lun") ? usage(err, "'lun' needs 'add' or 'remove'%s", "")
                                        : usage(err, "unknown command '%s'", words[0]);
    }
    if (n < commands[i].min || n > commands[i].max) {
        return usage(err, "wrong number of arguments for '%s'", words[0]);
    }
    c->kind = commands[i].kind;
    c->wwpn = commands[i].wwpn_at && commands[i].wwpn_at < n ? words[commands[i].wwpn_at] : NULL;
    if (c->wwpn && !lio_wwpn_valid(c->wwpn)) {
        return usage(err, "invalid WWPN '%s' (naa.5<15 hex>, naa.6<31 hex>, iqn.YYYY-MM.domain, "
                     "eui.<16 hex>)", c->wwpn);
    }
    if (commands[i].sub) {
        guint64 lun;

        if (!g_ascii_string_to_unsigned(words[3], 10, 0, LIO_LUN_MAX, &lun, NULL)) {
            return usage(err, "LUN '%s': expected 0..16383", words[3]);
        }
        c->lun = (unsigned)lun;
        c->spec = n > 4 ? words[4] : NULL;
    }
    c->file = c->kind == LIO_CMD_SAVE || c->kind == LIO_CMD_RESTORE ? words[1] : NULL;
    return true;
}

bool lio_command_needs_root(const struct lio_command *c)
{
    return c->kind != LIO_CMD_QEMU_ARGS && c->kind != LIO_CMD_GENERATE_WWPN;
}

static int run_list(struct lio *lio, const struct lio_command *c, char **out, GError **err)
{
    GPtrArray *targets;
    int ret = lio_list(lio, &targets);

    if (ret < 0) {
        return ret;
    }
    if (c->json) {
        ret = lio_list_to_json(targets, out, err);
    } else {
        *out = lio_list_to_text(targets);
    }
    g_ptr_array_unref(targets);
    return ret;
}

/* create: a new WWPN unless one is given; prints the WWPN. */
static int run_create(struct lio *lio, const struct lio_command *c, char **out, GError **err)
{
    char w[LIO_WWPN_MAX];
    const char *wwpn = c->wwpn;
    int ret = 0;

    if (!wwpn) {
        ret = lio_wwpn_generate(w, err);
        wwpn = w;
    }
    if (ret == 0) {
        ret = lio_target_create(lio, wwpn, c->tpgt, c->nexus, err);
    }
    if (ret == 0) {
        *out = g_strdup_printf("%s\n", wwpn);
    }
    return ret;
}

int lio_command_run(struct lio *lio, const struct lio_command *c, char **out, GError **err)
{
    char w[LIO_WWPN_MAX];
    int ret;

    *out = NULL;
    switch (c->kind) {
    case LIO_CMD_GENERATE_WWPN:
        ret = lio_wwpn_generate(w, err);
        *out = ret == 0 ? g_strdup_printf("%s\n", w) : NULL;
        return ret;
    case LIO_CMD_QEMU_ARGS: {
        g_autofree char *s = lio_qemu_args(c->wwpn, c->bus, c->num_queues);

        *out = g_strdup_printf("%s\n", s);
        return 0;
    }
    case LIO_CMD_CREATE:
        return run_create(lio, c, out, err);
    case LIO_CMD_DELETE:
        return lio_target_delete(lio, c->wwpn, c->force, err);
    case LIO_CMD_LUN_ADD:
        return lio_lun_add(lio, c->wwpn, c->tpgt, c->lun, c->spec, err);
    case LIO_CMD_LUN_REMOVE:
        return lio_lun_remove(lio, c->wwpn, c->tpgt, c->lun, err);
    case LIO_CMD_LIST:
        return run_list(lio, c, out, err);
    case LIO_CMD_SAVE:
        return lio_save(lio, c->file, c->format, err);
    case LIO_CMD_RESTORE:
        return lio_restore(lio, c->file, c->partial, err);
    }
    return 0;
}
