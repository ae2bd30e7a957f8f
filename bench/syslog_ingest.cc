// bench/syslog_ingest.cc: syslog ingest over UDP into the store (lionet::syslog::Server), and
// the hand-written floor beside it (--ref: recvmmsg, then one write(2) of the raw messages per
// batch to a plain file, fdatasync per batch with --flush every_batch).
//
//   syslog_ingest [--ref] [--messages N] [--flush none|every_batch] [--backend epoll|io_uring]
//                 [--dir DIR]
//
// One process: the receiver (LioNet: a 1-worker scheduler's worker; --ref: a plain thread) on
// CPU 0, a sender thread on CPU 1 that sends N RFC 5424 messages (~90 bytes) as fast as
// sendmmsg(64) goes. Both receivers get the same SO_RCVBUF (4 MiB asked) and batch alike (up to
// 256 messages per append / write, as many as are queued). The run ends when every message is
// accounted for (stored + dropped by the kernel = sent) or 10 s without progress.
// stored_per_s = messages stored / seconds from the first send to the last store (bounded by
// the sender when nothing is dropped: on loopback the sender's CPU also runs the receive path);
// receiver_us = CPU of the process minus the sender thread's, per message stored.
// Last line: RESULT mode=lionet|ref flush=none|every_batch sent=N stored=N dropped=N
//   seconds=S stored_per_s=X receiver_us=U errors=E   (errors: sent != stored + dropped,
//   failed appends)
#include <fcntl.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "lionet/io/io_manager.h"
#include "lionet/net/address.h"
#include "lionet/sched/scheduler.h"
#include "lionet/storage/store.h"
#include "lionet/syslog/server.h"

namespace {
using Clock = std::chrono::steady_clock;
uint64_t send_loop(int port, uint64_t n);
constexpr int kRcvBuf = 4 << 20;

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--ref] [--messages N] [--flush none|every_batch] [--backend epoll|io_uring] [--dir DIR]\n",
               argv0);
  std::exit(2);
}

void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

uint64_t kernel_drops(int fd) {
  uint32_t mem[SK_MEMINFO_VARS] = {};
  socklen_t len = sizeof mem;
  if (::getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mem, &len) != 0) return 0;
  return mem[SK_MEMINFO_DROPS];
}

