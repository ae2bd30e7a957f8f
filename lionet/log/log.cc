// lionet/log/log.cc: logger registry, the fiber-id flag, configure().
//
// Design notes:
//  - Every LioNet logger is a FiberTaggingLogger (an spdlog::logger) whose only sink is its
//    own `outer` dist_sink. outer's one child is either `inner` (a dist_sink holding the real
//    sinks) or, for an async logger, an AsyncSink writing to inner from its own thread.
//    Reconfiguring swaps dist_sink children under the dist_sink's mutex and sets the level
//    (atomic): the logger object never changes, so pointers cached from get() stay valid and
//    follow the configuration, async switch included.
//  - The fiber id must be read on the calling thread (an async logger formats on its writer
//    thread). FiberTaggingLogger::sink_it_ runs on the caller and packs the fiber id into the
//    high bits of log_msg::thread_id, which AsyncSink copies with the message; our formatter's
//    %* and %t unpack it. Linux thread ids are < 2^22 (PID_MAX_LIMIT), so 24 low bits hold the
//    tid and 40 high bits the fiber id (ids above 2^40 would print modulo 2^40).
//    (spdlog::async_logger is final, hence our own AsyncSink instead of subclassing it.)
//  - A logger not named by configure() points its outer at root's outer: it shares root's
//    pattern, sinks and async queue and follows them when they change; its level is root's.
//  - Two loggers naming the same file with the same max_size and max_files share one rotating
//    sink (two would fight over rotation); they then share its pattern too: the one configured
//    last wins. Different limits (or spellings of the path) get separate sinks, which do fight.
#include "lionet/log/log.h"

#include <spdlog/details/log_msg_buffer.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/ansicolor_sink.h>
#include <spdlog/sinks/dist_sink.h>
#include <spdlog/sinks/rotating_file_sink.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "lionet/base/fiber_id.h"

namespace lionet::log {
namespace {
constexpr int kTidBits = 24;
constexpr std::size_t kTidMask = (std::size_t{1} << kTidBits) - 1;

class FiberTaggingLogger final : public spdlog::logger {
 public:
  using spdlog::logger::logger;

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::details::log_msg tagged = msg;
    tagged.thread_id = (msg.thread_id & kTidMask) | (static_cast<std::size_t>(base::current_fiber_id()) << kTidBits);
    spdlog::logger::sink_it_(tagged);
  }
};

// Hands messages to one writer thread through a bounded queue (callers block when full, so
// nothing is lost). flush() is a barrier: it returns once everything queued before it has
// been written and the target flushed. The destructor drains the queue and joins the thread.
class AsyncSink final : public spdlog::sinks::sink {
 public:
  AsyncSink(spdlog::sink_ptr target, std::size_t capacity)
      : target_(std::move(target)), capacity_(capacity == 0 ? 1 : capacity), thread_([this] { run(); }) {}
  ~AsyncSink() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    not_empty_.notify_one();
    thread_.join();
  }

  void log(const spdlog::details::log_msg& msg) override {
    std::unique_lock lock(mu_);
    not_full_.wait(lock, [&] { return queue_.size() < capacity_; });
    queue_.push_back(Item{spdlog::details::log_msg_buffer(msg), 0});
    lock.unlock();
    not_empty_.notify_one();
  }

  void flush() override {
    std::unique_lock lock(mu_);
    uint64_t ticket = ++flush_requested_;
    queue_.push_back(Item{{}, ticket});
    not_empty_.notify_one();
    flushed_cv_.wait(lock, [&] { return flush_done_ >= ticket; });
  }

  void set_pattern(const std::string& pattern) override { target_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> f) override { target_->set_formatter(std::move(f)); }

 private:
  struct Item {
    spdlog::details::log_msg_buffer msg;
    uint64_t flush_ticket;  // 0: a message; else a flush barrier
  };

  void run() {
    std::unique_lock lock(mu_);
    for (;;) {
      not_empty_.wait(lock, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) break;  // stopping and drained
      Item item = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      not_full_.notify_one();
      if (item.flush_ticket == 0) {
        target_->log(item.msg);
      } else {
        target_->flush();
      }
      lock.lock();
      if (item.flush_ticket != 0) {
        flush_done_ = item.flush_ticket;
        flushed_cv_.notify_all();
      }
    }
    lock.unlock();
    target_->flush();
  }

