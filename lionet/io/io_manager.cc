// lionet/io/io_manager.cc: IOManager, the scheduler's Driver over a Reactor.
//
// PROTOCOL (everything about one fd happens under that fd's FdEntry::mu)
//
// 1. Waiting. A fiber puts a Waiter (on its stack, holding a WaitClaim) on the fd's list for
//    its direction, then, still under the lock, arms the reactor if the list was empty before
//    or the direction is not armed. Arming is level-checked (reactor.h), so readiness that came
//    before the arm is reported by it: no wake-up is lost between "register" and "arm". The
//    lock is dropped BEFORE the fiber parks in WaitClaim::wait (never hold a lock across a
//    switch). An event that arrives between the unlock and the park is kept by the fiber's
//    NOTIFIED bit (park.h), also when the fiber resumes on another worker.
// 2. Events (the poller: Driver::wait/poll, one thread at a time). Under the lock: drop events
//    whose tag is not the entry's generation (from an earlier life of the fd); clear the
//    directions the event disarmed; for each ready direction unlink EVERY waiter and notify it
//    (they retry their syscall; a spurious wake-up costs one EAGAIN); re-arm the directions
//    that still have waiters. A Waiter is unlinked and its fields read before notify(): after
//    notify the waiter may return and its stack frame is gone.
// 3. Readiness nobody took. If an event finds no waiter for a direction, or every notify()
//    loses to a deadline, the direction is remembered in FdEntry::ready and the next waiter
//    returns 0 at once. Backends with persistent interest (epoll edge-triggered)
//    report a change only once, so forgetting it could hang a later waiter;
//    for one-shot backends it costs at most one extra retry.
// 4. Timeout. WaitClaim's deadline won: the waiter re-takes the lock and unlinks itself if a
//    notifier has not already done so (a notifier that did counts it in WaitList::stragglers
//    until it has, and ~IOManager frees nothing before every count is back to 0). The armed
//    direction stays armed (lazy disarm); the next event with no waiter is remembered as in 3.
// 5. Cancel (before close, and on fd reuse). Under the lock: bump the generation, notify every
//    waiter with kCancelled (-> ECANCELED), disarm the fd in the reactor, forget armed/ready.
//    Events in flight for the old file carry the old generation and are dropped by 2.
// 6. Plain threads (no fiber) never touch the table: they block in ppoll(2) (raw syscall, so
//    the hooked poll() cannot recurse here). cancel() does not wake them.
// 7. A wait on a ready fd returns at once (like poll(2)), also when the caller did not consume
//    what the previous wait reported (unread data, EOF). Backends whose arm() checks the level
//    (io_uring, kqueue: one-shot polls) get this from arming, since every event disarms its
//    direction. Edge-only backends (epoll EPOLLET, Reactor::reports_changes_only) report a
//    level once: when readiness was handed to a waiter (FdEntry::handed) and the direction is
//    still armed, the first new waiter checks the level with a zero-timeout ppoll (after it is
//    registered, so an edge after the check wakes it). That is one ppoll per epoll wait that
//    follows a wait which returned ready, i.e. in the usual read/EAGAIN/wait loop too.
// 8. After a short read (net::Socket: a TCP read returned fewer bytes than asked, so the
//    receive queue was empty) the caller waits as after EAGAIN, saving the read that would say
//    EAGAIN (nginx's `rev->ready = 0`). Only an end of stream or error that came with the
//    bytes just read is not consumed by such a read, and it makes no new edge: so an event's
//    kIoHangup is kept in FdEntry::hangup (until cancel) and such a wait returns 0 at once
//    while it is set (nginx's `pending_eof`). Data that arrives later makes a new edge.
//
// 9. Completion-based operations (backends with Reactor::supports_ops(): io_uring). A fiber
//    submits a ReactorOp (on its stack, inside an OpWait) under the fd's lock, counts it in
//    FdEntry::ops, and parks (plain park(): exactly one unpark, from the op's completion, which
//    the poller dispatches like an event: under the lock it uncounts the op, then unparks; it
//    never touches the OpWait after that). The op's memory is the kernel's until then, so the
//    fiber cannot return earlier: deadlines are the kernel's (a linked timeout cancels the op),
//    and cancel(fd) cancels the fd's ops in the kernel (reactor disarm) and, from a fiber,
//    waits until their completions were dispatched (FdEntry::closers), so no operation outlives
//    the fd's close. An op that completes with -ECANCELED reports ECANCELED if cancel(fd) or
//    cancel_all() happened since it was submitted (the generation moved, or `closed`), else
//    ETIMEDOUT once its deadline has passed; the dispatch decides that before the unpark, as the
//    woken fiber must not touch the IOManager again (~IOManager cancels the ops left, reaps
//    their completions itself once no worker polls it any more, and may be gone by then).
// 10. One ring per worker (io_uring, several workers, IoOptions::uring_ring_per_worker): the
//    IOManager holds one single-issuer reactor per worker (Impl::rings) and is a per-worker
//    driver (sched/ protocol 8c): worker i alone waits in, polls and enters rings[i]. A waiter
//    arms, and a fiber submits its op, in the ring of the worker it runs on (ring_index();
//    threads that are not our workers use rings[0], whose owner their requests are queued
//    for); an event is dispatched by that ring's worker, which re-arms in its own ring, and
//    the fiber it unparks goes to that worker's queue, wherever it ran before. So an fd may
//    have requests in several rings: FdEntry::rings records each ring an arm or submit went
//    to since the last cancel, and cancel (5, 9) and cancel_waiters disarm the fd in every
//    one of them (Reactor::disarm_life, with the life's tag: another worker's ring gets the
//    cancel queued and its worker woken, as a plain thread's request is, and carries it out
//    when fd may already name a new file, so its polls are cancelled by tag, not by fd); an
//    op's own cancel (sched/ protocol 10) goes to the ring it was submitted to. A poll left in
//    another worker's ring keeps the old file open until that worker has run the cancel (it
//    is woken for it): a close's end of stream reaches the peer that much later. Steps 1-9
//    are unchanged: the fd's lock, not the ring, orders them, and a poll armed in one ring
//    while another ring's poll of the same direction is pending is never made (FdEntry::armed
//    is per fd). With one worker, or any other backend, there is one reactor and this step is
//    void.
//
// The fd table: chunks of 1024 entries, allocated on first use and never freed or moved until
// the IOManager dies, so an entry pointer stays valid without a table lock.
#include "lionet/io/io_manager.h"

