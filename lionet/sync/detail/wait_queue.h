// lionet/sync/detail/wait_queue.h: the intrusive wait node and FIFO every sync/ primitive
// parks on. Private to sync/.
//
// Owns: WaitNode (lives on the waiter's stack), WaitQueue (a doubly linked FIFO of nodes,
// protected by the owning primitive's SpinLock), and the one rule for waking a node.
// Must not: park, unpark, or take any lock itself (callers hold their primitive's SpinLock; only
// check_no_waiters, for destructors, takes it).
//
// THE WAKE RULE (every primitive follows it; numbered so the .cc files can cite it):
//  W1. A waiter fills a WaitNode, links it under the primitive's lock, releases the lock, then
//      parks. It never holds a SpinLock across park() (a worker would spin on a lock held by a
//      fiber that cannot run). A plain node may instead park_and_unlock() (sched/park.h): the
//      lock is released on the far side of the switch, once the fiber is marked parked, so the
//      park needs no CAS (channels do; the lock is held only across the jump itself, and is
//      released before it when the switch would be long: a slow tick, a fresh fiber's first run).
//  W2. A waker removes the node under the same lock. For a plain node (claim == nullptr) the
//      removal alone decides the wake-up: the waker copies the Parker, releases the lock, and
//      calls unpark() (never under the lock: unpark may wake a sleeping worker, a syscall).
//  W3. A timed or select node carries a WaitClaim. Removal is not enough: the waker must win
//      claim->notify(claim_value) while still holding the lock. If it loses (deadline, or for
//      select another channel won), the node is dropped and the waker tries the next one.
//      notify() unparks the waiter while the lock is held; the waiter therefore takes the
//      primitive's lock once after waking before it reads anything the waker wrote into its
//      node (the lock is the barrier), and after kTimedOut it unlinks its node if still linked.
//  W4. After unpark() (W2) or after releasing the lock (W3), the waker never touches the node:
//      the waiter may have returned and its stack frame be gone.
#pragma once

#include <cstdint>
#include <optional>

#include "lionet/base/macros.h"
#include "lionet/base/spinlock.h"
#include "lionet/fiber/wait_reason.h"
#include "lionet/sched/cancel.h"
#include "lionet/sched/park.h"

namespace lionet::detail {

struct WaitNode {
  // Links; written only under the owning primitive's lock.
  WaitNode* prev = nullptr;
  WaitNode* next = nullptr;
  bool linked = false;
  // Result written by the waker before the wake-up (W2: published by unpark; W3: by the lock).
  uint32_t status = 0;
  // Untimed waits: the party to unpark. Set by the waiter before linking; read-only afterwards.
  Parker parker;
  // Timed and select waits: the claim that decides the wake-up (W3), and the value to notify
  // it with (select encodes its case index here). Null for untimed waits.
  WaitClaim* claim = nullptr;
  uint32_t claim_value = WaitClaim::kNotified;
  // Primitive-specific payload (Channel: T* of a sender, std::optional<T>* of a receiver).
  void* elem = nullptr;
};

// A node won by WaitQueue::take(). `node` may be dereferenced only under the lock, and for a
// claim node (!plain) only by primitives whose waiters re-take the lock after waking (W3).
struct Taken {
  WaitNode* node = nullptr;
  bool plain = false;  // true: the waker must unpark `parker` after releasing the lock (W2)
  Parker parker;  // copy of node->parker, for plain nodes
  explicit operator bool() const noexcept { return node != nullptr; }
};

// FIFO of WaitNodes. Not thread-safe: every call is made under the owner's SpinLock.
class WaitQueue {
 public:
  bool empty() const noexcept { return head_ == nullptr; }
  WaitNode* front() const noexcept { return head_; }

  void push_back(WaitNode* n) noexcept {
    LIONET_DCHECK(!n->linked, "WaitNode linked twice");
    n->next = nullptr;
    n->prev = tail_;
    if (tail_) {
      tail_->next = n;
    } else {
      head_ = n;
    }
    tail_ = n;
    n->linked = true;
  }

  void push_front(WaitNode* n) noexcept {
    LIONET_DCHECK(!n->linked, "WaitNode linked twice");
    n->prev = nullptr;
    n->next = head_;
    if (head_) {
      head_->prev = n;
    } else {
      tail_ = n;
    }
    head_ = n;
    n->linked = true;
  }

  void remove(WaitNode* n) noexcept {
    LIONET_DCHECK(n->linked, "removing an unlinked WaitNode");
    if (n->prev) {
      n->prev->next = n->next;
    } else {
      head_ = n->next;
    }
    if (n->next) {
      n->next->prev = n->prev;
    } else {
      tail_ = n->prev;
    }
    n->prev = n->next = nullptr;
    n->linked = false;
  }

  void remove_if_linked(WaitNode* n) noexcept {
    if (n->linked) remove(n);
  }

  WaitNode* pop_front() noexcept {
    WaitNode* n = head_;
    if (n) remove(n);
    return n;
  }

