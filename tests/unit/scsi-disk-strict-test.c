/*
 * The error cases every command shares, table-driven over what the LUN
 * itself reports (hw/scsi/scsi-disk.c's table is never read here):
 * - Reserved bits: for every operation code and service action REPORT
 *   SUPPORTED OPERATION CODES lists (all commands, then each one's CDB
 *   usage data), each CDB bit outside the usage data (not the opcode, the
 *   service action or the control byte) set alone is CHECK CONDITION,
 *   ILLEGAL REQUEST, INVALID FIELD IN CDB with SKSV, C/D and the field
 *   pointer on that byte and bit; each bit inside it is not refused as a
 *   reserved bit.  The reserved-bit check comes before the command's own
 *   checks and before the SANITIZE gate, so a bit inside the usage data is
 *   shown to pass it by sending the command to a LUN whose SANITIZE is in
 *   progress: NOT READY, SANITIZE IN PROGRESS, not INVALID FIELD IN CDB.
 *   INQUIRY and REQUEST SENSE run during a sanitize; for them the bit is
 *   set together with a reserved bit the check looks at after it, which
 *   must be the one reported (or, with no such bit, the answer must not
 *   point at the bit).
 * - LBA beyond the end (LOGICAL BLOCK ADDRESS OUT OF RANGE), from the first
 *   block past the end and across it, for every command with an LBA.
 * - Zero-length transfers, as SBC-3 says for each command: GOOD with no
 *   data, except READ/WRITE (6) (256 blocks), WRITE SAME (WSNZ: INVALID
 *   FIELD IN CDB) and PRE-FETCH (to the end; GOOD).
 * - Write protect: every command that writes is DATA PROTECT, WRITE
 *   PROTECTED on a read-only LUN, and nothing is written.
 * Every command listed must be classified in the tables here (has an LBA
 * or not, writes or not), so a new command cannot skip these cases.  LBA
 * and length cases build CDBs by hand: placing the fields at their SBC-3
 * offsets, table-driven, is what they test.  The harness is
 * scsi-disk-fixture.h.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>

#include <glib.h>

#include "backend.h"
#include "scsi-cmd.h"
#include "scsi-disk.h"
#include "scsi-disk-fixture.h"

#define LUN_BLOCKS (8 * MiB / BS)
/* RESERVE (10) and RELEASE (10), which libiscsi's enum lacks. */
#define SC_OPCODE_RESERVE10 0x56
#define SC_OPCODE_RELEASE10 0x57

/* A command as REPORT SUPPORTED OPERATION CODES describes it. */
struct listed {
    uint8_t op;
    uint16_t sa;
    bool has_sa;
    unsigned len;
    uint8_t usage[16];
};

static bool is_sa_bit(const struct listed *c, unsigned byte, int bit)
{
    return c->has_sa && byte == 1 && bit < 5;
}

/* Every command the LUN lists, with its usage data, read through the commands themselves. */
static GArray *list_commands(struct scsi_lun *lun)
{
    GArray *a = g_array_new(false, true, sizeof(struct listed));
    uint8_t buf[4096];
    const struct scsi_report_supported_op_codes *all;
    struct sc_datain d;
    struct result r;

    r = RUN_IN(lun, scsi_cdb_report_supported_opcodes(0, SCSI_REPORT_SUPPORTING_OPS_ALL, 0, 0,
                                                      sizeof(buf)), buf, sizeof(buf));
    assert_good(&r);
    all = decoded(&d, &r, buf);
    for (int i = 0; i < all->num_descriptors; i++) {
        struct listed c = { .op = all->descriptors[i].opcode, .sa = all->descriptors[i].sa,
                            .has_sa = all->descriptors[i].servactv,
                            .len = all->descriptors[i].cdb_len };

        g_array_append_val(a, c);
    }
    sc_datain_free(&d);
    for (guint i = 0; i < a->len; i++) {
        struct listed *c = &g_array_index(a, struct listed, i);
        const struct scsi_report_supported_op_codes_one_command *one;

        r = RUN_IN(lun, scsi_cdb_report_supported_opcodes(0, c->has_sa
                                                              ? SCSI_REPORT_SUPPORTING_SERVICEACTION
                                                              : SCSI_REPORT_SUPPORTING_OPCODE,
                                                          c->op, c->sa, 64), buf, 64);
        assert_good(&r);
        one = decoded(&d, &r, buf);
        g_assert_cmpuint(one->support, ==, 3);
        g_assert_cmpuint(one->cdb_length, ==, c->len);
        g_assert_cmpuint(c->len, <=, sizeof(c->usage));
        memcpy(c->usage, one->cdb_usage_data, c->len);
        sc_datain_free(&d);
        g_assert_cmphex(c->usage[0], ==, c->op);
        if (c->has_sa) {
            g_assert_cmphex(c->usage[1] & 0x1f, ==, c->sa);
        }
        g_assert_cmphex(c->usage[c->len - 1], ==, 0x04);   /* NACA, the control bit looked at */
    }
    g_assert_cmpuint(a->len, >=, 40);
    return a;
}

