// lionet/sched/detail/local_queue.h: a worker's bounded run queue (the design of Tokio's
// multi_thread/queue.rs): a FIFO ring that one owner pushes to and pops from, and that
// any number of thieves steal HALF of at a time.
//
// Who may call what: try_push()/pop()/pop_batch()/take_half() only on the owning worker;
// steal_into() by a thief, which must own `dst`; len()/empty() from anyone (approximate).
//
// Layout: head_ packs two u32 indexes, (steal << 32) | real. real is the next slot to pop;
// steal trails it while a thief copies slots [steal, real) out. While steal != real no
// other thief may start, and the owner may not overwrite those slots (try_push checks
// tail - steal < capacity). tail_ is written only by the owner. Indexes wrap as u32.
// Slots are relaxed atomics: they are only read after the acquire of tail_ (thieves) or are
// the owner's own writes; being atomic keeps TSan precise without costing anything on x86.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "lionet/base/macros.h"
#include "lionet/fiber/fiber.h"

namespace lionet::detail {

class LocalQueue {
 public:
  explicit LocalQueue(std::size_t capacity)
      : cap_(static_cast<uint32_t>(capacity)), mask_(cap_ - 1), buf_(new std::atomic<Fiber*>[capacity]) {
    LIONET_CHECK(capacity >= 4 && (capacity & (capacity - 1)) == 0 && capacity <= (1u << 30),
                 "local queue capacity must be a power of two in [4, 2^30]");
  }

  // Owner only. Returns false if the queue is full (the caller keeps the fiber elsewhere, or
  // moves half out with take_half()).
  bool try_push(Fiber* f) noexcept {
    const uint32_t tail = tail_.load(std::memory_order_relaxed);  // owner's own write
    /*1*/ const uint32_t steal = unpack_steal(head_.load(std::memory_order_acquire));
    if (tail - steal >= cap_) return false;
    buf_[tail & mask_].store(f, std::memory_order_relaxed);
    /*2*/ tail_.store(tail + 1, std::memory_order_release);  // publishes the slot to thieves (pairs with /*3*/)
    return true;
  }

  // Owner only, when try_push failed and no thief is mid-steal: claims the older half of the
  // queue for the caller to move elsewhere (the inject queue). Returns how many were written to
  // out (capacity/2), or 0 if a thief got in the way (then try_push again).
  uint32_t take_half(Fiber** out) noexcept {
    uint64_t head = head_.load(std::memory_order_acquire);
    const uint32_t real = unpack_real(head);
    if (unpack_steal(head) != real) return 0;
    const uint32_t tail = tail_.load(std::memory_order_relaxed);
    if (tail - real < cap_) return 0;  // a pop or steal made room meanwhile
    const uint32_t n = cap_ / 2;
    // acq_rel: acquire so the slots' last writers are visible; release pairs with thieves' loads.
    if (!head_.compare_exchange_strong(head, pack(real + n, real + n), std::memory_order_acq_rel,
                                       std::memory_order_acquire))
      return 0;
    for (uint32_t i = 0; i < n; ++i) out[i] = buf_[(real + i) & mask_].load(std::memory_order_relaxed);
    return n;
  }

  // Owner only. Claims up to max of the oldest fibers with one CAS (amortizing it over several
  // switches); they are no longer stealable. Returns how many were written to out.
  uint32_t pop_batch(Fiber** out, uint32_t max) noexcept {
    uint64_t head = head_.load(std::memory_order_acquire);
    for (;;) {
      const uint32_t steal = unpack_steal(head);
      const uint32_t real = unpack_real(head);
      uint32_t n = tail_.load(std::memory_order_relaxed) - real;
      if (n == 0) return 0;
      if (n > max) n = max;
      const uint32_t next_real = real + n;
      const uint64_t next = steal == real ? pack(next_real, next_real) : pack(steal, next_real);
      if (head_.compare_exchange_weak(head, next, std::memory_order_acq_rel, std::memory_order_acquire)) {
        for (uint32_t i = 0; i < n; ++i) out[i] = buf_[(real + i) & mask_].load(std::memory_order_relaxed);
        return n;
      }
    }
  }

