// lionet/http/server.cc: serve_connection() and Server (see server.h).
#include "lionet/http/server.h"

#include "lionet/http/status.h"

#include <stdexcept>

#include "lionet/http/detail/connection.h"
#include "lionet/io/io_manager.h"

namespace lionet::http {

void serve_connection(Stream& stream, const Handler& handler, const ServerOptions& options,
                      const std::atomic<bool>* stopping, ServerStats* stats, const ConnectionInfo* info) {
  detail::Connection conn(stream, handler, options, stopping, stats, info);
  conn.run();
}

Server::Server(IOManager& io, Handler handler, ServerOptions options)
    : Server(io.scheduler(), std::move(handler), std::move(options)) {}

Server::Server(Scheduler& sched, Handler handler, ServerOptions options)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      tcp_(
          sched, [this](SocketStream& s) { serve(s); },
          [this] {
            TcpServerOptions t = options_.tcp;
            if (t.name == "tcp") t.name = "http";
            return t;
          }()) {}

void overrule_for_body_error(Response& res, int status, std::string_view why) {
  if (res.status() == status && res.body_type() == Response::BodyType::kMemory) return;
  res.reset();
  res.reply(status, error_text(status, why));
}

void Server::set_stream_factory(StreamFactory f, bool tls) {
  factory_ = std::move(f);
  tls_ = tls;
}

void Server::listen(const Address& local) { tcp_.listen(local); }

void Server::start() { tcp_.start(); }

bool Server::stop(Duration drain) {
  stopping_.store(true, std::memory_order_release);
  return tcp_.stop(drain);
}

void Server::serve(SocketStream& s) {
  ConnectionInfo info{&s.socket(), false};
  if (!factory_) {
    info.stream = &s;
    serve_connection(s, handler_, options_, &stopping_, &stats_, &info);
    return;
  }
  std::unique_ptr<Stream> wrapped = factory_(s);
  if (!wrapped) return;
  info.tls = tls_;
  info.stream = wrapped.get();
  serve_connection(*wrapped, handler_, options_, &stopping_, &stats_, &info);
  wrapped->close();
}
}  // namespace lionet::http
