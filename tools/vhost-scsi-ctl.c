/*
 * vhost-scsi-ctl: administration of the in-kernel vhost-scsi target path.
 * `vhost-scsi-ctl lio …` creates and removes LIO/tcm_vhost targets, LUNs and
 * their backstores through configfs (hw/lio/ does the work), lists, saves
 * and restores them, and prints the QEMU option that attaches a target to a
 * VM.  LUNs are given in vhost-scsi-target's --lun SPEC grammar
 * (hw/block/), so one spec means one disk on either path.  Results go to
 * stdout, diagnostics to stderr; exit code 0 on success, 1 when an
 * operation failed, 2 on a usage error.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "ctl-target.h"
#include "lio-configfs.h"

#define EXIT_USAGE 2

static const char usage_text[] =
    "Usage: vhost-scsi-ctl lio [--configfs DIR] [-v] COMMAND [ARGS] [OPTIONS]\n"
    "       vhost-scsi-ctl target [--control PATH] [--json] COMMAND   (see target --help)\n"
    "\n"
    "Configure the kernel vhost-scsi target (LIO tcm_vhost) through configfs.\n"
    "On the default root the kernel modules (target_core_mod, target_core_file,\n"
    "target_core_iblock, vhost_scsi) are loaded and configfs is mounted first.\n"
    "\n"
    "Commands:\n"
    "  create [WWPN] [--tpgt N] [--nexus NAME]\n"
    "                      create target/vhost/WWPN/tpgt_N with an I_T nexus;\n"
    "                      without WWPN a random naa.5001405… is generated;\n"
    "                      prints the WWPN\n"
    "  delete WWPN [--force]\n"
    "                      remove the target, its LUNs and the backstores it\n"
    "                      created (refused while /dev/vhost-scsi is in use)\n"
    "  lun add WWPN LUN SPEC [--tpgt N]\n"
    "                      SPEC as vhost-scsi-target's --lun, mapped onto LIO:\n"
    "                        file:PATH[,ro][,direct][,block-size=512|4096][,size=SIZE]\n"
    "                          a block device: iblock (ro: readonly=1; no size=);\n"
    "                          a file: fileio, created/extended to size=, through\n"
    "                          the page cache or, with direct, O_DIRECT (no ro)\n"
    "                        ram:SIZE, null:SIZE   rd_mcp (null: rd_nullio=1; no ro)\n"
    "                      iscsi:// and rbd: are vhost-scsi-target's only\n"
    "  lun remove WWPN LUN [--tpgt N]\n"
    "  list [--json]       show all vhost targets and LUNs\n"
    "  save FILE [--format native|targetcli]\n"
    "                      write the configuration as JSON: ours (default), or a\n"
    "                      saveconfig.json for targetcli restoreconfig\n"
    "  restore FILE [--partial]\n"
    "                      create everything FILE describes (ours, or targetcli's\n"
    "                      saveconfig.json: vhost targets on fileio, block and\n"
    "                      ramdisk backstores); what cannot be mapped is named and\n"
    "                      refused, or with --partial left out\n"
    "  qemu-args WWPN [--bus BUS] [--num-queues N]\n"
    "                      print the QEMU -device option for the target\n"
    "  generate-wwpn       print a random naa.5 WWPN\n"
    "\n"
    "Options:\n"
    "  --configfs DIR      configfs root (default " LIO_CONFIGFS_DEFAULT "); another\n"
    "                      root is used as it is: no modules loaded, no mount\n"
    "  --tpgt N            target portal group tag, 0..255 (default 1)\n"
    "  -v, --verbose       also print informational messages\n"
    "  --version           print the version and exit\n"
    "  -h, --help          this text\n"
    "\n"
    "All commands are idempotent.  Exit status: 0 success, 1 failure, 2 usage.\n";

struct ctl {
    const char *configfs;
    unsigned tpgt;
    bool tpgt_set;
    const char *nexus;
    const char *bus;
    unsigned num_queues;
    bool json;
    bool force;
    bool partial;
    enum lio_format format;
    bool verbose;
    const char *pos[8];
    int npos;
};

static void log_handler(const gchar *domain, GLogLevelFlags level, const gchar *msg,
                        gpointer data)
{
    const struct ctl *c = data;
    if ((level & (G_LOG_LEVEL_INFO | G_LOG_LEVEL_DEBUG)) && !c->verbose) {
        return;
    }
    /* Messages from the library are prefixed "lio: "; the tool name is enough. */
    if (g_str_has_prefix(msg, "lio: ")) {
        msg += 5;
    }
    fprintf(stderr, "vhost-scsi-ctl: %s%s\n",
            level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING) ?
            "error: " : "", msg);
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "vhost-scsi-ctl: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'vhost-scsi-ctl lio --help'.\n");
    return EXIT_USAGE;
}

