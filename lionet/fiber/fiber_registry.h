// lionet/fiber/fiber_registry.h: one shard of the registry of live fibers that fiber dumps
// walk (sched/fiber_dump.h).
//
// Owns: FiberRegistryShard, an intrusive doubly linked list threaded through
// Fiber::reg_prev_/reg_next_, and the lock that lets readers copy it. Must not: allocate, or be
// held across anything but a few field copies.
//
// Two kinds of shard:
// - kLocked: a SpinLock taken by every insert, remove and reader (sched/'s shard for spawns
//   from outside threads).
// - kOwnerBiased (one per worker): only its owner thread inserts and removes, with no atomic
//   read-modify-write: it announces itself with a plain store (owner_in_), and a reader, which
//   is rare (a dump), announces itself (reader_in_) and then issues membarrier(2)
//   (MEMBARRIER_CMD_PRIVATE_EXPEDITED): a full barrier on every thread of the process, so either
//   the reader sees the owner inside and waits, or the owner's next look at reader_in_ sees the
//   reader and waits (the asymmetric Dekker pair of liburcu's membarrier flavour and folly's
//   asymmetricHeavyBarrier). Measured: the two SpinLock acquisitions per fiber (insert at spawn,
//   remove at exit) were 8% of spawn+run+join. Where membarrier is unavailable (kernel < 4.14, a
//   seccomp filter) the owner uses a seq_cst fence instead (one mfence per insert/remove); under
//   ThreadSanitizer, which cannot see membarrier, the SpinLock. A fiber that finishes on another
//   worker than its shard's owner is not removed there: sched/ hands it back to the owner
//   (Worker::hand_back), which removes it at its next slow tick.
//
// Memory safety for readers: a fiber's memory outlives its membership (removal happens under
// the lock the reader holds, or while the owner is announced), so for_each() callbacks may read
// any field of a listed fiber, but only atomics, const fields and the name (written before
// insertion or under lock() by Fiber::set_name).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "lionet/base/asymmetric_barrier.h"
#include "lionet/base/macros.h"
#include "lionet/base/spinlock.h"
#include "lionet/fiber/debug_info.h"
#include "lionet/fiber/fiber.h"

namespace lionet {

class FiberRegistryShard {
 public:
  enum class Mode { kLocked, kOwnerBiased };

  explicit FiberRegistryShard(Mode mode = Mode::kLocked) noexcept : biased_(mode == Mode::kOwnerBiased) {
    detail::debug_info_add_shard(this);  // debuggers find every shard (debug_info.h)
  }
  ~FiberRegistryShard() { detail::debug_info_remove_shard(this); }
  FiberRegistryShard(const FiberRegistryShard&) = delete;
  FiberRegistryShard& operator=(const FiberRegistryShard&) = delete;

  // kLocked: any thread. kOwnerBiased: the owner thread only. f must not be in any shard.
  void insert(Fiber* f) noexcept {
    enter();
    f->reg_shard_ = this;
    f->reg_prev_ = nullptr;
    f->reg_next_ = head_;
    if (head_) head_->reg_prev_ = f;
    head_ = f;
    size_.store(size_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    exit();
  }

  // Removes f from the shard it was inserted into (kOwnerBiased: called on that shard's owner
  // thread). No-op if it is in none.
  static void remove(Fiber* f) noexcept {
    // Written by insert() before f became visible to other threads (the run queue publishes
    // it); f's own set_name() reads it, but f has finished by the time it is removed.
    FiberRegistryShard* s = f->reg_shard_;
    if (!s) return;
    s->enter();
    (f->reg_prev_ ? f->reg_prev_->reg_next_ : s->head_) = f->reg_next_;
    if (f->reg_next_) f->reg_next_->reg_prev_ = f->reg_prev_;
    f->reg_prev_ = f->reg_next_ = nullptr;
    f->reg_shard_ = nullptr;  // the fiber has finished: no set_name() can race with this
    s->size_.store(s->size_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    s->exit();
  }

  // Any thread. Calls fn(const Fiber&) for every fiber in the shard while holding off its
  // writers: fn must only copy fields (no allocation, no blocking). Stops early if fn returns
  // false. On a kOwnerBiased shard the owner's inserts and removes wait meanwhile.
  template <class Fn>
  void for_each(Fn&& fn) const noexcept {
    reader_lock();
    for (const Fiber* f = head_; f; f = f->reg_next_)
      if (!fn(*f)) break;
    reader_unlock();
  }

  // Fibers in the shard right now (approximate from other threads).
  std::size_t size() const noexcept { return size_.load(std::memory_order_relaxed); }

  bool owner_biased() const noexcept { return biased_; }
  // The reader lock, also taken by Fiber::set_name (names are read only by readers).
  SpinLock& lock() const noexcept { return mu_; }

  // Whoever owns a kOwnerBiased shard (sched/ stores its Worker here); opaque to fiber/.
  void* owner = nullptr;

 private:
  void enter() noexcept {
    if (!biased_ || !kAsymmetric) {
      mu_.lock();
      return;
    }
    for (;;) {
      owner_in_.store(1, std::memory_order_relaxed);
      owner_barrier();
      if (!reader_in_.load(std::memory_order_relaxed)) return;
      owner_in_.store(0, std::memory_order_release);
      while (reader_in_.load(std::memory_order_acquire)) cpu_relax();
    }
  }
  void exit() noexcept {
    if (!biased_ || !kAsymmetric) {
      mu_.unlock();
      return;
    }
    owner_in_.store(0, std::memory_order_release);  // publishes the list edit to the next reader
  }
  void reader_lock() const noexcept {
    mu_.lock();
    if (!biased_ || !kAsymmetric) return;
    reader_in_.store(1, std::memory_order_relaxed);
    heavy_barrier();
    // acquire: pairs with the owner's release in exit(), so its edits are visible.
    while (owner_in_.load(std::memory_order_acquire)) cpu_relax();
  }
  void reader_unlock() const noexcept {
    if (biased_ && kAsymmetric) reader_in_.store(0, std::memory_order_release);
    mu_.unlock();
  }

  // The owner's side of the pair (base/asymmetric_barrier.h); the reader's is heavy_barrier().
  static void owner_barrier() noexcept { light_barrier(); }

#if defined(LIONET_TSAN) || defined(__SANITIZE_THREAD__)
  static constexpr bool kAsymmetric = false;  // TSan cannot see membarrier: use the lock
#else
  static constexpr bool kAsymmetric = true;
#endif

  const bool biased_;
  mutable SpinLock mu_;  // readers (and every party of a kLocked shard)
  alignas(kCacheLine) mutable std::atomic<uint32_t> owner_in_{0};
  mutable std::atomic<uint32_t> reader_in_{0};
  Fiber* head_ = nullptr;  // kLocked: guarded by mu_; kOwnerBiased: the owner's, read by readers
  FiberRegistryShard* volatile debug_next_ = nullptr;  // debug_info.h's list of shards
  friend struct detail::DebugLayout;
  friend void detail::debug_info_add_shard(FiberRegistryShard*) noexcept;
  friend void detail::debug_info_remove_shard(FiberRegistryShard*) noexcept;
  std::atomic<std::size_t> size_{0};
};
}  // namespace lionet