#include <poll.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "lionet/base/macros.h"
#include "lionet/fiber/fiber.h"
#include "lionet/io/detail/raw_syscall.h"
#include "lionet/io/reactor.h"
#include "lionet/log/log.h"
#include "lionet/sched/park.h"
#include "lionet/sched/scheduler.h"

namespace lionet {
namespace {
constexpr uint32_t kReady = WaitClaim::kNotified;  // 2
constexpr uint32_t kCancelled = 3;
constexpr uint32_t kTagMask = 0x7fffff;  // reactor.h: events keep 23 bits of the tag

struct Waiter {
  WaitClaim* claim;
  Waiter* prev = nullptr;
  Waiter* next = nullptr;
  bool linked = false;
};

// Intrusive FIFO of Waiters. Guarded by the owning FdEntry::mu.
struct WaitList {
  Waiter* head = nullptr;
  Waiter* tail = nullptr;
  // Waiters unlinked by notify_all after their timer had won: each one's fiber still comes
  // back to take the lock (wait()'s timeout path), so ~IOManager waits for them to reach 0.
  uint32_t stragglers = 0;

  bool empty() const noexcept { return head == nullptr; }
  void push_back(Waiter* w) noexcept {
    w->prev = tail;
    w->next = nullptr;
    (tail ? tail->next : head) = w;
    tail = w;
    w->linked = true;
  }
  void remove(Waiter* w) noexcept {
    (w->prev ? w->prev->next : head) = w->next;
    (w->next ? w->next->prev : tail) = w->prev;
    w->prev = w->next = nullptr;
    w->linked = false;
  }
  // Unlinks every waiter and notifies it with `value`. Returns true if at least one notify won.
  bool notify_all(uint32_t value) noexcept {
    bool any = false;
    for (Waiter* w = std::exchange(head, nullptr); w;) {
      Waiter* next = w->next;
      WaitClaim* claim = w->claim;
      w->prev = w->next = nullptr;
      w->linked = false;
      // Last touch: the waiter may run (and return) from here on.
      if (claim->notify(value)) any = true;
      else ++stragglers;  // its timer won: its fiber comes back for the lock
      w = next;
    }
    tail = nullptr;
    return any;
  }
};

struct FdEntry {
  std::mutex mu;
  WaitList waiters[2];  // [0] readers, [1] writers
  uint32_t armed = 0;  // directions armed in the reactor (the reactor's view may be wider)
  uint32_t ready = 0;  // readiness nobody took (protocol 3)
  uint32_t handed = 0;  // readiness handed to a waiter, not known consumed since (protocol 7)
  uint32_t gen = 0;  // bumped by cancel(); tags every arm (protocol 5)
  bool known = false;  // reactor arm() succeeded since the last disarm()
  bool hangup = false;  // an event said kIoHangup since the last cancel() (protocol 8)
  uint32_t ops = 0;  // completion-based operations submitted and not yet dispatched (9)
  // Protocol 10: the reactors (IOManager::Impl::rings, bit i for ring i, bit 31 for 31 and
  // up) an arm or submit went to since the last cancel, so cancel disarms just those.
  uint32_t rings = 0;
  WaitList closers;  // cancel(fd) callers waiting for ops to reach 0 (protocol 9)

