// lionet/storage/compression.cc: gzip, snappy, lz4 and zstd for RecordBatch records (see
// compression.h).
#include "lionet/storage/compression.h"

#include <lz4frame.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include <cstdint>
#include <cstring>
#include <memory>

namespace lionet::storage {
namespace {

constexpr std::size_t kChunk = 64 * 1024;  // output grows by this much at a time

// The end of a streaming codec: `out` cut to what was written; too large if it passed max_out.
// (On any failure decompress() puts `out` back as it was, so error paths just return.)
Inflate finish(std::string& out, std::size_t filled, std::size_t base, std::size_t max_out) {
  out.resize(filled);
  return filled - base > max_out ? Inflate::kTooLarge : Inflate::kOk;
}

// Grows `out` by up to kChunk, never past base + max_out + 1: a stream that inflates to exactly
// max_out bytes then ends (or stops, truncated) in the room left, and only one that produces
// byte max_out + 1 is too large. Returns the room made, 0 when that byte was produced.
std::size_t grow(std::string& out, std::size_t base, std::size_t max_out) {
  const std::size_t used = out.size() - base;
  if (used > max_out) return 0;
  const std::size_t add = std::min(kChunk, max_out + 1 - used);
  out.resize(out.size() + add);
  return add;
}

Inflate gunzip(std::string_view in, std::size_t max_out, std::string& out, const char*& why) {
  const std::size_t base = out.size();
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 32) != Z_OK) {  // 32: gzip or zlib header, detected
    why = "zlib could not start";
    return Inflate::kBadStream;
  }
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&zs, inflateEnd);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  std::size_t filled = base;
  for (;;) {
    if (filled == out.size() && grow(out, base, max_out) == 0) {
      return Inflate::kTooLarge;
    }
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + filled);
    zs.avail_out = static_cast<uInt>(out.size() - filled);
    const int r = inflate(&zs, Z_NO_FLUSH);
    filled = out.size() - zs.avail_out;
    if (r == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      if (inflateReset(&zs) != Z_OK) break;  // concatenated gzip members, as GZIPInputStream reads
      continue;
    }
    if (r == Z_BUF_ERROR && zs.avail_in == 0) {
      why = "a truncated gzip stream";
      return Inflate::kBadStream;
    }
    if (r != Z_OK && r != Z_BUF_ERROR) {
      why = "a malformed gzip stream";
      return Inflate::kBadStream;
    }
  }
  return finish(out, filled, base, max_out);
}

Inflate unsnappy_block(std::string_view in, std::size_t base, std::size_t max_out, std::string& out, const char*& why) {
  size_t n = 0;
  if (snappy_uncompressed_length(in.data(), in.size(), &n) != SNAPPY_OK) {
    why = "a malformed snappy block";
    return Inflate::kBadStream;
  }
  if (n > max_out - (out.size() - base)) return Inflate::kTooLarge;
  const std::size_t at = out.size();
  out.resize(at + n);
  size_t got = n;
  if (snappy_uncompress(in.data(), in.size(), out.data() + at, &got) != SNAPPY_OK || got != n) {
    why = "a malformed snappy block";
    return Inflate::kBadStream;
  }
  return Inflate::kOk;
}

uint32_t be32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return uint32_t{u[0]} << 24 | uint32_t{u[1]} << 16 | uint32_t{u[2]} << 8 | u[3];
}

// Raw snappy, or xerial's framing (the Java client): an 8-byte magic, version and
// compatible-version i32s, then blocks of [i32 length][raw snappy].
Inflate unsnappy(std::string_view in, std::size_t max_out, std::string& out, const char*& why) {
  static constexpr char kXerial[8] = {'\x82', 'S', 'N', 'A', 'P', 'P', 'Y', '\0'};
  const std::size_t base = out.size();
  if (in.size() < 16 || std::memcmp(in.data(), kXerial, 8) != 0) return unsnappy_block(in, base, max_out, out, why);
  in.remove_prefix(16);
  while (!in.empty()) {
    if (in.size() < 4) {
      why = "a truncated xerial snappy block length";
      return Inflate::kBadStream;
    }
    const uint32_t len = be32(in.data());
    in.remove_prefix(4);
    if (len > in.size()) {
      why = "a xerial snappy block past the records";
      return Inflate::kBadStream;
    }
    if (Inflate r = unsnappy_block(in.substr(0, len), base, max_out, out, why); r != Inflate::kOk) return r;
    in.remove_prefix(len);
  }
  return Inflate::kOk;
}

