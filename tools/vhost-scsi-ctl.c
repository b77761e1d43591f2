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
#include <unistd.h>

#include <glib.h>

#include "control-answer.h"
#include "control-client.h"
#include "control-commands.h"
#include "lio-command.h"

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
    bool verbose;
    struct lio_command cmd;     /* its options, then the command */
    const char *pos[8];
    int npos;
};

/*
 * The library logs only what does not fail a call (what --partial left out,
 * the kernel's TMF bug, and with -v an idempotent no-op); its errors come
 * back as a GError, printed once by cmd_lio.
 */
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
            if (!parse_uint(optarg, LIO_TPGT_MAX, &c->cmd.tpgt)) {
                return usage_error("--tpgt '%s': expected 0..255", optarg);
            }
            break;
        case OPT_NEXUS:
            c->cmd.nexus = optarg;
            break;
        case OPT_BUS:
            c->cmd.bus = optarg;
            break;
        case OPT_NUM_QUEUES:
            if (!parse_uint(optarg, 1024, &c->cmd.num_queues) || !c->cmd.num_queues) {
                return usage_error("--num-queues '%s': expected 1..1024", optarg);
            }
            break;
        case OPT_JSON:
            c->cmd.json = true;
            break;
        case OPT_FORCE:
            c->cmd.force = true;
            break;
        case OPT_FORMAT:
            if (!strcmp(optarg, "native") || !strcmp(optarg, "targetcli")) {
                c->cmd.format = !strcmp(optarg, "native") ? LIO_FORMAT_NATIVE : LIO_FORMAT_TARGETCLI;
            } else {
                return usage_error("--format '%s': expected native or targetcli", optarg);
            }
            break;
        case OPT_PARTIAL:
            c->cmd.partial = true;
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

static int open_lio(const struct ctl *c, struct lio **lio, GError **err)
{
    /* A root of the user's choice is theirs to set up (and may be a plain copy). */
    struct lio_options o = {
        .configfs = c->configfs,
        .setup_kernel = !c->configfs || !strcmp(c->configfs, LIO_CONFIGFS_DEFAULT),
    };
    return lio_open(&o, lio, err);
}

/* The command's words are checked before the root is opened: that loads modules and mounts. */
static int cmd_lio(struct ctl *c)
{
    g_autoptr(GError) err = NULL;
    g_autofree char *out = NULL;
    struct lio *lio = NULL;
    int ret;

    if (!lio_command_parse(c->pos, c->npos, &c->cmd, &err)) {
        return usage_error("%s", err->message);
    }
    ret = lio_command_needs_root(&c->cmd) ? open_lio(c, &lio, &err) : 0;
    if (ret == 0) {
        ret = lio_command_run(lio, &c->cmd, &out, &err);
    }
    if (out) {
        fputs(out, stdout);
    }
    lio_close(lio);
    /* The library says why and never logs it: the one line the user sees. */
    if (ret < 0) {
        fprintf(stderr, "vhost-scsi-ctl: %s\n", err ? err->message : g_strerror(-ret));
        return 1;
    }
    return 0;
}

static const char target_usage_text[] =
    "Usage: vhost-scsi-ctl target [--control PATH] [--controller NAME] [--json]\n"
    "                             [--timeout-ms N] COMMAND\n"
    "\n"
    "Operate a running vhost-scsi-target through its --control socket\n"
    "(default: $VHOST_SCSI_CONTROL).  lun commands act on the controller\n"
    "--controller names (default: the command line's, \"default\").\n"
    "\n"
    "Commands:\n"
    "  version                      the daemon's version and protocol\n"
    "  method list                  the control methods the daemon answers\n"
    "  lun list                     the LUNs served\n"
    "  lun add ID=SPEC              map a LUN (the --lun grammar, e.g. 1=file:/d.img)\n"
    "  lun remove [TARGET:]LUN      unmap it; returns once its I/O has drained\n"
    "  lun resize [TARGET:]LUN [SIZE]\n"
    "                               grow it to SIZE (bytes, K/M/G/T), or without\n"
    "                               SIZE to what its device has grown to\n"
    "  lun map [TARGET:]LUN BACKEND map a named backend there\n"
    "  lun unmap [TARGET:]LUN       unmap it (the backend stays); returns once\n"
    "                               its I/O has drained\n"
    "  backend add NAME SPEC        open a named backend (SPEC as in --lun ID=SPEC)\n"
    "  backend remove NAME          close it (refused while it is mapped)\n"
    "  backend resize NAME [SIZE]   grow it; every LUN it is mapped at is told\n"
    "  backend list                 the backends and where they are mapped\n"
    "  connection list              the front-ends connected, their queues\n"
    "  controller add NAME SOCKET [--queues N] [--allow-uid UID]...\n"
    "                 [--allow-gid GID]... [--socket-group GROUP] [--initiator IQN]\n"
    "                               a per-VM controller listening on SOCKET; IQN:\n"
    "                               the initiator name persistent reservations\n"
    "                               see (default iqn.2026-12.org.vhost-scsi:NAME)\n"
    "  controller remove NAME       (refused while it has LUNs or connections)\n"
    "  controller list              the controllers, their LUN and connection counts\n"
    "  qos set BACKEND [--iops N] [--bandwidth SIZE]\n"
    "                               limit its READ/WRITE commands per second\n"
    "                               and bytes per second (K/M/G/T); 0: no limit\n"
    "  stats [--controller NAME | --backend NAME]\n"
    "                               I/O figures per backend and per controller:\n"
    "                               totals and rates since start (a client on a\n"
    "                               connection of its own sees the interval since\n"
    "                               its previous stats call)\n"
    "  stats --prometheus           the counters in Prometheus text format (for\n"
    "                               node-exporter's textfile collector)\n"
    "  config save [FILE]           write the backends and LUNs to FILE (default:\n"
    "                               the daemon's --config), atomically\n"
    "\n"
    "Options:\n"
    "  --version                    print vhost-scsi-ctl's version and exit (the\n"
    "                               daemon's: the version command)\n"
    "\n"
    "Exit status: 0 success, 1 the daemon refused or failed, 2 usage.\n";

