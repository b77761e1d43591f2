/*
 * vhost-scsi-target: a vhost-user-scsi back-end daemon.  It listens on a
 * UNIX socket (or an inherited one), serves the LUNs given with --lun to
 * every front-end (QEMU's vhost-user-scsi-pci) that connects, and keeps
 * listening after a front-end goes away.  The main thread runs the
 * vhost-user conversations and the control/event queues; request queues
 * run on --threads I/O threads.  Command-line conventions follow QEMU's
 * vhost-user back-end rules (docs/interop/vhost-user.rst, "Backend
 * program conventions").  This file is the command line: options, usage
 * and a main over the daemon layer (hw/daemon/, target.h), which holds
 * the daemon itself.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib.h>
#include <glib-unix.h>

#include "guest-mem-guard.h"
#include "sandbox.h"
#include "sd-notify.h"
#include "target.h"
#include "vhost-user-server.h"
#include "virtio-scsi.h"

#define DEFAULT_SOCKET "vhost-scsi.sock"
#define DEFAULT_LUN "0=ram:1G"

static void usage(FILE *f)
{
    fprintf(f,
"Usage: vhost-scsi-target [OPTIONS]\n"
"A vhost-user-scsi back-end: serves SCSI LUNs to QEMU's vhost-user-scsi-pci.\n"
"\n"
"  --socket-path PATH    listen on this UNIX socket (default ./" DEFAULT_SOCKET ")\n"
"  --fd N                use the inherited listening socket N (socket activation)\n"
"  --lun ID=SPEC         add a LUN (repeatable); ID is LUN or TARGET:LUN\n"
"                        SPEC: file:PATH[,ro][,direct][,block-size=512|4096][,size=BYTES]\n"
"                              ram:SIZE | null:SIZE[,fill=zero|none]\n"
"                              (file:, ram:, null: also [,physical-block-size=BYTES])\n"
"                              iscsi://[USER[%%PASSWORD]@]HOST[:PORT]/IQN/LUN[,ro]\n"
"                                [,queue-depth=N][,sessions=N][,secret-file=PATH]\n"
"                                [,initiator-name=IQN][,login-timeout=SECONDS]\n"
"                                (see docs/iscsi.md)\n"
"                              rbd:POOL/IMAGE[@SNAP][,conf=PATH][,id=CLIENT]\n"
"                                [,keyring=PATH][,ro][,busy-timeout=SECONDS]\n"
"                                (Ceph RBD; see docs/rbd.md)\n"
"                        default without --lun: " DEFAULT_LUN "\n"
"  --queues N            request queues to offer (default 4; QEMU's num_queues <= N)\n"
"  --threads N           I/O threads serving them (default min(queues, CPUs))\n"
"  --poll off|adaptive|on  request queue polling (default off)\n"
"  --poll-us N           longest adaptive polling window in microseconds (default 50)\n"
"  --socket-group NAME   make the socket 0660 and owned by this group\n"
"  --allow-uid UID       accept only peers with this uid (repeatable)\n"
"  --allow-gid GID       accept only peers with this gid (repeatable)\n"
"  --max-connections N   front-ends connected at once (default %u); more are refused\n"
"  --max-connections-per-uid N  the same per peer uid (default: --max-connections)\n"
"  --max-mem-regions N   memory regions per connection (1..%u, default %u): the\n"
"                        slots GET_MAX_MEM_SLOTS announces; a table beyond is refused\n"
"  --max-inflight N      requests in flight per request queue (1..32768, default\n"
"                        %u); the rest of a fuller ring waits in the ring\n"
"  --config FILE         load the backends and LUNs FILE holds (config-save\n"
"                        writes it; docs/control.md); --lun adds to them\n"
"  --pr-dir DIR          keep persistent reservations set with APTPL in DIR/BACKEND.pr\n"
"                        (default FILE.pr beside a file: LUN; docs/reservations.md)\n"
"  --control PATH        serve the JSON-RPC control socket at PATH (mode 0600;\n"
"                        vhost-scsi-ctl target, docs/control.md)\n"
"  --message-timeout-ms N  a vhost-user message must arrive whole, and a reply\n"
"                        be read, within N ms, else the connection is dropped\n"
"                        (default %u)\n"
"  --control-max-request BYTES  longest control request line (256..16777216,\n"
"                        default %u); a longer one is answered with an error\n"
"                        and its client closed\n"
"  --control-timeout-ms N  a control request whose work waits on a file system\n"
"                        (a file's open, config-save) is answered with an error\n"
"                        after N ms (0..600000, 0: never; default %u)\n"
"  --sandbox MODE        after set-up: seccomp (default: a system-call filter that\n"
"                        kills the daemon on a dangerous call and makes any\n"
"                        other it never makes fail, logged) or none\n"
"                        (docs/security.md)\n"
"  --sandbox-user USER   after set-up, become USER (name or uid) and its group,\n"
"                        with no supplementary groups (needs root)\n"
"  --print-capabilities  print the back-end capabilities as JSON and exit\n"
"  -v, --verbose         log debug messages\n"
"  --version             print the version and exit\n"
"  -h, --help            this text\n", TARGET_DEFAULT_MAX_CONNECTIONS, GUEST_MEM_MAX_REGIONS,
            GUEST_MEM_MAX_REGIONS, TARGET_DEFAULT_MAX_INFLIGHT, TARGET_DEFAULT_MESSAGE_TIMEOUT_MS,
            CTL_MAX_REQUEST, TARGET_DEFAULT_JOB_TIMEOUT_MS);
}

static int parse_uint(const char *s, unsigned min, unsigned max, unsigned *out)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) {
        return -EINVAL;
    }
    *out = (unsigned)v;
    return 0;
}

static int parse_args(int argc, char **argv, struct target_opts *o)
{
    enum { OPT_SOCKET = 256, OPT_FD, OPT_LUN, OPT_QUEUES, OPT_THREADS, OPT_POLL,
           OPT_POLL_US, OPT_CAPS, OPT_GROUP, OPT_UID, OPT_GID, OPT_MAX_CONNS,
           OPT_MAX_CONNS_UID, OPT_MSG_TIMEOUT, OPT_CONTROL, OPT_CONFIG, OPT_PR_DIR,
           OPT_MAX_MEM_REGIONS, OPT_MAX_INFLIGHT, OPT_CONTROL_MAX_REQUEST, OPT_CONTROL_TIMEOUT, OPT_SANDBOX,
           OPT_SANDBOX_USER, OPT_VERSION };
    static const struct option longopts[] = {
        { "socket-path", required_argument, NULL, OPT_SOCKET },
        { "fd", required_argument, NULL, OPT_FD },
        { "lun", required_argument, NULL, OPT_LUN },
        { "queues", required_argument, NULL, OPT_QUEUES },
        { "threads", required_argument, NULL, OPT_THREADS },
        { "poll", required_argument, NULL, OPT_POLL },
        { "poll-us", required_argument, NULL, OPT_POLL_US },
        { "print-capabilities", no_argument, NULL, OPT_CAPS },
        { "socket-group", required_argument, NULL, OPT_GROUP },
        { "allow-uid", required_argument, NULL, OPT_UID },
        { "allow-gid", required_argument, NULL, OPT_GID },
        { "max-connections", required_argument, NULL, OPT_MAX_CONNS },
        { "max-connections-per-uid", required_argument, NULL, OPT_MAX_CONNS_UID },
        { "message-timeout-ms", required_argument, NULL, OPT_MSG_TIMEOUT },
        { "max-mem-regions", required_argument, NULL, OPT_MAX_MEM_REGIONS },
        { "max-inflight", required_argument, NULL, OPT_MAX_INFLIGHT },
        { "control-max-request", required_argument, NULL, OPT_CONTROL_MAX_REQUEST },
        { "control-timeout-ms", required_argument, NULL, OPT_CONTROL_TIMEOUT },
        { "control", required_argument, NULL, OPT_CONTROL },
        { "config", required_argument, NULL, OPT_CONFIG },
        { "pr-dir", required_argument, NULL, OPT_PR_DIR },
        { "sandbox", required_argument, NULL, OPT_SANDBOX },
        { "sandbox-user", required_argument, NULL, OPT_SANDBOX_USER },
        { "verbose", no_argument, NULL, 'v' },
        { "version", no_argument, NULL, OPT_VERSION },
        { "help", no_argument, NULL, 'h' },
        { 0 }
    };
    unsigned v;
    int c;

    while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_SOCKET:
            g_free(o->socket_path);
            o->socket_path = g_strdup(optarg);
            break;
        case OPT_FD:
            if (parse_uint(optarg, 0, INT32_MAX, &v) < 0) {
                fprintf(stderr, "vhost-scsi-target: bad --fd '%s'\n", optarg);
                return -EINVAL;
            }
            o->listen_fd = (int)v;
            break;
        case OPT_LUN:
            g_ptr_array_add(o->lun_args, g_strdup(optarg));
            break;
        case OPT_QUEUES:
            if (parse_uint(optarg, 1, VU_MAX_QUEUES - VSCSI_FIRST_REQ_QUEUE, &o->queues) < 0) {
                fprintf(stderr, "vhost-scsi-target: --queues must be 1..%d\n",
                        VU_MAX_QUEUES - VSCSI_FIRST_REQ_QUEUE);
                return -EINVAL;
            }
            break;
        case OPT_THREADS:
            if (parse_uint(optarg, 1, 256, &o->threads) < 0) {
                fprintf(stderr, "vhost-scsi-target: --threads must be 1..256\n");
                return -EINVAL;
            }
            break;
        case OPT_POLL:
            if (!strcmp(optarg, "off")) {
                o->poll = IOTHREAD_POLL_OFF;
            } else if (!strcmp(optarg, "adaptive")) {
                o->poll = IOTHREAD_POLL_ADAPTIVE;
            } else if (!strcmp(optarg, "on")) {
                o->poll = IOTHREAD_POLL_ON;
            } else {
                fprintf(stderr, "vhost-scsi-target: --poll takes off, adaptive or on\n");
                return -EINVAL;
            }
            break;
        case OPT_POLL_US:
            if (parse_uint(optarg, 1, 1000000, &v) < 0) {
                fprintf(stderr, "vhost-scsi-target: --poll-us must be 1..1000000\n");
                return -EINVAL;
            }
            o->poll_ns = (uint64_t)v * 1000;
            break;
        case OPT_CAPS:
            printf("{\n  \"type\": \"scsi\"\n}\n");
            exit(0);
        case OPT_GROUP:
            o->socket_group = g_strdup(optarg);
            break;
        case OPT_UID:
        case OPT_GID:
            if (parse_uint(optarg, 0, UINT32_MAX - 1, &v) < 0) {
                fprintf(stderr, "vhost-scsi-target: bad id '%s'\n", optarg);
                return -EINVAL;
            }
            if (c == OPT_UID) {
                uid_t u = v;
                g_array_append_val(o->allow_uids, u);
            } else {
                gid_t g = v;
                g_array_append_val(o->allow_gids, g);
            }
            break;
        case OPT_MAX_CONNS:
        case OPT_MAX_CONNS_UID:
            /* Each connection may hold 33 guarded mappings; the guard has 65,536. */
            if (parse_uint(optarg, 1, 1024, &v) < 0) {
                fprintf(stderr, "vhost-scsi-target: --%s must be 1..1024\n",
                        c == OPT_MAX_CONNS ? "max-connections" : "max-connections-per-uid");
                return -EINVAL;
            }
            *(c == OPT_MAX_CONNS ? &o->max_conns : &o->max_conns_per_uid) = v;
            break;
        case OPT_MSG_TIMEOUT:
            if (parse_uint(optarg, 1, 600000, &o->message_timeout_ms) < 0) {
                fprintf(stderr, "vhost-scsi-target: --message-timeout-ms must be 1..600000\n");
                return -EINVAL;
            }
            break;
        case OPT_MAX_MEM_REGIONS:
            if (parse_uint(optarg, 1, GUEST_MEM_MAX_REGIONS, &o->max_mem_regions) < 0) {
                fprintf(stderr, "vhost-scsi-target: --max-mem-regions must be 1..%u\n",
                        GUEST_MEM_MAX_REGIONS);
                return -EINVAL;
            }
            break;
        case OPT_MAX_INFLIGHT:
            if (parse_uint(optarg, 1, 32768, &o->max_inflight) < 0) {
                fprintf(stderr, "vhost-scsi-target: --max-inflight must be 1..32768\n");
                return -EINVAL;
            }
            break;
        case OPT_CONTROL_MAX_REQUEST:
            if (parse_uint(optarg, 256, 1u << 24, &o->control_max_request) < 0) {
                fprintf(stderr, "vhost-scsi-target: --control-max-request must be "
                        "256..16777216\n");
                return -EINVAL;
            }
            break;
        case OPT_CONTROL_TIMEOUT:
            if (parse_uint(optarg, 0, 600000, &o->job_timeout_ms) < 0) {
                fprintf(stderr, "vhost-scsi-target: --control-timeout-ms must be 0..600000\n");
                return -EINVAL;
            }
            break;
        case OPT_CONTROL:
            g_free(o->control_path);
            o->control_path = g_strdup(optarg);
            break;
        case OPT_CONFIG:
            g_free(o->config_path);
            o->config_path = g_strdup(optarg);
            break;
        case OPT_PR_DIR:
            if (!g_file_test(optarg, G_FILE_TEST_IS_DIR)) {
                fprintf(stderr, "vhost-scsi-target: --pr-dir %s is not a directory\n", optarg);
                return -EINVAL;
            }
            g_free(o->pr_dir);
            o->pr_dir = g_strdup(optarg);
            break;
        case OPT_SANDBOX:
            if (!strcmp(optarg, "seccomp")) {
                o->sandbox = TARGET_SANDBOX_SECCOMP;
            } else if (!strcmp(optarg, "none")) {
                o->sandbox = TARGET_SANDBOX_NONE;
            } else {
                fprintf(stderr, "vhost-scsi-target: --sandbox takes seccomp or none\n");
                return -EINVAL;
            }
            break;
        case OPT_SANDBOX_USER: {
            /* Looked up now: the filter leaves no way to read /etc/passwd later. */
            int r = sandbox_lookup_user(optarg, &o->sandbox_uid, &o->sandbox_gid);

            if (r < 0) {
                fprintf(stderr, "vhost-scsi-target: --sandbox-user %s: %s\n", optarg,
                        r == -ENOENT ? "no such user" : g_strerror(-r));
                return -EINVAL;
            }
            g_free(o->sandbox_user);
            o->sandbox_user = g_strdup(optarg);
            break;
        }
        case 'v':
            g_setenv("G_MESSAGES_DEBUG", "all", TRUE);
            break;
        case OPT_VERSION:
            printf("vhost-scsi-target %s\n", VHOST_SCSI_VERSION);
            exit(0);
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -EINVAL;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "vhost-scsi-target: unexpected argument '%s'\n", argv[optind]);
        return -EINVAL;
    }
    if (o->socket_path && o->listen_fd >= 0) {
        fprintf(stderr, "vhost-scsi-target: --socket-path and --fd are exclusive\n");
        return -EINVAL;
    }
    return 0;
}

