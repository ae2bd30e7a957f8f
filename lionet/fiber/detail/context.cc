// lionet/fiber/detail/context.cc: the context-switch adapter; see context.h. The only file that includes Boost.Context.
#include "lionet/fiber/detail/context.h"

#include <pthread.h>

#include <cstddef>
#include <cstdint>

#include <boost/context/detail/fcontext.hpp>

#if defined(LIONET_ASAN) || defined(__SANITIZE_ADDRESS__)
#define LIONET_ANNOTATE_ASAN 1
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(LIONET_TSAN) || defined(__SANITIZE_THREAD__)
#define LIONET_ANNOTATE_TSAN 1
#include <sanitizer/tsan_interface.h>
#endif

namespace bctx = boost::context::detail;

#ifdef LIONET_OWN_SWITCH
// x86-64 System V. lionet_switch_context(to /*rdi*/, data /*rsi*/) -> {rax: the caller's saved
// stack pointer, rdx: data}. A saved context is a stack pointer at
//   [r15 r14 r13 r12 rbx rbp return-address]
// so resuming it is: pop six registers, `ret`. A fresh context (make_context) holds the entry in
// the rbx slot and lionet_context_start as its return address, with the stack pointer after that
// `ret` 16-byte aligned, so the `call` below enters the entry as the ABI wants (rsp+8 aligned).
asm(R"(
    .text
    .globl  lionet_switch_context
    .hidden lionet_switch_context
    .type   lionet_switch_context, @function
    .p2align 4
lionet_switch_context:
    .cfi_startproc
    pushq   %rbp
    pushq   %rbx
    pushq   %r12
    pushq   %r13
    pushq   %r14
    pushq   %r15
    movq    %rsp, %rax
    movq    %rdi, %rsp
    popq    %r15
    popq    %r14
    popq    %r13
    popq    %r12
    popq    %rbx
    popq    %rbp
    movq    %rsi, %rdx
    ret
    .cfi_endproc
    .size   lionet_switch_context, .-lionet_switch_context

    .globl  lionet_context_start
    .hidden lionet_context_start
    .type   lionet_context_start, @function
    .p2align 4
lionet_context_start:
    .cfi_startproc
    .cfi_undefined rip
    movq    %rax, %rdi
    movq    %rdx, %rsi
    callq   *%rbx
    ud2
    .cfi_endproc
    .size   lionet_context_start, .-lionet_context_start
)");
extern "C" void lionet_context_start();
#endif

namespace lionet::detail {

// Transfer is transfer_t under another name (so no header outside this file includes Boost).
static_assert(sizeof(Transfer) == sizeof(bctx::transfer_t) && alignof(Transfer) == alignof(bctx::transfer_t));
static_assert(offsetof(Transfer, from_ctx) == offsetof(bctx::transfer_t, fctx) &&
              offsetof(Transfer, data) == offsetof(bctx::transfer_t, data));

// The context lies on its fiber's stack: ASan may have poisoned it around returned frames, and
// TSan cannot see the order the fiber dump's protocol gives it (scheduler.cc protocol 11).
__attribute__((no_sanitize("address", "thread"))) bool saved_registers(const void* fctx, SavedRegisters& out) noexcept {
#ifdef LIONET_OWN_SWITCH
  if (!fctx) return false;
  // [r15 r14 r13 r12 rbx rbp return-address], then the stack the `ret` returns to.
  const auto* w = static_cast<const uintptr_t*>(fctx);
  out.r15 = w[0];
  out.r14 = w[1];
  out.r13 = w[2];
  out.r12 = w[3];
  out.rbx = w[4];
  out.rbp = w[5];
  out.rip = w[6];
  out.rsp = reinterpret_cast<uintptr_t>(w + 7);
  return true;
#else
  (void)fctx;
  (void)out;
  return false;
#endif
}

void make_context(ExecutionContext& ec, void* stack_bottom, std::size_t size, ContextEntry entry) noexcept {
  // fcontext wants the top of the stack (it grows down on every platform Boost supports here).
  // The entry takes a Transfer, which has transfer_t's exact layout (asserted above), so the
  // calling convention is the same.
#ifdef LIONET_OWN_SWITCH
  auto top = reinterpret_cast<uintptr_t>(stack_bottom) + size;
  top &= ~uintptr_t{15};
  auto* frame = reinterpret_cast<void**>(top) - 7;  // six registers and a return address
  for (int i = 0; i < 6; ++i) frame[i] = nullptr;
  frame[4] = reinterpret_cast<void*>(entry);  // rbx
  frame[6] = reinterpret_cast<void*>(&lionet_context_start);
  ec.fctx = frame;
#else
  ec.fctx = bctx::make_fcontext(static_cast<char*>(stack_bottom) + size, size,
                                reinterpret_cast<void (*)(bctx::transfer_t)>(reinterpret_cast<void (*)()>(entry)));
#endif
  ec.stack_bottom = stack_bottom;
  ec.stack_size = size;
#ifdef LIONET_ANNOTATE_TSAN
  if (!ec.tsan_fiber) ec.tsan_fiber = __tsan_create_fiber(0);
#endif
}

void init_thread_context(ExecutionContext& ec) noexcept {
  ec.fctx = nullptr;  // filled in by the first jump away from this thread's stack
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    void* addr = nullptr;
    std::size_t size = 0;
    pthread_attr_getstack(&attr, &addr, &size);
    ec.stack_bottom = addr;
    ec.stack_size = size;
    pthread_attr_destroy(&attr);
  }
#ifdef LIONET_ANNOTATE_TSAN
  ec.tsan_fiber = __tsan_get_current_fiber();
#endif
}

void destroy_context(ExecutionContext& ec) noexcept {
#ifdef LIONET_ANNOTATE_TSAN
  if (ec.tsan_fiber) __tsan_destroy_fiber(ec.tsan_fiber);
  ec.tsan_fiber = nullptr;
#endif
  ec.fctx = nullptr;
}

#ifdef LIONET_CONTEXT_ANNOTATED
Transfer jump(ExecutionContext& from, ExecutionContext& to, void* data) noexcept {
#ifdef LIONET_ANNOTATE_ASAN
  __sanitizer_start_switch_fiber(&from.asan_fake_stack, to.stack_bottom, to.stack_size);
#endif
#ifdef LIONET_ANNOTATE_TSAN
  __tsan_switch_to_fiber(to.tsan_fiber, 0);
#endif
  const Transfer t = raw_switch(to.fctx, data);
#ifdef LIONET_ANNOTATE_ASAN
  __sanitizer_finish_switch_fiber(from.asan_fake_stack, nullptr, nullptr);
#endif
  return t;
}

void jump_final(ExecutionContext& to, void* data) noexcept {
#ifdef LIONET_ANNOTATE_ASAN
  // A null save slot tells ASan the current fiber's fake stack can be destroyed.
  __sanitizer_start_switch_fiber(nullptr, to.stack_bottom, to.stack_size);
#endif
#ifdef LIONET_ANNOTATE_TSAN
  __tsan_switch_to_fiber(to.tsan_fiber, 0);
#endif
  raw_switch(to.fctx, data);
  __builtin_unreachable();
}

void on_context_start() noexcept {
#ifdef LIONET_ANNOTATE_ASAN
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
}
#endif  // LIONET_CONTEXT_ANNOTATED
}  // namespace lionet::detail
