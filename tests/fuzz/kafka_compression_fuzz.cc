// libFuzzer target for lionet/storage/compression.h's decompress(): the first byte picks the
// codec (gzip, snappy raw or xerial-framed, lz4 frame, zstd, or an unknown one), the rest is
// the stream. Any input is refused or inflated without reading past it, never to more than the
// limit (a compression bomb stops there), and an accepted stream's bytes compress and inflate
// back to themselves.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "lionet/storage/compression.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lionet::storage;
  if (size == 0) return 0;
  const int codec = data[0] % 6;  // 0 and 5: not a codec
  const std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  constexpr std::size_t kLimit = 256 * 1024;
  std::string out = "p";  // decompress appends
  const char* why = "";
  const Inflate r = decompress(codec, in, kLimit, out, why);
  if (out.size() > kLimit + 1) std::abort();
  if ((codec < 1 || codec > 4) != (r == Inflate::kUnknownCodec)) std::abort();
  if (r != Inflate::kOk) return 0;
  std::string z, back;
  if (!compress(codec, std::string_view(out).substr(1), z)) std::abort();
  if (decompress(codec, z, kLimit, back, why) != Inflate::kOk || back != std::string_view(out).substr(1)) std::abort();
  return 0;
}
