// lionet/http/response.h: lionet::http::Response, what a handler fills in; and
// lionet::http::BodyWriter, the sink a streamed body writes into.
//
// Owns: the status, the header block, and exactly one body source:
//   - memory: set_body(std::string) / body() (an owned buffer the server reuses per
//     connection), or set_body_view(view, keep) (no copy; `keep` holds what the view points
//     into until the response is sent, e.g. a cache entry);
//   - file region: set_file(fd, offset, length, keep): sent with Stream::sendfile (kernel
//     sendfile on TCP, the TLS path under TLS); `keep` owns the fd (or the cache entry that
//     owns it) until the bytes are out;
//   - writer: set_body_writer(fn, length): fn(BodyWriter&) runs after the handler and the
//     `after` middleware; with a length it writes exactly that many raw bytes (Content-Length),
//     without one the body is chunked (HTTP/1.1 clients) or close-delimited (HTTP/1.0).
// Nothing is sent while the handler runs: middleware `after` hooks may still change the status
// and headers. The server adds Date, Server, Content-Length / Transfer-Encoding and Connection;
// do not set those yourself. HEAD requests get the same headers and no body bytes (the writer
// is not called).
// Must not: allocate on the hot path once warm (the strings keep their capacity across the
// requests of a connection), or accept CR/LF in header names or values (response splitting):
// set_header/add_header refuse them and return false.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "lionet/base/result.h"
#include "lionet/http/field_block.h"
#include "lionet/http/takeover.h"

namespace lionet {
class Stream;
}

namespace lionet::http {

// The body sink of set_body_writer(): frames chunks when the response is chunked, counts bytes
// when it has a Content-Length. All calls are blocking-style in the connection's fiber.
class BodyWriter {
 public:
  // `pending_head`: the response head not yet sent; the first write sends it in the same
  // writev as its data (one system call for small responses).
  BodyWriter(Stream& stream, bool chunked, std::string_view pending_head) noexcept
      : stream_(stream), chunked_(chunked), pending_head_(pending_head) {}
  BodyWriter(const BodyWriter&) = delete;
  BodyWriter& operator=(const BodyWriter&) = delete;

  // One chunk (chunked) or raw bytes (Content-Length). An empty write is a no-op.
  // last: nothing follows; a chunked body's terminator ("0\r\n\r\n") goes out in the same
  // writev instead of a separate small write at finish() (which then sends nothing): one
  // system call and one TCP segment fewer per response for a body written in one piece.
  Result<void> write(std::string_view data, bool last = false);
  Result<void> writev(const iovec* iov, int iovcnt, bool last = false);
  // count bytes of file_fd from offset (sendfile when not chunked: one chunk header, then the
  // file, then CRLF when chunked). EIO if the file ended early.
  Result<void> sendfile(int file_fd, off_t offset, size_t count);
  // Sends the head if nothing was written yet, and the last chunk when chunked. The server
  // calls this after the writer function returns successfully.
  Result<void> finish();

  bool chunked() const noexcept { return chunked_; }
  // Chunked: the trailer section after the last chunk is *t as it is then (the response's
  // trailer block, which the writer may still be adding to).
  void set_trailers(const std::string* t) noexcept { trailers_ = t; }
  // Body bytes written so far (without chunk framing); after a failed sendfile, the part of
  // the file that went out.
  uint64_t bytes_written() const noexcept { return written_; }
  Stream& stream() noexcept { return stream_; }

 private:
  Result<void> flush_head();
  // A chunked body's end: the last chunk, the trailer section, the final CRLF (preceded by the
  // CRLF of a data chunk when after_chunk). Built in `storage` only when there are trailers.
  std::string_view terminator(bool after_chunk, std::string& storage) const;
  Stream& stream_;
  bool chunked_;
  std::string_view pending_head_;
  uint64_t written_ = 0;
  bool finished_ = false;  // a `last` write sent the terminator
  const std::string* trailers_ = nullptr;
};

using BodyWriterFn = std::function<Result<void>(BodyWriter&)>;

class Response {
 public:
  enum class BodyType : uint8_t { kMemory, kView, kFile, kWriter };

  Response();
  // Back to 200, no headers, empty memory body; capacity kept.
  void reset() noexcept;

  void set_status(int status, std::string_view reason = {}) noexcept {
    status_ = status;
    reason_ = reason;
  }
  int status() const noexcept { return status_; }
  // Custom reason phrase, or empty (the registered phrase is used). The view must outlive the
  // response (a literal).
  std::string_view reason() const noexcept { return reason_; }

