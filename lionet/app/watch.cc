// lionet/app/watch.cc: Watch (see watch.h).
#include "lionet/app/watch.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "lionet/app/runtime.h"
#include "lionet/file/file_watcher.h"
#include "lionet/http/static_files.h"
#include "lionet/log/log.h"

namespace lionet::app {
namespace {
namespace fs = std::filesystem;

std::string trim_slashes(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

bool is_yaml(const std::string& p) { return p.ends_with(".yml") || p.ends_with(".yaml"); }

// p is dir itself or beneath it: the part after "dir/" ("" for dir itself); nullopt otherwise.
std::optional<std::string> beneath(const std::string& dir, const std::string& p) {
  if (p == dir) return std::string();
  if (p.size() > dir.size() && p.starts_with(dir) && (dir == "/" || p[dir.size()] == '/'))
    return p.substr(dir == "/" ? 1 : dir.size() + 1);
  return std::nullopt;
}
}  // namespace

struct Watch::State {
  Runtime& runtime;
  std::string conf;  // trailing slashes trimmed
  bool conf_is_dir = false;
  std::unique_ptr<FileWatcher> watcher;
  std::vector<std::string> tls_files;
  std::vector<std::string> credential_files;  // htpasswd and token files of auth routes
  struct Root {
    std::string dir;  // as configured, trailing slashes trimmed
    std::shared_ptr<http::StaticFiles> files;
    std::size_t dirs = 0;  // directories watched under it
    bool capped = false;  // kMaxDirsPerRoot reached (logged once)
  };
  std::vector<Root> roots;
  std::shared_ptr<spdlog::logger> lg = log::get("app");

  // Watches dir and every directory beneath it, up to the root's cap.
  void watch_tree(Root& r, const std::string& dir) {
    auto add = [&](const std::string& d) {
      if (r.dirs >= kMaxDirsPerRoot) {
        if (!r.capped) {
          r.capped = true;
          LIONET_LOG_WARN(lg,
                          "watch: static root '{}' has more than {} directories: files deeper in are seen at their "
                          "next revalidation only (open_file_cache_valid)",
                          r.dir, kMaxDirsPerRoot);
        }
        return false;
      }
      if (auto w = watcher->add(d); !w) {
        LIONET_LOG_WARN(lg, "watch: cannot watch '{}': {}", d, w.error().message());
        return true;
      }
      ++r.dirs;
      return true;
    };
    if (!add(dir)) return;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      std::error_code ec2;
      if (it->is_directory(ec2) && !it->is_symlink(ec2) && !add(it->path().string())) return;
    }
  }

  void handle(const std::vector<FileChange>& changes) {
    bool reload_conf = false;
    std::vector<std::string> tls_changed, credentials_changed;
    for (const FileChange& c : changes) {
      if (c.overflow()) {  // lost changes: act as if everything changed
        LIONET_LOG_WARN(lg, "watch: the kernel dropped file events: reloading everything watched");
        reload_conf = true;
        tls_changed = tls_files;
        credentials_changed = credential_files;
        for (auto& r : roots) r.files->invalidate_all();
        break;
      }
      if (conf_is_dir ? (beneath(conf, c.path) && is_yaml(c.path)) : c.path == conf) reload_conf = true;
      if (std::find(tls_files.begin(), tls_files.end(), c.path) != tls_files.end()) tls_changed.push_back(c.path);
      if (std::find(credential_files.begin(), credential_files.end(), c.path) != credential_files.end())
        credentials_changed.push_back(c.path);
      for (auto& r : roots) {
        auto rel = beneath(r.dir, c.path);
        if (!rel) continue;
        const std::size_t n = rel->empty() ? (r.files->invalidate_all(), 1) : r.files->invalidate(*rel);
        LIONET_LOG_DEBUG(lg, "watch: {} changed: {} cached entr{} dropped", c.path, n, n == 1 ? "y" : "ies");
        std::error_code ec;
        if (c.created() && c.exists && !rel->empty() && fs::is_directory(c.path, ec) && !fs::is_symlink(c.path, ec))
          watch_tree(r, c.path);  // a new directory: its files are served too
      }
    }
    if (!tls_changed.empty()) runtime.reload_tls(tls_changed);
    if (!credentials_changed.empty()) runtime.reload_credentials(credentials_changed);
    if (reload_conf) {
      LIONET_LOG_INFO(lg, "watch: {} changed: reloading as on SIGHUP", conf);
      ::kill(::getpid(), SIGHUP);
    }
  }

  void run() {
    pthread_setname_np(pthread_self(), "lionet-watch");
    for (;;) {
      auto changes = watcher->next();
      if (!changes) {
        if (changes.error() != std::errc::operation_canceled)
          LIONET_LOG_ERROR(lg, "watch: stopped: {}", changes.error().message());
        return;
      }
      try {
        handle(*changes);
      } catch (const std::exception& e) {
        LIONET_LOG_ERROR(lg, "watch: {}", e.what());
      }
    }
  }
};

Watch::Watch(Runtime& runtime, std::string conf) : state_(new State{runtime, trim_slashes(std::move(conf))}) {
  State& s = *state_;
  auto w = FileWatcher::open({.debounce = kDebounce});
  if (!w) throw StartupError("watch: " + w.error().message());
  s.watcher = std::move(*w);
  std::error_code ec;
  s.conf_is_dir = fs::is_directory(s.conf, ec);
  if (auto r = s.watcher->add(s.conf); !r)
    throw StartupError("watch: cannot watch the configuration '" + s.conf + "': " + r.error().message());
  for (const std::string& f : runtime.tls_files()) {
    if (auto r = s.watcher->add(f); !r) {
      LIONET_LOG_WARN(s.lg, "watch: cannot watch the certificate file '{}': {}", f, r.error().message());
      continue;
    }
    s.tls_files.push_back(f);
  }
  for (const std::string& f : runtime.credential_files()) {
    if (auto r = s.watcher->add(f); !r) {
      LIONET_LOG_WARN(s.lg, "watch: cannot watch the credential file '{}': {}", f, r.error().message());
      continue;
    }
    s.credential_files.push_back(f);
  }
  for (const auto& sr : runtime.static_routes()) {
    s.roots.push_back({trim_slashes(sr.root), sr.files});
    s.watch_tree(s.roots.back(), s.roots.back().dir);
  }
  std::size_t dirs = 0;
  for (const auto& r : s.roots) dirs += r.dirs;
  LIONET_LOG_INFO(s.lg, "watch: following {} ({}), {} certificate file(s), {} credential file(s), {} static director{}",
                  s.conf, s.conf_is_dir ? "directory" : "file", s.tls_files.size(), s.credential_files.size(), dirs,
                  dirs == 1 ? "y" : "ies");
  thread_ = std::thread([&s] { s.run(); });
}

Watch::~Watch() {
  state_->watcher->close();
  if (thread_.joinable()) thread_.join();
}
}  // namespace lionet::app
