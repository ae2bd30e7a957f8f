// lionet/app/config_binding.h: the one place where YAML keys become Options structs
// (ARCHITECTURE decision 10). Defines the config vars of the lionet binary on a Registry and
// builds SchedulerOptions / log::LogOptions from their current values.
// Must not: be included by the library (app/ is the top layer).
//
// Keys (see conf/server.yml and conf/log.yml for the commented reference):
//   scheduler.threads, scheduler.name, scheduler.local_queue_capacity,
//   fiber.stack_size, fiber.stack_cache_per_worker, fiber.max_stack_memory,
//   fiber.stack_protection, fiber.guard_page_budget,
//   log.loggers, log.async_queue_size,
//   io.backend, io.uring_entries, io.uring_socket_ops,
//   io.uring_ring_per_worker, io.uring_shared_ring_ops, io.max_events, offload.threads,
//   workers (named pools), servers (list), app.shutdown_timeout, watch,
//   debug.fibers.max_per_group, debug.fibers.max_fibers, storage.* (storage_binding.h)
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "lionet/app/server_config.h"
#include "lionet/app/storage_binding.h"
#include "lionet/config/registry.h"
#include "lionet/hook/hook.h"
#include "lionet/io/io_manager.h"
#include "lionet/log/log.h"
#include "lionet/sched/fiber_dump.h"
#include "lionet/sched/scheduler.h"
#include "lionet/sync/offload.h"

namespace lionet::app {

struct AppConfig {
  std::shared_ptr<config::ConfigVar<int>> scheduler_threads;
  std::shared_ptr<config::ConfigVar<std::string>> scheduler_name;
  std::shared_ptr<config::ConfigVar<std::size_t>> scheduler_local_queue_capacity;
  std::shared_ptr<config::ConfigVar<uint32_t>> scheduler_idle_poll_us;
  std::shared_ptr<config::ConfigVar<std::size_t>> fiber_stack_size;
  std::shared_ptr<config::ConfigVar<std::size_t>> fiber_stack_cache_per_worker;
  std::shared_ptr<config::ConfigVar<std::size_t>> fiber_max_stack_memory;
  std::shared_ptr<config::ConfigVar<std::string>> fiber_stack_protection;
  std::shared_ptr<config::ConfigVar<std::size_t>> fiber_guard_page_budget;
  std::shared_ptr<config::ConfigVar<std::vector<log::LoggerOptions>>> log_loggers;
  std::shared_ptr<config::ConfigVar<std::size_t>> log_async_queue_size;
  std::shared_ptr<config::ConfigVar<std::string>> io_backend;
  std::shared_ptr<config::ConfigVar<unsigned>> io_uring_entries;
  std::shared_ptr<config::ConfigVar<int>> io_max_events;
  std::shared_ptr<config::ConfigVar<bool>> io_uring_socket_ops;
  std::shared_ptr<config::ConfigVar<bool>> io_uring_ring_per_worker;
  std::shared_ptr<config::ConfigVar<bool>> io_uring_shared_ring_ops;
  std::shared_ptr<config::ConfigVar<int>> offload_threads;
  std::shared_ptr<config::ConfigVar<std::size_t>> hook_file_nowait_max;
  std::shared_ptr<config::ConfigVar<std::size_t>> hook_file_inline_write_max;
  std::shared_ptr<config::ConfigVar<bool>> hook_file_sync_offload;
  std::shared_ptr<config::ConfigVar<std::map<std::string, WorkerPoolConfig>>> workers;
  std::shared_ptr<config::ConfigVar<std::vector<ServerConfig>>> servers;
  std::shared_ptr<config::ConfigVar<std::chrono::milliseconds>> shutdown_timeout;
  std::shared_ptr<config::ConfigVar<bool>> watch;
  std::shared_ptr<config::ConfigVar<std::chrono::milliseconds>> memory_trim_interval;
  std::shared_ptr<config::ConfigVar<std::size_t>> memory_trim_after_closed;
  std::shared_ptr<config::ConfigVar<int>> memory_arena_max;
  std::shared_ptr<config::ConfigVar<std::size_t>> debug_fibers_max_per_group;
  std::shared_ptr<config::ConfigVar<std::size_t>> debug_fibers_max_fibers;
  std::shared_ptr<config::ConfigVar<bool>> debug_fibers_stacks;
  std::shared_ptr<config::ConfigVar<std::string>> fiber_check_os_locks;
  std::shared_ptr<config::ConfigVar<std::size_t>> debug_fibers_max_frames;
  StorageConfig storage;
};

// Defines every var of the binary on `registry` (once per registry).
AppConfig define_config(config::Registry& registry);

SchedulerOptions scheduler_options(const AppConfig& c);
log::LogOptions log_options(const AppConfig& c);
IOManagerOptions io_options(const AppConfig& c);
OffloadOptions offload_options(const AppConfig& c);
hook::RegularFileOptions regular_file_options(const AppConfig& c);
FiberDumpOptions fiber_dump_options(const AppConfig& c);
// The options of worker pool `name` ("main" = the scheduler.*/fiber.*/io.* keys; other pools
// take those as defaults for the fields they leave out).
SchedulerOptions pool_scheduler_options(const AppConfig& c, const std::string& name);
IOManagerOptions pool_io_options(const AppConfig& c, const std::string& name);
// Rules that span several keys (check_servers); nullopt when the configuration is coherent.
std::optional<std::string> check_config(const AppConfig& c);
}  // namespace lionet::app

// YAML <-> log options (used by the log.loggers var).
LIONET_DECLARE_CONFIG_TRAITS(lionet::log::Level);
LIONET_DECLARE_CONFIG_TRAITS(lionet::log::SinkOptions);
LIONET_DECLARE_CONFIG_TRAITS(lionet::log::LoggerOptions);