double cpu_seconds(int who) {
  rusage u{};
  ::getrusage(who, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// CPU seconds the sender thread used (it also runs the loopback receive path in the kernel).
std::atomic<double> g_sender_cpu{0};

// Sends n messages to port from CPU 1 (a thread of its own); returns how many were accepted.
uint64_t send_all(int port, uint64_t n) {
  uint64_t sent = 0;
  std::thread t([&] {
    pin(1);
    const double c0 = cpu_seconds(RUSAGE_THREAD);
    sent = send_loop(port, n);
    g_sender_cpu = cpu_seconds(RUSAGE_THREAD) - c0;
  });
  t.join();
  return sent;
}

uint64_t send_loop(int port, uint64_t n) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to);
  constexpr int kBatch = 64;
  char bufs[kBatch][128];
  iovec iov[kBatch];
  mmsghdr msgs[kBatch];
  uint64_t sent = 0;
  while (sent < n) {
    const int k = static_cast<int>(std::min<uint64_t>(kBatch, n - sent));
    for (int i = 0; i < k; ++i) {
      const int len = std::snprintf(bufs[i], sizeof bufs[i],
                                    "<14>1 2026-11-25T21:05:37.126Z benchhost benchapp 42 - - message number %llu",
                                    static_cast<unsigned long long>(sent + i));
      iov[i] = {bufs[i], static_cast<size_t>(len)};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    const int r = ::sendmmsg(fd, msgs, static_cast<unsigned>(k), 0);
    if (r > 0) sent += static_cast<uint64_t>(r);
    else if (errno != EINTR && errno != EAGAIN && errno != ENOBUFS) break;
  }
  ::close(fd);
  return sent;
}

struct Outcome {
  uint64_t sent = 0, stored = 0, dropped = 0, errors = 0;
  double seconds = 0;
  double receiver_cpu = 0;  // process CPU seconds minus the sender thread's
};

Outcome run_ref(uint64_t n, bool every_batch, const std::string& dir) {
  Outcome o;
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &kRcvBuf, sizeof kRcvBuf);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t al = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &al);
  timeval tv{0, 100000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const int out = ::open((dir + "/ref.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
  std::atomic<uint64_t> stored{0};
  std::atomic<bool> sender_done{false};
  Clock::time_point last_store{};
  std::thread recv([&] {
    pin(0);
    constexpr int kBatch = 64;
    static char slots[kBatch][2048];
    iovec iov[kBatch];
    mmsghdr msgs[kBatch];
    std::string batch;
    Clock::time_point quiet_since = Clock::now();
    for (;;) {
      for (int i = 0; i < kBatch; ++i) {
        iov[i] = {slots[i], sizeof slots[i]};
        msgs[i] = {};
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
      }
      // A batch as the server makes one: up to 256 messages, as many as are queued now.
      batch.clear();
      int got = 0;
      for (int flags = MSG_WAITFORONE; got < 256; flags = MSG_DONTWAIT) {
        const int r = ::recvmmsg(fd, msgs, kBatch, flags, nullptr);
        if (r <= 0) break;
        for (int i = 0; i < r; ++i) batch.append(slots[i], msgs[i].msg_len).push_back('\n');
        got += r;
      }
      if (got == 0) {
        if (sender_done.load() &&
            (stored.load() + kernel_drops(fd) >= o.sent || Clock::now() - quiet_since > std::chrono::seconds(10)))
          return;
        continue;
      }
      quiet_since = Clock::now();
      if (::write(out, batch.data(), batch.size()) != static_cast<ssize_t>(batch.size())) ++o.errors;
      if (every_batch) ::fdatasync(out);
      stored.fetch_add(static_cast<uint64_t>(got));
      last_store = Clock::now();
    }
  });
  const double c0 = cpu_seconds(RUSAGE_SELF);
  const auto t0 = Clock::now();
  o.sent = send_all(ntohs(a.sin_port), n);
  sender_done = true;
  recv.join();
  o.receiver_cpu = cpu_seconds(RUSAGE_SELF) - c0 - g_sender_cpu.load();
  o.stored = stored.load();
  o.dropped = kernel_drops(fd);
  o.seconds = std::chrono::duration<double>(last_store - t0).count();
  ::close(out);
  ::close(fd);
  return o;
}

Outcome run_lionet(uint64_t n, bool every_batch, const std::string& dir, const std::string& backend) {
  Outcome o;
  lionet::storage::StoreOptions so;
  so.data_dir = dir + "/data";
  so.log.flush_policy = every_batch ? lionet::storage::FlushPolicy::kEveryBatch : lionet::storage::FlushPolicy::kNone;
  auto store = lionet::storage::Store::open(so);
  if (!store) {
    std::fprintf(stderr, "store: %s\n", store.error().message().c_str());
    std::exit(1);
  }
  lionet::Scheduler sched({.threads = 1, .name = "ingest"});
  lionet::IOManager io(sched, lionet::IOManagerOptions{.backend = backend});
  sched.spawn([] { pin(0); }).join();  // the only worker: CPU 0
  lionet::syslog::ServerOptions opt;
  opt.recv_buffer = kRcvBuf;
  auto server = std::make_unique<lionet::syslog::Server>(sched, **store, opt);
  server->listen_udp(lionet::Address::parse("127.0.0.1:0").value());
  server->start();
  const std::string addr = server->addresses().front();
  const int port = std::atoi(addr.c_str() + addr.rfind(':') + 1);
  const double c0 = cpu_seconds(RUSAGE_SELF);
  const auto t0 = Clock::now();
  o.sent = send_all(port, n);
  // Until everything is accounted for (or 10 s without progress); the time of the last store.
  Clock::time_point last_store = Clock::now();
  uint64_t last_stored = 0;
  for (;;) {
    const auto st = server->stats();
    if (st.stored != last_stored) last_stored = st.stored, last_store = Clock::now();
    if (st.received + server->kernel_drops() >= o.sent && st.stored + st.lost == st.received) break;
    if (Clock::now() - last_store > std::chrono::seconds(10)) break;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  o.receiver_cpu = cpu_seconds(RUSAGE_SELF) - c0 - g_sender_cpu.load();
  const auto st = server->stats();
  o.stored = st.stored;
  o.dropped = server->kernel_drops();
  o.errors = st.lost;
  o.seconds = std::chrono::duration<double>(last_store - t0).count();
  server->stop(std::chrono::seconds(1));
  server.reset();
  sched.stop();
  return o;
}
}  // namespace

int main(int argc, char** argv) {
  bool ref = false, every_batch = false;
  uint64_t n = 1000000;
  std::string backend = "epoll", dir;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--ref") {
      ref = true;
    } else if (a == "--messages" && i + 1 < argc) {
      n = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--flush" && i + 1 < argc) {
      const std::string f = argv[++i];
      if (f != "none" && f != "every_batch") usage(argv[0]);
      every_batch = f == "every_batch";
    } else if (a == "--backend" && i + 1 < argc) {
      backend = argv[++i];
    } else if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else {
      usage(argv[0]);
    }
  }
  bool own_dir = false;
  if (dir.empty()) {
    char tmpl[] = "/var/tmp/lionet-syslog-ingest-XXXXXX";
    if (!::mkdtemp(tmpl)) return 1;
    dir = tmpl;
    own_dir = true;
  }
  const Outcome o = ref ? run_ref(n, every_batch, dir) : run_lionet(n, every_batch, dir, backend);
  if (own_dir) std::filesystem::remove_all(dir);
  const uint64_t errors = o.errors + (o.stored + o.dropped == o.sent ? 0 : 1);
  const double per_s = o.seconds > 0 ? static_cast<double>(o.stored) / o.seconds : 0;
  const double us = o.stored ? o.receiver_cpu * 1e6 / static_cast<double>(o.stored) : 0;
  std::printf(
      "%s flush=%s: %llu sent, %llu stored, %llu dropped by the kernel, %.3f s, %.0f stored/s, "
      "receiver %.2f us CPU per message\n",
      ref ? "reference (recvmmsg + write)" : "lionet syslog::Server", every_batch ? "every_batch" : "none",
      static_cast<unsigned long long>(o.sent), static_cast<unsigned long long>(o.stored),
      static_cast<unsigned long long>(o.dropped), o.seconds, per_s, us);
  std::printf(
      "RESULT mode=%s flush=%s sent=%llu stored=%llu dropped=%llu seconds=%.3f stored_per_s=%.0f "
      "receiver_us=%.3f errors=%llu\n",
      ref ? "ref" : "lionet", every_batch ? "every_batch" : "none", static_cast<unsigned long long>(o.sent),
      static_cast<unsigned long long>(o.stored), static_cast<unsigned long long>(o.dropped), o.seconds, per_s, us,
      static_cast<unsigned long long>(errors));
  return 0;
}
