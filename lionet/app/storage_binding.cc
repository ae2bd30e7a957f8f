// lionet/app/storage_binding.cc: storage.* config vars and their mapping onto StoreOptions /
// StorageApiOptions (see storage_binding.h).
#include "lionet/app/storage_binding.h"

#include <set>

#include "lionet/config/fields.h"

namespace lionet::app {
// The bounds of each key, shared by the store-wide vars and the per-topic overrides (a topic's
// override is checked exactly like the store-wide key it replaces, so storage/ never sees an
// option it would refuse at open, which could only name the topic, not the file and line).
namespace limits {
constexpr uint64_t kSegmentBytesMin = 4096, kSegmentBytesMax = uint64_t{2} << 30;
constexpr int64_t kSegmentMsMax = int64_t{1} << 50;
constexpr uint32_t kIndexIntervalMin = 64, kIndexIntervalMax = uint32_t{1} << 30;
constexpr uint64_t kFlushMessagesMax = uint64_t{1} << 40;
constexpr int64_t kFlushMsMax = int64_t{1} << 40;
constexpr int64_t kRetentionMax = int64_t{1} << 60;
constexpr uint32_t kPartitionsMax = 10000;
}  // namespace limits

namespace {
std::optional<std::string> check_topics(const std::vector<storage::TopicOptions>& topics) {
  std::set<std::string> names;
  for (const auto& t : topics) {
    if (!names.insert(t.name).second) return "topic '" + t.name + "' is listed twice";
  }
  return std::nullopt;
}
}  // namespace

StorageConfig define_storage_config(config::Registry& r) {
  const storage::StoreOptions so;
  const storage::LogOptions& lo = so.log;
  const StorageApiOptions ao;
  StorageConfig c;
  c.data_dir =
      r.define<std::string>("storage.data_dir", so.data_dir,
                            "Directory of the log store (<data_dir>/<topic>-<partition>/); created if missing.",
                            config::check([](const std::string& s) { return !s.empty(); }, "must not be empty"));
  c.segment_bytes = r.define<uint64_t>("storage.segment_bytes", lo.segment_bytes,
                                       "A segment rolls when the next batch would take it past this many bytes.",
                                       config::range(limits::kSegmentBytesMin, limits::kSegmentBytesMax));
  c.segment_ms = r.define<int64_t>("storage.segment_ms", lo.segment_ms,
                                   "Roll the active segment when its first append is this old (ms); 0 = never by age.",
                                   config::range(int64_t{0}, limits::kSegmentMsMax));
  c.index_interval_bytes = r.define<uint32_t>("storage.index_interval_bytes", lo.index_interval_bytes,
                                              "One sparse index entry per this many bytes of batches.",
                                              config::range(limits::kIndexIntervalMin, limits::kIndexIntervalMax));
  c.flush_policy = r.define<std::string>("storage.flush.policy", storage::to_string(lo.flush_policy),
                                         "When appends are fdatasync'ed before they are acknowledged: every_batch "
                                         "(survives power loss), messages, ms, none.",
                                         config::one_of({"every_batch", "messages", "ms", "none"}));
  c.flush_messages = r.define<uint64_t>("storage.flush.messages", lo.flush_messages,
                                        "Policy messages: fdatasync once this many records were appended.",
                                        config::range(uint64_t{1}, limits::kFlushMessagesMax));
  c.flush_ms = r.define<int64_t>("storage.flush.ms", lo.flush_ms,
                                 "Policy ms: fdatasync at the first append this long (ms) after the last one.",
                                 config::range(int64_t{1}, limits::kFlushMsMax));
  c.retention_bytes =
      r.define<int64_t>("storage.retention.bytes", lo.retention_bytes,
                        "Delete oldest segments while a partition stays this big without them; -1 = no limit.",
                        config::range(int64_t{-1}, limits::kRetentionMax));
  c.retention_ms = r.define<int64_t>("storage.retention.ms", lo.retention_ms,
                                     "Delete segments whose newest record is older than this (ms); -1 = forever.",
                                     config::range(int64_t{-1}, limits::kRetentionMax));
  c.max_batch_bytes = r.define<uint32_t>("storage.max_batch_bytes", lo.max_batch_bytes,
                                         "Largest batch accepted (and believed during recovery), bytes.",
                                         config::range(uint32_t{1024}, uint32_t{1} << 30));
  c.preallocate_bytes = r.define<uint64_t>(
      "storage.preallocate_bytes", lo.preallocate_bytes,
      "Active segment files are extended (fallocate) this many bytes ahead of their data, so every_batch fdatasyncs "
      "need not commit a size change (faster); costs up to this much disk per partition until the segment rolls or "
      "closes. 0 = off.",
      config::range(uint64_t{0}, uint64_t{1} << 30));
  c.auto_create_topics =
      r.define<bool>("storage.auto_create_topics", so.auto_create_topics,
                     "Create a topic on its first append, with default_partitions partitions (reads never create).");
  c.default_partitions =
      r.define<uint32_t>("storage.default_partitions", so.default_partitions, "Partitions of an auto-created topic.",
                         config::range(1u, limits::kPartitionsMax));
  c.topics = r.define<std::vector<storage::TopicOptions>>(
      "storage.topics", {},
      "Topics created at start: name, partitions, and per-topic segment_bytes, segment_ms, index_interval_bytes, "
      "flush {policy, messages, ms}, retention {bytes, ms}.",
      check_topics);
  c.api_max_read_bytes = r.define<std::size_t>("storage.api.max_read_bytes", ao.max_read_bytes,
                                               "HTTP GET of records: the largest max_bytes honoured.",
                                               config::range(std::size_t{1024}, std::size_t{1} << 30));
  c.api_default_read_bytes = r.define<std::size_t>("storage.api.default_read_bytes", ao.default_read_bytes,
                                                   "HTTP GET of records: max_bytes when the request gives none.",
                                                   config::range(std::size_t{1}, std::size_t{1} << 30));
  c.api_max_records_per_post = r.define<std::size_t>("storage.api.max_records_per_post", ao.max_records_per_post,
                                                     "HTTP POST of an ndjson batch: most records in one request.",
                                                     config::range(std::size_t{1}, std::size_t{1} << 24));
  c.api_tail_max_lag = r.define<std::size_t>(
      "storage.api.tail_max_lag", ao.tail_max_lag,
      "WebSocket live tail (GET .../partitions/{p}/ws): a client this many records behind the end is closed with 1008.",
      config::range(std::size_t{1}, std::size_t{1} << 30));
  c.api_tail_queue_bytes = r.define<std::size_t>("storage.api.tail_queue_bytes", ao.tail_queue_bytes,
                                                 "WebSocket live tail: bytes of records queued for a client at most; a "
                                                 "caught-up tail whose queue would pass it is "
                                                 "closed with 1008.",
                                                 config::range(std::size_t{1024}, std::size_t{1} << 30));
  return c;
}

storage::StoreOptions store_options(const StorageConfig& c) {
  storage::StoreOptions o;
  o.data_dir = c.data_dir->value();
  o.log.segment_bytes = c.segment_bytes->value();
  o.log.segment_ms = c.segment_ms->value();
  o.log.index_interval_bytes = c.index_interval_bytes->value();
  o.log.flush_policy = storage::parse_flush_policy(c.flush_policy->value()).value_or(storage::FlushPolicy::kEveryBatch);
  o.log.flush_messages = c.flush_messages->value();
  o.log.flush_ms = c.flush_ms->value();
  o.log.retention_bytes = c.retention_bytes->value();
  o.log.retention_ms = c.retention_ms->value();
  o.log.max_batch_bytes = c.max_batch_bytes->value();
  o.log.preallocate_bytes = c.preallocate_bytes->value();
  o.auto_create_topics = c.auto_create_topics->value();
  o.default_partitions = c.default_partitions->value();
  o.topics = c.topics->value();
  return o;
}

StorageApiOptions storage_api_options(const StorageConfig& c) {
  StorageApiOptions o;
  o.max_read_bytes = c.api_max_read_bytes->value();
  o.default_read_bytes = std::min(c.api_default_read_bytes->value(), o.max_read_bytes);
  o.max_records_per_post = c.api_max_records_per_post->value();
  o.tail_max_lag = c.api_tail_max_lag->value();
  o.tail_queue_bytes = c.api_tail_queue_bytes->value();
  return o;
}
}  // namespace lionet::app

