// lionet/io/uring_reactor.cc: UringReactor.
//
// Readiness through one-shot IORING_OP_POLL_ADD, one per arming, for both directions. A
// one-shot poll checks the fd's current state when the kernel takes it and completes at once
// if the fd is already ready, so every arm() is a level check: a new waiter on an fd that is
// still readable (unread data, EOF) is woken at once, as poll(2) would. (Multishot read polls,
// the earlier choice, report changes only: a second wait on a still-readable fd parked until
// the deadline.) Each completion disarms its direction; IOManager re-arms while it has waiters.
//
// user_data: fd in bits 0-31, direction mask in bits 32-39, tag in bits 40-62. Mask 0 marks
// the reactor's own requests (the wake poll, cancellations, link timeouts), never returned as
// events. Bit 63 marks a completion-based operation (submit()): the rest is its ReactorOp's
// address (user-space addresses have bit 63 clear).
//
// Completion-based operations (recv, send, recvmsg, sendmsg, accept, connect) are queued and
// submitted exactly as the polls are. On a socket the kernel tries the call at once and, when it
// would block, waits for readiness itself and retries: one completion carries the data, where a
// readiness wait costs a poll completion and then the fiber's own syscall. An op with a deadline
// is linked to an absolute IORING_OP_LINK_TIMEOUT (two SQEs), so the kernel cancels it at the
// deadline and no timer of ours refers to the op's memory.
//
// Submission is batched: arm() only queues SQEs (under sq_mu_); the poller submits them with
// the io_uring_enter that waits (wait()) or, when it only polls, with one io_uring_enter per
// poll() that has something queued. So a busy worker pays no syscall per wait. While the
// poller is blocked in the kernel (poller_blocked_), an arm() from another thread submits at
// once itself, so its waiter is not left unarmed until the next wake-up. disarm() submits at
// once (where this thread may enter the ring): the cancelled polls hold a reference to the
// file, which must go before close().
//
// Completions (of polls and ops) are posted by task work of the thread that submitted the
// request. On the shared ring (several workers submit) the kernel runs it at that thread's next
// system call exit, or interrupts the thread for it: an op's recv then runs inside another
// connection's sendto, contending for socket locks (measured: 118k vs 135k QPS with polls), so
// IOManager submits ops to a shared ring only if IoOptions::uring_shared_ring_ops asks it to.
// Not COOP_TASKRUN: it drops the interrupt, but then a completion waits until its submitter
// enters the kernel again, and a submitter asleep on a futex while another worker polls (arm()
// submits from any thread) would hold it back indefinitely.
// A one-worker scheduler gets the single-issuer ring instead (SINGLE_ISSUER | DEFER_TASKRUN |
// TASKRUN_FLAG): task work waits until the worker enters the kernel to wait or poll (TASKRUN
// tells it without a syscall), and runs there in one batch. Only the owner (the first thread
// that waits, which enables the R_DISABLED ring) may enter it: other threads' arm(), disarm()
// and submit() go to foreign_ and wake the owner, whose next wait() submits them. A scheduler
// with several workers gets one such ring per worker (io_manager.cc protocol 10): each worker
// submits to and reaps its own, and sleeps in it when idle (sched/ protocol 8c), so nothing
// here changes but who the owner is; the foreign_ path carries the cancels of an fd's requests
// in other workers' rings and plain threads' requests. Such a cancel runs when the owner next
// waits, when the fd may have been closed and its number reused: disarm_life() cancels the
// polls by their user_data (fd, direction, the life's tag) and only ops by fd (their closer
// waits for them, so the number is still theirs).
#include "lionet/io/uring_reactor.h"

#include <liburing.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <system_error>
#include <thread>

#include "lionet/base/tsan.h"
#include "lionet/io/detail/raw_syscall.h"

