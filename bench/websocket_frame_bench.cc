// bench/websocket_frame_bench.cc: the WebSocket receive path's parse + unmask, LioNet's
// hand-written detail::FrameReader against libwslay's frame layer (wslay_frame_recv, Debian
// libwslay-dev), on the same bytes: masked binary frames as a client sends them, 64 B, 16 KiB
// and 1 MiB payloads, about 4 MiB per iteration. Both sides end with each message's payload
// unmasked in a std::string the caller keeps (FrameReader assembles into it; wslay's frame layer
// hands out pieces of its own 4 KiB buffer, which a message-assembling user must copy, so the
// wslay side copies them - what wslay's own event layer does too). No IO: the bytes come from
// memory (wslay through its recv callback, a memcpy into its buffer, as a read() would be).
// Built only where wslay is found (bench/CMakeLists.txt). The decision it informs is in
// lionet/websocket/README.md ("Framing").
#include <benchmark/benchmark.h>
#include <wslay/wslay.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "lionet/websocket/detail/frame_reader.h"
#include "lionet/websocket/frame.h"

namespace {
using lionet::websocket::Message;
using lionet::websocket::Opcode;
using lionet::websocket::detail::FrameReader;
using lionet::websocket::detail::ReadEvent;

constexpr size_t kBytesPerIteration = 4u << 20;

struct Wire {
  std::string bytes;
  size_t frames = 0;
};

Wire make_wire(size_t payload) {
  Wire w;
  w.frames = std::max<size_t>(1, kBytesPerIteration / payload);
  std::string body(payload, '\0');
  for (size_t i = 0; i < payload; ++i) body[i] = static_cast<char>(i * 131 + 7);
  for (size_t f = 0; f < w.frames; ++f) {
    uint8_t h[lionet::websocket::kMaxHeaderSize];
    const uint32_t key = static_cast<uint32_t>(0x9E3779B9u * (f + 1));
    const size_t n = lionet::websocket::write_frame_header(h, true, Opcode::kBinary, payload, true, key);
    w.bytes.append(reinterpret_cast<char*>(h), n);
    std::string p = body;
    lionet::websocket::apply_mask(p.data(), p.size(), key, 0);
    w.bytes += p;
  }
  return w;
}

void BM_LionetFrameReader(benchmark::State& state) {
  const Wire w = make_wire(static_cast<size_t>(state.range(0)));
  Message m;
  for (auto _ : state) {
    FrameReader r(/*server=*/true, UINT64_MAX >> 1, UINT64_MAX >> 1);
    size_t pos = 0, messages = 0;
    while (pos < w.bytes.size()) {
      size_t used = 0;
      const ReadEvent ev = r.next(w.bytes.data() + pos, w.bytes.size() - pos, &used, m);
      pos += used;
      if (ev.kind != ReadEvent::kMessage) {
        state.SkipWithError("unexpected event");
        return;
      }
      ++messages;
      benchmark::DoNotOptimize(m.data.data());
    }
    if (messages != w.frames) state.SkipWithError("frame count");
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * w.bytes.size()));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * w.frames));
}

struct WslaySource {
  const std::string* bytes;
  size_t pos = 0;
};

ssize_t wslay_recv(uint8_t* buf, size_t len, int, void* user) {
  auto* s = static_cast<WslaySource*>(user);
  const size_t k = std::min(len, s->bytes->size() - s->pos);
  if (k == 0) return -1;
  std::memcpy(buf, s->bytes->data() + s->pos, k);
  s->pos += k;
  return static_cast<ssize_t>(k);
}
ssize_t wslay_send(const uint8_t*, size_t, int, void*) { return -1; }
int wslay_genmask(uint8_t*, size_t, void*) { return -1; }

void BM_WslayFrameRecv(benchmark::State& state) {
  const Wire w = make_wire(static_cast<size_t>(state.range(0)));
  const wslay_frame_callbacks cb = {wslay_send, wslay_recv, wslay_genmask};
  std::string message;
  for (auto _ : state) {
    WslaySource src{&w.bytes};
    wslay_frame_context_ptr ctx = nullptr;
    if (wslay_frame_context_init(&ctx, &cb, &src) != 0) {
      state.SkipWithError("wslay_frame_context_init");
      return;
    }
    size_t messages = 0;
    uint64_t got = 0;
    while (messages < w.frames) {
      wslay_frame_iocb iocb{};
      const ssize_t r = wslay_frame_recv(ctx, &iocb);
      if (r < 0) {
        state.SkipWithError("wslay_frame_recv failed");
        break;
      }
      if (got == 0) message.clear();
      message.append(reinterpret_cast<const char*>(iocb.data), iocb.data_length);
      got += iocb.data_length;
      if (got == iocb.payload_length) {
        ++messages;
        got = 0;
        benchmark::DoNotOptimize(message.data());
      }
    }
    wslay_frame_context_free(ctx);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * w.bytes.size()));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * w.frames));
}

BENCHMARK(BM_LionetFrameReader)->Arg(64)->Arg(16 << 10)->Arg(1 << 20);
BENCHMARK(BM_WslayFrameRecv)->Arg(64)->Arg(16 << 10)->Arg(1 << 20);
}  // namespace

BENCHMARK_MAIN();
