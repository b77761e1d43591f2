/*
 * The LUNs a target daemon exposes, addressed as virtio-scsi does
 * (single-level LUN structure: target 0-255, LUN 0-16383).  Built once at
 * start-up and read-only afterwards, so request threads look LUNs up
 * without locks.  Several front-end connections share one map, like
 * several initiators logged in to one LIO target.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_LUN_MAP_H
#define VHOST_SCSI_LUN_MAP_H

#include <stdbool.h>
#include <stdint.h>

#include "scsi-disk.h"

#define LUN_MAP_MAX_TARGET 255
#define LUN_MAP_MAX_LUN 16383

struct lun_map_entry {
    uint8_t target;
    uint16_t lun;
    struct scsi_lun *l;
};

struct lun_map {
    unsigned n;
    struct lun_map_entry *e;   /* sorted by (target, lun) */
};

void lun_map_init(struct lun_map *m);
/* Takes ownership of l. -EEXIST for a duplicate id, -EINVAL out of range. */
int lun_map_add(struct lun_map *m, unsigned target, unsigned lun, struct scsi_lun *l);
void lun_map_clear(struct lun_map *m);   /* frees every LUN */
struct scsi_lun *lun_map_find(const struct lun_map *m, unsigned target, unsigned lun);
/* The entry's index in e[] (stable once the map is built), or -1. */
int lun_map_index(const struct lun_map *m, unsigned target, unsigned lun);
bool lun_map_has_target(const struct lun_map *m, unsigned target);
/* Fills ids with the LUNs of target (up to max); returns how many exist. */
unsigned lun_map_target_luns(const struct lun_map *m, unsigned target,
                             uint16_t *ids, unsigned max);

#endif
