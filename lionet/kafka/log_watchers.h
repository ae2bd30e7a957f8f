// lionet/kafka/log_watchers.h: waiting on several logs at once, for a Fetch over several
// partitions. Log::wait_beyond parks on one log; this fans several into one wait.
//
// Owns: one watcher fiber per log that some Fetch is waiting on (parked in Log::wait_beyond),
// the registrations of waiting Fetches (an Event and the end offset each saw), and their
// shutdown. Must not: read records or poll for them (a watcher is woken by the append itself).
//
// Protocol (all under mu_): a Fetch registers (Event, end it saw) on each of its logs, checks
// each log's end_offset() once more (an append between its read and its registration sets the
// Event at once), starts a watcher for a log that has none, waits on the Event until its
// deadline, then unregisters. A watcher starts from the log's end at its start (any later
// append wakes it: wait_beyond), and on each wake sets the Event of every registration whose
// end is below the new end. So no append after a Fetch's read is missed, no Fetch is woken by
// a partition it does not read, and nothing lingers after a Fetch returns.
// A watcher with no registration for 5 s ends; it wakes at least once a second to notice that
// and stop() (a timer, not a look at the data).
//
// Concurrency: wait_any() from fibers, any number at once; stop() once, from any fiber or
// thread, after which wait_any() returns at once.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <vector>

#include "lionet/base/clock.h"
#include "lionet/storage/fwd.h"
#include "lionet/sync/event.h"
#include "lionet/sync/wait_group.h"

namespace lionet::kafka {

class LogWatchers {
 public:
  LogWatchers() = default;
  ~LogWatchers() { stop(); }
  LogWatchers(const LogWatchers&) = delete;
  LogWatchers& operator=(const LogWatchers&) = delete;

  // Returns when some logs[i] has end_offset() > ends[i], at the deadline, or on stop().
  void wait_any(std::span<storage::Log* const> logs, std::span<const int64_t> ends, TimePoint deadline);
  // Ends every watcher (each is woken by the caller's Log::wake_waiters(), or within a second)
  // and waits for them.
  void stop();

 private:
  struct Registration {
    lionet::Event* event;
    int64_t end;
  };
  struct Watch {
    std::vector<Registration*> regs;
    bool running = false;
  };
  void run(storage::Log* log) noexcept;

  std::mutex mu_;  // guards watches_ and stopping_; held for no IO and no parking
  std::map<storage::Log*, Watch> watches_;
  bool stopping_ = false;
  lionet::WaitGroup running_;  // one count per watcher fiber
};

}  // namespace lionet::kafka