static bool parse_uint(const char *s, unsigned max, unsigned *out)
{
    guint64 v;
    if (!g_ascii_string_to_unsigned(s, 10, 0, max, &v, NULL)) {
        return false;
    }
    *out = v;
    return true;
}

/*
 * getopt_long, as vhost-scsi-target and `vhost-scsi-ctl target` parse
 * theirs: options may come anywhere among the words (GNU permutation),
 * "--opt=value" and "--opt value" both work.  argv[0] is "lio".
 */
static int parse_args(struct ctl *c, int argc, char **argv)
{
    enum { OPT_CONFIGFS = 256, OPT_TPGT, OPT_NEXUS, OPT_BUS, OPT_NUM_QUEUES, OPT_JSON, OPT_FORCE,
           OPT_FORMAT, OPT_PARTIAL, OPT_VERSION };
    static const struct option longopts[] = {
        { "configfs", required_argument, NULL, OPT_CONFIGFS },
        { "tpgt", required_argument, NULL, OPT_TPGT },
        { "nexus", required_argument, NULL, OPT_NEXUS },
        { "bus", required_argument, NULL, OPT_BUS },
        { "num-queues", required_argument, NULL, OPT_NUM_QUEUES },
        { "json", no_argument, NULL, OPT_JSON },
        { "force", no_argument, NULL, OPT_FORCE },
        { "format", required_argument, NULL, OPT_FORMAT },
        { "partial", no_argument, NULL, OPT_PARTIAL },
        { "verbose", no_argument, NULL, 'v' },
        { "version", no_argument, NULL, OPT_VERSION },
        { "help", no_argument, NULL, 'h' },
        { 0 }
    };
    int opt;

    optind = 0;     /* glibc: a fresh start, permuting */
    opterr = 0;     /* our messages, naming the tool and the option as given */
    while ((opt = getopt_long(argc, argv, ":vh", longopts, NULL)) != -1) {
        g_autofree char *given = g_strndup(argv[optind - 1], strcspn(argv[optind - 1], "="));

        switch (opt) {
        case OPT_CONFIGFS:
            c->configfs = optarg;
            break;
        case OPT_TPGT:
            if (!parse_uint(optarg, LIO_TPGT_MAX, &c->tpgt)) {
                return usage_error("--tpgt '%s': expected 0..255", optarg);
            }
            c->tpgt_set = true;
            break;
        case OPT_NEXUS:
            c->nexus = optarg;
            break;
        case OPT_BUS:
            c->bus = optarg;
            break;
        case OPT_NUM_QUEUES:
            if (!parse_uint(optarg, 1024, &c->num_queues) || !c->num_queues) {
                return usage_error("--num-queues '%s': expected 1..1024", optarg);
            }
            break;
        case OPT_JSON:
            c->json = true;
            break;
        case OPT_FORCE:
            c->force = true;
            break;
        case OPT_FORMAT:
            if (!strcmp(optarg, "native") || !strcmp(optarg, "targetcli")) {
                c->format = !strcmp(optarg, "native") ? LIO_FORMAT_NATIVE : LIO_FORMAT_TARGETCLI;
            } else {
                return usage_error("--format '%s': expected native or targetcli", optarg);
            }
            break;
        case OPT_PARTIAL:
            c->partial = true;
            break;
        case 'v':
            c->verbose = true;
            break;
        case OPT_VERSION:
            printf("vhost-scsi-ctl %s\n", VHOST_SCSI_VERSION);
            exit(0);
        case 'h':
            fputs(usage_text, stdout);
            exit(0);
        case ':':
            return usage_error("option %s needs a value", given);
        default:
            /* A known option given a value it does not take, or an unknown one. */
            return usage_error(optopt && strchr(argv[optind - 1], '=') ?
                               "option %s takes no value" : "unknown option %s", given);
        }
    }
    for (; optind < argc; optind++) {
        if (c->npos == G_N_ELEMENTS(c->pos)) {
            return usage_error("too many arguments at '%s'", argv[optind]);
        }
        c->pos[c->npos++] = argv[optind];
    }
    return 0;
}

static int need_args(const struct ctl *c, int n, const char *cmd)
{
    if (c->npos != n) {
        return usage_error("wrong number of arguments for '%s'", cmd);
    }
    return 0;
}

static int status(int ret)
{
    return ret < 0 ? 1 : 0;
}

static int open_lio(const struct ctl *c, struct lio **lio)
{
    /* A root of the user's choice is theirs to set up (and may be a plain copy). */
    struct lio_options o = {
        .configfs = c->configfs,
        .setup_kernel = !c->configfs || !strcmp(c->configfs, LIO_CONFIGFS_DEFAULT),
    };
    return lio_open(&o, lio);
}

