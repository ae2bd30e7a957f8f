// lionet/sync/channel.h: lionet::Channel<T>, Go-style channels for fibers and threads.
//
// Owns: the ring buffer of one channel and its two waiter queues. select() over several
// channels lives in select.h (it uses the lock-held operations below).
//
//   lionet::Channel<int> ch(0);      // capacity 0: rendezvous (send waits for a receiver)
//   lionet::Channel<int> q(64);      // capacity N: send waits only while N values are queued
//   bool ok = ch.send(42);           // false once the channel is closed (value dropped)
//   std::optional<int> v = ch.recv();// nullopt once closed AND drained
//   ch.close();                      // receivers drain the buffer, then see nullopt;
//                                    // blocked senders return false
//   for (int x : ch) { ... }         // recv() until closed and drained
//
// Semantics (Go's, except that sending on a closed channel returns false instead of panicking
// and close() is idempotent): values are delivered exactly once, FIFO per channel; a blocked
// receiver is handed a value directly by the sender (no trip through the buffer); waiters on
// each side are served oldest first. T must be move-constructible, and its move constructor
// should not throw: values are moved under the channel's SpinLock, in noexcept functions (a
// throwing move terminates the process rather than leaving a waiter half-served).
//
// Concurrency: every method may run in parallel with every other, from fibers on any worker
// and from plain threads. Each channel has one SpinLock (lock_) that protects every field of
// ChannelCore and the buffer; it is held for a few dozen instructions and never across a park
// (wake rule W1-W4 in detail/wait_queue.h). The channel must outlive every operation on it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <utility>

#include "lionet/base/clock.h"
#include "lionet/base/macros.h"
#include "lionet/base/spinlock.h"
#include "lionet/sync/detail/wait_queue.h"

namespace lionet {

namespace detail {
class SelectCaseBase;
struct SelectLockSet;
template <class T>
class RecvCase;
template <class T>
class SendCase;
int select_impl(SelectCaseBase** cases, WaitNode* nodes, std::size_t n, const TimePoint* deadline,
                bool has_default) noexcept;

// Outcome of a channel operation, also stored in WaitNode::status by the waker.
enum ChanStatus : uint32_t { kChanOk = 0, kChanClosed = 1, kChanTimeout = 2, kChanWouldBlock = 3 };

// The type-independent part of a channel: lock, waiter queues, closed flag.
class ChannelCore {
 public:
  explicit ChannelCore(std::size_t capacity) noexcept : capacity_(capacity) {}
  ChannelCore(const ChannelCore&) = delete;
  ChannelCore& operator=(const ChannelCore&) = delete;

  std::size_t capacity() const noexcept { return capacity_; }
  // acquire: pairs with the release store in close().
  bool closed() const noexcept { return closed_.load(std::memory_order_acquire); }

 protected:
  friend int select_impl(SelectCaseBase**, WaitNode*, std::size_t, const TimePoint*, bool) noexcept;
  friend struct SelectLockSet;
  // Parks on queue q (lock_ held on entry, released inside) until a partner or close() wakes
  // the node, or the deadline passes, or the fiber is cancelled or passes its DeadlineScope.
  // Returns the node's status or kChanTimeout.
  uint32_t wait_locked(WaitQueue& q, WaitNode& node, const TimePoint* deadline) noexcept;
  // Protocol 10's cancel of an untimed waiter (sched/cancel.h): takes the node out of its
  // queue under lock_ unless a partner took it, and wakes it with kChanTimeout.
  void cancel_waiter(WaitQueue& q, WaitNode* node) noexcept;
  static void cancel_recv(void* core, void* node) noexcept;
  static void cancel_send(void* core, void* node) noexcept;
  // Under lock_: marks closed and wins every waiter (their status becomes kChanClosed).
  void close_locked(WakeBatch& batch) noexcept;
  bool destroyable() noexcept;

  mutable SpinLock lock_;
  WaitQueue recvq_;  // receivers waiting; non-empty (live nodes) only while the buffer is empty
  WaitQueue sendq_;  // senders waiting; non-empty (live nodes) only while the buffer is full
  // Written under lock_ (release) by close(); read under lock_ (relaxed) or by closed().
  std::atomic<bool> closed_{false};
  const std::size_t capacity_;
  std::size_t head_ = 0;  // index of the oldest buffered value; under lock_
  std::size_t count_ = 0;  // buffered values; under lock_
};
}  // namespace detail

template <class T>
class Channel : public detail::ChannelCore {
 public:
  using value_type = T;

