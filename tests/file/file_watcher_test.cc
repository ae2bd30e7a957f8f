// FileWatcher (lionet/file/file_watcher.h): the changes an editor, a renewal tool or a deploy
// makes are each seen once per change, from a fiber on each IO backend and from a plain thread;
// close() and deadlines end a waiting next().
#include "lionet/file/file_watcher.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "file_test_util.h"
#include "lionet/io/io_manager.h"
#include "lionet/sched/scheduler.h"

namespace lionet {
namespace {
using namespace std::chrono_literals;
using file_test::ScratchDir;

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

// What the tests compare: "path:CMD:exists" with C/M/D for the kinds seen.
std::string show(const FileChange& c) {
  std::string k;
  if (c.created()) k += 'C';
  if (c.modified()) k += 'M';
  if (c.deleted()) k += 'D';
  if (c.overflow()) k += 'O';
  return c.path + ":" + k + ":" + (c.exists ? "1" : "0");
}

std::vector<std::string> show(const std::vector<FileChange>& cs) {
  std::vector<std::string> out;
  for (const auto& c : cs) out.push_back(show(c));
  return out;
}

// The changes of one next() within 5 s (an empty list if it failed).
std::vector<std::string> next_of(FileWatcher& w) {
  auto r = w.next(now() + 5s);
  EXPECT_TRUE(r.ok()) << r.error().message();
  return r ? show(*r) : std::vector<std::string>{};
}

// No change within `quiet`.
void expect_nothing(FileWatcher& w, Duration quiet = 300ms) {
  auto r = w.next(now() + quiet);
  ASSERT_FALSE(r.ok()) << "unexpected: " << (r ? ::testing::PrintToString(show(*r)) : "");
  EXPECT_EQ(r.error(), std::errc::timed_out);
}

class FileWatcherTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path.empty()); }
  // Runs body in a fiber on a 2-worker scheduler with the backend under test.
  template <class F>
  void in_fiber(F&& body) {
    Scheduler sched({.threads = 2, .name = "watch"});
    IOManager io(sched, IOManagerOptions{.backend = GetParam()});
    if (std::string(io.backend()) != GetParam()) {
      sched.stop();
      GTEST_SKIP() << GetParam() << " unavailable here";
    }
    sched.spawn(std::forward<F>(body)).join();
    sched.stop();
  }
  std::string p(const std::string& name) const { return dir_.path + "/" + name; }
  ScratchDir dir_;
};

TEST_P(FileWatcherTest, EditsInPlaceRenameOverDeleteAndRecreateAreEachSeenOnce) {
  in_fiber([&] {
    write_file(p("conf.yml"), "a: 1\n");
    write_file(p("other.yml"), "x\n");
    auto w = FileWatcher::open({.debounce = 100ms}).value();
    ASSERT_TRUE(w->add(p("conf.yml")).ok());

    // Write in place (truncating open, write, close: three kernel events): one change.
    write_file(p("conf.yml"), "a: 2\n");
    EXPECT_EQ(next_of(*w), std::vector<std::string>{p("conf.yml") + ":M:1"});

    // Rename over, as editors and certificate renewal tools do; the temporary file next to it is
    // not watched and not reported.
    write_file(p("conf.yml.tmp"), "a: 3\n");
    ASSERT_EQ(::rename(p("conf.yml.tmp").c_str(), p("conf.yml").c_str()), 0);
    EXPECT_EQ(next_of(*w), std::vector<std::string>{p("conf.yml") + ":C:1"});

    // The watch survived the replacement: a later write is seen.
    write_file(p("conf.yml"), "a: 4\n");
    EXPECT_EQ(next_of(*w), std::vector<std::string>{p("conf.yml") + ":M:1"});

    // Delete, then create again.
    ASSERT_EQ(::unlink(p("conf.yml").c_str()), 0);
    EXPECT_EQ(next_of(*w), std::vector<std::string>{p("conf.yml") + ":D:0"});
    write_file(p("conf.yml"), "a: 5\n");
    EXPECT_EQ(next_of(*w), std::vector<std::string>{p("conf.yml") + ":CM:1"});

    // A sibling that was not added is never reported.
    write_file(p("other.yml"), "y\n");
    expect_nothing(*w);
  });
}

