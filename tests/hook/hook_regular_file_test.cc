// tests/hook/hook_regular_file_test.cc: plain ::read/::pread/::write on regular files inside
// fibers: a read that must wait for the disk does not stop another fiber on the same (only)
// worker; page-cache hits take the RWF_NOWAIT fast path; content, file position, EOF and
// errno are what libc gives.
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "hook_test_util.h"
#include "lionet/sync/offload.h"

namespace lionet {
namespace {
using hook_test::read_errno;
using hook_test::Runtime;

struct TempFile {
  explicit TempFile(std::size_t size) {
    char tmpl[] = "/var/tmp/lionet-hook-file-XXXXXX";
    int fd = ::mkstemp(tmpl);
    path = tmpl;
    data.resize(size);
    for (std::size_t i = 0; i < size; ++i) data[i] = static_cast<char>('A' + (i * 13 + i / 4096) % 26);
    if (fd >= 0) {
      EXPECT_EQ(::write(fd, data.data(), size), static_cast<ssize_t>(size));
      ::fsync(fd);
      ::close(fd);
    }
  }
  ~TempFile() { ::unlink(path.c_str()); }
  // Drops the file's pages from the page cache, so the next read must go to the disk.
  void evict() const {
    int fd = ::open(path.c_str(), O_RDONLY);
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
  std::string path;
  std::vector<char> data;
};

// Holds every offload pool thread until release(), so an offloaded call queues behind them.
struct PoolBlocker {
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  std::atomic<int> blocked{0};
  void release() {
    std::lock_guard lk(mu);
    released = true;
    cv.notify_all();
  }
  void block_one() {
    blocked.fetch_add(1);
    std::unique_lock lk(mu);
    cv.wait_for(lk, std::chrono::seconds(20), [&] { return released; });  // bound: never hang
  }
  // From a fiber: occupies every pool thread (one holder fiber each) and returns once all are
  // held; join the holders after release().
  std::vector<JoinHandle<void>> hold_every_pool_thread() {
    const int threads = default_offload_pool().options().threads;
    std::vector<JoinHandle<void>> holders;
    for (int i = 0; i < threads; ++i)
      holders.push_back(Scheduler::current()->spawn([this] { offload([this] { block_one(); }); }));
    while (blocked.load() < threads) this_fiber::yield();
    return holders;
  }
};

TEST(HookRegularFile, UncachedReadParksOnlyItsFiber) {
  TempFile file(64 * 1024);
  file.evict();
  Runtime rt(1);
  PoolBlocker blocker;
  std::atomic<bool> read_done{false};
  std::atomic<int> ran_during_read{0};
  const auto before = hook::regular_file_stats();
  rt.run([&] {
    // Every pool thread is held until the second fiber releases it: the hooked read cannot
    // complete before that fiber runs, so if the read blocked the worker this would never end
    // (the blocker's 20 s bound turns that into a failure instead of a hang).
    std::vector<JoinHandle<void>> holders = blocker.hold_every_pool_thread();
    int fd = ::open(file.path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    auto other = Scheduler::current()->spawn([&] {
      if (!read_done.load()) ran_during_read.fetch_add(1);
      blocker.release();
    });
    std::vector<char> buf(64 * 1024);
    ssize_t n = ::read(fd, buf.data(), buf.size());  // plain libc call, hooked
    read_done.store(true);
    EXPECT_EQ(n, static_cast<ssize_t>(buf.size()));
    EXPECT_EQ(std::memcmp(buf.data(), file.data.data(), buf.size()), 0);
    EXPECT_EQ(::lseek(fd, 0, SEEK_CUR), static_cast<off_t>(buf.size())) << "the file position must advance";
    ::close(fd);
    other.join();
    for (auto& h : holders) h.join();
  });
  EXPECT_EQ(ran_during_read.load(), 1) << "the other fiber did not run while the read waited";
  EXPECT_GT(hook::regular_file_stats().offloaded, before.offloaded);
}

// fdatasync/fsync in a fiber park only their fiber (the sync runs on the offload pool): with
// every pool thread held until another fiber of the same single worker runs, a sync that
// blocked the worker would never finish. With offload_sync off they run in place. Errors are
// libc's (EINVAL for a pipe, EBADF for a closed fd).
TEST(HookRegularFile, SyncsParkOnlyTheirFiberAndCanStayInPlace) {
  TempFile file(4096);
  Runtime rt(1);
  PoolBlocker blocker;
  std::atomic<bool> sync_done{false};
  std::atomic<int> ran_during_sync{0};
  const auto before = hook::regular_file_stats();
  rt.run([&] {
    std::vector<JoinHandle<void>> holders = blocker.hold_every_pool_thread();
    int fd = ::open(file.path.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, "sync me", 7, 0), 7);
    auto other = Scheduler::current()->spawn([&] {
      if (!sync_done.load()) ran_during_sync.fetch_add(1);
      blocker.release();
    });
    EXPECT_EQ(::fdatasync(fd), 0);  // plain libc call, hooked
    sync_done.store(true);
    other.join();
    for (auto& h : holders) h.join();
    const auto mid = hook::regular_file_stats();
    EXPECT_EQ(::fsync(fd), 0);
    EXPECT_EQ(hook::regular_file_stats().offloaded, mid.offloaded + 1);
    // In place when asked.
    hook::RegularFileOptions o = hook::regular_file_options();
    o.offload_sync = false;
    hook::configure_regular_files(o);
    const auto off0 = hook::regular_file_stats();
    EXPECT_EQ(::fdatasync(fd), 0);
    EXPECT_EQ(::fsync(fd), 0);
    EXPECT_EQ(hook::regular_file_stats().offloaded, off0.offloaded);
    o.offload_sync = true;
    hook::configure_regular_files(o);
    // libc's errors.
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    EXPECT_EQ(::fdatasync(p[0]), -1);
    EXPECT_EQ(read_errno(), EINVAL);
    ::close(p[0]);
    ::close(p[1]);
    ::close(fd);
    EXPECT_EQ(::fdatasync(fd), -1);
    EXPECT_EQ(read_errno(), EBADF);
  });
  EXPECT_EQ(ran_during_sync.load(), 1) << "the other fiber did not run while the sync waited";
  EXPECT_GT(hook::regular_file_stats().offloaded, before.offloaded);
}

TEST(HookRegularFile, CachedReadsTakeTheFastPathWithLibcResults) {
  TempFile file(3 * 4096 + 10);
  Runtime rt(1);
  rt.run([&] {
    int fd = ::open(file.path.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    char buf[4096];
    ASSERT_EQ(::pread(fd, buf, sizeof buf, 0), 4096);  // warms the cache (and the fd entry)
    const auto before = hook::regular_file_stats();
    EXPECT_EQ(::pread(fd, buf, sizeof buf, 4096), 4096);
    EXPECT_EQ(std::memcmp(buf, file.data.data() + 4096, 4096), 0);
    EXPECT_GT(hook::regular_file_stats().fast_path, before.fast_path);
    // EOF: short, then 0.
    EXPECT_EQ(::pread(fd, buf, sizeof buf, 3 * 4096), 10);
    EXPECT_EQ(::pread(fd, buf, sizeof buf, 1 << 20), 0);
    // readv from the file position, then write + read back through the hooks.
    char a[100], b[200];
    iovec iov[2] = {{a, sizeof a}, {b, sizeof b}};
    ASSERT_EQ(::lseek(fd, 50, SEEK_SET), 50);
    EXPECT_EQ(::readv(fd, iov, 2), 300);
    EXPECT_EQ(std::memcmp(a, file.data.data() + 50, 100), 0);
    EXPECT_EQ(std::memcmp(b, file.data.data() + 150, 200), 0);
    EXPECT_EQ(::pwrite(fd, "hello", 5, 7), 5);  // learns whether NOWAIT writes work here
    EXPECT_EQ(::pread(fd, buf, 5, 7), 5);
    EXPECT_EQ(std::memcmp(buf, "hello", 5), 0);
    // A small buffered write stays on the worker: RWF_NOWAIT, or in place where the filesystem
    // has no NOWAIT writes (ext4); it never pays the offload hand-off.
    const auto w0 = hook::regular_file_stats();
    EXPECT_EQ(::pwrite(fd, "world", 5, 12), 5);
    const auto w1 = hook::regular_file_stats();
    EXPECT_EQ(w1.offloaded, w0.offloaded);
    EXPECT_EQ(w1.fast_path + w1.inline_writes, w0.fast_path + w0.inline_writes + 1);
    EXPECT_EQ(::pread(fd, buf, 10, 7), 10);
    EXPECT_EQ(std::memcmp(buf, "helloworld", 10), 0);
    ::close(fd);
    // errno: a read on a write-only fd is EBADF, as from libc.
    int wfd = ::open(file.path.c_str(), O_WRONLY | O_CLOEXEC);
    EXPECT_EQ(::read(wfd, buf, 10), -1);
    EXPECT_EQ(read_errno(), EBADF);
    ::close(wfd);
  });
}

TEST(HookRegularFile, PartlyCachedReadIsCompletedOnThePool) {
  TempFile file(64 * 1024);
  file.evict();
  Runtime rt(1);
  rt.run([&] {
    int fd = ::open(file.path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);  // no readahead: only the first page gets cached
    char buf[16384];
    ASSERT_EQ(::pread(fd, buf, 4096, 0), 4096);
    const auto before = hook::regular_file_stats();
    // RWF_NOWAIT returns the cached first page only; the hook reads the rest on the pool and
    // the caller sees one full read, with the file position after all of it.
    EXPECT_EQ(::read(fd, buf, sizeof buf), static_cast<ssize_t>(sizeof buf));
    EXPECT_EQ(std::memcmp(buf, file.data.data(), sizeof buf), 0);
    EXPECT_EQ(::lseek(fd, 0, SEEK_CUR), static_cast<off_t>(sizeof buf));
    const auto after = hook::regular_file_stats();
    EXPECT_GE(after.fast_path + after.offloaded, before.fast_path + before.offloaded + 1);
    ::close(fd);
  });
}

TEST(HookRegularFile, PlainThreadIsPlainLibc) {
  TempFile file(4096);
  const auto before = hook::regular_file_stats();
  int fd = ::open(file.path.c_str(), O_RDONLY | O_CLOEXEC);
  char buf[4096];
  EXPECT_EQ(::read(fd, buf, sizeof buf), 4096);
  ::close(fd);
  const auto after = hook::regular_file_stats();
  EXPECT_EQ(after.fast_path + after.offloaded, before.fast_path + before.offloaded);
}
}  // namespace
}  // namespace lionet
