// lionet/app/config_binding.cc: config vars of the lionet binary and their mapping onto
// SchedulerOptions and log::LogOptions. Defaults come from the Options structs themselves, so
// the two cannot drift apart.
#include "lionet/app/config_binding.h"

#include <set>
#include <string_view>
#include <utility>

#include "lionet/config/fields.h"

namespace lionet::app {
namespace {
bool power_of_two(std::size_t v) { return v != 0 && (v & (v - 1)) == 0; }

// The var's one_of() check has already limited the spellings.
StackProtection parse_stack_protection(const std::string& s) {
  if (s == "guard_region") return StackProtection::kGuardRegion;
  if (s == "guard_page") return StackProtection::kGuardPage;
  if (s == "canary") return StackProtection::kCanary;
  return StackProtection::kAuto;
}

std::optional<std::string> check_loggers(const std::vector<log::LoggerOptions>& loggers) {
  std::set<std::string> names;
  for (const auto& l : loggers) {
    if (l.name.empty()) return "every logger needs a name";
    if (!names.insert(l.name).second) return "logger '" + l.name + "' is listed twice";
    for (const auto& s : l.sinks) {
      if (s.type == log::SinkOptions::Type::kRotatingFile && s.path.empty()) {
        return "logger '" + l.name + "': a rotating_file sink needs a path";
      }
      if (s.type == log::SinkOptions::Type::kRotatingFile && s.max_size == 0) {
        return "logger '" + l.name + "': a rotating_file sink needs max_size > 0";
      }
    }
  }
  return std::nullopt;
}
}  // namespace

AppConfig define_config(config::Registry& r) {
  const SchedulerOptions sd;
  const log::LogOptions ld;
  AppConfig c;
  c.scheduler_threads =
      r.define<int>("scheduler.threads", sd.threads, "Worker threads of the fiber scheduler; 0 = one per CPU.",
                    config::range(0, 1024));
  c.scheduler_name =
      r.define<std::string>("scheduler.name", sd.name, "Scheduler name, used in thread names (<name>-w<i>) and logs.",
                            config::check([](const std::string& s) { return !s.empty() && s.size() <= 12; },
                                          "must be 1 to 12 characters (Linux thread names hold 15)"));
  c.scheduler_local_queue_capacity =
      r.define<std::size_t>("scheduler.local_queue_capacity", sd.local_queue_capacity,
                            "Capacity of each worker's stealable run queue (a power of two); overflow stays with the "
                            "worker and is shared when another worker idles.",
                            config::all(config::range(std::size_t{2}, std::size_t{1} << 20),
                                        config::check(power_of_two, "must be a power of two")));
  c.scheduler_idle_poll_us = r.define<uint32_t>(
      "scheduler.idle_poll_us",
      static_cast<uint32_t>(std::chrono::duration_cast<std::chrono::microseconds>(sd.idle_poll).count()),
      "A worker out of work keeps polling for IO and fibers this long (us) before it sleeps: replies arriving "
      "meanwhile skip a sleep and a cross-CPU wake-up; costs up to this much CPU each time it runs dry; only when "
      "workers do not outnumber CPUs. 0 = sleep at once.",
      config::range(uint32_t{0}, uint32_t{10000}));
  c.fiber_stack_size = r.define<std::size_t>(
      "fiber.stack_size", sd.stack_size,
      "Usable stack bytes per fiber (rounded up to pages, plus a guard page); virtual until touched.",
      config::range(std::size_t{16} * 1024, std::size_t{64} * 1024 * 1024));
  c.fiber_stack_cache_per_worker =
      r.define<std::size_t>("fiber.stack_cache_per_worker", sd.stack_cache_per_worker,
                            "Fiber stacks each worker keeps for reuse before returning them to the shared pool.",
                            config::range(std::size_t{0}, std::size_t{1} << 16));
  c.fiber_max_stack_memory = r.define<std::size_t>(
      "fiber.max_stack_memory", sd.max_stack_memory,
      "Address space reserved for fiber stacks at most, per pool (bytes, virtual; 0 = no limit). Past it a "
      "new connection's fiber cannot start and the connection is closed (logged once per second).",
      config::check([](std::size_t v) { return v == 0 || v >= 64 * 1024; }, "must be 0 (no limit) or at least 65536"));
  c.fiber_stack_protection = r.define<std::string>(
      "fiber.stack_protection", to_string(sd.stack_protection),
      "How stack overflow is caught: auto (guard pages without a mapping each on Linux >= 6.13, else guard "
      "pages up to fiber.guard_page_budget and canaries beyond), guard_region, guard_page, canary.",
      config::one_of({"auto", "guard_region", "guard_page", "canary"}));
  c.fiber_check_os_locks = r.define<std::string>(
      "fiber.check_os_locks", "log",
      "A fiber that reaches a scheduling point (park, yield, hooked wait) holding a pthread mutex (std::mutex "
      "included): off, log (a warning with the stack once per call site, lionet_fiber_os_locks_held_at_switch_total), "
      "abort.",
      config::one_of({"off", "log", "abort"}));
  c.fiber_guard_page_budget = r.define<std::size_t>(
      "fiber.guard_page_budget", sd.stack_guard_page_budget,
      "Stacks given an mprotect'ed guard page (2 kernel mappings each) where guard regions are unavailable; "
      "later stacks get a canary checked at every switch.",
      config::range(std::size_t{0}, std::size_t{1} << 20));
  log::LoggerOptions root;
  root.name = "root";
  c.log_loggers = r.define<std::vector<log::LoggerOptions>>(
      "log.loggers", {root},
      "Loggers: name, level, pattern, async, flush_level, sinks (stdout | stderr | rotating_file).", check_loggers);
  c.log_async_queue_size = r.define<std::size_t>("log.async_queue_size", ld.async_queue_size,
                                                 "Messages each async logger queues (callers block when it is full).",
                                                 config::range(std::size_t{64}, std::size_t{1} << 22));
  const IOManagerOptions id;
  c.io_backend = r.define<std::string>(
      "io.backend", id.backend,
      "IO reactor of every worker pool: auto (epoll on Linux), epoll or io_uring (falls back to auto, with one "
      "log line, where io_uring is unavailable).",
      config::one_of({"auto", "epoll", "io_uring"}));
  c.io_uring_entries = r.define<unsigned>("io.uring_entries", id.uring_entries, "io_uring submission queue entries.",
                                          config::range(8u, 32768u));
  c.io_uring_socket_ops = r.define<bool>(
      "io.uring_socket_ops", id.uring_socket_ops,
      "With io_uring: socket reads, blocked writes, accepts and connects are completion-based operations (the "
      "kernel performs the call); false: io_uring only reports readiness, as epoll.");
  c.io_uring_ring_per_worker = r.define<bool>(
      "io.uring_ring_per_worker", id.uring_ring_per_worker,
      "With io_uring and several workers: one single-issuer ring per worker (Linux 6.1+), each worker submitting "
      "to, polling and sleeping in its own, with the completion-based socket calls; false: the workers share one "
      "ring.");
  c.io_uring_shared_ring_ops = r.define<bool>(
      "io.uring_shared_ring_ops", id.uring_shared_ring_ops,
      "With io_uring and several workers sharing one ring (io.uring_ring_per_worker false, or a kernel without "
      "single-issuer rings): use the completion-based socket calls there too (measured no faster than readiness "
      "on a shared ring, so off by default).");
  c.io_max_events = r.define<int>("io.max_events", id.max_events, "Most events taken from the kernel per wait.",
                                  config::range(1, 65536));
  const OffloadOptions od;
  c.offload_threads =
      r.define<int>("offload.threads", od.threads,
                    "Threads of the blocking-call pool (lionet::offload, hooked getaddrinfo).", config::range(1, 1024));
  const hook::RegularFileOptions hd;
  c.hook_file_nowait_max = r.define<std::size_t>(
      "hook.file_nowait_max", hd.nowait_max,
      "Regular files in fibers (storage, static files): the largest buffered read or write the hooks try on the "
      "worker with RWF_NOWAIT before sending it to the offload pool (bytes).",
      config::range(std::size_t{0}, std::size_t{64} << 20));
  c.hook_file_inline_write_max = r.define<std::size_t>(
      "hook.file_inline_write_max", hd.inline_write_max,
      "The largest buffered write done in place on the worker where the filesystem has no RWF_NOWAIT writes (ext4): "
      "a page-cache copy; larger ones go to the offload pool. 0 offloads every such write (bytes).",
      config::range(std::size_t{0}, std::size_t{64} << 20));
  c.hook_file_sync_offload = r.define<bool>(
      "hook.file_sync_offload", hd.offload_sync,
      "fsync/fdatasync of regular files from fibers (the store's every_batch syncs) run on the offload pool, so "
      "the worker serves other connections meanwhile and appenders share syncs; false keeps them on the worker "
      "(a lone writer's latency without the pool hand-off).");
  c.workers = r.define<std::map<std::string, WorkerPoolConfig>>(
      "workers", {},
      "Named worker pools (schedulers) besides 'main': threads, stack_size, max_stack_memory, io_backend; "
      "servers pick one by name.",
      config::check([](const std::map<std::string, WorkerPoolConfig>& m) { return !m.contains("main"); },
                    "'main' is the scheduler.* pool; give other pools other names"));
  c.servers = r.define<std::vector<ServerConfig>>(
      "servers", {},
      "Servers to run: name, type (http | https | echo | syslog | kafka), listen, reuse_port, workers, limits "
      "(max_connections, max_connections_per_address, ...), allow / deny, "
      "timeouts (header, body, idle, handler_timeout), cancel_on_disconnect, tls (verify_client and client_ca for "
      "client certificates), access_log, routes (each a path and/or a name, a type and its keys: timeout, allow / "
      "deny, rate_limit, auth (basic, bearer or client_cert, the brute-force brake); static's root, mode, "
      "try_files, ...; proxy's upstreams, timeouts, ...; debug's, debug_fibers' and pprof's allow_remote, pprof's "
      "max_seconds); syslog: topic, key, batch_max, linger, max_message_size, recv_buffer; "
      "kafka: advertised_host, advertised_port, max_request_size, group_min_session_timeout, "
      "group_max_session_timeout, offset_metadata_max_bytes, tls (SSL / SASL_SSL), sasl (mechanisms, users, "
      "allow_plaintext_sasl, acls: user -> produce, consume, groups).");
  c.shutdown_timeout = r.define<std::chrono::milliseconds>(
      "app.shutdown_timeout", std::chrono::milliseconds(10000),
      "On SIGTERM/SIGINT: how long in-flight requests may run after the listeners closed.",
      config::range(std::chrono::milliseconds(0), std::chrono::milliseconds(3600000)));
  c.watch = r.define<bool>(
      "watch", false,
      "Follow changes on disk while running: the configuration reloads as on SIGHUP, https servers' certificate and "
      "key files load for new connections, static files leave the caches at once, routes' credential files (auth) "
      "load again. Read at start.");
  c.memory_trim_interval = r.define<std::chrono::milliseconds>(
      "memory.trim_interval", std::chrono::milliseconds(5000),
      "How often to look whether connections dropped; after a drop (memory.trim_after_closed) the "
      "allocator's free memory goes back to the system (malloc_trim). 0: never.",
      config::range(std::chrono::milliseconds(0), std::chrono::milliseconds(3600000)));
  c.memory_trim_after_closed = r.define<std::size_t>(
      "memory.trim_after_closed", 1000,
      "Connections closed since the last trim, with at most half of the peak still open, that trigger one.",
      config::range(std::size_t{1}, std::size_t{1000000000}));
  c.memory_arena_max =
      r.define<int>("memory.arena_max", 0,
                    "glibc malloc arenas at most (M_ARENA_MAX; 0: glibc's default, 8 per CPU). Fewer arenas keep less "
                    "memory after bursts, at some contention between threads that allocate at once.",
                    config::range(0, 1024));
  const FiberDumpOptions fd;
  c.debug_fibers_max_per_group =
      r.define<std::size_t>("debug.fibers.max_per_group", fd.max_per_group,
                            "Fiber dump (SIGQUIT, debug_fibers routes): fibers listed per group; the rest are counted.",
                            config::range(std::size_t{1}, std::size_t{1000000}));
  c.debug_fibers_max_fibers =
      r.define<std::size_t>("debug.fibers.max_fibers", fd.max_fibers,
                            "Fiber dump: fibers copied per scheduler at most (bounds the dump's memory and time).",
                            config::range(std::size_t{1}, std::size_t{100000000}));
  c.debug_fibers_stacks = r.define<bool>(
      "debug.fibers.stacks", fd.stacks,
      "Fiber dump: each parked or runnable fiber's call stack (function, file:line where debug info exists), "
      "fibers grouped by it; false lists fibers without stacks.");
  c.debug_fibers_max_frames = r.define<std::size_t>("debug.fibers.max_frames", fd.max_frames,
                                                    "Fiber dump: frames per stack at most (the innermost are kept).",
                                                    config::range(std::size_t{1}, std::size_t{256}));
  c.storage = define_storage_config(r);
  return c;
}

FiberDumpOptions fiber_dump_options(const AppConfig& c) {
  FiberDumpOptions o;
  o.max_per_group = c.debug_fibers_max_per_group->value();
  o.max_fibers = c.debug_fibers_max_fibers->value();
  o.stacks = c.debug_fibers_stacks->value();
  o.max_frames = c.debug_fibers_max_frames->value();
  return o;
}

std::optional<std::string> check_config(const AppConfig& c) {
  return check_servers(c.servers->value(), c.workers->value());
}

SchedulerOptions pool_scheduler_options(const AppConfig& c, const std::string& name) {
  SchedulerOptions o = scheduler_options(c);
  if (name == "main") return o;
  const auto pools = c.workers->value();
  auto it = pools.find(name);
  if (it == pools.end()) return o;
  if (it->second.threads) o.threads = *it->second.threads;
  if (it->second.stack_size) o.stack_size = *it->second.stack_size;
  if (it->second.max_stack_memory) o.max_stack_memory = *it->second.max_stack_memory;
  o.name = name.substr(0, 12);
  return o;
}

IOManagerOptions pool_io_options(const AppConfig& c, const std::string& name) {
  IOManagerOptions o = io_options(c);
  const auto pools = c.workers->value();
  if (auto it = pools.find(name); it != pools.end() && it->second.io_backend) o.backend = *it->second.io_backend;
  return o;
}

IOManagerOptions io_options(const AppConfig& c) {
  IOManagerOptions o;
  o.backend = c.io_backend->value();
  o.uring_entries = c.io_uring_entries->value();
  o.max_events = c.io_max_events->value();
  o.uring_socket_ops = c.io_uring_socket_ops->value();
  o.uring_ring_per_worker = c.io_uring_ring_per_worker->value();
  o.uring_shared_ring_ops = c.io_uring_shared_ring_ops->value();
  return o;
}

hook::RegularFileOptions regular_file_options(const AppConfig& c) {
  hook::RegularFileOptions o;
  o.nowait_max = c.hook_file_nowait_max->value();
  o.inline_write_max = c.hook_file_inline_write_max->value();
  o.offload_sync = c.hook_file_sync_offload->value();
  return o;
}

OffloadOptions offload_options(const AppConfig& c) {
  OffloadOptions o;
  o.threads = c.offload_threads->value();
  return o;
}

SchedulerOptions scheduler_options(const AppConfig& c) {
  SchedulerOptions o;
  o.threads = c.scheduler_threads->value();
  o.name = c.scheduler_name->value();
  o.local_queue_capacity = c.scheduler_local_queue_capacity->value();
  o.idle_poll = std::chrono::microseconds(c.scheduler_idle_poll_us->value());
  o.stack_size = c.fiber_stack_size->value();
  o.stack_cache_per_worker = c.fiber_stack_cache_per_worker->value();
  o.max_stack_memory = c.fiber_max_stack_memory->value();
  o.stack_protection = parse_stack_protection(c.fiber_stack_protection->value());
  o.stack_guard_page_budget = c.fiber_guard_page_budget->value();
  return o;
}

log::LogOptions log_options(const AppConfig& c) {
  log::LogOptions o;
  o.loggers = c.log_loggers->value();
  o.async_queue_size = c.log_async_queue_size->value();
  return o;
}
}  // namespace lionet::app

