// tests/file/file_test_util.h: a scheduler with an IOManager, a scratch directory on the real
// disk (O_DIRECT needs a filesystem that supports it; /var/tmp is ext4 here, not tmpfs), and
// file helpers shared by the file tests.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lionet/file/file.h"
#include "lionet/io/io_manager.h"
#include "lionet/sched/scheduler.h"

namespace lionet::file_test {

struct Runtime {
  explicit Runtime(int threads = 1) : sched(opts(threads)), iom(sched) {}
  ~Runtime() { sched.stop(); }
  static SchedulerOptions opts(int threads) {
    SchedulerOptions o;
    o.threads = threads;
    o.name = "filetest";
    return o;
  }
  template <class F>
  auto run(F&& fn) {
    return sched.spawn(std::forward<F>(fn)).join();
  }
  Scheduler sched;
  IOManager iom;
};

// A fresh directory under /var/tmp, removed with its contents at scope end.
struct ScratchDir {
  ScratchDir() {
    std::string tmpl = "/var/tmp/lionet-file-test-XXXXXX";
    char* p = ::mkdtemp(tmpl.data());
    if (p) path = p;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return path + "/" + name; }
  std::string path;
};

// Byte i of the test pattern (position-dependent, so a read of the wrong block is caught).
inline char pattern(uint64_t i) { return static_cast<char>('a' + (i * 7 + i / 4096) % 26); }

// Writes `size` pattern bytes to path with plain syscalls (from the test thread).
inline void write_pattern(const std::string& path, std::size_t size) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  std::vector<char> data(size);
  for (std::size_t i = 0; i < size; ++i) data[i] = pattern(i);
  ASSERT_EQ(::write(fd, data.data(), size), static_cast<ssize_t>(size));
  ::fsync(fd);
  ::close(fd);
}

inline bool matches_pattern(const void* buf, std::size_t n, uint64_t offset) {
  auto* p = static_cast<const char*>(buf);
  for (std::size_t i = 0; i < n; ++i)
    if (p[i] != pattern(offset + i)) return false;
  return true;
}

// The engines compiled into this build.
inline std::vector<std::string> compiled_engines() {
  std::vector<std::string> v;
  for (const char* e : {"libaio", "io_uring", "threadpool"})
    if (file_engine_compiled(e)) v.emplace_back(e);
  return v;
}
}  // namespace lionet::file_test
