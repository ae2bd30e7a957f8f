// lionet/config/config_var.cc: listener bookkeeping of ConfigVarBase (see the thread-safety
// notes in config_var.h).
#include "lionet/config/config_var.h"

#include "lionet/log/log.h"

namespace lionet::config {

uint64_t ConfigVarBase::add_erased_listener(ErasedListener fn) {
  std::lock_guard lock(listeners_mutex_);
  uint64_t id = next_id_++;
  listeners_.emplace_back(id, std::make_shared<ErasedListener>(std::move(fn)));
  return id;
}

void ConfigVarBase::remove_listener(uint64_t id) {
  {
    std::lock_guard lock(listeners_mutex_);
    std::erase_if(listeners_, [id](const auto& l) { return l.first == id; });
  }
  // A notification copied the list before we erased: wait for it to end, unless this thread is
  // the notifier (a listener removing itself or a sibling), which would deadlock.
  if (notifying_thread_.load(std::memory_order_relaxed) != std::this_thread::get_id()) {
    std::lock_guard wait(write_mutex_);
  }
}

std::unique_lock<std::mutex> ConfigVarBase::lock_for_write() {
  if (notifying_thread_.load(std::memory_order_relaxed) == std::this_thread::get_id()) {
    throw std::logic_error("config var '" + name_ + "' set from one of its own change listeners");
  }
  return std::unique_lock<std::mutex>(write_mutex_);
}

void ConfigVarBase::notify(const void* old_value, const void* new_value) {
  std::vector<std::shared_ptr<ErasedListener>> calls;
  {
    std::lock_guard lock(listeners_mutex_);
    calls.reserve(listeners_.size());
    for (auto& l : listeners_) calls.push_back(l.second);
  }
  // relaxed: only compared with the reader's own id; set and cleared under write_mutex_.
  notifying_thread_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  for (auto& fn : calls) {
    try {
      (*fn)(old_value, new_value);
    } catch (const std::exception& e) {
      // The value is already committed; a failing listener must not undo it or skip the others.
      LIONET_LOG_ERROR(log::get("config"), "listener of '{}' threw: {}", name_, e.what());
    }
  }
  notifying_thread_.store(std::thread::id(), std::memory_order_relaxed);
}
}  // namespace lionet::config
