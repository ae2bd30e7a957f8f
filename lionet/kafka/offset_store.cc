// lionet/kafka/offset_store.cc: OffsetStore (see offset_store.h).
#include "lionet/kafka/offset_store.h"

#include <vector>

#include "lionet/kafka/codec.h"
#include "lionet/kafka/detail/internal_topic.h"
#include "lionet/storage/store.h"

namespace lionet::kafka {
namespace {
constexpr int8_t kValueVersion = 1;

void encode_key(std::string& out, std::string_view group, std::string_view topic, int32_t partition) {
  Writer w(out);
  w.string(group);
  w.string(topic);
  w.i32(partition);
}

void encode_value(std::string& out, int64_t offset, int32_t leader_epoch, std::string_view metadata) {
  Writer w(out);
  w.i8(kValueVersion);
  w.i64(offset);
  w.i32(leader_epoch);
  w.string(metadata);
}
}  // namespace

Result<std::unique_ptr<OffsetStore>> OffsetStore::open(storage::Store& store) {
  return detail::open_replayed<OffsetStore>(store, kOffsetsTopic);
}

Result<void> OffsetStore::replay() {
  std::lock_guard<std::mutex> lk(mu_);
  return detail::for_each_record(log_, [&](const storage::RecordView& v) {
    Reader k(v.key);
    const std::string_view group = k.string();
    const std::string_view topic = k.string();
    const int32_t partition = k.i32();
    Reader in(v.value);
    const int8_t version = in.i8();
    Committed c;
    c.offset = in.i64();
    c.leader_epoch = in.i32();
    c.metadata = std::string(in.string());
    if (!k.ok() || !k.at_end() || !in.ok() || version != kValueVersion) return;  // not ours: skipped
    ++replayed_;
    Entry& e = entries_[Key(std::string(group), std::string(topic), partition)];
    e.value = std::move(c);
    e.record_offset = v.offset;
  });
}

Result<void> OffsetStore::commit(std::string_view group, std::span<const Commit> commits) {
  // Which commits need a record: not the unchanged ones whose record is in the active segment
  // (retention never deletes that one; see the header).
  const std::vector<int64_t> bases = log_.segment_base_offsets();
  const int64_t active_base = bases.empty() ? 0 : bases.back();
  std::vector<char> write(commits.size(), 1);
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (std::size_t i = 0; i < commits.size(); ++i) {
      const Commit& c = commits[i];
      auto it = entries_.find(KeyView(group, c.topic, c.partition));
      if (it == entries_.end()) continue;
      const Entry& e = it->second;
      write[i] = !(e.value.offset == c.offset && e.value.leader_epoch == c.leader_epoch &&
                   e.value.metadata == c.metadata && e.record_offset >= active_base);
    }
  }
  std::string arena;
  std::vector<std::pair<std::size_t, std::size_t>> keys, values;  // (start, size) in arena
  std::vector<std::size_t> which;
  for (std::size_t i = 0; i < commits.size(); ++i) {
    if (!write[i]) continue;
    const Commit& c = commits[i];
    std::size_t at = arena.size();
    encode_key(arena, group, c.topic, c.partition);
    keys.emplace_back(at, arena.size() - at);
    at = arena.size();
    encode_value(arena, c.offset, c.leader_epoch, c.metadata);
    values.emplace_back(at, arena.size() - at);
    which.push_back(i);
  }
  int64_t first = -1;
  if (!which.empty()) {
    std::vector<storage::Record> recs;
    recs.reserve(which.size());
    const std::string_view a(arena);
    for (std::size_t j = 0; j < which.size(); ++j)
      recs.push_back({a.substr(keys[j].first, keys[j].second), a.substr(values[j].first, values[j].second)});
    auto r = log_.append_batch(recs);
    if (!r) return r.error();
    first = *r;
  }
  std::lock_guard<std::mutex> lk(mu_);
  std::size_t j = 0;
  for (std::size_t i = 0; i < commits.size(); ++i) {
    const Commit& c = commits[i];
    auto it = entries_.find(KeyView(group, c.topic, c.partition));
    if (it == entries_.end())
      it = entries_.emplace(Key(std::string(group), std::string(c.topic), c.partition), Entry{}).first;
    Entry& e = it->second;
    e.value.offset = c.offset;
    e.value.leader_epoch = c.leader_epoch;
    e.value.metadata.assign(c.metadata);
    if (write[i]) e.record_offset = first + static_cast<int64_t>(j++);
  }
  written_ += which.size();
  return {};
}

std::optional<OffsetStore::Committed> OffsetStore::get(std::string_view group, std::string_view topic,
                                                       int32_t partition) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = entries_.find(KeyView(group, topic, partition));
  if (it == entries_.end()) return std::nullopt;
  return it->second.value;
}

std::map<std::string, std::map<int32_t, OffsetStore::Committed>> OffsetStore::all(std::string_view group) const {
  std::map<std::string, std::map<int32_t, Committed>> out;
  std::lock_guard<std::mutex> lk(mu_);
  for (auto it = entries_.lower_bound(KeyView(group, std::string_view(), INT32_MIN));
       it != entries_.end() && std::get<0>(it->first) == group; ++it)
    out[std::get<1>(it->first)][std::get<2>(it->first)] = it->second.value;
  return out;
}

uint64_t OffsetStore::records_written() const {
  std::lock_guard<std::mutex> lk(mu_);
  return written_;
}

}  // namespace lionet::kafka
