// lionet/app/main.cc: the lionet server binary.
//
//   lionet [-c <conf dir or file>] [--check] [--print-config]
//   lionet --print-reference | --print-man | --version | --help   (texts: app/usage.h)
//
// Start-up order (each step only once the previous succeeded):
//  1. parse the command line (unknown flag -> usage on stderr, exit 2);
//  2. block SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGUSR2 in this thread before any other thread exists, so
//     every thread inherits the mask and only sigtimedwait() below receives them;
//  3. load and validate the whole configuration (every *.yml/*.yaml of the directory, then
//     LIONET_* environment overrides); any error -> message on stderr, exit 1, nothing started;
//     --print-config prints the effective config, --check says OK; both exit 0 here;
//  4. configure logging, build the Runtime (pools, storage, servers: app/runtime.h), adopting
//     the listening sockets systemd or an upgrading lionet passed (app/inherited_listeners.h);
//     a start-up failure (port in use, bad certificate, unreadable root, storage) -> one line on
//     stderr naming the server and the cause, exit 1; once every server listens: READY=1 to
//     systemd and READY to the process this one upgrades (app/service_notify.h, app/upgrade.h);
//  5. wait for signals: SIGHUP reloads the configuration and reopens the log files and the
//     access logs (log changes apply at once; other changes are reported as needing a restart;
//     a bad file is logged and ignored; systemd sees RELOADING=1 ... READY=1 around it); SIGUSR2
//     starts the binary at this process's path and hands the listeners over (app/upgrade.h:
//     exit 0 once it serves, after MAINPID=<its pid> to systemd; or serve on if it failed);
//     SIGQUIT writes the fiber dump of every scheduler to stderr and goes on; SIGINT/SIGTERM run the Runtime's shutdown (stop accepting, drain for
//     app.shutdown_timeout, flush storage, stop the pools) on another thread and exit 0 when it
//     is done (STOPPING=1 to systemd first); a second SIGINT/SIGTERM meanwhile exits at once
//     with status 1.
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "lionet/app/config_binding.h"
#include "lionet/app/config_reference.h"
#include "lionet/app/inherited_listeners.h"
#include "lionet/app/runtime.h"
#include "lionet/app/service_notify.h"
#include "lionet/app/upgrade.h"
#include "lionet/app/usage.h"
#include "lionet/app/watch.h"
#include "lionet/config/registry.h"
#include "lionet/log/log.h"
#include "lionet/sched/fiber_dump.h"
#include "lionet/sched/os_locks.h"
#include "lionet/sched/scheduler.h"

namespace {
struct Args {
  std::string conf;
  bool check = false;
  bool print = false;
  bool reference = false;
  bool man = false;
};

// Without -c: ./conf/ (make run, a checkout), else <dir of bin/>/conf (an installed tree),
// else /etc/lionet/ (the Debian package), else the source tree's conf/ this binary was built from.
std::string default_conf() {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory("conf", ec)) return "conf/";
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path beside = exe.parent_path().parent_path() / "conf";
    if (fs::is_directory(beside, ec)) return beside.string() + "/";
  }
  if (fs::is_directory("/etc/lionet", ec)) return "/etc/lionet/";
  return LIONET_DEFAULT_CONF;
}

// Returns -1 to go on, else the exit code.
int parse_args(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "-c" || arg == "--config") {
      if (i + 1 == argc) {
        std::fprintf(stderr, "lionet: %s needs a path\n%s", argv[i], lionet::app::usage_text().c_str());
        return 2;
      }
      a.conf = argv[++i];
    } else if (arg.starts_with("--config=")) {
      a.conf = arg.substr(9);
    } else if (arg == "--check") {
      a.check = true;
    } else if (arg == "--print-config") {
      a.print = true;
    } else if (arg == "--print-reference") {
      a.reference = true;
    } else if (arg == "--print-man") {
      a.man = true;
    } else if (arg == "-h" || arg == "--help") {
      std::fputs(lionet::app::usage_text().c_str(), stdout);
      return 0;
    } else if (arg == "-V" || arg == "--version") {
      std::fputs(lionet::app::version_text().c_str(), stdout);
      return 0;
    } else {
      std::fprintf(stderr, "lionet: unknown argument '%s'\n%s", argv[i], lionet::app::usage_text().c_str());
      return 2;
    }
  }
  if (a.conf.empty() && !a.reference && !a.man) a.conf = default_conf();
  return -1;
}

