// lionet/net/buffer.h: lionet::Buffer, a growable byte buffer with a read cursor and a write
// cursor, for incremental parsers: read from a Stream into the free tail, parse from the
// readable head in place (no copy of header bytes), consume what was parsed.
//
//   [ consumed | readable: data()..data()+size() | writable: write_ptr()..+writable() ]
//
// Owns its storage (one heap block). Growth: when the tail is too small, the readable bytes
// are first moved to the front (if that makes room), else the block doubles. Pointers into
// the buffer are invalidated by ensure_writable(), append() and read_from().
// Not thread-safe: one owner (the connection's fiber).
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "lionet/base/result.h"

namespace lionet {
class Stream;

class Buffer {
 public:
  explicit Buffer(size_t initial_capacity = 4096);
  Buffer(Buffer&&) noexcept = default;
  Buffer& operator=(Buffer&&) noexcept = default;

  // Readable bytes.
  const char* data() const noexcept { return buf_.get() + r_; }
  size_t size() const noexcept { return w_ - r_; }
  bool empty() const noexcept { return w_ == r_; }
  std::string_view view() const noexcept { return {data(), size()}; }
  // Drops n readable bytes from the front (n <= size()). Empty => both cursors reset to 0.
  void consume(size_t n) noexcept;
  void clear() noexcept { r_ = w_ = 0; }

  // The free tail.
  char* write_ptr() noexcept { return buf_.get() + w_; }
  size_t writable() const noexcept { return cap_ - w_; }
  // Makes writable() >= n.
  void ensure_writable(size_t n);
  // Marks n bytes written at write_ptr() as readable (n <= writable()).
  void commit(size_t n) noexcept { w_ += n; }
  void append(const void* p, size_t n);
  void append(std::string_view s) { append(s.data(), s.size()); }

  size_t capacity() const noexcept { return cap_; }

  // One Stream::read into the tail (made at least min_room bytes first). Returns the bytes
  // read, 0 at end of stream.
  Result<size_t> read_from(Stream& s, size_t min_room = 4096);
  // Writes every readable byte to s and consumes them.
  Result<size_t> write_to(Stream& s);

 private:
  std::unique_ptr<char[]> buf_;
  size_t cap_ = 0;
  size_t r_ = 0;  // read cursor
  size_t w_ = 0;  // write cursor
};
}  // namespace lionet