static int cmd_lio(struct ctl *c)
{
    const char *cmd = c->pos[0];
    struct lio *lio = NULL;
    int ret;

    if (!strcmp(cmd, "generate-wwpn")) {
        char w[LIO_WWPN_MAX];
        if ((ret = need_args(c, 1, cmd))) {
            return ret;
        }
        ret = lio_wwpn_generate(w);
        if (ret == 0) {
            printf("%s\n", w);
        }
        return status(ret);
    }
    if (!strcmp(cmd, "qemu-args")) {
        if ((ret = need_args(c, 2, cmd))) {
            return ret;
        }
        if (!lio_wwpn_valid(c->pos[1])) {
            return usage_error("invalid WWPN '%s'", c->pos[1]);
        }
        g_autofree char *s = lio_qemu_args(c->pos[1], c->bus, c->num_queues);
        printf("%s\n", s);
        return 0;
    }

    /* Check arity before touching the kernel. */
    int want;
    if (!strcmp(cmd, "create")) {
        want = c->npos <= 2 ? c->npos : -1;
    } else if (!strcmp(cmd, "delete") || !strcmp(cmd, "save") || !strcmp(cmd, "restore")) {
        want = 2;
    } else if (!strcmp(cmd, "list")) {
        want = 1;
    } else if (!strcmp(cmd, "lun")) {
        if (c->npos < 2 || (strcmp(c->pos[1], "add") && strcmp(c->pos[1], "remove"))) {
            return usage_error("'lun' needs 'add' or 'remove'%s", "");
        }
        want = !strcmp(c->pos[1], "add") ? 5 : 4;
    } else {
        return usage_error("unknown command '%s'", cmd);
    }
    if ((ret = need_args(c, want, cmd))) {
        return ret;
    }
    const char *wwpn_arg = !strcmp(cmd, "lun") ? c->pos[2] :
                           !strcmp(cmd, "create") || !strcmp(cmd, "delete") ? c->pos[1] : NULL;
    if (wwpn_arg && !lio_wwpn_valid(wwpn_arg)) {
        return usage_error("invalid WWPN '%s' (naa.5<15 hex>, naa.6<31 hex>, iqn.YYYY-MM.domain, "
                           "eui.<16 hex>)", wwpn_arg);
    }
    unsigned lun = 0;
    if (!strcmp(cmd, "lun") && !parse_uint(c->pos[3], LIO_LUN_MAX, &lun)) {
        return usage_error("LUN '%s': expected 0..16383", c->pos[3]);
    }

    ret = open_lio(c, &lio);
    if (ret < 0) {
        return 1;
    }
    unsigned tpgt = c->tpgt_set ? c->tpgt : LIO_DEFAULT_TPGT;
    if (!strcmp(cmd, "create")) {
        char w[LIO_WWPN_MAX];
        const char *wwpn = c->npos == 2 ? c->pos[1] : NULL;
        if (!wwpn) {
            ret = lio_wwpn_generate(w);
            wwpn = w;
        }
        if (ret == 0) {
            ret = lio_target_create(lio, wwpn, tpgt, c->nexus);
        }
        if (ret == 0) {
            printf("%s\n", wwpn);
        }
    } else if (!strcmp(cmd, "delete")) {
        ret = lio_target_delete(lio, c->pos[1], c->force);
    } else if (!strcmp(cmd, "lun")) {
        ret = !strcmp(c->pos[1], "add") ?
              lio_lun_add(lio, c->pos[2], tpgt, lun, c->pos[4]) :
              lio_lun_remove(lio, c->pos[2], tpgt, lun);
    } else if (!strcmp(cmd, "list")) {
        GPtrArray *targets;
        ret = lio_list(lio, &targets);
        if (ret == 0) {
            g_autofree char *s = NULL;
            if (c->json) {
                ret = lio_list_to_json(targets, &s);
            } else {
                s = lio_list_to_text(targets);
            }
            if (ret == 0) {
                fputs(s, stdout);
            }
            g_ptr_array_unref(targets);
        }
    } else if (!strcmp(cmd, "save")) {
        ret = lio_save(lio, c->pos[1], c->format);
    } else {
        ret = lio_restore(lio, c->pos[1], c->partial);
    }
    lio_close(lio);
    return status(ret);
}

int main(int argc, char **argv)
{
    struct ctl c = { 0 };
    g_log_set_default_handler(log_handler, &c);
    g_log_set_always_fatal(G_LOG_FATAL_MASK & ~G_LOG_LEVEL_CRITICAL);

    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fputs(usage_text, argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("vhost-scsi-ctl %s\n", VHOST_SCSI_VERSION);
        return 0;
    }
    if (!strcmp(argv[1], "target")) {
        return ctl_target_main(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "lio")) {
        return usage_error("unknown command '%s' ('lio' or 'target')", argv[1]);
    }
    int ret = parse_args(&c, argc - 1, argv + 1);
    if (ret) {
        return ret;
    }
    if (c.npos == 0) {
        return usage_error("missing command%s", "");
    }
    return cmd_lio(&c);
}
