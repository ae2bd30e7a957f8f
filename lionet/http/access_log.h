// lionet/http/access_log.h: lionet::http::AccessLog, the HTTP access log (one line per
// response, nginx's `combined` format or JSON lines), written by a background thread so that a
// request never waits for the disk.
//
//   auto log = std::make_shared<lionet::http::AccessLog>(
//       lionet::http::AccessLogOptions{.path = "var/log/access.log"});
//   lionet::http::ServerOptions opts;
//   opts.access_log = log;                       // several servers may share one log
//   ...
//   log->reopen();                               // SIGHUP after logrotate renamed the file
//
// Owns: the file descriptor of the log, the in-memory buffer lines wait in, the writer thread,
// and the two line formats. Must not: open or write files on a request's worker (only the
// constructor and the writer thread do), wait for the writer on the request path, allocate per
// line once warm, or read configuration (AccessLogOptions is filled by app/).
//
// The request path (log(), any worker, any thread): the line is formatted into a per-thread
// array (a per-thread string when it could be longer than 4 KiB), then copied into the buffer
// under a SpinLock held for that copy only. A full buffer drops the line and counts it
// (stats().lines_dropped): a slow or stuck disk costs lines, never latency. The writer thread (a plain OS thread, "lionet-alog", with every signal blocked)
// swaps the buffer for its spare one every flush_interval, or as soon as a log() call has filled
// it halfway, and writes the batch with write(2). So up to 2 x buffer_bytes of memory are in use:
// one buffer filling while the other is written.
//
// Formats (AccessLogFormat):
//   kCombined  nginx's `combined` plus one field, the request time:
//                $remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent
//                "$http_referer" "$http_user_agent" $request_time
//              127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] "GET /a.gif HTTP/1.1" 200 2326 "-" "curl/8.0" 0.003
//              $remote_user is always "-" (credentials are never logged); absent values are "-";
//              $time_local is the local time with its UTC offset; $request_time is seconds with
//              millisecond resolution from the request head's first byte to the response's end.
//              The last field is the addition (README "Access log"): parsers that match the
//              combined fields from the line's start ignore it; GoAccess reads it with %T.
//              Every field is escaped as nginx's default escaping does: '"', '\' and bytes
//              < 0x20 or >= 0x7f become \xHH, so no request can end a line or a quoted field
//              early (a User-Agent with a quote or a newline stays inside its field, on its line).
//   kJson      one JSON object per line:
//              {"time":"2000-10-10T13:55:36+00:00","remote_addr":"127.0.0.1","method":"GET",
//               "uri":"/a.gif","protocol":"HTTP/1.1","status":200,"body_bytes_sent":2326,
//               "request_time":0.003,"referer":"","user_agent":"curl/8.0","server":"web"}
//              Strings are JSON-escaped (quote, backslash, control bytes as \u00XX); a byte that
//              is not part of valid UTF-8 is written as \u00XX of its value, so every line parses
//              whatever the client sent. Absent values are "" (as nginx's escape=json writes
//              them); "server" is left out when the server has no name.
//
// Thread-safety: log(), reopen() and stats() may be called from any thread, concurrently. The
// destructor must not run concurrently with log() (holders share it through a shared_ptr).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "lionet/base/clock.h"
#include "lionet/base/spinlock.h"

namespace lionet {
class Address;
}