  uint32_t waiting_dirs() const noexcept {
    return (waiters[0].empty() ? 0 : kIoReadable) | (waiters[1].empty() ? 0 : kIoWritable);
  }
};

class FdTable {
 public:
  static constexpr int kChunkBits = 10;
  static constexpr int kChunkSize = 1 << kChunkBits;
  static constexpr int kMaxChunks = 1 << 16;  // fds below 64 Mi

  FdTable() : chunks_(new std::atomic<FdEntry*>[kMaxChunks]) {
    for (int i = 0; i < kMaxChunks; ++i) chunks_[i].store(nullptr, std::memory_order_relaxed);
  }
  ~FdTable() {
    for (int i = 0; i < kMaxChunks; ++i) delete[] chunks_[i].load(std::memory_order_relaxed);
  }

  // The entry of fd, created on first use; nullptr if fd is out of range.
  FdEntry* get(int fd) {
    if (fd < 0 || (fd >> kChunkBits) >= kMaxChunks) return nullptr;
    std::atomic<FdEntry*>& slot = chunks_[fd >> kChunkBits];
    // acquire: pairs with the release CAS below, so the chunk's entries are constructed.
    FdEntry* chunk = slot.load(std::memory_order_acquire);
    if (!chunk) {
      auto* fresh = new FdEntry[kChunkSize];
      if (slot.compare_exchange_strong(chunk, fresh, std::memory_order_acq_rel, std::memory_order_acquire)) {
        chunk = fresh;
      } else {
        delete[] fresh;  // another thread installed one first; `chunk` now holds it
      }
    }
    return &chunk[fd & (kChunkSize - 1)];
  }
  // Calls fn(fd, FdEntry&) for every entry of every allocated chunk.
  template <class Fn>
  void for_each(Fn&& fn) {
    for (int i = 0; i < kMaxChunks; ++i)
      if (FdEntry* chunk = chunks_[i].load(std::memory_order_acquire))
        for (int k = 0; k < kChunkSize; ++k) fn(i * kChunkSize + k, chunk[k]);
  }
  // The entry of fd if its chunk exists (never allocates).
  FdEntry* find(int fd) const noexcept {
    if (fd < 0 || (fd >> kChunkBits) >= kMaxChunks) return nullptr;
    FdEntry* chunk = chunks_[fd >> kChunkBits].load(std::memory_order_acquire);
    return chunk ? &chunk[fd & (kChunkSize - 1)] : nullptr;
  }

 private:
  std::unique_ptr<std::atomic<FdEntry*>[]> chunks_;
};

int dir_index(uint32_t dir) { return dir == kIoReadable ? 0 : 1; }

// A plain thread's wait: ppoll with the remaining time, retried on EINTR.
int wait_on_thread(int fd, uint32_t dir, std::optional<TimePoint> deadline) noexcept {
  pollfd p{fd, static_cast<short>(dir == kIoReadable ? POLLIN : POLLOUT), 0};
  for (;;) {
    timespec ts{};
    timespec* tsp = nullptr;
    if (deadline) {
      const TimePoint t = now();
      const auto left = *deadline > t ? std::chrono::duration_cast<std::chrono::nanoseconds>(*deadline - t)
                                      : std::chrono::nanoseconds(0);
      ts.tv_sec = static_cast<time_t>(left.count() / 1000000000);
      ts.tv_nsec = static_cast<long>(left.count() % 1000000000);
      tsp = &ts;
    }
    const int r = detail::raw_ppoll(&p, 1, tsp);
    if (r > 0) return (p.revents & POLLNVAL) ? EBADF : 0;
    if (r == 0) return ETIMEDOUT;  // ppoll has nanosecond resolution and never returns early
    if (errno != EINTR) return errno;
  }
}

// single_issuer: the ring will be entered by one worker thread only (a one-worker scheduler,
// or one ring per worker), so io_uring can take the single-issuer ring (uring_reactor.h): its
// completions run in one batch when that worker waits.
std::unique_ptr<Reactor> choose_reactor(const IOManagerOptions& o, bool single_issuer) {
  const ReactorOptions ro{.uring_entries = o.uring_entries, .uring_single_issuer = single_issuer};
  const char* fallback = compiled_reactors()[0];  // the platform's first: the "auto" choice
  LIONET_CHECK(fallback != nullptr, "no IO backend is compiled into this build");
  try {
    return make_reactor(o.backend == "auto" ? std::string(fallback) : o.backend, ro);
  } catch (const std::system_error& e) {
    if (o.backend == fallback) throw;
    static const auto lg = log::get("io");
    LIONET_LOG_INFO(lg, "IO backend '{}' is unavailable ({}); using {}", o.backend, e.what(), fallback);
    return make_reactor(fallback, ro);
  }
}
}  // namespace

#if !defined(__linux__)
int detail::raw_ppoll(pollfd* fds, unsigned long n, const timespec* ts) noexcept {
  int ms = -1;
  if (ts) ms = static_cast<int>(ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000);
  return ::poll(fds, static_cast<nfds_t>(n), ms);
}
#endif

// A completion-based operation and its fiber (protocol 9); lives on that fiber's stack.
struct OpWait : ReactorOp {
  OpWait(Kind k, int f, int fl) noexcept {
    kind = k;
    fd = f;
    flags = fl;
  }
  Parker parker = Parker::current();
  uint32_t gen = 0;  // the fd's generation when submitted (under its lock)
};

// A cancelled fiber's op (sched/ protocol 10): a = the Reactor it went to, b = the OpWait.
void cancel_op_of(void* reactor, void* op) noexcept {
  static_cast<Reactor*>(reactor)->cancel_op(*static_cast<ReactorOp*>(op));
}

// Protocol 10: one single-issuer io_uring ring per worker (IoOptions::uring_ring_per_worker)?
bool want_ring_per_worker(const IOManagerOptions& o, int threads) {
  return threads > 1 && o.uring_ring_per_worker && (o.backend == "io_uring");
}

struct IOManager::Impl {
  Scheduler& sched;
  IOManagerOptions opts;
  // One reactor, or one per worker (protocol 10): rings[i] is waited in and polled by worker i
  // only. `reactor` is rings[0]: the backend's name and capabilities, and the ring of threads
  // that are not our workers.
  std::vector<std::unique_ptr<Reactor>> rings;
  Reactor* reactor;
  FdTable table;
  // One per ring, written only by that ring's poller (one thread at a time, driver.h): no lock.
  std::vector<std::vector<ReactorEvent>> events;

