// lionet/kafka/header_store.cc: HeaderStore (see header_store.h).
#include "lionet/kafka/header_store.h"

#include <functional>
#include <vector>

#include "lionet/kafka/codec.h"
#include "lionet/kafka/detail/internal_topic.h"
#include "lionet/storage/store.h"

namespace lionet::kafka {
namespace {
struct SideRecord {
  std::string_view topic;
  int32_t partition = 0;
  int64_t offset = 0;
  std::string_view headers;
};
bool parse(std::string_view v, SideRecord& s) {
  Reader r(v);
  s.partition = r.i32();
  s.offset = r.i64();
  s.topic = r.string();
  s.headers = r.raw(r.remaining());
  return r.ok();
}
}  // namespace

Result<std::unique_ptr<HeaderStore>> HeaderStore::open(storage::Store& store) {
  return detail::open_replayed<HeaderStore>(store, kHeaderTopic);
}

Result<void> HeaderStore::replay() {
  std::lock_guard<std::mutex> lk(mu_);
  return detail::for_each_record(log_, [&](const storage::RecordView& v) {
    SideRecord s;
    if (parse(v.value, s)) partition(s.topic, s.partition).index[s.offset] = v.offset;
  });
}

HeaderStore::Partition& HeaderStore::partition(std::string_view topic, int32_t p) {
  auto it = parts_.find(std::make_pair(std::string(topic), p));
  if (it == parts_.end()) it = parts_.emplace(Key{std::string(topic), p}, std::make_unique<Partition>()).first;
  return *it->second;
}

const HeaderStore::Partition* HeaderStore::find(std::string_view topic, int32_t p) const {
  auto it = parts_.find(std::make_pair(std::string(topic), p));
  return it == parts_.end() ? nullptr : it->second.get();
}

lionet::Mutex& HeaderStore::lock_for(std::string_view topic, int32_t partition) noexcept {
  const std::size_t h = std::hash<std::string_view>{}(topic)*31 + static_cast<std::size_t>(partition);
  return stripes_[h % stripes_.size()];
}

void HeaderStore::begin(std::string_view topic, int32_t p, int64_t end_offset) {
  std::lock_guard<std::mutex> lk(mu_);
  partition(topic, p).pending_from.store(end_offset, std::memory_order_seq_cst);  // step 1
}

void HeaderStore::abort(std::string_view topic, int32_t p) {
  std::lock_guard<std::mutex> lk(mu_);
  partition(topic, p).pending_from.store(INT64_MAX, std::memory_order_release);
}

Result<void> HeaderStore::commit(std::string_view topic, int32_t p, int64_t base_offset,
                                 std::span<const DecodedRecord> records, int64_t log_start_offset) {
  std::string arena;
  std::vector<std::pair<std::size_t, std::size_t>> spans;  // (start, size) in arena
  std::vector<int64_t> offsets;
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (records[i].header_count == 0) continue;
    const std::size_t at = arena.size();
    Writer w(arena);
    w.i32(p);
    w.i64(base_offset + static_cast<int64_t>(i));
    w.string(topic);
    w.raw(records[i].headers);
    spans.emplace_back(at, arena.size() - at);
    offsets.push_back(base_offset + static_cast<int64_t>(i));
  }
  Result<int64_t> first = int64_t{0};
  if (!spans.empty()) {
    std::vector<storage::Record> side;
    for (auto [at, n] : spans) side.push_back({{}, std::string_view(arena).substr(at, n)});
    first = log_.append_batch(side);
  }
  std::lock_guard<std::mutex> lk(mu_);
  Partition& part = partition(topic, p);
  if (first) {
    for (std::size_t i = 0; i < offsets.size(); ++i) part.index[offsets[i]] = *first + static_cast<int64_t>(i);
    part.index.erase(part.index.begin(), part.index.lower_bound(log_start_offset));  // retention pruned
  }
  part.pending_from.store(INT64_MAX, std::memory_order_release);  // step 3
  if (!first) return first.error();
  return {};
}

int64_t HeaderStore::visible_end(std::string_view topic, int32_t p) const {
  std::lock_guard<std::mutex> lk(mu_);
  const Partition* part = find(topic, p);
  return part ? part->pending_from.load(std::memory_order_acquire) : INT64_MAX;
}

std::map<int64_t, std::string> HeaderStore::lookup(std::string_view topic, int32_t p, int64_t first,
                                                   int64_t last) const {
  std::map<int64_t, std::string> out;
  std::vector<std::pair<int64_t, int64_t>> want;  // (data offset, side offset)
  {
    std::lock_guard<std::mutex> lk(mu_);
    const Partition* part = find(topic, p);
    if (!part) return out;
    for (auto it = part->index.lower_bound(first); it != part->index.end() && it->first <= last; ++it)
      want.emplace_back(it->first, it->second);
  }
  storage::ReadResult rr;
  std::size_t i = 0;
  while (i < want.size()) {
    if (!log_.read(want[i].second, 64 * 1024, rr) || rr.empty()) {  // gone (retention): no headers
      ++i;
      continue;
    }
    for (const storage::RecordView& v : rr.records()) {
      SideRecord s;
      if (!parse(v.value, s) || s.topic != topic || s.partition != p) continue;
      if (s.offset >= first && s.offset <= last) out[s.offset] = std::string(s.headers);
    }
    const int64_t next = rr.next_offset();
    while (i < want.size() && (want[i].second < next || out.contains(want[i].first))) ++i;
  }
  return out;
}

}  // namespace lionet::kafka
