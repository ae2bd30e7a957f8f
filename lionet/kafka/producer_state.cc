// lionet/kafka/producer_state.cc: ProducerState (see producer_state.h).
#include "lionet/kafka/producer_state.h"

#include <algorithm>
#include <functional>
#include <map>
#include <utility>

#include "lionet/kafka/codec.h"
#include "lionet/kafka/detail/internal_topic.h"
#include "lionet/storage/file_system.h"
#include "lionet/storage/store.h"

namespace lionet::kafka {
namespace {
constexpr int8_t kRecAlloc = 1;
constexpr int8_t kRecBatch = 2;

int32_t next_seq(int32_t s) noexcept { return s == INT32_MAX ? 0 : s + 1; }
}  // namespace

Result<std::unique_ptr<ProducerState>> ProducerState::open(storage::Store& store) {
  return detail::open_replayed<ProducerState>(store, kProducerStateTopic);
}

Result<void> ProducerState::replay() {
  return detail::for_each_record(log_, [&](const storage::RecordView& v) {
    Reader in(v.value);
    const int8_t type = in.i8();
    const int64_t pid = in.i64();
    const int16_t epoch = in.i16();
    if (!in.ok()) return;  // not ours: skipped
    next_id_ = std::max(next_id_, pid + 1);
    if (type != kRecBatch) return;
    const int32_t partition = in.i32();
    const int32_t first = in.i32();
    const int32_t last = in.i32();
    const int64_t base = in.i64();
    const std::string_view topic = in.string();
    if (in.ok()) apply(pid, epoch, topic, partition, first, last, base);
  });
}

Result<std::size_t> ProducerState::recover_tails(storage::Store& store) {
  // Per partition, the newest batch the state knows: an idempotent batch whose record a crash
  // lost is newer than every recorded one of its partition (append and record hold the
  // partition's lock, so it was the last idempotent append there; other appends may follow it).
  std::map<std::pair<std::string, int32_t>, int64_t, std::less<>> known_end;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& [key, e] : entries_) {
      if (e.batches.empty()) continue;
      int64_t& end = known_end[{std::get<1>(key), std::get<2>(key)}];
      end = std::max(end, e.batches.back().base_offset + 1);
    }
  }
  std::size_t learned = 0;
  std::string buf;
  for (const std::string& topic : store.list_topics()) {
    if (topic.compare(0, 7, "__kafka") == 0) continue;  // this layer's own state
    for (uint32_t p = 0;; ++p) {
      auto log = store.find(topic, p);
      if (!log) break;
      const auto partition = static_cast<int32_t>(p);
      // From past the newest known batch; for a partition the state knows nothing of, the
      // active segment (where a batch appended just before a crash is).
      const auto k = known_end.find(std::make_pair(topic, partition));
      int64_t offset = k != known_end.end() ? k->second : (*log)->segment_base_offsets().back();
      offset = std::max(offset, (*log)->start_offset());
      while (offset < (*log)->end_offset()) {
        auto st = (*log)->read_stored(offset, 1 << 20);
        if (!st || st->bytes == 0) break;
        if (st->format != storage::BatchFormat::kKafka) {  // an older segment: no producer fields
          const auto bases = (*log)->segment_base_offsets();
          const auto next = std::upper_bound(bases.begin(), bases.end(), offset);
          if (next == bases.end()) break;
          offset = *next;
          continue;
        }
        buf.resize(static_cast<std::size_t>(st->bytes));
        auto n = st->file->pread(buf.data(), buf.size(), st->position);
        if (!n || *n != buf.size()) break;
        for (std::size_t at = 0; at + 61 <= buf.size();) {
          Reader in(std::string_view(buf).substr(at, 61));
          const int64_t base = in.i64();
          const int32_t len = in.i32();
          in.raw(31);  // leader epoch .. max timestamp
          const int64_t pid = in.i64();
          const int16_t epoch = in.i16();
          const int32_t first = in.i32();
          const int32_t count = in.i32();
          if (!in.ok() || len < 49) break;
          at += static_cast<std::size_t>(len) + 12;
          if (pid < 0 || count <= 0) continue;
          const int64_t last64 = static_cast<int64_t>(first) + count - 1;  // sequences wrap at INT32_MAX to 0
          const auto last = static_cast<int32_t>(last64 > INT32_MAX ? last64 - INT32_MAX - 1 : last64);
          {
            std::lock_guard<std::mutex> lk(mu_);
            if (pid >= next_id_) continue;  // not an id this broker handed out
            const auto it = entries_.find(KeyView(pid, topic, partition));
            if (it != entries_.end()) {
              if (it->second.epoch > epoch) continue;
              bool known = false;
              for (const Batch& b : it->second.batches) known |= b.base_offset == base;
              if (known) continue;
            }
          }
          if (auto r = record(topic, partition, pid, epoch, first, last, base); !r) return r.error();
          learned++;
        }
        offset = st->next_offset;
      }
    }
  }
  return learned;
}