/* The CDB of c with nothing set but its opcode and service action. */
static void base_cdb(const struct listed *c, uint8_t *cdb)
{
    memset(cdb, 0, SC_CDB_MAX);
    cdb[0] = c->op;
    if (c->has_sa) {
        cdb[1] = (uint8_t)c->sa;
    }
}

/* An ready LUN that lists every optional command: ram (discards), sanitize=on. */
static struct scsi_lun *full_lun(struct spy **s)
{
    struct scsi_lun *lun = s ? spy_lun(false, s) : ram_lun();

    scsi_lun_backend(lun)->allow_sanitize = true;
    return lun;
}

/* virtio-scsi's CDB field: the transport passes all of it. */
#define WHOLE_CDB_FIELD 32

/* base_cdb in a whole CDB field, the bytes past the command set to spare. */
static void field_cdb(const struct listed *c, uint8_t cdb[WHOLE_CDB_FIELD], uint8_t spare)
{
    base_cdb(c, cdb);
    memset(cdb + c->len, spare, WHOLE_CDB_FIELD - c->len);
}

/*
 * Each reserved bit is refused whether the transport hands over exactly
 * the command's CDB or a whole CDB field with bytes to spare (virtio-scsi's
 * 32, which the dispatch tests a word at a time): whatever lies past the
 * control byte in the spare bytes is no part of the command.
 */
static void reserved_bits_refused(unsigned avail, uint8_t spare)
{
    struct scsi_lun *lun = full_lun(NULL);
    g_autoptr(GArray) cmds = list_commands(lun);
    uint8_t cdb[WHOLE_CDB_FIELD], buf[512];
    unsigned checked = 0;

    for (guint i = 0; i < cmds->len; i++) {
        const struct listed *c = &g_array_index(cmds, struct listed, i);

        for (unsigned byte = 1; byte + 1 < c->len; byte++) {
            for (int bit = 0; bit < 8; bit++) {
                struct result r;

                if ((c->usage[byte] & (1u << bit)) || is_sa_bit(c, byte, bit)) {
                    continue;
                }
                field_cdb(c, cdb, spare);
                cdb[byte] |= (uint8_t)(1u << bit);
                r = run_cdb(lun, cdb, avail ? avail : c->len, NULL, 0, buf, sizeof(buf));
                if (r.status != SAM_STAT_CHECK_CONDITION) {
                    g_error("opcode %02x/%02x: reserved byte %u bit %d accepted", c->op, c->sa,
                            byte, bit);
                }
                assert_field(&r, true, byte, bit);
                checked++;
            }
        }
    }
    g_assert_cmpuint(checked, >, 500);
    scsi_lun_free(lun);
}

static void test_reserved_bits_refused(void)
{
    reserved_bits_refused(0, 0);
}

static void test_reserved_bits_refused_in_whole_cdb_field(void)
{
    reserved_bits_refused(WHOLE_CDB_FIELD, 0xff);
}

/* No command is refused for a bit in the bytes past it, all set, of the whole field. */
static void test_spare_bytes_ignored(void)
{
    struct scsi_lun *lun = full_lun(NULL);
    g_autoptr(GArray) cmds = list_commands(lun);
    uint8_t cdb[WHOLE_CDB_FIELD], buf[512];
    unsigned checked = 0;

    for (guint i = 0; i < cmds->len; i++) {
        const struct listed *c = &g_array_index(cmds, struct listed, i);
        struct result r;

        field_cdb(c, cdb, 0xff);
        r = run_cdb(lun, cdb, WHOLE_CDB_FIELD, NULL, 0, buf, sizeof(buf));
        if (r.status == SAM_STAT_CHECK_CONDITION) {
            struct sc_sense sn = sc_fixed_sense(r.sense, r.sense_len);

            if (sn.code == SCSI_SENSE_ASCQ_INVALID_FIELD_IN_CDB && sn.sksv && sn.in_cdb &&
                sn.field >= c->len - 1) {
                g_error("opcode %02x/%02x: byte %u past the command refused", c->op, c->sa,
                        sn.field);
            }
        }
        checked++;
    }
    g_assert_cmpuint(checked, >=, 40);
    scsi_lun_free(lun);
}

