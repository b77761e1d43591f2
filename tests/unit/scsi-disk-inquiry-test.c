/*
 * Specification of the identification commands
 * (hw/scsi/scsi-disk-inquiry.c): standard INQUIRY (a direct-access SPC-4
 * device, cut to the allocation length and to the buffer); the VPD pages
 * it lists (unit serial number; device identification, an NAA-5 and a T10
 * designator, the same for the same LUN name; block limits; block device
 * characteristics; logical block provisioning, which follows whether the
 * backend can discard); the identity a passthrough backend supplies;
 * invalid fields refused with their field pointer; and READ CAPACITY (10)
 * and (16) from the backend's size and block size, (10) saturating past
 * 2^32 blocks.  REQUEST SENSE is specified with the unit attentions it
 * reports (scsi-ua-test.c).  The harness is scsi-disk-fixture.h.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include <glib.h>

#include "backend.h"
#include "scsi-cmd.h"
#include "scsi-disk.h"
#include "scsi-disk-fixture.h"

/* ---- INQUIRY ----------------------------------------------------------- */

static void test_inquiry_standard(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[255];
    struct result r = RUN_IN(lun, scsi_cdb_inquiry(0, 0, 255), buf, sizeof(buf));
    struct scsi_inquiry_standard *inq;
    struct sc_datain d;

    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, >=, 36);
    inq = decoded(&d, &r, buf);
    g_assert_cmpuint(r.in_xfer, ==, inq->additional_length + 5u);
    g_assert_cmpint(inq->qualifier, ==, SCSI_INQUIRY_PERIPHERAL_QUALIFIER_CONNECTED);
    g_assert_cmpint(inq->device_type, ==, SCSI_INQUIRY_PERIPHERAL_DEVICE_TYPE_DIRECT_ACCESS);
    g_assert_false(inq->rmb);                                 /* not removable */
    g_assert_cmpint(inq->version, ==, 0x06);                  /* SPC-4 */
    g_assert_cmpint(inq->response_data_format, ==, 2);
    g_assert_true(inq->cmdque);
    g_assert_true(inq->threepc);                              /* EXTENDED COPY */
    g_assert_cmpstr(inq->vendor_identification, ==, "VHOSTSCS");
    g_assert_cmpstr(inq->product_identification, ==, "RAM DISK        ");
    sc_datain_free(&d);
    scsi_lun_free(lun);
}

static void test_inquiry_allocation_length_truncates(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[64];
    struct result r;

    memset(buf, 0xee, sizeof(buf));
    r = RUN_IN(lun, scsi_cdb_inquiry(0, 0, 5), buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 5);
    g_assert_cmphex(buf[5], ==, 0xee);

    /* A buffer smaller than the allocation length gets what fits. */
    r = RUN_IN(lun, scsi_cdb_inquiry(0, 0, 255), buf, 20);
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 20);
    g_assert_cmphex(buf[20], ==, 0xee);
    scsi_lun_free(lun);
}

static void test_inquiry_vpd_supported_pages(void)
{
    struct scsi_lun *lun = ram_lun();
    static const uint8_t want[] = {
        SCSI_INQUIRY_PAGECODE_SUPPORTED_VPD_PAGES, SCSI_INQUIRY_PAGECODE_UNIT_SERIAL_NUMBER,
        SCSI_INQUIRY_PAGECODE_DEVICE_IDENTIFICATION,
        0x8f,   /* Third-party Copy, which libiscsi has no name for */
        SCSI_INQUIRY_PAGECODE_BLOCK_LIMITS,
        SCSI_INQUIRY_PAGECODE_BLOCK_DEVICE_CHARACTERISTICS,
        SCSI_INQUIRY_PAGECODE_LOGICAL_BLOCK_PROVISIONING,
    };
    uint8_t buf[64];
    struct sc_datain d;
    struct scsi_inquiry_supported_pages *p = VPD_PAGES(lun, buf, &d);

    g_assert_cmpint(p->num_pages, ==, sizeof(want));
    g_assert_true(memcmp(p->pages, want, sizeof(want)) == 0);
    sc_datain_free(&d);
    scsi_lun_free(lun);
}