std::string describe_unknown(const std::vector<lionet::config::UnknownKey>& keys) {
  std::string s;
  for (const auto& u : keys) {
    if (!s.empty()) s += ", ";
    s += u.key + " (" + u.source;
    if (u.line > 0) s += ":" + std::to_string(u.line) + ":" + std::to_string(u.column);
    s += ")";
  }
  return s;
}

// SIGHUP's reload found `var` changed; the running process applies it only after a restart.
template <class T>
void warn_needs_restart(lionet::config::ConfigVar<T>& var) {
  var.add_listener([name = var.name()](auto&&, auto&&) {
    LIONET_LOG_WARN(lionet::log::get("app"), "{} changed: the running process applies it after a restart", name);
  });
}

// Step 5 of the start-up order. Returns the exit status.
// What serve_signals needs besides the runtime and the configuration.
struct Supervision {
  lionet::app::ServiceNotify& notify;
  lionet::app::BinaryUpgrade& upgrade;
};

// SIGUSR2 (app/upgrade.h). Returns -1 to go on serving, else the exit status.
int upgrade_binary(lionet::app::Runtime& runtime, const lionet::app::AppConfig& cfg, Supervision& sv) {
  using namespace lionet;
  auto lg = log::get("app");
  std::vector<app::BinaryUpgrade::Listener> listeners;
  for (const auto& l : runtime.listening_sockets()) listeners.push_back({l.server, l.fd});
  const auto drain = cfg.shutdown_timeout->value();
  LIONET_LOG_INFO(lg, "SIGUSR2: upgrading to {}", sv.upgrade.executable());
  const auto outcome = sv.upgrade.run(
      listeners,
      [&] {
        runtime.stop_accepting_keep_sockets();
        sv.notify.stop_heartbeat();
        const bool drained = runtime.stop(drain);
        LIONET_LOG_INFO(lg, "upgrade: this process stopped{}",
                        drained ? "" : " (some connections were cut at the deadline)");
      },
      drain + std::chrono::seconds(30));
  if (outcome == app::BinaryUpgrade::Outcome::kFailed) return -1;
  if (outcome == app::BinaryUpgrade::Outcome::kHandedOver) {
    sv.notify.main_pid(sv.upgrade.new_pid());  // systemd follows the new process (upgrade.h)
    return 0;
  }
  return 1;
}

