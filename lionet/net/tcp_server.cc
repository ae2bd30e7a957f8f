// lionet/net/tcp_server.cc: TcpServer (the shutdown protocol is written in tcp_server.h).
#include "lionet/net/tcp_server.h"
#include "lionet/sched/cancel.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <algorithm>
#include <thread>

#include <cerrno>
#include <cstring>
#include <exception>
#include <stdexcept>

#include "lionet/io/io_manager.h"
#include "lionet/log/log.h"

namespace lionet {
namespace {
const std::shared_ptr<spdlog::logger>& net_log() {
  static const auto lg = log::get("net");
  return lg;
}
}  // namespace

TcpServer::TcpServer(Scheduler& sched, Handler handler, TcpServerOptions options)
    : sched_(sched), handler_(std::move(handler)), options_(std::move(options)) {}

TcpServer::TcpServer(IOManager& io, Handler handler, TcpServerOptions options)
    : TcpServer(io.scheduler(), std::move(handler), std::move(options)) {}

TcpServer::~TcpServer() {
  if (started_.load() && !stopped_.load()) stop(Duration::zero());
}

void TcpServer::listen(const Address& local) {
  if (started_.load()) throw std::logic_error("lionet::TcpServer::listen after start()");
  ListenOptions lo;
  lo.backlog = options_.backlog;
  int per_worker = options_.reuse_port_per_worker && local.is_ip() ? sched_.threads() : 0;
  lo.reuse_port = per_worker > 0 || options_.reuse_port;
  Address addr = local;
  for (int i = 0; i < std::max(per_worker, 1); ++i) {
    auto l = std::make_unique<Listener>();
    l->socket = Socket::listen_on(addr, lo);
    l->address = l->socket.local_address().value();
    l->worker = per_worker > 0 ? i : -1;
    if (i == 0) {
      addr = l->address;  // an ephemeral port is chosen once; the other workers share it
      addresses_.push_back(addr);
    }
    listeners_.push_back(std::move(l));
  }
}

void TcpServer::adopt(int fd) {
  if (started_.load()) throw std::logic_error("lionet::TcpServer::adopt after start()");
  int type = 0, listening = 0;
  socklen_t len = sizeof type;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 || type != SOCK_STREAM ||
      (len = sizeof listening, ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len)) < 0 || !listening)
    throw std::system_error(errno ? errno : EINVAL, std::generic_category(),
                            "lionet: inherited fd " + std::to_string(fd) + " is not a listening stream socket");
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // handed on explicitly by an upgrade, never by accident
  auto l = std::make_unique<Listener>();
  l->socket = Socket(fd);
  l->address = l->socket.local_address().value();
  addresses_.push_back(l->address);
  listeners_.push_back(std::move(l));
}

std::vector<int> TcpServer::listening_fds() const {
  std::vector<int> out;
  for (std::size_t i = 0; i < listeners_.size(); ++i)
    if (i == 0 || listeners_[i]->worker <= 0) out.push_back(listeners_[i]->socket.fd());
  return out;
}

