// lionet/fiber/fiber.cc: fiber identity, body execution, fiber-local storage; see fiber.h.
#include "lionet/fiber/fiber.h"

#include <sys/mman.h>

#include <atomic>
#include <mutex>
#include <new>
#include <utility>

#include "lionet/base/fiber_id.h"
#include "lionet/base/spinlock.h"
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
constexpr std::size_t kObjectClasses = 16;  // objects up to 1 KiB are pooled

constexpr std::size_t object_class(std::size_t size) noexcept { return (size - 1) / kObjectClassBytes; }

#if defined(LIONET_ASAN) || defined(__SANITIZE_ADDRESS__)
// ASan builds: every object from the global allocator, so ASan sees every use after free. TSan
// builds keep the pool, so that its hand-offs between threads are checked too.
void* pool_allocate(std::size_t, std::size_t size) { return ::operator new(size); }
void pool_deallocate(std::size_t, void* p) noexcept { ::operator delete(p); }
#else
// The fiber object pool. Blocks of size class c ((c + 1) x 64 bytes) sit on per-thread free
// lists; a list that grows past kObjectCacheDepth hands a batch of kBatch blocks to the class's
// global depot, and an empty list takes a batch back from it, else carves kBatch new blocks
// from the thread's current chunk (kChunkBytes, mmap'ed). Memory is never returned: the pool
// holds the peak number of live fiber objects (about 300 bytes each), as a slab allocator does.
//
// Why not malloc: glibc grows a thread's arena one page at a time with mprotect(), which takes
// the process's mmap lock for writing; a million spawns made a hundred thousand of those calls,
// and every page fault of the other worker (each new fiber's first stack page) waited behind
// them (issue 43: about a fifth of the time until a million fibers were parked). Here one mmap
// serves about 800 fibers.
constexpr std::size_t kBatch = 64;
constexpr std::size_t kChunkBytes = 256 * 1024;

// A free block. The first block of a batch in the depot also links the batches and counts them.
struct FreeBlock {
  FreeBlock* next;
  FreeBlock* next_batch;
  std::size_t count;
};
static_assert(sizeof(FreeBlock) <= kObjectClassBytes);

struct Depot {
  SpinLock mu;  // a push or pop of one batch: a few instructions
  FreeBlock* batches = nullptr;
};
constinit Depot g_depots[kObjectClasses];

void depot_push(std::size_t c, FreeBlock* head, std::size_t count) noexcept {
  head->count = count;
  std::lock_guard<SpinLock> lk(g_depots[c].mu);
  head->next_batch = g_depots[c].batches;
  g_depots[c].batches = head;
}

FreeBlock* depot_pop(std::size_t c, std::size_t* count) noexcept {
  std::lock_guard<SpinLock> lk(g_depots[c].mu);
  FreeBlock* head = g_depots[c].batches;
  if (head) {
    g_depots[c].batches = head->next_batch;
    *count = head->count;
  }
  return head;
}

struct ThreadPool {
  struct List {
    FreeBlock* head = nullptr;
    std::size_t count = 0;
  };
  List lists[kObjectClasses];
  char* chunk = nullptr;  // the unused part of the current chunk: [chunk, chunk_end)
  char* chunk_end = nullptr;
  ~ThreadPool() {
    t_gone = true;  // frees after this point go to the depot one by one
    for (std::size_t c = 0; c < kObjectClasses; ++c)
      if (lists[c].head) depot_push(c, lists[c].head, lists[c].count);
    // The rest of the chunk is left unused (at most kChunkBytes per exiting thread).
  }
  static inline constinit thread_local bool t_gone = false;
};
thread_local ThreadPool t_pool;

// Carves kBatch blocks of class c into list l (which is empty); a new chunk when this one is short.
void carve(std::size_t c, ThreadPool& tp, ThreadPool::List& l) {
  const std::size_t bytes = (c + 1) * kObjectClassBytes;
  if (static_cast<std::size_t>(tp.chunk_end - tp.chunk) < bytes * kBatch) {
    void* p = mmap(nullptr, kChunkBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    tp.chunk = static_cast<char*>(p);
    tp.chunk_end = tp.chunk + kChunkBytes;
  }
  for (std::size_t i = 0; i < kBatch; ++i) {
    auto* b = reinterpret_cast<FreeBlock*>(tp.chunk);
    tp.chunk += bytes;
    b->next = l.head;
    l.head = b;
  }
  l.count = kBatch;
}

void* pool_allocate(std::size_t c, std::size_t) {
  if (ThreadPool::t_gone) {  // a thread past its pool's destructor (rare): from the depot
    std::size_t n = 0;
    FreeBlock* head = depot_pop(c, &n);
    if (!head) return ::operator new((c + 1) * kObjectClassBytes);  // joins the pool when freed
    if (n > 1) depot_push(c, head->next, n - 1);
    return head;
  }
  ThreadPool& tp = t_pool;
  ThreadPool::List& l = tp.lists[c];
  if (!l.head) {
    std::size_t n = 0;
    if (FreeBlock* head = depot_pop(c, &n)) {
      l.head = head;
      l.count = n;
    } else {
      carve(c, tp, l);
    }
  }
  FreeBlock* b = l.head;
  l.head = b->next;
  --l.count;
  return b;
}

void pool_deallocate(std::size_t c, void* p) noexcept {
  auto* b = static_cast<FreeBlock*>(p);
  if (ThreadPool::t_gone) {
    b->next = nullptr;
    depot_push(c, b, 1);
    return;
  }
  ThreadPool::List& l = t_pool.lists[c];
  b->next = l.head;
  l.head = b;
  if (++l.count < Fiber::kObjectCacheDepth + kBatch) return;
  // Hand the kBatch most recently freed blocks to the depot: a walk of kBatch links.
  FreeBlock* batch = l.head;
  FreeBlock* last = batch;
  for (std::size_t i = 1; i < kBatch; ++i) last = last->next;
  l.head = last->next;
  last->next = nullptr;
  l.count -= kBatch;
  depot_push(c, batch, kBatch);
}
#endif
}  // namespace

void* Fiber::operator new(std::size_t size) {
  const std::size_t c = object_class(size);
  if (c >= kObjectClasses) return ::operator new(size);
  return pool_allocate(c, size);
}

void Fiber::operator delete(void* p, std::size_t size) noexcept {
  const std::size_t c = object_class(size);
  if (c >= kObjectClasses) {
    ::operator delete(p);
    return;
  }
  pool_deallocate(c, p);
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