Result<int64_t> ProducerState::allocate() {
  int64_t id;
  {
    std::lock_guard<std::mutex> lk(mu_);
    id = next_id_++;
  }
  std::string v;
  Writer w(v);
  w.i8(kRecAlloc);
  w.i64(id);
  w.i16(0);
  if (auto r = log_.append(storage::Record{{}, v}); !r) return r.error();
  return id;
}

lionet::Mutex& ProducerState::lock_for(std::string_view topic, int32_t partition) noexcept {
  const std::size_t h = std::hash<std::string_view>{}(topic)*31 + static_cast<std::size_t>(partition);
  return stripes_[h % stripes_.size()];
}

ProducerState::Check ProducerState::check(std::string_view topic, int32_t partition, int64_t pid, int16_t epoch,
                                          int32_t first_seq, int32_t last_seq) {
  std::lock_guard<std::mutex> lk(mu_);
  if (pid < 0 || pid >= next_id_) return {ErrorCode::kUnknownProducerId, {}};
  const auto it = entries_.find(KeyView(pid, topic, partition));
  if (it == entries_.end() || epoch > it->second.epoch) {
    if (first_seq == 0) return {};
    return {ErrorCode::kOutOfOrderSequenceNumber, {}};
  }
  const Entry& e = it->second;
  if (epoch < e.epoch) return {ErrorCode::kInvalidProducerEpoch, {}};
  for (const Batch& b : e.batches)
    if (b.first_seq == first_seq && b.last_seq == last_seq) return {ErrorCode::kNone, b.base_offset};
  if (!e.batches.empty() && first_seq == next_seq(e.batches.back().last_seq)) return {};
  return {ErrorCode::kOutOfOrderSequenceNumber, {}};
}

void ProducerState::apply(int64_t pid, int16_t epoch, std::string_view topic, int32_t partition, int32_t first_seq,
                          int32_t last_seq, int64_t base_offset) {
  Entry& e = entries_[std::make_tuple(pid, std::string(topic), partition)];
  if (epoch != e.epoch) e.batches.clear();
  e.epoch = epoch;
  e.batches.push_back({first_seq, last_seq, base_offset});
  if (e.batches.size() > kKeptBatches) e.batches.pop_front();
}

Result<void> ProducerState::record(std::string_view topic, int32_t partition, int64_t pid, int16_t epoch,
                                   int32_t first_seq, int32_t last_seq, int64_t base_offset) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    apply(pid, epoch, topic, partition, first_seq, last_seq, base_offset);
  }
  std::string v;
  Writer w(v);
  w.i8(kRecBatch);
  w.i64(pid);
  w.i16(epoch);
  w.i32(partition);
  w.i32(first_seq);
  w.i32(last_seq);
  w.i64(base_offset);
  w.string(topic);
  if (auto r = log_.append(storage::Record{{}, v}); !r) return r.error();
  return {};
}

}  // namespace lionet::kafka
