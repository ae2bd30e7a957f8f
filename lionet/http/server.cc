// lionet/http/server.cc: serve_connection() and Server (see server.h).
#include "lionet/http/server.h"

#include <stdexcept>

#include "lionet/http/detail/connection.h"

namespace lionet::http {

void serve_connection(Stream& stream, const Handler& handler, const ServerOptions& options,
                      const std::atomic<bool>* stopping, ServerStats* stats) {
  detail::Connection conn(stream, handler, options, stopping, stats);
  conn.run();
}

Server::Server(IOManager& io, Handler handler, ServerOptions options)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      tcp_(io, [this](SocketStream& s) { serve(s); }, [this] {
        TcpServerOptions t = options_.tcp;
        if (t.name == "tcp") t.name = "http";
        return t;
      }()) {}

void Server::set_stream_factory(StreamFactory f) { factory_ = std::move(f); }

void Server::listen(const Address& local) { tcp_.listen(local); }

void Server::start() { tcp_.start(); }

bool Server::stop(Duration drain) {
  stopping_.store(true, std::memory_order_release);
  return tcp_.stop(drain);
}

void Server::serve(SocketStream& s) {
  if (!factory_) {
    serve_connection(s, handler_, options_, &stopping_, &stats_);
    return;
  }
  std::unique_ptr<Stream> wrapped = factory_(s);
  if (!wrapped) return;
  serve_connection(*wrapped, handler_, options_, &stopping_, &stats_);
  wrapped->close();
}
}  // namespace lionet::http