/* The reserved bit the check looks at after (byte, bit), if any: *rb, *rbit. */
static bool later_reserved(const struct listed *c, unsigned byte, int bit, unsigned *rb,
                           int *rbit)
{
    for (unsigned b = byte; b + 1 < c->len; b++) {
        for (int i = b == byte ? bit - 1 : 7; i >= 0; i--) {
            if (!(c->usage[b] & (1u << i)) && !is_sa_bit(c, b, i)) {
                *rb = b;
                *rbit = i;
                return true;
            }
        }
    }
    return false;
}

/* Whether r is INVALID FIELD IN CDB pointing at exactly this bit. */
static bool points_at(const struct result *r, unsigned byte, int bit)
{
    struct sc_sense s;

    if (r->status != SAM_STAT_CHECK_CONDITION) {
        return false;
    }
    s = sc_fixed_sense(r->sense, r->sense_len);
    return s.key == SCSI_SENSE_ILLEGAL_REQUEST &&
           s.code == SCSI_SENSE_ASCQ_INVALID_FIELD_IN_CDB && s.sksv && s.in_cdb &&
           s.bit_valid && s.field == byte && (int)s.bit == bit;
}

static void test_used_bits_pass(void)
{
    struct spy *s;
    struct scsi_lun *lun = full_lun(&s);
    g_autoptr(GArray) cmds = list_commands(lun);
    g_autofree uint8_t *out = g_malloc0(64 * KiB), *in = g_malloc0(64 * KiB);
    uint8_t cdb[SC_CDB_MAX];
    unsigned not_ready = 0, paired = 0;
    struct result r;

    /* A SANITIZE held in progress: every command past the CDB checks is NOT READY. */
    s->defer = true;
    r = RUN(lun, scsi_cdb_sanitize(1, 0, SCSI_SANITIZE_BLOCK_ERASE, 0));
    assert_good(&r);
    for (guint i = 0; i < cmds->len; i++) {
        const struct listed *c = &g_array_index(cmds, struct listed, i);
        bool runs = c->op == SCSI_OPCODE_INQUIRY || c->op == SC_OPCODE_REQUEST_SENSE;

        for (unsigned byte = 1; byte + 1 < c->len; byte++) {
            for (int bit = 0; bit < 8; bit++) {
                unsigned rb;
                int rbit;

                if (!(c->usage[byte] & (1u << bit)) || is_sa_bit(c, byte, bit)) {
                    continue;
                }
                base_cdb(c, cdb);
                cdb[byte] |= (uint8_t)(1u << bit);
                if (!runs) {
                    r = run_cdb(lun, cdb, c->len, out, 64 * KiB, in, 64 * KiB);
                    if (r.status != SAM_STAT_CHECK_CONDITION ||
                        sc_fixed_sense(r.sense, r.sense_len).code !=
                        SCSI_SENSE_ASCQ_SANITIZE_IN_PROGRESS) {
                        g_error("opcode %02x/%02x: used byte %u bit %d refused before the "
                                "command ran (status %02x)", c->op, c->sa, byte, bit, r.status);
                    }
                    not_ready++;
                    continue;
                }
                if (later_reserved(c, byte, bit, &rb, &rbit)) {
                    cdb[rb] |= (uint8_t)(1u << rbit);
                    r = run_cdb(lun, cdb, c->len, NULL, 0, in, 255);
                    assert_field(&r, true, rb, rbit);
                    paired++;
                } else {
                    r = run_cdb(lun, cdb, c->len, NULL, 0, in, 255);
                    if (points_at(&r, byte, bit)) {
                        g_error("opcode %02x: used byte %u bit %d refused as reserved", c->op,
                                byte, bit);
                    }
                }
            }
        }
    }
    g_assert_cmpuint(not_ready, >, 500);
    g_assert_cmpuint(paired, >, 0);
    s->defer = false;
    while (spy_run_pending(s)) {
    }
    r = RUN(lun, scsi_cdb_testunitready());
    assert_good(&r);
    scsi_lun_free(lun);
}

