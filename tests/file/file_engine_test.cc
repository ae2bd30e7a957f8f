// tests/file/file_engine_test.cc: lionet::File on every compiled engine (libaio, io_uring,
// threadpool): content of single, concurrent and batched reads, write-then-read, O_DIRECT,
// completions through the reactor, parking (other fibers run during a read), and errors
// (bad fd, EOF, misaligned O_DIRECT, RLIMIT_FSIZE).
//
// libaio only runs O_DIRECT requests itself (buffered ones go to the threadpool engine), so
// its cases open files with O_DIRECT and aligned buffers; the others use buffered files
// unless the case is about O_DIRECT.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "file_test_util.h"
#include "lionet/sync/offload.h"

namespace lionet {
namespace {
using namespace file_test;

class FileEngineTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir.path.empty()) << "mkdtemp under /var/tmp failed";
    engine = GetParam();
    opts.engine = engine;
  }
  bool is_libaio() const { return engine == "libaio"; }
  int flags(int base) const { return base | (is_libaio() ? O_DIRECT : 0); }
  FileEngineStats stats() const { return file_engine(engine, opts.engine_options)->stats(); }

  ScratchDir dir;
  std::string engine;
  FileOptions opts;
};

TEST_P(FileEngineTest, SingleReadVerifiesContentAndUsesTheEngine) {
  const std::string path = dir.file("single");
  write_pattern(path, 64 * 1024);
  Runtime rt;
  const uint64_t before = stats().requests;
  rt.run([&] {
    auto f = File::open(path, flags(O_RDONLY), 0, opts);
    ASSERT_TRUE(f) << f.error().message();
    EXPECT_STREQ(f->engine_name(), engine.c_str());
    AlignedBuffer buf(8192);
    auto n = f->pread(buf.span(), 16384);
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(*n, 8192u);
    EXPECT_TRUE(matches_pattern(buf.data(), 8192, 16384));
  });
  EXPECT_GT(stats().requests, before) << "the request did not go through the " << engine << " engine";
}

TEST_P(FileEngineTest, ConcurrentReadsFromManyFibersOnTwoWorkers) {
  const std::string path = dir.file("concurrent");
  constexpr int kFibers = 32;
  write_pattern(path, kFibers * 4096);
  Runtime rt(2);
  auto f = File::open(path, flags(O_RDONLY), 0, opts);  // opened on the test thread, shared
  ASSERT_TRUE(f);
  std::atomic<int> ok{0};
  std::vector<JoinHandle<void>> hs;
  for (int i = 0; i < kFibers; ++i) {
    hs.push_back(rt.sched.spawn([&, i] {
      AlignedBuffer buf(4096);
      for (int round = 0; round < 4; ++round) {
        int block = (i + round * 5) % kFibers;
        auto n = f->pread(buf.span(), block * 4096);
        if (n && *n == 4096 && matches_pattern(buf.data(), 4096, block * 4096)) ok.fetch_add(1);
      }
    }));
  }
  for (auto& h : hs) h.join();
  EXPECT_EQ(ok.load(), kFibers * 4);
}

TEST_P(FileEngineTest, WriteThenReadBack) {
  const std::string path = dir.file("rw");
  Runtime rt;
  rt.run([&] {
    auto f = File::open(path, flags(O_RDWR | O_CREAT | O_TRUNC), 0644, opts);
    ASSERT_TRUE(f) << f.error().message();
    AlignedBuffer out(3 * 4096), in(3 * 4096);
    for (std::size_t i = 0; i < out.size(); ++i) out.chars()[i] = pattern(i + 4096);
    auto w = f->write_all(out.data(), out.size(), 4096);
    ASSERT_TRUE(w) << w.error().message();
    EXPECT_EQ(*w, out.size());
    ASSERT_TRUE(f->fdatasync());
    EXPECT_EQ(f->size().value(), 4 * 4096u);
    // Vectored read back: two buffers.
    std::array<iovec, 2> iov{iovec{in.data(), 4096}, iovec{in.data() + 4096, 2 * 4096}};
    auto r = f->readv(iov, 4096);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(*r, in.size());
    EXPECT_EQ(std::memcmp(in.data(), out.data(), in.size()), 0);
  });
}

TEST_P(FileEngineTest, DirectIoWithAlignedBuffers) {
  const std::string path = dir.file("direct");
  Runtime rt;
  rt.run([&] {
    auto f = File::open(path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644, opts);
    ASSERT_TRUE(f) << f.error().message();
    EXPECT_TRUE(f->direct());
    EXPECT_STREQ(f->engine_name(), engine.c_str());
    AlignedBuffer out(64 * 1024), in(64 * 1024);
    for (std::size_t i = 0; i < out.size(); ++i) out.chars()[i] = pattern(i);
    ASSERT_EQ(f->pwrite(out.span(), 0).value(), out.size());
    ASSERT_EQ(f->pread(in.span(), 0).value(), in.size());
    EXPECT_EQ(std::memcmp(in.data(), out.data(), in.size()), 0);
  });
}

