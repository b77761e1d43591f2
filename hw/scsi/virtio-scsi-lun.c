/*
 * The LUN field of virtio-scsi (virtio 1.2 5.6.6.1): the single-level
 * structure 01h, target, then the LUN in flat or peripheral addressing
 * (or the REPORT LUNS well-known LUN C101h), four zero bytes.  Decoded for
 * the request queues and the control queue, encoded for the event queue;
 * the bottom of the layer, calling nothing of it.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>

#include "virtio-scsi-int.h"

int vscsi_decode_lun(const uint8_t lun[8], unsigned *target, unsigned *lun_id)
{
    if (lun[0] != 1) {
        return -EINVAL;
    }
    *target = lun[1];
    if (lun[2] == 0xc1 && lun[3] == 0x01 && !lun[4] && !lun[5] && !lun[6] && !lun[7]) {
        *lun_id = 0;
        return 1;
    }
    /* Single-level, flat (01b) or peripheral (00b with LUN < 256) addressing. */
    if ((lun[2] & 0xc0) != 0x40 && (lun[2] & 0xc0) != 0x00) {
        return -EINVAL;
    }
    if ((lun[2] & 0xc0) == 0x00 && lun[2] != 0) {
        return -EINVAL;
    }
    if (lun[4] || lun[5] || lun[6] || lun[7]) {
        return -EINVAL;
    }
    *lun_id = ((unsigned)(lun[2] & 0x3f) << 8) | lun[3];
    return 0;
}


void vscsi_encode_lun(uint8_t lun[8], unsigned target, unsigned lun_id)
{
    /*
     * The LUN as REPORT LUNS lists it (peripheral addressing below 256,
     * flat above): Linux takes bytes 2-3 as its LUN number as they are,
     * so 40h|0 for LUN 2 would make it scan LUN 16386.  QEMU does the same.
     */
    lun[0] = 1;
    lun[1] = (uint8_t)target;
    lun[2] = lun_id < 256 ? 0 : 0x40 | (uint8_t)(lun_id >> 8);
    lun[3] = (uint8_t)lun_id;
    lun[4] = lun[5] = lun[6] = lun[7] = 0;
}
