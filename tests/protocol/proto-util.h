/*
 * Helpers for tests that run the real vhost-scsi-target (and, for iSCSI,
 * tgtd) as child processes: spawn a process that dies with the test, spawn
 * the daemon on a private socket with given arguments and wait until it
 * listens, stop or kill it; connect the front-end library to it (or to
 * another of its sockets), issue SCSI commands, decode sense, and write a
 * seeded pattern with many requests in flight and read it back; call its
 * control socket (docs/control.md) and build the params.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_PROTO_UTIL_H
#define VHOST_SCSI_PROTO_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/virtio_scsi.h>

#include <json-glib/json-glib.h>

#include "vhost-frontend.h"

#define PU_TIMEOUT_MS 10000

/* A child process, with a pidfd to wait on it without sleeping. */
struct pu_proc {
    pid_t pid;
    int pidfd;      /* -1 once reaped */
};

/*
 * Starts argv[0] (a path) with argv; its stdout goes to our stderr
 * (stdout carries TAP) and it is SIGKILLed if the test dies.
 */
void pu_spawn(struct pu_proc *p, const char *const *argv);

/* How pu_spawn_opts starts a child; all zero is pu_spawn. */
struct pu_spawn_opts {
    uid_t run_as;      /* 0: as ourselves; else drop to this uid/gid before exec */
    unsigned nofile;   /* 0: inherited; else its RLIMIT_NOFILE, soft and hard */
    int out_fd;        /* > 2: its stdout and stderr; else both go to our stderr */
    int pass_fd;       /* > 2: handed to it as fd number pass_as (nothing else leaks) */
    int pass_as;
};
void pu_spawn_opts(struct pu_proc *p, const char *const *argv, const struct pu_spawn_opts *o);
/* Waits up to ms for p to exit; true if it has. */
bool pu_proc_exited(struct pu_proc *p, int ms);
/* Sends sig (SIGKILL after PU_TIMEOUT_MS if ignored) and reaps; returns the wait status. */
int pu_proc_stop(struct pu_proc *p, int sig);

struct pu_daemon {
    char *dir;      /* private temporary directory, removed by pu_daemon_cleanup */
    char *sock;     /* DIR/target.sock */
    struct pu_proc proc;
    uid_t run_as;   /* 0: as ourselves; else drop to this uid/gid before exec */
    unsigned nofile;    /* 0: inherited; else the daemon's RLIMIT_NOFILE (soft and hard) */
    bool capture_log;   /* its stdout and stderr go to log instead of our stderr */
    char *log;          /* DIR/daemon.log */
};

/* Makes the temporary directory (before the LUN files are created in it). */
void pu_daemon_init(struct pu_daemon *d);
/* Starts VHOST_SCSI_TARGET --socket-path SOCK ARGS... and waits until it listens. */
void pu_daemon_start(struct pu_daemon *d, const char *const *args);
/*
 * The same for a daemon that may refuse its arguments: false if it exited
 * before listening, with its wait status in *status (it is reaped).
 */
bool pu_daemon_try_start(struct pu_daemon *d, const char *const *args, int *status);
/* SIGTERM (or SIGKILL when kill9) and reap; returns the wait status. */
int pu_daemon_stop(struct pu_daemon *d, bool kill9);
bool pu_daemon_alive(struct pu_daemon *d);
/*
 * Waits up to timeout_ms for the daemon to hang up on fe's socket (end of
 * stream); returns 0, or -ETIMEDOUT.  Reads and discards anything before.
 */
int pu_wait_hangup(struct vfe *fe, int timeout_ms);
/* Removes the directory and everything in it. */
void pu_daemon_cleanup(struct pu_daemon *d);
/* A TCP port on 127.0.0.1 that nothing listens on (bound, then closed). */
int pu_free_tcp_port(void);

/* With capture_log: bytes in the log so far (an offset for the calls below). */
size_t pu_daemon_log_size(const struct pu_daemon *d);
/* The log from offset from on, NUL-terminated (at most max bytes of it). */
char *pu_daemon_log_read(const struct pu_daemon *d, size_t from, size_t max);
/* Lines of the log from offset from on that match the (GRegex) pattern. */
unsigned pu_daemon_log_count(const struct pu_daemon *d, size_t from, const char *pattern);
/*
 * Of the last line from offset from on that matches pattern: its first
 * group (or the whole match); NULL if no line matches.
 */
