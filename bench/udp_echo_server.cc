// bench/udp_echo_server.cc: the LioNet server of the UDP echo benchmark: one UdpSocket on
// 127.0.0.1, one fiber that sends every datagram back to its sender.
//
//   udp_echo_server [port] [--batch] [--threads N] [--backend epoll|io_uring]
//
// --batch: recv_many / send_many, UdpSocket::kMaxBatch (64) datagrams per system call, the
//   received slots sent back as they are (the same batch size as bench/reference/udp's
//   udp_echo_ref). Without it: recv_from / send_to, one datagram per system call.
// --threads N: N workers and N SO_REUSEPORT sockets on the port, one fiber each (default 1).
// Defaults: port 9000, epoll. Slots hold 2048 bytes (the benchmark sends 256). Runs until
// SIGINT/SIGTERM, then closes the sockets (their fibers' waits end with ECANCELED) and prints
// `RESULT received=N sent=N batches=N mode=batch|single backend=B errors=E` as its last line
// (errors: calls that failed other than by that close).
// Compared with bench/reference/udp/udp_echo_ref.c by scripts/bench-udp.sh.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench/common/server_main.h"
#include "lionet/net/udp_socket.h"
#include "lionet/sched/scheduler.h"

namespace {
constexpr size_t kSlotBytes = 2048;

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [port] [--batch] [--threads N] [--backend epoll|io_uring]\n", argv0);
  std::exit(2);
}

struct Counters {
  std::atomic<uint64_t> received{0}, sent{0}, batches{0}, errors{0};
};

bool cancelled(const std::error_code& e) {
  return e == std::errc::operation_canceled || e == std::errc::bad_file_descriptor;
}

// recv_many + send_many until the socket is closed. Counters are added once per batch
// (relaxed: read only after the fibers were joined).
void serve_batch(lionet::UdpSocket& s, Counters& c) {
  constexpr size_t n = lionet::UdpSocket::kMaxBatch;
  std::unique_ptr<char[]> mem(new char[n * kSlotBytes]);  // heap: fiber stacks are small
  std::vector<lionet::Datagram> slots(n);
  for (size_t i = 0; i < n; ++i) slots[i].buffer = std::span<char>(mem.get() + i * kSlotBytes, kSlotBytes);
  for (;;) {
    auto got = s.recv_many(slots);
    if (!got) {
      if (cancelled(got.error())) return;
      c.errors.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    auto sent = s.send_many(std::span<const lionet::Datagram>(slots.data(), *got));
    c.received.fetch_add(*got, std::memory_order_relaxed);
    c.batches.fetch_add(1, std::memory_order_relaxed);
    if (sent) {
      c.sent.fetch_add(*sent, std::memory_order_relaxed);
    } else if (cancelled(sent.error())) {
      return;
    } else {
      c.errors.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

// recv_from + send_to, one datagram per system call.
void serve_single(lionet::UdpSocket& s, Counters& c) {
  std::unique_ptr<char[]> mem(new char[kSlotBytes]);
  lionet::Datagram d;
  d.buffer = std::span<char>(mem.get(), kSlotBytes);
  uint64_t received = 0, sent = 0;
  for (;;) {
    auto r = s.recv_from(d);
    if (!r) {
      if (cancelled(r.error())) break;
      c.errors.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    ++received;
    auto w = s.send_to(d.buffer.data(), d.length, d.peer);
    if (w) {
      ++sent;
    } else if (cancelled(w.error())) {
      break;
    } else {
      c.errors.fetch_add(1, std::memory_order_relaxed);
    }
  }
  c.received.fetch_add(received, std::memory_order_relaxed);
  c.sent.fetch_add(sent, std::memory_order_relaxed);
  c.batches.fetch_add(received, std::memory_order_relaxed);
}
}  // namespace

int main(int argc, char** argv) {
  int port = 9000, threads = 1;
  bool batch = false;
  std::string backend = "epoll";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--batch") {
      batch = true;
    } else if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--backend" && i + 1 < argc) {
      backend = argv[++i];
    } else if (!a.empty() && a[0] != '-') {
      port = std::atoi(a.c_str());
    } else {
      usage(argv[0]);
    }
  }
  if (threads < 1 || port < 0 || port > 65535 || (backend != "epoll" && backend != "io_uring")) usage(argv[0]);

  lionet::bench::ServerMain runtime(threads, "udp-echo", backend);
  lionet::Address addr = lionet::Address::ipv4_loopback(static_cast<uint16_t>(port));
  std::vector<lionet::UdpSocket> sockets;
  for (int i = 0; i < threads; ++i) {
    auto s = lionet::UdpSocket::bind_to(addr, {.reuse_port = threads > 1});
    if (!s) {
      std::fprintf(stderr, "udp_echo_server: bind %s: %s\n", addr.to_string().c_str(), s.error().message().c_str());
      return 1;
    }
    sockets.push_back(std::move(*s));
  }
  Counters counters;
  std::vector<lionet::JoinHandle<void>> fibers;
  for (auto& s : sockets) {
    fibers.push_back(runtime.scheduler().spawn([&s, &counters, batch] {
      if (batch) {
        serve_batch(s, counters);
      } else {
        serve_single(s, counters);
      }
    }));
  }
  std::fprintf(stderr, "udp_echo_server: %s on %s, %d worker(s), backend %s\n", batch ? "batch" : "single",
               addr.to_string().c_str(), threads, runtime.backend());

  runtime.wait_for_stop();
  for (auto& s : sockets) s.close();  // wakes each fiber's wait with ECANCELED
  for (auto& f : fibers) f.join();
  runtime.stop();
  std::printf("RESULT received=%llu sent=%llu batches=%llu mode=%s backend=%s errors=%llu\n",
              static_cast<unsigned long long>(counters.received.load()),
              static_cast<unsigned long long>(counters.sent.load()),
              static_cast<unsigned long long>(counters.batches.load()), batch ? "batch" : "single", runtime.backend(),
              static_cast<unsigned long long>(counters.errors.load()));
  return 0;
}
