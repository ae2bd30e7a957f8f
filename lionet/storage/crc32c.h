// lionet/storage/crc32c.h: CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected), the checksum
// of every stored record batch (the one Kafka, Redpanda, LevelDB and iSCSI use).
//
// Owns: crc32c() and its implementations. Must not: allocate or keep state beyond what is
// built once on first use (the CPU check and two 4 KiB shift tables).
//
// crc32c() uses the SSE4.2 crc32 instruction when the CPU has it (checked once): three
// independent 8-byte streams interleaved so the 3-cycle latency of crc32q is hidden, the three
// CRCs combined through precomputed "shift over N zero bytes" tables. Otherwise it uses
// Boost.CRC's table-driven crc_optimal. Both give the same
// values; crc32c_portable() is the Boost one, kept public as the test oracle and for the
// benchmark that justifies the hardware path (lionet/storage/README.md states the figures).
#pragma once

#include <cstddef>
#include <cstdint>

namespace lionet::storage {

// Extends `crc` (the value of a previous call, 0 to start) over n bytes: crc32c(crc32c(0,a),b)
// == crc32c(0, a+b).
uint32_t crc32c(uint32_t crc, const void* data, std::size_t n) noexcept;
// Boost.CRC table-driven implementation (portable fallback and test oracle).
uint32_t crc32c_portable(uint32_t crc, const void* data, std::size_t n) noexcept;
// The simple one-stream SSE4.2 loop (8 bytes per crc32q; what bench/reference/log/logbench
// uses); exposed for the benchmark. Only call when crc32c_hardware_available().
uint32_t crc32c_sse42_simple(uint32_t crc, const void* data, std::size_t n) noexcept;
bool crc32c_hardware_available() noexcept;

}  // namespace lionet::storage