/*
 * An inherited --fd must be what socket activation hands over: a
 * listening UNIX stream socket.  Anything else (a pipe, a UDP socket, a
 * connected socketpair end) would make accept() fail on every wake-up.
 */
static int check_listen_fd(int fd)
{
    int v = 0;
    socklen_t len = sizeof(v);
    const char *why = NULL;

    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) < 0) {
        why = errno == ENOTSOCK ? "not a socket" : g_strerror(errno);
    } else if (v != AF_UNIX) {
        why = "not a UNIX socket";
    } else if ((len = sizeof(v), getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len)) < 0 ||
               v != SOCK_STREAM) {
        why = "not a stream socket";
    } else if ((len = sizeof(v), getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len)) < 0 ||
               !v) {
        why = "not listening";
    } else if (!g_unix_set_fd_nonblocking(fd, TRUE, NULL) ||
               fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
        why = g_strerror(errno);
    }
    if (why) {
        fprintf(stderr, "vhost-scsi-target: --fd %d is not a listening UNIX stream socket "
                "(%s)\n", fd, why);
        return -EINVAL;
    }
    return 0;
}

/*
 * Every connection holds a few fds per queue; the soft limit is often
 * 1024 while the hard one is far higher: use what we are allowed.
 */
static void raise_fd_limit(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
            g_message("cannot raise the open-file limit: %s", g_strerror(errno));
        }
    }
}

