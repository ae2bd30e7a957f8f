// tests/storage/crc32c_test.cc: CRC-32C against known vectors and the Boost.CRC oracle.
#include "lionet/storage/crc32c.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace lionet::storage {
namespace {

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(crc32c(0, "123456789", 9), 0xE3069283u);  // the standard check value
  EXPECT_EQ(crc32c_portable(0, "123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c(0, "", 0), 0u);
  std::string zeros(32, '\0');
  EXPECT_EQ(crc32c(0, zeros.data(), zeros.size()), 0x8A9136AAu);  // RFC 3720 B.4
  std::string ones(32, '\xff');
  EXPECT_EQ(crc32c(0, ones.data(), ones.size()), 0x62A8AB43u);
}

TEST(Crc32c, MatchesBoostOracleAtEveryLengthAndAlignment) {
  std::mt19937_64 rng(7);
  std::vector<unsigned char> buf(3 * 8192 * 2 + 64);
  for (auto& b : buf) b = static_cast<unsigned char>(rng());
  // Short lengths exhaustively at every alignment, then lengths around the 3-stream blocks.
  for (std::size_t align = 0; align < 8; align++) {
    for (std::size_t n = 0; n < 300; n++) {
      ASSERT_EQ(crc32c(0, buf.data() + align, n), crc32c_portable(0, buf.data() + align, n)) << n << "@" << align;
    }
  }
  for (std::size_t n : {767, 768, 769, 1024, 4096, 8191, 24575, 24576, 24577, 40000, 3 * 8192 * 2}) {
    ASSERT_EQ(crc32c(0, buf.data() + 3, n), crc32c_portable(0, buf.data() + 3, n)) << n;
    if (crc32c_hardware_available()) {
      ASSERT_EQ(crc32c_sse42_simple(0, buf.data() + 3, n), crc32c_portable(0, buf.data() + 3, n)) << n;
    }
  }
}

TEST(Crc32c, ExtendsAcrossCalls) {
  std::string s = "the quick brown fox jumps over the lazy dog, many times over and over";
  for (std::size_t cut = 0; cut <= s.size(); cut++) {
    uint32_t a = crc32c(0, s.data(), cut);
    EXPECT_EQ(crc32c(a, s.data() + cut, s.size() - cut), crc32c(0, s.data(), s.size()));
    uint32_t b = crc32c_portable(0, s.data(), cut);
    EXPECT_EQ(crc32c_portable(b, s.data() + cut, s.size() - cut), crc32c(0, s.data(), s.size()));
  }
}

}  // namespace
}  // namespace lionet::storage