namespace lionet::http {
struct ConnectionInfo;

enum class AccessLogFormat : uint8_t { kCombined, kJson };
// "combined" / "json"; nullopt for anything else.
std::optional<AccessLogFormat> parse_access_log_format(std::string_view s) noexcept;
const char* to_string(AccessLogFormat f) noexcept;

struct AccessLogOptions {
  // "stdout", or a file opened O_WRONLY | O_APPEND | O_CREAT, mode 0644 (before the umask),
  // its parent directories created. YAML: servers[].access_log.path
  std::string path{};
  // YAML: servers[].access_log.format (combined | json)
  AccessLogFormat format = AccessLogFormat::kCombined;
  // The buffer lines wait in for the writer; a line that does not fit is dropped and counted.
  // The writer wakes once it is half full. Memory: twice this (the buffer being written is
  // swapped for a second one). YAML: servers[].access_log.buffer_bytes
  std::size_t buffer_bytes = std::size_t{1} << 20;
  // The longest a line waits in the buffer when traffic is light. YAML:
  // servers[].access_log.flush_interval
  Duration flush_interval = std::chrono::seconds(1);
};

// Counters since construction (relaxed: statistics).
struct AccessLogStats {
  uint64_t lines_written = 0;  // lines write(2) accepted
  uint64_t lines_dropped = 0;  // lines lost: the buffer was full, or their write failed
  uint64_t write_errors = 0;  // write(2) calls that failed (each loses the rest of its batch)
};

// One exchange as the server saw it. Views are read during log() only. An empty view is an
// absent value ("-" in combined, "" in JSON).
struct AccessLogEntry {
  std::string_view remote_addr;  // the client's IP, as RemoteAddr writes it
  // The request line's parts; method empty when the request line was not parsed (a refused
  // request): then request_line is written instead.
  std::string_view method;
  std::string_view target;  // the request target as sent (path and query, not decoded)
  std::string_view protocol;  // "HTTP/1.1", "HTTP/1.0", "HTTP/2.0"
  // With method empty: the raw first line of a refused request, or empty if none ended. JSON
  // splits it at its first two spaces into method, uri and protocol.
  std::string_view request_line;
  int status = 0;
  uint64_t body_bytes_sent = 0;  // body payload bytes written (not the head, not chunk framing)
  Duration request_time{};  // first byte of the request head to the end of the response
  std::string_view referer;
  std::string_view user_agent;
  std::string_view server;  // the server's name (JSON key "server"), empty when it has none
};

// The client address as nginx's $remote_addr writes it: the IP without its port ("127.0.0.1",
// "::1"), "unix:" for a Unix socket, empty when unknown. Made once per connection.
class RemoteAddr {
 public:
  void set(const Address& a) noexcept;
  std::string_view view() const noexcept { return {buf_, len_}; }
  // The connection's client, looked up at the first call only (the access-log lines of one
  // connection, HTTP/1 or HTTP/2, all write it); empty when it is not known.
  std::string_view of(const ConnectionInfo* info) noexcept;

 private:
  char buf_[48];  // INET6_ADDRSTRLEN (46) and more
  std::size_t len_ = 0;
  bool looked_up_ = false;
};

// An entry's `server` field: the TCP server's name, unless it is the default "tcp".
inline std::string_view log_server_name(std::string_view tcp_name) noexcept {
  return tcp_name == "tcp" ? std::string_view() : tcp_name;
}

class AccessLog {
 public:
  // Opens the path (creating its parent directories) and starts the writer thread. Throws
  // std::system_error naming the path when it cannot be opened ("access log
  // 'var/log/access.log': ...: Permission denied"), std::invalid_argument for an empty path, a
  // buffer under 1024 bytes or a flush_interval that is not positive.
  explicit AccessLog(AccessLogOptions options);
  // Writes out every line logged before it (blocking: a destination that accepts no bytes,
  // such as a FIFO nobody reads, blocks it), stops the writer and closes the file.
  ~AccessLog();
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  // Formats the line and appends it to the buffer; never blocks on IO, never throws. A line
  // that does not fit is dropped (counted).
  void log(const AccessLogEntry& e) noexcept;

  // After the file was renamed away (logrotate, then SIGHUP): lines logged before this call
  // go to the old file, later ones to a file created anew at the path. Returns at once; the
  // writer thread opens the file. If that fails, it keeps writing to the old file and logs one
  // error (logger "http"). Nothing to do for "stdout".
  void reopen() noexcept;

  AccessLogStats stats() const noexcept;
  const AccessLogOptions& options() const noexcept { return options_; }

  // The line log() writes for e at wall-clock second `when` (newline included), appended to
  // out. For tests and tools; log() uses a per-thread cache of the formatted second.
  static void format(AccessLogFormat format, const AccessLogEntry& e, std::time_t when, std::string& out);

 private:
  struct Batch {
    std::unique_ptr<char[]> data;
    std::size_t size = 0;
  };
  void run() noexcept;  // the writer thread
  void wake() noexcept;
  // Writes [p, p + n) to fd_ (writer thread); counts lines written, or lost and the error.
  void write_out(const char* p, std::size_t n) noexcept;
  void reopen_now() noexcept;  // writer thread

  const AccessLogOptions options_;
  const std::size_t half_;  // buffer_bytes / 2: a batch this full wakes the writer

  // Guarded by mu_ (workers append, the writer swaps).
  SpinLock mu_;
  Batch active_;
  bool kicked_ = false;  // the writer was woken for the batch being filled
  static constexpr std::size_t kNoReopen = ~std::size_t{0};
  std::size_t reopen_at_ = kNoReopen;  // bytes of active_ logged before reopen() was called

  // Writer thread only (set before it starts).
  Batch spare_;
  int fd_ = -1;
  bool owns_fd_ = false;  // not stdout

  // Guarded by wake_mu_: held by the writer only while it checks these and waits, so a
  // worker taking it never waits for a write.
  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  bool wake_ = false;
  bool stop_ = false;

  std::atomic<uint64_t> written_{0}, dropped_{0}, errors_{0};
  std::thread writer_;  // last: started when the rest is ready
};
}  // namespace lionet::http