  const spdlog::sink_ptr target_;
  const std::size_t capacity_;
  std::mutex mu_;  // protects queue_, stopping_ and the flush counters
  std::condition_variable not_empty_, not_full_, flushed_cv_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  uint64_t flush_requested_ = 0;
  uint64_t flush_done_ = 0;
  std::thread thread_;  // last: starts after the fields above exist
};

class FiberIdFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    fmt::format_to(std::back_inserter(dest), "{}", msg.thread_id >> kTidBits);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<FiberIdFlag>(); }
};

class ThreadIdFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    fmt::format_to(std::back_inserter(dest), "{}", msg.thread_id & kTidMask);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<ThreadIdFlag>(); }
};

spdlog::level::level_enum to_spd(Level l) { return static_cast<spdlog::level::level_enum>(static_cast<int>(l)); }

using DistSink = spdlog::sinks::dist_sink_mt;

struct Entry {
  std::shared_ptr<spdlog::logger> logger;
  std::shared_ptr<DistSink> outer;  // the logger's only sink; child: inner, an AsyncSink, or root's outer
  std::shared_ptr<DistSink> inner;  // the real sinks of a configured logger
  bool async = false;  // outer's child is an AsyncSink over inner
};

struct FileKey {
  std::string path;
  std::size_t max_size, max_files;
  auto operator<=>(const FileKey&) const = default;
};

// The process-wide state. Leaked on purpose: loggers may be used from static destructors and
// detached threads until the very end.
struct State {
  std::mutex mu;  // protects everything below; never held while a message is written
  std::map<std::string, Entry, std::less<>> loggers;
  LoggerOptions root_options;
  std::map<FileKey, std::weak_ptr<spdlog::sinks::rotating_file_sink_mt>> files;

  State() {
    root_options.name = "root";
    Entry& root = create("root");
    apply(root, build_sinks(root_options), root_options, 8192);
    spdlog::set_default_logger(root.logger);
  }

  std::vector<spdlog::sink_ptr> build_sinks(const LoggerOptions& o) {
    std::vector<spdlog::sink_ptr> out;
    for (const auto& s : o.sinks) {
      spdlog::sink_ptr sink;
      switch (s.type) {
        case SinkOptions::Type::kStdout: sink = std::make_shared<spdlog::sinks::ansicolor_stdout_sink_mt>(); break;
        case SinkOptions::Type::kStderr: sink = std::make_shared<spdlog::sinks::ansicolor_stderr_sink_mt>(); break;
        case SinkOptions::Type::kRotatingFile: {
          if (s.path.empty()) throw std::invalid_argument("logger '" + o.name + "': a file sink needs a path");
          if (s.max_size == 0) throw std::invalid_argument("logger '" + o.name + "': a file sink needs max_size > 0");
          FileKey key{s.path, s.max_size, s.max_files};
          auto f = files[key].lock();
          if (!f) {
            f = std::make_shared<spdlog::sinks::rotating_file_sink_mt>(s.path, s.max_size, s.max_files);
            files[key] = f;
          }
          sink = f;
          break;
        }
      }
      sink->set_level(to_spd(s.level));
      out.push_back(std::move(sink));
    }
    return out;
  }

  Entry& create(const std::string& name) {
    Entry e;
    e.outer = std::make_shared<DistSink>();
    e.inner = std::make_shared<DistSink>();
    e.logger = std::make_shared<FiberTaggingLogger>(name, e.outer);
    return loggers.insert_or_assign(name, std::move(e)).first->second;
  }

  // Makes e a configured logger writing to `sinks` with o's pattern, level and mode.
  void apply(Entry& e, const std::vector<spdlog::sink_ptr>& sinks, const LoggerOptions& o, std::size_t queue) {
    // Formatter first, then install: no message meets a sink without its pattern.
    for (auto& s : sinks) s->set_formatter(make_formatter(o.pattern));
    e.inner->set_sinks(sinks);
    if (o.async && !e.async) {
      e.outer->set_sinks({std::make_shared<AsyncSink>(e.inner, queue)});
    } else if (!o.async) {
      e.outer->set_sinks({e.inner});  // an old AsyncSink drains and stops here
    }  // else already async: keep its queue and thread, which write to inner.
    e.async = o.async;
    e.logger->set_level(to_spd(o.level));
    e.logger->flush_on(to_spd(o.flush_level));
  }

