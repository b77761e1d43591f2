/*
 * Kernel target (LIO) configuration for the in-kernel vhost-scsi fabric
 * (tcm_vhost), done through configfs the way targetcli would: backstores
 * under target/core, and target/vhost/WWPN/tpgt_N with an I_T nexus and LUN
 * symlinks.  Every filesystem and kernel operation goes through a table
 * (include/lio/lio-fs.h): configfs by default, a fake in the unit tests.
 * Configurations can be saved to and restored from a small JSON file.
 * A refusal or failure is a GError in VS_ERROR (include/util/vs-error.h,
 * the code the errno) filled where the cause is known, its message naming
 * the WWPN, LUN, spec, attribute and path at fault; the functions also
 * return -code, and never log an error.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_LIO_CONFIGFS_H
#define VHOST_SCSI_LIO_CONFIGFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <glib.h>

#define LIO_CONFIGFS_DEFAULT "/sys/kernel/config"
#define LIO_WWPN_MAX 224           /* TRANSPORT_IQN_LEN in the kernel */
#define LIO_TPGT_MAX 255           /* vhost-scsi: tpgt < VHOST_SCSI_MAX_TARGET */
#define LIO_LUN_MAX 16383          /* virtio-scsi single-level LUN range */
#define LIO_DEFAULT_TPGT 1

struct lio;
struct lio_fs_ops;

struct lio_options {
    const char *configfs;      /* root; NULL: LIO_CONFIGFS_DEFAULT */
    /* Load the kernel modules and mount configfs on the root if it is not. */
    bool setup_kernel;
    /* The filesystem and kernel operations; NULL: lio_fs_configfs. */
    const struct lio_fs_ops *fs;
    void *fs_opaque;
};

/* The LIO backstore behind a LUN. */
enum lio_lun_type {
    LIO_LUN_FILE,              /* fileio: a regular file (or, restored, a device) */
    LIO_LUN_BLOCK,             /* iblock: a block device */
    LIO_LUN_RAM,               /* rd_mcp: kernel memory */
    LIO_LUN_NULL,              /* rd_mcp with rd_nullio=1: no storage at all */
    LIO_LUN_OTHER,             /* anything else (listing only) */
};

struct lio_lun {
    unsigned lun;
    enum lio_lun_type type;
    char *path;                /* file or device (udev_path); may be "" */
    uint64_t size;             /* bytes; 0 if unknown */
    char *backstore;           /* relative to target/core, e.g. fileio_0/x */
    bool owned;                /* backstore created (and deleted) by us */
    bool ro;                   /* iblock readonly=1 */
    bool direct;               /* fileio without the page cache (fd_async_io=1) */
    uint32_t block_size;       /* attrib/block_size; 0 if unknown */
    char *serial;              /* wwn/vpd_unit_serial (targetcli's "wwn"); "" if none */
    char *alias;               /* the name of the LUN's link to its backstore */
};

struct lio_target {
    char *wwpn;
    unsigned tpgt;
    char *nexus;               /* "" when no nexus */
    GPtrArray *luns;           /* struct lio_lun *, sorted by lun */
};

/* Opens a configfs root (setting up the kernel side if asked); -errno. */
int lio_open(const struct lio_options *opts, struct lio **out, GError **err);
void lio_close(struct lio *lio);

bool lio_wwpn_valid(const char *wwpn);
/* Random naa.5 name from /dev/urandom; out must hold LIO_WWPN_MAX bytes. */
int lio_wwpn_generate(char *out, GError **err);

/*
 * Creates target/vhost/WWPN/tpgt_N with a nexus (generated if NULL).
 * Idempotent: an existing target with a nexus is left as it is.
 */
int lio_target_create(struct lio *lio, const char *wwpn, unsigned tpgt,
                      const char *nexus, GError **err);
/*
 * Removes the target: LUN links, LUN dirs, nexus, tpgts, the WWPN and the
 * backstores created by lio_lun_add.  A missing WWPN is not an error.
 * -EBUSY if a vhost device still uses it (unless force) or a backstore of
 * it is linked elsewhere.
 */
int lio_target_delete(struct lio *lio, const char *wwpn, bool force, GError **err);

/*
 * spec: a SPEC of vhost-scsi-target's --lun grammar (include/lunspec/
 * lun-spec.h), mapped onto a LIO backstore:
 *   file:PATH        a block device: iblock; a regular file: fileio,
 *                    created/extended to size= if given, through the page
 *                    cache (fd_buffered_io=1) or, with direct, O_DIRECT
 *                    (fd_async_io=1)
 *   ram:SIZE         rd_mcp (SIZE a whole number of pages)
 *   null:SIZE        rd_mcp with rd_nullio=1
 *   ro               iblock readonly=1; refused for the others (LIO has no
 *                    read-only mode for them)
 *   block-size=N     attrib/block_size
 * What LIO cannot express (iscsi://, hold:, ro on a file, size= on a
 * block device) is refused with -EINVAL naming it, before anything is
 * made.  Idempotent for the same spec; -EEXIST if the LUN maps something
 * else, -EBUSY if the file/device already backs another backstore.
 */
