// lionet/http/response.cc: Response header block and BodyWriter framing (see response.h).
#include "lionet/http/response.h"

#include <cstdio>
#include <cstring>
#include <functional>

#include "lionet/base/macros.h"
#include "lionet/http/detail/chars.h"
#include "lionet/http/field_block.h"
#include "lionet/http/headers.h"
#include "lionet/http/request.h"
#include "lionet/net/stream.h"

namespace lionet::http {
namespace {
bool valid_name(std::string_view name) noexcept {
  if (name.empty()) return false;
  for (char c : name)
    if (!detail::is_tchar(c)) return false;
  return true;
}
bool valid_value(std::string_view value) noexcept {
  for (std::size_t i = detail::plain_prefix(value); i < value.size(); ++i)
    if (!detail::is_field_char(value[i])) return false;
  return true;
}
}  // namespace

Response::Response() {
  headers_.reserve(256);
  body_.reserve(256);
}

void Response::reset() noexcept {
  status_ = 200;
  reason_ = {};
  headers_.clear();
  trailers_.clear();
  type_ = BodyType::kMemory;
  close_ = false;
  body_.clear();
  view_ = {};
  keep_.reset();
  file_fd_ = -1;
  file_offset_ = 0;
  file_length_ = 0;
  writer_ = nullptr;
  writer_length_.reset();
  if (takeover_) takeover_ = nullptr;
}

namespace {
// Appends "name: value\r\n" with one size change (four appends cost 4x the bookkeeping).
void append_field(std::string& block, std::string_view name, std::string_view value) {
  const std::less<const char*> before;
  auto inside = [&](std::string_view v) {
    return !v.empty() && !before(v.data(), block.data()) && before(v.data(), block.data() + block.size());
  };
  if (inside(name) || inside(value)) {  // a view of this very block: copy it before it moves
    std::string copy;
    copy.append(name).append(": ").append(value).append("\r\n");
    block += copy;
    return;
  }
  detail::append_all(block, name, std::string_view(": "), value, std::string_view("\r\n"));
}
}  // namespace

bool Response::add_header(std::string_view name, std::string_view value) {
  if (!valid_name(name) || !valid_value(value)) return false;
  append_field(headers_, name, value);
  return true;
}

void Response::add_checked_header(std::string_view name, std::string_view value) {
  LIONET_DCHECK(valid_name(name) && valid_value(value), "add_checked_header: a field add_header would refuse");
  append_field(headers_, name, value);
}

bool FieldBlock::add(std::string_view name, std::string_view value) {
  if (!valid_name(name) || !valid_value(value)) return false;
  append_field(text_, name, value);
  return true;
}

bool Response::add_trailer(std::string_view name, std::string_view value) {
  if (!valid_name(name) || !valid_value(value)) return false;
  // RFC 9110 6.5.1: fields needed for framing, routing, request modifiers, authentication,
  // content handling or control data must not be trailers.
  for (std::string_view banned : {"content-length", "transfer-encoding", "host", "content-type", "content-encoding",
                                  "content-range", "trailer", "te", "connection", "keep-alive", "upgrade",
                                  "authorization", "set-cookie", "cache-control", "expires", "date", "location"}) {
    if (iequals(name, banned)) return false;
  }
  trailers_.append(name).append(": ").append(value).append("\r\n");
  return true;
}

bool Response::set_header(std::string_view name, std::string_view value) {
  if (!valid_name(name) || !valid_value(value)) return false;
  if (!headers_.empty()) remove_header(name);
  append_field(headers_, name, value);
  return true;
}

std::string_view Response::header(std::string_view name) const noexcept {
  std::string_view found;
  for_each_line(headers_, [&](size_t, size_t, std::string_view n, std::string_view v) {
    if (!iequals(n, name)) return true;
    found = v;
    return false;
  });
  return found;
}

bool Response::has_header(std::string_view name) const noexcept {
  bool found = false;
  for_each_line(headers_, [&](size_t, size_t, std::string_view n, std::string_view) {
    found = iequals(n, name);
    return !found;
  });
  return found;
}

size_t Response::remove_header(std::string_view name) {
  // One pass: the lines kept slide down over the ones removed.
  size_t removed = 0, out = 0;
  for_each_line(headers_, [&](size_t lb, size_t le, std::string_view n, std::string_view) {
    if (iequals(n, name)) {
      ++removed;
    } else {
      if (removed > 0) std::memmove(headers_.data() + out, headers_.data() + lb, le - lb);
      out += le - lb;
    }
    return true;
  });
  if (removed > 0) headers_.resize(out);
  return removed;
}

std::optional<uint64_t> Response::body_size() const noexcept {
  switch (type_) {
    case BodyType::kMemory: return body_.size();
    case BodyType::kView: return view_.size();
    case BodyType::kFile: return file_length_;
    case BodyType::kWriter: return writer_length_;
  }
  return std::nullopt;
}

Result<void> BodyWriter::flush_head() {
  if (pending_head_.empty()) return {};
  auto r = stream_.write(pending_head_.data(), pending_head_.size());
  pending_head_ = {};
  if (!r) return r.error();
  return {};
}

Result<void> BodyWriter::write(std::string_view data, bool last) {
  iovec iov{const_cast<char*>(data.data()), data.size()};
  return writev(&iov, 1, last);
}

std::string_view BodyWriter::terminator(bool after_chunk, std::string& storage) const {
  static constexpr std::string_view kEnd = "\r\n0\r\n\r\n";  // CRLF, last chunk, empty trailers
  if (!trailers_ || trailers_->empty()) return after_chunk ? kEnd : kEnd.substr(2);
  storage.assign(after_chunk ? "\r\n0\r\n" : "0\r\n").append(*trailers_).append("\r\n");
  return storage;
}

Result<void> BodyWriter::writev(const iovec* iov, int iovcnt, bool last) {
  size_t total = 0;
  for (int i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
  if (total == 0) return {};
  // After the chunk's data: its CRLF, plus the body's end when `last`.
  std::string storage;
  const std::string_view tail = last ? terminator(/*after_chunk=*/true, storage) : std::string_view("\r\n");
  if (finished_) return errno_error(EINVAL);  // written after a `last` write: a framing bug
  if (chunked_ && last) finished_ = true;
  constexpr int kMaxIov = 16;
  iovec out[kMaxIov + 3];
  int n = 0;
  char size_line[24];
  if (!pending_head_.empty()) out[n++] = {const_cast<char*>(pending_head_.data()), pending_head_.size()};
  if (chunked_) {
    int len = std::snprintf(size_line, sizeof size_line, "%zx\r\n", total);
    out[n++] = {size_line, static_cast<size_t>(len)};
  }
  if (iovcnt > kMaxIov) {  // rare: send the prefix separately
    if (auto r = flush_head(); !r) return r;
    if (chunked_) {
      if (auto r = stream_.write(size_line, std::strlen(size_line)); !r) return r.error();
    }
    if (auto r = stream_.writev(iov, iovcnt); !r) return r.error();
    if (chunked_) {
      if (auto r = stream_.write(tail.data(), tail.size()); !r) return r.error();
    }
    written_ += total;
    return {};
  }
  for (int i = 0; i < iovcnt; ++i) out[n++] = iov[i];
  if (chunked_) out[n++] = {const_cast<char*>(tail.data()), tail.size()};
  auto r = stream_.writev(out, n);
  pending_head_ = {};
  if (!r) return r.error();
  written_ += total;
  return {};
}

Result<void> BodyWriter::sendfile(int file_fd, off_t offset, size_t count) {
  if (count == 0) return {};
  if (chunked_) {
    char size_line[24];
    int len = std::snprintf(size_line, sizeof size_line, "%zx\r\n", count);
    iovec out[2];
    int n = 0;
    if (!pending_head_.empty()) out[n++] = {const_cast<char*>(pending_head_.data()), pending_head_.size()};
    out[n++] = {size_line, static_cast<size_t>(len)};
    auto r = stream_.writev(out, n);
    pending_head_ = {};
    if (!r) return r.error();
  } else if (!pending_head_.empty()) {
    // The head shares the first segment with the file (MSG_MORE) instead of leaving alone.
    auto r = stream_.write_more(pending_head_.data(), pending_head_.size());
    pending_head_ = {};
    if (!r) return r.error();
  }
  size_t sent = 0;
  while (sent < count) {
    auto r = stream_.sendfile(file_fd, offset + static_cast<off_t>(sent), count - sent);
    if (!r) return r.error();
    if (*r == 0) return errno_error(EIO);  // the file is shorter than promised
    sent += *r;
    written_ += *r;  // as it goes: a transfer that fails half-way reports what went out
  }
  if (chunked_) {
    if (auto r = stream_.write("\r\n", 2); !r) return r.error();
  }
  return {};
}

Result<void> BodyWriter::finish() {
  if (!chunked_) return flush_head();
  if (finished_) return {};
  finished_ = true;
  std::string storage;
  const std::string_view end = terminator(/*after_chunk=*/false, storage);
  iovec out[2] = {{const_cast<char*>(pending_head_.data()), pending_head_.size()},
                  {const_cast<char*>(end.data()), end.size()}};
  const bool head = !pending_head_.empty();
  pending_head_ = {};
  if (auto r = stream_.writev(head ? out : out + 1, head ? 2 : 1); !r) return r.error();
  return {};
}

Result<size_t> Request::read_body(std::string& out) {
  size_t total = 0;
  if (auto cl = content_length(); cl && *cl > 0) out.reserve(out.size() + *cl);
  for (;;) {
    size_t old = out.size();
    out.resize(old + 16384);
    auto r = read_body(out.data() + old, 16384);
    out.resize(old + (r ? *r : 0));
    if (!r) return r.error();
    if (*r == 0) return total;
    total += *r;
  }
}
}  // namespace lionet::http
