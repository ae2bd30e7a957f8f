// lionet/fiber/detail/context.h: the one adapter over the machine's context switch
// (ARCHITECTURE decision 1).
//
// Owns: creating a context on a stack and jumping between contexts, with the sanitizer
// annotations (ASan fake stacks, TSan fiber switches) that make ASan/TSan runs meaningful.
// Must not: decide what runs next (sched/ does), allocate, or throw.
//
// The switch primitive. On x86-64 ELF (Linux, the BSDs) it is LioNet's own, ten instructions in
// context.cc: push the six callee-saved registers, swap stack pointers, pop, `ret`. Elsewhere it
// is Boost.Context's fcontext (jump_fcontext / make_fcontext), the raw primitive under
// boost::context::fiber and callcc (measured by bench/fiber_bench BM_Raw*). Why our own where we
// can: Boost's jump_fcontext leaves through `jmp *%r8`, so every call into it leaves a return
// address on the CPU's return-stack predictor that no `ret` consumes, and the next `ret` of the
// resumed fiber is mispredicted (~5 ns of a ~16 ns yield, measured with perf on BM_FiberSwitch).
// Ours returns with `ret`: when the resumed fiber switched out from the same call site as the
// one leaving (a yield ring, a ping-pong), the prediction is right. It also does not save the
// MXCSR / x87 control words per context (Boost does): fibers share their thread's
// floating-point control state, as in Photon and Go. Not compatible with CET shadow stacks
// (neither is Debian's Boost.Context build). bench/fiber_bench BM_RawLionetRoundTrip measures it
// beside BM_RawFcontextRoundTrip.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lionet::detail {

// What a jump delivers to the context that is resumed: the saved context of whoever jumped
// (to be stored by the receiver into that party's ExecutionContext), and a payload.
struct Transfer {
  void* from_ctx;
  void* data;
};

// The registers a switched-out context resumes with: what an unwinder needs to walk its stack
// (fiber/stack_trace.h). rip is the return address into the code that switched out.
struct SavedRegisters {
  uintptr_t rip, rsp, rbp, rbx, r12, r13, r14, r15;
};
// Reads them from a saved context (ExecutionContext::fctx of a context that is not running and
// not resumed meanwhile). False where the layout is not ours (no LIONET_OWN_SWITCH: Boost's
// fcontext elsewhere), or for a null context.
bool saved_registers(const void* fctx, SavedRegisters& out) noexcept;

// Entry point of a fresh context. Must never return (it ends with jump_final()).
using ContextEntry = void (*)(Transfer);

// A suspended (or running) execution context and what the sanitizers need to know of it.
struct ExecutionContext {
  void* fctx = nullptr;  // saved fcontext_t; valid while suspended
  void* stack_bottom = nullptr;  // lowest usable address of its stack (ASan)
  std::size_t stack_size = 0;
  void* tsan_fiber = nullptr;  // TSan's fiber handle
  void* asan_fake_stack = nullptr;
};

// Prepares `ec` to start in `entry` on [stack_bottom, stack_bottom + size).
void make_context(ExecutionContext& ec, void* stack_bottom, std::size_t size, ContextEntry entry) noexcept;
// Describes the calling thread's own stack as a context that others can jump back to.
void init_thread_context(ExecutionContext& ec) noexcept;
// Releases what make_context() allocated for the sanitizers (nothing in normal builds).
void destroy_context(ExecutionContext& ec) noexcept;

#if defined(LIONET_ASAN) || defined(__SANITIZE_ADDRESS__) || defined(LIONET_TSAN) || defined(__SANITIZE_THREAD__)
#define LIONET_CONTEXT_ANNOTATED 1
#endif
#if defined(__x86_64__) && defined(__ELF__)
#define LIONET_OWN_SWITCH 1
#endif

// The raw primitive: saves the running context, resumes the one saved at `to`, which receives
// {the saved context of the caller, data}. Bound by symbol name, so no header includes Boost:
// context.cc defines lionet_switch_context, or asserts that Transfer has Boost's transfer_t
// layout (two pointers, returned in registers) for jump_fcontext.
#ifdef LIONET_OWN_SWITCH
Transfer raw_switch(void* to, void* data) noexcept __asm__("lionet_switch_context");
#else
Transfer raw_switch(void* to, void* data) noexcept __asm__("jump_fcontext");
#endif

// Suspends the running context `from` and resumes `to` with `data`. Returns when someone jumps
// back to `from`; the returned Transfer names who did. The caller stores from_ctx.
// Like jump(), jump_final() is for a context that will never be resumed (a finished fiber).
// On_context_start() is the first thing a ContextEntry does (sanitizer bookkeeping).
#ifdef LIONET_CONTEXT_ANNOTATED
Transfer jump(ExecutionContext& from, ExecutionContext& to, void* data) noexcept;
[[noreturn]] void jump_final(ExecutionContext& to, void* data) noexcept;
void on_context_start() noexcept;
#else
// Without sanitizers a switch is the raw primitive alone, called inline from the scheduler's
// switch path (measured: an out-of-line wrapper cost ~1 ns of a yield).
inline Transfer jump(ExecutionContext&, ExecutionContext& to, void* data) noexcept { return raw_switch(to.fctx, data); }
[[noreturn]] inline void jump_final(ExecutionContext& to, void* data) noexcept {
  raw_switch(to.fctx, data);
  __builtin_unreachable();
}
inline void on_context_start() noexcept {}
#endif
}  // namespace lionet::detail