  // Replaces any field of that name. False (and nothing set) for an invalid name or a value
  // containing CR, LF or NUL.
  bool set_header(std::string_view name, std::string_view value);
  // Appends another field even if one of that name exists (Set-Cookie).
  bool add_header(std::string_view name, std::string_view value);
  // add_header for a field already checked by the same rules (a parsed head whose
  // ResponseHead::valid_fields is true): no second pass over its bytes. Debug builds check.
  void add_checked_header(std::string_view name, std::string_view value);
  // Appends every field of a block checked when it was built (add_header for each, without
  // the checks: one copy).
  void add_fields(const FieldBlock& fields) { headers_.append(fields.text()); }
  // First value of that field or "" (find with has_header).
  std::string_view header(std::string_view name) const noexcept;
  bool has_header(std::string_view name) const noexcept;
  // Removes every field of that name; returns how many.
  size_t remove_header(std::string_view name);
  // "Name: value\r\n" lines as set, for the writer.
  std::string_view header_block() const noexcept { return headers_; }
  bool set_content_type(std::string_view type) { return set_header("Content-Type", type); }

  // Memory body (owned, reused buffer).
  std::string& body() noexcept {
    type_ = BodyType::kMemory;
    return body_;
  }
  void set_body(std::string_view data) {
    type_ = BodyType::kMemory;
    body_.assign(data);
  }
  void set_body(std::string&& data) noexcept {
    type_ = BodyType::kMemory;
    body_ = std::move(data);
  }
  // Status, Content-Type and a memory body in one call.
  void reply(int status, std::string_view body, std::string_view content_type = "text/plain; charset=utf-8") {
    set_status(status);
    set_content_type(content_type);
    set_body(body);
  }
  void set_body_view(std::string_view data, std::shared_ptr<const void> keep = {}) noexcept {
    type_ = BodyType::kView;
    view_ = data;
    keep_ = std::move(keep);
  }
  void set_file(int fd, off_t offset, uint64_t length, std::shared_ptr<const void> keep = {}) noexcept {
    type_ = BodyType::kFile;
    file_fd_ = fd;
    file_offset_ = offset;
    file_length_ = length;
    keep_ = std::move(keep);
  }
  void set_body_writer(BodyWriterFn fn, std::optional<uint64_t> length = std::nullopt) noexcept {
    type_ = BodyType::kWriter;
    writer_ = std::move(fn);
    writer_length_ = length;
  }

  // Trailer fields, sent after the body (gRPC's grpc-status, a checksum known only at the
  // end). Over HTTP/2: a HEADERS frame that ends the stream. Over HTTP/1.1: the trailer
  // section of a chunked body (a response with trailers and a body goes chunked to a 1.1
  // client). Dropped where there is nowhere to put them (HTTP/1.0, HEAD, 204, 304), as RFC
  // 9110 6.5 lets a recipient drop them anyway. A body writer may add them while it writes,
  // up to its last write (the one with last = true, or the writer's return). False (nothing
  // added) for an invalid name or value, or a field that cannot be a trailer (framing,
  // routing, authentication: Content-Length, Transfer-Encoding, Host, ...).
  bool add_trailer(std::string_view name, std::string_view value);
  // "Name: value\r\n" lines as added.
  const std::string& trailer_block() const noexcept { return trailers_; }

  // Connection takeover (takeover.h): set status 101 and the new protocol's headers, then
  // this; once the 101 is sent, fn runs with the connection's stream and the connection is
  // the new protocol's. HTTP/1.1 only (Request::can_take_over()); dropped unless the status
  // is 101 when the response goes out.
  void take_over(TakeoverFn fn) noexcept { takeover_ = std::move(fn); }
  TakeoverFn& takeover() noexcept { return takeover_; }
  bool has_takeover() const noexcept { return static_cast<bool>(takeover_); }

  // Ends the connection after this response (adds Connection: close).
  void set_close(bool close = true) noexcept { close_ = close; }
  bool close() const noexcept { return close_; }

  BodyType body_type() const noexcept { return type_; }
  // Bytes the body will have, if known (memory, view, file, writer with a length).
  std::optional<uint64_t> body_size() const noexcept;
  std::string_view body_view() const noexcept { return type_ == BodyType::kView ? view_ : std::string_view(body_); }
  int file_fd() const noexcept { return file_fd_; }
  off_t file_offset() const noexcept { return file_offset_; }
  uint64_t file_length() const noexcept { return file_length_; }
  BodyWriterFn& writer() noexcept { return writer_; }

 private:
  int status_ = 200;
  std::string_view reason_;
  std::string headers_;
  std::string trailers_;
  BodyType type_ = BodyType::kMemory;
  bool close_ = false;
  std::string body_;
  std::string_view view_;
  std::shared_ptr<const void> keep_;
  int file_fd_ = -1;
  off_t file_offset_ = 0;
  uint64_t file_length_ = 0;
  BodyWriterFn writer_;
  std::optional<uint64_t> writer_length_;
  TakeoverFn takeover_;  // empty but for a 101 that hands the connection over
};
}  // namespace lionet::http
