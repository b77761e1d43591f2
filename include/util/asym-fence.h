/*
 * The asymmetric fence of per-thread counters (the write range lock and
 * the drain accounting of hw/scsi): a counter that only its thread writes
 * is counted with a plain store and a compiler barrier, then a shared flag
 * is read; the rare side stores the flag and then calls membarrier(2),
 * which makes every running thread of the process execute a full barrier,
 * before it sums the counters.  Dekker either way: the sum sees the count,
 * or the counting thread sees the flag.  Where membarrier is refused (old
 * kernel, a filter) both sides use sequentially consistent operations.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_ASYM_FENCE_H
#define VHOST_SCSI_ASYM_FENCE_H

#include <errno.h>
#include <linux/membarrier.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Registers the process (idempotent); false: the fast side must use atomics. */
static inline bool asym_fence_register(void)
{
    return syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

/*
 * The fast side: adds d to *n, then reads *flag.  With asym, *n must have
 * this thread as its only writer; without it, any thread may share it.
 */
static inline unsigned asym_add_then_read(_Atomic uint64_t *n, int64_t d, bool asym,
                                          atomic_uint *flag)
{
    if (asym) {
        atomic_store_explicit(n, atomic_load_explicit(n, memory_order_relaxed) + (uint64_t)d,
                              memory_order_relaxed);
        /* The other half of the fence is the rare side's asym_fence_heavy. */
        atomic_signal_fence(memory_order_seq_cst);
        return atomic_load_explicit(flag, memory_order_relaxed);
    }
    atomic_fetch_add(n, (uint64_t)d);
    return atomic_load(flag);
}

/*
 * The rare side, between its store of the flag and its reads of the
 * counters.  0, or -errno if membarrier failed after registering (the
 * counts cannot be trusted then).
 */
static inline int asym_fence_heavy(bool asym)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (asym && syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) < 0) {
        return -errno;
    }
    return 0;
}

#endif
