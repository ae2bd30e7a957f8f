// lionet/base/object_cache.h: a per-thread free list of fixed-size blocks, for objects that are
// made and dropped at a high rate on worker threads (timer entries: one per timed wait). Fiber
// objects have a pool of their own, which also carves its blocks (fiber/fiber.cc).
//
// Owns: ObjectCache<Bytes, Depth>. Blocks freed on a thread go to that thread's list (at most
// Depth of them, the rest to the global allocator) and are reused by the next allocation there;
// a thread's list is returned to the allocator when the thread exits. Sanitizer builds bypass it,
// so that ASan sees every use after free. Must not: be used for objects that need their memory
// zeroed or that are freed from signal handlers.
//
// Usage, as a class's allocation functions:
//   static void* operator new(std::size_t n) { return ObjectCache<sizeof(T), 256>::allocate(n); }
//   static void operator delete(void* p) noexcept { ObjectCache<sizeof(T), 256>::deallocate(p); }
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

namespace lionet::base {

template <std::size_t Bytes, std::size_t Depth>
class ObjectCache {
 public:
  static void* allocate(std::size_t n) {
#if !(defined(LIONET_ASAN) || defined(LIONET_TSAN) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__))
    if (n <= Bytes && !t_gone) {
      List& l = t_list;
      if (Node* node = l.head) {
        l.head = node->next;
        --l.count;
        return node;
      }
    }
#endif
    return ::operator new(n <= Bytes ? Bytes : n);
  }

  static void deallocate(void* p) noexcept {
#if !(defined(LIONET_ASAN) || defined(LIONET_TSAN) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__))
    if (!t_gone) {
      List& l = t_list;
      if (l.count < Depth) {
        auto* node = static_cast<Node*>(p);
        node->next = l.head;
        l.head = node;
        ++l.count;
        return;
      }
    }
#endif
    ::operator delete(p);
  }

 private:
  struct Node {
    Node* next;
  };
  static_assert(Bytes >= sizeof(Node));
  struct List {
    Node* head = nullptr;
    std::size_t count = 0;
    ~List() {
      t_gone = true;  // frees after this thread's list is gone go to the allocator
      while (Node* n = head) {
        head = n->next;
        ::operator delete(n);
      }
    }
  };
  static inline thread_local List t_list;
  static inline constinit thread_local bool t_gone = false;
};
}  // namespace lionet::base
