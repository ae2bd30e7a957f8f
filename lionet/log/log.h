// lionet/log/log.h: LioNet's loggers, on spdlog.
//
// Using it (the whole API most code needs):
//   #include "lionet/log/log.h"
//   static const auto lg = lionet::log::get("sched");    // cache it: get() takes a lock
//   LIONET_LOG_INFO(lg, "worker {} parked after {} spins", i, n);   // fmt syntax
//   lg->warn("plain spdlog calls work too");
// Macros: LIONET_LOG_TRACE/DEBUG/INFO/WARN/ERROR/CRITICAL(logger, fmt, args...). They skip
// argument evaluation below the logger's level and record file:line (%s:%# in a pattern).
//
// Loggers are created on first get() and live for the whole process: the pointer get()
// returns stays valid and follows every later configure() (level, pattern, sinks change in
// place), so caching it is right. A logger that configure() does not name inherits the
// "root" logger's level, pattern and sinks (and follows them when they change).
//
// The fiber id: every line can show the id of the fiber that logged it with the flag %*
// (0 on a plain thread); %t is the OS thread id. Both are captured when the call is made,
// so they are right for async loggers too. The default pattern kDefaultPattern shows both:
//   [2024-05-01 12:00:00.123] [info] [sched] [T4242 F17] message
//
// Owns: Level, SinkOptions, LoggerOptions, LogOptions, configure(), get(), the %* flag.
// Must not: depend on config/ or any layer but base/. Options are plain structs (ARCHITECTURE
// decision 10); app/ maps conf/log.yml onto them and calls configure() again on change.
//
// Thread-safety: every function may be called from any thread, also while others log.
// configure() is serialised; a message logged while it runs goes to the old or the new sinks.
#pragma once

#include <spdlog/formatter.h>
#include <spdlog/spdlog.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lionet::log {

enum class Level { kTrace = 0, kDebug, kInfo, kWarn, kError, kCritical, kOff };
// "trace", "debug", "info", "warn" (or "warning"), "error", "critical", "off"; nullopt otherwise.
std::optional<Level> parse_level(std::string_view s) noexcept;
const char* to_string(Level l) noexcept;

inline constexpr const char* kDefaultPattern = "[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] [%n] [T%t F%*] %v";

struct SinkOptions {
  enum class Type { kStdout, kStderr, kRotatingFile };
  Type type = Type::kStdout;
  // kRotatingFile only: the file (parent directories are created), its size limit in bytes
  // before rotating to <path>.1 ... and how many rotated files to keep.
  std::string path{};
  std::size_t max_size = 16 * 1024 * 1024;
  std::size_t max_files = 4;
  // Messages below this level are dropped by this sink (the logger's level applies first).
  Level level = Level::kTrace;
  bool operator==(const SinkOptions&) const = default;
};

struct LoggerOptions {
  std::string name{};  // "root" is the default logger that unnamed loggers inherit
  Level level = Level::kInfo;
  std::string pattern = kDefaultPattern;  // spdlog pattern flags plus %* (fiber id)
  std::vector<SinkOptions> sinks{SinkOptions{}};
  // Formatting and writing on a background thread of this logger (cost: a copy of each
  // message and one thread; lines still queued are written by flush_all() and shutdown()).
  // May be switched by configure() at any time.
  bool async = false;
  // Flush after every message at or above this level (files are otherwise flushed by the OS
  // buffer or flush()).
  Level flush_level = Level::kWarn;
  bool operator==(const LoggerOptions&) const = default;
};

struct LogOptions {
  std::vector<LoggerOptions> loggers{};  // without "root", root is stdout at info
  // Messages each async logger queues; when its queue is full the caller blocks (nothing is
  // dropped). Applies to async loggers (re)created by this configure().
  std::size_t async_queue_size = 8192;
  bool operator==(const LogOptions&) const = default;
};

// Applies the options to every logger (creating the named ones). Throws std::invalid_argument
// for an empty or repeated name or an empty file path, std::runtime_error (spdlog_ex) for a file
// that cannot be opened; nothing changes then.
void configure(const LogOptions& options);
// configure() that opens every file sink anew (by path) instead of reusing the open ones: after
// logrotate moved the files away (what SIGHUP does in the lionet binary).
void reopen(const LogOptions& options);

// The logger of that name, created on first use (inheriting root). Never null.
std::shared_ptr<spdlog::logger> get(std::string_view name);
// get("root"); also installed as spdlog's default logger (SPDLOG_INFO etc.).
std::shared_ptr<spdlog::logger> root();

void set_level(std::string_view name, Level level);

// Flushes every logger; for async loggers, returns once every message logged before the
// call has been written and flushed.
void flush_all();
// Writes out async queues, stops their threads, flushes and closes sinks. Loggers still work
// afterwards but write to nothing until configure() is called again. Call before returning
// from main.
void shutdown();

// A pattern formatter that knows %*; for code that builds its own spdlog sinks.
std::unique_ptr<spdlog::formatter> make_formatter(const std::string& pattern);
}  // namespace lionet::log

#define LIONET_LOG_AT(logger, level, ...)                                                                     \
  do {                                                                                                        \
    auto&& lionet_log_logger_ = (logger);                                                                     \
    if (lionet_log_logger_->should_log(level)) {                                                              \
      lionet_log_logger_->log(::spdlog::source_loc{__FILE__, __LINE__, SPDLOG_FUNCTION}, level, __VA_ARGS__); \
    }                                                                                                         \
  } while (0)
#define LIONET_LOG_TRACE(logger, ...) LIONET_LOG_AT(logger, ::spdlog::level::trace, __VA_ARGS__)
#define LIONET_LOG_DEBUG(logger, ...) LIONET_LOG_AT(logger, ::spdlog::level::debug, __VA_ARGS__)
#define LIONET_LOG_INFO(logger, ...) LIONET_LOG_AT(logger, ::spdlog::level::info, __VA_ARGS__)
#define LIONET_LOG_WARN(logger, ...) LIONET_LOG_AT(logger, ::spdlog::level::warn, __VA_ARGS__)
#define LIONET_LOG_ERROR(logger, ...) LIONET_LOG_AT(logger, ::spdlog::level::err, __VA_ARGS__)
#define LIONET_LOG_CRITICAL(logger, ...) LIONET_LOG_AT(logger, ::spdlog::level::critical, __VA_ARGS__)
