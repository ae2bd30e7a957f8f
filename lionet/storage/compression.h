// lionet/storage/compression.h: the four codecs a Kafka producer may compress a RecordBatch's
// records with (attributes & 7): 1 gzip (zlib), 2 snappy (libsnappy: raw, or the xerial framing
// the Java client writes), 3 lz4 (liblz4's frame format, as Kafka's magic-2 batches use), 4
// zstd (libzstd).
//
// Owns: decompress() (bounded: a batch that would inflate past `max_out` bytes is refused as
// soon as it does, never buffered whole: a compression bomb costs at most max_out bytes) and
// compress() (tests, and any producer side built on this layer). Must not: know batches.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace lionet::storage {

enum class Codec : int { kNone = 0, kGzip = 1, kSnappy = 2, kLz4 = 3, kZstd = 4 };

// The codec's name ("gzip", ...), or "unknown".
const char* codec_name(int codec) noexcept;

enum class Inflate { kOk, kBadStream, kTooLarge, kUnknownCodec };

// Appends the decompressed bytes of `in` to `out`. kTooLarge as soon as they pass `max_out`
// bytes (at most max_out + 1 were buffered); kBadStream on a malformed or truncated stream
// (`why` says which); kUnknownCodec for a codec outside 1..4. On any failure `out` is left as
// it was.
Inflate decompress(int codec, std::string_view in, std::size_t max_out, std::string& out, const char*& why);

// Appends `in` compressed with `codec` (1..4) to `out`; false on an unknown codec or a library
// failure. Snappy is written raw (no xerial framing), as librdkafka does.
bool compress(int codec, std::string_view in, std::string& out);

}  // namespace lionet::storage
