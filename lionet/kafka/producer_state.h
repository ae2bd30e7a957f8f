// lionet/kafka/producer_state.h: idempotent producers: producer ids handed out by
// InitProducerId, and per (producer, topic, partition) the epoch and the sequence numbers of
// the last five batches appended, so a retried batch is acknowledged again instead of appended
// twice and a gap is refused (OUT_OF_ORDER_SEQUENCE_NUMBER), as Kafka's ProducerStateManager.
//
// Owns: the state, its persistence in the store's internal topic `__kafka_producers` (one
// partition; one record per id handed out and per idempotent batch appended, replayed at
// open, so ids never repeat and sequences survive a restart and kill -9), and the per-partition
// locks that make check + append + record one step. Must not: append client records (the
// broker does, between check() and record()).
//
// Crash window: the state record is appended after the batch it describes (the batch's offset
// is only known then), so a crash between the two appends would forget that batch's sequence
// numbers and the client's retry of it (it never got the acknowledgement) would be appended
// again. The stored batch carries its producer id, epoch and sequence (the store keeps Kafka's
// batches as sent), so at open recover_tails() reads each partition's batches after the newest
// one the state knows and records what the crash lost: no duplicate. (A partition in the store's older kLionet layout has no
// producer fields: there one duplicate per partition per crash remains possible.) The topic
// grows by about 60 bytes per idempotent batch (retention applies to it like to any topic;
// there is no compaction yet).
//
// Concurrency: every method may be called from any fiber. lock_for() returns a fiber Mutex
// (one of 64 stripes by topic and partition) held by the caller across check(), the append and
// record(); the tables are guarded by a std::mutex held for no IO and no parking.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "lionet/base/result.h"
#include "lionet/kafka/detail/internal_topic.h"
#include "lionet/kafka/protocol.h"
#include "lionet/storage/fwd.h"
#include "lionet/sync/mutex.h"

namespace lionet::kafka {

inline constexpr std::string_view kProducerStateTopic = "__kafka_producers";

class ProducerState {
 public:
  // Opens (creating it if missing) and replays the state topic. Errors: the store's.
  static Result<std::unique_ptr<ProducerState>> open(storage::Store& store);

  // After open, before any Produce: records every idempotent producer's stored batch (kKafka
  // layout) that the state does not know (a crash came between its append and record()).
  // check/append/record run under one lock per partition, so such a batch is newer than every
  // batch the state knows in its partition (appends without that lock, from non-idempotent
  // producers or the HTTP API, may follow it): each partition is read from past the newest
  // known batch, or, when the state knows none there, from its active segment's start (its
  // bytes are read: a 1 GiB active segment costs what recovery's scan of it does).
  // Returns how many.
  Result<std::size_t> recover_tails(storage::Store& store);

  // A new producer id (epoch 0), recorded before it is returned.
  Result<int64_t> allocate();

  struct Check {
    ErrorCode error = ErrorCode::kNone;
    std::optional<int64_t> duplicate_of;  // a retried batch: its base offset, nothing to append
  };
  lionet::Mutex& lock_for(std::string_view topic, int32_t partition) noexcept;
  // Under lock_for(topic, partition): may a batch (first_seq..last_seq) of pid/epoch be appended?
  Check check(std::string_view topic, int32_t partition, int64_t pid, int16_t epoch, int32_t first_seq,
              int32_t last_seq);
  // Under the same lock, after the append: remembers (and records) the batch at base_offset.
  Result<void> record(std::string_view topic, int32_t partition, int64_t pid, int16_t epoch, int32_t first_seq,
                      int32_t last_seq, int64_t base_offset);

 private:
  struct Batch {
    int32_t first_seq, last_seq;
    int64_t base_offset;
  };
  struct Entry {
    int16_t epoch = 0;
    std::deque<Batch> batches;  // the last kKeptBatches, oldest first
  };
  using Key = std::tuple<int64_t, std::string, int32_t>;
  using KeyView = std::tuple<int64_t, std::string_view, int32_t>;
  using KeyLess = detail::TupleKeyLess<Key, KeyView>;
  static constexpr std::size_t kKeptBatches = 5;  // Kafka's max.in.flight limit for idempotence

  explicit ProducerState(storage::Log& log) : log_(log) {}
  friend Result<std::unique_ptr<ProducerState>> detail::open_replayed<ProducerState>(storage::Store&, std::string_view);
  Result<void> replay();
  void apply(int64_t pid, int16_t epoch, std::string_view topic, int32_t partition, int32_t first_seq, int32_t last_seq,
             int64_t base_offset);

  storage::Log& log_;
  std::array<lionet::Mutex, 64> stripes_;
  std::mutex mu_;  // guards next_id_ and entries_
  int64_t next_id_ = 0;
  std::map<Key, Entry, KeyLess> entries_;
};

}  // namespace lionet::kafka