int lio_lun_add(struct lio *lio, const char *wwpn, unsigned tpgt, unsigned lun,
                const char *spec, GError **err);
/*
 * What backs a LUN, given as values so that nothing taken from a file (a
 * restored configuration) is ever parsed as a spec: a path containing
 * ",size=1T" stays a path, and is refused since configfs could not take it.
 */
struct lio_backing {
    enum lio_lun_type type;    /* not LIO_LUN_OTHER */
    const char *path;          /* FILE, BLOCK: absolute, without ',', '=' or
                                  newlines; RAM, NULL: NULL or "" */
    uint64_t size;             /* FILE: create/extend to this, 0: the file's own
                                  size; RAM, NULL: the size; BLOCK: 0 */
    uint32_t block_size;       /* 0: the backstore's default */
    bool ro;                   /* BLOCK only */
    bool direct;               /* FILE: O_DIRECT; BLOCK: always so */
    /*
     * What a targetcli configuration names (NULL or "": our defaults): the
     * backstore's name (else vs-WWPN-tT-lL; one of another name is not
     * ours, so delete leaves it), its T10 unit serial (the guest's VPD 0x80
     * and its /dev/disk/by-id names) and the LUN link's name.
     */
    const char *name;
    const char *serial;
    const char *alias;
};
/* lio_lun_add with the backing as values; same checks and results. */
int lio_lun_add_backing(struct lio *lio, const char *wwpn, unsigned tpgt, unsigned lun,
                        const struct lio_backing *backing, GError **err);
/* Unlinks the LUN and deletes its backstore if ours; missing LUN is fine. */
int lio_lun_remove(struct lio *lio, const char *wwpn, unsigned tpgt, unsigned lun,
                   GError **err);

/* "file", "block", "ram", "null" or "other", as the saved form names them. */
const char *lio_lun_type_name(enum lio_lun_type t);

/* All vhost targets (GPtrArray of struct lio_target *, owns them). */
int lio_list(struct lio *lio, GPtrArray **out);
void lio_target_free(struct lio_target *t);

/*
 * The saved format, for list --json and save; -EINVAL naming the field when
 * a string (a udev_path, say) is not UTF-8.
 */
int lio_list_to_json(GPtrArray *targets, char **out, GError **err);
char *lio_list_to_text(GPtrArray *targets);
/* The formats of a saved configuration. */
enum lio_format {
    LIO_FORMAT_NATIVE,         /* ours (docs/kernel-vhost.md) */
    LIO_FORMAT_TARGETCLI,      /* targetcli-fb's saveconfig.json (lio-targetcli.c) */
};
int lio_save(struct lio *lio, const char *file, enum lio_format format, GError **err);
/*
 * Creates every target and LUN in file (idempotently), all or nothing.  The
 * format is told by the content: a targetcli saveconfig.json is mapped onto
 * ours, and what cannot be mapped is refused (-EINVAL naming each, nothing
 * changed) unless partial, when the rest is restored and what is left out
 * logged as a message.  The error names the file and, for a step that
 * failed, the target or LUN it stopped at.
 */
int lio_restore(struct lio *lio, const char *file, bool partial, GError **err);
/*
 * Parses a saved configuration of len bytes (strict RFC 8259, nothing but
 * whitespace after the object, no NUL byte, no repeated member names);
 * -EINVAL naming the byte offset or the element at fault.
 */
int lio_config_parse(const char *json, size_t len, GPtrArray **out, GError **err);

/* Whether len bytes of JSON are a targetcli saveconfig.json (no "version"). */
bool lio_targetcli_detect(const char *json, size_t len);
/*
 * Maps a targetcli saveconfig.json onto our model (backstore names, unit
 * serials and LUN link names kept).  A malformed file is -EINVAL; so is one
 * with anything that cannot be mapped (the error names each with its path,
 * one a line) unless partial, when that is left out (and logged as a
 * message).
 */
int lio_targetcli_parse(const char *json, size_t len, bool partial, GPtrArray **out,
                        GError **err);
/* targets (as lio_list gives them) as a saveconfig.json targetcli restores. */
int lio_list_to_targetcli(struct lio *lio, GPtrArray *targets, char **out, GError **err);

/* "-device vhost-scsi-pci,wwpn=WWPN,bus=BUS" (bus NULL: omitted). */
char *lio_qemu_args(const char *wwpn, const char *bus, unsigned num_queues);

#endif