namespace lionet {
namespace {
constexpr uint64_t kWakeData = 1;  // mask 0: internal
constexpr uint64_t kCancelData = 2;  // mask 0: internal
constexpr uint64_t kLinkTimeoutData = 3;  // mask 0: internal
constexpr uint64_t kOpBit = uint64_t{1} << 63;

uint64_t pack(int fd, uint32_t mask, uint32_t tag) {
  return (uint64_t{tag & 0x7fffff} << 40) | (uint64_t{mask & 0xff} << 32) | static_cast<uint32_t>(fd);
}

static_assert(sizeof(__kernel_timespec) <= sizeof(ReactorOp::scratch), "the link timeout lives in the op");

// 5.19: IORING_ASYNC_CANCEL_FD (disarm by fd), multishot poll (5.13), EXT_ARG waits (5.11).
bool kernel_at_least(int major, int minor) {
  utsname u{};
  if (::uname(&u) != 0) return false;
  int ma = 0, mi = 0;
  if (std::sscanf(u.release, "%d.%d", &ma, &mi) != 2) return false;
  return ma > major || (ma == major && mi >= minor);
}
}  // namespace

UringReactor::UringReactor(unsigned entries, bool single_issuer)
    : ring_(std::make_unique<io_uring>()), single_issuer_(single_issuer) {
  if (!kernel_at_least(5, 19))
    throw std::system_error(ENOSYS, std::generic_category(), "io_uring reactor needs Linux 5.19 or later");
  io_uring_params p{};
  p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL;
  // Single issuer (6.1): the ring is enabled by, and from then on entered only by, the first
  // thread that calls wait() (R_DISABLED until then); completions wait as local task work
  // until that thread enters the kernel to wait for them (DEFER_TASKRUN), and TASKRUN_FLAG
  // tells it without a system call when there is some.
  constexpr unsigned kSingle =
      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_R_DISABLED;
  // Multishot reads can post several completions per fd between two waits: a large CQ keeps
  // them off the (slower) overflow list.
  p.cq_entries = std::max(4096u, entries * 8);
  // Created on a helper thread that exits at once: the kernel registers the creating thread
  // with the ring and, when the ring is torn down, sends it task work (TIF_NOTIFY_SIGNAL) that
  // interrupts whatever blocking system call it is in then (a plain socket read with
  // SO_RCVTIMEO on the program's main thread failed with EINTR). An exited thread gets none.
  int r = 0;
  std::thread([&] {
    const unsigned base = p.flags;
    if (single_issuer_) {
      p.flags = base | kSingle;
      r = io_uring_queue_init_params(std::max(entries, 8u), ring_.get(), &p);
      if (r == 0) return;
      single_issuer_ = false;  // an older kernel: the shared ring below
      p = io_uring_params{};
      p.cq_entries = std::max(4096u, entries * 8);
    }
    p.flags = base;
    r = io_uring_queue_init_params(std::max(entries, 8u), ring_.get(), &p);
  }).join();
  if (r == 0) probe_ops();
  if (r < 0) throw std::system_error(-r, std::generic_category(), "io_uring_queue_init_params");
  if (!(p.features & IORING_FEAT_EXT_ARG) || !(p.features & IORING_FEAT_NODROP)) {
    io_uring_queue_exit(ring_.get());
    throw std::system_error(ENOSYS, std::generic_category(), "io_uring lacks EXT_ARG/NODROP");
  }
  wakefd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wakefd_ < 0) {
    const int e = errno;
    io_uring_queue_exit(ring_.get());
    throw std::system_error(e, std::generic_category(), "eventfd");
  }
  // Nothing is submitted here either (same reason): the wake poll is armed by the first
  // wait(), on the poller's thread. Plain threads still submit through disarm() (a socket
  // closed from outside any fiber); the worst they see is one such EINTR at the ring's end.
}

// Completion-based operations only if the kernel has every opcode they use (probe, 5.6+);
// otherwise sockets wait for readiness, as with epoll (IOManager logs it).
void UringReactor::probe_ops() noexcept {
  io_uring_probe* probe = io_uring_get_probe_ring(ring_.get());
  if (!probe) return;
  ops_supported_ = true;
  for (int op : {IORING_OP_RECV, IORING_OP_SEND, IORING_OP_RECVMSG, IORING_OP_SENDMSG, IORING_OP_ACCEPT,
                 IORING_OP_CONNECT, IORING_OP_LINK_TIMEOUT, IORING_OP_ASYNC_CANCEL})
    ops_supported_ = ops_supported_ && io_uring_opcode_supported(probe, op);
  io_uring_free_probe(probe);
}

UringReactor::~UringReactor() {
  io_uring_queue_exit(ring_.get());  // cancels every pending poll and drops its file references
  detail::raw_close(wakefd_);
}

void UringReactor::arm_wake_poll() noexcept {
  io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
  if (!sqe) {
    (void)submit_locked();
    sqe = io_uring_get_sqe(ring_.get());
    if (!sqe) return;  // cannot happen right after a submit of a queue with >= 8 entries
  }
  io_uring_prep_poll_multishot(sqe, wakefd_, POLLIN);
  io_uring_sqe_set_data64(sqe, kWakeData);
}

int UringReactor::submit_locked() noexcept {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int r = io_uring_submit(ring_.get());
    if (r >= 0) return 0;
    if (r != -EINTR && r != -EAGAIN && r != -EBUSY) return -r;
    // EBUSY/EAGAIN: completions pending in the overflow list; they drain as the poller reaps.
  }
  return EAGAIN;
}