/* ---- commands by what they address -------------------------------------- */

/* What a zero transfer length does (SBC-3, per command). */
enum zero { Z_NONE, Z_GOOD, Z_256, Z_WSNZ, Z_TO_END };

/*
 * A command with an LBA: where its LBA and transfer length are, how much
 * data-out one block takes, whether it reads into data-in, whether it writes.
 */
static const struct lba_cmd {
    uint8_t op;
    uint16_t sa;
    unsigned len, lba_off, lba_bytes, n_off, n_bytes;
    unsigned out_per_block;    /* data-out bytes per block: BS, 2 BS (CAW), 0 */
    bool in;
    bool writes;
    enum zero zero;
} lba_cmds[] = {
    { SCSI_OPCODE_READ6, 0, 6, 1, 3, 4, 1, 0, true, false, Z_256 },
    { SC_OPCODE_WRITE6, 0, 6, 1, 3, 4, 1, BS, false, true, Z_256 },
    { SCSI_OPCODE_READ10, 0, 10, 2, 4, 7, 2, 0, true, false, Z_GOOD },
    { SCSI_OPCODE_WRITE10, 0, 10, 2, 4, 7, 2, BS, false, true, Z_GOOD },
    { SCSI_OPCODE_WRITE_VERIFY10, 0, 10, 2, 4, 7, 2, BS, false, true, Z_GOOD },
    { SCSI_OPCODE_VERIFY10, 0, 10, 2, 4, 7, 2, 0, false, false, Z_GOOD },
    { SCSI_OPCODE_PREFETCH10, 0, 10, 2, 4, 7, 2, 0, false, false, Z_TO_END },
    { SCSI_OPCODE_SYNCHRONIZECACHE10, 0, 10, 2, 4, 7, 2, 0, false, false, Z_TO_END },
    { SCSI_OPCODE_WRITE_SAME10, 0, 10, 2, 4, 7, 2, 0, false, true, Z_WSNZ },
    { SCSI_OPCODE_READ12, 0, 12, 2, 4, 6, 4, 0, true, false, Z_GOOD },
    { SCSI_OPCODE_WRITE12, 0, 12, 2, 4, 6, 4, BS, false, true, Z_GOOD },
    { SCSI_OPCODE_WRITE_VERIFY12, 0, 12, 2, 4, 6, 4, BS, false, true, Z_GOOD },
    { SCSI_OPCODE_VERIFY12, 0, 12, 2, 4, 6, 4, 0, false, false, Z_GOOD },
    { SCSI_OPCODE_READ16, 0, 16, 2, 8, 10, 4, 0, true, false, Z_GOOD },
    { SCSI_OPCODE_COMPARE_AND_WRITE, 0, 16, 2, 8, 13, 1, 2 * BS, false, true, Z_GOOD },
    { SCSI_OPCODE_WRITE16, 0, 16, 2, 8, 10, 4, BS, false, true, Z_GOOD },
    { SCSI_OPCODE_ORWRITE, 0, 16, 2, 8, 10, 4, BS, false, true, Z_GOOD },
    { SCSI_OPCODE_WRITE_VERIFY16, 0, 16, 2, 8, 10, 4, BS, false, true, Z_GOOD },
    { SCSI_OPCODE_VERIFY16, 0, 16, 2, 8, 10, 4, 0, false, false, Z_GOOD },
    { SCSI_OPCODE_PREFETCH16, 0, 16, 2, 8, 10, 4, 0, false, false, Z_TO_END },
    { SCSI_OPCODE_SYNCHRONIZECACHE16, 0, 16, 2, 8, 10, 4, 0, false, false, Z_TO_END },
    { SCSI_OPCODE_WRITE_SAME16, 0, 16, 2, 8, 10, 4, 0, false, true, Z_WSNZ },
    { SCSI_OPCODE_WRITE_ATOMIC16, 0, 16, 2, 8, 12, 2, BS, false, true, Z_GOOD },
    { SCSI_OPCODE_SERVICE_ACTION_IN, SCSI_GET_LBA_STATUS, 16, 2, 8, 0, 0, 0, true, false,
      Z_NONE },
};

