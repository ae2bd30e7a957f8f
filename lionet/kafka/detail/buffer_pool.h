// lionet/kafka/detail/buffer_pool.h: the big buffers of a Fetch (the store's read results and
// the response frame), kept for the next Fetch instead of going back to the allocator.
//
// Why: a consumer catching up fetches ~1 MiB per request (librdkafka's default partition
// max_bytes) and gets ~1 MiB back. Buffers that size, allocated and freed per request, thrash
// glibc's heuristics (the top of the thread's heap is trimmed with madvise after the free and
// page-faulted back, zero-filled, by the next request): measured with bench/kafka at 2.5-3x
// the CPU per record of Fetches whose buffers are reused. A process-wide pool, bounded in count
// and in each buffer's size, keeps a few; connections keep none between requests.
//
// Owns: the pool. Must not: hold its lock across anything but a vector push or pop (no fiber
// switch, no allocation of a kept buffer).
//
// Thread-safety: every function may be called from any thread or fiber.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "lionet/storage/record.h"

namespace lionet::kafka::detail {

// Buffers below kPoolMinBytes are not worth keeping; above kPoolMaxBytes they are not kept
// (a rare huge Fetch keeps no memory).
inline constexpr std::size_t kPoolMinBytes = 256 * 1024;
inline constexpr std::size_t kPoolMaxBytes = 16 * 1024 * 1024;

// An empty ReadResult: one kept (its buffers sized by an earlier read) when there is one.
storage::ReadResult take_read();
// Keeps r for a later take_read() when it served a read of at most kPoolMaxBytes (max_bytes:
// that read's limit, which bounds its buffer) and the pool has room; else leaves it to the
// caller, whose object frees it.
void give_read(storage::ReadResult&& r, std::size_t max_bytes);

// A string of capacity >= min_capacity, holding `prefix`: a kept one when it is big enough,
// else a new one reserved to min_capacity.
std::string take_string(std::string_view prefix, std::size_t min_capacity);
// Keeps s (cleared) when its capacity is in [kPoolMinBytes, kPoolMaxBytes] and the pool has
// room; else frees it.
void give_string(std::string&& s);

}  // namespace lionet::kafka::detail
