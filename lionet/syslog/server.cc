// lionet/syslog/server.cc: Server (see server.h): the UDP readers, the TCP handler and the
// batch they append.
#include "lionet/syslog/server.h"
#include "lionet/sched/cancel.h"

#include <arpa/inet.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string_view>
#include <system_error>

#include "lionet/base/log_limiter.h"
#include "lionet/log/log.h"
#include "lionet/net/stream.h"
#include "lionet/storage/record.h"
#include "lionet/storage/store.h"
#include "lionet/syslog/framing.h"
#include "lionet/syslog/message.h"

namespace lionet::syslog {
namespace {

const std::shared_ptr<spdlog::logger>& syslog_log() {
  static const auto lg = log::get("syslog");
  return lg;
}

int64_t wall_ms() noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

uint32_t fnv1a(std::string_view s) noexcept {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

// The IP of a, without the port ("" when unknown).
std::string_view ip_of(const Address& a, char (&buf)[64]) noexcept {
  const void* ip = nullptr;
  if (a.family() == AF_INET) ip = &reinterpret_cast<const sockaddr_in*>(a.sockaddr_ptr())->sin_addr;
  if (a.family() == AF_INET6) ip = &reinterpret_cast<const sockaddr_in6*>(a.sockaddr_ptr())->sin6_addr;
  if (!ip || !::inet_ntop(a.family(), ip, buf, sizeof buf)) return {};
  return buf;
}

LogLimiter g_lost_log;
}  // namespace

struct Server::Impl {
  Impl(Scheduler& s, storage::Store& st, ServerOptions o) : sched(s), store(st), opt(std::move(o)) {}

  Scheduler& sched;
  storage::Store& store;
  const ServerOptions opt;
  uint32_t partitions = 1;  // of the topic, read at start()
  std::size_t max_batch_bytes = 0;  // the store's, read at start()

  struct Udp {
    UdpSocket sock;
    std::string address;  // "udp://..."
    uint64_t drops_at_close = 0;
  };
  std::vector<std::unique_ptr<Udp>> udp;
  std::mutex udp_mu;  // guards each Udp's sock against kernel_drops() while stop() closes them
  std::vector<JoinHandle<void>> readers;
  std::vector<std::unique_ptr<TcpServer>> tcp;
  bool started = false, stopped = false;

  std::atomic<uint64_t> received{0}, stored{0}, malformed{0}, truncated{0}, lost{0}, tcp_connections{0}, denied{0};

  // Records gathered for one append: their keys and JSON values in one arena.
  class Batch {
   public:
    explicit Batch(Impl& im) : im_(im) {}
    std::size_t size() const noexcept { return items_.size(); }

    void add(std::string_view raw, bool cut, std::string_view peer, int64_t now_ms) {
      const Message m = parse(raw, now_ms);
      im_.received.fetch_add(1, std::memory_order_relaxed);
      if (m.malformed) im_.malformed.fetch_add(1, std::memory_order_relaxed);
      if (cut) im_.truncated.fetch_add(1, std::memory_order_relaxed);
      const std::string_view key = record_key(m, im_.opt.key_by_app);
      Item it;
      it.k = arena_.size();
      it.kn = key.size();
      arena_.append(key);
      it.v = arena_.size();
      to_json(m, peer, cut, arena_);
      it.vn = arena_.size() - it.v;
      it.ts = m.timestamp_ms.value_or(now_ms);
      it.partition = im_.partitions == 1 || key.empty() ? 0 : fnv1a(key) % im_.partitions;
      const std::size_t add_bytes = storage::kRecordOverheadBytes + it.kn + it.vn;
      if (!items_.empty() && bytes_ + add_bytes > im_.max_batch_bytes) flush_except_last(it);
      bytes_ += add_bytes;
      items_.push_back(it);
    }