  Impl(Scheduler& s, IOManagerOptions o)
      : sched(s),
        opts(std::move(o)),
        rings(make_rings(opts, s.threads())),
        reactor(rings[0].get()),
        completion_io(opts.uring_socket_ops && reactor->supports_ops() &&
                      (reactor->single_issuer() || opts.uring_shared_ring_ops)) {
    events.resize(rings.size());
    for (auto& v : events) v.resize(static_cast<std::size_t>(opts.max_events > 0 ? opts.max_events : 256));
    if (opts.uring_socket_ops && std::string_view(reactor->name()) == "io_uring" && !reactor->supports_ops()) {
      static const auto lg = log::get("io");
      LIONET_LOG_INFO(lg,
                      "this kernel's io_uring lacks an operation of the completion-based socket calls (probe); "
                      "sockets wait for readiness instead");
    }
  }
  const bool completion_io;  // IOManager::completion_io()

  static std::vector<std::unique_ptr<Reactor>> make_rings(const IOManagerOptions& o, int threads) {
    const bool per_worker = want_ring_per_worker(o, threads);
    std::vector<std::unique_ptr<Reactor>> v;
    v.push_back(choose_reactor(o, threads == 1 || per_worker));
    // Only if the first became a single-issuer io_uring ring (not a fallback to epoll, not an
    // older kernel's shared ring): else the one reactor is shared by every worker.
    if (per_worker && v[0]->single_issuer()) {
      const ReactorOptions ro{.uring_entries = o.uring_entries, .uring_single_issuer = true};
      for (int i = 1; i < threads; ++i) v.push_back(make_reactor(v[0]->name(), ro));
    }
    return v;
  }
  // The index into rings of the calling thread: its worker's, or 0 (not one of our workers).
  std::size_t ring_index() const noexcept {
    if (rings.size() == 1) return 0;
    const int i = this_fiber::worker_index();
    if (i <= 0 || static_cast<std::size_t>(i) >= rings.size() || Scheduler::current() != &sched) return 0;
    return static_cast<std::size_t>(i);
  }
  static uint32_t ring_bit(std::size_t i) noexcept { return 1u << std::min<std::size_t>(i, 31); }
  // Disarms the life `tag` of fd (Reactor::disarm_life) in every ring of `mask` (FdEntry::
  // rings); with one reactor, in it. Caller holds e.mu.
  void disarm(int fd, uint32_t mask, uint32_t tag, bool ops) noexcept {
    for (std::size_t i = 0; i < rings.size(); ++i)
      if (rings.size() == 1 || (mask & ring_bit(i))) rings[i]->disarm_life(fd, tag, ops);
  }

  // cancel_all() ran: every wait fails with ECANCELED. Set before the sweep of the table and
  // read under each entry's lock, so a waiter either sees it or is swept.
  std::atomic<bool> closed{false};

