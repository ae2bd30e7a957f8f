// lionet/file/aligned_buffer.h: AlignedBuffer, an owned, zero-filled block of memory whose
// address and size are multiples of an alignment (4096 by default): what O_DIRECT requests
// need (buffer address, length and file offset aligned to the device's logical block size).
//
// Owns: the allocation (posix_memalign / free). Must not do IO.
//
//   lionet::AlignedBuffer buf(64 * 1024);                // 64 KiB, 4096-aligned
//   auto n = file.pread(buf.span(), 0);                  // fine with O_DIRECT
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

namespace lionet {

// Alignment that satisfies O_DIRECT on every Linux block device and filesystem we know of
// (logical block sizes are 512 or 4096; the page size is 4096).
inline constexpr std::size_t kDirectIoAlignment = 4096;

inline bool is_aligned(const void* p, std::size_t a) noexcept {
  return (reinterpret_cast<std::uintptr_t>(p) & (a - 1)) == 0;
}
inline bool is_aligned(std::uint64_t v, std::size_t a) noexcept { return (v & (a - 1)) == 0; }
// Rounds n up to a multiple of a (a power of two).
inline constexpr std::size_t align_up(std::size_t n, std::size_t a) noexcept { return (n + a - 1) & ~(a - 1); }

class AlignedBuffer {
 public:
  AlignedBuffer() noexcept = default;
  // size is rounded up to a multiple of alignment (a power of two >= sizeof(void*)); the bytes
  // are zero-filled. Throws std::bad_alloc when out of memory.
  explicit AlignedBuffer(std::size_t size, std::size_t alignment = kDirectIoAlignment);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), alignment_(o.alignment_) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  std::byte* data() noexcept { return data_; }
  const std::byte* data() const noexcept { return data_; }
  char* chars() noexcept { return reinterpret_cast<char*>(data_); }
  std::size_t size() const noexcept { return size_; }
  std::size_t alignment() const noexcept { return alignment_; }
  std::span<std::byte> span() noexcept { return {data_, size_}; }
  std::span<const std::byte> span() const noexcept { return {data_, size_}; }
  // The first n bytes (n <= size()).
  std::span<std::byte> first(std::size_t n) noexcept { return {data_, n}; }

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t alignment_ = kDirectIoAlignment;
};
}  // namespace lionet