static void print_qemu_hint(const struct target *tgt, const char *path)
{
    char *abs = g_canonicalize_filename(path, NULL);

    printf("vhost-scsi-target: serving %u LUN(s) on %s\n"
           "Attach QEMU with:\n"
           "  qemu-system-x86_64 -machine q35,memory-backend=mem -m 1G \\\n"
           "    -object memory-backend-memfd,id=mem,size=1G,share=on \\\n"
           "    -chardev socket,id=vus0,path=%s \\\n"
           "    -device vhost-user-scsi-pci,chardev=vus0,num_queues=%u ...\n",
           scsi_target_lun_count(tgt->dflt->scsi), abs, abs, tgt->opts->queues);
    fflush(stdout);
    g_free(abs);
}

int main(int argc, char **argv)
{
    struct target_opts opts;
    struct target tgt;
    struct sd_notify *manager = NULL;
    g_autoptr(GError) err = NULL;
    const char *path;
    int ret = 1, r;

    target_opts_init(&opts);
    if (parse_args(argc, argv, &opts) < 0) {
        goto out_opts;
    }
    /* Checked before anything else starts, and before it could be closed as ours. */
    if (opts.listen_fd >= 0 && check_listen_fd(opts.listen_fd) < 0) {
        opts.listen_fd = -1;
        goto out_opts;
    }
#ifdef VHOST_SCSI_TEST_HOOKS
    if (!g_strcmp0(g_getenv("VHOST_SCSI_TEST_FAULT"), "log-skip-data-in")) {
        g_warning("VHOST_SCSI_TEST_FAULT=log-skip-data-in: migrated guests WILL be corrupted "
                  "(a test hook; never set it in service)");
        opts.fault_log_skip_data_in = true;
    }
    opts.fault_refused_call = !g_strcmp0(g_getenv("VHOST_SCSI_TEST_FAULT"),
                                         "sandbox-refused-call");
#endif
    raise_fd_limit();
    if (!opts.lun_args->len && !opts.config_path) {
        g_ptr_array_add(opts.lun_args, g_strdup(DEFAULT_LUN));
    }
    target_init(&tgt, &opts);

    signal(SIGPIPE, SIG_IGN);
    /* A front-end truncating shared memory costs its connection, not the daemon. */
    if (guest_mem_guard_install() < 0) {
        goto out;
    }
    if (target_start(&tgt, true, &err) < 0 || target_load(&tgt, DEFAULT_SOCKET, &err) < 0) {
        goto out;
    }
    /* The --config file may name it. */
    path = opts.listen_fd >= 0 ? NULL : opts.socket_path ? opts.socket_path : DEFAULT_SOCKET;
    if (target_listen(&tgt, path, opts.listen_fd, &err) < 0) {
        goto out;
    }
    opts.listen_fd = -1;      /* the controller's now */
    if (path) {
        print_qemu_hint(&tgt, path);
    }
    /* A Type=notify service's manager: connected before the filter, which allows no new socket. */
    r = sd_notify_open(&manager);
    if (r < 0) {
        g_warning("NOTIFY_SOCKET: %s; the service manager will not hear that the daemon is ready",
                  g_strerror(-r));
    }
    /*
     * Set-up is over: every socket of the command line listens, every LUN
     * is open, every thread runs with its ring.  What runs from here on
     * parses what front-ends and control clients send, so it runs
     * confined; what it may still need (LUNs and controllers added live,
     * reconnects) is in the sets target_sandbox chooses.
     */
    if (target_sandbox(&tgt, &err) < 0) {
        goto out;
    }
    /*
     * Every socket listens (the control socket, the --config file's
     * controllers', the command line's): `systemctl start` returns now,
     * and a vhost-scsi-ctl run after it finds the control socket.
     */
    r = sd_notify_send(manager, "READY=1");
    if (r < 0) {
        g_warning("NOTIFY_SOCKET: cannot say READY=1: %s", g_strerror(-r));
    }
    sd_notify_free(manager);
    manager = NULL;

    iothread_run(tgt.main);
    ret = 0;

out:
    /* Every refused start is said here, once. */
    if (err) {
        fprintf(stderr, "vhost-scsi-target: %s\n", err->message);
    }
    sd_notify_free(manager);
    target_end(&tgt);
out_opts:
    target_opts_clear(&opts);
    return ret;
}
