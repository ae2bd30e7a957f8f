// lionet/kafka/detail/internal_topic.h: the one-partition internal topics kafka/ keeps its own
// state in (`__kafka_producers`, `__kafka_headers`, `__kafka_offsets`).
//
// Owns: nothing; opens (creating when missing) the topic's only log and reads it whole at
// start. Must not: be used for client topics (their partitions and auto-creation follow the
// store's configuration).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <tuple>

#include "lionet/base/result.h"
#include "lionet/storage/fwd.h"
#include "lionet/storage/log.h"

namespace lionet::kafka::detail {
// Orders a map's std::tuple keys that hold std::strings and lookups by the same tuple of
// std::string_views alike (transparent: a lookup by a topic's string_view allocates nothing;
// std::less<> cannot compare tuples of string and string_view under clang's libstdc++ use).
template <class Key, class KeyView>
struct TupleKeyLess {
  using is_transparent = void;
  static KeyView view(const Key& k) noexcept {
    return std::apply([](const auto&... e) { return KeyView(e...); }, k);
  }
  static const KeyView& view(const KeyView& k) noexcept { return k; }
  template <class A, class B>
  bool operator()(const A& a, const B& b) const noexcept {
    return view(a) < view(b);
  }
};

// Partition 0 of `topic`, created with one partition if the store has none. Errors: the store's.
Result<storage::Log*> open_internal_log(storage::Store& store, std::string_view topic);

// A new T over `topic`'s log (T's constructor from storage::Log&), its state read back by its
// replay() (Result<void>): how each internal-topic store opens. T befriends it.
template <class T>
Result<std::unique_ptr<T>> open_replayed(storage::Store& store, std::string_view topic) {
  auto log = open_internal_log(store, topic);
  if (!log) return log.error();
  std::unique_ptr<T> t(new T(**log));
  if (auto r = t->replay(); !r) return r.error();
  return t;
}

// Calls fn(const storage::RecordView&) for every record of `log` from its start to its end, in
// order, reading 1 MiB at a time (the replay of an internal topic at start). Errors: the log's.
template <class Fn>
Result<void> for_each_record(storage::Log& log, Fn&& fn) {
  storage::ReadResult rr;
  for (int64_t off = log.start_offset(); off < log.end_offset();) {
    if (auto r = log.read(off, 1 << 20, rr); !r) return r.error();
    if (rr.empty()) break;
    for (const storage::RecordView& v : rr.records()) fn(v);
    off = rr.next_offset();
  }
  return {};
}
}  // namespace lionet::kafka::detail
