// lionet/fiber/stack_pool.cc: stack slabs, protection, caching, trimming and overflow reporting; see stack_pool.h.
#include "lionet/fiber/stack_pool.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "lionet/fiber/fiber.h"

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102  // Linux 6.13 (include/uapi/asm-generic/mman-common.h)
#endif

namespace lionet {
namespace {
std::size_t page_size() noexcept {
  static const std::size_t p = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return p;
}
std::size_t round_to_pages(std::size_t n) noexcept {
  const std::size_t p = page_size();
  return (n + p - 1) / p * p;
}

// Slabs start small (a program with ten fibers reserves 16 stacks, not a thousand) and double up
// to kMaxSlabStacks: a million 128 KiB stacks then take about a thousand slab mappings.
constexpr std::size_t kFirstSlabStacks = 16;
constexpr std::size_t kMaxSlabStacks = 1024;
// Stacks beyond the warm cache are madvise'd in batches of this many: one sorted pass that
// coalesces neighbours, so a burst of exits costs a few system calls (and TLB shootdowns),
// not one each.
constexpr std::size_t kTrimBatch = 256;

// Whether this kernel has guard regions (MADV_GUARD_INSTALL): -1 not known yet, 0 no, 1 yes.
// Process-wide, relaxed: the kernel's answer never changes, a race only repeats the probe.
std::atomic<int> g_guard_regions{-1};

// Whether process_madvise(2) takes any advice for the calling process (Linux 6.13, like guard
// regions): -1 not known yet, 0 no, 1 yes. Relaxed, as above.
std::atomic<int> g_self_process_madvise{-1};

// A pidfd of this process for process_madvise, opened once (again in a forked child, whose
// inherited one names its parent). -1 if it cannot be had.
int self_pidfd() noexcept {
  static std::atomic<int> fd{-1};
  static std::atomic<pid_t> owner{0};
  static std::mutex mu;
  const pid_t me = getpid();
  int f = fd.load(std::memory_order_acquire);
  if (f >= 0 && owner.load(std::memory_order_relaxed) == me) return f;
  std::lock_guard<std::mutex> lk(mu);
  f = fd.load(std::memory_order_relaxed);
  if (f >= 0 && owner.load(std::memory_order_relaxed) == me) return f;
  const int nf = static_cast<int>(syscall(SYS_pidfd_open, me, 0));  // close-on-exec by default
  if (nf < 0) return -1;
  if (f >= 0) (void)syscall(SYS_close, f);  // the parent's, inherited: the raw call, not the hook
  owner.store(me, std::memory_order_relaxed);
  fd.store(nf, std::memory_order_release);
  return nf;
}

// One process_madvise(2) call over up to kMaxIov pages. Returns the bytes advised (the kernel
// goes through the vector in order and stops at the first failure) or -1.
constexpr std::size_t kMaxIov = 64;
long advise_pages(const struct iovec* iov, std::size_t n, int advice) noexcept {
  const int pidfd = self_pidfd();
  if (pidfd < 0) return -1;
  return syscall(SYS_process_madvise, pidfd, iov, n, advice, 0u);
}
}  // namespace

const char* to_string(StackGuard g) noexcept {
  switch (g) {
    case StackGuard::kNone: return "none";
    case StackGuard::kRegion: return "guard region";
    case StackGuard::kPage: return "guard page";
    case StackGuard::kCanary: return "canary";
  }
  return "?";
}

const char* to_string(StackProtection p) noexcept {
  switch (p) {
    case StackProtection::kAuto: return "auto";
    case StackProtection::kGuardRegion: return "guard_region";
    case StackProtection::kGuardPage: return "guard_page";
    case StackProtection::kCanary: return "canary";
  }
  return "?";
}

// Layout of a slab: [slack page][stack][slack page][stack]... Each stack's slack page, just
// below it, becomes its guard page (kRegion, kPage) or stays untouched address space that an
// overflow past a canary runs into before it reaches the neighbouring stack.
struct StackPool::Impl {
  StackPoolOptions opts;
  std::size_t stride = 0;  // page + stack_size

