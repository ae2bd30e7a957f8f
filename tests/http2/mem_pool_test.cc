// The allocator server sessions hand libnghttp2 (lionet/http2/detail/mem_pool.h): blocks reused
// by size class, a bound on what a thread keeps, a block freed on another thread, realloc's
// contract. (h2spec and the other tests in http2_test.cc run every server session on it.) Under
// ASan and TSan the pool hands every block to malloc/free (MemPool::kPooled): the tests of reuse
// are skipped there, saying so; the contract (alignment, zeroing, realloc, overflow) is tested in
// every build.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "lionet/http2/detail/mem_pool.h"

using lionet::http2::detail::MemPool;

#define SKIP_UNLESS_POOLED() \
  if (!MemPool::kPooled) GTEST_SKIP() << "sanitizer build: the pool hands every block to malloc/free"

TEST(Http2MemPool, AFreedBlockIsReusedForTheNextOfItsClassAndIsAligned) {
  SKIP_UNLESS_POOLED();
  MemPool p;
  p.trim();  // this thread's lists, empty
  void* a = p.alloc(100);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 16, 0u);
  std::memset(a, 0xab, 100);
  p.release(a);
  EXPECT_EQ(p.kept_bytes(), 128u);
  EXPECT_EQ(p.alloc(120), a);  // same class (65..128)
  EXPECT_EQ(p.kept_bytes(), 0u);
  void* other = p.alloc(20);  // another class: a new block
  EXPECT_NE(other, a);
  p.release(other);
  p.release(a);
  void* big = p.alloc(100000);  // past every class: malloc's, never kept
  ASSERT_NE(big, nullptr);
  std::memset(big, 1, 100000);
  p.release(big);
  EXPECT_EQ(p.kept_bytes(), 64u + 128u);
  p.trim();
  EXPECT_EQ(p.kept_bytes(), 0u);
  p.release(nullptr);  // free(NULL)'s rule
}

TEST(Http2MemPool, KeepsAtMostItsBoundAndHandsTheRestBack) {
  SKIP_UNLESS_POOLED();
  MemPool p;
  p.trim();
  std::vector<void*> blocks;
  for (size_t i = 0; i < MemPool::kKeepBytes / 2048 + 50; ++i) blocks.push_back(p.alloc(2000));  // 2048-byte class
  std::set<void*> distinct(blocks.begin(), blocks.end());
  EXPECT_EQ(distinct.size(), blocks.size());
  for (void* b : blocks) p.release(b);
  EXPECT_LE(p.kept_bytes(), MemPool::kKeepBytes);
  EXPECT_EQ(p.kept_bytes(), MemPool::kKeepBytes / 2048 * 2048);
  p.trim();
}

TEST(Http2MemPool, ABlockFreedOnAnotherThreadJoinsThatThreadsListsAndGoesBackAtItsExit) {
  SKIP_UNLESS_POOLED();
  MemPool p;
  p.trim();
  void* a = p.alloc(500);
  std::memset(a, 7, 500);
  size_t kept_there = 0, kept_after = 0;
  std::thread t([&] {
    MemPool::release(a);
    kept_there = MemPool::kept_bytes();
    void* again = MemPool::alloc(400);  // the same class: that block
    kept_after = MemPool::kept_bytes();
    EXPECT_EQ(again, a);
    MemPool::release(again);  // kept until the thread exits, then freed (ASan: no leak)
  });
  t.join();
  EXPECT_EQ(kept_there, 512u);
  EXPECT_EQ(kept_after, 0u);
  EXPECT_EQ(p.kept_bytes(), 0u);  // not this thread's
}

TEST(Http2MemPool, CallocZeroesAndReallocKeepsTheBytes) {
  MemPool p;
  p.trim();
  nghttp2_mem* m = p.mem();
  auto* c = static_cast<unsigned char*>(m->malloc(64, m->mem_user_data));
  std::memset(c, 0xff, 64);
  m->free(c, m->mem_user_data);
  auto* z = static_cast<unsigned char*>(m->calloc(8, 8, m->mem_user_data));  // pooled: the same block, reused
  ASSERT_NE(z, nullptr);
  if (MemPool::kPooled) {
    EXPECT_EQ(static_cast<void*>(z), static_cast<void*>(c));
  }
  EXPECT_EQ(reinterpret_cast<uintptr_t>(z) % 16, 0u);
  for (int i = 0; i < 64; ++i) ASSERT_EQ(z[i], 0) << i;
  EXPECT_EQ(m->calloc(SIZE_MAX / 2, 4, m->mem_user_data), nullptr);  // overflow refused
  EXPECT_EQ(m->malloc(SIZE_MAX - 8, m->mem_user_data), nullptr);  // no room for its header: refused
  for (int i = 0; i < 64; ++i) z[i] = static_cast<unsigned char>(i);
  auto* g = static_cast<unsigned char*>(m->realloc(z, 5000, m->mem_user_data));  // grows past every class
  ASSERT_NE(g, nullptr);
  for (int i = 0; i < 64; ++i) ASSERT_EQ(g[i], i);
  auto* s = static_cast<unsigned char*>(m->realloc(g, 10, m->mem_user_data));  // shrinks into a small class
  for (int i = 0; i < 10; ++i) ASSERT_EQ(s[i], i);
  auto* n = static_cast<unsigned char*>(m->realloc(nullptr, 30, m->mem_user_data));  // realloc(NULL): malloc
  ASSERT_NE(n, nullptr);
  m->free(s, m->mem_user_data);
  m->free(n, m->mem_user_data);
}
