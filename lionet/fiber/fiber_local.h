// lionet/fiber/fiber_local.h: FiberLocal<T>, a variable with one instance per fiber
// (the fiber counterpart of thread_local, which is wrong inside fibers: see fiber.h).
//
// Each FiberLocal takes a process-wide slot index; the value is created on first access in a
// fiber (default-constructed) and destroyed with the fiber. Outside fibers, the thread's own
// instance is used. Access costs a vector index plus the current_fiber() call.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include "lionet/fiber/fiber.h"

namespace lionet {
namespace detail {
std::size_t allocate_fiber_local_slot() noexcept;
}

template <class T>
class FiberLocal {
 public:
  FiberLocal() : slot_(detail::allocate_fiber_local_slot()) {}
  FiberLocal(const FiberLocal&) = delete;
  FiberLocal& operator=(const FiberLocal&) = delete;

  T& get() {
    Fiber* f = current_fiber();
    if (!f) {
      // Plain thread: one instance per (thread, FiberLocal), indexed by slot.
      thread_local std::vector<std::unique_ptr<T>> thread_values;
      if (thread_values.size() <= slot_) thread_values.resize(slot_ + 1);
      if (!thread_values[slot_]) thread_values[slot_] = std::make_unique<T>();
      return *thread_values[slot_];
    }
    void* p = f->local(slot_);
    if (!p) {
      p = new T();
      f->set_local(slot_, p, [](void* v) { delete static_cast<T*>(v); });
    }
    return *static_cast<T*>(p);
  }
  T* operator->() { return &get(); }
  T& operator*() { return get(); }

 private:
  std::size_t slot_;
};
}  // namespace lionet
