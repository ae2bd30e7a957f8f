// lionet/base/asymmetric_barrier.cc: membarrier(2) registration and the heavy side; see the header.
#include "lionet/base/asymmetric_barrier.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace lionet {
namespace {
// MEMBARRIER_CMD_PRIVATE_EXPEDITED needs the process to register once.
bool register_membarrier() noexcept {
  const long cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) return false;
  return syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}
}  // namespace

namespace detail {
bool g_membarrier_ok = false;
namespace {
// Registration must precede every use of the cheap side; static initialization does it before
// main() and before any scheduler can exist.
[[maybe_unused]] const bool g_registered = (g_membarrier_ok = register_membarrier());
}  // namespace
}  // namespace detail

void heavy_barrier() noexcept {
  if (membarrier_ok() && syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) return;
  // Without membarrier the frequent side fences itself, so a fence here completes the pair. (A
  // failing call after a successful registration does not happen; if it did, the fence alone
  // would not be enough, so it is treated as fatal.)
  LIONET_CHECK(!membarrier_ok(), "membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) failed after registration");
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
}  // namespace lionet
