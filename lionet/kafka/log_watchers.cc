// lionet/kafka/log_watchers.cc: LogWatchers (see log_watchers.h).
#include "lionet/kafka/log_watchers.h"

#include <algorithm>
#include <chrono>
#include <system_error>

#include "lionet/sched/scheduler.h"
#include "lionet/storage/log.h"

namespace lionet::kafka {
namespace {
constexpr auto kSlice = std::chrono::seconds(1);  // a watcher's longest park
constexpr auto kIdleEnd = std::chrono::seconds(5);  // a watcher without registrations this long ends
}  // namespace

void LogWatchers::wait_any(std::span<storage::Log* const> logs, std::span<const int64_t> ends, TimePoint deadline) {
  lionet::Event ev;
  std::vector<Registration> regs(logs.size(), Registration{&ev, 0});
  bool fired = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) return;
    for (std::size_t i = 0; i < logs.size(); ++i) {
      regs[i].end = ends[i];
      Watch& w = watches_[logs[i]];
      w.regs.push_back(&regs[i]);
      fired |= logs[i]->end_offset() > ends[i];  // appended between the caller's read and now
      if (w.running) continue;
      Scheduler* sched = Scheduler::current();
      running_.add(1);
      w.running = true;
      try {
        if (!sched) throw std::logic_error("not in a fiber");
        storage::Log* log = logs[i];
        sched->spawn_detached([this, log] { run(log); }, SpawnOptions{.name = "kafka-watch"});
      } catch (const std::exception&) {  // no fiber to be had: this Fetch answers without waiting
        w.running = false;
        running_.done();
        fired = true;
      }
    }
  }
  if (!fired) ev.wait_until(deadline);
  std::lock_guard<std::mutex> lk(mu_);  // after this no watcher touches ev or regs
  for (std::size_t i = 0; i < logs.size(); ++i) {
    auto it = watches_.find(logs[i]);
    if (it == watches_.end()) continue;
    std::erase(it->second.regs, &regs[i]);
  }
}

void LogWatchers::run(storage::Log* log) noexcept {
  int64_t seen = log->end_offset();
  TimePoint last_used = lionet::now();
  for (;;) {
    const int64_t end = log->wait_beyond(seen, lionet::now() + kSlice);
    std::unique_lock<std::mutex> lk(mu_);
    Watch& w = watches_[log];
    if (end > seen) {
      for (Registration* r : w.regs)
        if (r->end < end) r->event->set();
      seen = end;
    }
    if (!w.regs.empty()) last_used = lionet::now();
    if (stopping_ || (w.regs.empty() && lionet::now() - last_used >= kIdleEnd)) {
      if (w.regs.empty()) {
        watches_.erase(log);
      } else {
        w.running = false;  // stopping: the registered Fetches time out or see stopping
        for (Registration* r : w.regs) r->event->set();
      }
      lk.unlock();
      running_.done();
      return;
    }
  }
}

void LogWatchers::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [log, w] : watches_)
      for (Registration* r : w.regs) r->event->set();
  }
  CancelShield shield;  // watchers use *this until done
  running_.wait();
}

}  // namespace lionet::kafka