int serve_signals(lionet::app::Runtime& runtime, lionet::config::Registry& registry, const lionet::app::AppConfig& cfg,
                  const std::string& conf, const sigset_t& signals, Supervision& sv) {
  using namespace lionet;
  auto lg = log::get("app");
  std::atomic<bool> stopped{false};
  std::thread stopper;
  for (;;) {
    const timespec tick{0, 100 * 1000 * 1000};
    siginfo_t info;
    const int sig = sigtimedwait(&signals, &info, &tick);
    if (stopped.load(std::memory_order_acquire)) break;
    if (sig < 0) continue;  // EAGAIN (tick) or EINTR
    if (sig == SIGQUIT) {
      const std::string dump = dump_fibers(app::fiber_dump_options(cfg));
      std::fprintf(stderr, "lionet: SIGQUIT: fiber dump\n%s", dump.c_str());
      std::fflush(stderr);
    } else if (sig == SIGUSR2) {
      if (stopper.joinable()) continue;  // already stopping
      if (const int rc = upgrade_binary(runtime, cfg, sv); rc >= 0) {
        if (stopper.joinable()) stopper.join();
        return rc;
      }
    } else if (sig == SIGHUP) {
      sv.notify.reloading();
      LIONET_LOG_INFO(lg, "SIGHUP: reloading {}", conf);
      try {
        auto r = registry.load_path(conf);
        LIONET_LOG_INFO(lg, "reloaded: {} key(s) changed", r.changed.size());
      } catch (const config::ConfigError& e) {
        LIONET_LOG_ERROR(lg, "reload rejected, keeping the running configuration: {}", e.what());
      }
      try {
        log::reopen(app::log_options(cfg));  // log files moved away by logrotate are created anew
        LIONET_LOG_INFO(lg, "SIGHUP: log files reopened");
      } catch (const std::exception& e) {
        LIONET_LOG_ERROR(lg, "log files not reopened: {}", e.what());
      }
      // Credential files of routes with auth: (a file that fails keeps the running credentials).
      if (const std::size_t n = runtime.reload_credentials(); n > 0) {
        LIONET_LOG_INFO(lg, "SIGHUP: credentials reloaded for {} route(s)", n);
      }
      // Access logs: each writer thread opens its file anew (a failure is logged there).
      if (const std::size_t n = runtime.reopen_access_logs(); n > 0) {
        LIONET_LOG_INFO(lg, "SIGHUP: reopening {} access log file(s)", n);
      }
      sv.notify.ready();
    } else if (stopper.joinable()) {
      LIONET_LOG_WARN(lg, "{} again during shutdown: exiting now", sig == SIGINT ? "SIGINT" : "SIGTERM");
      log::shutdown();
      std::_Exit(1);
    } else {
      const auto drain = cfg.shutdown_timeout->value();
      LIONET_LOG_INFO(lg, "{}: stopping (in-flight requests get {} ms)", sig == SIGINT ? "SIGINT" : "SIGTERM",
                      drain.count());
      sv.notify.stopping();
      stopper = std::thread([&runtime, &stopped, &sv, drain, lg] {
        sv.notify.stop_heartbeat();  // its fiber runs on a pool that stop() waits for
        // Close our listening fds without shutting the sockets down: one systemd (or any parent)
        // passed is still held there, and connections queued meanwhile wait for the next process.
        runtime.stop_accepting_keep_sockets();
        const bool drained = runtime.stop(drain);
        LIONET_LOG_INFO(lg, "stopped{}", drained ? "" : " (some connections were cut at the deadline)");
        stopped.store(true, std::memory_order_release);
      });
    }
  }
  stopper.join();
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace lionet;
  Args args;
  if (int rc = parse_args(argc, argv, args); rc >= 0) return rc;

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  sigaddset(&signals, SIGQUIT);
  sigaddset(&signals, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A file over RLIMIT_FSIZE must fail the write with EFBIG (answered 507), not kill the
  // server; a peer gone mid-write must be an EPIPE, not a death.
  std::signal(SIGXFSZ, SIG_IGN);
  std::signal(SIGPIPE, SIG_IGN);
  // A server holds one fd per connection: take the whole hard limit (Go's runtime does the
  // same); servers[].max_connections is the limit a user configures.
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }

  // Before anything opens a file: fds 3.. may be listening sockets handed to this process.
  app::InheritedListeners inherited = app::InheritedListeners::from_environment();
  app::UpgradeChannel upgrade_channel = app::UpgradeChannel::from_environment();
  app::BinaryUpgrade upgrade(argc, argv);

  config::Registry& registry = config::Registry::global();
  app::AppConfig cfg = app::define_config(registry);
  if (args.reference) {
    std::fputs(app::config_reference(registry).c_str(), stdout);
    return 0;
  }
  if (args.man) {
    std::fputs(app::man_page(registry).c_str(), stdout);
    return 0;
  }
  const bool offline = args.check || args.print;
  config::LoadReport report;
  try {
    // In --check/--print-config mode the unknown-keys warning goes to stderr, keeping stdout
    // clean for the printed config; when serving it goes through the log.
    report = registry.load_path(args.conf, config::LoadOptions{.warn_unknown = !offline});
  } catch (const config::ConfigError& e) {
    std::fprintf(stderr, "lionet: invalid configuration: %s\n", e.what());
    return 1;
  }
  if (auto err = app::check_config(cfg)) {
    std::fprintf(stderr, "lionet: invalid configuration: %s: %s\n", args.conf.c_str(), err->c_str());
    return 1;
  }
  if (offline) {
    if (!report.unknown_keys.empty()) {
      std::fprintf(stderr, "lionet: warning: %zu unknown config key(s) ignored: %s\n", report.unknown_keys.size(),
                   describe_unknown(report.unknown_keys).c_str());
    }
    if (args.print) std::fputs(registry.dump().c_str(), stdout);
    if (args.check) {
      std::fprintf(args.print ? stderr : stdout, "lionet: configuration OK (%zu file(s) from %s)\n",
                   report.sources.size(), args.conf.c_str());
    }
    return 0;
  }

  try {
    log::configure(app::log_options(cfg));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lionet: cannot set up logging: %s\n", e.what());
    return 1;
  }
  auto lg = log::get("app");
  auto reconfigure_log = [&cfg, lg](auto&&, auto&&) {
    try {
      log::configure(app::log_options(cfg));
      LIONET_LOG_INFO(lg, "logging reconfigured");
    } catch (const std::exception& e) {
      LIONET_LOG_ERROR(lg, "logging not reconfigured: {}", e.what());
    }
  };
  cfg.log_loggers->add_listener(reconfigure_log);
  cfg.log_async_queue_size->add_listener(reconfigure_log);
  // The regular-file options are relaxed atomics read per call: they apply on reload.
  auto reconfigure_files = [&cfg](auto&&, auto&&) {
    lionet::hook::configure_regular_files(lionet::app::regular_file_options(cfg));
  };
  cfg.hook_file_nowait_max->add_listener(reconfigure_files);
  cfg.hook_file_inline_write_max->add_listener(reconfigure_files);
  cfg.hook_file_sync_offload->add_listener(reconfigure_files);
  // fiber.check_os_locks: a relaxed global read by the lock hooks; applies on reload.
  auto reconfigure_os_locks = [&cfg](auto&&, auto&&) {
    lionet::OsLockCheck mode = lionet::OsLockCheck::kLog;
    if (lionet::parse_os_lock_check(cfg.fiber_check_os_locks->value().c_str(), mode)) lionet::set_os_lock_check(mode);
  };
  reconfigure_os_locks(0, 0);
  cfg.fiber_check_os_locks->add_listener(reconfigure_os_locks);
  // The pools, servers and store are built once at start; app.shutdown_timeout and the log
  // apply on reload.
  warn_needs_restart(*cfg.scheduler_threads);
  warn_needs_restart(*cfg.scheduler_name);
  warn_needs_restart(*cfg.scheduler_local_queue_capacity);
  warn_needs_restart(*cfg.scheduler_idle_poll_us);
  warn_needs_restart(*cfg.fiber_stack_size);
  warn_needs_restart(*cfg.fiber_stack_cache_per_worker);
  warn_needs_restart(*cfg.fiber_max_stack_memory);
  warn_needs_restart(*cfg.fiber_stack_protection);
  warn_needs_restart(*cfg.fiber_guard_page_budget);
  warn_needs_restart(*cfg.io_backend);
  warn_needs_restart(*cfg.io_uring_entries);
  warn_needs_restart(*cfg.io_max_events);
  warn_needs_restart(*cfg.io_uring_socket_ops);
  warn_needs_restart(*cfg.io_uring_ring_per_worker);
  warn_needs_restart(*cfg.io_uring_shared_ring_ops);
  warn_needs_restart(*cfg.offload_threads);
  warn_needs_restart(*cfg.servers);
  warn_needs_restart(*cfg.workers);
  warn_needs_restart(*cfg.storage.topics);
  warn_needs_restart(*cfg.storage.data_dir);
  warn_needs_restart(*cfg.memory_trim_interval);
  warn_needs_restart(*cfg.memory_trim_after_closed);
  warn_needs_restart(*cfg.memory_arena_max);
  warn_needs_restart(*cfg.watch);

  LIONET_LOG_INFO(lg, "configuration loaded from {} ({} file(s))", args.conf, report.sources.size());
  int rc = 0;
  try {
    if (const int arenas = cfg.memory_arena_max->value(); arenas > 0) mallopt(M_ARENA_MAX, arenas);
    configure_offload(app::offload_options(cfg));
    lionet::hook::configure_regular_files(app::regular_file_options(cfg));
    const SchedulerOptions so = app::scheduler_options(cfg);
    LIONET_LOG_INFO(lg,
                    "starting scheduler '{}': threads={} stack_size={} stack_cache_per_worker={} "
                    "local_queue_capacity={} stack_protection={} max_stack_memory={}",
                    so.name, so.threads, so.stack_size, so.stack_cache_per_worker, so.local_queue_capacity,
                    to_string(so.stack_protection), so.max_stack_memory);
    app::RuntimeHooks hooks{.inherited = &inherited};
    if (upgrade_channel.active()) {
      hooks.before_store = [&] {
        upgrade_channel.release_store(cfg.shutdown_timeout->value() + std::chrono::seconds(30));
      };
    }
    app::Runtime runtime(cfg, std::move(hooks));
    if (!inherited.empty()) {
      LIONET_LOG_INFO(lg, "{}: {} listening socket(s) handed to this process", inherited.source(),
                      inherited.fds().size());
      for (const auto& line : inherited.close_unclaimed())
        LIONET_LOG_WARN(lg, "{}: no server listens on {}: closed it", inherited.source(), line);
    }
    runtime.start();
    for (const auto& line : runtime.describe()) LIONET_LOG_INFO(lg, "server {}", line);
    std::unique_ptr<app::Watch> watch;  // after runtime: stopped before it goes
    if (cfg.watch->value()) watch = std::make_unique<app::Watch>(runtime, args.conf);
    Scheduler& main_pool = runtime.main_scheduler();
    main_pool
        .spawn([&] {
          LIONET_LOG_INFO(lg,
                          "scheduler '{}' running with {} worker(s), io backend {}; SIGINT/SIGTERM stop, SIGHUP "
                          "reloads {}, SIGQUIT dumps fibers",
                          so.name, main_pool.threads(), runtime.main_io_backend(), args.conf);
        })
        .join();
    app::ServiceNotify notify;
    if (!upgrade_channel.active()) notify.ready();  // else the old process passes MAINPID on
    upgrade_channel.ready();
    notify.start_heartbeat(
        main_pool, [&runtime, last = runtime.load(), at = std::chrono::steady_clock::now()]() mutable {
          const auto now = std::chrono::steady_clock::now();
          const auto l = runtime.load();
          const double secs = std::chrono::duration<double>(now - at).count();
          const double rate = secs > 0 ? static_cast<double>(l.requests - last.requests) / secs : 0.0;
          last = l;
          at = now;
          return fmt::format("{} connection(s), {:.1f} requests/s", l.connections, rate);
        });
    Supervision sv{notify, upgrade};
    rc = serve_signals(runtime, registry, cfg, args.conf, signals, sv);
  } catch (const app::StartupError& e) {
    LIONET_LOG_CRITICAL(lg, "cannot start: {}", e.what());
    std::fprintf(stderr, "lionet: cannot start: %s\n", e.what());
    rc = 1;
  } catch (const std::exception& e) {
    LIONET_LOG_CRITICAL(lg, "fatal: {}", e.what());
    std::fprintf(stderr, "lionet: fatal: %s\n", e.what());
    rc = 1;
  }
  log::shutdown();
  return rc;
}