  std::mutex mu;
  std::vector<Stack> warm;  // unused, pages kept (LIFO: the hottest first). Guarded by mu.
  std::vector<Stack> cold;  // unused, pages returned to the kernel. Guarded by mu.
  std::vector<Stack> trim;  // unused, waiting for the next batch madvise. Guarded by mu.
  std::vector<std::pair<char*, std::size_t>> slabs;  // guarded by mu
  std::size_t next_to_carve = 0;  // slabs from this index on are not carved yet; guarded by mu
  char* carve_next = nullptr;  // its uncarved part, guarded by mu
  char* carve_end = nullptr;
  std::size_t next_slab_stacks = kFirstSlabStacks;  // guarded by mu
  // Guarded by mu: stacks in all slabs; stacks out of the pool (in use or in StackCaches);
  // reservations not yet turned into stacks. Invariant: capacity >= out + promised (reserve()
  // maps slabs to keep it), so a reserved fiber always finds a stack when it starts.
  std::size_t capacity = 0, out = 0, promised = 0;

  // Statistics, relaxed: read by stats() without the lock.
  std::atomic<std::size_t> carved{0}, free_count{0}, reserved{0}, slab_count{0}, guard_pages{0}, canaries{0};

  void map_slab_locked();  // adds a slab to capacity; throws

  void start_carving_locked(std::size_t slab);
  bool take_locked(Stack& s);  // a free stack, else a newly carved one; false if none is left
  void trim_batch(std::vector<Stack>& batch) noexcept;
};

void StackPool::Impl::map_slab_locked() {
  std::size_t want = next_slab_stacks;
  if (const std::size_t cap = opts.max_reserved_bytes) {
    const std::size_t have = reserved.load(std::memory_order_relaxed);
    want = std::min(want, have >= cap ? 0 : (cap - have) / stride);
    if (want == 0)
      throw std::system_error(ENOMEM, std::generic_category(),
                              "lionet: fiber stack memory limit reached (" + std::to_string(have) + " of " +
                                  std::to_string(cap) + " bytes mapped for " + std::to_string(capacity) +
                                  " stacks; fiber.max_stack_memory)");
  }
  for (;;) {
    // MAP_NORESERVE: pages are committed on first touch, so a 128 KiB stack of which a fiber
    // uses 4 KiB costs 4 KiB of memory.
    void* p = mmap(nullptr, want * stride, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (p != MAP_FAILED) {
      slabs.emplace_back(static_cast<char*>(p), want * stride);
      capacity += want;
      reserved.fetch_add(want * stride, std::memory_order_relaxed);
      slab_count.fetch_add(1, std::memory_order_relaxed);
      next_slab_stacks = std::min(next_slab_stacks * 2, kMaxSlabStacks);
      return;
    }
    const int e = errno;
    if (want == 1 || e != ENOMEM)
      throw std::system_error(e, std::generic_category(),
                              "lionet: cannot map a fiber stack (" + std::to_string(stride) + " bytes, " +
                                  std::to_string(carved.load(std::memory_order_relaxed)) + " stacks mapped)");
    want /= 2;  // address space (RLIMIT_AS) or map count short: try a smaller slab
  }
}

void StackPool::Impl::start_carving_locked(std::size_t slab) {
  next_to_carve = slab + 1;
  carve_next = slabs[slab].first;
  carve_end = carve_next + slabs[slab].second;
}

bool StackPool::Impl::take_locked(Stack& s) {
  if (!warm.empty()) {
    s = warm.back();
    warm.pop_back();
  } else if (!cold.empty()) {
    s = cold.back();
    cold.pop_back();
  } else {
    if (carve_next == carve_end) {
      if (next_to_carve >= slabs.size()) return false;
      start_carving_locked(next_to_carve);
    }
    s = Stack{carve_next + page_size(), stride - page_size(), StackGuard::kNone};
    carve_next += stride;
    carved.fetch_add(1, std::memory_order_relaxed);
    ++out;
    return true;
  }
  free_count.fetch_sub(1, std::memory_order_relaxed);
  ++out;
  return true;
}

void StackPool::Impl::trim_batch(std::vector<Stack>& batch) noexcept {
  std::sort(batch.begin(), batch.end(), [](const Stack& a, const Stack& b) { return a.bottom < b.bottom; });
  // One madvise per run of neighbours. The slack/guard pages between them are inside the range:
  // guard regions survive MADV_DONTNEED (only MADV_GUARD_REMOVE or munmap remove them),
  // mprotect'ed pages hold nothing to drop, and untouched slack pages are not resident.
  for (std::size_t i = 0; i < batch.size();) {
    std::size_t j = i + 1;
    while (j < batch.size() && static_cast<char*>(batch[j].bottom) == static_cast<char*>(batch[j - 1].bottom) + stride)
      ++j;
    char* from = static_cast<char*>(batch[i].bottom);
    char* to = static_cast<char*>(batch[j - 1].bottom) + batch[j - 1].size;
    (void)madvise(from, static_cast<std::size_t>(to - from), MADV_DONTNEED);  // advice: failure only keeps pages
    i = j;
  }
  for (Stack& s : batch) {
    if (s.guard == StackGuard::kCanary) {  // its canary page was dropped: protect() writes it again
      s.guard = StackGuard::kNone;
      canaries.fetch_sub(1, std::memory_order_relaxed);
    }
  }
}

std::size_t StackPool::usable_size(std::size_t requested) noexcept {
  return round_to_pages(requested < 16384 ? 16384 : requested);
}
std::size_t StackPool::stride(std::size_t requested) noexcept { return usable_size(requested) + page_size(); }

StackPool::StackPool(StackPoolOptions options) : impl_(new Impl), stack_size_(usable_size(options.stack_size)) {
  impl_->opts = options;
  impl_->stride = stride(options.stack_size);
}

StackPool::~StackPool() {
  for (auto [p, n] : impl_->slabs) munmap(p, n);
  delete impl_;
}

std::size_t StackPool::reserve(std::size_t n) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lk(im.mu);
  try {
    while (im.capacity < im.out + im.promised + n) im.map_slab_locked();
  } catch (...) {
    // Grant what is left, if anything: a batch request must not fail while one stack exists.
    if (im.capacity <= im.out + im.promised) throw;
    n = im.capacity - im.out - im.promised;
  }
  im.promised += n;
  return n;
}

void StackPool::unreserve(std::size_t n) noexcept {
  if (n == 0) return;
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->promised -= std::min(n, impl_->promised);
}

std::size_t StackPool::acquire_reserved(Stack* out, std::size_t n) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lk(im.mu);
  // The first is the caller's reservation; extras only from what no reservation needs.
  const std::size_t spare = im.capacity > im.out + im.promised ? im.capacity - im.out - im.promised : 0;
  n = std::min(n, 1 + spare);
  std::size_t got = 0;
  while (got < n && im.take_locked(out[got])) ++got;
  if (got == 0) {
    // Unreachable while reservations are honoured (capacity >= out + promised); a caller that
    // took a stack without one lands here.
    im.map_slab_locked();
    if (!im.take_locked(out[0])) throw std::system_error(ENOMEM, std::generic_category(), "lionet: fiber stack pool");
    got = 1;
  }
  return got;
}