namespace lionet::config {
// storage.topics[].flush.policy: a FlushPolicy by its name.
template <>
struct ConfigTraits<storage::FlushPolicy> {
  static storage::FlushPolicy from_yaml(const YAML::Node& n) {
    const std::string name = decode<std::string>(n);
    const auto policy = storage::parse_flush_policy(name);
    if (!policy) conversion_error(n, "must be every_batch, messages, ms or none, got '" + name + "'");
    return *policy;
  }
  static YAML::Node to_yaml(storage::FlushPolicy p) { return YAML::Node(std::string(storage::to_string(p))); }
};

namespace {
namespace limits = app::limits;
using storage::TopicOptions;

// storage.topics[]: flush and retention are sections of the topic's own overrides.
const Fields<TopicOptions> kTopicFlushFields = {
    {"policy", &TopicOptions::flush_policy},
    {"messages", &TopicOptions::flush_messages},
    {"ms", &TopicOptions::flush_ms},
};
const Fields<TopicOptions> kTopicRetentionFields = {
    {"bytes", &TopicOptions::retention_bytes},
    {"ms", &TopicOptions::retention_ms},
};
const Fields<TopicOptions> kTopicFields = {
    {"name", &TopicOptions::name, kRequired},
    {"partitions", &TopicOptions::partitions},
    {"segment_bytes", &TopicOptions::segment_bytes},
    {"segment_ms", &TopicOptions::segment_ms},
    {"index_interval_bytes", &TopicOptions::index_interval_bytes},
    {"flush", kTopicFlushFields},
    {"retention", kTopicRetentionFields},
};

[[noreturn]] void topic_field_error(const YAML::Node& n, const char* field, std::string reason) {
  const YAML::Node f = n[field];
  ConversionError e(f ? f.Mark() : n.Mark(), std::move(reason));
  e.prepend_path(std::string(".") + field);
  throw e;
}

// The same bounds as the store-wide key, for an override that is set (error at the field's line).
template <class T>
void check_bounded(const YAML::Node& n, const char* field, const std::optional<T>& value, T lo, T hi) {
  if (value && (*value < lo || *value > hi)) {
    topic_field_error(n, field, "must be in " + std::to_string(lo) + ".." + std::to_string(hi));
  }
}

// Runs check(n[name]) if present, giving its errors ".name" in their key path (so that
// "flush.ms" is not reported as "ms").
template <class F>
void nested(const YAML::Node& n, const char* name, F check) {
  const YAML::Node sub = n[name];
  if (!sub) return;
  try {
    check(sub);
  } catch (ConversionError& e) {
    e.prepend_path(std::string(".") + name);
    throw;
  }
}
}  // namespace

storage::TopicOptions ConfigTraits<storage::TopicOptions>::from_yaml(const YAML::Node& n) {
  storage::TopicOptions t = kTopicFields.decode(n);
  if (!storage::valid_topic_name(t.name)) topic_field_error(n, "name", "a topic name is 1 to 200 of [A-Za-z0-9._-]");
  if (t.partitions < 1 || t.partitions > limits::kPartitionsMax) {
    topic_field_error(n, "partitions", "must be in 1.." + std::to_string(limits::kPartitionsMax));
  }
  check_bounded(n, "segment_bytes", t.segment_bytes, limits::kSegmentBytesMin, limits::kSegmentBytesMax);
  check_bounded(n, "segment_ms", t.segment_ms, int64_t{0}, limits::kSegmentMsMax);
  check_bounded(n, "index_interval_bytes", t.index_interval_bytes, limits::kIndexIntervalMin,
                limits::kIndexIntervalMax);
  nested(n, "flush", [&](const YAML::Node& f) {
    check_bounded(f, "messages", t.flush_messages, uint64_t{1}, limits::kFlushMessagesMax);
    check_bounded(f, "ms", t.flush_ms, int64_t{1}, limits::kFlushMsMax);
  });
  nested(n, "retention", [&](const YAML::Node& r) {
    check_bounded(r, "bytes", t.retention_bytes, int64_t{-1}, limits::kRetentionMax);
    check_bounded(r, "ms", t.retention_ms, int64_t{-1}, limits::kRetentionMax);
  });
  return t;
}

YAML::Node ConfigTraits<storage::TopicOptions>::to_yaml(const storage::TopicOptions& t) {
  return kTopicFields.encode(t);
}
}  // namespace lionet::config
