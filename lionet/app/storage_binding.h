// lionet/app/storage_binding.h: the `storage:` YAML section (conf/storage.yml) mapped onto
// lionet::storage::StoreOptions and the HTTP API's StorageApiOptions (ARCHITECTURE decision 10:
// storage/ reads no configuration; this is where its keys live).
//
// Keys: storage.data_dir, storage.segment_bytes, storage.segment_ms, storage.index_interval_bytes,
// storage.flush.policy / .messages / .ms, storage.retention.bytes / .ms, storage.max_batch_bytes,
// storage.preallocate_bytes,
// storage.auto_create_topics, storage.default_partitions, storage.topics (list of {name,
// partitions, segment_bytes, segment_ms, index_interval_bytes, flush: {policy, messages, ms},
// retention: {bytes, ms}}), storage.api.max_read_bytes, storage.api.default_read_bytes,
// storage.api.max_records_per_post. Defaults come from the Options structs themselves.
// Must not: open the store (app/runtime.cc does, and only when a storage route exists).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lionet/app/storage_api.h"
#include "lionet/config/registry.h"
#include "lionet/storage/store.h"

namespace lionet::app {

struct StorageConfig {
  std::shared_ptr<config::ConfigVar<std::string>> data_dir;
  std::shared_ptr<config::ConfigVar<uint64_t>> segment_bytes;
  std::shared_ptr<config::ConfigVar<int64_t>> segment_ms;
  std::shared_ptr<config::ConfigVar<uint32_t>> index_interval_bytes;
  std::shared_ptr<config::ConfigVar<std::string>> flush_policy;
  std::shared_ptr<config::ConfigVar<uint64_t>> flush_messages;
  std::shared_ptr<config::ConfigVar<int64_t>> flush_ms;
  std::shared_ptr<config::ConfigVar<int64_t>> retention_bytes;
  std::shared_ptr<config::ConfigVar<int64_t>> retention_ms;
  std::shared_ptr<config::ConfigVar<uint32_t>> max_batch_bytes;
  std::shared_ptr<config::ConfigVar<uint64_t>> preallocate_bytes;
  std::shared_ptr<config::ConfigVar<bool>> auto_create_topics;
  std::shared_ptr<config::ConfigVar<uint32_t>> default_partitions;
  std::shared_ptr<config::ConfigVar<std::vector<storage::TopicOptions>>> topics;
  std::shared_ptr<config::ConfigVar<std::size_t>> api_max_read_bytes;
  std::shared_ptr<config::ConfigVar<std::size_t>> api_default_read_bytes;
  std::shared_ptr<config::ConfigVar<std::size_t>> api_max_records_per_post;
  std::shared_ptr<config::ConfigVar<std::size_t>> api_tail_max_lag;
  std::shared_ptr<config::ConfigVar<std::size_t>> api_tail_queue_bytes;
};

// Defines the storage.* vars on `registry` (once per registry).
StorageConfig define_storage_config(config::Registry& registry);
storage::StoreOptions store_options(const StorageConfig& c);
StorageApiOptions storage_api_options(const StorageConfig& c);
}  // namespace lionet::app

LIONET_DECLARE_CONFIG_TRAITS(lionet::storage::TopicOptions);
