/*
 * The daemon's LUN table (include/scsi/lun-map.h): a sorted array searched with
 * bsearch, immutable once the request threads run.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdlib.h>

#include <glib.h>

#include "lun-map.h"

static int entry_cmp(const void *a, const void *b)
{
    const struct lun_map_entry *x = a, *y = b;
    unsigned kx = (unsigned)x->target << 16 | x->lun;
    unsigned ky = (unsigned)y->target << 16 | y->lun;

    return kx < ky ? -1 : kx > ky;
}

void lun_map_init(struct lun_map *m)
{
    m->n = 0;
    m->e = NULL;
}

int lun_map_add(struct lun_map *m, unsigned target, unsigned lun, struct scsi_lun *l)
{
    if (target > LUN_MAP_MAX_TARGET || lun > LUN_MAP_MAX_LUN) {
        scsi_lun_free(l);
        return -EINVAL;
    }
    if (lun_map_find(m, target, lun)) {
        scsi_lun_free(l);
        return -EEXIST;
    }
    m->e = g_renew(struct lun_map_entry, m->e, m->n + 1);
    m->e[m->n++] = (struct lun_map_entry){ .target = target, .lun = lun, .l = l };
    qsort(m->e, m->n, sizeof(*m->e), entry_cmp);
    return 0;
}

void lun_map_clear(struct lun_map *m)
{
    for (unsigned i = 0; i < m->n; i++) {
        scsi_lun_free(m->e[i].l);
    }
    g_free(m->e);
    lun_map_init(m);
}

int lun_map_index(const struct lun_map *m, unsigned target, unsigned lun)
{
    struct lun_map_entry key = { .target = target, .lun = lun };
    struct lun_map_entry *e;

    if (target > LUN_MAP_MAX_TARGET || lun > LUN_MAP_MAX_LUN || !m->n) {
        return -1;
    }
    e = bsearch(&key, m->e, m->n, sizeof(*m->e), entry_cmp);
    return e ? (int)(e - m->e) : -1;
}

struct scsi_lun *lun_map_find(const struct lun_map *m, unsigned target, unsigned lun)
{
    int i = lun_map_index(m, target, lun);

    return i < 0 ? NULL : m->e[i].l;
}

bool lun_map_has_target(const struct lun_map *m, unsigned target)
{
    for (unsigned i = 0; i < m->n; i++) {
        if (m->e[i].target == target) {
            return true;
        }
    }
    return false;
}

unsigned lun_map_target_luns(const struct lun_map *m, unsigned target,
                             uint16_t *ids, unsigned max)
{
    unsigned n = 0;

    for (unsigned i = 0; i < m->n; i++) {
        if (m->e[i].target == target) {
            if (n < max) {
                ids[n] = m->e[i].lun;
            }
            n++;
        }
    }
    return n;
}