  // kLevel: wait_readable/writable. kAfterEagain: the caller saw EAGAIN (protocol 7).
  // kAfterShortRead: the caller's read returned short (protocol 8).
  enum class Mode { kLevel, kAfterEagain, kAfterShortRead };
  int wait(int fd, uint32_t dir, std::optional<TimePoint> deadline, Mode mode) noexcept;
  void cancel_waiters() noexcept;  // every waiter of every fd, with ECANCELED
  int run(TimePoint deadline) noexcept;  // events dispatched
  void dispatch(const ReactorEvent& ev) noexcept;
  // wait_ops: from a fiber, return only once the fd's completion-based ops have ended (9).
  void cancel(int fd, bool wait_ops) noexcept;
  // Arms the directions with waiters that are not armed; on failure wakes those waiters with
  // kReady so their next syscall reports the error. Caller holds e.mu.
  void rearm(int fd, FdEntry& e) noexcept;
  // Protocol 9. perform() returns the op's result (>= 0) or -errno.
  int64_t perform(OpWait& w, bool write, std::optional<TimePoint> deadline) noexcept;
  void complete(ReactorOp* op) noexcept;
  void drain_ops(bool attached) noexcept;
  void await_stragglers() noexcept;
  std::atomic<int64_t> ops_in_flight{0};
};

int IOManager::Impl::wait(int fd, uint32_t dir, std::optional<TimePoint> deadline, Mode mode) noexcept {
  const bool after_eagain = mode != Mode::kLevel;
  if (fd < 0) return EBADF;
  if (!current_fiber()) return wait_on_thread(fd, dir, deadline);
  FdEntry* e = table.get(fd);
  if (!e) return wait_on_thread(fd, dir, deadline);  // fd beyond the table: block (never here in practice)
  WaitList& list = e->waiters[dir_index(dir)];
  WaitClaim claim;
  Waiter w{&claim};
  {
    std::lock_guard<std::mutex> lk(e->mu);
    if (closed.load(std::memory_order_seq_cst)) return ECANCELED;
    if (e->ready & dir) {  // protocol 3
      e->ready &= ~dir;
      e->handed |= dir;
      return 0;
    }
    if (mode == Mode::kAfterShortRead && e->hangup) return 0;  // protocol 8
    if (after_eagain) e->handed &= ~dir;  // the caller saw the level drained (protocol 7)
    const bool first = list.empty();
    list.push_back(&w);
    if (first && (e->handed & dir) && (e->armed & dir) && reactor->reports_changes_only()) {
      // Protocol 7: the last readiness went to a waiter and no arm() will look at the fd.
      pollfd p{fd, static_cast<short>(dir == kIoReadable ? POLLIN : POLLOUT), 0};
      const timespec zero{};
      if (detail::raw_ppoll(&p, 1, &zero) != 0) {  // ready (or an error: the syscall reports it)
        list.remove(&w);
        return 0;
      }
      e->handed &= ~dir;  // drained: the next change is reported (we are registered already)
    }
    if (first || !(e->armed & dir)) {
      uint32_t armed = 0;
      const std::size_t ri = ring_index();
      const int err = rings[ri]->arm(ArmRequest{fd, e->waiting_dirs(), e->armed, e->known, e->gen}, &armed);
      if (err != 0) {
        list.remove(&w);
        return err == EPERM ? 0 : err;  // EPERM: not pollable (a regular file), always ready
      }
      e->armed = armed;
      e->known = true;
      e->rings |= ring_bit(ri);
    }
  }
  note_wait_fd(fd, dir == kIoWritable);  // for fiber dumps (fiber/wait_reason.h)
  const uint32_t v = claim.wait(deadline);
  if (v == WaitClaim::kTimedOut) {
    std::lock_guard<std::mutex> lk(e->mu);
    if (w.linked) list.remove(&w);
    else --list.stragglers;  // the last touch of this IOManager (await_stragglers)
    return detail::interrupted_errno(current_fiber());  // ETIMEDOUT, or ECANCELED (sched/cancel.h)
  }
  return v == kCancelled ? ECANCELED : 0;
}

void IOManager::Impl::rearm(int fd, FdEntry& e) noexcept {
  const uint32_t need = e.waiting_dirs();
  if (!(need & ~e.armed)) return;
  uint32_t armed = 0;
  const std::size_t ri = ring_index();  // the poller's own ring (protocol 10)
  const int err = rings[ri]->arm(ArmRequest{fd, need, e.armed, e.known, e.gen}, &armed);
  if (err == 0) {
    e.armed = armed;
    e.known = true;
    e.rings |= ring_bit(ri);
    return;
  }
  for (int d = 0; d < 2; ++d)
    if (need & ~e.armed & (1u << d)) e.waiters[d].notify_all(kReady);
}

int64_t IOManager::Impl::perform(OpWait& w, bool write, std::optional<TimePoint> deadline) noexcept {
  if (!completion_io || !current_fiber()) return -ENOTSUP;
  if (w.fd < 0) return -EBADF;
  FdEntry* e = table.get(w.fd);
  if (!e) return -EBADF;  // beyond the table (never here in practice)
  // Protocol 10 (sched/cancel.h): the fiber's deadline joins the op's; a cancel cancels the op.
  Fiber* const self = w.parker.fiber();
  const bool interruptible = detail::interruptible(*self);
  if (interruptible && self->cancel_.deadline_ns != detail::CancelState::kNoDeadline) {
    const TimePoint fiber_dl = from_ns(self->cancel_.deadline_ns);
    if (!deadline || fiber_dl < *deadline) deadline = fiber_dl;
  }
  if (deadline) {
    const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline->time_since_epoch()).count();
    w.deadline_ns = std::max<int64_t>(ns, 1);  // 0 means "none"
  }
  const std::size_t ri = ring_index();  // no switch before the park: the op stays in this ring
  Reactor& ring = *rings[ri];
  {
    std::lock_guard<std::mutex> lk(e->mu);
    if (closed.load(std::memory_order_seq_cst)) return -ECANCELED;
    if (const int err = ring.submit(w)) return -err;
    w.gen = e->gen;
    ++e->ops;
    e->rings |= ring_bit(ri);
    ops_in_flight.fetch_add(1, std::memory_order_relaxed);
  }
  note_wait_fd(w.fd, write);
  if (interruptible && !detail::begin_wait(*self, &cancel_op_of, &ring, &w)) ring.cancel_op(w);
  park();  // exactly one unpark: complete(), which also settled ECANCELED vs ETIMEDOUT
  if (interruptible) detail::end_wait(*self);
  // Nothing of this IOManager may be touched from here: ~IOManager may have cancelled the op,
  // reaped it and freed the fd table before this fiber runs again.
  return w.result;
}

