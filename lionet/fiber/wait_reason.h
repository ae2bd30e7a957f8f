// lionet/fiber/wait_reason.h: what a parked fiber waits for, recorded for fiber dumps
// (sched/fiber_dump.h) and nothing else.
//
// Owns: WaitKind, the per-fiber wait record (Fiber::wait_), and note_wait*(), the calls that
// sync/, io/, sched/ (and file/) make just before they park. Must not: allocate, lock, or
// influence scheduling: the record is diagnostic only, never read to decide anything.
//
// Protocol: a waiter calls note_wait*() right before park() / WaitClaim::wait(); sched/'s
// park() clears the record when the fiber resumes (and when an early unpark lets park()
// return at once). WaitClaim::wait() adds the deadline of a timed wait. Every field is a
// relaxed atomic written only by the fiber itself and read by dumpers on other threads:
// a dumper may see a record that is a moment stale, or (very rarely) the kind of one wait
// with the object of the previous one, which costs a wrong line in a dump and nothing else.
// Dumpers therefore never dereference `object`: it is printed as an address.
#pragma once

#include <atomic>
#include <cstdint>

namespace lionet {

enum class WaitKind : uint8_t {
  kNone = 0,  // nothing recorded (a plain park() by code that records no reason)
  kFdRead,  // io/ IOManager::wait_readable (fd)
  kFdWrite,  // io/ IOManager::wait_writable (fd)
  kSleep,  // this_fiber::sleep_* (deadline)
  kChannelRecv,  // sync/ Channel recv (object: the channel)
  kChannelSend,  // sync/ Channel send (object: the channel)
  kSelect,  // sync/ select over `arg` cases
  kMutex,  // sync/ Mutex
  kSharedMutex,  // sync/ SharedMutex::lock (exclusive)
  kSharedMutexShared,  // sync/ SharedMutex::lock_shared
  kCondVar,  // sync/ CondVar
  kSemaphore,  // sync/ Semaphore
  kWaitGroup,  // sync/ WaitGroup
  kEvent,  // sync/ Event
  kJoin,  // JoinHandle::join (arg: the joined fiber's id)
  kOffload,  // sync/ offload (object: the pool)
  kFileIo,  // file/ async file IO
  kCount_,
};
// Short lowercase words for dumps: "fd read", "channel recv", "mutex", ...
const char* to_string(WaitKind k) noexcept;

// The record inside each Fiber. Writer: the fiber itself (note_wait*, park()); readers: dumps.
struct FiberWaitRecord {
  // kind (bits 0-7) | arg (bits 32-63: fd, select case count, or 0). Written last by
  // note_wait*() so a reader that sees a kind mostly sees its object too (see the top).
  std::atomic<uint64_t> word{0};
  std::atomic<uint64_t> object{0};  // address of the primitive, or a joined fiber's id
  std::atomic<int64_t> deadline_ns{0};  // steady-clock ns of a timed wait's deadline, 0: none

  static uint64_t pack(WaitKind k, uint32_t arg) noexcept {
    return static_cast<uint64_t>(k) | (static_cast<uint64_t>(arg) << 32);
  }
  static WaitKind kind_of(uint64_t w) noexcept { return static_cast<WaitKind>(w & 0xff); }
  static uint32_t arg_of(uint64_t w) noexcept { return static_cast<uint32_t>(w >> 32); }

  // The fiber itself, before it parks. Relaxed: diagnostic data, ordered by nothing.
  void set(WaitKind k, uint64_t obj, uint32_t arg) noexcept {
    deadline_ns.store(0, std::memory_order_relaxed);  // WaitClaim::wait() sets it if timed
    object.store(obj, std::memory_order_relaxed);
    word.store(pack(k, arg), std::memory_order_relaxed);
  }
  // The fiber itself, once resumed (sched/ park()).
  void clear() noexcept {
    word.store(0, std::memory_order_relaxed);
    deadline_ns.store(0, std::memory_order_relaxed);
  }
};

// Records what the running fiber is about to wait for. No-op on a plain thread. Cost: one
// non-inlined current_fiber() call and two relaxed stores; no allocation, no lock.
void note_wait(WaitKind kind, const void* object = nullptr, uint32_t arg = 0) noexcept;
inline void note_wait_fd(int fd, bool write) noexcept {
  note_wait(write ? WaitKind::kFdWrite : WaitKind::kFdRead, nullptr, static_cast<uint32_t>(fd));
}
}  // namespace lionet