TEST_P(FileEngineTest, CompletionArrivesThroughTheReactor) {
  if (engine == "threadpool") GTEST_SKIP() << "threadpool completions come from the offload pool, not an eventfd";
  const std::string path = dir.file("reactor");
  write_pattern(path, 1 << 20);
  Runtime rt;
  const FileEngineStats before = stats();
  if (engine == "io_uring") {
    // Deterministic: a FIFO read cannot complete before the writer writes, and the writer
    // writes only once the reaper parked on the eventfd (bounded: 5 s, then the test fails).
    const std::string fifo = dir.file("reactor-fifo");
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    rt.run([&] {
      auto f = File::open(fifo, O_RDWR, 0, opts);
      ASSERT_TRUE(f);
      auto writer = Scheduler::current()->spawn([&] {
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (stats().eventfd_waits == before.eventfd_waits && std::chrono::steady_clock::now() < give_up)
          this_fiber::yield();
        char c = 'r';
        EXPECT_EQ(::syscall(SYS_write, f->fd(), &c, 1), 1);
      });
      char c = 0;
      EXPECT_EQ(f->pread(&c, 1, 0).value_or(0), 1u);
      EXPECT_EQ(c, 'r');
      writer.join();
    });
  } else {
    rt.run([&] {
      auto f = File::open(path, O_RDONLY | O_DIRECT, 0, opts);
      ASSERT_TRUE(f);
      AlignedBuffer buf(1 << 20);
      // A completion that is already there when the reaper first looks needs no eventfd wait;
      // a 1 MiB direct read from disk is slower than that, and a few tries make it certain.
      for (int i = 0; i < 50 && stats().eventfd_waits == before.eventfd_waits; ++i) {
        ASSERT_EQ(f->pread(buf.span(), 0).value(), buf.size());
      }
      EXPECT_TRUE(matches_pattern(buf.data(), buf.size(), 0));
    });
  }
  const FileEngineStats after = stats();
  EXPECT_GT(after.eventfd_waits, before.eventfd_waits) << "the reaper never waited on the eventfd in the IOManager";
  EXPECT_GT(after.reap_passes, before.reap_passes);
  EXPECT_GE(after.contexts, 1u);
}

TEST_P(FileEngineTest, BatchOf256RequestsIsReapedInBatches) {
  const std::string path = dir.file("batch");
  constexpr int kReqs = 256;
  write_pattern(path, kReqs * 4096);
  FileOptions o = opts;
  o.engine_options.queue_depth = 256;
  o.engine_options.reap_batch = 256;
  Runtime rt;
  const FileEngineStats before = file_engine(engine, o.engine_options)->stats();
  rt.run([&] {
    auto f = File::open(path, O_RDONLY | O_DIRECT, 0, o);
    ASSERT_TRUE(f);
    AlignedBuffer buf(kReqs * 4096);
    std::vector<FileRequest> reqs;
    for (int i = 0; i < kReqs; ++i) {
      int block = (i * 37) % kReqs;  // scattered
      reqs.push_back(FileRequest::read(buf.data() + i * 4096, 4096, block * 4096));
    }
    f->submit(reqs);
    for (int i = 0; i < kReqs; ++i) {
      ASSERT_EQ(reqs[i].result().value_or(0), 4096u) << "request " << i;
      ASSERT_TRUE(matches_pattern(buf.data() + i * 4096, 4096, static_cast<uint64_t>(reqs[i].offset)));
    }
  });
  const FileEngineStats after = file_engine(engine, o.engine_options)->stats();
  EXPECT_EQ(after.completions - before.completions, static_cast<uint64_t>(kReqs));
  EXPECT_LE(after.submit_calls - before.submit_calls, 8u) << "a batch should be submitted in a few calls";
  EXPECT_LT(after.reap_passes - before.reap_passes, static_cast<uint64_t>(kReqs))
      << "no completion was reaped in a batch";
  EXPECT_GT(after.max_reaped, 1u);
}

// Blocks every offload pool thread until released, so a threadpool request queues behind them.
struct OffloadPoolBlocker {
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  std::atomic<int> blocked{0};
  void release() {
    std::lock_guard lk(mu);
    released = true;
    cv.notify_all();
  }
  void block_one() {  // runs on a pool thread
    blocked.fetch_add(1);
    std::unique_lock lk(mu);
    cv.wait_for(lk, std::chrono::seconds(20), [&] { return released; });  // bound: never hang
  }
};

