// lionet/kafka/offset_store.h: consumer groups' committed offsets (what OffsetCommit writes and
// OffsetFetch reads), kept in the store's internal topic `__kafka_offsets` and in memory.
//
// Owns: the committed offset, leader epoch and metadata string of every (group, topic,
// partition); their records in `__kafka_offsets` (one partition; one record per committed
// partition: key = group, topic, partition; value = offset, leader epoch, metadata); the replay
// at open (records read in order, the latest one per key wins). Must not: check membership or
// generations (group_coordinator.h does, before commit()), or answer a commit before its
// records are appended (the store's flush policy applies: every_batch = after the fdatasync).
//
// Growth, stated plainly (the topic is not compacted):
//  - A commit appends one record per partition (about 43 bytes in the store plus the group,
//    topic and metadata), as one batch per request, except for a partition whose offset and metadata are
//    unchanged and whose latest record is still in the topic's active segment: that one is not
//    written again. So a consumer that re-commits unchanged offsets every few seconds (the Java
//    client's auto-commit does) costs one record per partition per segment roll, not per commit.
//  - Retention: the store's storage.retention.ms / .bytes apply to this topic like to any
//    (whole old segments). The latest record of a key that is still committed is re-written
//    into the active segment at its first commit after a roll, so time retention forgets only
//    the offsets of groups that stopped committing for longer than retention.ms (Kafka's
//    offsets.retention.minutes plays that part). A retention.bytes below about two segments can
//    delete a key's only record before its next commit. With the default retention (forever)
//    nothing is forgotten, and open() reads the whole topic (figure in kafka/README.md).
//  - Memory: one entry per key ever committed and not deleted (no OffsetDelete API).
//
// Concurrency: every method may run from any fiber or thread. Commits for one group must not
// run concurrently (the coordinator holds the group's lock across commit()), so the latest
// record of a key in the topic and the value in memory are the same one. The map is guarded by
// a std::mutex held for no IO.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>

#include "lionet/base/result.h"
#include "lionet/kafka/detail/internal_topic.h"
#include "lionet/storage/fwd.h"

namespace lionet::kafka {

inline constexpr std::string_view kOffsetsTopic = "__kafka_offsets";

class OffsetStore {
 public:
  struct Committed {
    int64_t offset = -1;
    int32_t leader_epoch = -1;
    std::string metadata;  // a null metadata is kept as "" (Kafka's NO_METADATA)
  };
  struct Commit {
    std::string_view topic;
    int32_t partition = 0;
    int64_t offset = 0;
    int32_t leader_epoch = -1;
    std::string_view metadata;
  };

  // Opens (creating it if missing) and replays the offsets topic. Errors: the store's.
  static Result<std::unique_ptr<OffsetStore>> open(storage::Store& store);

  // Appends the commits as one batch, then makes them visible to get()/all(). Nothing is
  // visible if the append fails. Records appended (unchanged ones skipped) are counted.
  Result<void> commit(std::string_view group, std::span<const Commit> commits);
  std::optional<Committed> get(std::string_view group, std::string_view topic, int32_t partition) const;
  // Every partition the group has committed: topic -> partition -> committed.
  std::map<std::string, std::map<int32_t, Committed>> all(std::string_view group) const;

  uint64_t records_replayed() const noexcept { return replayed_; }
  uint64_t records_written() const;

 private:
  struct Entry {
    Committed value;
    int64_t record_offset = -1;  // where its latest record is in the offsets topic
  };
  using Key = std::tuple<std::string, std::string, int32_t>;  // group, topic, partition
  using KeyView = std::tuple<std::string_view, std::string_view, int32_t>;
  using KeyLess = detail::TupleKeyLess<Key, KeyView>;

  explicit OffsetStore(storage::Log& log) : log_(log) {}
  friend Result<std::unique_ptr<OffsetStore>> detail::open_replayed<OffsetStore>(storage::Store&, std::string_view);
  Result<void> replay();

  storage::Log& log_;
  mutable std::mutex mu_;  // guards entries_ and written_; no IO under it
  std::map<Key, Entry, KeyLess> entries_;
  uint64_t replayed_ = 0;  // written once, by open()
  uint64_t written_ = 0;
};

}  // namespace lionet::kafka