void IOManager::Impl::complete(ReactorOp* op) noexcept {
  auto* w = static_cast<OpWait*>(op);
  const Parker p = w->parker;
  if (FdEntry* e = table.find(op->fd)) {
    std::lock_guard<std::mutex> lk(e->mu);
    // A cancelled op timed out if neither cancel(fd) nor cancel_all() ended it and its
    // deadline has passed; else (those, or ~IOManager) it reports ECANCELED.
    if (w->result == -ECANCELED && !closed.load(std::memory_order_seq_cst) && e->gen == w->gen && w->deadline_ns != 0 &&
        now().time_since_epoch() >= std::chrono::nanoseconds(w->deadline_ns))
      w->result = -ETIMEDOUT;
    if (--e->ops == 0) e->closers.notify_all(kReady);
  }
  ops_in_flight.fetch_sub(1, std::memory_order_relaxed);
  p.unpark();  // the last touch: the fiber may return (and its OpWait go) from here on
}

void IOManager::Impl::dispatch(const ReactorEvent& ev) noexcept {
  if (ev.op) return complete(ev.op);
  FdEntry* e = table.find(ev.fd);
  if (!e) return;
  std::lock_guard<std::mutex> lk(e->mu);
  if ((ev.tag & kTagMask) != (e->gen & kTagMask)) return;  // an earlier life of the fd
  e->armed &= ~ev.disarmed;
  if (ev.ready & kIoHangup) e->hangup = true;  // protocol 8
  for (int d = 0; d < 2; ++d) {
    const uint32_t bit = 1u << d;
    if (!(ev.ready & bit)) continue;
    if (!e->waiters[d].notify_all(kReady)) {
      e->ready |= bit;  // protocol 3
    } else {
      e->handed |= bit;  // protocol 7
    }
  }
  rearm(ev.fd, *e);
}

int IOManager::Impl::run(TimePoint deadline) noexcept {
  const std::size_t ri = ring_index();  // protocol 10: a worker waits in its own ring
  std::vector<ReactorEvent>& ev = events[ri];
  const int n = rings[ri]->wait(ev.data(), static_cast<int>(ev.size()), deadline);
  for (int i = 0; i < n; ++i) dispatch(ev[i]);
  return n;
}

void IOManager::Impl::cancel(int fd, bool wait_ops) noexcept {
  FdEntry* e = table.find(fd);
  if (!e) return;
  std::unique_lock<std::mutex> lk(e->mu);
  const uint32_t life = e->gen++;  // the tag of every arm since the last cancel
  e->waiters[0].notify_all(kCancelled);
  e->waiters[1].notify_all(kCancelled);
  if (e->known || e->armed || e->ops) disarm(fd, e->rings, life, e->ops != 0);
  e->rings = 0;
  e->armed = 0;
  e->ready = 0;
  e->handed = 0;
  e->known = false;
  e->hangup = false;
  if (e->ops == 0 || !wait_ops || !current_fiber()) return;
  // Protocol 9: the kernel has been told to cancel; wait for the completions, so that no
  // operation outlives the close that follows. Cancelling a socket op that waits for readiness
  // completes at once; the bound only keeps a broken kernel from hanging the closer.
  WaitClaim claim;
  Waiter w{&claim};
  e->closers.push_back(&w);
  lk.unlock();
  if (claim.wait(now() + std::chrono::seconds(5)) == WaitClaim::kTimedOut) {
    lk.lock();
    if (w.linked) e->closers.remove(&w);
    else --e->closers.stragglers;
  }
}

