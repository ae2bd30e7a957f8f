// lionet/fiber/fiber_registry.cc: the reader side of kOwnerBiased shards: membarrier(2); see fiber_registry.h.
#include "lionet/fiber/fiber_registry.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace lionet {
namespace {
// MEMBARRIER_CMD_PRIVATE_EXPEDITED needs the process to register once. Either way the answer is
// fixed for the process's life (thread-safe static), so owners and readers always agree on
// which pair of barriers is in use.
bool register_membarrier() noexcept {
  const long cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) return false;
  return syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}
}  // namespace

bool FiberRegistryShard::membarrier_ok() noexcept {
  static const bool ok = register_membarrier();
  return ok;
}

void FiberRegistryShard::heavy_barrier() noexcept {
  if (membarrier_ok() && syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) return;
  // Without membarrier the owners fence themselves (owner_barrier), so a fence here completes
  // the pair. (A failing call after a successful registration does not happen; if it did, the
  // fence alone would not be enough, so it is treated as fatal.)
  LIONET_CHECK(!membarrier_ok(), "membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) failed after registration");
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
}  // namespace lionet