/* Commands without an LBA in the CDB, and whether they write the medium. */
static const struct { uint8_t op; int sa; bool writes; } other_cmds[] = {
    { SCSI_OPCODE_TESTUNITREADY, -1, false }, { SC_OPCODE_REQUEST_SENSE, -1, false },
    { SCSI_OPCODE_INQUIRY, -1, false }, { SCSI_OPCODE_MODESELECT6, -1, false },
    { SCSI_OPCODE_RESERVE6, -1, false }, { SCSI_OPCODE_RELEASE6, -1, false },
    { SCSI_OPCODE_MODESENSE6, -1, false }, { SCSI_OPCODE_STARTSTOPUNIT, -1, false },
    { SCSI_OPCODE_PREVENTALLOW, -1, false }, { SCSI_OPCODE_READCAPACITY10, -1, false },
    { SCSI_OPCODE_READ_DEFECT_DATA10, -1, false }, { SCSI_OPCODE_MODESELECT10, -1, false },
    { SC_OPCODE_RESERVE10, -1, false }, { SC_OPCODE_RELEASE10, -1, false },
    { SCSI_OPCODE_MODESENSE10, -1, false }, { SCSI_OPCODE_PERSISTENT_RESERVE_IN, -1, false },
    { SCSI_OPCODE_PERSISTENT_RESERVE_OUT, -1, false },
    { SCSI_OPCODE_READ_DEFECT_DATA12, -1, false },
    { SCSI_OPCODE_SERVICE_ACTION_IN, SCSI_READCAPACITY16, false },
    { SCSI_OPCODE_MAINTENANCE_IN, SCSI_REPORT_SUPPORTED_OP_CODES, false },
    { SCSI_OPCODE_UNMAP, -1, true },              /* its LBAs are in the parameter list */
    { SCSI_OPCODE_SANITIZE, SCSI_SANITIZE_OVERWRITE, true },
    { SCSI_OPCODE_SANITIZE, SCSI_SANITIZE_BLOCK_ERASE, true },
    { SCSI_OPCODE_SANITIZE, SCSI_SANITIZE_EXIT_FAILURE_MODE, false },
    /*
     * It writes the copy targets its parameter list names, not the LUN it
     * is sent to: their write protection is scsi-disk-xcopy-test's.
     */
    { SCSI_OPCODE_EXTENDED_COPY, 0x00, false },
    { SCSI_OPCODE_RECEIVE_COPY_RESULTS, 0x00, false },
    { SCSI_OPCODE_RECEIVE_COPY_RESULTS, 0x03, false },
};

static bool classified(const struct listed *c)
{
    for (unsigned i = 0; i < G_N_ELEMENTS(lba_cmds); i++) {
        if (lba_cmds[i].op == c->op && (!c->has_sa || lba_cmds[i].sa == c->sa)) {
            g_assert_cmpuint(lba_cmds[i].len, ==, c->len);
            return true;
        }
    }
    for (unsigned i = 0; i < G_N_ELEMENTS(other_cmds); i++) {
        if (other_cmds[i].op == c->op && (!c->has_sa || other_cmds[i].sa == (int)c->sa)) {
            return true;
        }
    }
    return false;
}

static void test_every_command_classified(void)
{
    struct scsi_lun *lun = full_lun(NULL);
    g_autoptr(GArray) cmds = list_commands(lun);

    for (guint i = 0; i < cmds->len; i++) {
        const struct listed *c = &g_array_index(cmds, struct listed, i);

        if (!classified(c)) {
            g_error("opcode %02x/%02x is in no table of this test", c->op, c->sa);
        }
    }
    g_assert_cmpuint(cmds->len, ==, G_N_ELEMENTS(lba_cmds) + G_N_ELEMENTS(other_cmds));
    scsi_lun_free(lun);
}

static void put_be(uint8_t *p, unsigned bytes, uint64_t v)
{
    for (unsigned i = 0; i < bytes; i++) {
        p[bytes - 1 - i] = (uint8_t)(v >> (8 * i));
    }
}

/* The CDB of c for n blocks at lba (BYTCHK 0, no flags). */
static void lba_cdb(const struct lba_cmd *c, uint64_t lba, uint32_t n, uint8_t *cdb)
{
    memset(cdb, 0, SC_CDB_MAX);
    cdb[0] = c->op;
    if (c->sa) {
        cdb[1] = (uint8_t)c->sa;
    }
    put_be(cdb + c->lba_off, c->lba_bytes, lba);
    if (c->n_bytes) {
        put_be(cdb + c->n_off, c->n_bytes, n);
    } else {
        put_be(cdb + 10, 4, 64);   /* GET LBA STATUS: the allocation length */
    }
}