char *pu_daemon_log_find(const struct pu_daemon *d, size_t from, const char *pattern);
/*
 * Waits (inotify, up to timeout_ms) until a line after offset from
 * matches pattern; returns 0, or -ETIMEDOUT.
 */
int pu_daemon_log_wait(const struct pu_daemon *d, size_t from, const char *pattern,
                       int timeout_ms);

/*
 * From /proc/PID: user + system CPU time in clock ticks of all its threads
 * but those whose name starts with skip (NULL: none skipped); -1 if gone.
 */
int64_t pu_proc_cpu_ticks(pid_t pid, const char *skip);
/* A "Name:  N kB" field of /proc/PID/status in kB; -1 if absent. */
int64_t pu_proc_status_kb(pid_t pid, const char *field);
/* Open fds of PID; -1 if gone. */
int pu_proc_fd_count(pid_t pid);
/*
 * Whether a thread of PID waits in the open of a FIFO (nobody at its other
 * end): where VHOST_SCSI_TEST_FAULT=listen-hold and a FIFO LUN hold the
 * daemon, so that a test knows it is held without sleeping.
 */
bool pu_proc_in_fifo_open(pid_t pid);

/* nrq request queues of 128 entries, EVENT_IDX, 32 MiB of guest memory. */
struct vfe *pu_connect(const struct pu_daemon *d, unsigned nrq);
/* Any other configuration: fills in transport, path and (if 0) timeout_ms. */
struct vfe *pu_connect_cfg(const struct pu_daemon *d, struct vfe_config *cfg);
/* As pu_connect, to the vhost-user socket at path (another controller's). */
struct vfe *pu_connect_at(const char *path, unsigned nrq);

struct pu_sense {
    unsigned key, asc, ascq, code;   /* code: ASC << 8 | ASCQ (SCSI_SENSE_ASCQ_*) */
};
/* Fixed or descriptor format (scsi-cmd.h); all zero when there is no sense. */
struct pu_sense pu_sense_of(const struct virtio_scsi_cmd_resp *r);

/* Fills out for one command to target:lun on request queue 0; buf from vfe_alloc. */
void pu_req_prep(struct vfe_req *out, unsigned target, unsigned lun, const uint8_t *cdb,
                 unsigned cdb_len, void *buf, uint32_t len, bool data_in);
/* One command on request queue 0, waited for; buf must come from vfe_alloc. */
void pu_cmd(struct vfe *fe, unsigned lun, const uint8_t *cdb, unsigned cdb_len, void *buf,
            uint32_t len, bool data_in, struct vfe_req *out);
/* One command to target:lun on request queue 0, waited for; the transport must take it (S_OK). */
struct vfe_req pu_run(struct vfe *fe, unsigned target, unsigned lun, const uint8_t *cdb,
                      unsigned cdb_len, void *buf, uint32_t len, bool data_in);
/* TEST UNIT READY to target:lun, waited for. */
struct vfe_req pu_tur(struct vfe *fe, unsigned target, unsigned lun);
/* TEST UNIT READY until the pending unit attentions are consumed. */
void pu_make_ready(struct vfe *fe, unsigned lun);
/* REPORT LUNS to LUN 0, which must succeed: the LUN ids listed, in *ids; returns how many. */
unsigned pu_report_luns(struct vfe *fe, uint16_t *ids, unsigned max);
/*
 * Standard INQUIRY to lun, which must succeed: its peripheral qualifier
 * (SCSI_INQUIRY_PERIPHERAL_QUALIFIER_*); a LUN that is there must be a disk.
 */
int pu_inquiry_qualifier(struct vfe *fe, unsigned lun);
/* READ CAPACITY(16), which must succeed: the LUN's size in blocks and block size. */
void pu_read_capacity16(struct vfe *fe, unsigned lun, uint64_t *blocks, uint32_t *bsize);
/* Makes r a READ(16) or WRITE(16) of blocks at lba (data, lun untouched). */
void pu_make_rw16(struct vfe_req *r, bool write, uint64_t lba, uint32_t blocks);
void pu_put_be(uint8_t *p, uint64_t v, int n);
uint64_t pu_get_be(const uint8_t *p, int n);

/*
 * A pattern that differs per seed and per byte offset in the LUN, so a
 * block read back from the wrong place or a stale write is caught.
 */