void TcpServer::stop_accepting_keep_sockets() {
  stopping_.store(true, std::memory_order_release);
  // An acceptor between its EAGAIN and its wait misses one cancel; the next one catches it.
  while (acceptors_running_.load(std::memory_order_acquire) > 0) {
    for (auto& l : listeners_) l->socket.cancel_waits();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CancelShield shield;  // the acceptors use *this: wait for them even in a cancelled fiber
  for (auto& h : acceptors_) h.join();
  acceptors_.clear();
  for (auto& l : listeners_) l->socket.close();  // no call in flight: a plain close(2)
}

void TcpServer::start() {
  if (listeners_.empty()) throw std::logic_error("lionet::TcpServer::start without listen()");
  if (started_.exchange(true)) throw std::logic_error("lionet::TcpServer::start called twice");
  for (auto& l : listeners_) {
    SpawnOptions so;
    so.name = options_.name;
    so.pin_worker = l->worker;
    Listener* raw = l.get();
    acceptors_running_.fetch_add(1, std::memory_order_relaxed);
    acceptors_.push_back(sched_.spawn([this, raw] { accept_loop(raw); }, so));
  }
}

std::vector<Address> TcpServer::addresses() const { return addresses_; }

// options_.accept_batch: accept4 succeeds without parking while the backlog holds
// connections, so without a yield one flood burst (up to `backlog` connections, 4096 by
// default) ran in a single slice, and every other fiber of the worker, and the reactor poll
// that wakes them, waited for all of it (tests/net: 1000 queued connections were taken in one
// slice; scripts/abuse.sh: a keep-alive probe on the same worker waited 70-98 ms at the start
// of a 20,000-connection flood, each accept paying for a fresh fiber stack).
void TcpServer::accept_loop(Listener* l) noexcept {
  unsigned in_a_row = 0;
  const bool want_peer = !options_.admit.empty() || options_.max_connections_per_address;
  Address peer;
  while (!stopping()) {
    auto s = l->socket.accept(want_peer ? &peer : nullptr);
    if (LIONET_LIKELY(s.ok())) {
      admit(std::move(*s), peer);
      if (options_.accept_batch && ++in_a_row >= options_.accept_batch) {
        in_a_row = 0;
        this_fiber::yield();
      }
      continue;
    }
    int e = s.error().value();
    if (stopping() || e == ECANCELED || e == EBADF || e == EINVAL) break;  // listener closed
    log_accept_error(e);
    // EMFILE and friends: the pending connection stays queued, so retrying at once would
    // spin. Sleep instead; stop() waits at most this long for the acceptor.
    this_fiber::sleep_for(options_.accept_backoff);
  }
  acceptors_running_.fetch_sub(1, std::memory_order_release);
}

void TcpServer::log_accept_error(int err) noexcept {
  uint64_t more = 0;
  if (!accept_log_.admit(more)) return;
  LIONET_LOG_WARN(net_log(), "{}: accept failed: {} ({} more since the last line); backing off {} ms", options_.name,
                  std::strerror(err), more,
                  std::chrono::duration_cast<std::chrono::milliseconds>(options_.accept_backoff).count());
}

bool TcpServer::take_address_slot(const IpKey& key) noexcept {
  std::lock_guard<std::mutex> g(addr_mu_);
  try {
    std::size_t& n = per_address_[key];
    if (n >= options_.max_connections_per_address) return false;
    ++n;
    return true;
  } catch (const std::bad_alloc&) {
    return false;  // no memory for the entry: refuse this connection rather than not count it
  }
}

void TcpServer::release_address_slot(const IpKey& key) noexcept {
  std::lock_guard<std::mutex> g(addr_mu_);
  auto it = per_address_.find(key);
  if (it != per_address_.end() && --it->second == 0) per_address_.erase(it);
}

// Closes refused connections at once (the client reads end of stream), in this order: the
// address rules, the address's own limit, the server's limit.
void TcpServer::admit(Socket s, const Address& peer) noexcept {
  if (!options_.admit.empty() && !options_.admit.admits(peer)) {
    denied_.fetch_add(1, std::memory_order_relaxed);
    s.close();
    return;
  }
  IpKey key;
  bool counted = false;
  if (options_.max_connections_per_address && peer.is_ip()) {
    key = IpKey::of(peer);
    if (!take_address_slot(key)) {
      per_address_rejected_.fetch_add(1, std::memory_order_relaxed);
      s.close();
      return;
    }
    counted = true;
  }
  if (size_t max = options_.max_connections) {
    size_t n = live_.load(std::memory_order_relaxed);
    do {
      if (n >= max) {
        rejected_.fetch_add(1, std::memory_order_relaxed);
        if (counted) release_address_slot(key);
        s.close();  // at once: the client reads end of stream
        return;
      }
    } while (!live_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
  } else {
    live_.fetch_add(1, std::memory_order_relaxed);
  }
  accepted_.fetch_add(1, std::memory_order_relaxed);
  handlers_.add(1);
  Conn* c = new Conn(std::move(s));
  c->counted = counted;
  c->key = key;
  c->stream.set_timeouts(options_.read_timeout, options_.write_timeout);
  {
    std::lock_guard<std::mutex> g(mu_);
    c->next = head_;
    if (head_) head_->prev = c;
    head_ = c;
    // Accepted just before the listener closed: apply the shutdown steps already taken.
    if (cancelled_) c->stream.close();  // (a fresh connection is never shut for reading: step 2)
  }
  try {
    sched_.spawn_detached([this, c] { serve(c); });
    return;
  } catch (const std::system_error& e) {
    // No fiber stack to be had (fiber.max_stack_memory, address space): this connection is
    // closed, the ones being served go on.
    log_spawn_failure(e);
  } catch (...) {  // spawn refused (the scheduler is stopping)
  }
  {  // drop the connection: the client reads end of stream
    std::lock_guard<std::mutex> g(mu_);
    if (c->prev) c->prev->next = c->next;
    else head_ = c->next;
    if (c->next) c->next->prev = c->prev;
  }
  if (c->counted) release_address_slot(c->key);
  delete c;
  live_.fetch_sub(1, std::memory_order_relaxed);
  handlers_.done();
}

void TcpServer::log_spawn_failure(const std::system_error& e) noexcept {
  spawn_failures_.fetch_add(1, std::memory_order_relaxed);
  uint64_t more = 0;
  if (!spawn_log_.admit(more)) return;
  LIONET_LOG_WARN(net_log(), "{}: no fiber for a new connection, closed it: {} ({} more closed since the last line)",
                  options_.name, e.what(), more);
}

void TcpServer::serve(Conn* c) noexcept {
  try {
    handler_(c->stream);
  } catch (const std::exception& e) {
    LIONET_LOG_ERROR(net_log(), "{}: connection handler threw: {}", options_.name, e.what());
  } catch (...) {
    LIONET_LOG_ERROR(net_log(), "{}: connection handler threw a non-std exception", options_.name);
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    if (c->prev) c->prev->next = c->next;
    else head_ = c->next;
    if (c->next) c->next->prev = c->prev;
  }
  if (c->counted) release_address_slot(c->key);
  delete c;  // closes the socket
  live_.fetch_sub(1, std::memory_order_relaxed);
  handlers_.done();
}

// Step 2 of the shutdown protocol at time t; true if a connection was left open for now.
bool TcpServer::shut_reads(TimePoint t) {
  bool left = false;
  std::lock_guard<std::mutex> g(mu_);
  for (Conn* c = head_; c; c = c->next) {
    if (c->read_shut) continue;
    if (c->stream.received() || t - c->accepted >= options_.drain_silent_grace) {
      (void)c->stream.socket().shutdown(SHUT_RD);
      c->read_shut = true;
    } else {
      left = true;
    }
  }
  return left;
}

bool TcpServer::stop(Duration drain) {
  if (stopped_.exchange(true)) return true;
  TimePoint deadline = now() + drain;
  // 1. stop accepting.
  stopping_.store(true, std::memory_order_release);
  for (auto& l : listeners_) l->socket.close();
  CancelShield shield;  // acceptors and handlers use *this: wait for them even when cancelled
  for (auto& h : acceptors_) h.join();
  acceptors_.clear();
  // 2. idle readers see end of stream; 3. drain, repeating 2 for connections it left open.
  bool pending = options_.drain_shutdown_read && shut_reads(now());
  bool drained = false;
  while (!(drained =
               handlers_.wait_until(pending ? std::min(deadline, now() + std::chrono::milliseconds(10)) : deadline)) &&
         now() < deadline)
    pending = pending && shut_reads(now());
  if (!drained) {
    // 4. cancel what is left.
    size_t n = 0;
    {
      std::lock_guard<std::mutex> g(mu_);
      cancelled_ = true;
      for (Conn* c = head_; c; c = c->next, ++n) c->stream.close();
    }
    LIONET_LOG_WARN(net_log(), "{}: {} connection(s) still open after the drain deadline: closed", options_.name, n);
    handlers_.wait();
  }
  return drained;
}
}  // namespace lionet
