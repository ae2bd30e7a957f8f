// lionet/app/runtime.h: what the lionet binary runs: the named worker pools (a Scheduler with
// its own IO driver each), the storage Store, and the `servers:` list (http, https, echo, syslog,
// kafka) with their routes, counters and the /metrics page.
//
// Owns: every running object of the process and the order in which they start and stop.
// Must not: read configuration files or signals (main.cc does; this takes the loaded AppConfig),
// or throw after start() returned.
//
// Start-up (constructor, then start()): a failure at any step throws StartupError whose what()
// is one line naming the server and the cause ("server 'web': listen 127.0.0.1:8080: Address
// already in use", "server 'tls': certificate 'x.pem': ...", "route /: static root 'www': ...");
// whatever was built so far is torn down again by the destructor.
//
// Shutdown (stop(drain)), numbered as it runs:
//   1. Every server stops accepting at once (all listeners close; each server's stop runs on
//      its own thread so they drain together); in-flight requests get until `drain` passes;
//      kept-alive connections end after their current request (Connection: close).
//   2. Past the deadline, the remaining connections are closed (TcpServer's protocol).
//   3. The Store is flushed (fdatasync of every partition) and closed: every record that was
//      acknowledged (under any flush policy) is on disk. The access logs write out every line
//      they hold and close.
//   4. Each pool's scheduler stops (waits for its fibers), then the scheduler object goes, its
//      IO driver with it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "lionet/app/config_binding.h"

namespace lionet {
class Scheduler;
namespace http {
class StaticFiles;
}
}  // namespace lionet

namespace lionet::app {

class StartupError : public std::runtime_error {
 public:
  using runtime_error::runtime_error;
};

class InheritedListeners;

// What the process was handed at start (main.cc fills it).
struct RuntimeHooks {
  // Listening sockets passed by systemd or by the process this one upgrades: a listener that
  // matches one (app/inherited_listeners.h) adopts it instead of binding.
  InheritedListeners* inherited = nullptr;
  // Runs just before the store opens, only if there is one (a binary upgrade waits there for
  // the old process to release it: app/upgrade.h). May throw (a StartupError results).
  std::function<void()> before_store;
};

class Runtime {
 public:
  // Builds the pools every server needs ("main" always), opens the Store when a storage route
  // exists, builds and binds (or adopts) every server. Throws StartupError (see above).
  explicit Runtime(const AppConfig& config, RuntimeHooks hooks = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Starts accepting on every server.
  void start();
  // The shutdown protocol above; true if every connection ended within drain. Idempotent.
  bool stop(std::chrono::milliseconds drain);

  // A binary upgrade (app/upgrade.h): every TCP listening socket with its server's name, and
  // stopping the acceptors without shutting those sockets down (the new process accepts on
  // them); stop() then drains as usual. Signal thread only.
  struct ListeningSocket {
    std::string server;
    int fd = -1;  // owned by the runtime
  };
  std::vector<ListeningSocket> listening_sockets() const;
  void stop_accepting_keep_sockets();

  // For the service manager's STATUS= line: connections open and requests answered so far,
  // over every server. Any thread.
  struct Load {
    std::size_t connections = 0;
    uint64_t requests = 0;
  };
  Load load() const;

  // The Prometheus text of /metrics (any thread).
  std::string metrics_text() const;
  // SIGHUP (logrotate): every access log file is opened anew by its writer thread (lines
  // logged before this call go to the old file). Returns how many logs there are. Any thread.
  std::size_t reopen_access_logs();
  // The pool "main" (scheduler.*), e.g. to run a fiber on it.
  Scheduler& main_scheduler() const;
  const char* main_io_backend() const;
  // One line per server: "name type addresses (workers pool)".
  std::vector<std::string> describe() const;

  // For `watch: true` (app/watch.h). Any thread.
  // The certificate and key files of every https server, as configured.
  std::vector<std::string> tls_files() const;
  // Builds the TLS context anew for every https server whose certificate or key is one of
  // `changed`; new connections get it, connections made before keep theirs. A pair that fails
  // to load keeps the running context and logs why. Returns how many servers were reloaded.
  std::size_t reload_tls(const std::vector<std::string>& changed);
  struct StaticRoute {
    std::string root;  // as configured
    std::shared_ptr<http::StaticFiles> files;
  };
  const std::vector<StaticRoute>& static_routes() const;
  // The credential files of every route with `auth:` (htpasswd, tokens), as configured.
  std::vector<std::string> credential_files() const;
  // Loads again every credential file in `changed` (SIGHUP: all of them); a route's verified-
  // credential cache is emptied when its file loads. A file that fails to load keeps the running
  // credentials and logs why (file and line, never a credential). Returns how many routes loaded.
  std::size_t reload_credentials(const std::vector<std::string>& changed);
  std::size_t reload_credentials() { return reload_credentials(credential_files()); }

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};
}  // namespace lionet::app
