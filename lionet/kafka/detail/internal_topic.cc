// lionet/kafka/detail/internal_topic.cc: detail::open_internal_log (see detail/internal_topic.h).
#include "lionet/kafka/detail/internal_topic.h"

#include <string>

#include "lionet/storage/store.h"

namespace lionet::kafka::detail {
Result<storage::Log*> open_internal_log(storage::Store& store, std::string_view topic) {
  if (!store.find(topic, 0)) {
    storage::TopicOptions to;
    to.name = std::string(topic);
    to.partitions = 1;
    if (auto r = store.create_topic(to); !r) return r.error();
  }
  auto log = store.find(topic, 0);
  if (!log) return log.error();
  return *log;
}
}  // namespace lionet::kafka::detail
