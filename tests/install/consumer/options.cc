// Every public Options/config struct a user fills by designated initializers, each naming one
// field only, as README and the examples do ({.threads = 2}). Compiled by the consumer with
// -Wall -Wextra -Werror: a field without a default member initializer would be a
// -Wmissing-field-initializers error here (each such field is given one, e.g. `IoOptions io{};`).
#include <chrono>
#include <string>

#include "lionet/config/registry.h"
#include "lionet/fiber/stack_pool.h"
#include "lionet/file/file.h"
#include "lionet/file/file_engine.h"
#include "lionet/file/file_watcher.h"
#include "lionet/hook/hook.h"
#include "lionet/http/access.h"
#include "lionet/http/access_log.h"
#include "lionet/http/auth.h"
#include "lionet/http/chunked_decoder.h"
#include "lionet/http/client.h"
#include "lionet/http/proxy.h"
#include "lionet/http/request_parser.h"
#include "lionet/http/server.h"
#include "lionet/http/static_files.h"
#include "lionet/http2/server.h"
#include "lionet/io/reactor.h"
#include "lionet/kafka/broker.h"
#include "lionet/kafka/group_coordinator.h"
#include "lionet/kafka/record_batch.h"
#include "lionet/kafka/sasl.h"
#include "lionet/kafka/server.h"
#include "lionet/log/log.h"
#include "lionet/net/socket.h"
#include "lionet/net/tcp_server.h"
#include "lionet/net/udp_socket.h"
#include "lionet/sched/driver.h"
#include "lionet/sched/fiber_dump.h"
#include "lionet/sched/scheduler.h"
#include "lionet/ssl/ssl_context.h"
#include "lionet/storage/log_options.h"
#include "lionet/storage/record.h"
#include "lionet/storage/store.h"
#include "lionet/sync/offload.h"
#include "lionet/syslog/server.h"
#include "lionet/websocket/client.h"
#include "lionet/websocket/deflate.h"
#include "lionet/websocket/message.h"
#include "lionet/websocket/options.h"

namespace {

template <class... T>
int count(const T&...) {
  return static_cast<int>(sizeof...(T));
}

}  // namespace

// The number of structs initialized (so that the compiler checks each initializer for real).
int designated_initializer_structs() {
  using namespace std::chrono_literals;
  char buf[16];
  return count(
      // sched/, fiber/, io/, sync/
      lionet::SchedulerOptions{.threads = 2}, lionet::SchedulerOptions{.name = "x"},
      lionet::SchedulerOptions{.io = {.backend = "epoll"}}, lionet::SpawnOptions{.name = "f"},
      lionet::SpawnOptions{.pin_worker = 0}, lionet::IoOptions{.backend = "epoll"},
      lionet::ReactorOptions{.uring_entries = 64}, lionet::StackPoolOptions{.stack_size = 65536},
      lionet::FiberDumpOptions{.max_per_group = 5}, lionet::OffloadOptions{.threads = 1},
      // net/
      lionet::ListenOptions{.backlog = 16}, lionet::UdpOptions{.reuse_port = true},
      lionet::TcpServerOptions{.max_connections = 10}, lionet::TcpServerOptions{.name = "t"},
      lionet::Datagram{.buffer = std::span<char>(buf, sizeof buf)}, lionet::Datagram{.length = 1},
      // file/, hook/, config/, log/
      lionet::FileOptions{.engine = "threadpool"}, lionet::FileEngineOptions{.queue_depth = 8},
      lionet::FileWatcherOptions{.debounce = 10ms}, lionet::hook::RegularFileOptions{.nowait_max = 1},
      lionet::config::LoadOptions{.warn_unknown = false}, lionet::log::SinkOptions{.path = "x.log"},
      lionet::log::SinkOptions{.max_files = 2}, lionet::log::LoggerOptions{.name = "x"},
      lionet::log::LoggerOptions{.async = true}, lionet::log::LogOptions{.async_queue_size = 64},
      // ssl/
      lionet::SslCertificate{.key_file = "k.pem"}, lionet::SslOptions{.verify_peer = true},
      lionet::SslOptions{.ktls = false},
      // http/, http2/
      lionet::http::ParserLimits{.max_request_line = 1024}, lionet::http::ChunkedDecoder::Limits{.max_line = 128},
      lionet::http::ServerOptions{.server_name = "x"}, lionet::http::ServerOptions{.tcp = {.name = "http"}},
      lionet::http::ClientOptions{.user_agent = "x"}, lionet::http::ClientOptions{.h2c = true},
      lionet::http::ClientRequest{.url = "http://127.0.0.1/"}, lionet::http::ClientRequest{.method = "HEAD"},
      lionet::http::ProxyUpstream{.weight = 2}, lionet::http::ProxyUpstream{.address = "127.0.0.1:1"},
      lionet::http::ProxyHealthCheck{.path = "/health"}, lionet::http::ProxyOptions{.via = true},
      lionet::http::ProxyOptions{.json_errors = true}, lionet::http::StaticOptions{.root = "."},
      lionet::http::StaticOptions{.index = "i.html"}, lionet::http::AccessLogOptions{.path = "a.log"},
      lionet::http::AccessLogOptions{.buffer_bytes = 4096}, lionet::http2::Options{.max_concurrent_streams = 16},
      lionet::http::RateLimitOptions{.rate = 5}, lionet::http::RateLimitOptions{.key_header = "X-Api-Key"},
      lionet::http::AuthOptions{.realm = "r"}, lionet::http::BrakeOptions{.max_failures = 3},
      lionet::http::ClientCertRule{.subjects = {"CN=ops"}},
      // websocket/
      lionet::websocket::Options{.max_frame_size = 1024}, lionet::websocket::Options{.deflate = {.enabled = true}},
      lionet::websocket::DeflateOptions{.enabled = true},
      lionet::websocket::Message{.type = lionet::websocket::MessageType::kBinary},
      lionet::websocket::Message{.data = "hi"},
      // storage/, kafka/, syslog/
      lionet::storage::LogOptions{.segment_bytes = 1 << 20}, lionet::storage::TopicOptions{.name = "t"},
      lionet::storage::TopicOptions{.partitions = 2}, lionet::storage::StoreOptions{.data_dir = "d"},
      lionet::storage::Record{.value = "v"}, lionet::storage::Record{.timestamp = 1},
      lionet::kafka::GroupOptions{.min_session_timeout = 1s}, lionet::kafka::BrokerOptions{.node_id = 2},
      lionet::kafka::OutRecord{.offset = 1}, lionet::kafka::ServerOptions{.name = "k"},
      lionet::kafka::SaslConfig{.mechanisms = {lionet::kafka::SaslMechanism::kPlain}},
      lionet::syslog::ServerOptions{.topic = "s"});
}