static int target_usage(const char *msg)
{
    fprintf(stderr, "vhost-scsi-ctl target: %s\n(vhost-scsi-ctl target --help for usage)\n", msg);
    return EXIT_USAGE;
}

/* One JSON-RPC call for req; prints the answer.  The exit status. */
static int target_call(const char *control, int timeout_ms, bool json, struct ctl_request *req)
{
    g_autoptr(JsonNode) result = NULL;
    g_autofree char *err = NULL;
    g_autofree char *text = NULL;
    int fd = ctl_client_connect(control), code;

    if (fd < 0) {
        fprintf(stderr, "vhost-scsi-ctl target: %s: %s\n", control, g_strerror(-fd));
        return 1;
    }
    /* the call takes the params */
    int ret = ctl_client_call(fd, req->method, g_steal_pointer(&req->params), timeout_ms, &result,
                              &code, &err);
    close(fd);
    if (ret < 0) {
        fprintf(stderr, "vhost-scsi-ctl target: %s: %s\n", req->method, err);
        return 1;
    }
    text = json ? ctl_answer_json(result) : ctl_answer_text(req->method, result, req->what);
    fputs(text, stdout);
    return 0;
}

/* `vhost-scsi-ctl target [OPTIONS] COMMAND …` (argv[0] is "target"). */
static int target_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "control", required_argument, NULL, 'c' },
        { "controller", required_argument, NULL, 'C' },
        { "json", no_argument, NULL, 'j' },
        { "timeout-ms", required_argument, NULL, 't' },
        { "version", no_argument, NULL, 'V' },
        { "help", no_argument, NULL, 'h' },
        { 0 }
    };
    const char *control = getenv("VHOST_SCSI_CONTROL"), *controller = NULL;
    struct ctl_request req;
    g_autoptr(GError) err = NULL;
    int timeout_ms = 60000, c, ret;
    bool json = false;
    guint64 v;

    optind = 1;
    while ((c = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            control = optarg;
            break;
        case 'C':
            controller = optarg;
            break;
        case 'j':
            json = true;
            break;
        case 't':
            if (!g_ascii_string_to_unsigned(optarg, 10, 1, 3600000, &v, NULL)) {
                g_autofree char *msg = g_strdup_printf("--timeout-ms '%s': expected 1..3600000",
                                                       optarg);
                return target_usage(msg);
            }
            timeout_ms = (int)v;
            break;
        case 'V':
            printf("vhost-scsi-ctl %s\n", VHOST_SCSI_VERSION);
            return 0;
        case 'h':
            fputs(target_usage_text, stdout);
            return 0;
        default:
            return target_usage("unknown option");
        }
    }
    if (!control) {
        return target_usage("no control socket: give --control PATH or set VHOST_SCSI_CONTROL");
    }
    if (!ctl_command_parse(argc - optind, argv + optind, controller, &req, &err)) {
        return target_usage(err->message);
    }
    ret = target_call(control, timeout_ms, json, &req);
    ctl_request_clear(&req);
    return ret;
}

int main(int argc, char **argv)
{
    struct ctl c = { .cmd = { .tpgt = LIO_DEFAULT_TPGT } };
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
        return target_main(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "lio")) {
        return usage_error("unknown command '%s' ('lio' or 'target')", argv[1]);
    }
    int ret = parse_args(&c, argc - 1, argv + 1);
    if (ret) {
        return ret;
    }
    return cmd_lio(&c);
}