// The next free SQE, submitting the queue first if it is full (nullptr if it stays full).
// Caller holds sq_mu_ and may enter the ring (owns_ring()).
io_uring_sqe* UringReactor::next_sqe() noexcept {
  io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
  if (!sqe && submit_locked() == 0) sqe = io_uring_get_sqe(ring_.get());
  return sqe;
}

bool UringReactor::owns_ring() const noexcept {
  if (!single_issuer_) return true;
  static thread_local const pid_t tid = static_cast<pid_t>(::gettid());
  return owner_.load(std::memory_order_relaxed) == tid;
}

int UringReactor::prep_locked(const Pending& w) noexcept {
  if (w.kind == Pending::kOp) {
    ReactorOp& op = *w.op;
    const unsigned need = op.deadline_ns > 0 ? 2 : 1;  // a linked timeout needs the next SQE
    if (io_uring_sq_space_left(ring_.get()) < need) {
      if (const int e = submit_locked(); e != 0) return e;
      if (io_uring_sq_space_left(ring_.get()) < need) return EAGAIN;
    }
  }
  io_uring_sqe* sqe = next_sqe();
  if (!sqe) return EAGAIN;
  switch (w.kind) {
    case Pending::kPoll:
      io_uring_prep_poll_add(sqe, w.fd, w.dir == kIoReadable ? POLLIN : POLLOUT);
      io_uring_sqe_set_data64(sqe, pack(w.fd, w.dir, w.tag));
      return 0;
    case Pending::kCancelFd:
      io_uring_prep_cancel_fd(sqe, w.fd, IORING_ASYNC_CANCEL_ALL);
      io_uring_sqe_set_data64(sqe, kCancelData);
      return 0;
    case Pending::kCancelOp:
      io_uring_prep_cancel64(sqe, kOpBit | static_cast<uint64_t>(reinterpret_cast<uintptr_t>(w.op)), 0);
      io_uring_sqe_set_data64(sqe, kCancelData);
      return 0;
    case Pending::kCancelPoll:  // the poll of one direction and one life of fd (its tag)
      io_uring_prep_cancel64(sqe, pack(w.fd, w.dir, w.tag), IORING_ASYNC_CANCEL_ALL);
      io_uring_sqe_set_data64(sqe, kCancelData);
      return 0;
    case Pending::kOp: break;
  }
  ReactorOp& op = *w.op;
  switch (op.kind) {
    case ReactorOp::kRecv: io_uring_prep_recv(sqe, op.fd, op.buf, op.len, op.flags); break;
    case ReactorOp::kSend: io_uring_prep_send(sqe, op.fd, op.buf, op.len, op.flags); break;
    case ReactorOp::kRecvmsg: io_uring_prep_recvmsg(sqe, op.fd, op.msg, static_cast<unsigned>(op.flags)); break;
    case ReactorOp::kSendmsg: io_uring_prep_sendmsg(sqe, op.fd, op.msg, static_cast<unsigned>(op.flags)); break;
    case ReactorOp::kAccept: io_uring_prep_accept(sqe, op.fd, op.addr, op.addrlen, op.flags); break;
    case ReactorOp::kConnect: io_uring_prep_connect(sqe, op.fd, op.addr, op.connect_len); break;
  }
  io_uring_sqe_set_data64(sqe, kOpBit | static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&op)));
  if (op.deadline_ns > 0) {
    sqe->flags |= IOSQE_IO_LINK;
    auto* ts = reinterpret_cast<__kernel_timespec*>(op.scratch);
    ts->tv_sec = op.deadline_ns / 1000000000;
    ts->tv_nsec = op.deadline_ns % 1000000000;
    io_uring_sqe* t = io_uring_get_sqe(ring_.get());  // space checked above
    io_uring_prep_link_timeout(t, ts, IORING_TIMEOUT_ABS);  // CLOCK_MONOTONIC = steady_clock
    io_uring_sqe_set_data64(t, kLinkTimeoutData);
  }
  return 0;
}

// Queues w: into the ring if this thread may enter it, else (single issuer, another thread)
// for the owner's next wait(), which wake() brings about. Caller holds sq_mu_.
int UringReactor::queue_locked(const Pending& w) noexcept {
  if (!owns_ring()) {
    try {
      foreign_.push_back(w);
    } catch (...) {
      return ENOMEM;
    }
    wake();
    return 0;
  }
  return prep_locked(w);
}