/* The vendor and product in the LUN's standard INQUIRY data (36 bytes). */
static void assert_identity(struct scsi_lun *lun, const char *vendor, const char *product)
{
    uint8_t buf[36];
    struct result r = RUN_IN(lun, scsi_cdb_inquiry(0, 0, 36), buf, sizeof(buf));
    struct scsi_inquiry_standard *inq;
    struct sc_datain d;

    assert_good(&r);
    inq = decoded(&d, &r, buf);
    g_assert_cmpstr(inq->vendor_identification, ==, vendor);
    g_assert_cmpstr(inq->product_identification, ==, product);
    sc_datain_free(&d);
}

/* The designator of type in a decoded Device Identification page, or NULL. */
static const struct scsi_inquiry_device_designator *
designator(const struct scsi_inquiry_device_identification *id, enum scsi_designator_type type)
{
    for (const struct scsi_inquiry_device_designator *e = id->designators; e; e = e->next) {
        if (e->designator_type == type) {
            return e;
        }
    }
    return NULL;
}

static void test_inquiry_vpd_identification(void)
{
    struct lun_backend *be;
    struct scsi_lun_info info = { .vendor = "ACME", .product = "Widget",
                                  .serial = "SER-42", .naa_id = 0x123456789abcdefULL };
    struct scsi_lun *lun;
    uint8_t buf[255];
    struct scsi_inquiry_unit_serial_number *sn;
    struct scsi_inquiry_device_identification *id;
    const struct scsi_inquiry_device_designator *naa, *t10;
    struct sc_datain d;

    g_assert_cmpint(backend_ram_new(MiB, 512, &be, NULL), ==, 0);
    lun = ready(scsi_lun_new(be, "test:ident", &info, NULL));

    assert_identity(lun, "ACME    ", "Widget          ");

    sn = VPD_SERIAL(lun, buf, &d);
    g_assert_cmpstr(sn->usn, ==, "SER-42");
    sc_datain_free(&d);

    id = VPD_IDENT(lun, buf, &d);
    g_assert_cmpint(sc_datain_full_size(&d), ==, 34);
    /* libiscsi lists designators last first: the NAA one comes first in the page. */
    naa = id->designators->next;
    t10 = id->designators;
    g_assert_true(naa == designator(id, SCSI_DESIGNATOR_TYPE_NAA));
    g_assert_null(naa->next);
    /* NAA, binary, LUN association, 8 bytes, NAA=5. */
    g_assert_cmpint(naa->code_set, ==, SCSI_CODESET_BINARY);
    g_assert_cmpint(naa->association, ==, SCSI_ASSOCIATION_LOGICAL_UNIT);
    g_assert_cmpint(naa->designator_length, ==, 8);
    g_assert_cmphex(scsi_get_uint64((const unsigned char *)naa->designator), ==,
                    0x5123456789abcdefULL);
    /* T10 vendor id, ASCII: vendor padded to 8, then the serial. */
    g_assert_cmpint(t10->code_set, ==, SCSI_CODESET_ASCII);
    g_assert_cmpint(t10->designator_type, ==, SCSI_DESIGNATOR_TYPE_T10_VENDORT_ID);
    g_assert_cmpint(t10->designator_length, ==, 8 + 6);
    g_assert_cmpstr(t10->designator, ==, "ACME    SER-42");
    sc_datain_free(&d);
    scsi_lun_free(lun);
}

static int remote_inquiry(struct lun_backend *be, void *buf, unsigned len)
{
    uint8_t *b = buf;

    g_assert_cmpuint(len, >=, 36);
    memset(b, 0, 36);
    memcpy(b + 8, "REMOTE  ", 8);
    memcpy(b + 16, "Far Away Disk   ", 16);
    return 36;
}

static void test_inquiry_passthrough_identity(void)
{
    struct backend_ops ops;     /* outlives the LUN, freed below */
    struct lun_backend *be;
    struct scsi_lun *lun;

    g_assert_cmpint(backend_ram_new(MiB, 512, &be, NULL), ==, 0);
    ops = *be->ops;
    ops.passthrough_inquiry = remote_inquiry;
    be->ops = &ops;
    lun = ready(scsi_lun_new(be, "test:remote", NULL, NULL));
    assert_identity(lun, "REMOTE  ", "Far Away Disk   ");
    scsi_lun_free(lun);
}