  explicit Channel(std::size_t capacity = 0)
      : ChannelCore(capacity), buf_(capacity ? std::allocator<T>().allocate(capacity) : nullptr) {}
  ~Channel() {
    LIONET_CHECK(destroyable(), "lionet::Channel destroyed while fibers are blocked on it");
    while (count_ > 0) std::destroy_at(pop_buffer_slot());
    if (buf_) std::allocator<T>().deallocate(buf_, capacity_);
  }

  // Blocks while the channel is full (capacity 0: until a receiver takes the value).
  // Returns false, dropping the value, if the channel is or becomes closed first, or if the
  // fiber is cancelled or passes its DeadlineScope while it waits (sched/cancel.h).
  bool send(T value) noexcept { return send_impl(value, nullptr, false) == detail::kChanOk; }
  // Never blocks. On false (full or closed; closed() tells which) `value` is left untouched.
  bool try_send(T&& value) noexcept { return send_impl(value, nullptr, true) == detail::kChanOk; }
  bool try_send(const T& value) {
    T copy(value);
    return try_send(std::move(copy));
  }
  // Like send() with a deadline. On false (timeout or closed) an rvalue `value` is left untouched.
  bool send_until(T&& value, TimePoint deadline) noexcept {
    return send_impl(value, &deadline, false) == detail::kChanOk;
  }
  bool send_until(const T& value, TimePoint deadline) {
    T copy(value);
    return send_until(std::move(copy), deadline);
  }
  template <class Rep, class Period>
  bool send_for(T&& value, const std::chrono::duration<Rep, Period>& d) noexcept {
    return send_until(std::move(value), now() + std::chrono::ceil<Duration>(d));
  }
  template <class Rep, class Period>
  bool send_for(const T& value, const std::chrono::duration<Rep, Period>& d) {
    return send_until(value, now() + std::chrono::ceil<Duration>(d));
  }

  // Blocks while empty. nullopt once the channel is closed and drained, or if the fiber is
  // cancelled or passes its DeadlineScope while it waits (closed() tells which).
  std::optional<T> recv() noexcept {
    std::optional<T> out;
    recv_impl(out, nullptr, false);
    return out;
  }
  // Never blocks. nullopt if empty (closed() tells whether it will stay so).
  std::optional<T> try_recv() noexcept {
    std::optional<T> out;
    recv_impl(out, nullptr, true);
    return out;
  }
  // nullopt on timeout or once closed and drained (closed() tells which).
  std::optional<T> recv_until(TimePoint deadline) noexcept {
    std::optional<T> out;
    recv_impl(out, &deadline, false);
    return out;
  }
  template <class Rep, class Period>
  std::optional<T> recv_for(const std::chrono::duration<Rep, Period>& d) noexcept {
    return recv_until(now() + std::chrono::ceil<Duration>(d));
  }

  // Idempotent. Wakes every blocked receiver (they drain the buffer first: a receiver only
  // blocks while it is empty) and every blocked sender (their send returns false).
  void close() noexcept {
    detail::WakeBatch batch;
    lock_.lock();
    close_locked(batch);
    lock_.unlock();
    batch.run();
  }

  // Buffered values now (racy snapshot).
  std::size_t size() const noexcept {
    lock_.lock();
    std::size_t n = count_;
    lock_.unlock();
    return n;
  }

  // Range-for: receives until closed and drained.
  class iterator {
   public:
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    explicit iterator(Channel* ch) : ch_(ch), cur_(ch->recv()) {}
    T& operator*() noexcept { return *cur_; }
    T* operator->() noexcept { return &*cur_; }
    iterator& operator++() {
      cur_ = ch_->recv();
      return *this;
    }
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const noexcept { return !cur_.has_value(); }

   private:
    Channel* ch_ = nullptr;
    std::optional<T> cur_;
  };
  iterator begin() { return iterator(this); }
  std::default_sentinel_t end() noexcept { return {}; }

 private:
  template <class U>
  friend class detail::RecvCase;
  template <class U>
  friend class detail::SendCase;