  // Owner only. FIFO: the oldest fiber first.
  Fiber* pop() noexcept {
    uint64_t head = head_.load(std::memory_order_acquire);
    for (;;) {
      const uint32_t steal = unpack_steal(head);
      const uint32_t real = unpack_real(head);
      if (real == tail_.load(std::memory_order_relaxed)) return nullptr;
      const uint32_t next_real = real + 1;
      const uint64_t next = steal == real ? pack(next_real, next_real) : pack(steal, next_real);
      // acq_rel: the CAS orders our slot read after any thief's release of head (and makes the
      // claim visible to thieves before they read the slot we take).
      if (head_.compare_exchange_weak(head, next, std::memory_order_acq_rel, std::memory_order_acquire))
        return buf_[real & mask_].load(std::memory_order_relaxed);
    }
  }

  // Thief: moves about half of this queue into dst (owned by the thief, and empty), returns
  // one of the stolen fibers to run at once (the others stay in dst), or nullptr.
  Fiber* steal_into(LocalQueue& dst) noexcept {
    const uint32_t dst_tail = dst.tail_.load(std::memory_order_relaxed);  // thief owns dst
    const uint32_t dst_steal = unpack_steal(dst.head_.load(std::memory_order_acquire));
    if (dst_tail - dst_steal > dst.cap_ / 2) return nullptr;  // dst has work: no need to steal
    uint32_t n = steal_into2(dst, dst_tail);
    if (n == 0) return nullptr;
    --n;
    Fiber* ret = dst.buf_[(dst_tail + n) & dst.mask_].load(std::memory_order_relaxed);
    if (n) dst.tail_.store(dst_tail + n, std::memory_order_release);  // see /*2*/
    return ret;
  }

  // Approximate from other threads, exact for the owner.
  uint32_t len() const noexcept {
    const uint64_t head = head_.load(std::memory_order_acquire);
    return tail_.load(std::memory_order_acquire) - unpack_real(head);
  }
  bool empty() const noexcept { return len() == 0; }
  uint32_t capacity() const noexcept { return cap_; }

 private:
  static uint32_t unpack_steal(uint64_t v) noexcept { return static_cast<uint32_t>(v >> 32); }
  static uint32_t unpack_real(uint64_t v) noexcept { return static_cast<uint32_t>(v); }
  static uint64_t pack(uint32_t steal, uint32_t real) noexcept { return (uint64_t{steal} << 32) | real; }

  uint32_t steal_into2(LocalQueue& dst, uint32_t dst_tail) noexcept {
    uint64_t prev = head_.load(std::memory_order_acquire);
    uint64_t next;
    uint32_t n;
    for (;;) {
      const uint32_t steal = unpack_steal(prev);
      const uint32_t real = unpack_real(prev);
      if (steal != real) return 0;  // another thief is at work
      /*3*/ const uint32_t tail = tail_.load(std::memory_order_acquire);  // pairs with /*2*/
      n = tail - real;
      n -= n / 2;
      if (n == 0) return 0;
      if (n > cap_ / 2) n = cap_ / 2;
      next = pack(steal, real + n);
      if (head_.compare_exchange_weak(prev, next, std::memory_order_acq_rel, std::memory_order_acquire)) break;
    }
    const uint32_t first = unpack_steal(next);
    for (uint32_t i = 0; i < n; ++i) {
      Fiber* f = buf_[(first + i) & mask_].load(std::memory_order_relaxed);
      dst.buf_[(dst_tail + i) & dst.mask_].store(f, std::memory_order_relaxed);
    }
    // Done copying: let steal catch up with real (the owner may have popped meanwhile).
    prev = next;
    for (;;) {
      const uint32_t real = unpack_real(prev);
      if (head_.compare_exchange_weak(prev, pack(real, real), std::memory_order_acq_rel, std::memory_order_acquire))
        return n;
    }
  }

  const uint32_t cap_;
  const uint32_t mask_;
  std::unique_ptr<std::atomic<Fiber*>[]> buf_;
  alignas(kCacheLine) std::atomic<uint64_t> head_{0};  // CAS'd by owner and thieves
  alignas(kCacheLine) std::atomic<uint32_t> tail_{0};  // written by the owner only
};
}  // namespace lionet::detail
