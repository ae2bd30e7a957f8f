// lionet/kafka/broker.h: lionet::kafka::Broker, the request handlers: one request frame in, its
// response frame out, over a storage::Store. No sockets here (server.h reads and writes the
// frames), so tests drive it directly.
//
//   lionet::kafka::Broker b(store, {.advertised_host = "127.0.0.1", .advertised_port = 9092});
//   std::string resp;
//   auto o = b.handle(frame, resp);   // frame: the bytes after the 4-byte size prefix
//   if (o.kind == Broker::Outcome::kRespond) write(resp);   // resp has its size prefix
//
// Owns: ApiVersions, Metadata, Produce, Fetch, ListOffsets, InitProducerId, FindCoordinator
// and the wire side of the group APIs (protocol.h has the versions), the idempotent-producer
// state (producer_state.h), the record headers of kLionet-layout logs (header_store.h), the group coordinator (group_coordinator.h: groups and committed offsets),
// the mapping of Kafka's model onto the store's. Must not: read configuration (BrokerOptions is data), keep
// per-connection state (requests are independent, so a connection's fiber may call handle()
// for each of its requests in order), or throw on a request path.
//
// Mapping onto the store:
//  - A topic is a Store topic; a partition its Log; offsets are the store's. Metadata creates a
//    missing topic (store's default_partitions) when the request allows it and the store's
//    auto_create_topics is on; Produce never creates (Kafka's behaviour).
//  - A produced batch is checked (decode_batches: lengths, counts, CRC; a compressed one
//    inflated, at most storage.max_batch_bytes of records: MESSAGE_TOO_LARGE past it) and
//    stored as it was sent (Log::append_kafka_batches: the store's kKafka layout), headers,
//    producer fields and compression included. The HTTP API reads the same records (a null key
//    or value reads as empty there). A log in the store's older kLionet layout gets the
//    records instead, with headers kept beside them (header_store.h).
//  - acks 1 and -1 (all) are one on a single node: the response is sent when append_batch has
//    returned, i.e. when the topic's flush policy is met (every_batch: after fdatasync).
//    acks 0: appended the same way, and no response is sent (Kafka's behaviour).
//  - Fetch returns the stored batches as they are (Log::read_stored; handle()'s FileSlices let
//    the server sendfile them), from kLionet segments re-encoded as one RecordBatch per
//    partition read. It parks in Log::wait_beyond until min_bytes arrive or max_wait_ms
//    passes; over several partitions, on all of them at once (log_watchers.h).
//  - Consumer groups: FindCoordinator names this broker (node_id, the advertised address) for
//    any group; JoinGroup and SyncGroup park the request's fiber until the rebalance answers
//    them (group_coordinator.h), which holds up that connection only: clients talk to the
//    coordinator on a connection of its own. Committed offsets are kept in __kafka_offsets.
//  - Malformed requests (any DecodeError, or a Produce batch with a bad length, count, offset
//    delta or CRC) give Outcome::kClose: the server closes that connection only.
//
// Concurrency: handle() may run on any number of fibers at once (one per connection).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lionet/kafka/group_coordinator.h"
#include "lionet/kafka/producer_state.h"
#include "lionet/kafka/requests.h"
#include "lionet/kafka/sasl.h"
#include "lionet/storage/fwd.h"

