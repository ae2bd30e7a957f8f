// lionet/kafka/detail/buffer_pool.cc: the Fetch buffer pool (see detail/buffer_pool.h).
#include "lionet/kafka/detail/buffer_pool.h"

#include <mutex>
#include <utility>
#include <vector>

namespace lionet::kafka::detail {
namespace {

// A few of each: enough for the Fetches in flight on a couple of workers at once.
constexpr std::size_t kKeepReads = 8;
constexpr std::size_t kKeepStrings = 4;

struct Pool {
  std::mutex mu;
  std::vector<storage::ReadResult> reads;
  std::vector<std::string> strings;
  Pool() {
    reads.reserve(kKeepReads);
    strings.reserve(kKeepStrings);
  }
};

Pool& pool() {
  static Pool* p = new Pool();  // never destroyed: fibers may give back during static destruction
  return *p;
}

}  // namespace

storage::ReadResult take_read() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lk(p.mu);
  if (p.reads.empty()) return {};
  storage::ReadResult r = std::move(p.reads.back());
  p.reads.pop_back();
  return r;
}

void give_read(storage::ReadResult&& r, std::size_t max_bytes) {
  if (max_bytes > kPoolMaxBytes) return;  // left to the caller's object
  storage::ReadResult keep = std::move(r);
  Pool& p = pool();
  std::lock_guard<std::mutex> lk(p.mu);
  if (p.reads.size() < kKeepReads) p.reads.push_back(std::move(keep));  // reserved: no allocation
}

std::string take_string(std::string_view prefix, std::size_t min_capacity) {
  std::string s;
  {
    Pool& p = pool();
    std::lock_guard<std::mutex> lk(p.mu);
    for (std::size_t i = 0; i < p.strings.size(); ++i) {
      if (p.strings[i].capacity() >= min_capacity) {
        s = std::move(p.strings[i]);
        p.strings[i] = std::move(p.strings.back());
        p.strings.pop_back();
        break;
      }
    }
  }
  s.reserve(min_capacity);  // a no-op for a kept one
  s.assign(prefix);
  return s;
}

void give_string(std::string&& s) {
  if (s.capacity() < kPoolMinBytes || s.capacity() > kPoolMaxBytes) return;
  std::string keep = std::move(s);
  keep.clear();
  Pool& p = pool();
  std::lock_guard<std::mutex> lk(p.mu);
  if (p.strings.size() < kKeepStrings) p.strings.push_back(std::move(keep));
}

}  // namespace lionet::kafka::detail