TEST_P(FileEngineTest, FiberParksAndOthersRunDuringARead) {
  Runtime rt(1);
  std::atomic<int> counter{0};
  std::atomic<bool> read_done{false};
  if (engine == "io_uring") {
    // A FIFO read completes only when the other fiber writes: deterministic.
    const std::string fifo = dir.file("fifo");
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    rt.run([&] {
      auto f = File::open(fifo, O_RDWR, 0, opts);
      ASSERT_TRUE(f);
      auto other = Scheduler::current()->spawn([&] {
        counter.fetch_add(1);  // runs while the reader is parked on the same (only) worker
        EXPECT_FALSE(read_done.load());
        char c = 'x';
        EXPECT_EQ(::syscall(SYS_write, f->fd(), &c, 1), 1);
      });
      char c = 0;
      auto n = f->pread(&c, 1, 0);
      read_done.store(true);
      EXPECT_EQ(n.value_or(0), 1u);
      EXPECT_EQ(c, 'x');
      other.join();
    });
  } else if (engine == "threadpool") {
    // Every pool thread is held until the other fiber releases it: the read cannot finish first.
    const std::string path = dir.file("slow");
    write_pattern(path, 4096);
    OffloadPoolBlocker blocker;
    const int threads = default_offload_pool().options().threads;
    rt.run([&] {
      std::vector<JoinHandle<void>> holders;
      for (int i = 0; i < threads; ++i)
        holders.push_back(Scheduler::current()->spawn([&] { offload([&] { blocker.block_one(); }); }));
      while (blocker.blocked.load() < threads) this_fiber::yield();
      auto f = File::open(path, O_RDONLY, 0, opts);
      ASSERT_TRUE(f);
      auto other = Scheduler::current()->spawn([&] {
        counter.fetch_add(1);
        EXPECT_FALSE(read_done.load());
        blocker.release();
      });
      char buf[4096];
      auto n = f->pread(buf, sizeof buf, 0);
      read_done.store(true);
      EXPECT_EQ(n.value_or(0), 4096u);
      other.join();
      for (auto& h : holders) h.join();
    });
  } else {
    // libaio: a 32 MiB O_DIRECT read from disk takes milliseconds; the counting fiber is
    // runnable before it is submitted, so it runs while the reader is parked.
    const std::string path = dir.file("big");
    write_pattern(path, 32 << 20);
    rt.run([&] {
      auto f = File::open(path, O_RDONLY | O_DIRECT, 0, opts);
      ASSERT_TRUE(f);
      auto other = Scheduler::current()->spawn([&] {
        while (!read_done.load()) {
          counter.fetch_add(1);
          this_fiber::yield();
        }
      });
      this_fiber::yield();  // let the counter start
      AlignedBuffer buf(32 << 20);
      int before = counter.load();
      auto n = f->pread(buf.span(), 0);
      EXPECT_GT(counter.load(), before) << "nothing ran on the only worker during the read";
      read_done.store(true);
      EXPECT_EQ(n.value_or(0), buf.size());
      other.join();
    });
  }
  EXPECT_GE(counter.load(), 1);
}

TEST_P(FileEngineTest, ErrorsSurfaceAsErrno) {
  const std::string path = dir.file("errors");
  write_pattern(path, 4096 + 100);  // not a multiple of the block size: EOF inside a block
  Runtime rt;
  rt.run([&] {
    AlignedBuffer buf(8192);
    // Bad fd: a number that was just closed behind the File's back.
    {
      // A high number, so that no fd the engine opens meanwhile (its eventfd) reuses it.
      int low = ::open(path.c_str(), flags(O_RDONLY) | O_CLOEXEC);
      ASSERT_GE(low, 0);
      int fd = ::fcntl(low, F_DUPFD_CLOEXEC, 700);
      ::close(low);
      ASSERT_GE(fd, 700);
      auto f = File::adopt(fd, opts);
      ASSERT_TRUE(f);
      ::syscall(SYS_close, fd);
      auto n = f->pread(buf.span(), 0);
      ASSERT_FALSE(n);
      EXPECT_EQ(n.error(), std::errc::bad_file_descriptor) << n.error().message();
      (void)f->close();  // EBADF from close(2), ignored
    }
    auto f = File::open(path, flags(O_RDONLY), 0, opts);
    ASSERT_TRUE(f);
    // Short read at EOF, then 0 past it.
    auto n = f->pread(buf.span(), 4096);
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(*n, 100u);
    auto past = f->pread(buf.span(), 1 << 20);
    ASSERT_TRUE(past);
    EXPECT_EQ(*past, 0u);
    auto exact = f->read_exact(buf.data(), 8192, 0);
    EXPECT_EQ(exact.value_or(0), 4096u + 100u);
    // Misaligned O_DIRECT: offset, length and buffer address each.
    auto d = File::open(path, O_RDONLY | O_DIRECT, 0, opts);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->pread(buf.data(), 4096, 1).error(), std::errc::invalid_argument);
    EXPECT_EQ(d->pread(buf.data(), 100, 0).error(), std::errc::invalid_argument);
    EXPECT_EQ(d->pread(buf.data() + 1, 4096, 0).error(), std::errc::invalid_argument);
    // A closed File.
    (void)d->close();
    EXPECT_EQ(d->pread(buf.data(), 4096, 0).error(), std::errc::bad_file_descriptor);
  });
}

