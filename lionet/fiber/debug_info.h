// lionet/fiber/debug_info.h: a fixed-layout description of LioNet's fiber records, for
// debuggers that read a live process or a core file without debug info (scripts/gdb/lionet.py).
//
// Owns: the global `lionet_debug_info` (a C symbol, so gdb finds it in any build) and the list
// of every fiber registry shard it points at. Must not: change layout without bumping
// `version` (the gdb script checks it).
//
// What a debugger does with it: walk `shards` (linked through shard_next), and in each shard
// the fibers from shard_head through fiber_reg_next; read each fiber's id, state, name (a
// libstdc++ std::string: data pointer, size), wait word (kind in the low byte: wait_names),
// worker (a Worker*, whose index is at worker_index) and saved context (fiber_fctx: the stack
// pointer of a switched-out fiber, at which fiber/detail/context.cc's switch saved
// [r15 r14 r13 r12 rbx rbp return-address]). Offsets are in bytes. A debugger reads a stopped
// process or a core, so it needs none of the registry's locks.
#pragma once

#include <cstdint>

namespace lionet {
class FiberRegistryShard;
}

extern "C" {
struct lionet_debug_info_t {
  uint32_t magic;  // 0x4c4e4442 ("LNDB")
  uint32_t version;  // 1
  uint32_t fiber_id, fiber_state, fiber_fctx, fiber_name, fiber_reg_next, fiber_worker, fiber_wait_word,
      fiber_wait_object;
  uint32_t state_mask;  // state word & state_mask = FiberState
  uint32_t string_data, string_size;  // std::string
  uint32_t shard_head, shard_next;  // FiberRegistryShard
  uint32_t worker_index;  // set by sched/ (0xffffffff until a Scheduler exists)
  uint32_t n_states, n_wait_kinds;
  const char* state_names[8];
  const char* wait_names[32];
  lionet::FiberRegistryShard* volatile shards;  // every live shard, newest first
};
extern lionet_debug_info_t lionet_debug_info;
}

namespace lionet::detail {
struct DebugLayout;
// FiberRegistryShard's constructor and destructor (fiber_registry.h): keep `shards` current.
void debug_info_add_shard(FiberRegistryShard* s) noexcept;
void debug_info_remove_shard(FiberRegistryShard* s) noexcept;
}  // namespace lionet::detail