Stack StackPool::acquire() {
  reserve(1);
  Stack s;
  try {
    acquire_reserved(&s, 1);
  } catch (...) {
    unreserve(1);
    throw;
  }
  unreserve(1);
  return s;
}

void StackPool::release(Stack s) noexcept {
  Impl& im = *impl_;
  std::vector<Stack> batch;
  {
    std::lock_guard<std::mutex> lk(im.mu);
    im.free_count.fetch_add(1, std::memory_order_relaxed);
    --im.out;
    if (im.warm.size() < im.opts.shared_cache) {
      // Kept as is, touched pages included: an madvise(MADV_DONTNEED) per release cost 27% of
      // CPU time in a 2-thread churn benchmark (TLB shootdowns).
      im.warm.push_back(s);
      return;
    }
    im.trim.push_back(s);
    if (im.trim.size() < kTrimBatch) return;
    batch.swap(im.trim);
  }
  im.trim_batch(batch);  // outside the lock: other threads keep acquiring warm stacks meanwhile
  std::lock_guard<std::mutex> lk(im.mu);
  im.cold.insert(im.cold.end(), batch.begin(), batch.end());
}

std::size_t StackPool::trim(std::size_t keep) noexcept {
  Impl& im = *impl_;
  std::vector<Stack> batch;
  {
    std::lock_guard<std::mutex> lk(im.mu);
    batch.swap(im.trim);
    if (im.warm.size() > keep) {  // warm is LIFO: its front holds the coldest
      const auto n = static_cast<std::ptrdiff_t>(im.warm.size() - keep);
      batch.insert(batch.end(), im.warm.begin(), im.warm.begin() + n);
      im.warm.erase(im.warm.begin(), im.warm.begin() + n);
    }
  }
  if (batch.empty()) return 0;
  im.trim_batch(batch);  // outside the lock, as in release()
  std::lock_guard<std::mutex> lk(im.mu);
  im.cold.insert(im.cold.end(), batch.begin(), batch.end());
  return batch.size();
}

