// lionet/sync/select.h: lionet::select, Go's select over channel operations.
//
//   std::optional<Job> job;
//   switch (lionet::select(lionet::recv_case(jobs, job),            // 0
//                          lionet::send_case(results, r, &sent),    // 1
//                          lionet::timeout_case(50ms))) {           // 2 (or default_case())
//     case 0: if (job) run(*job); else /* jobs closed */; break;
//     case 1: /* r was sent if `sent` */ break;
//     case 2: /* nothing became ready in 50 ms */ break;
//   }
//
// Returns the argument position of the case that completed. A receive on a closed, drained
// channel completes with nullopt; a send on a closed channel completes with *sent == false
// (Go would panic). Without timeout_case or default_case, select blocks until some case
// completes. default_case() makes it non-blocking; with both, default_case wins. A fiber
// cancelled, or past its DeadlineScope, while select waits (sched/cancel.h) gets the timeout
// case's position, or -1 without one.
//
// Fairness: among the cases ready when select looks, one is chosen uniformly at random (a
// per-thread xorshift generator); so a busy channel cannot starve the others.
// How it waits (select_impl in channel.cc): lock every involved channel in address order
// (dedup'ed), complete a ready case if any, else link one WaitNode per case into the
// channels' queues, all sharing one WaitClaim whose notify value is 2 + case index; unlock all
// and wait on the claim. The winner's channel completes the operation; the other nodes are
// unlinked under all locks again before select returns (wake rule W3, detail/wait_queue.h).
// The case objects are temporaries that live until select returns; cost: no allocation.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <type_traits>
#include <utility>

#include "lionet/sync/channel.h"

namespace lionet {

namespace detail {
// One channel operation inside a select. All methods run with channel()'s lock held.
class SelectCaseBase {
 public:
  virtual ChannelCore* channel() noexcept = 0;
  virtual bool ready_locked() noexcept = 0;
  // Completes the operation if it can (returns true, partner in `wake`), else false.
  virtual bool try_complete_locked(DeferredWake& wake) noexcept = 0;
  // Links `node` (claim already set) into the right queue, with elem pointing at the payload.
  virtual void enqueue_locked(WaitNode& node) noexcept = 0;
  virtual void unlink_locked(WaitNode& node) noexcept = 0;
  // After this case won: the waker's status for it (no lock needed: select re-locked).
  virtual void finish(uint32_t status) noexcept = 0;

 protected:
  ~SelectCaseBase() = default;
};

template <class T>
class RecvCase final : public SelectCaseBase {
 public:
  RecvCase(Channel<T>& ch, std::optional<T>& out) noexcept : ch_(ch), out_(out) { out_.reset(); }
  ChannelCore* channel() noexcept override { return &ch_; }
  bool ready_locked() noexcept override { return ch_.recv_ready_locked(); }
  bool try_complete_locked(DeferredWake& wake) noexcept override {
    return ch_.try_recv_locked(out_, wake) != kChanWouldBlock;
  }
  void enqueue_locked(WaitNode& node) noexcept override {
    node.elem = &out_;
    ch_.recvq_.push_back(&node);
  }
  void unlink_locked(WaitNode& node) noexcept override { ch_.recvq_.remove_if_linked(&node); }
  void finish(uint32_t) noexcept override {}  // out_ was filled, or stays nullopt (closed)

 private:
  Channel<T>& ch_;
  std::optional<T>& out_;
};

template <class T>
class SendCase final : public SelectCaseBase {
 public:
  SendCase(Channel<T>& ch, T value, bool* sent) noexcept : ch_(ch), value_(std::move(value)), sent_(sent) {}
  ChannelCore* channel() noexcept override { return &ch_; }
  bool ready_locked() noexcept override { return ch_.send_ready_locked(); }
  bool try_complete_locked(DeferredWake& wake) noexcept override {
    uint32_t st = ch_.try_send_locked(value_, wake);
    if (st == kChanWouldBlock) return false;
    finish(st);
    return true;
  }
  void enqueue_locked(WaitNode& node) noexcept override {
    node.elem = &value_;
    ch_.sendq_.push_back(&node);
  }
  void unlink_locked(WaitNode& node) noexcept override { ch_.sendq_.remove_if_linked(&node); }
  void finish(uint32_t status) noexcept override {
    if (sent_) *sent_ = status == kChanOk;
  }

 private:
  Channel<T>& ch_;
  T value_;
  bool* sent_;
};

struct TimeoutCase {
  TimePoint deadline;
};
struct DefaultCase {};

template <class C>
inline constexpr bool kIsChannelCase = std::is_base_of_v<SelectCaseBase, std::decay_t<C>>;
}  // namespace detail

// Receive from `ch` into `out` (nullopt if the channel is closed and drained).
template <class T>
detail::RecvCase<T> recv_case(Channel<T>& ch, std::optional<T>& out) noexcept {
  return detail::RecvCase<T>(ch, out);
}
// Send `value` on `ch`; *sent (if given) says whether it was delivered (false: closed).
template <class T, class U>
detail::SendCase<T> send_case(Channel<T>& ch, U&& value, bool* sent = nullptr) {
  return detail::SendCase<T>(ch, T(std::forward<U>(value)), sent);
}
inline detail::TimeoutCase timeout_case(Duration d) noexcept { return {now() + d}; }
template <class Rep, class Period>
detail::TimeoutCase timeout_case(const std::chrono::duration<Rep, Period>& d) noexcept {
  return {now() + std::chrono::ceil<Duration>(d)};
}
inline detail::TimeoutCase deadline_case(TimePoint t) noexcept { return {t}; }
inline detail::DefaultCase default_case() noexcept { return {}; }

// See the top of this file. At most 64 cases.
template <class... Cases>
int select(Cases&&... cases) noexcept {
  constexpr std::size_t kN = sizeof...(Cases);
  static_assert(kN > 0 && kN <= 64, "lionet::select takes 1 to 64 cases");
  constexpr std::size_t kChans = (std::size_t{0} + ... + (detail::kIsChannelCase<Cases> ? 1 : 0));
  static_assert(kChans > 0 || kN == 1, "lionet::select needs at least one channel case");
  std::array<detail::SelectCaseBase*, kChans ? kChans : 1> chans{};
  std::array<int, kChans ? kChans : 1> positions{};
  std::array<detail::WaitNode, kChans ? kChans : 1> nodes;
  TimePoint deadline{};
  bool has_deadline = false;
  int timeout_pos = -1, default_pos = -1, pos = 0;
  std::size_t nc = 0;
  auto visit = [&](auto& c) {
    using C = std::decay_t<decltype(c)>;
    if constexpr (std::is_same_v<C, detail::TimeoutCase>) {
      if (!has_deadline || c.deadline < deadline) deadline = c.deadline;
      has_deadline = true;
      timeout_pos = pos;
    } else if constexpr (std::is_same_v<C, detail::DefaultCase>) {
      default_pos = pos;
    } else {
      static_assert(detail::kIsChannelCase<C>, "lionet::select: use recv_case/send_case/timeout_case/default_case");
      chans[nc] = &c;
      positions[nc++] = pos;
    }
    ++pos;
  };
  (visit(cases), ...);
  int r = detail::select_impl(chans.data(), nodes.data(), nc, has_deadline ? &deadline : nullptr, default_pos >= 0);
  if (r >= 0) return positions[r];
  return r == -1 ? timeout_pos : default_pos;  // -1: deadline passed, -2: nothing ready (default)
}
}  // namespace lionet
