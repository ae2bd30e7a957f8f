// Stack allocation, caching and guard-page overflow reporting; see stack_pool.h.
#include "lionet/fiber/stack_pool.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <system_error>
#include <vector>

#include "lionet/fiber/fiber.h"

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
}  // namespace

struct StackPool::Impl {
  std::mutex mu;               // protects free
  std::vector<Stack> free;     // unused mapped stacks
  std::size_t shared_cache;
  std::atomic<std::size_t> mapped{0};  // relaxed: a statistic
};

StackPool::StackPool(StackPoolOptions options)
    : impl_(new Impl), stack_size_(round_to_pages(options.stack_size < 16384 ? 16384 : options.stack_size)) {
  impl_->shared_cache = options.shared_cache;
}

StackPool::~StackPool() {
  for (Stack s : impl_->free) munmap(static_cast<char*>(s.bottom) - page_size(), s.size + page_size());
  delete impl_;
}

Stack StackPool::acquire() {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    if (!impl_->free.empty()) {
      Stack s = impl_->free.back();
      impl_->free.pop_back();
      return s;
    }
  }
  const std::size_t guard = page_size();
  // MAP_NORESERVE: pages are committed on first touch, so a 128 KiB stack of which a fiber uses
  // 8 KiB costs 8 KiB of memory.
  void* p = mmap(nullptr, stack_size_ + guard, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "lionet: mmap of a fiber stack");
  if (mprotect(p, guard, PROT_NONE) != 0) {
    int e = errno;
    munmap(p, stack_size_ + guard);
    throw std::system_error(e, std::generic_category(), "lionet: mprotect of a fiber stack guard page");
  }
  impl_->mapped.fetch_add(1, std::memory_order_relaxed);
  return Stack{static_cast<char*>(p) + guard, stack_size_};
}

void StackPool::release(Stack s) noexcept {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    if (impl_->free.size() < impl_->shared_cache) {
      // Kept as is, touched pages included: an madvise(MADV_DONTNEED) here cost 27% of CPU
      // time in a 2-thread churn benchmark (TLB shootdowns). Memory held this way is bounded by
      // shared_cache stacks; beyond it, stacks are unmapped (outside the lock).
      impl_->free.push_back(s);
      return;
    }
  }
  munmap(static_cast<char*>(s.bottom) - page_size(), s.size + page_size());
  impl_->mapped.fetch_sub(1, std::memory_order_relaxed);
}

std::size_t StackPool::mapped() const noexcept { return impl_->mapped.load(std::memory_order_relaxed); }

StackCache::~StackCache() {
  while (count_) pool_.release(cache_[--count_]);
  delete[] cache_;
}

void StackCache::spill() noexcept {
  const std::size_t keep = capacity_ / 2;
  while (count_ > keep) pool_.release(cache_[--count_]);
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
    if (addr < bottom && addr >= bottom - 64 * 1024) {
      char buf[512];
      char* p = buf;
      char* end = buf + sizeof buf - 1;
      p = put_str(p, end, "lionet: fiber stack overflow: fiber id ");
      p = put_u64(p, end, f->id());
      p = put_str(p, end, " name \"");
      p = put_str(p, end, f->name().c_str());
      p = put_str(p, end, "\" overflowed its ");
      p = put_u64(p, end, f->stack_.size);
      p = put_str(p, end, "-byte stack (raise fiber.stack_size)\n");
      (void)!write(STDERR_FILENO, buf, static_cast<size_t>(p - buf));
      signal(SIGABRT, SIG_DFL);
      abort();
    }
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