void StackPool::protect(Stack& s) noexcept {
  Impl& im = *impl_;
  const StackProtection mode = im.opts.protection;
  char* guard = static_cast<char*>(s.bottom) - page_size();
  if ((mode == StackProtection::kAuto || mode == StackProtection::kGuardRegion) &&
      g_guard_regions.load(std::memory_order_relaxed) != 0) {
    if (madvise(guard, page_size(), MADV_GUARD_INSTALL) == 0) {
      g_guard_regions.store(1, std::memory_order_relaxed);
      s.guard = StackGuard::kRegion;
      return;
    }
    if (errno == EINVAL) g_guard_regions.store(0, std::memory_order_relaxed);  // kernel < 6.13
    // ENOMEM (no memory for the page table): a guard page or a canary below.
  }
  if (mode != StackProtection::kCanary) {
    if (im.guard_pages.fetch_add(1, std::memory_order_relaxed) < im.opts.guard_page_budget) {
      if (mprotect(guard, page_size(), PROT_NONE) == 0) {
        s.guard = StackGuard::kPage;
        return;
      }
    }
    im.guard_pages.fetch_sub(1, std::memory_order_relaxed);
  }
  *static_cast<volatile uint64_t*>(s.bottom) = stack_canary_value(s.bottom);
  s.guard = StackGuard::kCanary;
  im.canaries.fetch_add(1, std::memory_order_relaxed);
}

void StackPool::prepare_fresh(Stack* stacks, std::size_t n) noexcept {
  // A million fibers spent ~45% of their parking time in the first-touch fault of each fresh
  // stack's top page and ~8% installing its guard, one system call each (bench/RESULTS.md,
  // many-fibers). Both are done here for a refill's fresh stacks at once: one process_madvise
  // installs their guard regions, another populates their top pages (MADV_POPULATE_WRITE: the
  // same page each fiber's first frame would fault in, without an exception per page).
  // Guard regions only: mprotect'ed guard pages and canaries stay with protect().
  const StackProtection mode = impl_->opts.protection;
  if (mode != StackProtection::kAuto && mode != StackProtection::kGuardRegion) return;
  if (g_guard_regions.load(std::memory_order_relaxed) != 1 ||
      g_self_process_madvise.load(std::memory_order_relaxed) == 0)
    return;  // not known yet (protect() probes it on a first run) or not available
  const std::size_t pg = page_size();
  struct iovec guards[kMaxIov], tops[kMaxIov];
  Stack* fresh[kMaxIov];
  for (std::size_t i = 0; i < n;) {
    std::size_t k = 0;
    for (; i < n && k < kMaxIov; ++i) {
      if (stacks[i].guard != StackGuard::kNone) continue;
      fresh[k] = &stacks[i];
      guards[k] = {static_cast<char*>(stacks[i].bottom) - pg, pg};
      tops[k] = {static_cast<char*>(stacks[i].bottom) + stacks[i].size - pg, pg};
      ++k;
    }
    if (k == 0) return;
    const long done = advise_pages(guards, k, MADV_GUARD_INSTALL);
    if (done < 0) {
      // EINVAL/EPERM/ENOSYS: a kernel whose process_madvise refuses this advice. Otherwise
      // (ENOMEM) protect() tries each stack on its first run.
      if (errno == EINVAL || errno == EPERM || errno == ENOSYS)
        g_self_process_madvise.store(0, std::memory_order_relaxed);
      return;
    }
    g_self_process_madvise.store(1, std::memory_order_relaxed);
    const std::size_t guarded = std::min(k, static_cast<std::size_t>(done) / pg);
    for (std::size_t j = 0; j < guarded; ++j) fresh[j]->guard = StackGuard::kRegion;
    (void)advise_pages(tops, guarded, MADV_POPULATE_WRITE);  // advice: on failure the first run faults
    if (guarded < k) return;
  }
}

std::size_t StackPool::mapped() const noexcept { return impl_->carved.load(std::memory_order_relaxed); }

StackPoolStats StackPool::stats() const noexcept {
  const Impl& im = *impl_;
  StackPoolStats st;
  st.mapped = im.carved.load(std::memory_order_relaxed);
  st.cached = im.free_count.load(std::memory_order_relaxed);
  st.reserved_bytes = im.reserved.load(std::memory_order_relaxed);
  st.slabs = im.slab_count.load(std::memory_order_relaxed);
  st.guard_pages = std::min(im.guard_pages.load(std::memory_order_relaxed), im.opts.guard_page_budget);
  st.canaries = im.canaries.load(std::memory_order_relaxed);
  return st;
}