  // Makes e an unconfigured logger that follows root.
  void follow_root(Entry& e) {
    Entry& root = loggers.at("root");
    e.outer->set_sinks({root.outer});
    e.inner->set_sinks({});
    e.async = false;
    e.logger->set_level(to_spd(root_options.level));
    e.logger->flush_on(to_spd(root_options.flush_level));
  }
};

State& state() {
  static State* s = new State();
  return *s;
}
}  // namespace

std::optional<Level> parse_level(std::string_view s) noexcept {
  if (s == "trace") return Level::kTrace;
  if (s == "debug") return Level::kDebug;
  if (s == "info") return Level::kInfo;
  if (s == "warn" || s == "warning") return Level::kWarn;
  if (s == "error") return Level::kError;
  if (s == "critical") return Level::kCritical;
  if (s == "off") return Level::kOff;
  return std::nullopt;
}

const char* to_string(Level l) noexcept {
  static const char* names[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
  return names[static_cast<int>(l)];
}

std::unique_ptr<spdlog::formatter> make_formatter(const std::string& pattern) {
  auto f = std::make_unique<spdlog::pattern_formatter>();
  f->add_flag<FiberIdFlag>('*');
  f->add_flag<ThreadIdFlag>('t');
  f->set_pattern(pattern);
  return f;
}

void configure(const LogOptions& options) {
  State& st = state();
  std::lock_guard lock(st.mu);
  std::set<std::string> names;
  for (const auto& o : options.loggers) {
    if (o.name.empty()) throw std::invalid_argument("log: a logger needs a name");
    if (!names.insert(o.name).second) throw std::invalid_argument("log: logger '" + o.name + "' is configured twice");
  }
  // Build every sink first: a file that cannot be opened throws before anything changes.
  LoggerOptions root_opts;
  root_opts.name = "root";
  std::vector<std::pair<const LoggerOptions*, std::vector<spdlog::sink_ptr>>> built;
  for (const auto& o : options.loggers) {
    if (o.name == "root") root_opts = o;
    built.emplace_back(&o, st.build_sinks(o));
  }
  if (!names.count("root")) built.emplace_back(&root_opts, st.build_sinks(root_opts));

  st.root_options = root_opts;
  for (auto& [o, sinks] : built) {
    auto it = st.loggers.find(o->name);
    Entry& e = it == st.loggers.end() ? st.create(o->name) : it->second;
    st.apply(e, sinks, *o, options.async_queue_size);
  }
  for (auto& [name, e] : st.loggers) {
    if (name != "root" && !names.count(name)) st.follow_root(e);
  }
}

void reopen(const LogOptions& options) {
  {
    State& st = state();
    std::lock_guard lock(st.mu);
    st.files.clear();  // build_sinks then opens each path again; loggers drop the old sinks
  }
  configure(options);
}

std::shared_ptr<spdlog::logger> get(std::string_view name) {
  State& st = state();
  std::lock_guard lock(st.mu);
  auto it = st.loggers.find(name);
  if (it != st.loggers.end()) return it->second.logger;
  Entry& e = st.create(std::string(name));
  st.follow_root(e);
  return e.logger;
}

std::shared_ptr<spdlog::logger> root() { return get("root"); }

void set_level(std::string_view name, Level level) { get(name)->set_level(to_spd(level)); }

namespace {
std::vector<std::shared_ptr<spdlog::logger>> all_loggers() {
  State& st = state();
  std::lock_guard lock(st.mu);
  std::vector<std::shared_ptr<spdlog::logger>> all;
  for (auto& [n, e] : st.loggers) all.push_back(e.logger);
  return all;
}
}  // namespace

void flush_all() {
  for (auto& l : all_loggers()) l->flush();
}

void shutdown() {
  flush_all();
  State& st = state();
  std::lock_guard lock(st.mu);
  // Dropping the outer children destroys AsyncSinks (they drain and join) and closes files.
  for (auto& [n, e] : st.loggers) {
    e.outer->set_sinks({});
    e.inner->set_sinks({});
    e.async = false;
  }
  st.files.clear();
}
}  // namespace lionet::log
