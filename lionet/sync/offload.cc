// lionet/sync/offload.cc: the offload thread pool.
#include "lionet/sync/offload.h"

#include <pthread.h>

#include <atomic>

#include "lionet/base/macros.h"

namespace lionet {
namespace detail {
namespace {
thread_local bool t_offload_thread = false;
}
bool on_offload_thread() noexcept { return t_offload_thread; }
}  // namespace detail

OffloadPool::OffloadPool(OffloadOptions options) : options_(std::move(options)) {
  LIONET_CHECK(options_.threads >= 1, "OffloadOptions::threads must be at least 1");
  threads_.reserve(static_cast<std::size_t>(options_.threads));
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this, i] { thread_main(i); });
}

OffloadPool::~OffloadPool() {
  LIONET_CHECK(!detail::on_offload_thread(), "lionet::OffloadPool destroyed from one of its threads");
  {
    std::lock_guard<std::mutex> g(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void OffloadPool::submit(detail::OffloadTask* t) {
  t->next = nullptr;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (tail_) {
      tail_->next = t;
    } else {
      head_ = t;
    }
    tail_ = t;
  }
  cv_.notify_one();
}

void OffloadPool::thread_main(int index) {
  detail::t_offload_thread = true;
  std::string name = options_.name + "-" + std::to_string(index);
  if (name.size() > 15) name.resize(15);
  pthread_setname_np(pthread_self(), name.c_str());
  for (;;) {
    detail::OffloadTask* t;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return head_ != nullptr || stopping_; });
      if (head_ == nullptr) return;  // stopping and drained
      t = head_;
      head_ = t->next;
      if (!head_) tail_ = nullptr;
    }
    Parker p = t->parker;  // copied before run(): after unpark the task's memory is gone (W4)
    t->run(t);
    p.unpark();
  }
}

namespace {
std::mutex g_default_mu;  // serializes configuration and creation
OffloadOptions g_default_options;  // under g_default_mu
std::atomic<OffloadPool*> g_default_pool{nullptr};  // written once under g_default_mu; leaked on purpose
}  // namespace

bool configure_offload(OffloadOptions options) {
  std::lock_guard<std::mutex> g(g_default_mu);
  if (g_default_pool.load(std::memory_order_relaxed)) return false;
  g_default_options = std::move(options);
  return true;
}

OffloadPool& default_offload_pool() {
  // acquire: pairs with the release below, so a pool seen here is fully constructed.
  if (OffloadPool* p = g_default_pool.load(std::memory_order_acquire)) return *p;
  std::lock_guard<std::mutex> g(g_default_mu);
  OffloadPool* p = g_default_pool.load(std::memory_order_relaxed);
  if (!p) {
    p = new OffloadPool(g_default_options);
    g_default_pool.store(p, std::memory_order_release);
  }
  return *p;
}
}  // namespace lionet
