// lionet/file/aligned_buffer.cc: AlignedBuffer's allocation (see aligned_buffer.h).
#include "lionet/file/aligned_buffer.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace lionet {

AlignedBuffer::AlignedBuffer(std::size_t size, std::size_t alignment) : alignment_(alignment) {
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) throw std::bad_alloc();
  size_ = align_up(size, alignment);
  if (size_ == 0) return;
  void* p = nullptr;
  if (posix_memalign(&p, alignment, size_) != 0) throw std::bad_alloc();
  std::memset(p, 0, size_);
  data_ = static_cast<std::byte*>(p);
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    std::free(data_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    alignment_ = o.alignment_;
  }
  return *this;
}
}  // namespace lionet
