/*
 * The LUN-spec grammar, shared by vhost-scsi-target's --lun and
 * vhost-scsi-ctl's LUNs: "ID=SPEC" where ID is "LUN" or "TARGET:LUN" and
 * SPEC names a backend and its options, e.g.
 * "0:1=file:/var/disk.img,direct,block-size=4096" or "2=ram:64M".  Parsing is
 * strict (unknown or repeated options, bad numbers and sizes that are not a
 * whole number of blocks are errors) so a typo never silently becomes a
 * default.  This layer only parses (it depends on util alone); opening a
 * backend, and the checks that need a backend's own layer, are the config
 * layer's (include/config/lun-open.h), so a tool that maps specs onto
 * something else (LIO) links no backend library.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_LUN_SPEC_H
#define VHOST_SCSI_LUN_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include "vs-error.h"

#define LUN_SPEC_MAX_TARGET 255
#define LUN_SPEC_MAX_LUN    16383

enum lun_spec_kind {
    LUN_SPEC_FILE,      /* file:PATH[,ro][,direct][,block-size=N][,size=SIZE] */
    LUN_SPEC_RAM,       /* ram:SIZE[,ro][,block-size=N] */
    LUN_SPEC_NULL,      /* null:SIZE[,ro][,block-size=N][,fill=zero|none] */
    LUN_SPEC_ISCSI,     /* iscsi://[USER[%PASSWORD]@]HOST[:PORT]/IQN/LUN[,ro]
                           [,queue-depth=N][,sessions=N][,secret-file=PATH]
                           [,initiator-name=IQN][,login-timeout=SECONDS] */
    LUN_SPEC_RBD,       /* rbd:POOL/IMAGE[@SNAP][,conf=PATH][,id=CLIENT]
                           [,keyring=PATH][,ro][,busy-timeout=SECONDS] */
    LUN_SPEC_HOLD,      /* hold:SIZE,while=PATH[,block-size=N]: tests only, in a
                           build with -Dtest_hooks=true and with
                           VHOST_SCSI_TEST_BACKENDS=1 in the environment; RAM
                           whose requests wait while PATH exists */
};

struct lun_spec {
    unsigned target;        /* 0 when ID had no "TARGET:" part */
    unsigned lun;
    enum lun_spec_kind kind;
    char *path;             /* FILE: the path (",," unescaped); ISCSI: the URL;
                               HOLD: the while= file */
    bool ro;
    bool direct;            /* FILE only */
    bool null_no_fill;      /* NULL only: fill=none, reads leave the buffer untouched */
    uint32_t block_size;    /* 0: the backend's default */
    uint32_t phys_block_size; /* FILE, RAM, NULL; 0: the backend's own (one block) */
    bool sanitize;          /* sanitize=on (all but HOLD): the LUN takes SANITIZE, which
                               erases the whole medium, so a guest gets it only if asked */
    uint64_t size;          /* bytes; FILE: 0 means the file's size */
    unsigned iscsi_lun;     /* ISCSI: the remote LUN, the URL's last field
                               (set only by the checks below) */
    /* ISCSI only (0 / NULL: the backend's default) */
    unsigned queue_depth;
    unsigned sessions;
    char *secret_file;
    char *initiator_name;
    unsigned login_timeout; /* seconds a login may take: the open's, each reconnection's */
    /* RBD only: the image (snap NULL: the image itself), and the client's
       configuration (NULL: librados's defaults, /etc/ceph/ceph.conf, admin) */
    char *rbd_pool, *rbd_image, *rbd_snap;
    char *rbd_conf, *rbd_id, *rbd_keyring;
    unsigned busy_timeout;  /* seconds an outage answers BUSY before NOT READY; 0: 60 */
};

/*
 * Test backends ("hold:") exist only in a build with -Dtest_hooks=true,
 * and are accepted there only when this variable is "1": a daemon in
 * production never holds requests on purpose.
 */
#define LUN_SPEC_TEST_BACKENDS_ENV "VHOST_SCSI_TEST_BACKENDS"

/*
 * What the grammar leaves to the layers that know a backend.  It runs them
 * where the text they judge is parsed, so a spec with several mistakes is
 * refused for the same first one whoever parses it.
 */
struct lun_spec_checks {
    /*
     * iscsi://: the remote LUN of the URL, as backend_iscsi_url_lun()
     * (include/iscsi/backend-iscsi.h) finds it; <0 refuses it, with *field
     * the LUN's text or NULL when the URL has no /IQN/LUN part.
     */
    int (*iscsi_url_lun)(const char *url, unsigned *lun, char **field);
    unsigned iscsi_max_lun;     /* for the message */
};

/*
 * Parses arg ("ID=SPEC") into *out (which the caller then owns:
 * lun_spec_clear()).  Returns 0, or -EINVAL with *err (VS_ERROR, EINVAL)
 * naming the offending text ("LUN spec \"ARG\": what"); *out is then left
 * cleared.  The grammar alone: an iscsi:// URL's LUN is not looked at
 * (iscsi_lun stays 0); the daemon parses with lun_spec_parse_full().
 */
int lun_spec_parse(const char *arg, struct lun_spec *out, GError **err);

/* lun_spec_parse, and the checks (NULL: none) where they apply. */
int lun_spec_parse_checked(const char *arg, const struct lun_spec_checks *checks,
                           struct lun_spec *out, GError **err);

/*
 * SPEC alone, without "ID=" (vhost-scsi-ctl takes the LUN as an argument of
 * its own); target and lun are 0, messages quote spec.
 */
int lun_spec_parse_backend(const char *spec, struct lun_spec *out, GError **err);

void lun_spec_clear(struct lun_spec *s);

/*
 * A copy of a --lun argument fit for logs: the password of an
 * "iscsi://USER%PASSWORD@" URL is replaced by "***".  g_free() it.
 */
char *lun_spec_redact(const char *arg);

#endif
