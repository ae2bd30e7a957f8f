// lionet/http/server.cc: serve_connection() and Server (see server.h).
#include "lionet/http/server.h"

#include "lionet/http/status.h"

#include <stdexcept>

#include "lionet/http/detail/connection.h"
#include "lionet/http/detail/log.h"
#include "lionet/io/io_manager.h"

namespace lionet::http {

namespace {
// The HTTP/1 connection in a frame of its own, so that an HTTP/2 session it hands over to runs
// without it below: its object (~1.3 KiB of stack) and its heap (parser, request, response,
// buffers) are gone, and an idle HTTP/2 connection's fiber stays within one page of stack.
[[gnu::noinline]] bool serve_http1(Stream& stream, const Handler& handler, const ServerOptions& options,
                                   const std::atomic<bool>* stopping, ServerStats* stats, const ConnectionInfo* info,
                                   std::string& prefix) {
  detail::Connection conn(stream, handler, options, stopping, stats, info);
  return conn.run(prefix);
}
}  // namespace

void serve_connection(Stream& stream, const Handler& handler, const ServerOptions& options,
                      const std::atomic<bool>* stopping, ServerStats* stats, const ConnectionInfo* info) {
  std::string prefix;
  // TLS chose HTTP/2 (ALPN): no HTTP/1 connection is made at all.
  const bool h2 = options.http2 && stream.application_protocol() == "h2";
  if (!h2 && !serve_http1(stream, handler, options, stopping, stats, info, prefix)) return;
  try {
    options.http2({stream, prefix, handler, options, stopping, stats, info});
  } catch (const std::exception& e) {
    LIONET_LOG_ERROR(detail::http_log(), "HTTP/2 connection ended by exception: {}", e.what());
  } catch (...) {
    LIONET_LOG_ERROR(detail::http_log(), "HTTP/2 connection ended by a non-std exception");
  }
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