int UringReactor::arm(const ArmRequest& req, uint32_t* armed) noexcept {
  const uint32_t add = req.want & ~req.armed;  // polls are per request: never duplicate one
  if (!add) {
    *armed = req.armed;
    return 0;
  }
  std::lock_guard<std::mutex> lk(sq_mu_);
  for (uint32_t dir : {kIoReadable, kIoWritable}) {
    if (!(add & dir)) continue;
    if (const int e = queue_locked(Pending{Pending::kPoll, req.fd, dir, req.tag, nullptr}); e != 0) return e;
  }
  // The poller submits queued SQEs with its next wait/poll; if it is blocked in the kernel
  // now, nobody would: submit here (never with a single issuer: the owner is not blocked, it
  // is here, and the others queued for it).
  if (!single_issuer_ && poller_blocked_.load(std::memory_order_relaxed)) {
    if (const int e = submit_locked(); e != 0) return e;
  }
  *armed = req.armed | add;
  return 0;
}

int UringReactor::submit(ReactorOp& op) noexcept {
  tsan_release(&op);  // the poller, maybe on another thread, reads op after the kernel's CQE
  std::lock_guard<std::mutex> lk(sq_mu_);
  if (const int e = queue_locked(Pending{Pending::kOp, op.fd, 0, 0, &op}); e != 0) return e;
  if (!single_issuer_ && poller_blocked_.load(std::memory_order_relaxed)) {
    // As in arm(). SUBMIT_ALL: the kernel takes every SQE; an op it refuses completes with
    // its error, so a failure here is of the ring, not of the op, and the op stays queued.
    (void)submit_locked();
  }
  return 0;
}

// Makes the queued SQEs visible to the kernel (what liburing's submit does before entering)
// and returns how many the kernel has not consumed yet. Caller holds sq_mu_.
unsigned UringReactor::flush_locked() noexcept {
  io_uring_sq* sq = &ring_->sq;
  const unsigned tail = sq->sqe_tail;
  if (sq->sqe_head != tail) {
    sq->sqe_head = tail;
    io_uring_smp_store_release(sq->ktail, tail);
  }
  return tail - io_uring_smp_load_acquire(sq->khead);
}

void UringReactor::disarm(int fd) noexcept {
  // Cancels every request on the file behind fd (its polls hold a reference to the file that
  // would otherwise keep it open after close()). The cancelled polls complete with ECANCELED
  // and their old tag; IOManager drops those. Submitted at once by a thread that may enter the
  // ring; with a single issuer, another thread's cancel waits for the owner's next wait().
  std::lock_guard<std::mutex> lk(sq_mu_);
  if (queue_locked(Pending{Pending::kCancelFd, fd, 0, 0, nullptr}) == 0 && owns_ring()) (void)submit_locked();
}

void UringReactor::disarm_life(int fd, uint32_t tag, bool ops) noexcept {
  std::lock_guard<std::mutex> lk(sq_mu_);
  if (owns_ring()) {  // submitted now: fd still names the file whose requests go
    if (prep_locked(Pending{Pending::kCancelFd, fd, 0, 0, nullptr}) == 0) (void)submit_locked();
    return;
  }
  // Queued for the owner's next wait(), when fd may name another file already (closed, its
  // number reused, a new poll armed here): a cancel by fd would then end the new file's
  // requests and miss the old one's. The polls go by their user_data instead (fd, direction
  // and this life's tag). Ops by fd: a fiber's cancel(fd) waits for them before the close
  // (io_manager.cc protocol 9), so the number is still the old file's when the owner cancels.
  if (ops) (void)queue_locked(Pending{Pending::kCancelFd, fd, 0, 0, nullptr});
  for (uint32_t dir : {kIoReadable, kIoWritable})
    (void)queue_locked(Pending{Pending::kCancelPoll, fd, dir, tag, nullptr});
}

void UringReactor::cancel_op(ReactorOp& op) noexcept {
  // As disarm(), for one op (a cancelled fiber's, sched/cancel.h): it completes with ECANCELED.
  std::lock_guard<std::mutex> lk(sq_mu_);
  if (queue_locked(Pending{Pending::kCancelOp, op.fd, 0, 0, &op}) == 0 && owns_ring()) (void)submit_locked();
}