namespace lionet::config {
using log::Level;
using log::LoggerOptions;
using log::SinkOptions;

Level ConfigTraits<Level>::from_yaml(const YAML::Node& n) {
  std::string s = decode<std::string>(n);
  auto l = log::parse_level(s);
  if (!l) conversion_error(n, "expected a log level (trace, debug, info, warn, error, critical, off), got '" + s + "'");
  return *l;
}
YAML::Node ConfigTraits<Level>::to_yaml(const Level& l) { return YAML::Node(std::string(log::to_string(l))); }

template <>
struct ConfigTraits<SinkOptions::Type> {
  static constexpr std::pair<SinkOptions::Type, std::string_view> kNames[] = {
      {SinkOptions::Type::kStdout, "stdout"},
      {SinkOptions::Type::kStderr, "stderr"},
      {SinkOptions::Type::kRotatingFile, "rotating_file"},
  };
  static SinkOptions::Type from_yaml(const YAML::Node& n) {
    const std::string type = decode<std::string>(n);
    for (const auto& [t, name] : kNames)
      if (name == type) return t;
    conversion_error(n, "expected a sink type (stdout, stderr, rotating_file), got '" + type + "'");
  }
  static YAML::Node to_yaml(SinkOptions::Type type) {
    for (const auto& [t, name] : kNames)
      if (t == type) return YAML::Node(std::string(name));
    return YAML::Node();
  }
};

namespace {
// A sink's keys, in the order they are written: its type, the file's (rotating_file only), its
// level.
const Fields<SinkOptions> kSinkFields = {{"type", &SinkOptions::type, kRequired}};
const Fields<SinkOptions> kRotatingFileSinkFields = {
    {"path", &SinkOptions::path},
    {"max_size", &SinkOptions::max_size},
    {"max_files", &SinkOptions::max_files},
};
const Fields<SinkOptions> kSinkLevelFields = {{"level", &SinkOptions::level}};

const Fields<LoggerOptions> kLoggerFields = {
    {"name", &LoggerOptions::name, kRequired},    {"level", &LoggerOptions::level},
    {"pattern", &LoggerOptions::pattern},         {"async", &LoggerOptions::async},
    {"flush_level", &LoggerOptions::flush_level}, {"sinks", &LoggerOptions::sinks},
};
}  // namespace

SinkOptions ConfigTraits<SinkOptions>::from_yaml(const YAML::Node& n) {
  expect_keys(n, kSinkFields, kRotatingFileSinkFields, kSinkLevelFields);
  SinkOptions s;
  for (const auto* fields : {&kSinkFields, &kRotatingFileSinkFields, &kSinkLevelFields}) fields->read(n, s);
  if (s.type == SinkOptions::Type::kRotatingFile && s.path.empty()) {
    conversion_error(n, "a rotating_file sink needs a path");
  }
  return s;
}
YAML::Node ConfigTraits<SinkOptions>::to_yaml(const SinkOptions& s) {
  YAML::Node n = kSinkFields.encode(s);
  if (s.type == SinkOptions::Type::kRotatingFile) kRotatingFileSinkFields.write(n, s);
  kSinkLevelFields.write(n, s);
  return n;
}

LoggerOptions ConfigTraits<LoggerOptions>::from_yaml(const YAML::Node& n) { return kLoggerFields.decode(n); }
YAML::Node ConfigTraits<LoggerOptions>::to_yaml(const LoggerOptions& o) { return kLoggerFields.encode(o); }
}  // namespace lionet::config