  T* pop_buffer_slot() noexcept {
    T* slot = buf_ + head_;
    if (++head_ == capacity_) head_ = 0;
    --count_;
    return slot;
  }
  void push_buffer(T&& v) noexcept {
    std::size_t tail = head_ + count_;
    if (tail >= capacity_) tail -= capacity_;
    std::construct_at(buf_ + tail, std::move(v));
    ++count_;
  }

  // ---- Lock-held halves, shared with select (lock_ held; never park) ----
  // Completes a send now if possible: to a queued receiver (direct hand-off), else into the
  // buffer. `wake` receives the receiver to unpark after unlock. Moves from v only on success.
  uint32_t try_send_locked(T& v, detail::DeferredWake& wake) noexcept {
    if (closed_.load(std::memory_order_relaxed)) return detail::kChanClosed;
    // Dereferencing a won claim node is safe under lock_: channel waiters re-take it (W3).
    if (detail::Taken r = recvq_.take()) {  // buffer is empty whenever a live receiver waits
      static_cast<std::optional<T>*>(r.node->elem)->emplace(std::move(v));
      r.node->status = detail::kChanOk;
      wake.set(r);
      return detail::kChanOk;
    }
    if (count_ < capacity_) {
      push_buffer(std::move(v));
      return detail::kChanOk;
    }
    return detail::kChanWouldBlock;
  }
  // Completes a receive now if possible: from the buffer (refilling it from the oldest queued
  // sender), else directly from a queued sender, else reports closed.
  uint32_t try_recv_locked(std::optional<T>& out, detail::DeferredWake& wake) noexcept {
    if (count_ > 0) {
      T* slot = pop_buffer_slot();
      out.emplace(std::move(*slot));
      std::destroy_at(slot);
      if (detail::Taken s = sendq_.take()) {
        push_buffer(std::move(*static_cast<T*>(s.node->elem)));
        s.node->status = detail::kChanOk;
        wake.set(s);
      }
      return detail::kChanOk;
    }
    if (detail::Taken s = sendq_.take()) {  // rendezvous
      out.emplace(std::move(*static_cast<T*>(s.node->elem)));
      s.node->status = detail::kChanOk;
      wake.set(s);
      return detail::kChanOk;
    }
    return closed_.load(std::memory_order_relaxed) ? detail::kChanClosed : detail::kChanWouldBlock;
  }
  // Readiness for select's random choice (after dropping decided select nodes at the front).
  // A true answer may still turn false when try_*_locked runs (another channel can win a
  // select node's claim meanwhile); try_*_locked is the authority.
  bool send_ready_locked() noexcept {
    recvq_.drop_decided_front();
    return closed_.load(std::memory_order_relaxed) || !recvq_.empty() || count_ < capacity_;
  }
  bool recv_ready_locked() noexcept {
    sendq_.drop_decided_front();
    return count_ > 0 || !sendq_.empty() || closed_.load(std::memory_order_relaxed);
  }

  // One send or receive: done at once under lock_ (try_send_locked / try_recv_locked), or, unless
  // nonblocking, queued in q with its element (the peer moves from or emplaces into it under
  // lock_ before waking us).
  template <class Elem, class Try>
  uint32_t op(Elem& elem, Try try_locked, detail::WaitQueue& q, const TimePoint* deadline, bool nonblocking) noexcept {
    detail::DeferredWake wake;
    lock_.lock();
    uint32_t st = (this->*try_locked)(elem, wake);
    if (st != detail::kChanWouldBlock || nonblocking) {
      lock_.unlock();
      wake.run();
      return st;
    }
    detail::WaitNode node;
    node.elem = &elem;
    return wait_locked(q, node, deadline);
  }
  uint32_t send_impl(T& v, const TimePoint* deadline, bool nonblocking) noexcept {
    return op(v, &Channel::try_send_locked, sendq_, deadline, nonblocking);
  }
  uint32_t recv_impl(std::optional<T>& out, const TimePoint* deadline, bool nonblocking) noexcept {
    return op(out, &Channel::try_recv_locked, recvq_, deadline, nonblocking);
  }

  T* const buf_;  // ring of capacity_ slots; slots [head_, head_+count_) are constructed
};
}  // namespace lionet

#include "lionet/sync/select.h"  // select() over Channel operations
