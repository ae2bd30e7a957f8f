// lionet/fiber/detail/context.h: the one adapter over Boost.Context (ARCHITECTURE decision 1).
//
// Owns: creating a context on a stack and jumping between contexts, with the sanitizer
// annotations (ASan fake stacks, TSan fiber switches) that make ASan/TSan runs meaningful.
// Must not: decide what runs next (sched/ does), allocate, or throw.
//
// Choice of Boost.Context API (measured by bench/fiber_bench BM_Raw*, see bench/RESULTS.md):
// fcontext (jump_fcontext / make_fcontext) is the raw primitive under both
// boost::context::fiber and callcc; it does no allocation and no bookkeeping, so it is the
// fastest of the three and the one used here.
#pragma once

#include <cstddef>

namespace lionet::detail {

// What a jump delivers to the context that is resumed: the saved context of whoever jumped
// (to be stored by the receiver into that party's ExecutionContext), and a payload.
struct Transfer {
  void* from_ctx;
  void* data;
};

// Entry point of a fresh context. Must never return (it ends with jump_final()).
using ContextEntry = void (*)(Transfer);

// A suspended (or running) execution context and what the sanitizers need to know of it.
struct ExecutionContext {
  void* fctx = nullptr;          // saved fcontext_t; valid while suspended
  void* stack_bottom = nullptr;  // lowest usable address of its stack (ASan)
  std::size_t stack_size = 0;
  void* tsan_fiber = nullptr;    // TSan's fiber handle
  void* asan_fake_stack = nullptr;
};

// Prepares `ec` to start in `entry` on [stack_bottom, stack_bottom + size).
void make_context(ExecutionContext& ec, void* stack_bottom, std::size_t size, ContextEntry entry) noexcept;
// Describes the calling thread's own stack as a context that others can jump back to.
void init_thread_context(ExecutionContext& ec) noexcept;
// Releases what make_context() allocated for the sanitizers (nothing in normal builds).
void destroy_context(ExecutionContext& ec) noexcept;

// Suspends the running context `from` and resumes `to` with `data`. Returns when someone jumps
// back to `from`; the returned Transfer names who did. The caller stores from_ctx.
Transfer jump(ExecutionContext& from, ExecutionContext& to, void* data) noexcept;
// Like jump(), for a context that will never be resumed (a finished fiber).
[[noreturn]] void jump_final(ExecutionContext& to, void* data) noexcept;
// First thing a ContextEntry does (sanitizer bookkeeping for the first switch in).
void on_context_start() noexcept;
}  // namespace lionet::detail
