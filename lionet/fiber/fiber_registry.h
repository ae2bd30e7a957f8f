// lionet/fiber/fiber_registry.h: one shard of the registry of live fibers that fiber dumps
// walk (sched/fiber_dump.h).
//
// Owns: FiberRegistryShard, a SpinLock-protected intrusive doubly linked list threaded through
// Fiber::reg_prev_/reg_next_. Must not: allocate, or be held across anything but a few field
// copies (it is a SpinLock: see base/spinlock.h).
//
// sched/ keeps one shard per worker plus one for spawns from outside threads, inserts a fiber
// when it is submitted and removes it when it finishes, before anything can free it. A fiber
// is removed from the shard it was inserted into (Fiber::reg_shard_), whichever worker it ends
// on, so removal may contend with that shard's owner (rarely: only migrated fibers).
// Memory safety for readers: a fiber's memory outlives its membership (removal happens under
// the same lock the reader holds), so for_each() callbacks may read any field of a listed
// fiber, but only atomics, const fields and the name (written before insertion or under this
// lock by Fiber::set_name).
#pragma once

#include <cstddef>
#include <mutex>

#include "lionet/base/spinlock.h"
#include "lionet/fiber/fiber.h"

namespace lionet {

class FiberRegistryShard {
 public:
  FiberRegistryShard() = default;
  FiberRegistryShard(const FiberRegistryShard&) = delete;
  FiberRegistryShard& operator=(const FiberRegistryShard&) = delete;

  // Any thread. f must not be in any shard.
  void insert(Fiber* f) noexcept {
    std::lock_guard<SpinLock> lk(mu_);
    f->reg_shard_ = this;
    f->reg_prev_ = nullptr;
    f->reg_next_ = head_;
    if (head_) head_->reg_prev_ = f;
    head_ = f;
    ++size_;
  }

  // Any thread; removes f from the shard it was inserted into. No-op if it is in none.
  static void remove(Fiber* f) noexcept {
    // Written by insert() before f became visible to other threads (the run queue publishes
    // it); f's own set_name() reads it, but f has finished by the time it is removed.
    FiberRegistryShard* s = f->reg_shard_;
    if (!s) return;
    std::lock_guard<SpinLock> lk(s->mu_);
    (f->reg_prev_ ? f->reg_prev_->reg_next_ : s->head_) = f->reg_next_;
    if (f->reg_next_) f->reg_next_->reg_prev_ = f->reg_prev_;
    f->reg_prev_ = f->reg_next_ = nullptr;
    f->reg_shard_ = nullptr;  // the fiber has finished: no set_name() can race with this
    --s->size_;
  }

  // Calls fn(const Fiber&) for every fiber in the shard, holding the shard's lock: fn must
  // only copy fields (no allocation, no blocking). Stops early if fn returns false.
  template <class Fn>
  void for_each(Fn&& fn) const noexcept {
    std::lock_guard<SpinLock> lk(mu_);
    for (const Fiber* f = head_; f; f = f->reg_next_)
      if (!fn(*f)) break;
  }

  // Fibers in the shard right now (stale once returned).
  std::size_t size() const noexcept {
    std::lock_guard<SpinLock> lk(mu_);
    return size_;
  }

  SpinLock& lock() const noexcept { return mu_; }

 private:
  mutable SpinLock mu_;
  Fiber* head_ = nullptr;  // guarded by mu_
  std::size_t size_ = 0;   // guarded by mu_
};
}  // namespace lionet
