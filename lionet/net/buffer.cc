// lionet/net/buffer.cc: Buffer (see buffer.h).
#include "lionet/net/buffer.h"

#include <algorithm>
#include <cstring>

#include "lionet/base/macros.h"
#include "lionet/net/stream.h"

namespace lionet {

Buffer::Buffer(size_t initial_capacity)
    : buf_(new char[std::max<size_t>(initial_capacity, 16)]), cap_(std::max<size_t>(initial_capacity, 16)) {}

void Buffer::consume(size_t n) noexcept {
  LIONET_DCHECK(n <= size(), "Buffer::consume past the readable bytes");
  r_ += n;
  if (r_ == w_) r_ = w_ = 0;
}

void Buffer::ensure_writable(size_t n) {
  if (writable() >= n) return;
  size_t live = size();
  if (cap_ - live >= n) {
    // Enough room once compacted: moving live bytes costs no more than the copy growth makes.
    std::memmove(buf_.get(), data(), live);
  } else {
    size_t cap = std::max(cap_ * 2, live + n);
    std::unique_ptr<char[]> nb(new char[cap]);
    std::memcpy(nb.get(), data(), live);
    buf_ = std::move(nb);
    cap_ = cap;
  }
  r_ = 0;
  w_ = live;
}

void Buffer::append(const void* p, size_t n) {
  ensure_writable(n);
  std::memcpy(write_ptr(), p, n);
  commit(n);
}

Result<size_t> Buffer::read_from(Stream& s, size_t min_room) {
  ensure_writable(min_room);
  auto r = s.read(write_ptr(), writable());
  if (r.ok()) commit(*r);
  return r;
}

Result<size_t> Buffer::write_to(Stream& s) {
  auto r = s.write(data(), size());
  if (r.ok()) consume(*r);
  return r;
}
}  // namespace lionet
