// The Boost.Context adapter; see context.h. The only file that includes Boost.Context.
#include "lionet/fiber/detail/context.h"

#include <pthread.h>

#include <cstddef>

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

namespace lionet::detail {

// Transfer is transfer_t under another name (so no header outside this file includes Boost).
static_assert(sizeof(Transfer) == sizeof(bctx::transfer_t) && alignof(Transfer) == alignof(bctx::transfer_t));
static_assert(offsetof(Transfer, from_ctx) == offsetof(bctx::transfer_t, fctx) &&
              offsetof(Transfer, data) == offsetof(bctx::transfer_t, data));

void make_context(ExecutionContext& ec, void* stack_bottom, std::size_t size, ContextEntry entry) noexcept {
  // fcontext wants the top of the stack (it grows down on every platform Boost supports here).
  // The entry takes a Transfer, which has transfer_t's exact layout (asserted above), so the
  // calling convention is the same.
  ec.fctx = bctx::make_fcontext(static_cast<char*>(stack_bottom) + size, size,
                                reinterpret_cast<void (*)(bctx::transfer_t)>(reinterpret_cast<void (*)()>(entry)));
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

Transfer jump(ExecutionContext& from, ExecutionContext& to, void* data) noexcept {
#ifdef LIONET_ANNOTATE_ASAN
  __sanitizer_start_switch_fiber(&from.asan_fake_stack, to.stack_bottom, to.stack_size);
#endif
#ifdef LIONET_ANNOTATE_TSAN
  __tsan_switch_to_fiber(to.tsan_fiber, 0);
#endif
  bctx::transfer_t t = bctx::jump_fcontext(to.fctx, data);
#ifdef LIONET_ANNOTATE_ASAN
  __sanitizer_finish_switch_fiber(from.asan_fake_stack, nullptr, nullptr);
#endif
  return Transfer{t.fctx, t.data};
}

void jump_final(ExecutionContext& to, void* data) noexcept {
#ifdef LIONET_ANNOTATE_ASAN
  // A null save slot tells ASan the current fiber's fake stack can be destroyed.
  __sanitizer_start_switch_fiber(nullptr, to.stack_bottom, to.stack_size);
#endif
#ifdef LIONET_ANNOTATE_TSAN
  __tsan_switch_to_fiber(to.tsan_fiber, 0);
#endif
  bctx::jump_fcontext(to.fctx, data);
  __builtin_unreachable();
}

void on_context_start() noexcept {
#ifdef LIONET_ANNOTATE_ASAN
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
}
}  // namespace lionet::detail
