// lionet/file/file_watcher.cc: FileWatcher (see file_watcher.h) over inotify.
//
// Waiting: next() parks on an epoll descriptor that holds the inotify descriptor and an
// eventfd. close() writes the eventfd, so a close() that lands between next()'s check of
// closed_ and its park still wakes it (the eventfd stays readable). The descriptors are read
// with raw system calls: they are the watcher's own, never handed to the hooks.
#include "lionet/file/file_watcher.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include "lionet/io/io_manager.h"

#if defined(__linux__)
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace lionet {
namespace {

template <class T>
Result<T> fail(int err) noexcept {
  return Result<T>::failure(err);
}

#if defined(__linux__)
constexpr uint32_t kDirMask = IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
                              IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK;

// "a/b/" -> "a/b"; "/" stays.
std::string trim_slashes(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

// "a/b/c" -> {"a/b", "c"}; "c" -> {"", "c"} (the current directory); "/c" -> {"/", "c"}.
std::pair<std::string, std::string> split_dir(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {std::string(), path};
  return {slash == 0 ? std::string("/") : path.substr(0, slash), path.substr(slash + 1)};
}

std::string join(const std::string& dir, const char* name) { return dir.empty() ? name : dir + "/" + name; }

ssize_t raw_read(int fd, void* buf, std::size_t n) noexcept { return ::syscall(SYS_read, fd, buf, n); }
#endif
}  // namespace

#if defined(__linux__)

Result<std::unique_ptr<FileWatcher>> FileWatcher::open(FileWatcherOptions options) noexcept {
  const int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return fail<std::unique_ptr<FileWatcher>>(errno);
  const int wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  const int ep = wake < 0 ? -1 : ::epoll_create1(EPOLL_CLOEXEC);
  int err = ep < 0 ? errno : 0;
  for (int f : {fd, wake}) {
    if (err) break;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = f;
    if (::epoll_ctl(ep, EPOLL_CTL_ADD, f, &ev) != 0) err = errno;
  }
  if (err) {
    for (int f : {fd, wake, ep})
      if (f >= 0) ::close(f);
    return fail<std::unique_ptr<FileWatcher>>(err);
  }
  try {
    return std::unique_ptr<FileWatcher>(new FileWatcher(fd, wake, ep, options));
  } catch (...) {
    for (int f : {fd, wake, ep}) ::close(f);
    return fail<std::unique_ptr<FileWatcher>>(ENOMEM);
  }
}

FileWatcher::FileWatcher(int fd, int wake_fd, int ep_fd, FileWatcherOptions options) noexcept
    : fd_(fd), wake_fd_(wake_fd), ep_fd_(ep_fd), options_(options) {}

FileWatcher::~FileWatcher() {
  IOManager::cancel_if_alive(io_.load(std::memory_order_acquire), ep_fd_);  // forget its registration
  ::close(ep_fd_);
  ::close(wake_fd_);
  ::close(fd_);
}

Result<void> FileWatcher::add(const std::string& path_in) noexcept {
  if (path_in.empty()) return fail<void>(EINVAL);
  if (closed_.load(std::memory_order_acquire)) return fail<void>(ECANCELED);
  try {
    const std::string path = trim_slashes(path_in);
    struct stat st;
    const bool is_dir = ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    const auto [dir, name] = is_dir ? std::make_pair(path, std::string()) : split_dir(path);
    const std::string kernel_dir = dir.empty() ? "." : dir;
    std::lock_guard<std::mutex> lk(mu_);
    const int wd = ::inotify_add_watch(fd_, kernel_dir.c_str(), kDirMask);
    if (wd < 0) return fail<void>(errno == ENOTDIR ? ENOENT : errno);
    auto [it, fresh] = dirs_.try_emplace(wd);
    Dir& d = it->second;
    if (fresh) {
      d.path = dir;
      by_dir_path_[dir] = wd;
    }
    if (is_dir) d.whole = true;
    else ++d.names[name];
    return {};
  } catch (...) {
    return fail<void>(ENOMEM);
  }
}

Result<void> FileWatcher::remove(const std::string& path_in) noexcept {
  try {
    const std::string path = trim_slashes(path_in);
    std::lock_guard<std::mutex> lk(mu_);
    auto drop_if_unused = [&](std::unordered_map<int, Dir>::iterator it) {
      if (it->second.whole || !it->second.names.empty()) return;
      ::inotify_rm_watch(fd_, it->first);
      by_dir_path_.erase(it->second.path);
      dirs_.erase(it);
    };
    if (auto p = by_dir_path_.find(path); p != by_dir_path_.end()) {  // a directory added whole
      auto it = dirs_.find(p->second);
      if (it != dirs_.end() && it->second.whole) {
        it->second.whole = false;
        drop_if_unused(it);
        return {};
      }
    }
    const auto [dir, name] = split_dir(path);
    auto p = by_dir_path_.find(dir);
    if (p == by_dir_path_.end()) return fail<void>(ENOENT);
    auto it = dirs_.find(p->second);
    if (it == dirs_.end()) return fail<void>(ENOENT);
    auto n = it->second.names.find(name);
    if (n == it->second.names.end()) return fail<void>(ENOENT);
    if (--n->second == 0) it->second.names.erase(n);
    drop_if_unused(it);
    return {};
  } catch (...) {
    return fail<void>(ENOMEM);
  }
}

void FileWatcher::record(const std::string& path, uint32_t kinds, bool exists) {
  auto [it, fresh] = pending_index_.try_emplace(path, pending_.size());
  if (fresh) pending_.push_back(FileChange{path, 0, false});
  FileChange& c = pending_[it->second];
  c.kinds |= kinds;
  c.exists = exists;
}

bool FileWatcher::drain(int& err, std::size_t& seen) noexcept {
  // Aligned for struct inotify_event; room for many events with names up to NAME_MAX.
  alignas(inotify_event) char buf[16 * (sizeof(inotify_event) + NAME_MAX + 1)];
  for (;;) {
    const ssize_t n = raw_read(fd_, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return true;
      err = errno;
      return false;
    }
    if (n == 0) return true;
    try {
      std::lock_guard<std::mutex> lk(mu_);
      for (ssize_t at = 0; at < n;) {
        const auto* ev = reinterpret_cast<const inotify_event*>(buf + at);
        at += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
        if (ev->mask & IN_Q_OVERFLOW) {
          overflow_ = true;
          ++seen;
          continue;
        }
        auto it = dirs_.find(ev->wd);
        if (it == dirs_.end()) continue;  // removed meanwhile
        Dir& d = it->second;
        if (ev->mask & IN_IGNORED) {  // the kernel dropped the watch (the directory is gone)
          by_dir_path_.erase(d.path);
          dirs_.erase(it);
          continue;
        }
        if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
          if (d.whole) {
            record(d.path.empty() ? "." : d.path, kFileDeleted, false);
            ++seen;
          }
          if (ev->mask & IN_MOVE_SELF) {  // a moved directory would report under a stale path
            ::inotify_rm_watch(fd_, ev->wd);
            by_dir_path_.erase(d.path);
            dirs_.erase(it);
          }
          continue;
        }
        if (ev->len == 0) continue;
        const char* name = ev->name;
        if (!d.whole && d.names.find(name) == d.names.end()) continue;
        ++seen;
        if (ev->mask & (IN_CREATE | IN_MOVED_TO)) record(join(d.path, name), kFileCreated, true);
        else if (ev->mask & (IN_MODIFY | IN_CLOSE_WRITE)) record(join(d.path, name), kFileModified, true);
        else if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) record(join(d.path, name), kFileDeleted, false);
      }
    } catch (...) {
      err = ENOMEM;
      return false;
    }
  }
}

