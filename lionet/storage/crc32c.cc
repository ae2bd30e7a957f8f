// lionet/storage/crc32c.cc: CRC-32C, SSE4.2 three-stream path and Boost.CRC fallback.
//
// The three-stream method is Mark Adler's (crc32c.c, zlib licence idea, rewritten here): the
// crc32q instruction has a latency of 3 cycles and a throughput of 1, so one dependent chain
// uses a third of the unit. Three chains over three adjacent blocks run in parallel; the
// block CRCs are then combined by "shifting" a CRC over len zero bytes, a linear map over
// GF(2) applied with four 256-entry tables per block length.
#include "lionet/storage/crc32c.h"

#include <boost/crc.hpp>

#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#define LIONET_CRC32C_X86 1
#endif

namespace lionet::storage {
namespace {

constexpr uint32_t kPolyReflected = 0x82f63b78u;
constexpr std::size_t kLong = 8192;
constexpr std::size_t kShort = 256;

uint32_t gf2_matrix_times(const uint32_t* mat, uint32_t vec) {
  uint32_t sum = 0;
  while (vec) {
    if (vec & 1) sum ^= *mat;
    vec >>= 1;
    mat++;
  }
  return sum;
}

void gf2_matrix_square(uint32_t* square, const uint32_t* mat) {
  for (int n = 0; n < 32; n++) square[n] = gf2_matrix_times(mat, mat[n]);
}

// The operator that appends len zero bytes to a CRC (before the final inversion).
void zeros_operator(uint32_t* even, std::size_t len) {
  uint32_t odd[32];
  uint32_t row = 1;
  odd[0] = kPolyReflected;
  for (int n = 1; n < 32; n++) {
    odd[n] = row;
    row <<= 1;
  }
  gf2_matrix_square(even, odd);  // 2 zero bits
  gf2_matrix_square(odd, even);  // 4 zero bits
  do {
    gf2_matrix_square(even, odd);  // the first square gives one zero byte
    len >>= 1;
    if (len == 0) return;
    gf2_matrix_square(odd, even);
    len >>= 1;
  } while (len);
  std::memcpy(even, odd, sizeof odd);
}

struct ShiftTable {
  uint32_t t[4][256];
  explicit ShiftTable(std::size_t len) {
    uint32_t op[32];
    zeros_operator(op, len);
    for (uint32_t n = 0; n < 256; n++) {
      t[0][n] = gf2_matrix_times(op, n);
      t[1][n] = gf2_matrix_times(op, n << 8);
      t[2][n] = gf2_matrix_times(op, n << 16);
      t[3][n] = gf2_matrix_times(op, n << 24);
    }
  }
  uint32_t shift(uint32_t crc) const {
    return t[0][crc & 0xff] ^ t[1][(crc >> 8) & 0xff] ^ t[2][(crc >> 16) & 0xff] ^ t[3][crc >> 24];
  }
};

struct Crc32cTables {
  bool hw = false;
  ShiftTable long_shift{kLong};
  ShiftTable short_shift{kShort};
  Crc32cTables() {
#if LIONET_CRC32C_X86
    __builtin_cpu_init();
    hw = __builtin_cpu_supports("sse4.2");
#endif
  }
};

// Built once, on first use (thread-safe static); later calls pay one guard load.
const Crc32cTables& tables() {
  static const Crc32cTables t;
  return t;
}

#if LIONET_CRC32C_X86
inline uint64_t load64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// Runs three crc32q chains over three adjacent blocks while at least 3 blocks remain.
__attribute__((target("sse4.2"))) inline uint64_t three_streams(uint64_t crc0, const unsigned char*& next,
                                                                std::size_t& len, std::size_t block,
                                                                const ShiftTable& shift) {
  while (len >= block * 3) {
    uint64_t crc1 = 0, crc2 = 0;
    const unsigned char* end = next + block;
    do {
      crc0 = _mm_crc32_u64(crc0, load64(next));
      crc1 = _mm_crc32_u64(crc1, load64(next + block));
      crc2 = _mm_crc32_u64(crc2, load64(next + 2 * block));
      next += 8;
    } while (next < end);
    crc0 = shift.shift(static_cast<uint32_t>(crc0)) ^ crc1;
    crc0 = shift.shift(static_cast<uint32_t>(crc0)) ^ crc2;
    next += 2 * block;
    len -= 3 * block;
  }
  return crc0;
}

__attribute__((target("sse4.2"))) uint32_t crc32c_sse42_3way(const Crc32cTables& tb, uint32_t crc,
                                                             const unsigned char* next, std::size_t len) {
  uint64_t crc0 = crc ^ 0xffffffffu;
  while (len && (reinterpret_cast<uintptr_t>(next) & 7) != 0) {
    crc0 = _mm_crc32_u8(static_cast<uint32_t>(crc0), *next++);
    len--;
  }
  crc0 = three_streams(crc0, next, len, kLong, tb.long_shift);
  crc0 = three_streams(crc0, next, len, kShort, tb.short_shift);
  while (len >= 8) {
    crc0 = _mm_crc32_u64(crc0, load64(next));
    next += 8;
    len -= 8;
  }
  while (len) {
    crc0 = _mm_crc32_u8(static_cast<uint32_t>(crc0), *next++);
    len--;
  }
  return static_cast<uint32_t>(crc0) ^ 0xffffffffu;
}
#endif

}  // namespace

uint32_t crc32c_portable(uint32_t crc, const void* data, std::size_t n) noexcept {
  // crc_optimal keeps its remainder unreflected: continuing `crc` means seeding it with the
  // bit-reversed pre-inversion value.
  uint32_t seed = ~crc, reflected = 0;
  for (int i = 0; i < 32; i++, seed >>= 1) reflected = (reflected << 1) | (seed & 1);
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> c(reflected);
  c.process_bytes(data, n);
  return c.checksum();
}

#if LIONET_CRC32C_X86
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42_simple(uint32_t crc, const void* data, std::size_t n) noexcept {
  auto p = static_cast<const unsigned char*>(data);
  uint64_t c = ~crc;
  while (n >= 8) {
    c = _mm_crc32_u64(c, load64(p));
    p += 8;
    n -= 8;
  }
  while (n--) c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
  return ~static_cast<uint32_t>(c);
}
#else
uint32_t crc32c_sse42_simple(uint32_t crc, const void* data, std::size_t n) noexcept {
  return crc32c_portable(crc, data, n);
}
#endif

bool crc32c_hardware_available() noexcept { return tables().hw; }

uint32_t crc32c(uint32_t crc, const void* data, std::size_t n) noexcept {
  const Crc32cTables& tb = tables();
#if LIONET_CRC32C_X86
  if (tb.hw) return crc32c_sse42_3way(tb, crc, static_cast<const unsigned char*>(data), n);
#endif
  return crc32c_portable(crc, data, n);
}

}  // namespace lionet::storage