static void test_inquiry_default_identity_is_stable(void)
{
    struct scsi_lun *a = ram_lun(), *b = ram_lun(), *c = ready(new_ram(MiB, 512));
    uint8_t pa[64] = { 0 }, pb[64] = { 0 };
    const struct scsi_inquiry_device_designator *naa;
    struct sc_datain da, db;

    /* Same name, same identifiers, to the byte; an NAA-5 id is always produced. */
    naa = designator(VPD_IDENT(a, pa, &da), SCSI_DESIGNATOR_TYPE_NAA);
    VPD_IDENT(b, pb, &db);
    g_assert_nonnull(naa);
    g_assert_cmphex((uint8_t)naa->designator[0] >> 4, ==, 5);
    g_assert_true(memcmp(pa, pb, sizeof(pa)) == 0);
    sc_datain_free(&da);
    sc_datain_free(&db);
    g_assert_cmpuint(strlen(VPD_SERIAL(c, pa, &da)->usn), >, 0);
    sc_datain_free(&da);
    scsi_lun_free(a);
    scsi_lun_free(b);
    scsi_lun_free(c);
}

static void test_inquiry_vpd_block_limits(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[64];
    struct sc_datain d;
    struct scsi_inquiry_block_limits *bl = VPD_LIMITS(lun, buf, &d);

    g_assert_cmpint(sc_datain_full_size(&d), ==, 64);           /* PAGE LENGTH 3Ch */
    g_assert_true(bl->wsnz);
    /* QEMU's vhost-user-scsi max_sectors, which the guest reads from the config space. */
    g_assert_cmpuint(bl->max_xfer_len, ==, 0xffff);
    g_assert_cmpuint(bl->opt_xfer_len, >, 0);
    g_assert_cmpuint(bl->opt_xfer_len, <=, bl->max_xfer_len);
    g_assert_cmpuint(bl->max_unmap, >, 0);
    g_assert_cmpuint(bl->max_unmap_bdc, >, 0);
    g_assert_cmpuint(bl->max_ws_len, >, 0);
    sc_datain_free(&d);
    scsi_lun_free(lun);
}

static void test_inquiry_vpd_characteristics_and_provisioning(void)
{
    struct scsi_lun *lun = ram_lun();
    struct scsi_inquiry_logical_block_provisioning *lbp;
    struct scsi_inquiry_block_limits *bl;
    struct lun_backend *be;
    struct scsi_lun *thick;
    struct sc_datain d;
    uint8_t buf[64];

    g_assert_cmpint(VPD_CHARACTERISTICS(lun, buf, &d)->medium_rotation_rate, ==, 1);  /* non-rotating */
    sc_datain_free(&d);

    lbp = VPD_PROVISIONING(lun, buf, &d);
    g_assert_true(lbp->lbpu && lbp->lbpws && lbp->lbpws10);
    g_assert_true(lbp->lbprz);                                 /* ram zeroes */
    g_assert_cmpint(lbp->provisioning_type, ==, PROVISIONING_TYPE_THIN);
    sc_datain_free(&d);
    scsi_lun_free(lun);

    /* Without discard: nothing advertised, provisioning type full. */
    g_assert_cmpint(backend_ram_new(MiB, 512, &be, NULL), ==, 0);
    be->can_discard = false;
    thick = ready(scsi_lun_new(be, "test:thick", NULL, NULL));
    lbp = VPD_PROVISIONING(thick, buf, &d);
    g_assert_false(lbp->lbpu || lbp->lbpws || lbp->lbpws10 || lbp->lbprz || lbp->anc_sup ||
                   lbp->dp);
    g_assert_cmpint(lbp->provisioning_type, ==, PROVISIONING_TYPE_NONE);
    sc_datain_free(&d);
    bl = VPD_LIMITS(thick, buf, &d);
    g_assert_cmpuint(bl->max_unmap, ==, 0);
    g_assert_cmpuint(bl->max_unmap_bdc, ==, 0);
    sc_datain_free(&d);
    scsi_lun_free(thick);
}

