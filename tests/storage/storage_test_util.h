// tests/storage/storage_test_util.h: helpers shared by the storage tests: a temporary
// directory per test, deterministic record contents (so any process can check any offset),
// and file byte surgery.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "lionet/storage/log.h"

namespace lionet::storage::test {

// Sanitizer builds run the stress loops with fewer iterations (counts stated at each use).
#if defined(LIONET_ASAN) || defined(LIONET_TSAN)
inline constexpr int kSanitizerDivisor = 4;
#else
inline constexpr int kSanitizerDivisor = 1;
#endif

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/lionet-storage-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    if (!p) std::abort();
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The value stored at `offset` by tests: length 1..max_len and bytes derived from the offset.
inline std::string value_for(int64_t offset, std::size_t max_len = 300) {
  uint64_t x = static_cast<uint64_t>(offset) * 0x9E3779B97F4A7C15ull + 0x1234567;
  std::size_t len = 1 + static_cast<std::size_t>(x % max_len);
  std::string v(len, '\0');
  for (std::size_t i = 0; i < len; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = static_cast<char>(x);
  }
  return v;
}
inline std::string key_for(int64_t offset) {
  std::string k = "k";  // not "k" + to_string(): gcc 12's -Wrestrict false positive (bug 105651)
  return k += std::to_string(offset);
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
inline uint64_t file_size(const std::string& path) { return std::filesystem::file_size(path); }
inline std::string segment_file(const std::string& dir, int64_t base, const char* ext) {
  char name[32];
  std::snprintf(name, sizeof name, "%020lld", static_cast<long long>(base));
  return dir + "/" + name + ext;
}

// Appends records [log.end_offset(), log.end_offset()+n) with value_for/key_for contents, in
// batches of `batch` records.
inline void append_n(Log& log, int64_t n, int batch = 1, std::size_t max_len = 300) {
  std::vector<std::string> keys, values;
  std::vector<Record> recs;
  for (int64_t done = 0; done < n;) {
    int64_t first = log.end_offset();
    int64_t k = std::min<int64_t>(batch, n - done);
    keys.clear();
    values.clear();
    recs.clear();
    for (int64_t i = 0; i < k; i++) {
      keys.push_back(key_for(first + i));
      values.push_back(value_for(first + i, max_len));
    }
    for (int64_t i = 0; i < k; i++) recs.push_back(Record{keys[i], values[i], 1000 + first + i});
    auto r = log.append_batch(recs);
    ASSERT_TRUE(r.ok()) << r.error().message();
    ASSERT_EQ(*r, first);
    done += k;
  }
}

// Reads every record in [from, to) one read at a time and checks contents; returns how many.
inline int64_t verify_range(const Log& log, int64_t from, int64_t to, std::size_t max_len = 300,
                            std::size_t max_bytes = 4096) {
  int64_t off = from;
  ReadResult rr;
  while (off < to) {
    auto r = log.read(off, max_bytes, rr);
    EXPECT_TRUE(r.ok()) << "offset " << off << ": " << r.error().message();
    if (!r.ok() || rr.empty()) return off - from;
    for (const RecordView& v : rr.records()) {
      EXPECT_EQ(v.offset, off);
      EXPECT_EQ(v.key, key_for(off)) << "offset " << off;
      EXPECT_EQ(v.value, value_for(off, max_len)) << "offset " << off;
      EXPECT_EQ(v.timestamp, 1000 + off);
      off++;
    }
    EXPECT_EQ(rr.next_offset(), off);
  }
  return off - from;
}

}  // namespace lionet::storage::test
