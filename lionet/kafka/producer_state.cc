// lionet/kafka/producer_state.cc: ProducerState (see producer_state.h).
#include "lionet/kafka/producer_state.h"

#include <functional>

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
  auto log = detail::open_internal_log(store, kProducerStateTopic);
  if (!log) return log.error();
  std::unique_ptr<ProducerState> s(new ProducerState(**log));
  if (auto r = s->replay(); !r) return r.error();
  return s;
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
  std::size_t learned = 0;
  for (const std::string& topic : store.list_topics()) {
    if (topic.compare(0, 7, "__kafka") == 0) continue;  // this layer's own state
    for (uint32_t p = 0;; ++p) {
      auto log = store.find(topic, p);
      if (!log) break;
      const int64_t end = (*log)->end_offset();
      if (end <= (*log)->start_offset()) continue;
      auto st = (*log)->read_stored(end - 1, 1);  // the partition's last batch
      if (!st || st->format != storage::BatchFormat::kKafka || st->bytes < 61) continue;
      char h[61];
      auto n = st->file->pread(h, sizeof h, st->position);
      if (!n || *n != sizeof h) continue;
      Reader in(std::string_view(h, sizeof h));
      in.raw(43);  // base offset .. max timestamp
      const int64_t pid = in.i64();
      const int16_t epoch = in.i16();
      const int32_t first = in.i32();
      const int32_t count = in.i32();
      if (!in.ok() || pid < 0 || count <= 0) continue;
      const int64_t last64 = static_cast<int64_t>(first) + count - 1;  // sequences wrap at INT32_MAX to 0
      const auto last = static_cast<int32_t>(last64 > INT32_MAX ? last64 - INT32_MAX - 1 : last64);
      const auto partition = static_cast<int32_t>(p);
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (pid >= next_id_) continue;  // not an id this broker handed out
        const auto it = entries_.find(KeyView(pid, topic, partition));
        if (it != entries_.end()) {
          if (it->second.epoch > epoch) continue;
          bool known = false;
          for (const Batch& b : it->second.batches) known |= b.base_offset == st->first_offset;
          if (known) continue;
        }
      }
      if (auto r = record(topic, partition, pid, epoch, first, last, st->first_offset); !r) return r.error();
      learned++;
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
  const std::size_t h = std::hash<std::string_view>{}(topic) * 31 + static_cast<std::size_t>(partition);
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
