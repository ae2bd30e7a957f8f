// lionet/http2/detail/mem_pool.h: the allocator one server session hands libnghttp2
// (nghttp2_session_server_new3). Internal to http2/.
//
// libnghttp2 allocates ~5 small blocks per request (the stream, its outbound HEADERS item, the
// field list it keeps, received header buffers) and frees them when the stream closes. With
// many streams in flight glibc's per-thread cache (7 blocks a size) overflows and every free
// takes the arena path (`_int_free`, ~5% of the server's CPU under h2load -m 10). This pool keeps
// the freed blocks of one session in free lists by size class, so a warm connection reuses its
// own blocks in a few instructions.
//
// - Size classes of 64..2048 bytes; a larger block goes to malloc (a header marks which).
// - At most kKeepBytes of free blocks are kept per session; past it a block goes back to free().
//   trim() gives every kept block back (an idle connection, and the pool's end).
// - Not thread-safe: libnghttp2 is only called with the session's lock held (server.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include <nghttp2/nghttp2.h>

namespace lionet::http2::detail {

class MemPool {
 public:
  static constexpr size_t kKeepBytes = 32 * 1024;

  MemPool() noexcept {
    mem_.mem_user_data = this;
    mem_.malloc = [](size_t n, void* p) { return static_cast<MemPool*>(p)->alloc(n); };
    mem_.free = [](void* b, void* p) { static_cast<MemPool*>(p)->release(b); };
    mem_.calloc = [](size_t k, size_t n, void* p) -> void* {
      if (n != 0 && k > SIZE_MAX / n) return nullptr;
      void* b = static_cast<MemPool*>(p)->alloc(k * n);
      if (b) std::memset(b, 0, k * n);
      return b;
    };
    mem_.realloc = [](void* b, size_t n, void* p) { return static_cast<MemPool*>(p)->resize(b, n); };
  }
  ~MemPool() { trim(); }
  MemPool(const MemPool&) = delete;
  MemPool& operator=(const MemPool&) = delete;

  nghttp2_mem* mem() noexcept { return &mem_; }

  void* alloc(size_t n) noexcept {
    const unsigned c = class_of(n);
    if (c < kClasses && free_[c]) {
      Node* node = free_[c];
      free_[c] = node->next;
      kept_ -= kSize[c];
      return node;
    }
    const size_t bytes = c < kClasses ? kSize[c] : n;
    auto* h = static_cast<Header*>(std::malloc(sizeof(Header) + bytes));
    if (!h) return nullptr;
    h->cls = c < kClasses ? c : kLarge;
    h->size = bytes;
    return h + 1;
  }

  void release(void* b) noexcept {
    if (!b) return;
    Header* h = static_cast<Header*>(b) - 1;
    if (h->cls == kLarge || kept_ + kSize[h->cls] > kKeepBytes) {
      std::free(h);
      return;
    }
    auto* node = static_cast<Node*>(b);
    node->next = free_[h->cls];
    free_[h->cls] = node;
    kept_ += kSize[h->cls];
  }

  void* resize(void* b, size_t n) noexcept {
    if (!b) return alloc(n);
    const size_t have = (static_cast<Header*>(b) - 1)->size;
    if (n <= have && (n > have / 2 || have <= kSize[0])) return b;  // fits, and not mostly empty
    void* to = alloc(n);
    if (!to) return nullptr;  // realloc's rule: the old block stays valid
    std::memcpy(to, b, n < have ? n : have);
    release(b);
    return to;
  }

  // Every kept block back to the C heap.
  void trim() noexcept {
    for (Node*& head : free_) {
      while (head) {
        Node* next = head->next;
        std::free(reinterpret_cast<Header*>(head) - 1);
        head = next;
      }
    }
    kept_ = 0;
  }

  size_t kept_bytes() const noexcept { return kept_; }

 private:
  struct alignas(16) Header {  // before each block: keeps the block 16-byte aligned, as malloc's
    uint32_t cls;
    size_t size;  // usable bytes
  };
  struct Node {
    Node* next;
  };
  static constexpr unsigned kClasses = 6;
  static constexpr unsigned kLarge = kClasses;
  static constexpr size_t kSize[kClasses] = {64, 128, 256, 512, 1024, 2048};
  static unsigned class_of(size_t n) noexcept {
    unsigned c = 0;
    while (c < kClasses && n > kSize[c]) ++c;
    return c;  // kClasses: larger than every class
  }

  nghttp2_mem mem_{};
  Node* free_[kClasses] = {};
  size_t kept_ = 0;
};

}  // namespace lionet::http2::detail
