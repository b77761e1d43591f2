/*
 * Runs inside a test guest against the kernel's /dev/vhost-scsi, through the
 * project's vhost front-end library (VFE_VHOST_KERNEL), and prints TAP: for
 * each LUN INQUIRY, READ CAPACITY(16), a write/read-back/compare of the whole
 * LUN with several requests in flight spread over the request queues, sense
 * data for an out-of-range read and a LUN reset with I/O in flight; then
 * REPORT LUNS, the answers for an unmapped LUN and an unknown target, and an
 * optional command that must fail while the endpoint is held (vhost-scsi-ctl
 * refusing to delete a target in use).  Exit status 0 iff every check passed.
 *
 * Usage: kernel-vhost-probe --wwpn WWPN [--tpgt N] [--queues N] [--depth N]
 *        [--chunk BYTES] --lun ID:KIND:BYTES[:TPGT] ... [--busy-cmd CMD] [--read-only]
 *   KIND is the expected INQUIRY product prefix (e.g. FILEIO, IBLOCK); TPGT
 *   (default --tpgt, given before) is the virtio-scsi target id of the LUN;
 *   --read-only only reads and compares what an earlier run wrote.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <glib.h>
#include <linux/virtio_scsi.h>

#include "scsi-cmd.h"
#include "vhost-frontend.h"

#define TIMEOUT_MS 60000
#define MAX_LUNS 8

struct lun_under_test {
    unsigned tpgt;             /* = the virtio-scsi target id */
    unsigned id;
    char kind[17];
    uint64_t bytes;
};

struct probe {
    struct vfe *fe;
    unsigned tpgt;
    unsigned queues;
    unsigned depth;
    uint32_t chunk;
    unsigned n;                /* TAP counter */
    unsigned failed;
    uint64_t tag;
};

