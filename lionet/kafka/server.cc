// lionet/kafka/server.cc: Server (see server.h): the connection loop.
#include "lionet/kafka/server.h"

#include <arpa/inet.h>

#include <cstring>
#include <system_error>
#include <utility>

#include "lionet/base/log_limiter.h"
#include "lionet/kafka/detail/buffer_pool.h"
#include "lionet/log/log.h"
#include "lionet/net/stream.h"
#include "lionet/ssl/ssl_stream.h"
#include "lionet/storage/file_system.h"

namespace lionet::kafka {
namespace {
const std::shared_ptr<spdlog::logger>& kafka_log() {
  static const auto lg = log::get("kafka");
  return lg;
}
LogLimiter g_malformed_log;

LogLimiter g_refused_log;

void log_closed(const std::string& server, Socket& s, const char* why, bool refused = false) {
  uint64_t held = 0;
  if (!(refused ? g_refused_log : g_malformed_log).admit(held)) return;
  std::string peer = "?";
  if (auto a = s.peer_address()) peer = a->to_string();
  if (refused) {
    LIONET_LOG_WARN(kafka_log(), "kafka '{}': {}: {}: connection closed ({} more held back)", server, peer, why, held);
    return;
  }
  LIONET_LOG_WARN(kafka_log(), "kafka '{}': {}: malformed request ({}): connection closed ({} more held back)", server,
                  peer, why, held);
}

// Kafka's sasl.server.max.receive.size: the largest frame before authentication.
constexpr int64_t kMaxUnauthenticatedFrame = 512 * 1024;

// The response frame: `response` with the slices' stored bytes in their places, those by
// sendfile(2) (a Fetch's batches go from the page cache to the socket, never through here).
// false: the connection is to be closed (a write failed, or a segment shrank under a slice:
// the frame could not be completed, and a client must not see a short one).
bool send_response(Stream& s, const std::string& response, const std::vector<FileSlice>& slices) {
  std::size_t from = 0;
  std::string copy;
  for (const FileSlice& sl : slices) {
    if (sl.at > from && !s.write_more(response.data() + from, sl.at - from)) return false;
    from = sl.at;
    if (const int fd = sl.file->native_handle(); fd >= 0) {
      auto n = s.sendfile(fd, static_cast<off_t>(sl.position), static_cast<std::size_t>(sl.bytes));
      if (!n || *n != sl.bytes) return false;
      continue;
    }
    copy.resize(static_cast<std::size_t>(sl.bytes));  // a file system without descriptors (tests)
    auto n = sl.file->pread(copy.data(), copy.size(), sl.position);
    if (!n || *n != copy.size() || !s.write(copy.data(), copy.size())) return false;
  }
  return from == response.size() || s.write(response.data() + from, response.size() - from).ok();
}

}  // namespace

Server::Server(Scheduler& sched, storage::Store& store, ServerOptions options) : opt_(std::move(options)) {
  broker_ = std::make_unique<Broker>(store, opt_.broker);
  TcpServerOptions o;
  o.max_connections = opt_.max_connections;
  o.max_connections_per_address = opt_.max_connections_per_address;
  o.admit = opt_.admit;
  o.name = opt_.name;
  tcp_ = std::make_unique<TcpServer>(
      sched, [this](SocketStream& s) { serve(s); }, o);
}

Server::~Server() { stop(Duration::zero()); }

void Server::listen(const Address& local) {
  try {
    tcp_->listen(local);
  } catch (const std::system_error& e) {
    throw std::system_error(e.code(), "kafka " + local.to_string());
  }
}

void Server::start() {
  if (started_) return;
  const auto bound = tcp_->addresses();
  if (!bound.empty()) {
    const std::string a = bound.front().to_string();  // "1.2.3.4:9092", "[::1]:9092"
    std::string host = a.substr(0, a.rfind(':'));
    if (host.size() > 1 && host.front() == '[') host = host.substr(1, host.size() - 2);
    if (host == "0.0.0.0" || host == "::") host = "127.0.0.1";
    broker_->advertise(opt_.broker.advertised_host.empty() ? host : opt_.broker.advertised_host,
                       opt_.broker.advertised_port == 0 ? bound.front().port() : opt_.broker.advertised_port);
  }
  tcp_->start();
  started_ = true;
}

bool Server::stop(Duration drain) {
  if (!started_ || stopped_) return true;
  stopped_ = true;
  broker_->stop();
  return tcp_->stop(drain);
}

void Server::serve(SocketStream& s) {
  if (!opt_.tls) {
    serve(s, s.socket());
    return;
  }
  std::shared_ptr<SslContext> ctx = opt_.tls();
  if (!ctx) return;
  SslStream tls(std::move(ctx), s.socket());  // borrowed: TcpServer owns the socket
  if (!tls.handshake()) return;  // bounded by the context's handshake_timeout
  serve(tls, s.socket());
}

void Server::serve(Stream& s, Socket& sock) {
  s.set_timeouts(opt_.idle_timeout, opt_.idle_timeout);
  std::string frame, response;
  std::vector<FileSlice> slices;
  Session session = broker_->new_session();
  for (;;) {
    char size_buf[4];
    auto n = s.read_full(size_buf, 4);
    if (!n || *n < 4) return;  // end of stream, idle timeout, shutdown
    uint32_t be;
    std::memcpy(&be, size_buf, 4);
    const int64_t size = static_cast<int32_t>(ntohl(be));
    if (!session.authenticated && size > kMaxUnauthenticatedFrame) {
      log_closed(opt_.name, sock, "a frame above 512 KiB before SASL authentication", true);
      return;
    }
    // A bare SASL token (after SaslHandshake v0) may be shorter than a request header.
    if (size < (session.raw_tokens ? 0 : 8) || static_cast<uint64_t>(size) > opt_.max_request_size) {
      log_closed(opt_.name, sock, size < 8 ? "a frame size below 8" : "a frame larger than max_request_size");
      return;
    }
    frame.resize(static_cast<std::size_t>(size));
    n = s.read_full(frame.data(), frame.size());
    if (!n || *n < frame.size()) return;
    const Broker::Outcome o = broker_->handle(frame, response, slices, session);
    if (o.kind == Broker::Outcome::kClose) {
      log_closed(opt_.name, sock, o.why, o.refused);
      return;
    }
    if ((o.kind == Broker::Outcome::kRespond || o.kind == Broker::Outcome::kRespondAndClose) &&
        !send_response(s, response, slices))
      return;
    if (o.kind == Broker::Outcome::kRespondAndClose) {
      log_closed(opt_.name, sock, o.why, o.refused);
      (void)s.shutdown_write();  // the answer reaches the client before the close
      return;
    }
    slices.clear();  // lets go of the segments
    if (frame.capacity() > (1u << 20)) std::string().swap(frame);  // one huge request keeps no memory
    // A big response (a consumer's Fetch) goes to the Fetch buffer pool, not to the allocator.
    if (response.capacity() > (1u << 20)) detail::give_string(std::exchange(response, std::string()));
  }
}

}  // namespace lionet::kafka