uint8_t pu_pattern(uint64_t seed, uint64_t offset);
void pu_pattern_fill(uint8_t *p, size_t len, uint64_t seed, uint64_t offset);
/* Index of the first byte of p that is not the pattern, or len if none. */
size_t pu_pattern_mismatch(const uint8_t *p, size_t len, uint64_t seed, uint64_t offset);

/* Counts completions of a batch of requests (their opaque and complete). */
struct pu_batch {
    unsigned done;
};
void pu_batch_done(struct vfe_req *r);
/* Polls until b->done reaches n; each wait for progress is bounded by timeout_ms. */
void pu_batch_wait(struct vfe *fe, const struct pu_batch *b, unsigned n, int timeout_ms);

struct pu_rw_spec {
    unsigned lun;
    unsigned queues;    /* requests go round-robin to request queues 0..queues-1 */
    unsigned n_io;      /* all in flight at once */
    uint32_t io_bytes;  /* a multiple of the block size */
    uint64_t seed;
    bool verify_only;   /* no write pass: check what an earlier call wrote */
    int timeout_ms;     /* bound on each wait for progress; 0: PU_TIMEOUT_MS */
    /*
     * With dirty logging on (vfe_log_start): the log is cleared before each
     * pass, and after it the pages of the data buffers are counted — the
     * write pass's marked ones (the device only read them) and the read
     * pass's unmarked ones (the device wrote every one).
     */
    struct pu_log_counts {
        size_t write_pages_marked;
        size_t read_pages_unmarked;
        size_t read_pages;
    } *log;
};
/*
 * Writes s->n_io pattern blocks of s->io_bytes spread evenly over the LUN
 * with all of them in flight, reads them back the same way and compares.
 * Returns the distance in blocks between consecutive requests: request i
 * is at LBA i * distance.
 */
uint64_t pu_write_read_compare(struct vfe *fe, const struct pu_rw_spec *s);

/*
 * QUERY TASK until the daemon has the task tag on target 0's lun (it is
 * then in the backend, e.g. held there): each round is a round trip on
 * the control queue, bounded in number by PU_TIMEOUT_MS.
 */
void pu_wait_task_running(struct vfe *fe, unsigned lun, uint64_t tag);

/* ---- the control socket (--control) ---------------------------------- */

/* One call, which must succeed; returns its result (json_node_unref). */
JsonNode *pu_ctl_ok(int fd, const char *method, JsonNode *params);
/* One call, which must fail with want_code; returns the server's message (g_free). */
char *pu_ctl_err(int fd, const char *method, JsonNode *params, int want_code);
/*
 * A call whose answer comes later: pu_ctl_send sends it with id and
 * returns; pu_ctl_answer reads the next answer line on fd (waiting up to
 * timeout_ms; NULL at end of stream), parsed (json_node_unref).  Use an fd
 * of their own: pu_ctl_ok and pu_ctl_err skip answers to other ids.
 */
void pu_ctl_send(int fd, gint64 id, const char *method, JsonNode *params);
JsonNode *pu_ctl_answer(int fd, int timeout_ms);
/* Whether an answer (or the end of the stream) is waiting on fd now. */
bool pu_ctl_answer_waiting(int fd);
/* An answer that must be the error CTL_E_FAILED with want_errno; its message (g_free). */
char *pu_ctl_answer_failed(JsonNode *answer, gint64 id, int want_errno);
/* One call, which must fail with CTL_E_FAILED and want_errno; the message (g_free). */
char *pu_ctl_fail(int fd, const char *method, JsonNode *params, int want_errno);
/* Whether lun-list shows LUN lun (of any target, any controller). */
bool pu_ctl_lun_listed(int fd, unsigned lun);
/* An object of (const char *name, JsonNode *value) pairs (taken) up to a NULL name. */
JsonNode *pu_jobj(const char *name, ...) G_GNUC_NULL_TERMINATED;
JsonNode *pu_jstr(const char *s);
/*
 * Runs $VHOST_SCSI_CTL target --control CONTROL ARGS... (bounded by
 * PU_TIMEOUT_MS through its --timeout-ms); its stdout (g_free), its exit
 * code in *exit_code, its stderr in *err if err (g_free).
 */
char *pu_ctl_tool(const char *control, const char *const *args, int *exit_code, char **err);
JsonNode *pu_jint(gint64 v);

#endif