static void check(struct probe *p, bool ok, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static void check(struct probe *p, bool ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    p->n++;
    if (!ok) {
        p->failed++;
    }
    printf("%sok %u - %s\n", ok ? "" : "not ", p->n, msg);
}

/* READ(16) or WRITE(16) of len bytes at byte offset off (512-byte blocks). */
static void rw16(uint8_t cdb[SC_CDB_MAX], bool write, uint64_t off, uint32_t len)
{
    sc_cdb(write ? scsi_cdb_write16(off / 512, len, 512, 0, 0, 0, 0, 0)
                 : scsi_cdb_read16(off / 512, len, 512, 0, 0, 0, 0, 0), cdb);
}

/* Issues one command and waits; returns the vfe status, fills req. */
static int exec_cmd(struct probe *p, struct vfe_req *req, unsigned target, unsigned lun,
                    const uint8_t *cdb, size_t cdb_len, void *buf, uint32_t len, bool in)
{
    memset(req, 0, sizeof(*req));
    vfe_lun(req->lun, target, lun);
    req->tag = ++p->tag;
    memcpy(req->cdb, cdb, cdb_len);
    req->data = buf;
    req->data_len = len;
    req->data_in = in;
    return vfe_exec(p->fe, req, TIMEOUT_MS);
}

static bool good(const struct vfe_req *r)
{
    return r->resp.response == VIRTIO_SCSI_S_OK && r->resp.status == 0;
}

static void sense_of(const struct vfe_req *r, uint8_t *key, uint8_t *asc)
{
    struct sc_sense s = sc_sense_of(r->resp.sense, MIN(r->resp.sense_len, sizeof(r->resp.sense)));

    *key = (uint8_t)s.key;
    *asc = (uint8_t)s.asc;
}

/* TEST UNIT READY */
static unsigned tur_cdb(uint8_t cdb[SC_CDB_MAX])
{
    return sc_cdb(scsi_cdb_testunitready(), cdb);
}

/*
 * A new I_T nexus or a LUN mapped later leaves unit attentions (power on,
 * REPORTED LUNS DATA HAS CHANGED) that fail the next command once each.
 */
static void probe_ready(struct probe *p, const struct lun_under_test *l)
{
    uint8_t tur[SC_CDB_MAX], key = 0, asc = 0;
    unsigned tur_len = tur_cdb(tur);
    struct vfe_req r;
    unsigned uas = 0;
    int ret;
    bool ready = false;
    for (int i = 0; i < 8 && !ready; i++) {
        ret = exec_cmd(p, &r, l->tpgt, l->id, tur, tur_len, NULL, 0, false);
        sense_of(&r, &key, &asc);
        ready = ret == 0 && good(&r);
        if (!ready && ret == 0 && r.resp.status == 2 && key == SCSI_SENSE_UNIT_ATTENTION) {
            uas++;
            continue;
        }
        if (!ready) {
            break;
        }
    }
    check(p, ready, "target %u LUN %u ready (TEST UNIT READY, %u unit attentions first)",
          l->tpgt, l->id, uas);
}

static void probe_inquiry(struct probe *p, const struct lun_under_test *l, uint8_t *buf)
{
    uint8_t cdb[SC_CDB_MAX];
    unsigned cdb_len = sc_cdb(scsi_cdb_inquiry(0, 0, 96), cdb);
    struct vfe_req r;
    struct sc_datain d;
    memset(buf, 0, 96);
    int ret = exec_cmd(p, &r, l->tpgt, l->id, cdb, cdb_len, buf, 96, true);
    struct scsi_inquiry_standard *inq = sc_datain_decode(&d, cdb, cdb_len, buf, 96);
    const char *vendor = inq ? inq->vendor_identification : "";
    const char *product = inq ? inq->product_identification : "";
    check(p, ret == 0 && good(&r) && inq &&
          inq->device_type == SCSI_INQUIRY_PERIPHERAL_DEVICE_TYPE_DIRECT_ACCESS &&
          !memcmp(buf + 8, "LIO-ORG ", 8) && g_str_has_prefix(product, l->kind),
          "LUN %u INQUIRY: disk, vendor '%s' product '%s' (want LIO-ORG/%s)",
          l->id, vendor, product, l->kind);
    sc_datain_free(&d);
}

static uint64_t probe_capacity(struct probe *p, const struct lun_under_test *l, uint8_t *buf)
{
    uint8_t cdb[SC_CDB_MAX];
    unsigned cdb_len = sc_cdb(scsi_cdb_readcapacity16(), cdb);   /* allocation length 32 */
    struct vfe_req r;
    struct sc_datain d;
    memset(buf, 0, 32);
    int ret = exec_cmd(p, &r, l->tpgt, l->id, cdb, cdb_len, buf, 32, true);
    struct scsi_readcapacity16 *rc = sc_datain_decode(&d, cdb, cdb_len, buf, 32);
    uint64_t blocks = rc ? rc->returned_lba + 1 : 0;
    uint32_t bs = rc ? rc->block_length : 0;
    sc_datain_free(&d);
    check(p, ret == 0 && good(&r) && bs == 512 && blocks * bs == l->bytes,
          "LUN %u READ CAPACITY(16): %" PRIu64 " blocks of %u (want %" PRIu64 " bytes)",
          l->id, blocks, bs, l->bytes);
    return bs == 512 ? blocks : 0;
}

struct slot {
    struct vfe_req req;
    uint8_t *buf;
    uint64_t off;
    bool busy;
    bool done;
};

static void slot_done(struct vfe_req *req)
{
    ((struct slot *)req->opaque)->done = true;
}

static void fill(uint8_t *buf, uint32_t len, unsigned lun, uint64_t off)
{
    for (uint32_t i = 0; i < len; i += 8) {
        uint64_t v = ((uint64_t)lun << 56) ^ (off + i) ^ 0x5a5aa5a5c3c33c3cull;
        memcpy(buf + i, &v, 8);
    }
}

/*
 * Streams the whole LUN with `depth` requests in flight, round-robin over
 * the request queues; reads are compared with the pattern as they land.
 */
static void probe_stream(struct probe *p, const struct lun_under_test *l, bool write,
                         struct slot *slots)
{
    uint64_t next = 0, done_bytes = 0, mismatch_at = UINT64_MAX;
    unsigned inflight = 0, errors = 0, per_queue[16] = { 0 }, seq = 0;
    uint8_t *expect = g_malloc(p->chunk);
    bool stuck = false;

    /* After an error nothing new is posted, but what is in flight drains. */
    while (((next < l->bytes && !errors) || inflight) && !stuck) {
        for (unsigned i = 0; i < p->depth && next < l->bytes && !errors; i++) {
            struct slot *s = &slots[i];
            if (s->busy) {
                continue;
            }
            uint32_t len = MIN((uint64_t)p->chunk, l->bytes - next);
            uint8_t cdb[SC_CDB_MAX];
            rw16(cdb, write, next, len);
            memset(&s->req, 0, sizeof(s->req));
            s->req.queue = seq++ % p->queues;
            vfe_lun(s->req.lun, l->tpgt, l->id);
            s->req.tag = ++p->tag;
            memcpy(s->req.cdb, cdb, sizeof(cdb));
            s->req.data = s->buf;
            s->req.data_len = len;
            s->req.data_in = !write;
            s->req.opaque = s;
            s->req.complete = slot_done;
            if (write) {
                fill(s->buf, len, l->id, next);
            } else {
                memset(s->buf, 0, len);
            }
            s->off = next;
            s->done = false;
            if (vfe_submit(p->fe, &s->req) < 0) {
                errors++;
                break;
            }
            s->busy = true;
            inflight++;
            per_queue[s->req.queue % 16]++;
            next += len;
        }
        int r = vfe_poll(p->fe, TIMEOUT_MS);
        if (r <= 0) {
            stuck = true;
            break;
        }
        for (unsigned i = 0; i < p->depth; i++) {
            struct slot *s = &slots[i];
            if (!s->busy || !s->done) {
                continue;
            }
            s->busy = false;
            inflight--;
            if (!good(&s->req)) {
                errors++;
                continue;
            }
            if (!write) {
                fill(expect, s->req.data_len, l->id, s->off);
                if (memcmp(expect, s->buf, s->req.data_len) && mismatch_at == UINT64_MAX) {
                    mismatch_at = s->off;
                }
            }
            done_bytes += s->req.data_len;
        }
    }
    g_free(expect);
    bool spread = p->queues < 2 || (per_queue[0] && per_queue[1]);
    check(p, !stuck && !errors && done_bytes == l->bytes && mismatch_at == UINT64_MAX && spread,
          "LUN %u %s of all %" PRIu64 " bytes, %u in flight, %u/%u requests on queues 0/1%s%s",
          l->id, write ? "write" : "read-back+compare", l->bytes, p->depth, per_queue[0],
          per_queue[1], stuck ? " (TIMED OUT)" : errors ? " (ERRORS)" : "",
          mismatch_at != UINT64_MAX ? " (MISCOMPARE)" : "");
}

static void probe_sense(struct probe *p, const struct lun_under_test *l, uint64_t blocks,
                        uint8_t *buf)
{
    uint8_t cdb[SC_CDB_MAX];
    rw16(cdb, false, blocks * 512, 512);
    struct vfe_req r;
    int ret = exec_cmd(p, &r, l->tpgt, l->id, cdb, sizeof(cdb), buf, 512, true);
    uint8_t key, asc;
    sense_of(&r, &key, &asc);
    check(p, ret == 0 && r.resp.response == VIRTIO_SCSI_S_OK && r.resp.status == 2 &&
          key == SCSI_SENSE_ILLEGAL_REQUEST && asc == SCSI_SENSE_ASCQ_LBA_OUT_OF_RANGE >> 8,
          "LUN %u READ past the end: CHECK CONDITION, sense key %#x ASC %#x (want 0x5/0x21)",
          l->id, key, asc);
}

static void probe_reset(struct probe *p, const struct lun_under_test *l, struct slot *slots)
{
    unsigned posted = 0;
    for (unsigned i = 0; i < p->depth; i++) {
        struct slot *s = &slots[i];
        uint8_t cdb[SC_CDB_MAX];
        uint32_t len = MIN((uint64_t)p->chunk, l->bytes);
        rw16(cdb, false, 0, len);
        memset(&s->req, 0, sizeof(s->req));
        s->req.queue = i % p->queues;
        vfe_lun(s->req.lun, l->tpgt, l->id);
        s->req.tag = ++p->tag;
        memcpy(s->req.cdb, cdb, sizeof(cdb));
        s->req.data = s->buf;
        s->req.data_len = len;
        s->req.data_in = true;
        s->req.opaque = s;
        s->req.complete = slot_done;
        s->done = false;
        if (vfe_submit(p->fe, &s->req) == 0) {
            s->busy = true;
            posted++;
        }
    }
    uint8_t lun[8], resp = 0xff;
    vfe_lun(lun, l->tpgt, l->id);
    int ret = vfe_tmf(p->fe, lun, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, ++p->tag, &resp,
                      TIMEOUT_MS);
    /* Every request posted before the reset must come back, whatever its fate. */
    unsigned back = 0;
    bool stuck = false;
    while (!stuck) {
        back = 0;
        for (unsigned i = 0; i < p->depth; i++) {
            if (slots[i].busy && slots[i].done) {
                back++;
            }
        }
        if (back == posted) {
            break;
        }
        stuck = vfe_poll(p->fe, TIMEOUT_MS) <= 0;
    }
    for (unsigned i = 0; i < p->depth; i++) {
        slots[i].busy = false;
    }
    check(p, ret == 0 && (resp == VIRTIO_SCSI_S_FUNCTION_SUCCEEDED ||
                          resp == VIRTIO_SCSI_S_OK) && back == posted,
          "LUN %u LOGICAL UNIT RESET with %u reads in flight: tmf %d response %u, %u came back",
          l->id, posted, ret, resp, back);

    /* A unit attention may report the reset once; then the LUN is ready. */
    uint8_t tur[SC_CDB_MAX];
    unsigned tur_len = tur_cdb(tur);
    struct vfe_req r;
    uint8_t key = 0, asc;
    bool ready = false;
    for (int i = 0; i < 3 && !ready; i++) {
        ret = exec_cmd(p, &r, l->tpgt, l->id, tur, tur_len, NULL, 0, false);
        sense_of(&r, &key, &asc);
        ready = ret == 0 && good(&r);
        if (!ready && !(ret == 0 && r.resp.status == 2 && key == SCSI_SENSE_UNIT_ATTENTION)) {
            break;
        }
    }
    check(p, ready, "LUN %u ready after the reset (TEST UNIT READY)", l->id);
}

/* REPORT LUNS on each target lists exactly that target's LUNs. */
static void probe_report_luns(struct probe *p, const struct lun_under_test *luns, unsigned n,
                              uint8_t *buf)
{
    for (unsigned t = 0; t < n; t++) {
        bool first = true;
        unsigned want = 0;
        for (unsigned k = 0; k < n; k++) {
            first = first && !(k < t && luns[k].tpgt == luns[t].tpgt);
            want += luns[k].tpgt == luns[t].tpgt;
        }
        if (!first) {
            continue;
        }
        uint8_t cdb[SC_CDB_MAX];
        unsigned cdb_len = sc_cdb(scsi_reportluns_cdb(0, 4096), cdb);
        struct vfe_req r;
        struct sc_datain d;
        memset(buf, 0, 4096);
        int ret = exec_cmd(p, &r, luns[t].tpgt, luns[t].id, cdb, cdb_len, buf, 4096, true);
        /* libiscsi decodes exactly the list the header announces. */
        uint32_t len = (uint32_t)buf[0] << 24 | buf[1] << 16 | buf[2] << 8 | buf[3];
        struct scsi_reportluns_list *list =
            sc_datain_decode(&d, cdb, cdb_len, buf, MIN(len + 8ull, 4096));
        unsigned found = 0, listed = list ? list->num : 0;
        GString *ids = g_string_new("");
        for (unsigned i = 0; i < listed; i++) {
            unsigned id = list->luns[i];
            g_string_append_printf(ids, " %u", id);
            for (unsigned k = 0; k < n; k++) {
                found += luns[k].tpgt == luns[t].tpgt && luns[k].id == id;
            }
        }
        check(p, ret == 0 && good(&r) && listed == want && found == want,
              "target %u REPORT LUNS lists exactly its configured LUNs:%s", luns[t].tpgt,
              ids->str);
        g_string_free(ids, TRUE);
        sc_datain_free(&d);
    }
}

static void probe_unmapped(struct probe *p, const struct lun_under_test *luns, unsigned n)
{
    uint8_t tur[SC_CDB_MAX];
    unsigned tur_len = tur_cdb(tur);
    struct vfe_req r;
    int ret = exec_cmd(p, &r, p->tpgt, 99, tur, tur_len, NULL, 0, false);
    uint8_t key, asc;
    sense_of(&r, &key, &asc);
    check(p, ret == 0 && r.resp.response == VIRTIO_SCSI_S_OK && r.resp.status == 2 &&
          key == SCSI_SENSE_ILLEGAL_REQUEST &&
          asc == SCSI_SENSE_ASCQ_LOGICAL_UNIT_NOT_SUPPORTED >> 8,
          "unmapped LUN 99: CHECK CONDITION sense %#x/ASC %#x (want 0x5/0x25)", key, asc);

    unsigned other = 0;
    for (unsigned k = 0; k < n; k++) {
        if (luns[k].tpgt == other) {
            other++;
            k = -1u;                 /* restart: other changed */
        }
    }
    ret = exec_cmd(p, &r, other, 0, tur, tur_len, NULL, 0, false);
    check(p, ret == 0 && r.resp.response == VIRTIO_SCSI_S_BAD_TARGET,
          "target %u (no such tpgt): response %u (want BAD_TARGET %u)", other,
          r.resp.response, VIRTIO_SCSI_S_BAD_TARGET);
}

static bool parse_lun(const char *s, unsigned tpgt, struct lun_under_test *l)
{
    g_auto(GStrv) f = g_strsplit(s, ":", 4);
    guint64 id, bytes, t = tpgt;
    if (g_strv_length(f) == 4 && !g_ascii_string_to_unsigned(f[3], 10, 0, 255, &t, NULL)) {
        return false;
    }
    l->tpgt = t;
    if (g_strv_length(f) < 3 || !g_ascii_string_to_unsigned(f[0], 10, 0, 16383, &id, NULL) ||
        !g_ascii_string_to_unsigned(f[2], 10, 512, G_MAXUINT64, &bytes, NULL) ||
        bytes % 512 || strlen(f[1]) > 16) {
        return false;
    }
    l->id = id;
    l->bytes = bytes;
    g_strlcpy(l->kind, f[1], sizeof(l->kind));
    return true;
}

int main(int argc, char **argv)
{
    struct probe p = { .tpgt = 1, .queues = 2, .depth = 8, .chunk = 65536 };
    struct lun_under_test luns[MAX_LUNS];
    unsigned nluns = 0;
    const char *wwpn = NULL, *busy_cmd = NULL;
    bool read_only = false;

    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        guint64 n;
        bool ok = v != NULL;
        if (!strcmp(a, "--read-only")) {
            read_only = true;
            continue;
        }
        if (!strcmp(a, "--wwpn") && v) {
            wwpn = v;
        } else if (!strcmp(a, "--busy-cmd") && v) {
            busy_cmd = v;
        } else if (!strcmp(a, "--lun") && v) {
            ok = nluns < MAX_LUNS && parse_lun(v, p.tpgt, &luns[nluns++]);
        } else if (!strcmp(a, "--tpgt") && v) {
            ok = g_ascii_string_to_unsigned(v, 10, 0, 255, &n, NULL);
            p.tpgt = n;
        } else if (!strcmp(a, "--queues") && v) {
            ok = g_ascii_string_to_unsigned(v, 10, 1, 16, &n, NULL);
            p.queues = n;
        } else if (!strcmp(a, "--depth") && v) {
            ok = g_ascii_string_to_unsigned(v, 10, 1, 64, &n, NULL);
            p.depth = n;
        } else if (!strcmp(a, "--chunk") && v) {
            ok = g_ascii_string_to_unsigned(v, 10, 512, 1 << 20, &n, NULL) && n % 512 == 0;
            p.chunk = n;
        } else {
            ok = false;
        }
        if (!ok) {
            fprintf(stderr, "kernel-vhost-probe: bad argument %s %s\n", a, v ? v : "");
            return 2;
        }
        i++;
    }
    if (!wwpn || !nluns) {
        fprintf(stderr, "usage: kernel-vhost-probe --wwpn WWPN --lun ID:KIND:BYTES ...\n");
        return 2;
    }

    struct vfe_config cfg = {
        .transport = VFE_VHOST_KERNEL, .path = "/dev/vhost-scsi", .wwpn = wwpn,
        .tpgt = p.tpgt, .num_request_queues = p.queues, .queue_size = 128,
    };
    int ret = vfe_open(&cfg, &p.fe);
    check(&p, ret == 0, "open /dev/vhost-scsi and SET_ENDPOINT %s (%d)", wwpn, ret);
    if (ret < 0) {
        printf("1..%u\n", p.n);
        return 1;
    }
    uint8_t *buf = vfe_alloc(p.fe, 4096, 4096);
    struct slot *slots = g_new0(struct slot, p.depth);
    for (unsigned i = 0; i < p.depth; i++) {
        slots[i].buf = vfe_alloc(p.fe, p.chunk, 4096);
        g_assert(slots[i].buf);
    }
    g_assert(buf);

    for (unsigned i = 0; i < nluns; i++) {
        probe_ready(&p, &luns[i]);
        probe_inquiry(&p, &luns[i], buf);
        uint64_t blocks = probe_capacity(&p, &luns[i], buf);
        if (!read_only) {
            probe_stream(&p, &luns[i], true, slots);
        }
        probe_stream(&p, &luns[i], false, slots);
        if (read_only) {
            continue;
        }
        if (blocks) {
            probe_sense(&p, &luns[i], blocks, buf);
        }
        probe_reset(&p, &luns[i], slots);
    }
    if (!read_only) {
        probe_report_luns(&p, luns, nluns, buf);
        probe_unmapped(&p, luns, nluns);
    }

    if (busy_cmd) {
        int st = system(busy_cmd);
        check(&p, st != -1 && WIFEXITED(st) && WEXITSTATUS(st) != 0,
              "while the endpoint is held, '%s' fails (exit %d)", busy_cmd,
              st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }

    struct vfe_stats st;
    vfe_get_stats(p.fe, &st);
    printf("# kicks %" PRIu64 " calls %" PRIu64 " completions %" PRIu64 "\n",
           st.kicks, st.calls, st.completions);
    for (unsigned i = 0; i < p.depth; i++) {
        vfe_free(p.fe, slots[i].buf);
    }
    vfe_free(p.fe, buf);
    g_free(slots);
    ret = vfe_stop(p.fe);
    check(&p, ret == 0, "CLEAR_ENDPOINT and stop (%d)", ret);
    vfe_close(p.fe);
    printf("1..%u\n", p.n);
    return p.failed ? 1 : 0;
}