    // Appends every record (one append_batch per partition) and clears.
    void flush() {
      if (items_.empty()) return;
      std::vector<uint32_t> parts;
      for (const Item& it : items_)
        if (std::find(parts.begin(), parts.end(), it.partition) == parts.end()) parts.push_back(it.partition);
      for (uint32_t p : parts) {
        records_.clear();
        for (const Item& it : items_) {
          if (it.partition != p) continue;
          records_.push_back(
              {std::string_view(arena_.data() + it.k, it.kn), std::string_view(arena_.data() + it.v, it.vn), it.ts});
        }
        append(p);
      }
      items_.clear();
      arena_.clear();
      bytes_ = storage::kBatchOverheadBytes;
    }

   private:
    struct Item {
      std::size_t k = 0, kn = 0, v = 0, vn = 0;
      int64_t ts = 0;
      uint32_t partition = 0;
    };

    // The batch would pass the store's max_batch_bytes with `last` (already in the arena, at
    // its end): append the others, keep `last`'s bytes.
    void flush_except_last(Item& last) {
      const std::string tail = arena_.substr(last.k);
      const std::size_t shift = last.k;
      flush();
      arena_ = tail;
      last.k -= shift;
      last.v -= shift;
    }

    void append(uint32_t p) {
      auto log = im_.store.log(im_.opt.topic, p);
      Result<int64_t> r = log ? (*log)->append_batch(records_) : Result<int64_t>(log.error());
      if (r) {
        im_.stored.fetch_add(records_.size(), std::memory_order_relaxed);
        return;
      }
      im_.lost.fetch_add(records_.size(), std::memory_order_relaxed);
      uint64_t held = 0;
      if (g_lost_log.admit(held)) {
        LIONET_LOG_ERROR(syslog_log(),
                         "syslog '{}': {} message(s) not stored in topic '{}' partition {}: {} ({} more failures)",
                         im_.opt.name, records_.size(), im_.opt.topic, p, r.error().message(), held);
      }
    }

    Impl& im_;
    std::string arena_;
    std::vector<Item> items_;
    std::vector<storage::Record> records_;
    std::size_t bytes_ = storage::kBatchOverheadBytes;
  };

  void udp_loop(Udp& u) noexcept {
    const std::size_t slots_n = std::min<std::size_t>(opt.batch_max, 64);
    const std::size_t slot = opt.max_message_size;
    std::unique_ptr<char[]> mem;
    std::vector<Datagram> slots;
    try {
      mem.reset(new char[slots_n * slot]);
      slots.resize(slots_n);
    } catch (const std::bad_alloc&) {
      LIONET_LOG_ERROR(syslog_log(), "syslog '{}': {}: out of memory for the receive buffers", opt.name, u.address);
      return;
    }
    for (std::size_t i = 0; i < slots_n; ++i) slots[i].buffer = std::span<char>(mem.get() + i * slot, slot);
    Batch batch(*this);
    TimePoint first{};
    char peer_buf[64];
    for (;;) {
      const std::size_t want = std::min(slots_n, opt.batch_max - batch.size());
      const Deadline d = batch.size() == 0 ? Deadline::never() : Deadline::at(first + opt.linger);
      auto n = u.sock.recv_many(std::span<Datagram>(slots.data(), want), d);
      if (!n) {
        if (n.error() == std::errc::timed_out) {
          batch.flush();
          continue;
        }
        batch.flush();
        if (n.error() != std::errc::operation_canceled && n.error() != std::errc::bad_file_descriptor) {
          LIONET_LOG_ERROR(syslog_log(), "syslog '{}': {}: receive failed: {}", opt.name, u.address,
                           n.error().message());
        }
        return;
      }
      const int64_t now = wall_ms();
      if (batch.size() == 0) first = lionet::now();
      try {
        for (std::size_t i = 0; i < *n; ++i) {
          const Datagram& g = slots[i];
          if (!opt.admit.empty() && !opt.admit.admits(g.peer)) {
            denied.fetch_add(1, std::memory_order_relaxed);
            continue;
          }
          batch.add(std::string_view(g.buffer.data(), g.length), g.truncated, ip_of(g.peer, peer_buf), now);
        }
      } catch (const std::bad_alloc&) {
        lost.fetch_add(*n, std::memory_order_relaxed);
      }
      if (batch.size() >= opt.batch_max || opt.linger <= Duration::zero()) batch.flush();
    }
  }

