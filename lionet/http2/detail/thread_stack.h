// lionet/http2/detail/thread_stack.h: a thread's stack of objects done with, for reuse on that
// thread (a worker): the last given back is the next taken, so it is still in this CPU's cache
// whichever connection used it before. Used for stream objects (server.cc) and output buffers
// (output.cc). Internal to http2/.
//
// At most N objects are kept a thread; more are deleted, and so is the stack at thread exit (an
// object given back after that is deleted at once). An object may be taken on one thread and
// given back on another (a fiber moved between workers): it joins the second thread's stack.
// Not lock-free across threads: each thread touches only its own stack.
#pragma once

#include <cstddef>
#include <memory>

namespace lionet::http2::detail {

template <class T, std::size_t N>
class ThreadStack {
 public:
  // The object given back last on this thread, or null.
  static std::unique_ptr<T> take() noexcept {
    if (gone) return nullptr;
    Stack& s = stack();
    return s.n == 0 ? nullptr : std::move(s.items[--s.n]);
  }
  // Kept for this thread's next take(), or deleted when N are kept already.
  static void give(std::unique_ptr<T> p) noexcept {
    if (gone) return;
    Stack& s = stack();
    if (s.n < N) s.items[s.n++] = std::move(p);
  }

 private:
  struct Stack {
    std::unique_ptr<T> items[N];
    std::size_t n = 0;
    ~Stack() { gone = true; }  // items are deleted after this
  };
  // Not inlined: a caller that waits between take() and give() may go on on another worker,
  // and a thread_local's address computed before the wait must not be reused after it.
  [[gnu::noinline]] static Stack& stack() noexcept {
    static thread_local Stack s;
    return s;
  }
  static inline thread_local bool gone = false;  // trivially destructible: readable to the end
};

}  // namespace lionet::http2::detail
