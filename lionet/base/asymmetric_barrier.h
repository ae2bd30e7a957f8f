// lionet/base/asymmetric_barrier.h: the asymmetric Dekker pair (liburcu's membarrier flavour,
// folly's asymmetricHeavyBarrier): a frequent side that pays a compiler barrier and a rare side
// that pays membarrier(2) (MEMBARRIER_CMD_PRIVATE_EXPEDITED: a full barrier on every CPU running
// a thread of this process). Either each side's store before its load is seen by the other,
// with no fence on the frequent side. Used by the fiber registry (owners vs. dump readers) and
// by cancellation (waiting fibers vs. cancellers, sched/cancel.h).
//
// Where membarrier is unavailable (kernel < 4.14, a seccomp filter) the frequent side fences
// itself (one mfence) and the rare side fences too. The answer is fixed for the process's life,
// so both sides always agree on which pair is in use.
#pragma once

#include <atomic>

#include "lionet/base/macros.h"

namespace lionet {
namespace detail {
// Set once, during static initialization (asymmetric_barrier.cc registers with membarrier(2)
// then), before any thread of ours runs; read with a plain load on the frequent side.
extern bool g_membarrier_ok;
}  // namespace detail

// True if the pair is asymmetric (membarrier registered).
inline bool membarrier_ok() noexcept { return detail::g_membarrier_ok; }

// The frequent side: a compiler barrier when membarrier works, else a full fence. (Before the
// static initializer ran, a fence: stronger, so still correct against either heavy side.)
inline void light_barrier() noexcept {
  if (LIONET_LIKELY(membarrier_ok())) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
}

// The rare side: membarrier(2) (a few microseconds: an IPI to the CPUs running our threads), or
// a fence when the frequent side fences itself.
void heavy_barrier() noexcept;
}  // namespace lionet
