// lionet/app/watch.h: `watch: true`: the lionet binary follows changes on disk while it runs.
//   - the configuration (the -c file, or the *.yml / *.yaml files of the -c directory):
//     reloaded exactly as on SIGHUP (the watcher sends the process SIGHUP, so the reload runs
//     in the signal loop like any other: an invalid file keeps the running configuration and
//     its file:line error is logged once per change);
//   - every https server's certificate and key files (Runtime::reload_tls): new connections get
//     the new pair, existing ones keep theirs, a pair that fails to load keeps the old one;
//   - every static route's root tree (each directory, up to kMaxDirsPerRoot per route, and
//     directories created later): a changed file is dropped from the route's open-file and
//     MEMORY caches at once (StaticFiles::invalidate), not at its next revalidation.
// Changes are debounced (kDebounce) so that a renewal tool writing a certificate and its key,
// or an editor's save, acts once.
//
// Owns: a FileWatcher and the plain thread ("lionet-watch") that reads it. A plain thread, not
// a fiber: it reads certificate files and walks directories (blocking), and it must outlive
// nothing: the destructor stops it before the Runtime goes. Signals stay blocked in it (the
// process's signal loop takes them).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>

namespace lionet {
class FileWatcher;
}

namespace lionet::app {
class Runtime;

class Watch {
 public:
  static constexpr std::chrono::milliseconds kDebounce{200};
  static constexpr std::size_t kMaxDirsPerRoot = 4096;

  // Adds every watch, then starts the thread. Throws StartupError naming what could not
  // be watched (the configuration path; a static root or certificate that cannot be watched is
  // logged and skipped).
  Watch(Runtime& runtime, std::string conf);
  ~Watch();  // stops the thread (FileWatcher::close wakes it at once) and joins it
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  struct State;

 private:
  std::unique_ptr<State> state_;
  std::thread thread_;
};
}  // namespace lionet::app
