// lionet/kafka/detail/internal_topic.h: the one-partition internal topics kafka/ keeps its own
// state in (`__kafka_producers`, `__kafka_headers`).
//
// Owns: nothing; opens (creating when missing) the topic's only log. Must not: be used for
// client topics (their partitions and auto-creation follow the store's configuration).
#pragma once

#include <string_view>

#include "lionet/net/result.h"

namespace lionet::storage {
class Store;
class Log;
}  // namespace lionet::storage

namespace lionet::kafka::detail {
// Partition 0 of `topic`, created with one partition if the store has none. Errors: the store's.
Result<storage::Log*> open_internal_log(storage::Store& store, std::string_view topic);
}  // namespace lionet::kafka::detail
