/*
 * The program tests/package-test.sh builds against the installed
 * libvhost-scsi-frontend-dev (pkg-config vhost-scsi-frontend, in a
 * throwaway root) and runs against the installed daemon: it includes the
 * public header first and alone (so the header must be self-contained),
 * prints the library's version, opens a vhost-user front-end on SOCKET and
 * sends TEST UNIT READY and INQUIRY to LUN 0.  Exit 0 when both complete
 * with GOOD status (TEST UNIT READY after the power-on unit attention a
 * new nexus first gets) and INQUIRY names a direct-access device.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <vhost-frontend.h>

#include <stdio.h>
#include <string.h>

static int run(struct vfe *fe, const uint8_t *cdb, size_t cdb_len, void *data, uint32_t len,
               const char *what, bool quiet)
{
    struct vfe_req req = { .queue = 0, .data = data, .data_len = len, .data_in = len > 0 };
    vfe_lun(req.lun, 0, 0);
    memcpy(req.cdb, cdb, cdb_len);
    int ret = vfe_exec(fe, &req, 10000);
    if (ret < 0 || req.resp.response != VIRTIO_SCSI_S_OK || req.resp.status != 0) {
        if (!quiet) {
            fprintf(stderr, "%s: ret %d response %u status 0x%x\n", what, ret,
                    req.resp.response, req.resp.status);
        }
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: frontend-smoke SOCKET\n");
        return 2;
    }
    printf("libvhost-scsi-frontend %s\n", vfe_version());
    struct vfe_config cfg = { .transport = VFE_VHOST_USER, .path = argv[1],
                              .num_request_queues = 1 };
    struct vfe *fe;
    int ret = vfe_open(&cfg, &fe);
    if (ret < 0) {
        fprintf(stderr, "vfe_open %s: %d\n", argv[1], ret);
        return 1;
    }
    static const uint8_t tur[6] = { 0x00 };
    static const uint8_t inquiry[6] = { 0x12, 0, 0, 0, 96, 0 };
    uint8_t *buf = vfe_alloc(fe, 96, 8);
    int rc = 1;
    /* The first command of a new I_T nexus reports the power-on unit attention. */
    bool ready = run(fe, tur, sizeof(tur), NULL, 0, "TEST UNIT READY", true) == 0 ||
                 run(fe, tur, sizeof(tur), NULL, 0, "TEST UNIT READY", false) == 0;
    if (buf && ready && run(fe, inquiry, sizeof(inquiry), buf, 96, "INQUIRY", false) == 0 &&
        (buf[0] & 0x1f) == 0) {
        printf("LUN 0: TEST UNIT READY good, INQUIRY %.8s %.16s\n", buf + 8, buf + 16);
        rc = 0;
    }
    vfe_close(fe);
    return rc;
}
