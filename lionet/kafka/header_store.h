// lionet/kafka/header_store.h: Kafka record headers of logs in the store's older kLionet
// layout, which cannot hold them (the default kKafka layout keeps them inside the stored
// batch, and none of this is used for it), kept beside them: one record per headed Kafka record in the internal topic `__kafka_headers`
// (value: topic, partition, offset, the header section as the producer sent it), and in memory
// an index (topic, partition, offset) -> offset in that topic, rebuilt by a scan at open.
//
// Owns: the side topic, the index, and the "pending" mark that keeps a Fetch from returning a
// record before its headers are recorded. Must not: append client records (the broker does,
// between begin() and commit()).
//
// Protocol for one produced batch with headers (the broker, under lock_for(topic, partition)):
//   1. begin(t, p, log.end_offset())   pending_from = that offset (seq_cst store)
//   2. log.append_batch(...)            publishes end_offset with release (storage/log.h)
//   3. commit(t, p, base, records)      side records appended, index updated under mu_, then
//                                       pending_from = INT64_MAX (release)   [or abort(t, p)]
// A reader that saw a record of step 2 (acquired end_offset) loads pending_from after it
// (visible_end()) and so sees step 1's value or step 3's; it drops records at or past it (they
// come with the next Fetch), or, having seen step 3's, finds the index entries under mu_.
// Appends from elsewhere (HTTP) between 1 and 2 only make the cut more conservative.
//
// Costs, stated plainly: batches with headers are appended one at a time per partition
// (the lock spans both appends, so they do not share an fdatasync with each other); about 60
// bytes of index memory per headed record (entries below the log's start offset are pruned
// as records are added); the side topic is scanned whole at open. A crash between steps 2 and
// 3 loses that batch's headers, never its records. Consumers over HTTP do not see headers.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "lionet/base/result.h"
#include "lionet/kafka/detail/internal_topic.h"
#include "lionet/kafka/record_batch.h"
#include "lionet/storage/fwd.h"
#include "lionet/sync/mutex.h"

namespace lionet::kafka {

inline constexpr std::string_view kHeaderTopic = "__kafka_headers";

class HeaderStore {
 public:
  static Result<std::unique_ptr<HeaderStore>> open(storage::Store& store);

  lionet::Mutex& lock_for(std::string_view topic, int32_t partition) noexcept;
  // Steps 1 and 3 of the protocol above (under lock_for). commit() takes the decoded records
  // of the batch appended at base_offset; only those with headers are recorded.
  void begin(std::string_view topic, int32_t partition, int64_t end_offset);
  Result<void> commit(std::string_view topic, int32_t partition, int64_t base_offset,
                      std::span<const DecodedRecord> records, int64_t log_start_offset);
  void abort(std::string_view topic, int32_t partition);

  // Records at or past this offset may still lack their headers: leave them for later.
  int64_t visible_end(std::string_view topic, int32_t partition) const;
  // The header sections of the records in [first, last] that have headers: offset -> bytes.
  std::map<int64_t, std::string> lookup(std::string_view topic, int32_t partition, int64_t first, int64_t last) const;

 private:
  struct Partition {
    std::map<int64_t, int64_t> index;  // data offset -> side offset; under HeaderStore::mu_
    std::atomic<int64_t> pending_from{INT64_MAX};
  };
  using Key = std::pair<std::string, int32_t>;
  explicit HeaderStore(storage::Log& log) : log_(log) {}
  friend Result<std::unique_ptr<HeaderStore>> detail::open_replayed<HeaderStore>(storage::Store&, std::string_view);
  Result<void> replay();
  Partition& partition(std::string_view topic, int32_t p);  // creates; under mu_
  const Partition* find(std::string_view topic, int32_t p) const;  // under mu_

  storage::Log& log_;
  std::array<lionet::Mutex, 64> stripes_;
  mutable std::mutex mu_;  // guards parts_ (the map and each Partition's index); no IO under it
  std::map<Key, std::unique_ptr<Partition>, std::less<>> parts_;
};

}  // namespace lionet::kafka