static struct result run_lba(struct scsi_lun *lun, const struct lba_cmd *c, uint64_t lba,
                             uint32_t n, uint8_t *data, size_t len)
{
    uint8_t cdb[SC_CDB_MAX];
    uint32_t blocks = c->len == 6 && n == 0 ? 256 : MAX(n, 1u);   /* (6): 0 is 256 */
    size_t out = c->out_per_block ? MIN(len, (size_t)c->out_per_block * blocks) : 0;
    size_t in = c->in ? len : 0;

    lba_cdb(c, lba, n, cdb);
    /* WRITE SAME takes one block of data-out whatever its length. */
    if (c->op == SCSI_OPCODE_WRITE_SAME10 || c->op == SCSI_OPCODE_WRITE_SAME16) {
        out = BS;
    }
    return run_cdb(lun, cdb, c->len, out ? data : NULL, out, in ? data : NULL, in);
}

static void test_lba_out_of_range(void)
{
    struct scsi_lun *lun = full_lun(NULL);
    g_autofree uint8_t *data = g_malloc0(4 * BS);
    struct result r;

    for (unsigned i = 0; i < G_N_ELEMENTS(lba_cmds); i++) {
        const struct lba_cmd *c = &lba_cmds[i];

        /* The first block past the end, and two blocks from the last. */
        r = run_lba(lun, c, LUN_BLOCKS, 1, data, 4 * BS);
        if (r.status != SAM_STAT_CHECK_CONDITION) {
            g_error("opcode %02x/%02x: LBA past the end accepted", c->op, c->sa);
        }
        assert_lba_out_of_range(&r);
        g_assert_cmpuint(r.in_xfer + r.out_xfer, ==, 0);
        if (c->n_bytes) {
            r = run_lba(lun, c, LUN_BLOCKS - 1, 2, data, 4 * BS);
            assert_lba_out_of_range(&r);
            g_assert_cmpuint(r.in_xfer + r.out_xfer, ==, 0);
            /* The last block itself is in range. */
            r = run_lba(lun, c, LUN_BLOCKS - 1, 1, data, 4 * BS);
            if (r.status != SAM_STAT_GOOD && r.status != SAM_STAT_CONDITION_MET) {
                g_error("opcode %02x: the last block refused (status %02x)", c->op, r.status);
            }
        }
    }
    /* UNMAP's LBAs are in its parameter list. */
    uint8_t unmap[24] = { 0, 22, 0, 16 };

    put_be(unmap + 8, 8, LUN_BLOCKS - 1);
    put_be(unmap + 16, 4, 2);
    r = RUN_OUT(lun, scsi_cdb_unmap(0, 0, sizeof(unmap)), unmap, sizeof(unmap));
    assert_lba_out_of_range(&r);
    scsi_lun_free(lun);
}

static void test_zero_length(void)
{
    struct scsi_lun *lun = full_lun(NULL);
    g_autofree uint8_t *data = g_malloc0(256 * 2 * BS);
    struct result r;

    for (unsigned i = 0; i < G_N_ELEMENTS(lba_cmds); i++) {
        const struct lba_cmd *c = &lba_cmds[i];

        if (c->zero == Z_NONE) {
            continue;
        }
        r = run_lba(lun, c, 5, 0, data, 256 * 2 * BS);
        g_test_message("opcode %02x/%02x: status %02x, sense %02x/%02x%02x", c->op, c->sa,
                       r.status, r.sense[2], r.sense[12], r.sense[13]);
        switch (c->zero) {
        case Z_GOOD:
            assert_good(&r);
            g_assert_cmpuint(r.in_xfer + r.out_xfer, ==, 0);
            break;
        case Z_256:                 /* READ/WRITE (6): 0 means 256 blocks */
            assert_good(&r);
            g_assert_cmpuint(r.in_xfer + r.out_xfer, ==, 256 * BS);
            break;
        case Z_WSNZ:                /* Block Limits WSNZ 1: a length is needed */
            assert_field(&r, true, c->n_off, 7);
            break;
        case Z_TO_END:              /* to the end of the medium: no data either way */
            if (r.status != SAM_STAT_GOOD && r.status != SAM_STAT_CONDITION_MET) {
                g_error("opcode %02x: zero length (to the end) refused", c->op);
            }
            g_assert_cmpuint(r.in_xfer + r.out_xfer, ==, 0);
            break;
        case Z_NONE:
            break;
        }
    }
    /* UNMAP with no parameter list, GET LBA STATUS with no allocation length. */
    r = RUN(lun, scsi_cdb_unmap(0, 0, 0));
    assert_good(&r);
    r = RUN(lun, scsi_cdb_get_lba_status(0, 0));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 0);
    scsi_lun_free(lun);
}