  // A TCP listener of this server (listen_tcp, adopt_tcp): its name and connection limit.
  std::unique_ptr<TcpServer> new_tcp_server() {
    TcpServerOptions o;
    o.max_connections = opt.max_connections;
    o.max_connections_per_address = opt.max_connections_per_address;
    o.admit = opt.admit;
    o.name = opt.name;
    return std::make_unique<TcpServer>(
        sched, [this](SocketStream& s) { tcp_conn(s); }, o);
  }

  void tcp_conn(SocketStream& s) {
    tcp_connections.fetch_add(1, std::memory_order_relaxed);
    s.set_timeouts(opt.idle_timeout, opt.idle_timeout);
    char peer_buf[64];
    std::string_view peer;
    if (auto a = s.socket().peer_address()) peer = ip_of(*a, peer_buf);
    StreamFramer framer(opt.max_message_size);
    Batch batch(*this);
    constexpr std::size_t kRead = 16 * 1024;
    std::unique_ptr<char[]> buf(new char[kRead]);
    int64_t now = wall_ms();
    auto on_message = [&](std::string_view msg, bool cut) {
      batch.add(msg, cut, peer, now);
      if (batch.size() >= opt.batch_max) batch.flush();
    };
    for (;;) {
      auto n = s.read(buf.get(), kRead);
      if (!n || *n == 0) {
        framer.finish(on_message);
        batch.flush();
        if (!n && n.error() != std::errc::timed_out && n.error() != std::errc::operation_canceled)
          LIONET_LOG_DEBUG(syslog_log(), "syslog '{}': tcp {}: {}", opt.name, peer, n.error().message());
        return;
      }
      now = wall_ms();
      framer.feed(std::string_view(buf.get(), *n), on_message);
      batch.flush();
      if (framer.bad()) {
        LIONET_LOG_DEBUG(syslog_log(), "syslog '{}': tcp {}: a frame length that is not digits and a space: closing",
                         opt.name, peer);
        return;
      }
    }
  }