static void test_inquiry_invalid_fields(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[255], cmddt[SC_CDB_MAX];
    unsigned cmddt_len = sc_cdb(scsi_cdb_inquiry(0, 0, 255), cmddt);
    struct sc_sense s;
    struct result r;

    /* A page code without EVPD. */
    r = RUN_IN(lun, scsi_cdb_inquiry(0, SCSI_INQUIRY_PAGECODE_UNIT_SERIAL_NUMBER, 255), buf,
               sizeof(buf));
    s = assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_INVALID_FIELD_IN_CDB);
    /* SKSV with C/D set: the field pointer names CDB byte 2. */
    g_assert_true(s.sksv && s.in_cdb);
    g_assert_cmpuint(s.field, ==, 2);
    r = RUN_IN(lun, scsi_cdb_inquiry(1, 0x89, 255), buf, sizeof(buf));   /* no such page */
    assert_invalid_cdb(&r);
    g_assert_cmpuint(r.in_xfer, ==, 0);
    /* CMDDT (obsolete), which libiscsi's builder has no argument for. */
    cmddt[1] |= 0x02;
    r = run_cdb(lun, cmddt, cmddt_len, NULL, 0, buf, sizeof(buf));
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

/* ---- READ CAPACITY ----------------------------------------------------- */

static void check_capacity(uint64_t size, uint32_t bs, uint32_t want10)
{
    struct scsi_lun *lun = null_lun(size, bs);
    struct scsi_readcapacity10 *rc10;
    struct scsi_readcapacity16 *rc16;
    struct sc_datain d;
    uint8_t buf[32];
    struct result r;

    r = RUN_IN(lun, scsi_cdb_readcapacity10(0, 0), buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 8);
    rc10 = decoded(&d, &r, buf);
    g_assert_cmphex(rc10->lba, ==, want10);
    g_assert_cmpuint(rc10->block_size, ==, bs);
    sc_datain_free(&d);

    r = RUN_IN(lun, scsi_cdb_readcapacity16(), buf, sizeof(buf));   /* allocation length 32 */
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 32);
    rc16 = decoded(&d, &r, buf);
    g_assert_cmpuint(rc16->returned_lba, ==, size / bs - 1);
    g_assert_cmpuint(rc16->block_length, ==, bs);
    g_assert_true(rc16->lbpme);                     /* null can discard */
    sc_datain_free(&d);
    scsi_lun_free(lun);
}

static void test_read_capacity(void)
{
    check_capacity(8 * MiB, 512, 8 * MiB / 512 - 1);
    check_capacity(8 * MiB, 4096, 8 * MiB / 4096 - 1);
    /* 4 TiB of 512-byte blocks does not fit READ CAPACITY(10). */
    check_capacity(4ULL << 40, 512, 0xffffffff);
    check_capacity(4ULL << 40, 4096, (uint32_t)((4ULL << 40) / 4096 - 1));
}

static void test_read_capacity_16_allocation_length(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[32];
    struct result r;

    r = RUN_IN(lun, scsi_cdb_serviceactionin16(SCSI_READCAPACITY16, 12), buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 12);

    /* A service action SERVICE ACTION IN(16) does not have here (11h). */
    r = RUN_IN(lun, scsi_cdb_serviceactionin16((enum scsi_service_action_in)0x11, 32), buf,
               sizeof(buf));
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/scsi-disk/inquiry/standard", test_inquiry_standard);
    g_test_add_func("/scsi-disk/inquiry/allocation-length", test_inquiry_allocation_length_truncates);
    g_test_add_func("/scsi-disk/inquiry/vpd-00", test_inquiry_vpd_supported_pages);
    g_test_add_func("/scsi-disk/inquiry/vpd-80-83", test_inquiry_vpd_identification);
    g_test_add_func("/scsi-disk/inquiry/default-identity", test_inquiry_default_identity_is_stable);
    g_test_add_func("/scsi-disk/inquiry/passthrough-identity", test_inquiry_passthrough_identity);
    g_test_add_func("/scsi-disk/inquiry/vpd-b0", test_inquiry_vpd_block_limits);
    g_test_add_func("/scsi-disk/inquiry/vpd-b1-b2", test_inquiry_vpd_characteristics_and_provisioning);
    g_test_add_func("/scsi-disk/inquiry/invalid", test_inquiry_invalid_fields);
    g_test_add_func("/scsi-disk/read-capacity/values", test_read_capacity);
    g_test_add_func("/scsi-disk/read-capacity/16-allocation", test_read_capacity_16_allocation_length);

    return g_test_run();
}
