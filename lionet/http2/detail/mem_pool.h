// lionet/http2/detail/mem_pool.h: the allocator one server session hands libnghttp2
// (nghttp2_session_server_new3). Internal to http2/.
//
// libnghttp2 allocates ~5 small blocks per request (the stream, its outbound HEADERS item, the
// field list it keeps, received header buffers) and frees them when the stream closes. With
// many streams in flight glibc's per-thread cache (7 blocks a size) overflows and every free
// takes the arena path (`_int_free`, ~5% of the server's CPU under h2load -m 10). This pool keeps
// freed blocks in free lists by size class, one set per thread (a worker), last freed first
// used, so the next stream of any connection on that worker reuses a block still in cache, in a
// few instructions.
//
// - Size classes of 64..2048 bytes; a larger block goes to malloc (a header marks which).
// - At most kKeepBytes of free blocks are kept per thread; past it a block goes back to free().
//   A thread's blocks go back when it exits (trim() does it at once). A block may be freed on
//   another thread than the one that allocated it (a session moves between workers with its
//   lock): it joins that thread's lists.
// - A session holds no block of its own once its streams are gone: an idle connection costs
//   nothing here.
// - Under ASan or TSan every block comes from malloc and goes back to free at once (kPooled
//   false), as base/object_cache.h does: the sanitizers then see a use after free or a double
//   free inside libnghttp2 instead of a reused block.
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
  static constexpr size_t kKeepBytes = 256 * 1024;
#if defined(LIONET_ASAN) || defined(LIONET_TSAN) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  static constexpr bool kPooled = false;
#else
  static constexpr bool kPooled = true;
#endif

  MemPool() noexcept {
    mem_.mem_user_data = nullptr;
    mem_.malloc = [](size_t n, void*) { return alloc(n); };
    mem_.free = [](void* b, void*) { release(b); };
    mem_.calloc = [](size_t k, size_t n, void*) -> void* {
      if (n != 0 && k > SIZE_MAX / n) return nullptr;
      void* b = alloc(k * n);
      if (b) std::memset(b, 0, k * n);
      return b;
    };
    mem_.realloc = [](void* b, size_t n, void*) { return resize(b, n); };
  }
  MemPool(const MemPool&) = delete;
  MemPool& operator=(const MemPool&) = delete;

  nghttp2_mem* mem() noexcept { return &mem_; }

  static void* alloc(size_t n) noexcept {
    if (n > SIZE_MAX - sizeof(Header)) return nullptr;  // malloc's contract: never a short block
    const unsigned c = kPooled ? class_of(n) : kClasses;
    if (c < kClasses && !t_gone) {
      Lists& l = lists();
      if (Node* node = l.free[c]) {
        l.free[c] = node->next;
        l.kept -= kSize[c];
        return node;
      }
    }
    const size_t bytes = c < kClasses ? kSize[c] : n;
    auto* h = static_cast<Header*>(std::malloc(sizeof(Header) + bytes));
    if (!h) return nullptr;
    h->cls = c < kClasses ? c : kLarge;
    h->size = bytes;
    return h + 1;
  }

  static void release(void* b) noexcept {
    if (!b) return;
    Header* h = static_cast<Header*>(b) - 1;
    if (h->cls == kLarge || !kPooled || t_gone) {  // t_gone: at this thread's exit, after its lists
      std::free(h);
      return;
    }
    Lists& l = lists();
    if (l.kept + kSize[h->cls] > kKeepBytes) {
      std::free(h);
      return;
    }
    auto* node = static_cast<Node*>(b);
    node->next = l.free[h->cls];
    l.free[h->cls] = node;
    l.kept += kSize[h->cls];
  }

  static void* resize(void* b, size_t n) noexcept {
    if (!b) return alloc(n);
    const size_t have = (static_cast<Header*>(b) - 1)->size;
    if (n <= have && (n > have / 2 || have <= kSize[0])) return b;  // fits, and not mostly empty
    void* to = alloc(n);
    if (!to) return nullptr;  // realloc's rule: the old block stays valid
    std::memcpy(to, b, n < have ? n : have);
    release(b);
    return to;
  }

  // Every block this thread keeps back to the C heap.
  static void trim() noexcept {
    if (!t_gone) lists().trim();
  }
  // What this thread keeps.
  static size_t kept_bytes() noexcept { return t_gone ? 0 : lists().kept; }

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
  struct Lists {
    Node* free[kClasses] = {};
    size_t kept = 0;
    void trim() noexcept {
      for (Node*& head : free) {
        while (head) {
          Node* next = head->next;
          std::free(reinterpret_cast<Header*>(head) - 1);
          head = next;
        }
      }
      kept = 0;
    }
    ~Lists() {
      trim();
      t_gone = true;
    }
  };
  static inline thread_local bool t_gone = false;  // trivially destructible: readable to the end
  static Lists& lists() noexcept {
    static thread_local Lists l;
    return l;
  }

  nghttp2_mem mem_{};
};

}  // namespace lionet::http2::detail