  uint64_t drops_of(const Udp& u) const noexcept {
    if (!u.sock.is_open()) return u.drops_at_close;
    uint32_t mem[SK_MEMINFO_VARS] = {};
    socklen_t len = sizeof mem;
    if (::getsockopt(u.sock.fd(), SOL_SOCKET, SO_MEMINFO, mem, &len) != 0 || len <= SK_MEMINFO_DROPS * sizeof(uint32_t))
      return u.drops_at_close;
    return mem[SK_MEMINFO_DROPS];
  }
};

Server::Server(Scheduler& sched, storage::Store& store, ServerOptions options)
    : impl_(std::make_unique<Impl>(sched, store, std::move(options))) {
  if (impl_->opt.batch_max < 1) throw std::invalid_argument("syslog: batch_max must be at least 1");
  if (impl_->opt.max_message_size < 480) throw std::invalid_argument("syslog: max_message_size must be at least 480");
}

Server::~Server() { stop(Duration::zero()); }

void Server::listen_udp(const Address& local) {
  Impl& im = *impl_;
  UdpOptions uo;
  uo.reuse_port = true;
  uo.recv_buffer = im.opt.recv_buffer;
  const int n = std::max(1, im.sched.threads());
  for (int i = 0; i < n; ++i) {
    Address at = local;
    if (i > 0 && !im.udp.empty()) {  // the same port the first socket got (port 0 resolved)
      if (auto a = im.udp.back()->sock.local_address()) at = *a;
    }
    auto s = UdpSocket::bind_to(at, uo);
    if (!s) throw std::system_error(s.error(), "syslog udp " + local.to_string());
    auto u = std::make_unique<Impl::Udp>();
    u->sock = std::move(*s);
    u->address = "udp://" + (u->sock.local_address() ? u->sock.local_address()->to_string() : local.to_string());
    im.udp.push_back(std::move(u));
  }
}

void Server::listen_tcp(const Address& local) {
  Impl& im = *impl_;
  auto t = im.new_tcp_server();
  try {
    t->listen(local);
  } catch (const std::system_error& e) {
    throw std::system_error(e.code(), "syslog tcp " + local.to_string());
  }
  im.tcp.push_back(std::move(t));
}

void Server::adopt_tcp(int fd) {
  Impl& im = *impl_;
  auto t = im.new_tcp_server();
  t->adopt(fd);
  im.tcp.push_back(std::move(t));
}

std::vector<TcpServer*> Server::tcp_servers() const {
  std::vector<TcpServer*> out;
  for (const auto& t : impl_->tcp) out.push_back(t.get());
  return out;
}

void Server::start() {
  Impl& im = *impl_;
  if (im.started) return;
  auto info = im.store.describe(im.opt.topic);
  if (!info) {
    storage::TopicOptions to;
    to.name = im.opt.topic;
    to.partitions = im.store.options().default_partitions;
    if (auto r = im.store.create_topic(to); !r)
      throw std::runtime_error("syslog '" + im.opt.name + "': topic '" + im.opt.topic + "': " + r.error().message());
    info = im.store.describe(im.opt.topic);
    if (!info)
      throw std::runtime_error("syslog '" + im.opt.name + "': topic '" + im.opt.topic + "': " + info.error().message());
  }
  im.partitions = static_cast<uint32_t>(std::max<std::size_t>(1, info->partitions.size()));
  im.max_batch_bytes = info->options.max_batch_bytes;
  for (auto& u : im.udp) {
    Impl::Udp* p = u.get();
    im.readers.push_back(im.sched.spawn([&im, p] { im.udp_loop(*p); }));
  }
  for (auto& t : im.tcp) t->start();
  im.started = true;
}

bool Server::stop(Duration drain) {
  Impl& im = *impl_;
  if (!im.started || im.stopped) return true;
  im.stopped = true;
  bool all = true;
  for (auto& t : im.tcp) all &= t->stop(drain);
  {
    std::lock_guard<std::mutex> lk(im.udp_mu);
    for (auto& u : im.udp) {
      u->drops_at_close = im.drops_of(*u);
      u->sock.close();  // wakes its reader (ECANCELED): it appends what it holds and returns
    }
  }
  CancelShield shield;  // the readers use `im`: wait for them even in a cancelled fiber
  for (auto& r : im.readers) r.join();
  im.readers.clear();
  return all;
}

ServerStats Server::stats() const noexcept {
  const Impl& im = *impl_;
  auto g = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  return {g(im.received), g(im.stored),          g(im.malformed), g(im.truncated),
          g(im.lost),     g(im.tcp_connections), g(im.denied)};
}

uint64_t Server::kernel_drops() const noexcept {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lk(im.udp_mu);
  uint64_t n = 0;
  for (const auto& u : im.udp) n += im.drops_of(*u);
  return n;
}

std::vector<std::string> Server::addresses() const {
  std::vector<std::string> out;
  const Impl& im = *impl_;
  for (std::size_t i = 0; i < im.udp.size(); ++i)
    if (std::find(out.begin(), out.end(), im.udp[i]->address) == out.end()) out.push_back(im.udp[i]->address);
  for (const auto& t : im.tcp)
    for (const auto& a : t->addresses()) out.push_back("tcp://" + a.to_string());
  return out;
}
}  // namespace lionet::syslog
