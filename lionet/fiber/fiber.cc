// lionet/fiber/fiber.cc: fiber identity, body execution, fiber-local storage; see fiber.h.
#include "lionet/fiber/fiber.h"

#include <atomic>
#include <utility>

#include "lionet/base/fiber_id.h"
#include "lionet/base/object_cache.h"
#include "lionet/fiber/fiber_local.h"
#include "lionet/fiber/fiber_registry.h"

namespace lionet {
namespace {
// Ids are never reused; relaxed: uniqueness needs only atomicity, not ordering.
std::atomic<uint64_t> g_next_id{1};

uint64_t fiber_id_for_log() noexcept {
  Fiber* f = current_fiber();
  return f ? f->id() : 0;
}

// Registers the provider for log/ before main(); plain function pointer, no allocation.
const bool g_provider_registered = [] {
  base::set_fiber_id_provider(&fiber_id_for_log);
  return true;
}();
}  // namespace

const char* to_string(FiberState s) noexcept {
  switch (s) {
    case FiberState::kCreated: return "created";
    case FiberState::kRunnable: return "runnable";
    case FiberState::kRunning: return "running";
    case FiberState::kParked: return "parked";
    case FiberState::kDone: return "done";
  }
  return "?";
}

// Ids come in per-thread blocks so that threads spawning at the same time do not contend on
// one cache line; they stay unique (never reused) but are not globally ordered by spawn time.
uint64_t next_fiber_id() noexcept {
  constexpr uint64_t kBlock = 1024;
  thread_local uint64_t next = 0, end = 0;
  if (next == end) {
    next = g_next_id.fetch_add(kBlock, std::memory_order_relaxed);
    end = next + kBlock;
  }
  return next++;
}

void Fiber::set_name(std::string_view n) {
  if (FiberRegistryShard* shard = reg_shard_) {
    std::string copy(n);  // allocate outside the spinlock
    std::lock_guard<SpinLock> lk(shard->lock());
    name_.swap(copy);
    return;  // the old name is freed here, outside the lock
  }
  name_ = n;
}

const char* to_string(WaitKind k) noexcept {
  switch (k) {
    case WaitKind::kNone: return "unknown";
    case WaitKind::kFdRead: return "fd read";
    case WaitKind::kFdWrite: return "fd write";
    case WaitKind::kSleep: return "sleep timer";
    case WaitKind::kChannelRecv: return "channel recv";
    case WaitKind::kChannelSend: return "channel send";
    case WaitKind::kSelect: return "select";
    case WaitKind::kMutex: return "mutex";
    case WaitKind::kSharedMutex: return "shared mutex (exclusive)";
    case WaitKind::kSharedMutexShared: return "shared mutex (shared)";
    case WaitKind::kCondVar: return "cond var";
    case WaitKind::kSemaphore: return "semaphore";
    case WaitKind::kWaitGroup: return "wait group";
    case WaitKind::kEvent: return "event";
    case WaitKind::kJoin: return "join";
    case WaitKind::kOffload: return "offload";
    case WaitKind::kFileIo: return "file io";
    case WaitKind::kCount_: break;
  }
  return "?";
}

void note_wait(WaitKind kind, const void* object, uint32_t arg) noexcept {
  if (Fiber* f = current_fiber()) f->wait_.set(kind, reinterpret_cast<uintptr_t>(object), arg);
}

namespace {
constexpr std::size_t kObjectClassBytes = 64;
constexpr std::size_t kObjectClasses = 16;  // objects up to 1 KiB are cached

constexpr std::size_t object_class(std::size_t size) noexcept { return (size - 1) / kObjectClassBytes; }

// Size class c's per-thread cache (base/object_cache.h); dispatched at run time over the classes.
template <std::size_t C>
using ClassCache = base::ObjectCache<(C + 1) * kObjectClassBytes, Fiber::kObjectCacheDepth>;

template <std::size_t... C>
void* allocate_in_class(std::size_t c, std::size_t size, std::index_sequence<C...>) {
  void* p = nullptr;
  (void)((c == C ? (p = ClassCache<C>::allocate(size), true) : false) || ...);
  return p;
}
template <std::size_t... C>
void deallocate_in_class(std::size_t c, void* p, std::index_sequence<C...>) noexcept {
  (void)((c == C ? (ClassCache<C>::deallocate(p), true) : false) || ...);
}
}  // namespace

void* Fiber::operator new(std::size_t size) {
  const std::size_t c = object_class(size);
  if (c >= kObjectClasses) return ::operator new(size);
  return allocate_in_class(c, size, std::make_index_sequence<kObjectClasses>{});
}

void Fiber::operator delete(void* p, std::size_t size) noexcept {
  const std::size_t c = object_class(size);
  if (c >= kObjectClasses) {
    ::operator delete(p);
    return;
  }
  deallocate_in_class(c, p, std::make_index_sequence<kObjectClasses>{});
}

Fiber::Fiber(int pinned_worker) noexcept : id_(next_fiber_id()), pinned_worker_(pinned_worker) {}

Fiber::~Fiber() {
  for (size_t i = 0; i < locals_.size(); ++i) {
    if (locals_[i] && local_deleters_[i].fn) local_deleters_[i].fn(locals_[i]);
  }
  detail::destroy_context(ctx_);
}

void Fiber::run_body() noexcept {
  try {
    body();
  } catch (...) {
    exception_ = std::current_exception();
  }
}

void Fiber::set_local(size_t slot, void* value, void (*deleter)(void*)) {
  if (slot >= locals_.size()) {
    locals_.resize(slot + 1, nullptr);
    local_deleters_.resize(slot + 1, LocalDeleter{nullptr});
  }
  if (locals_[slot] && local_deleters_[slot].fn && locals_[slot] != value) local_deleters_[slot].fn(locals_[slot]);
  locals_[slot] = value;
  local_deleters_[slot].fn = deleter;
}

namespace detail {
constinit thread_local Fiber* t_current_fiber = nullptr;
}  // namespace detail

// Read through a non-inlined function with a compiler barrier so that no caller can keep a value
// (or this variable's address) from before a switch.
[[gnu::noinline]] Fiber* current_fiber() noexcept {
  asm volatile("" ::: "memory");  // not `pure`: the value changes across switches
  return detail::t_current_fiber;
}
}  // namespace lionet

namespace lionet::detail {
std::size_t allocate_fiber_local_slot() noexcept {
  static std::atomic<std::size_t> next{0};  // relaxed: only uniqueness matters
  return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace lionet::detail