static void test_write_protect(void)
{
    struct scsi_lun *lun = full_lun(NULL);
    uint8_t before[4 * BS], after[4 * BS], data[4 * BS], unmap[24] = { 0, 22, 0, 16 };
    static const uint8_t overwrite[8] = { 1, 0, 0, 4, 0xde, 0xad, 0xbe, 0xef };
    unsigned writers = 0;
    struct result r;

    fill_pattern(before, sizeof(before), 31);
    r = RUN_OUT(lun, scsi_cdb_write16(0, sizeof(before), BS, 0, 0, 0, 0, 0), before,
                sizeof(before));
    assert_good(&r);
    scsi_lun_backend(lun)->read_only = true;
    memset(data, 0x5a, sizeof(data));
    for (unsigned i = 0; i < G_N_ELEMENTS(lba_cmds); i++) {
        const struct lba_cmd *c = &lba_cmds[i];

        r = run_lba(lun, c, 0, 1, data, c->in ? BS : sizeof(data));
        if (c->writes) {
            if (r.status != SAM_STAT_CHECK_CONDITION) {
                g_error("opcode %02x: written on a read-only LUN", c->op);
            }
            assert_sense(&r, SCSI_SENSE_DATA_PROTECTION, SCSI_SENSE_ASCQ_WRITE_PROTECTED);
            g_assert_cmpuint(r.out_xfer, ==, 0);
            writers++;
        } else if (r.status != SAM_STAT_GOOD && r.status != SAM_STAT_CONDITION_MET) {
            g_error("opcode %02x/%02x: refused on a read-only LUN though it does not write",
                    c->op, c->sa);
        }
    }
    put_be(unmap + 8, 8, 0);
    put_be(unmap + 16, 4, 2);
    r = RUN_OUT(lun, scsi_cdb_unmap(0, 0, sizeof(unmap)), unmap, sizeof(unmap));
    assert_sense(&r, SCSI_SENSE_DATA_PROTECTION, SCSI_SENSE_ASCQ_WRITE_PROTECTED);
    r = RUN(lun, scsi_cdb_sanitize(0, 0, SCSI_SANITIZE_BLOCK_ERASE, 0));
    assert_sense(&r, SCSI_SENSE_DATA_PROTECTION, SCSI_SENSE_ASCQ_WRITE_PROTECTED);
    r = run(lun, scsi_cdb_sanitize(0, 0, SCSI_SANITIZE_OVERWRITE, sizeof(overwrite)),
            overwrite, sizeof(overwrite), NULL, 0);
    assert_sense(&r, SCSI_SENSE_DATA_PROTECTION, SCSI_SENSE_ASCQ_WRITE_PROTECTED);
    writers += 3;
    /* Every writer of the tables was tried. */
    for (unsigned i = 0; i < G_N_ELEMENTS(other_cmds); i++) {
        writers -= other_cmds[i].writes;
    }
    for (unsigned i = 0; i < G_N_ELEMENTS(lba_cmds); i++) {
        writers -= lba_cmds[i].writes;
    }
    g_assert_cmpuint(writers, ==, 0);
    read_blocks(lun, 0, 4, after);
    g_assert_true(memcmp(before, after, sizeof(before)) == 0);
    scsi_lun_free(lun);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/scsi-disk/strict/reserved-bits-refused", test_reserved_bits_refused);
    g_test_add_func("/scsi-disk/strict/reserved-bits-refused-in-whole-cdb-field",
                    test_reserved_bits_refused_in_whole_cdb_field);
    g_test_add_func("/scsi-disk/strict/spare-bytes-ignored", test_spare_bytes_ignored);
    g_test_add_func("/scsi-disk/strict/used-bits-pass", test_used_bits_pass);
    g_test_add_func("/scsi-disk/strict/every-command-classified", test_every_command_classified);
    g_test_add_func("/scsi-disk/strict/lba-out-of-range", test_lba_out_of_range);
    g_test_add_func("/scsi-disk/strict/zero-length", test_zero_length);
    g_test_add_func("/scsi-disk/strict/write-protect", test_write_protect);
    return g_test_run();
}