void IOManager::Impl::cancel_waiters() noexcept {
  table.for_each([this](int fd, FdEntry& e) {
    std::lock_guard<std::mutex> lk(e.mu);
    e.waiters[0].notify_all(kCancelled);
    e.waiters[1].notify_all(kCancelled);
    // Ops end through their completions (protocol 9): have the kernel cancel them now.
    if (e.ops) disarm(fd, e.rings, e.gen, true);
  });
}

// Protocol 9, for ~IOManager, right after cancel_waiters() told the kernel to cancel the ops
// left: waits until their completions have been dispatched, so no fiber stays parked on an op
// nobody would ever dispatch. While the scheduler still polls this IOManager (attached), its
// poller dispatches them; once detached, this thread reaps them itself, except from a
// single-issuer ring, which only its worker may enter (the caller drains that one while still
// attached).
void IOManager::Impl::drain_ops(bool attached) noexcept {
  if (ops_in_flight.load(std::memory_order_relaxed) == 0) return;
  const TimePoint give_up = now() + std::chrono::seconds(10);
  while (ops_in_flight.load(std::memory_order_relaxed) > 0 && now() < give_up) {
    if (attached || reactor->single_issuer()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    else run(now() + std::chrono::milliseconds(10));
  }
}

// For ~IOManager, after the last cancel_waiters(): a wait whose deadline passed just before it
// was cancelled has its fiber come back to unlink itself under the fd's lock (wait()); the
// table may be freed only once every such fiber has (WaitList::stragglers).
void IOManager::Impl::await_stragglers() noexcept {
  const auto left = [this] {
    uint32_t n = 0;
    table.for_each([&n](int, FdEntry& e) {
      std::lock_guard<std::mutex> lk(e.mu);
      n += e.waiters[0].stragglers + e.waiters[1].stragglers + e.closers.stragglers;
    });
    return n;
  };
  const TimePoint give_up = now() + std::chrono::seconds(10);
  CancelShield shield;  // the stragglers touch *this: wait for them even in a cancelled fiber
  while (left() > 0 && now() < give_up)
    this_fiber::sleep_for(std::chrono::milliseconds(1));  // in a fiber: lets them run on this worker
}

namespace {
// The IOManagers alive now, for cancel_if_alive(). A shared lock per look-up: taken when a
// Socket closes, not per IO call.
std::shared_mutex g_live_mu;
std::vector<const IOManager*>& live_managers() {
  static auto* v = new std::vector<const IOManager*>;  // never destroyed: sockets may close late
  return *v;
}

}  // namespace

// ---------------------------------------------------------------- public API

IOManager::IOManager(Scheduler& sched, IOManagerOptions options)
    : impl_(std::make_unique<Impl>(sched, std::move(options))) {
  {
    std::unique_lock<std::shared_mutex> lk(g_live_mu);
    live_managers().push_back(this);
  }
  sched.set_driver(this);
}

IOManager::~IOManager() {
  {
    std::unique_lock<std::shared_mutex> lk(g_live_mu);
    auto& v = live_managers();
    v.erase(std::remove(v.begin(), v.end(), this), v.end());
  }
  Scheduler& s = impl_->sched;
  if (s.driver() == this) {
    // Fibers still waiting here would never be woken once we are gone: they see ECANCELED (and
    // their next wait goes to the scheduler's own driver, or to plain libc without one).
    impl_->cancel_waiters();
    if (impl_->reactor->single_issuer()) impl_->drain_ops(/*attached=*/true);  // only its worker reaps it
    Driver* own = s.own_driver();
    s.set_driver(own != this ? own : nullptr);  // returns once no worker is inside us
  }
  impl_->cancel_waiters();  // a waiter that raced the hand-over
  impl_->drain_ops(/*attached=*/false);
  impl_->await_stragglers();
}

void IOManager::cancel_all() noexcept {
  impl_->closed.store(true, std::memory_order_seq_cst);
  impl_->cancel_waiters();
}

void IOManager::cancel_if_alive(IOManager* io, int fd) noexcept {
  if (!io) return;
  std::shared_lock<std::shared_mutex> lk(g_live_mu);
  const auto& v = live_managers();
  // Without waiting for the fd's ops (protocol 9): that would park while holding g_live_mu. Its
  // users (net::Socket) close the fd only once every call on it has returned, ops included.
  if (std::find(v.begin(), v.end(), io) != v.end()) io->impl_->cancel(fd, /*wait_ops=*/false);
}

IOManager* IOManager::of(const Scheduler& sched) noexcept { return dynamic_cast<IOManager*>(sched.driver()); }
}  // namespace lionet

// Every Scheduler's own driver (sched/driver.h). This file is in every program that links the
// hooks (hook.cc refers to IOManager), which the library's link options force.
extern "C" lionet::Driver* lionet_make_io_driver(lionet::Scheduler& sched, const lionet::IoOptions& options) {
  return new lionet::IOManager(sched, options);
}

