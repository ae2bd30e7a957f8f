// lionet/http/detail/connection.h: the state of one server connection (input buffer, parser,
// the reused Request/Response, body decoding) and its request loop. Internal to http/:
// serve_connection() in server.h is the public entry.
//
// Input buffer layout while a request is handled (offsets into buf_):
//   [ ... | head: r_ .. head_end_ | body/pipelined bytes: body_pos_ .. w_ | free .. cap_ ]
// The head's views point into buf_, so from kDone until the request is finished buf_ is never
// moved or reallocated: before binding the views the tail is made at least kBodyRoom bytes,
// and body reads reuse the tail from head_end_ once body_pos_ has caught up with w_.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "lionet/base/clock.h"
#include "lionet/http/access_log.h"
#include "lionet/http/chunked_decoder.h"
#include "lionet/http/request.h"
#include "lionet/http/request_parser.h"
#include "lionet/http/response.h"
#include "lionet/http/server.h"

namespace lionet::http::detail {

class Connection final : public BodySource {
 public:
  Connection(Stream& stream, const Handler& handler, const ServerOptions& options, const std::atomic<bool>* stopping,
             ServerStats* stats, const ConnectionInfo* info);
  // Serves HTTP/1 requests until the connection ends. True if it goes to HTTP/2 instead
  // (options.http2 is set and it began with the h2c preface; TLS's ALPN h2 never gets here): `prefix` then
  // holds the bytes read so far, and the caller hands the stream over once this object is gone
  // (serve_connection: its ~1.3 KiB and its buffers are not kept under the HTTP/2 session).
  bool run(std::string& prefix) noexcept;

  // BodySource
  Result<size_t> read_body(void* buf, size_t n) override;
  bool body_complete() const noexcept override { return body_done_; }
  bool can_take_over() const noexcept override { return true; }

 private:
  static constexpr size_t kBodyRoom = 4096;
  enum class ReadOutcome { kData, kEof, kTimeout, kError };

  // One read into the tail before `deadline` (making room first; may move buf_: only call
  // while no head views are live).
  ReadOutcome read_more(TimePoint deadline);
  // Reads at the tail without moving anything (room must exist).
  ReadOutcome read_tail(TimePoint deadline, size_t* got);
  // read_more / read_tail within `timeout` from when the read has to wait (the socket resolves
  // it then: no clock read when data is there, one when it is not).
  ReadOutcome read_more_within(Duration timeout);
  ReadOutcome read_tail_within(Duration timeout, size_t* got);
  void ensure_room(size_t n);
  void move_live_to_front(size_t cap);  // [r_, w_) to the start of a buffer of cap bytes
  void set_read_deadline(TimePoint deadline);
  // Reads the head of the next request; false when the connection should end.
  bool read_head(bool first_request, TimePoint accepted);
  // The first line of the unread input ends in " HTTP/1.<digit>" (or is not complete yet).
  bool first_line_names_http1() const noexcept {
    std::string_view in(buf_.get() + r_, w_ - r_);
    size_t eol = in.find('\n');
    if (eol == std::string_view::npos) return true;
    std::string_view line = in.substr(0, eol);
    if (line.ends_with('\r')) line.remove_suffix(1);
    return line.size() >= 9 && line.substr(line.size() - 9, 8) == " HTTP/1.";
  }
  // The unread input is a prefix of the HTTP/2 preface (or starts with all of it).
  bool looks_like_http2_preface() const noexcept {
    std::string_view in(buf_.get() + r_, w_ - r_);
    return in.size() >= kHttp2Preface.size() ? in.starts_with(kHttp2Preface) : kHttp2Preface.starts_with(in);
  }
  bool handle_request();
  // A 101 response: sends it and runs the response's TakeoverFn (takeover.h). Always false:
  // the connection is no longer HTTP's.
  bool take_over() noexcept;
  void start_body();
  // Builds the head into out_ for the current response.
  void build_head(bool keep_alive, bool chunked);
  // body_sent: body bytes written (less than the body's size when a write failed).
  Result<void> send_response(bool& keep_alive, uint64_t& body_sent);
  // Reads and discards the rest of the body; false if it cannot be done within the limits.
  bool drain_body();
  void send_error(int status, const char* reason) noexcept;
  // Answers a head the parser refused whole (head_complete()) with options_.refusal's response
  // if it keeps the status, else with send_error().
  void refuse(int status, const char* reason);
  void lingering_close() noexcept;
  // The access log line of the current request (its head parsed), or of a refused one (the
  // first line of the unread input, if it ended). Only with access_log_ set.
  void log_access(int status, uint64_t body_sent) noexcept;
  void log_refused(int status, uint64_t body_sent) noexcept;
  void fill_log_entry(AccessLogEntry& e, int status, uint64_t body_sent) noexcept;

  Stream& stream_;
  const Handler& handler_;
  const ServerOptions& options_;
  const std::atomic<bool>* stopping_;
  ServerStats* stats_;
  const ConnectionInfo* info_;

  void release_buffers() noexcept;  // before a takeover's protocol runs
  std::unique_ptr<char[]> buf_;
  size_t cap_ = 0, r_ = 0, w_ = 0;
  size_t head_end_ = 0, body_pos_ = 0;

  RequestParser parser_;
  ChunkedDecoder chunked_;
  Request request_;
  Response response_;
  std::string out_;  // the response head being written

  // Body state of the current request.
  uint64_t body_left_ = 0;  // Content-Length bytes not yet delivered
  bool body_done_ = true;
  bool continue_sent_ = false;
  int body_error_status_ = 0;  // 400 / 408 / 413 when the body failed
  bool stream_failed_ = false;
  TimePoint body_deadline_{};
  std::size_t served_ = 0;
  std::optional<Duration> write_timeout_;
  bool handoff_ = false;  // the connection started with the HTTP/2 preface: run() hands it over

  // Access log (null = off): the time the current request's first byte was seen, and the
  // client's address, looked up at the first line of the connection.
  AccessLog* const access_log_;
  TimePoint request_start_{};
  RemoteAddr peer_;
};
}  // namespace lionet::http::detail
