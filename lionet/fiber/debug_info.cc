// lionet/fiber/debug_info.cc: see debug_info.h.
#include "lionet/fiber/debug_info.h"

#include <cstddef>
#include <mutex>
#include <string>

#include "lionet/fiber/fiber.h"
#include "lionet/fiber/fiber_registry.h"

namespace lionet::detail {
// Fiber and FiberRegistryShard name it a friend: it reads their private offsets.
struct DebugLayout {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"  // Fiber is polymorphic; GCC and Clang lay it out fixed
  static constexpr uint32_t fiber_id = offsetof(Fiber, id_);
  static constexpr uint32_t fiber_state = offsetof(Fiber, state_);
  static constexpr uint32_t fiber_fctx = offsetof(Fiber, ctx_) + offsetof(ExecutionContext, fctx);
  static constexpr uint32_t fiber_name = offsetof(Fiber, name_);
  static constexpr uint32_t fiber_reg_next = offsetof(Fiber, reg_next_);
  static constexpr uint32_t fiber_worker = offsetof(Fiber, worker_);
  static constexpr uint32_t fiber_wait_word = offsetof(Fiber, wait_) + offsetof(FiberWaitRecord, word);
  static constexpr uint32_t fiber_wait_object = offsetof(Fiber, wait_) + offsetof(FiberWaitRecord, object);
  static constexpr uint32_t shard_head = offsetof(FiberRegistryShard, head_);
  static constexpr uint32_t shard_next = offsetof(FiberRegistryShard, debug_next_);
#pragma GCC diagnostic pop
};
}  // namespace lionet::detail

using lionet::detail::DebugLayout;

// libstdc++'s std::string: the data pointer first, then the size.
static_assert(sizeof(std::string) == 32, "the gdb script reads libstdc++'s std::string layout");

extern "C" {
lionet_debug_info_t lionet_debug_info = {
    .magic = 0x4c4e4442,
    .version = 1,
    .fiber_id = DebugLayout::fiber_id,
    .fiber_state = DebugLayout::fiber_state,
    .fiber_fctx = DebugLayout::fiber_fctx,
    .fiber_name = DebugLayout::fiber_name,
    .fiber_reg_next = DebugLayout::fiber_reg_next,
    .fiber_worker = DebugLayout::fiber_worker,
    .fiber_wait_word = DebugLayout::fiber_wait_word,
    .fiber_wait_object = DebugLayout::fiber_wait_object,
    .state_mask = lionet::Fiber::kStateMask,
    .string_data = 0,
    .string_size = 8,
    .shard_head = DebugLayout::shard_head,
    .shard_next = DebugLayout::shard_next,
    .worker_index = 0xffffffff,
    .n_states = 5,
    .n_wait_kinds = static_cast<uint32_t>(lionet::WaitKind::kCount_),
    .state_names = {"created", "runnable", "running", "parked", "done"},
    .wait_names = {},
    .shards = nullptr,
};
}

namespace lionet::detail {
namespace {
std::mutex& shards_mu() {
  static std::mutex mu;
  return mu;
}
// Fills wait_names from to_string(WaitKind) once (the strings are literals: stable addresses).
struct WaitNames {
  WaitNames() {
    static_assert(static_cast<int>(WaitKind::kCount_) <= 32);
    for (int k = 0; k < static_cast<int>(WaitKind::kCount_); ++k)
      lionet_debug_info.wait_names[k] = to_string(static_cast<WaitKind>(k));
  }
} g_wait_names;
}  // namespace

void debug_info_add_shard(FiberRegistryShard* s) noexcept {
  std::lock_guard<std::mutex> lk(shards_mu());
  s->debug_next_ = lionet_debug_info.shards;
  lionet_debug_info.shards = s;
}

void debug_info_remove_shard(FiberRegistryShard* s) noexcept {
  std::lock_guard<std::mutex> lk(shards_mu());
  FiberRegistryShard* volatile* p = &lionet_debug_info.shards;
  while (*p && *p != s) p = &(*p)->debug_next_;
  if (*p) *p = s->debug_next_;
}
}  // namespace lionet::detail
