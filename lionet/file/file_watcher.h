// lionet/file/file_watcher.h: lionet::FileWatcher, changes to files and directories delivered
// to a fiber that blocks in next() (inotify on Linux).
//
//   auto w = lionet::FileWatcher::open({.debounce = std::chrono::milliseconds(100)}).value();
//   w->add("conf/lionet.yml");       // a file: survives editors that replace it by rename
//   w->add("www");                   // a directory: its direct entries, and itself
//   while (auto changes = w->next()) {
//     for (const lionet::FileChange& c : *changes)
//       if (c.exists) reload(c.path); else forget(c.path);
//   }                                // next() fails with ECANCELED after w->close()
//
// Owns: the inotify descriptor, the watch table (one kernel watch per directory), and the
// changes read but not yet returned. Must not: block a worker thread (a fiber parks on the
// descriptor through the IOManager; a plain thread polls), or allocate per kernel event beyond
// the path of a change it reports.
//
// What is watched. A directory added: changes to its direct entries (not recursively) and its
// own deletion or move. A file added (or a path that does not exist yet): its parent directory
// is watched and only that name reported, so a file that is deleted and created again, or
// replaced by rename ("write tmp, rename over", as editors and certificate renewal tools do),
// keeps being watched. The parent directory must exist.
//
// What is reported. One FileChange per path per next(), in the order the paths first changed,
// with every kind of change seen for it since the last next() (FileChangeKind bits), and
// whether the path exists after the last of them. Paths are the added path ("conf/a.yml"), or
// the added directory joined with the entry's name ("www/index.html").
//   kCreated   created, or moved or renamed to this name (IN_CREATE, IN_MOVED_TO)
//   kModified  written and, if written through a descriptor, closed (IN_MODIFY, IN_CLOSE_WRITE)
//   kDeleted   deleted, or moved or renamed away (IN_DELETE, IN_MOVED_FROM; for an added
//              directory itself: IN_DELETE_SELF, IN_MOVE_SELF; the directory is then no longer
//              watched: add it again once it exists)
//   kOverflow  the kernel's queue overflowed and changes were lost: path is empty; rescan
//              whatever you watch. Reported as the only change of its next().
// Without debounce, next() returns what the kernel queued by the time it looked, so one
// `echo x > f` may come as two next()s (the truncating open, then the write). With debounce d,
// next() returns once no change has arrived for d (at most 4 x d after the first), so a burst
// of writes, or a delete + create + write, is one FileChange.
//
// Thread-safety: next() is for one caller at a time (any fiber or thread); add(), remove() and
// close() may be called from any fiber or thread, also while next() waits. Destroy the watcher
// after every call on it returned.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "lionet/base/clock.h"
#include "lionet/base/result.h"

namespace lionet {
class IOManager;

struct FileWatcherOptions {
  // Quiet period: next() returns once no change has arrived for this long (and at most 4 x
  // this after the first change it holds). Zero: return what is queued at once.
  Duration debounce = Duration::zero();
};

enum FileChangeKind : uint32_t {
  kFileCreated = 1u << 0,
  kFileModified = 1u << 1,
  kFileDeleted = 1u << 2,
  kFileOverflow = 1u << 3,
};

struct FileChange {
  std::string path;
  uint32_t kinds = 0;  // FileChangeKind bits, every kind seen since the last next()
  bool exists = false;  // after the last change seen: created or modified (true), deleted (false)
  bool created() const noexcept { return kinds & kFileCreated; }
  bool modified() const noexcept { return kinds & kFileModified; }
  bool deleted() const noexcept { return kinds & kFileDeleted; }
  bool overflow() const noexcept { return kinds & kFileOverflow; }
};

class FileWatcher {
 public:
  // inotify_init1; errors: EMFILE (the user's inotify instance limit), ENOSYS (not Linux).
  static Result<std::unique_ptr<FileWatcher>> open(FileWatcherOptions options = {}) noexcept;
  ~FileWatcher();
  FileWatcher(const FileWatcher&) = delete;
  FileWatcher& operator=(const FileWatcher&) = delete;

  // Watches a file or a directory (see above). Errors: ENOENT (no such directory, or no parent
  // directory), ENOSPC (the user's watch limit, fs.inotify.max_user_watches), ECANCELED after
  // close(), EINVAL (empty path).
  Result<void> add(const std::string& path) noexcept;
  // Stops reporting the path (the kernel watch goes when nothing else in its directory is
  // watched). ENOENT if it was not added.
  Result<void> remove(const std::string& path) noexcept;

  // Blocks until at least one change (see above) and returns them. ETIMEDOUT at the deadline
  // (nullopt: none), ECANCELED after close().
  Result<std::vector<FileChange>> next(std::optional<TimePoint> deadline = std::nullopt) noexcept;

  // Ends the watcher: a next() waiting now or called later fails with ECANCELED.
  void close() noexcept;

 private:
  struct Dir {
    std::string path;  // as added, "" for "."
    bool whole = false;  // the directory itself was added
    std::unordered_map<std::string, int> names;  // files added in it (name -> count)
  };
  FileWatcher(int fd, int wake_fd, int ep_fd, FileWatcherOptions options) noexcept;
  // Reads every queued kernel event into pending_, counting in seen those it kept; false with
  // err set on a real error.
  bool drain(int& err, std::size_t& seen) noexcept;
  void record(const std::string& path, uint32_t kinds, bool exists);
  // Waits until the descriptor is readable or the deadline: 0, ETIMEDOUT or ECANCELED.
  int wait(std::optional<TimePoint> deadline) noexcept;

  const int fd_;  // inotify
  const int wake_fd_;  // eventfd close() writes to
  const int ep_fd_;  // epoll over both: what next() waits on (close() cannot be missed)
  const FileWatcherOptions options_;
  std::atomic<bool> closed_{false};
  std::atomic<IOManager*> io_{nullptr};  // the IOManager next() last waited through

  std::mutex mu_;  // guards dirs_, by_dir_path_ (add/remove against next's event decoding)
  std::unordered_map<int, Dir> dirs_;  // watch descriptor -> directory
  std::unordered_map<std::string, int> by_dir_path_;  // directory path -> watch descriptor

  // next()'s caller only.
  std::vector<FileChange> pending_;
  std::unordered_map<std::string, std::size_t> pending_index_;  // path -> index in pending_
  bool overflow_ = false;
  TimePoint first_at_{}, last_at_{};  // when pending_ got its first / latest change
};
}  // namespace lionet