TEST_P(FileWatcherTest, ADirectoryReportsItsEntriesAndItsOwnDeletion) {
  in_fiber([&] {
    const std::string d = p("www");
    ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
    write_file(d + "/old.html", "old");
    write_file(d + "/index.html", "v1");
    auto w = FileWatcher::open({.debounce = 100ms}).value();
    ASSERT_TRUE(w->add(d + "/").ok());  // a trailing slash names the same directory

    write_file(d + "/new.html", "new");
    write_file(d + "/index.html", "v2");
    ASSERT_EQ(::unlink((d + "/old.html").c_str()), 0);
    // One change per path, in the order the paths first changed.
    EXPECT_EQ(next_of(*w),
              (std::vector<std::string>{d + "/new.html:CM:1", d + "/index.html:M:1", d + "/old.html:D:0"}));

    std::filesystem::remove_all(d);
    auto last = next_of(*w);
    ASSERT_FALSE(last.empty());
    EXPECT_EQ(last.back(), d + ":D:0");
    write_file(p("after.html"), "x");  // the directory is gone: nothing more from it
    expect_nothing(*w);
  });
}

TEST_P(FileWatcherTest, ABurstOfWritesWithinTheDebounceIsOneChange) {
  in_fiber([&] {
    write_file(p("log"), "");
    auto w = FileWatcher::open({.debounce = 150ms}).value();
    ASSERT_TRUE(w->add(p("log")).ok());
    std::thread writer([&] {  // 10 appends, 20 ms apart: never 150 ms quiet
      for (int i = 0; i < 10; ++i) {
        std::ofstream f(p("log"), std::ios::app);
        f << i << "\n";
        f.close();
        std::this_thread::sleep_for(20ms);
      }
    });
    const TimePoint start = now();
    auto first = next_of(*w);
    const Duration took = now() - start;
    writer.join();
    EXPECT_EQ(first, std::vector<std::string>{p("log") + ":M:1"});
    // Held back while the burst went on (at least until the 4 x debounce bound), not 10 results.
    EXPECT_GE(took, 150ms);
    // Whatever the burst wrote after the bound is at most one more change.
    auto r = w->next(now() + 500ms);
    if (r) {
      EXPECT_EQ(show(*r), std::vector<std::string>{p("log") + ":M:1"});
    }
    expect_nothing(*w);
  });
}

TEST_P(FileWatcherTest, CloseFromAnotherFiberEndsAWaitingNextAndDeadlinesExpire) {
  in_fiber([&] {
    auto w = FileWatcher::open().value();
    ASSERT_TRUE(w->add(dir_.path).ok());
    const TimePoint t0 = now();
    auto r = w->next(now() + 100ms);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error(), std::errc::timed_out);
    EXPECT_GE(now() - t0, 100ms);

    std::atomic<bool> returned{false};
    std::error_code seen;
    auto waiter = Scheduler::current()->spawn([&] {
      auto n = w->next();
      seen = n.error();
      returned = true;
    });
    std::this_thread::sleep_for(50ms);  // (this fiber's worker; the waiter runs on the other)
    EXPECT_FALSE(returned.load());
    w->close();
    waiter.join();
    EXPECT_EQ(seen, std::errc::operation_canceled);
    EXPECT_EQ(w->next().error(), std::errc::operation_canceled);
    EXPECT_EQ(w->add(dir_.path).error(), std::errc::operation_canceled);
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, FileWatcherTest, ::testing::Values("epoll", "io_uring"));

TEST(FileWatcher, WorksFromAPlainThreadWithoutDebounce) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path.empty());
  auto w = FileWatcher::open().value();
  ASSERT_TRUE(w->add(dir.path).ok());
  std::thread t([&] {
    std::this_thread::sleep_for(50ms);
    write_file(dir.path + "/a", "x");
  });
  auto r = w->next(now() + 5s);
  t.join();
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_FALSE(r->empty());
  EXPECT_EQ(r->front().path, dir.path + "/a");
  EXPECT_TRUE(r->front().created());
}

TEST(FileWatcher, AddAndRemoveReportClearErrors) {
  ScratchDir dir;
  auto w = FileWatcher::open().value();
  EXPECT_EQ(w->add("").error(), std::errc::invalid_argument);
  EXPECT_EQ(w->add(dir.path + "/no-such-dir/file").error(), std::errc::no_such_file_or_directory);
  EXPECT_EQ(w->remove(dir.path + "/never-added").error(), std::errc::no_such_file_or_directory);
  // A file that does not exist yet can be watched (its directory exists): its creation is seen.
  ASSERT_TRUE(w->add(dir.path + "/later").ok());
  write_file(dir.path + "/later", "x");
  auto r = w->next(now() + 5s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->front().path, dir.path + "/later");
  // Removed: its changes are no longer reported.
  ASSERT_TRUE(w->remove(dir.path + "/later").ok());
  write_file(dir.path + "/later", "y");
  auto none = w->next(now() + 200ms);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error(), std::errc::timed_out);
}
}  // namespace
}  // namespace lionet