int FileWatcher::wait(std::optional<TimePoint> deadline) noexcept {
  for (;;) {
    if (closed_.load(std::memory_order_acquire)) return ECANCELED;
    epoll_event evs[2];
    const int r = static_cast<int>(::syscall(SYS_epoll_pwait, ep_fd_, evs, 2, 0, nullptr, 0));
    if (r > 0) return 0;
    if (r < 0 && errno != EINTR) return errno;
    if (deadline && now() >= *deadline) return ETIMEDOUT;
    int rc;
    if (IOManager* io = IOManager::current()) {
      if (io_.load(std::memory_order_relaxed) != io) {
        IOManager::cancel_if_alive(io_.exchange(io, std::memory_order_acq_rel), ep_fd_);
      }
      rc = io->wait_readable(ep_fd_, deadline);
    } else {  // a plain thread: poll(2), in slices so that no clock jump can strand it
      int ms = 1000;
      if (deadline) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - now()).count();
        ms = static_cast<int>(std::min<long long>(std::max<long long>(left, 0) + 1, 1000));
      }
      pollfd p{ep_fd_, POLLIN, 0};
      rc = ::poll(&p, 1, ms) < 0 && errno != EINTR ? errno : 0;
    }
    if (rc == ETIMEDOUT) return rc;
    if (rc != 0 && rc != EINTR) return closed_.load(std::memory_order_acquire) ? ECANCELED : rc;
  }
}

