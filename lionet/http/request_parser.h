// lionet/http/request_parser.h: lionet::http::RequestParser, the incremental HTTP/1.1 request
// head parser (RFC 9112 sections 2-3, 5-6), usable on its own (the server, the unit tests and
// the libFuzzer target tests/fuzz/http_parser_fuzz.cc drive it).
//
// Owns: the request line and header grammar, the limits, and the framing decision (no body,
// Content-Length, chunked). Must not copy header bytes or allocate once warm: the result is
// string_views into the caller's bytes, and the field vectors keep their capacity.
//
// Use: feed the bytes of one request from its first byte, growing: parse(data, size) with the
// same prefix each time (data may move between calls: the parser keeps offsets, never
// pointers). kNeedMore asks for more bytes; kDone means head_size() bytes form the head and
// head() views data; kError means error_status() is the status to answer with and the
// connection must be closed. A kError with head_complete() (today only a Content-Length over
// max_body_bytes) refused a head that is whole and otherwise valid: head() views data as after
// kDone, so the server can let the route it was meant for word the answer. If the bytes move
// after kDone (or such a kError), rebind(new_data) re-points the views. reset() before the next
// request (capacity is kept).
//
// Rules (strict where leniency lets a proxy and this server disagree about message bounds):
//   - lines end in CRLF (a bare LF or CR is 400); up to 4 empty lines before a request are
//     skipped (RFC 9112 2.2);
//   - request-line = method SP request-target SP HTTP-version, single spaces; method is a token;
//     the target is visible ASCII; over max_request_line bytes is 414;
//   - HTTP/1.0 and HTTP/1.1 (and 1.x, answered as 1.1) are served; HTTP/0-9.x other than 1 is
//     505; anything else in the version is 400;
//   - origin-form, absolute-form (http/https: host and path taken from the target, the Host
//     field is then ignored as RFC 9112 3.2.2 says), asterisk-form (OPTIONS only),
//     authority-form (CONNECT only);
//   - field-name token ':' OWS value OWS; whitespace before the ':' and obs-fold are 400;
//     control bytes in values are 400; header section over max_header_bytes or more than
//     max_headers fields is 431;
//   - HTTP/1.1 needs exactly one Host (else 400); two Hosts are 400 in any version;
//   - Content-Length is 1*DIGIT (at most 18 digits); repeats with the same value are accepted,
//     different values are 400; over max_body_bytes is 413;
//   - Transfer-Encoding together with Content-Length is 400 (smuggling); a Transfer-Encoding
//     whose last coding is not chunked, or chunked twice, is 400; codings other than chunked
//     are 501 (not implemented); Transfer-Encoding in an HTTP/1.0 request is 400;
//   - Connection: close / keep-alive decide keep_alive with the version (1.1 keeps alive
//     unless close; 1.0 closes unless keep-alive);
//   - Expect: 100-continue sets expect_continue (HTTP/1.1 only); any other expectation is 417.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "lionet/http/headers.h"

namespace lionet::http {

struct ParserLimits {
  std::size_t max_request_line = 8192;  // bytes incl. CRLF; 414 beyond. YAML: http.max_request_line
  std::size_t max_header_bytes = 65536;  // header section incl. final CRLF; 431. YAML: http.max_header_bytes
  std::size_t max_headers = 100;  // fields; 431 beyond. YAML: http.max_headers
  uint64_t max_body_bytes = 8u << 20;  // Content-Length / chunked total; 413. YAML: http.max_body_bytes
};

enum class BodyKind : uint8_t { kNone, kContentLength, kChunked };

struct RequestHead {
  std::string_view method;  // "GET" (case-sensitive, as RFC 9110 9.1 says)
  std::string_view target;  // the request-target as sent
  std::string_view path;  // path part of the target ("*" for asterisk-form, "" for CONNECT)
  std::string_view query;  // after '?', without it ("" if none)
  std::string_view host;  // authority of an absolute-form target, else the Host field
  int version_minor = 1;  // HTTP/1.<minor> (0 or 1; higher minors are stored as 1)
  HeaderList headers;
  BodyKind body_kind = BodyKind::kNone;
  uint64_t content_length = 0;  // for kContentLength
  bool keep_alive = true;
  bool expect_continue = false;
  bool absolute_form = false;
};

class RequestParser {
 public:
  enum class State : uint8_t { kNeedMore, kDone, kError };

  explicit RequestParser(ParserLimits limits = {});
  void set_limits(const ParserLimits& limits) noexcept { limits_ = limits; }
  const ParserLimits& limits() const noexcept { return limits_; }

  // See the top of the file. data[0..size) must start with the request's first byte and keep
  // the bytes given before. Cost: each byte is scanned once in total over all calls.
  State parse(const char* data, size_t size) noexcept;
  void reset() noexcept;
  // After kDone: re-points head()'s views to a moved copy of the same bytes.
  void rebind(const char* data) noexcept;

  State state() const noexcept { return state_; }
  size_t head_size() const noexcept { return head_size_; }
  // Bytes received for this request so far (at least one: distinguishes a timeout on a started
  // request, answered 408, from an idle connection, closed silently).
  const RequestHead& head() const noexcept { return head_; }
  RequestHead& head() noexcept { return head_; }
  int error_status() const noexcept { return error_status_; }
  const char* error_reason() const noexcept { return error_reason_; }
  // After kError: the head was read whole and only a limit on what it announces refused it
  // (see the top of the file); head() and head_size() are then valid.
  bool head_complete() const noexcept { return head_complete_; }

 private:
  struct Span {
    uint32_t off = 0, len = 0;
  };
  struct FieldSpans {
    Span name, value;
  };
  State fail(int status, const char* reason) noexcept;
  // One complete line [begin, end) without its CRLF. Returns false on error.
  bool request_line(const char* d, size_t begin, size_t end) noexcept;
  bool field_line(const char* d, size_t begin, size_t end) noexcept;
  // Semantics of the whole head (framing, Host, Connection, Expect).
  bool finish(const char* d) noexcept;
  bool split_target(const char* d) noexcept;
  void bind(const char* d) noexcept;
  std::string_view view(const char* d, Span s) const noexcept { return {d + s.off, s.len}; }

  ParserLimits limits_;
  State state_ = State::kNeedMore;
  bool in_headers_ = false;
  int empty_lines_ = 0;
  size_t line_start_ = 0;  // offset of the current (incomplete) line
  size_t scanned_ = 0;  // bytes already searched for '\n'
  size_t headers_start_ = 0;  // offset just after the request line
  size_t head_size_ = 0;
  int error_status_ = 0;
  const char* error_reason_ = "";
  bool head_complete_ = false;  // kError on a whole, otherwise valid head
  Span method_, target_, path_, query_, host_;
  bool path_is_static_slash_ = false;  // absolute-form without a path: path is "/"
  std::vector<FieldSpans> fields_;
  RequestHead head_;
};
}  // namespace lionet::http
