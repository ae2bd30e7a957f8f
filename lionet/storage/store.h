// lionet/storage/store.h: lionet::storage::Store, named topics with N partitions, each
// partition one Log in <data_dir>/<topic>-<partition>/ (Kafka's layout).
//
// Owns: the topic table, topic creation (from StoreOptions at open, on demand, or explicitly),
// per-topic option overrides, list/describe. Must not: read configuration (app/ maps the
// `storage:` YAML section onto StoreOptions) or hold its table lock across a Log operation
// other than opening it.
//
// Concurrency: every method may run from any fiber or thread. log() and find() take a shared
// lock for the table lookup only; creating a topic takes it exclusively (and opens/recovers the
// logs under it). Log pointers stay valid until the Store is destroyed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lionet/base/result.h"
#include "lionet/storage/log.h"
#include "lionet/storage/log_options.h"
#include "lionet/sync/shared_mutex.h"

namespace lionet::storage {

struct TopicOptions {
  std::string name{};  // YAML: storage.topics[].name ([A-Za-z0-9._-], 1..200 chars)
  uint32_t partitions = 1;  // YAML: storage.topics[].partitions (1..10000)
  // Overrides of StoreOptions::log for this topic; unset = the store-wide value.
  std::optional<uint64_t> segment_bytes{};  // YAML: storage.topics[].segment_bytes
  std::optional<int64_t> segment_ms{};  // YAML: storage.topics[].segment_ms
  std::optional<uint32_t> index_interval_bytes{};  // YAML: storage.topics[].index_interval_bytes
  std::optional<FlushPolicy> flush_policy{};  // YAML: storage.topics[].flush.policy
  std::optional<uint64_t> flush_messages{};  // YAML: storage.topics[].flush.messages
  std::optional<int64_t> flush_ms{};  // YAML: storage.topics[].flush.ms
  std::optional<int64_t> retention_bytes{};  // YAML: storage.topics[].retention.bytes
  std::optional<int64_t> retention_ms{};  // YAML: storage.topics[].retention.ms

  // `base` with this topic's overrides applied.
  LogOptions apply(const LogOptions& base) const;
  bool operator==(const TopicOptions&) const = default;
};

struct StoreOptions {
  std::string data_dir = "data";  // YAML: storage.data_dir
  // Store-wide log options: YAML storage.segment_bytes, storage.segment_ms,
  // storage.index_interval_bytes, storage.flush.policy / .messages / .ms,
  // storage.retention.bytes / .ms, storage.max_batch_bytes (see log_options.h).
  LogOptions log{};
  // YAML: storage.auto_create_topics. log() of an unknown topic creates it with
  // default_partitions partitions (a partition past that: kInvalidArgument); find() never does.
  bool auto_create_topics = true;
  uint32_t default_partitions = 1;  // YAML: storage.default_partitions
  std::vector<TopicOptions> topics{};  // YAML: storage.topics (created at open)
};

struct PartitionInfo {
  uint32_t partition = 0;
  int64_t start_offset = 0;
  int64_t end_offset = 0;
  uint64_t size_bytes = 0;
  std::size_t segments = 0;
};

struct TopicInfo {
  std::string name;
  std::string dir_pattern;  // <data_dir>/<name>-<partition>
  LogOptions options;  // effective options (fs left as configured)
  std::vector<PartitionInfo> partitions;
};

class Store {
 public:
  // Creates data_dir, opens every topic found there (<topic>-<n> directories) and every topic
  // of options.topics (configured partition counts and overrides win; partitions are never
  // removed). Errors: bad options or names (kInvalidArgument), IO errors, recovery errors,
  // EBUSY when another Store (in this or another process) has data_dir open: a Store holds an
  // exclusive flock(2) on the directory until it is destroyed, so two writers never share one.
  static Result<std::unique_ptr<Store>> open(const StoreOptions& options);
  ~Store();

  // Creates the topic or, if it exists, grows it to options.partitions (never shrinks).
  Result<void> create_topic(const TopicOptions& options);
  // The log of one partition; creates the topic on demand when auto_create_topics (for
  // writers). Unknown topic otherwise: kNotFound; partition out of range: kInvalidArgument.
  Result<Log*> log(std::string_view topic, uint32_t partition);
  // The log of one partition of an existing topic, never creating anything whatever
  // auto_create_topics says (for readers). Unknown topic: kNotFound; partition out of range:
  // kInvalidArgument.
  Result<Log*> find(std::string_view topic, uint32_t partition) const;

  std::vector<std::string> list_topics() const;  // sorted
  Result<TopicInfo> describe(std::string_view topic) const;

  Result<void> flush();  // every partition
  Result<std::size_t> enforce_retention();  // every partition; segments deleted

  const StoreOptions& options() const { return opt_; }

 private:
  struct Topic {
    TopicOptions options;
    LogOptions log_options;
    std::vector<std::unique_ptr<Log>> partitions;
  };
  explicit Store(const StoreOptions& options) : opt_(options) {}
  // Takes the directory's lock (see open()); EBUSY if held elsewhere.
  Result<void> lock_data_dir();
  Result<void> create_locked(const TopicOptions& options);
  std::string partition_dir(std::string_view topic, uint32_t p) const;

  const StoreOptions opt_;
  mutable lionet::SharedMutex mu_;  // guards topics_ (the map and each topic's partition vector)
  std::map<std::string, std::unique_ptr<Topic>, std::less<>> topics_;
  int lock_fd_ = -1;  // data_dir opened O_DIRECTORY, flock(LOCK_EX) held while the Store lives
};

// Topic names: 1..200 of [A-Za-z0-9._-], not "." or "..".
bool valid_topic_name(std::string_view name) noexcept;

}  // namespace lionet::storage