namespace lionet {

int IOManager::wait_readable(int fd, std::optional<TimePoint> deadline) {
  return impl_->wait(fd, kIoReadable, deadline, Impl::Mode::kLevel);
}
int IOManager::wait_writable(int fd, std::optional<TimePoint> deadline) {
  return impl_->wait(fd, kIoWritable, deadline, Impl::Mode::kLevel);
}
int IOManager::wait_readable_after_eagain(int fd, std::optional<TimePoint> deadline) {
  return impl_->wait(fd, kIoReadable, deadline, Impl::Mode::kAfterEagain);
}
int IOManager::wait_readable_after_short_read(int fd, std::optional<TimePoint> deadline) {
  return impl_->wait(fd, kIoReadable, deadline, Impl::Mode::kAfterShortRead);
}
int IOManager::wait_writable_after_eagain(int fd, std::optional<TimePoint> deadline) {
  return impl_->wait(fd, kIoWritable, deadline, Impl::Mode::kAfterEagain);
}
void IOManager::cancel(int fd) { impl_->cancel(fd, /*wait_ops=*/true); }

bool IOManager::completion_io() const noexcept { return impl_->completion_io; }

int64_t IOManager::recv(int fd, void* buf, std::size_t n, int flags, std::optional<TimePoint> deadline) noexcept {
  OpWait w(ReactorOp::kRecv, fd, flags);
  w.buf = buf;
  w.len = n;
  return impl_->perform(w, false, deadline);
}

int64_t IOManager::recvmsg(int fd, msghdr* msg, int flags, std::optional<TimePoint> deadline) noexcept {
  OpWait w(ReactorOp::kRecvmsg, fd, flags);
  w.msg = msg;
  return impl_->perform(w, false, deadline);
}

// The const_casts below: the kernel only reads these.
int64_t IOManager::send(int fd, const void* buf, std::size_t n, int flags, std::optional<TimePoint> deadline) noexcept {
  OpWait w(ReactorOp::kSend, fd, flags);
  w.buf = const_cast<void*>(buf);
  w.len = n;
  return impl_->perform(w, true, deadline);
}

int64_t IOManager::sendmsg(int fd, const msghdr* msg, int flags, std::optional<TimePoint> deadline) noexcept {
  OpWait w(ReactorOp::kSendmsg, fd, flags);
  w.msg = const_cast<msghdr*>(msg);
  return impl_->perform(w, true, deadline);
}

int64_t IOManager::accept(int fd, sockaddr* addr, socklen_t* len, int flags,
                          std::optional<TimePoint> deadline) noexcept {
  OpWait w(ReactorOp::kAccept, fd, flags);
  w.addr = addr;
  w.addrlen = len;
  return impl_->perform(w, false, deadline);
}

int64_t IOManager::connect(int fd, const sockaddr* addr, socklen_t len, std::optional<TimePoint> deadline) noexcept {
  OpWait w(ReactorOp::kConnect, fd, 0);
  w.addr = const_cast<sockaddr*>(addr);
  w.connect_len = len;
  return impl_->perform(w, true, deadline);
}

int IOManager::waiting(int fd) const noexcept {
  FdEntry* e = impl_->table.find(fd);
  if (!e) return 0;
  std::lock_guard<std::mutex> lk(e->mu);
  int n = static_cast<int>(e->ops);
  for (const WaitList& l : e->waiters)
    for (Waiter* w = l.head; w; w = w->next) ++n;
  return n;
}
const char* IOManager::backend() const noexcept { return impl_->reactor->name(); }
Scheduler& IOManager::scheduler() const noexcept { return impl_->sched; }

// No UBSan vptr check here: hooked calls (pipe2, socket, ...) call this, and the check itself
// calls pipe2 (sanitizer_common's IsAccessibleMemoryRange), which is hooked: infinite recursion
// on a worker thread (the clang fuzz build found it). The cast is of the scheduler's own driver,
// a live object by construction.
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 8)
__attribute__((no_sanitize("vptr")))
#endif
IOManager*
IOManager::current() noexcept {
  Scheduler* s = Scheduler::current();
  return s ? dynamic_cast<IOManager*>(s->driver()) : nullptr;
}

void IOManager::wait(TimePoint deadline) noexcept { impl_->run(deadline); }
bool IOManager::poll() noexcept { return impl_->run(TimePoint::min()) > 0; }
void IOManager::wake() noexcept {
  for (const auto& r : impl_->rings) r->wake();
}
bool IOManager::per_worker() const noexcept { return impl_->rings.size() > 1; }
void IOManager::wake_worker(int index) noexcept {
  if (index >= 0 && static_cast<std::size_t>(index) < impl_->rings.size())
    impl_->rings[static_cast<std::size_t>(index)]->wake();
  else wake();
}
}  // namespace lionet