namespace lionet::kafka {

struct BrokerOptions {
  std::string advertised_host = "127.0.0.1";  // what Metadata tells clients to connect to
  int32_t advertised_port = 9092;
  int32_t node_id = 1;  // this broker's id in Metadata and FindCoordinator
  std::string cluster_id = "lionet";
  GroupOptions groups{};  // consumer groups (group_coordinator.h)
  // SASL (sasl.h): set, every connection must authenticate before any API but ApiVersions,
  // SaslHandshake and SaslAuthenticate, and its user's permissions (acl.h) apply. nullptr: none.
  std::shared_ptr<const SaslConfig> sasl{};
};

// One connection's state, kept by its caller (server.h: the connection's fiber) and handed to
// every handle() of that connection: who authenticated, and the SASL exchange in progress.
struct Session {
  bool authenticated = true;  // false on a SASL listener until SaslAuthenticate succeeds
  std::string principal;  // the SASL user ("" without SASL)
  const Permissions* permissions = nullptr;  // the user's (acl.h); nullptr: everything allowed
  bool raw_tokens = false;  // after SaslHandshake v0: the next frames are bare SASL tokens
  std::unique_ptr<SaslExchange> exchange;  // between SaslHandshake and the last token
};

struct BrokerStats {
  uint64_t requests = 0;
  uint64_t records_in = 0;  // appended by Produce
  uint64_t records_out = 0;  // returned by Fetch
  uint64_t duplicates = 0;  // idempotent retries acknowledged without an append
  uint64_t malformed = 0;  // requests that closed their connection
  GroupStats groups;
  uint64_t sasl_ok[kSaslMechanismCount] = {};  // authentications, by SaslMechanism
  uint64_t sasl_failed[kSaslMechanismCount] = {};
  uint64_t unauthenticated = 0;  // requests before authentication (each closed its connection)
  uint64_t topic_denied = 0;  // TOPIC_AUTHORIZATION_FAILED answered (per topic or partition)
  uint64_t group_denied = 0;  // GROUP_AUTHORIZATION_FAILED answered
  uint64_t cluster_denied = 0;  // CLUSTER_AUTHORIZATION_FAILED (InitProducerId without produce rights)
};

// Stored bytes of a segment that belong in a response at position `at` of its buffer.
struct FileSlice {
  std::size_t at = 0;
  std::shared_ptr<const void> keep;  // the segment, open while the slice is sent
  storage::File* file = nullptr;
  uint64_t position = 0;
  uint64_t bytes = 0;
};

class Broker {
 public:
  // Opens the idempotent-producer state, the header index and the committed offsets in
  // `store` (internal topics __kafka_producers, __kafka_headers and __kafka_offsets). Throws
  // std::runtime_error if it cannot.
  Broker(storage::Store& store, BrokerOptions options);
  ~Broker();

  struct Outcome {
    // kRespondAndClose: a SASL failure, answered, then the connection is closed.
    enum Kind { kRespond, kNoResponse, kClose, kRespondAndClose } kind = kRespond;
    const char* why = "";  // kClose: what was malformed
    bool refused = false;  // closed for security (SASL), not for a malformed request
  };
  // A new connection's state: unauthenticated when the listener has SASL.
  Session new_session() const;
  // `response` is cleared, then (kRespond) holds the whole response frame, size prefix included.
  // Stored batches a Fetch returns are read into it (pread).
  Outcome handle(std::string_view frame, std::string& response);
  // The same, but the stored batches of a Fetch stay where they are: the frame is `response`
  // with each slice's bytes inserted at its `at` (in order; the size prefix and the records'
  // lengths count them), for the server to send with sendfile.
  Outcome handle(std::string_view frame, std::string& response, std::vector<FileSlice>& slices);
  // The same on a connection's Session (SASL state, the user's permissions). After a
  // SaslHandshake v0 the next frames are bare SASL tokens (session.raw_tokens): answered with a
  // bare size-prefixed token; a failure closes.
  Outcome handle(std::string_view frame, std::string& response, std::vector<FileSlice>& slices, Session& session);

  // Sets the address Metadata advertises. Only before the first handle() (not synchronised).
  void advertise(std::string host, int32_t port);
  // Wakes every Fetch parked in the store's logs (shutdown) and ends the watcher fibers;
  // later Fetches do not wait. Answers parked JoinGroup/SyncGroup requests (COORDINATOR_NOT_
  // AVAILABLE) and ends the groups' timer fibers. Idempotent; the destructor calls it.
  void stop();
  BrokerStats stats() const noexcept;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace lionet::kafka
