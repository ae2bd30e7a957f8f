// lionet/kafka/server.h: lionet::kafka::Server, the Kafka wire protocol on TCP: one fiber per
// connection reading size-prefixed request frames and answering each, in order, through a
// Broker over a storage::Store.
//
//   lionet::kafka::ServerOptions o;
//   o.broker.advertised_host = "127.0.0.1";
//   o.broker.advertised_port = 9092;
//   lionet::kafka::Server s(sched, store, o);
//   s.listen(lionet::Address::parse("127.0.0.1:9092").value());
//   s.start();        // then `kcat -b 127.0.0.1:9092 -t t -P` produces into the store
//   ...
//   s.stop(std::chrono::seconds(5));
//
// Owns: the TcpServer, the per-connection loop (TLS handshake, the connection's Session, frame
// size limit, idle timeout, the log line of a closed malformed connection). Must not:
// interpret requests (broker.h does).
//
// TLS (ServerOptions::tls): each connection is an SslStream over the accepted socket, its
// handshake bounded by the context's handshake_timeout; the loop then reads a Stream, TLS or
// not (a Fetch's sendfile goes through the stream: by copy over TLS without kTLS).
// SASL (ServerOptions::broker.sasl): the connection's Session starts unauthenticated; a frame
// above 512 KiB before authentication closes it (Kafka's sasl.server.max.receive.size), and
// a request refused before authentication or a failed authentication closes it with one log
// line (rate-limited, as malformed requests).
//
// Pipelining: a client may send requests without waiting; each is answered before the next is
// read, so answers leave in request order. A frame whose size is below 8 or above
// max_request_size, or that the Broker finds malformed, closes that connection only, with one
// log line (logger "kafka", at most one per second with the count of those held back).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lionet/base/clock.h"
#include "lionet/kafka/broker.h"
#include "lionet/net/address.h"
#include "lionet/net/tcp_server.h"
#include "lionet/sched/scheduler.h"
#include "lionet/ssl/ssl_context.h"
#include "lionet/storage/fwd.h"

namespace lionet::kafka {

struct ServerOptions {
  std::string name = "kafka";  // logs, fiber names. YAML: servers[].name
  // YAML: servers[].advertised_host / advertised_port. Empty host / port 0: the first listen
  // address's (its bound port when it was 0), an unspecified address (0.0.0.0, ::) as 127.0.0.1.
  BrokerOptions broker{.advertised_host = "", .advertised_port = 0};
  std::size_t max_request_size =
      100 << 20;  // one request frame at most (Kafka's socket.request.max.bytes). YAML: servers[].max_request_size
  std::size_t max_connections = 10000;  // YAML: servers[].max_connections
  std::size_t max_connections_per_address = 0;  // 0 = none. YAML: servers[].max_connections_per_address
  AddressRules admit{};  // peers refused are closed at accept. YAML: servers[].allow / deny
  Duration idle_timeout = std::chrono::minutes(
      10);  // silent connection closed (Kafka's connections.max.idle.ms). YAML: servers[].idle_timeout
  // TLS: the context each new connection uses (called once per connection, so a reloaded
  // certificate applies to the next ones). Empty: plaintext. YAML: servers[].tls
  std::function<std::shared_ptr<SslContext>()> tls{};
};

class Server {
 public:
  // Opens the Broker (its state in the store): std::runtime_error if it cannot.
  Server(Scheduler& sched, storage::Store& store, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Before start(). Throws std::system_error naming the address.
  void listen(const Address& local);
  // Settles the advertised address (see ServerOptions::broker) and starts accepting.
  void start();
  // Stops accepting, wakes parked Fetches and answers parked JoinGroup/SyncGroup requests
  // (COORDINATOR_NOT_AVAILABLE), gives connections until `drain`, then closes them.
  bool stop(Duration drain);

  std::vector<Address> addresses() const { return tcp_->addresses(); }
  TcpServer& tcp() noexcept { return *tcp_; }
  Broker& broker() noexcept { return *broker_; }

 private:
  void serve(SocketStream& s);
  void serve(Stream& s, Socket& sock);

  const ServerOptions opt_;
  std::unique_ptr<Broker> broker_;
  std::unique_ptr<TcpServer> tcp_;
  bool started_ = false, stopped_ = false;
};

}  // namespace lionet::kafka