Inflate unlz4(std::string_view in, std::size_t max_out, std::string& out, const char*& why) {
  const std::size_t base = out.size();
  LZ4F_dctx* ctx = nullptr;
  if (LZ4F_isError(LZ4F_createDecompressionContext(&ctx, LZ4F_VERSION))) {
    why = "lz4 could not start";
    return Inflate::kBadStream;
  }
  std::unique_ptr<LZ4F_dctx, LZ4F_errorCode_t (*)(LZ4F_dctx*)> guard(ctx, LZ4F_freeDecompressionContext);
  std::size_t filled = base;
  const char* src = in.data();
  std::size_t left = in.size();
  std::size_t hint = 1;  // 0 once a frame ended; a next frame may follow
  while (left > 0 || hint != 0) {
    if (filled == out.size() && grow(out, base, max_out) == 0) {
      return Inflate::kTooLarge;
    }
    std::size_t dst_n = out.size() - filled, src_n = left;
    hint = LZ4F_decompress(ctx, out.data() + filled, &dst_n, src, &src_n, nullptr);
    if (LZ4F_isError(hint)) {
      why = "a malformed lz4 frame";
      return Inflate::kBadStream;
    }
    filled += dst_n;
    src += src_n;
    left -= src_n;
    if (src_n == 0 && dst_n == 0) {  // no progress with room to write: the input ended early
      why = "a truncated lz4 frame";
      return Inflate::kBadStream;
    }
  }
  return finish(out, filled, base, max_out);
}

Inflate unzstd(std::string_view in, std::size_t max_out, std::string& out, const char*& why) {
  const std::size_t base = out.size();
  std::unique_ptr<ZSTD_DCtx, std::size_t (*)(ZSTD_DCtx*)> ctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!ctx) {
    why = "zstd could not start";
    return Inflate::kBadStream;
  }
  ZSTD_inBuffer src{in.data(), in.size(), 0};
  std::size_t filled = base;
  std::size_t last = 1;
  for (;;) {
    if (filled == out.size() && grow(out, base, max_out) == 0) {
      return Inflate::kTooLarge;
    }
    ZSTD_outBuffer dst{out.data() + filled, out.size() - filled, 0};
    last = ZSTD_decompressStream(ctx.get(), &dst, &src);
    filled += dst.pos;
    if (ZSTD_isError(last)) {
      why = "a malformed zstd frame";
      return Inflate::kBadStream;
    }
    // Done when the input is consumed and the last frame ended and was flushed (0).
    if (src.pos == src.size && last == 0) break;
    if (src.pos == src.size && dst.pos < dst.size) {
      why = "a truncated zstd frame";
      return Inflate::kBadStream;
    }
  }
  return finish(out, filled, base, max_out);
}

}  // namespace

const char* codec_name(int codec) noexcept {
  switch (codec) {
    case 0: return "none";
    case 1: return "gzip";
    case 2: return "snappy";
    case 3: return "lz4";
    case 4: return "zstd";
    default: return "unknown";
  }
}

Inflate decompress(int codec, std::string_view in, std::size_t max_out, std::string& out, const char*& why) {
  const std::size_t base = out.size();
  Inflate r = Inflate::kUnknownCodec;
  switch (static_cast<Codec>(codec)) {
    case Codec::kGzip: r = gunzip(in, max_out, out, why); break;
    case Codec::kSnappy: r = unsnappy(in, max_out, out, why); break;
    case Codec::kLz4: r = unlz4(in, max_out, out, why); break;
    case Codec::kZstd: r = unzstd(in, max_out, out, why); break;
    default: why = "an unknown compression codec"; break;
  }
  if (r == Inflate::kTooLarge) why = "inflates past the limit";
  if (r != Inflate::kOk) out.resize(base);  // a failed inflate leaves nothing behind
  return r;
}

bool compress(int codec, std::string_view in, std::string& out) {
  const std::size_t at = out.size();
  switch (static_cast<Codec>(codec)) {
    case Codec::kGzip: {
      z_stream zs{};
      if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return false;
      out.resize(at + deflateBound(&zs, static_cast<uLong>(in.size())) + 32);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
      zs.avail_in = static_cast<uInt>(in.size());
      zs.next_out = reinterpret_cast<Bytef*>(out.data() + at);
      zs.avail_out = static_cast<uInt>(out.size() - at);
      const int r = deflate(&zs, Z_FINISH);
      out.resize(out.size() - zs.avail_out);
      deflateEnd(&zs);
      return r == Z_STREAM_END;
    }
    case Codec::kSnappy: {
      size_t n = snappy_max_compressed_length(in.size());
      out.resize(at + n);
      if (snappy_compress(in.data(), in.size(), out.data() + at, &n) != SNAPPY_OK) return false;
      out.resize(at + n);
      return true;
    }
    case Codec::kLz4: {
      const std::size_t bound = LZ4F_compressFrameBound(in.size(), nullptr);
      out.resize(at + bound);
      const std::size_t n = LZ4F_compressFrame(out.data() + at, bound, in.data(), in.size(), nullptr);
      if (LZ4F_isError(n)) return false;
      out.resize(at + n);
      return true;
    }
    case Codec::kZstd: {
      const std::size_t bound = ZSTD_compressBound(in.size());
      out.resize(at + bound);
      const std::size_t n = ZSTD_compress(out.data() + at, bound, in.data(), in.size(), 1);
      if (ZSTD_isError(n)) return false;
      out.resize(at + n);
      return true;
    }
    default: return false;
  }
}

}  // namespace lionet::storage