int UringReactor::wait(ReactorEvent* out, int max, TimePoint deadline) noexcept {
  io_uring* ring = ring_.get();
  const TimePoint t = deadline > TimePoint::min() ? now() : deadline;
  const bool block = deadline > t && io_uring_cq_ready(ring) == 0;
  unsigned to_submit = 0;
  {
    std::lock_guard<std::mutex> lk(sq_mu_);
    if (single_issuer_ && !owns_ring()) {
      if (owner_.load(std::memory_order_relaxed) != 0) return 0;  // not ours to enter (see the header)
      // io_uring_enable_rings() is declared but not exported by Debian 12's liburing 2.3.
      if (::syscall(__NR_io_uring_register, ring->ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0) < 0) return 0;
      owner_.store(static_cast<pid_t>(::gettid()), std::memory_order_relaxed);
    }
    if (!wake_armed_) {
      arm_wake_poll();
      wake_armed_ = true;
    }
    for (const Pending& w : foreign_) (void)prep_locked(w);  // other threads' requests (single issuer)
    foreign_.clear();
    if (!block) {
      // With a single issuer, completions wait as task work until we enter the kernel for them.
      if (io_uring_sq_ready(ring) > 0 || (single_issuer_ && (IO_URING_READ_ONCE(*ring->sq.kflags) & IORING_SQ_TASKRUN)))
        (void)io_uring_submit_and_get_events(ring);
    } else {
      to_submit = flush_locked();
      poller_blocked_.store(true, std::memory_order_relaxed);
    }
  }
  if (block) {
    // One io_uring_enter submits the queued polls and waits. The kernel consumes only SQEs
    // published by flush_locked(); arm() may queue more meanwhile (it submits them itself,
    // since poller_blocked_ is set), and a concurrent submitter just leaves fewer for this one.
    __kernel_timespec ts{};
    io_uring_getevents_arg arg{};
    if (deadline != TimePoint::max()) {
      const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - t).count();
      ts.tv_sec = left / 1000000000;
      ts.tv_nsec = left % 1000000000;
      arg.ts = reinterpret_cast<uint64_t>(&ts);
    }
    // -ETIME / -EINTR / -EBUSY (CQ overflow: reap first): fall through. SQEs the kernel did
    // not take stay queued and go with the next submission.
    (void)io_uring_enter2(static_cast<unsigned>(ring->ring_fd), to_submit, 1,
                          IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG, reinterpret_cast<sigset_t*>(&arg), sizeof arg);
    poller_blocked_.store(false, std::memory_order_relaxed);
  }
  // Not on the stack, as in EpollReactor::wait: a parking fiber's stack often runs this.
  constexpr unsigned kBatch = 256;
  static thread_local io_uring_cqe* cqes[kBatch];
  const unsigned n = io_uring_peek_batch_cqe(ring, cqes, std::min<unsigned>(kBatch, static_cast<unsigned>(max)));
  int k = 0;
  bool rearm_wake = false;
  for (unsigned i = 0; i < n; ++i) {
    const uint64_t ud = cqes[i]->user_data;
    const int res = cqes[i]->res;
    const bool more = cqes[i]->flags & IORING_CQE_F_MORE;
    if (ud & kOpBit) {
      auto* op = reinterpret_cast<ReactorOp*>(static_cast<uintptr_t>(ud & ~kOpBit));
      tsan_acquire(op);  // pairs with submit()'s tsan_release: the kernel ordered them
      op->result = res;
      out[k++] = ReactorEvent{op->fd, 0, 0, 0, op};
      continue;
    }
    const uint32_t mask = static_cast<uint32_t>(ud >> 32) & 0xff;
    if (mask == 0) {
      if (ud == kWakeData) {
        uint64_t v;
        (void)detail::raw_read(wakefd_, &v, sizeof v);  // drain, then clear (see EpollReactor)
        wake_pending_.store(false, std::memory_order_seq_cst);
        if (!more) rearm_wake = true;
      }
      continue;  // kCancelData, kLinkTimeoutData: nothing to do
    }
    uint32_t ready = 0;
    if (res >= 0) {
      const auto ev = static_cast<uint32_t>(res);
      if (ev & (POLLIN | POLLRDHUP | POLLPRI)) ready |= kIoReadable;
      if (ev & POLLOUT) ready |= kIoWritable;
      if (ev & (POLLERR | POLLHUP | POLLNVAL)) ready |= mask;
      ready &= mask;
    } else if (res == -ECANCELED) {
      ready = 0;  // disarm(): IOManager drops the event (old tag) or re-arms if still wanted
    } else {
      ready = mask;  // EBADF and friends: the waiter's own syscall reports the error
    }
    out[k++] = ReactorEvent{static_cast<int>(static_cast<uint32_t>(ud)), ready, mask,  // one-shot
                            static_cast<uint32_t>(ud >> 40)};
  }
  io_uring_cq_advance(ring, n);
  if (rearm_wake) {
    std::lock_guard<std::mutex> lk(sq_mu_);
    arm_wake_poll();
    (void)submit_locked();
  }
  return k;
}

void UringReactor::wake() noexcept { detail::wake_once(wake_pending_, wakefd_); }
}  // namespace lionet