Result<std::vector<FileChange>> FileWatcher::next(std::optional<TimePoint> deadline) noexcept {
  using R = Result<std::vector<FileChange>>;
  const Duration quiet = options_.debounce;
  for (;;) {
    if (closed_.load(std::memory_order_acquire)) return fail<std::vector<FileChange>>(ECANCELED);
    const bool had = !pending_.empty() || overflow_;
    int err = 0;
    std::size_t seen = 0;
    if (!drain(err, seen)) return fail<std::vector<FileChange>>(err);
    const TimePoint t = now();
    if (seen > 0) {
      if (!had) first_at_ = t;
      last_at_ = t;
    }
    const bool have = !pending_.empty() || overflow_;
    if (have) {
      TimePoint ready_at = t;
      if (quiet > Duration::zero()) ready_at = std::min(last_at_ + quiet, first_at_ + 4 * quiet);
      if (t >= ready_at || (deadline && t >= *deadline)) {
        std::vector<FileChange> out;
        if (overflow_) {
          out.push_back(FileChange{std::string(), kFileOverflow, false});
        } else {
          out.swap(pending_);
        }
        pending_.clear();
        pending_index_.clear();
        overflow_ = false;
        return R(std::move(out));
      }
      std::optional<TimePoint> until = ready_at;
      if (deadline && *deadline < ready_at) until = deadline;
      const int rc = wait(until);
      if (rc != 0 && rc != ETIMEDOUT) return fail<std::vector<FileChange>>(rc);
      continue;
    }
    const int rc = wait(deadline);
    if (rc != 0) return fail<std::vector<FileChange>>(rc);
  }
}

void FileWatcher::close() noexcept {
  closed_.store(true, std::memory_order_release);
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t w = ::syscall(SYS_write, wake_fd_, &one, sizeof one);
}

#else  // not Linux: no inotify (kqueue's EVFILT_VNODE is not implemented yet)

Result<std::unique_ptr<FileWatcher>> FileWatcher::open(FileWatcherOptions) noexcept {
  return fail<std::unique_ptr<FileWatcher>>(ENOSYS);
}
FileWatcher::FileWatcher(int fd, int wake_fd, int ep_fd, FileWatcherOptions options) noexcept
    : fd_(fd), wake_fd_(wake_fd), ep_fd_(ep_fd), options_(options) {}
FileWatcher::~FileWatcher() = default;
Result<void> FileWatcher::add(const std::string&) noexcept { return fail<void>(ENOSYS); }
Result<void> FileWatcher::remove(const std::string&) noexcept { return fail<void>(ENOSYS); }
Result<std::vector<FileChange>> FileWatcher::next(std::optional<TimePoint>) noexcept {
  return fail<std::vector<FileChange>>(ENOSYS);
}
void FileWatcher::close() noexcept {}
#endif
}  // namespace lionet
