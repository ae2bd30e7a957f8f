// lionet/http/access_log.cc: AccessLog (see access_log.h): the two line formats, the buffer and
// its writer thread.
//
// Writer protocol (numbered for the comments below):
//   1. log() appends under mu_; the append that takes the batch to half full sets kicked_ and,
//      after releasing mu_, wakes the writer (wake_ under wake_mu_, so the wake cannot be lost
//      between the writer's check and its wait).
//   2. The writer waits on wake_cv_ for wake_, stop_ or flush_interval, then swaps active_
//      with its empty spare_ under mu_ (clearing kicked_ and taking reopen_at_), and writes the
//      batch outside every lock.
//   3. reopen() records under mu_ how many bytes of the filling batch came before it; the
//      writer writes those to the old fd, opens the path anew, and writes the rest to the new
//      fd. Bytes of the batch being written when reopen() was called came before it too: they
//      are finished on the old fd.
//   4. The destructor sets stop_ and joins: the writer's last swap (after it saw stop_) takes
//      every line logged before the destructor was called.
#include "lionet/http/access_log.h"

#include "lionet/http/request.h"
#include "lionet/net/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "lionet/base/log_limiter.h"
#include "lionet/base/utf8.h"
#include "lionet/http/detail/log.h"
#include "lionet/net/address.h"

namespace lionet::http {
namespace {

using detail::http_log;

// ---- formatting ---------------------------------------------------------------------------

constexpr char kHex[] = "0123456789ABCDEF";

// nginx's default escaping (ngx_http_log_escape): '"', '\' and bytes outside 0x20..0x7e.
inline bool clf_escaped(unsigned char c) noexcept { return c < 0x20 || c >= 0x7f || c == '"' || c == '\\'; }

// Where a line is formatted: a std::string (AccessLog::format, and log() for a line too long for
// the per-thread array), or RawOut, raw stores into an array the caller sized with
// line_bound() (log()'s common case: no capacity check per piece).
class RawOut {
 public:
  explicit RawOut(char* p) noexcept : begin_(p), p_(p) {}
  RawOut& append(const char* s, std::size_t n) noexcept {
    if (n == 0) return *this;  // s may be null (an empty string_view): memcpy must not see it
    std::memcpy(p_, s, n);
    p_ += n;
    return *this;
  }
  RawOut& append(std::string_view s) noexcept { return append(s.data(), s.size()); }
  void push_back(char c) noexcept { *p_++ = c; }
  std::size_t size() const noexcept { return static_cast<std::size_t>(p_ - begin_); }

