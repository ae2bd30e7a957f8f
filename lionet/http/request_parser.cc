// lionet/http/request_parser.cc: RequestParser (rules in request_parser.h).
#include "lionet/http/request_parser.h"

#include <cstring>

#include "lionet/http/detail/chars.h"

namespace lionet::http {
using detail::is_field_char;
using detail::is_target_char;
using detail::is_tchar;

namespace {
constexpr int kMaxEmptyLinesBeforeRequest = 4;
constexpr size_t kMaxContentLengthDigits = 18;  // < 2^63: no overflow in the accumulation
const char kSlash[] = "/";

bool starts_with_icase(std::string_view s, std::string_view prefix) noexcept {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

// Host field / authority characters (RFC 3986 reg-name, IP-literal brackets, port colon).
bool valid_authority(std::string_view a) noexcept {
  for (char c : a) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              std::strchr("-._~%!$&'()*+,;=:[]", c) != nullptr;
    if (!ok || c == '\0') return false;
  }
  return true;
}
}  // namespace

RequestParser::RequestParser(ParserLimits limits) : limits_(limits) {
  fields_.reserve(32);
  head_.headers.reserve(32);
}

void RequestParser::reset() noexcept {
  state_ = State::kNeedMore;
  in_headers_ = false;
  empty_lines_ = 0;
  line_start_ = scanned_ = headers_start_ = head_size_ = 0;
  error_status_ = 0;
  error_reason_ = "";
  head_complete_ = false;
  method_ = target_ = path_ = query_ = host_ = Span{};
  path_is_static_slash_ = false;
  fields_.clear();
  head_.headers.clear();
  head_.body_kind = BodyKind::kNone;
  head_.content_length = 0;
  head_.keep_alive = true;
  head_.expect_continue = false;
  head_.absolute_form = false;
  head_.version_minor = 1;
}

RequestParser::State RequestParser::fail(int status, const char* reason) noexcept {
  state_ = State::kError;
  error_status_ = status;
  error_reason_ = reason;
  head_.keep_alive = false;
  return state_;
}

RequestParser::State RequestParser::parse(const char* d, size_t size) noexcept {
  if (state_ != State::kNeedMore) return state_;
  for (;;) {
    const void* nl = scanned_ < size ? std::memchr(d + scanned_, '\n', size - scanned_) : nullptr;
    if (!nl) {
      scanned_ = size;
      // Limits apply to partial lines too: a client cannot make us buffer past them.
      if (!in_headers_) {
        if (size - line_start_ > limits_.max_request_line) return fail(414, "request line too long");
      } else if (size - headers_start_ > limits_.max_header_bytes) {
        return fail(431, "header section too large");
      }
      return State::kNeedMore;
    }
    size_t lf = static_cast<size_t>(static_cast<const char*>(nl) - d);
    size_t next = lf + 1;
    scanned_ = next;
    // Limits before grammar, so that the answer does not depend on how the bytes arrived.
    if (!in_headers_ && next - line_start_ > limits_.max_request_line) return fail(414, "request line too long");
    if (in_headers_ && next - headers_start_ > limits_.max_header_bytes) return fail(431, "header section too large");
    if (lf == line_start_ || d[lf - 1] != '\r')
      return fail(400, "line not ended by CRLF (a bare LF; send CRLF line endings, e.g. nc -C)");
    size_t end = lf - 1;
    if (!in_headers_) {
      if (end == line_start_) {  // an empty line before the request (RFC 9112 2.2)
        if (++empty_lines_ > kMaxEmptyLinesBeforeRequest) return fail(400, "too many empty lines");
        line_start_ = next;
        continue;
      }
      if (!request_line(d, line_start_, end)) return state_;
      in_headers_ = true;
      headers_start_ = line_start_ = next;
      continue;
    }
    if (end == line_start_) {  // the empty line: end of the head
      head_size_ = next;
      if (!finish(d)) {
        if (head_complete_) bind(d);
        return state_;
      }
      bind(d);
      state_ = State::kDone;
      return state_;
    }
    if (fields_.size() >= limits_.max_headers) return fail(431, "too many header fields");
    if (!field_line(d, line_start_, end)) return state_;
    line_start_ = next;
  }
}

bool RequestParser::request_line(const char* d, size_t b, size_t e) noexcept {
  size_t i = b;
  while (i < e && is_tchar(d[i])) ++i;
  if (i == b || i == e || d[i] != ' ') return fail(400, "bad method"), false;
  method_ = {static_cast<uint32_t>(b), static_cast<uint32_t>(i - b)};
  size_t t = ++i;
  while (i < e && is_target_char(d[i])) ++i;
  if (i == t || i == e || d[i] != ' ') return fail(400, "bad request target"), false;
  target_ = {static_cast<uint32_t>(t), static_cast<uint32_t>(i - t)};
  std::string_view version(d + i + 1, e - i - 1);
  if (version.size() >= 6 && version.substr(0, 5) == "HTTP/" && version[5] >= '0' && version[5] <= '9' &&
      version[5] != '1') {
    return fail(505, "HTTP version not supported"), false;
  }
  if (version.size() != 8 || version.substr(0, 7) != "HTTP/1." || version[7] < '0' || version[7] > '9')
    return fail(400, "bad HTTP version"), false;
  head_.version_minor = version[7] == '0' ? 0 : 1;
  return split_target(d);
}

bool RequestParser::split_target(const char* d) noexcept {
  std::string_view target = view(d, target_);
  std::string_view method = view(d, method_);
  uint32_t off = target_.off;
  size_t start;  // offset in target where the path begins (npos: no path)
  if (target[0] == '/') {
    start = 0;
  } else if (target == "*") {
    if (method != "OPTIONS") return fail(400, "asterisk-form outside OPTIONS"), false;
    path_ = target_;
    return true;
  } else if (method == "CONNECT") {
    if (!valid_authority(target)) return fail(400, "bad authority-form target"), false;
    host_ = target_;
    path_ = {off, 0};
    return true;
  } else {
    size_t scheme;
    if (starts_with_icase(target, "http://")) {
      scheme = 7;
    } else if (starts_with_icase(target, "https://")) {
      scheme = 8;
    } else {
      return fail(400, "bad request target"), false;
    }
    size_t auth_end = target.find_first_of("/?#", scheme);
    if (auth_end == std::string_view::npos) auth_end = target.size();
    std::string_view authority = target.substr(scheme, auth_end - scheme);
    if (authority.empty() || !valid_authority(authority) || authority.find('@') != std::string_view::npos)
      return fail(400, "bad authority in absolute-form target"), false;
    host_ = {static_cast<uint32_t>(off + scheme), static_cast<uint32_t>(authority.size())};
    head_.absolute_form = true;
    start = auth_end;
    if (start == target.size() || target[start] != '/') path_is_static_slash_ = true;
  }
  size_t q = target.find('?', start);
  size_t path_end = q == std::string_view::npos ? target.size() : q;
  path_ = {static_cast<uint32_t>(off + start), static_cast<uint32_t>(path_end - start)};
  if (q != std::string_view::npos)
    query_ = {static_cast<uint32_t>(off + q + 1), static_cast<uint32_t>(target.size() - q - 1)};
  return true;
}

bool RequestParser::field_line(const char* d, size_t b, size_t e) noexcept {
  size_t i = b;
  while (i < e && is_tchar(d[i])) ++i;
  if (i == b) return fail(400, d[b] == ' ' || d[b] == '\t' ? "obsolete line folding" : "bad field name"), false;
  if (i == e || d[i] != ':') return fail(400, "bad field name (no ':' or whitespace before it)"), false;
  FieldSpans f;
  f.name = {static_cast<uint32_t>(b), static_cast<uint32_t>(i - b)};
  ++i;
  while (i < e && (d[i] == ' ' || d[i] == '\t')) ++i;
  size_t ve = e;
  while (ve > i && (d[ve - 1] == ' ' || d[ve - 1] == '\t')) --ve;
  for (size_t k = i; k < ve; ++k)
    if (!is_field_char(d[k])) return fail(400, "bad character in field value"), false;
  f.value = {static_cast<uint32_t>(i), static_cast<uint32_t>(ve - i)};
  fields_.push_back(f);
  return true;
}

bool RequestParser::finish(const char* d) noexcept {
  bool has_cl = false, has_te = false, te_chunked_last = false, te_other = false, connection_close = false,
       connection_keep_alive = false;
  int hosts = 0;
  uint64_t cl = 0;
  for (const FieldSpans& f : fields_) {
    std::string_view name = view(d, f.name), value = view(d, f.value);
    switch (name.size()) {
      case 4:
        if (iequals(name, "host")) {
          if (++hosts > 1) return fail(400, "more than one Host"), false;
          if (!valid_authority(value)) return fail(400, "bad Host"), false;
          if (!head_.absolute_form) host_ = f.value;
        }
        break;
      case 6:
        if (iequals(name, "expect") && head_.version_minor >= 1) {
          if (!iequals(value, "100-continue")) return fail(417, "unsupported expectation"), false;
          head_.expect_continue = true;
        }
        break;
      case 10:
        if (iequals(name, "connection")) {
          connection_close |= has_token(value, "close");
          connection_keep_alive |= has_token(value, "keep-alive");
        }
        break;
      case 14:
        if (iequals(name, "content-length")) {
          if (value.empty() || value.size() > kMaxContentLengthDigits) return fail(400, "bad Content-Length"), false;
          uint64_t v = 0;
          for (char c : value) {
            if (c < '0' || c > '9') return fail(400, "bad Content-Length"), false;
            v = v * 10 + static_cast<uint64_t>(c - '0');
          }
          if (has_cl && v != cl) return fail(400, "differing Content-Length values"), false;
          has_cl = true;
          cl = v;
        }
        break;
      case 17:
        if (iequals(name, "transfer-encoding")) {
          has_te = true;
          // Walk the codings of this field; the list continues across repeated fields.
          const char* te_error = nullptr;
          for_each_element(value, [&](std::string_view coding) {
            if (iequals(coding, "chunked")) {
              if (te_chunked_last) te_error = "chunked applied twice";
              te_chunked_last = true;
            } else {
              if (te_chunked_last) te_error = "chunked is not the final transfer coding";
              te_other = true;
            }
            return te_error == nullptr;
          });
          if (te_error) return fail(400, te_error), false;
        }
        break;
      default: break;
    }
  }
  if (has_te) {
    if (has_cl) return fail(400, "both Content-Length and Transfer-Encoding"), false;
    if (head_.version_minor == 0) return fail(400, "Transfer-Encoding in an HTTP/1.0 request"), false;
    if (!te_chunked_last) return fail(400, "chunked is not the final transfer coding"), false;
    if (te_other) return fail(501, "transfer coding not implemented"), false;
    head_.body_kind = BodyKind::kChunked;
  } else if (has_cl) {
    head_.content_length = cl;
    head_.body_kind = cl > 0 ? BodyKind::kContentLength : BodyKind::kNone;
    if (cl > limits_.max_body_bytes) {
      // Refused before the Host rule is checked (the status stays 413 either way), so the head
      // counts as complete only if that rule holds too.
      head_complete_ = hosts > 0 || head_.version_minor == 0;
      return fail(413, "Content-Length over the limit"), false;
    }
  }
  if (hosts == 0 && head_.version_minor >= 1) return fail(400, "HTTP/1.1 request without Host"), false;
  head_.keep_alive = head_.version_minor >= 1 ? !connection_close : (connection_keep_alive && !connection_close);
  return true;
}

void RequestParser::bind(const char* d) noexcept {
  head_.method = view(d, method_);
  head_.target = view(d, target_);
  head_.path = path_is_static_slash_ ? std::string_view(kSlash, 1) : view(d, path_);
  head_.query = view(d, query_);
  head_.host = view(d, host_);
  head_.headers.clear();
  for (const FieldSpans& f : fields_) head_.headers.add(view(d, f.name), view(d, f.value));
}

void RequestParser::rebind(const char* d) noexcept {
  if (state_ == State::kDone || head_complete_) bind(d);
}
}  // namespace lionet::http