TEST_P(FileEngineTest, WritePastRlimitFsizeIsEfbig) {
  const std::string path = dir.file("fsize");
  // Restored below, so later tests are unaffected; SIGXFSZ would kill the process otherwise.
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  struct sigaction ign {
  }, old_sa{};
  ign.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGXFSZ, &ign, &old_sa), 0);
  rlimit lim = old;
  lim.rlim_cur = 1 << 20;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &lim), 0);
  {
    Runtime rt;
    rt.run([&] {
      auto f = File::open(path, flags(O_RDWR | O_CREAT | O_TRUNC), 0644, opts);
      ASSERT_TRUE(f);
      AlignedBuffer buf(4096);
      EXPECT_EQ(f->pwrite(buf.span(), 0).value_or(0), 4096u);  // under the limit: fine
      auto w = f->pwrite(buf.span(), 2 << 20);
      ASSERT_FALSE(w);
      EXPECT_EQ(w.error(), std::errc::file_too_large) << w.error().message();
    });
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::sigaction(SIGXFSZ, &old_sa, nullptr);
}

TEST_P(FileEngineTest, PlainThreadMakesPlainCalls) {
  const std::string path = dir.file("plain");
  write_pattern(path, 8192);
  const uint64_t before = stats().requests;
  auto f = File::open(path, flags(O_RDONLY), 0, opts);
  ASSERT_TRUE(f);
  AlignedBuffer buf(4096);
  EXPECT_EQ(f->pread(buf.span(), 4096).value_or(0), 4096u);
  EXPECT_TRUE(matches_pattern(buf.data(), 4096, 4096));
  EXPECT_EQ(stats().requests, before) << "a plain thread must not use the engine";
}

TEST_P(FileEngineTest, RequestsOfFibersOnOneWorkerShareSubmitCalls) {
  if (engine != "libaio")
    GTEST_SKIP() << "coalescing across fibers is a libaio feature (io_uring: one submit per batch)";
  const std::string path = dir.file("coalesce");
  constexpr int kFibers = 64;  // the first ~8 submit alone (coalescing starts at 8 in flight)
  write_pattern(path, kFibers * 4096);
  Runtime rt(1);
  const FileEngineStats before = stats();
  std::atomic<int> ok{0};
  rt.run([&] {
    auto f = File::open(path, O_RDONLY | O_DIRECT, 0, opts);
    ASSERT_TRUE(f);
    std::vector<JoinHandle<void>> hs;
    for (int i = 0; i < kFibers; ++i) {
      hs.push_back(Scheduler::current()->spawn([&, i] {
        AlignedBuffer buf(4096);
        auto n = f->pread(buf.span(), i * 4096);
        if (n && *n == 4096 && matches_pattern(buf.data(), 4096, i * 4096)) ok.fetch_add(1);
      }));
    }
    for (auto& h : hs) h.join();
  });
  EXPECT_EQ(ok.load(), kFibers);
  const FileEngineStats after = stats();
  EXPECT_EQ(after.requests - before.requests, static_cast<uint64_t>(kFibers));
  // Once 8 are in flight, each fiber queues its iocb and yields, so a flush finds many.
  EXPECT_LT(after.submit_calls - before.submit_calls, static_cast<uint64_t>(kFibers) / 2);
}

INSTANTIATE_TEST_SUITE_P(Engines, FileEngineTest, ::testing::ValuesIn(compiled_engines()),
                         [](const auto& info) { return info.param; });

TEST(FileOpen, UnknownEngineIsEinvalAndAutoPicksOne) {
  FileOptions o;
  o.engine = "floppy";
  auto bad = File::open("/dev/null", O_RDONLY, 0, o);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), std::errc::invalid_argument);
  auto ok = File::open("/dev/null", O_RDONLY);
  ASSERT_TRUE(ok);
  EXPECT_STRNE(ok->engine_name(), "none");
}

TEST(FileOpen, MissingFileIsEnoent) {
  auto f = File::open("/nonexistent/lionet/file", O_RDONLY);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error(), std::errc::no_such_file_or_directory);
}
}  // namespace
}  // namespace lionet