 private:
  char* const begin_;
  char* p_;
};

template <class Out>
void append_clf(Out& out, std::string_view s) {
  if (s.empty()) {
    out.push_back('-');
    return;
  }
  std::size_t run = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (!clf_escaped(c)) continue;
    out.append(s.data() + run, i - run);
    const char esc[4] = {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    out.append(esc, 4);
    run = i + 1;
  }
  out.append(s.data() + run, s.size() - run);
}

template <class Out>
void append_json_field(Out& out, std::string_view key, std::string_view value) {
  out.append(",\"").append(key).append("\":\"");
  append_json_escaped(out, value);  // base/utf8.h
  out.push_back('"');
}

template <class Out, class T>
void append_number(Out& out, T v) {
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<std::size_t>(p - buf));
}

// Seconds with millisecond resolution ("0.003"), as nginx's $request_time.
template <class Out>
void append_seconds(Out& out, Duration d) {
  long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  if (ms < 0) ms = 0;
  append_number(out, ms / 1000);
  const char frac[4] = {'.', static_cast<char>('0' + ms / 100 % 10), static_cast<char>('0' + ms / 10 % 10),
                        static_cast<char>('0' + ms % 10)};
  out.append(frac, 4);
}

// The second, formatted both ways, once per second per thread (like date.cc's Date line).
struct LocalTime {
  std::time_t second = -1;
  char clf[40];  // 10/Oct/2000:13:55:36 +0000
  int clf_len = 0;
  char iso[40];  // 2000-10-10T13:55:36+00:00
  int iso_len = 0;
};

void fill_time(LocalTime& t, std::time_t when) {
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  struct tm tm;
  localtime_r(&when, &tm);
  const long off = tm.tm_gmtoff;
  const char sign = off < 0 ? '-' : '+';
  const long a = off < 0 ? -off : off;
  const int oh = static_cast<int>(a / 3600), om = static_cast<int>(a % 3600 / 60);
  t.clf_len = std::snprintf(t.clf, sizeof t.clf, "%02d/%s/%04d:%02d:%02d:%02d %c%02d%02d", tm.tm_mday,
                            kMonths[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec, sign, oh, om);
  t.iso_len = std::snprintf(t.iso, sizeof t.iso, "%04d-%02d-%02dT%02d:%02d:%02d%c%02d:%02d", tm.tm_year + 1900,
                            tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, sign, oh, om);
  t.second = when;
}

// Valid until the calling thread's next call (no fiber switch happens while a line is formatted).
const LocalTime& cached_time(std::time_t when) {
  thread_local LocalTime t;
  if (t.second != when) fill_time(t, when);
  return t;
}

// The most bytes format_line can write for e: every string byte escaped (\xHH is 4 bytes,
// \u00XX 6), and at most 320 for the rest (keys, quotes, time, numbers, newline).
std::size_t line_bound(const AccessLogEntry& e) noexcept {
  const std::size_t text = e.remote_addr.size() + e.method.size() + e.target.size() + e.protocol.size() +
                           e.request_line.size() + e.referer.size() + e.user_agent.size() + e.server.size();
  return 320 + 6 * text;
}

template <class Out>
void format_line(AccessLogFormat format, const AccessLogEntry& e, const LocalTime& t, Out& out) {
  if (format == AccessLogFormat::kCombined) {
    append_clf(out, e.remote_addr);
    out.append(" - - [").append(t.clf, static_cast<std::size_t>(t.clf_len)).append("] \"");
    if (!e.method.empty()) {
      append_clf(out, e.method);
      out.push_back(' ');
      append_clf(out, e.target);
      out.push_back(' ');
      append_clf(out, e.protocol);
    } else {
      append_clf(out, e.request_line);
    }
    out.append("\" ");
    append_number(out, e.status);
    out.push_back(' ');
    append_number(out, e.body_bytes_sent);
    out.append(" \"");
    append_clf(out, e.referer);
    out.append("\" \"");
    append_clf(out, e.user_agent);
    out.append("\" ");
    append_seconds(out, e.request_time);
    out.push_back('\n');
    return;
  }
  std::string_view method = e.method, uri = e.target, protocol = e.protocol;
  if (method.empty()) {  // a refused request: its raw line, split at its first two spaces
    std::string_view line = e.request_line;
    const std::size_t a = line.find(' ');
    method = line.substr(0, a);
    if (a != std::string_view::npos) {
      line.remove_prefix(a + 1);
      const std::size_t b = line.find(' ');
      uri = line.substr(0, b);
      if (b != std::string_view::npos) protocol = line.substr(b + 1);
    }
  }
  out.append("{\"time\":\"").append(t.iso, static_cast<std::size_t>(t.iso_len)).push_back('"');
  append_json_field(out, "remote_addr", e.remote_addr);
  append_json_field(out, "method", method);
  append_json_field(out, "uri", uri);
  append_json_field(out, "protocol", protocol);
  out.append(",\"status\":");
  append_number(out, e.status);
  out.append(",\"body_bytes_sent\":");
  append_number(out, e.body_bytes_sent);
  out.append(",\"request_time\":");
  append_seconds(out, e.request_time);
  append_json_field(out, "referer", e.referer);
  append_json_field(out, "user_agent", e.user_agent);
  if (!e.server.empty()) append_json_field(out, "server", e.server);
  out.append("}\n");
}

// ---- files --------------------------------------------------------------------------------

bool is_stdout(const std::string& path) { return path == "stdout"; }

// Opens path for appending, creating its parent directories; -1 with ec set on failure.
int open_append(const std::string& path, std::error_code& ec) noexcept {
  namespace fs = std::filesystem;
  try {
    const fs::path p(path);
    if (p.has_parent_path()) {
      fs::create_directories(p.parent_path(), ec);
      if (ec) return -1;
    }
  } catch (const std::exception&) {
    ec = std::make_error_code(std::errc::not_enough_memory);
    return -1;
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) ec = std::error_code(errno, std::system_category());
  return fd;
}

LogLimiter g_write_error_log;
}  // namespace

std::optional<AccessLogFormat> parse_access_log_format(std::string_view s) noexcept {
  if (s == "combined") return AccessLogFormat::kCombined;
  if (s == "json") return AccessLogFormat::kJson;
  return std::nullopt;
}

const char* to_string(AccessLogFormat f) noexcept { return f == AccessLogFormat::kJson ? "json" : "combined"; }

std::string_view RemoteAddr::of(const ConnectionInfo* info) noexcept {
  if (!looked_up_) {
    looked_up_ = true;
    if (info)
      if (auto a = info->peer_address()) set(*a);
  }
  return view();
}

void RemoteAddr::set(const Address& a) noexcept {
  len_ = 0;
  const void* ip = nullptr;
  if (a.family() == AF_INET) {
    ip = &reinterpret_cast<const sockaddr_in*>(a.sockaddr_ptr())->sin_addr;
  } else if (a.family() == AF_INET6) {
    ip = &reinterpret_cast<const sockaddr_in6*>(a.sockaddr_ptr())->sin6_addr;
  } else if (a.family() == AF_UNIX) {
    std::memcpy(buf_, "unix:", 5);  // nginx's $remote_addr for a Unix-socket client
    len_ = 5;
    return;
  }
  if (ip && ::inet_ntop(a.family(), ip, buf_, sizeof buf_)) len_ = std::strlen(buf_);
}

void AccessLog::format(AccessLogFormat format, const AccessLogEntry& e, std::time_t when, std::string& out) {
  LocalTime t;
  fill_time(t, when);
  format_line(format, e, t, out);
}

AccessLog::AccessLog(AccessLogOptions options) : options_(std::move(options)), half_(options_.buffer_bytes / 2) {
  if (options_.path.empty()) throw std::invalid_argument("access log: the path is empty (a file, or \"stdout\")");
  if (options_.buffer_bytes < 1024) {
    throw std::invalid_argument("access log '" + options_.path + "': buffer_bytes must be at least 1024");
  }
  if (options_.flush_interval <= Duration::zero()) {
    throw std::invalid_argument("access log '" + options_.path + "': flush_interval must be positive");
  }
  if (is_stdout(options_.path)) {
    fd_ = STDOUT_FILENO;
  } else {
    std::error_code ec;
    fd_ = open_append(options_.path, ec);
    if (fd_ < 0) throw std::system_error(ec, "access log '" + options_.path + "'");
    owns_fd_ = true;
  }
  active_.data.reset(new char[options_.buffer_bytes]);
  spare_.data.reset(new char[options_.buffer_bytes]);
  // The writer takes no signal: SIGPIPE from a closed pipe becomes EPIPE (counted), and the
  // process's signals (SIGHUP, SIGTERM) go to the threads that wait for them.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    writer_ = std::thread([this] { run(); });
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (owns_fd_) ::close(fd_);
    throw;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

AccessLog::~AccessLog() {
  {
    std::lock_guard<std::mutex> lk(wake_mu_);
    stop_ = true;
  }
  wake_cv_.notify_one();
  writer_.join();
  if (owns_fd_) ::close(fd_);
}

void AccessLog::log(const AccessLogEntry& e) noexcept {
  // Formatted into a per-thread array when the line surely fits (raw stores, no capacity
  // checks), else into a per-thread string that keeps its capacity: no allocation per line once
  // warm either way. Then copied into the buffer under mu_.
  constexpr std::size_t kRawCap = 4096;
  thread_local char raw[kRawCap];
  thread_local std::string scratch;
  const char* line = raw;
  std::size_t n = 0;
  const LocalTime& t = cached_time(::time(nullptr));
  if (line_bound(e) <= kRawCap) {
    RawOut out(raw);
    format_line(options_.format, e, t, out);
    n = out.size();
  } else {
    try {
      scratch.clear();
      format_line(options_.format, e, t, scratch);
    } catch (...) {  // out of memory growing the scratch string
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    line = scratch.data();
    n = scratch.size();
  }
  bool kick = false, dropped = false;
  {
    std::lock_guard<SpinLock> lk(mu_);
    if (active_.size + n <= options_.buffer_bytes) {
      std::memcpy(active_.data.get() + active_.size, line, n);
      active_.size += n;
      if (!kicked_ && active_.size >= half_) kick = kicked_ = true;  // protocol 1
    } else {
      kick = !kicked_;
      kicked_ = true;
      dropped = true;
    }
  }
  if (dropped) dropped_.fetch_add(1, std::memory_order_relaxed);
  if (kick) wake();
}

void AccessLog::reopen() noexcept {
  if (!owns_fd_) return;  // stdout (owns_fd_ is set before the writer starts and never changes)
  {
    std::lock_guard<SpinLock> lk(mu_);
    if (reopen_at_ == kNoReopen) reopen_at_ = active_.size;  // protocol 3
  }
  wake();
}

AccessLogStats AccessLog::stats() const noexcept {
  return {written_.load(std::memory_order_relaxed), dropped_.load(std::memory_order_relaxed),
          errors_.load(std::memory_order_relaxed)};
}

void AccessLog::wake() noexcept {
  {
    std::lock_guard<std::mutex> lk(wake_mu_);
    wake_ = true;
  }
  wake_cv_.notify_one();
}

void AccessLog::run() noexcept {
  pthread_setname_np(pthread_self(), "lionet-alog");
  for (;;) {
    bool stop = false;
    {
      std::unique_lock<std::mutex> lk(wake_mu_);  // protocol 2
      wake_cv_.wait_for(lk, options_.flush_interval, [this] { return wake_ || stop_; });
      wake_ = false;
      stop = stop_;
    }
    std::size_t reopen_at = kNoReopen;
    {
      std::lock_guard<SpinLock> lk(mu_);
      std::swap(active_, spare_);
      kicked_ = false;
      reopen_at = reopen_at_;
      reopen_at_ = kNoReopen;
    }
    if (reopen_at != kNoReopen) {  // protocol 3
      write_out(spare_.data.get(), reopen_at);
      reopen_now();
      write_out(spare_.data.get() + reopen_at, spare_.size - reopen_at);
    } else {
      write_out(spare_.data.get(), spare_.size);
    }
    spare_.size = 0;
    if (stop) return;  // protocol 4
  }
}

void AccessLog::write_out(const char* p, std::size_t n) noexcept {
  const char* const begin = p;
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int err = w < 0 ? errno : EIO;
      const auto lost = static_cast<uint64_t>(std::count(p, p + n, '\n'));
      errors_.fetch_add(1, std::memory_order_relaxed);
      dropped_.fetch_add(lost, std::memory_order_relaxed);
      uint64_t held = 0;
      if (g_write_error_log.admit(held)) {
        LIONET_LOG_ERROR(http_log(), "access log '{}': write failed: {} ({} line(s) lost; {} more failed writes)",
                         options_.path, std::strerror(err), lost, held);
      }
      break;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  written_.fetch_add(static_cast<uint64_t>(std::count(begin, p, '\n')), std::memory_order_relaxed);
}

void AccessLog::reopen_now() noexcept {
  std::error_code ec;
  const int fd = open_append(options_.path, ec);
  if (fd < 0) {
    LIONET_LOG_ERROR(http_log(), "access log '{}': reopen failed: {}; still writing to the file opened before",
                     options_.path, ec.message());
    return;
  }
  ::close(fd_);
  fd_ = fd;
}
}  // namespace lionet::http