StackCache::~StackCache() {
  for (std::size_t n = cached(); n;) pool_.release(cache_[--n]);
  delete[] cache_;
}

std::size_t StackCache::refill() noexcept {
  try {
    const std::size_t n = pool_.acquire_reserved(cache_, std::max<std::size_t>(1, capacity_ / 2));
    pool_.prepare_fresh(cache_, n);
    return n;
  } catch (const std::exception& e) {
    // Only a caller without a reservation gets here (see acquire_reserved).
    std::fprintf(stderr, "lionet: cannot take a reserved fiber stack: %s\n", e.what());
    std::abort();
  }
}

std::size_t StackCache::spill() noexcept {
  const std::size_t keep = capacity_ / 2;
  for (std::size_t n = cached(); n > keep;) pool_.release(cache_[--n]);
  return keep;
}

// ---- Stack overflow reporting ----
namespace {
struct sigaction g_previous_segv;
std::atomic<bool> g_handler_installed{false};

// Async-signal-safe formatting helpers: no stdio, no allocation.
char* put_str(char* p, char* end, const char* s) {
  while (*s && p < end) *p++ = *s++;
  return p;
}
char* put_u64(char* p, char* end, uint64_t v) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  while (n && p < end) *p++ = tmp[--n];
  return p;
}

void on_segv(int sig, siginfo_t* info, void* uctx) {
  Fiber* f = current_fiber();
  const char* addr = static_cast<const char*>(info->si_addr);
  if (f && f->stack_.bottom) {
    const char* bottom = static_cast<const char*>(f->stack_.bottom);
    // The guard page, plus slack for a frame large enough to jump over it.
    if (addr < bottom && addr >= bottom - 64 * 1024)
      die_of_stack_overflow(f->id(), f->name().c_str(), f->stack_.size, "guard page");
  }
  // Not ours: hand over to whoever was installed before, or die the default way.
  if (g_previous_segv.sa_flags & SA_SIGINFO) {
    if (g_previous_segv.sa_sigaction) return g_previous_segv.sa_sigaction(sig, info, uctx);
  } else if (g_previous_segv.sa_handler != SIG_DFL && g_previous_segv.sa_handler != SIG_IGN) {
    return g_previous_segv.sa_handler(sig);
  }
  signal(SIGSEGV, SIG_DFL);  // returning re-executes the faulting access, which now kills us
}
}  // namespace

void die_of_stack_overflow(uint64_t fiber_id, const char* name, std::size_t size, const char* how) noexcept {
  char buf[512];
  char* p = buf;
  char* end = buf + sizeof buf - 1;
  p = put_str(p, end, "lionet: fiber stack overflow: fiber id ");
  p = put_u64(p, end, fiber_id);
  p = put_str(p, end, " name \"");
  p = put_str(p, end, name);
  p = put_str(p, end, "\" overflowed its ");
  p = put_u64(p, end, size);
  p = put_str(p, end, "-byte stack (caught by its ");
  p = put_str(p, end, how);
  p = put_str(p, end, "; raise fiber.stack_size)\n");
  // The raw system call: write() may be the hook layer's, which is not async-signal-safe (its
  // fd table allocates on first sight of an fd; TSan reported it from this handler).
  (void)!syscall(SYS_write, STDERR_FILENO, buf, static_cast<size_t>(p - buf));
  signal(SIGABRT, SIG_DFL);
  abort();
}

void install_stack_overflow_handler() {
  // Each thread needs its own alternate stack: the faulting stack has no room left.
  thread_local bool has_altstack = false;
  if (!has_altstack) {
    stack_t current{};
    if (sigaltstack(nullptr, &current) == 0 && (current.ss_flags & SS_DISABLE)) {
      const std::size_t size = 64 * 1024;
      // Freed (and disabled) when the thread exits.
      static thread_local struct AltStack {
        void* mem = nullptr;
        ~AltStack() {
          if (mem) {
            stack_t off{};
            off.ss_flags = SS_DISABLE;
            sigaltstack(&off, nullptr);
            std::free(mem);
          }
        }
      } alt;
      alt.mem = std::malloc(size);
      stack_t ss{};
      ss.ss_sp = alt.mem;
      ss.ss_size = size;
      sigaltstack(&ss, nullptr);
    }
    has_altstack = true;
  }
  bool expected = false;
  if (g_handler_installed.compare_exchange_strong(expected, true)) {
    struct sigaction sa {};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_previous_segv);
  }
}
}  // namespace lionet