  // Pops the first node the caller wins (W2/W3): plain nodes are won by removal, claim nodes
  // by notify() (which already unparks them). Nodes whose claim is lost are dropped.
  // Everything the waker needs later (plain or not, the Parker) is read BEFORE notify(): once
  // a claim node is notified its owner may run, and unless the primitive makes its waiters take
  // the lock after waking (Channel and select do; the others do not), the node must not be
  // dereferenced again (W4).
  Taken take() noexcept;
  // Drops nodes at the front whose claim is already decided (their owners will find them
  // unlinked). Then front() is either null, a plain node, or a claim still kWaiting (which
  // another thread may still win concurrently: take() remains the authority).
  void drop_decided_front() noexcept {
    while (head_ && head_->claim && head_->claim->value() != WaitClaim::kWaiting) pop_front();
  }

 private:
  WaitNode* head_ = nullptr;
  WaitNode* tail_ = nullptr;
};

inline Taken WaitQueue::take() noexcept {
  while (WaitNode* n = pop_front()) {
    WaitClaim* claim = n->claim;
    if (claim == nullptr) return Taken{n, true, n->parker};
    if (claim->notify(n->claim_value)) return Taken{n, false, Parker()};
  }
  return Taken{};
}

// A node's wake-up that must happen after the lock is released (W2), or nothing (W3 nodes
// were already unparked by notify()).
class DeferredWake {
 public:
  DeferredWake() = default;
  explicit DeferredWake(const Taken& t) noexcept : parker_(t.parker), armed_(t.plain) {}
  void set(const Taken& t) noexcept { *this = DeferredWake(t); }
  // Call after releasing the lock.
  void run() noexcept {
    if (armed_) parker_.unpark();
  }

 private:
  Parker parker_;
  bool armed_ = false;
};

// A singly linked batch of plain nodes to unpark after the lock (notify_all, close).
// Reuses WaitNode::next of nodes already removed from their queue.
class WakeBatch {
 public:
  // Under the lock: t was won (WaitQueue::take). Claim nodes need nothing more (and must not be
  // touched: W4). A plain node stays parked until run(), so its `next` is ours to reuse.
  void add(const Taken& t) noexcept {
    if (!t.plain) return;
    WaitNode* n = t.node;
    n->next = head_;
    head_ = n;
  }
  // Under the lock: a plain node removed with pop_front() by a primitive that queues no claims.
  void add_plain(WaitNode* n) noexcept {
    LIONET_DCHECK(n->claim == nullptr, "WakeBatch::add_plain with a claim node");
    n->next = head_;
    head_ = n;
  }
  // After the lock: unparks every node. Reads next before unparking (W4).
  void run() noexcept {
    WaitNode* n = head_;
    head_ = nullptr;
    while (n) {
      WaitNode* next = n->next;
      Parker p = n->parker;
      p.unpark();
      n = next;
    }
  }

 private:
  WaitNode* head_ = nullptr;
};

// Identity of the running fiber (its id) or plain thread (a per-thread token with the top bit
// set), for debug-build ownership checks. Never 0.
uint64_t current_owner_token() noexcept;
// The wait of a latch (Event, WaitGroup): returns once done() holds, checked under `lock`
// before queueing, so the waiter either sees it or is queued before the releasing side drains
// the queue, and returns only after that side released `lock` (W3). Returns false if the
// deadline passed, or the fiber was cancelled or passed its own deadline, with done() false.
// `kind`/`object` name the wait in fiber dumps (fiber/wait_reason.h).
template <class Lock, class Done>
bool wait_latch(Lock& lock, WaitQueue& queue, Done done, std::optional<TimePoint> deadline, WaitKind kind,
                const void* object) noexcept {
  WaitClaim claim;
  WaitNode node;
  // An untimed wait of a fiber that may be cancelled (or has a deadline) is claimed too
  // (sched/cancel.h, protocol 10): the cancel expires the claim.
  bool claimed = deadline.has_value();
  if (!claimed) {
    Fiber* f = current_fiber();
    claimed = f && interruptible(*f);
  }
  if (claimed) node.claim = &claim;
  else node.parker = Parker::current();
  lock.lock();
  if (done()) {
    lock.unlock();
    return true;
  }
  queue.push_back(&node);
  lock.unlock();
  note_wait(kind, object);
  if (!claimed) {
    park();
    return true;
  }
  const bool notified = claim.wait(deadline) != WaitClaim::kTimedOut;
  lock.lock();  // W3: unlink after a timeout; after a notify, wait for the waker to leave
  if (!notified) queue.remove_if_linked(&node);
  const bool now_done = done();
  lock.unlock();
  return notified || now_done;
}

// The untimed wait of a primitive whose wakers unpark after taking the node out of q (W2): the
// calling fiber (or thread) is queued at q's back, `lock` (held) is released, the wait is
// recorded for dumps, and it parks until a waker took its node and unparked it. An unpark that
// comes before the park is kept (protocol 5), so unlocking first is safe.
inline void park_queued(WaitQueue& q, SpinLock& lock, WaitKind kind, const void* object) noexcept {
  WaitNode node;
  node.parker = Parker::current();
  q.push_back(&node);
  lock.unlock();
  note_wait(kind, object);
  park();
}

// A primitive's destructor: fatal, with `what` ("lionet::Event destroyed while fibers are
// waiting on it"), if any fiber still waits in q.
inline void check_no_waiters(SpinLock& lock, const WaitQueue& q, const char* what) noexcept {
  lock.lock();
  const bool idle = q.empty();
  lock.unlock();
  LIONET_CHECK(idle, what);
}

}  // namespace lionet::detail
