// lionet/kafka/requests.h: request frames decoded into plain structs: the request header (v1)
// and the body of each implemented API at each implemented version (protocol.h's ranges).
//
// Owns: RequestHeader, the *Request structs, decode_header(), decode_request(). Must not: act on
// a request (broker.h does) or copy payloads (every string_view points into the frame, which
// must outlive the struct).
//
// A frame is what follows the 4-byte size prefix. decode_header() needs only 8 bytes to learn
// the API, version and correlation id, so an unsupported version (a flexible one, with its
// header v2) is still answered; the rest is decoded only for supported versions. Any
// malformation (lengths or counts past the frame, negative lengths, bytes left over) is a
// DecodeError: the connection is closed, as Kafka does.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

namespace lionet::kafka {

struct RequestHeader {
  int16_t api_key = 0;
  int16_t api_version = 0;
  int32_t correlation_id = 0;
  std::optional<std::string_view> client_id;
};

struct ApiVersionsRequest {};

struct MetadataRequest {
  std::optional<std::vector<std::string_view>> topics;  // nullopt: every topic
  bool allow_auto_topic_creation = true;
};

struct ProduceRequest {
  std::optional<std::string_view> transactional_id;
  int16_t acks = -1;
  int32_t timeout_ms = 0;
  struct Partition {
    int32_t index = 0;
    std::optional<std::string_view> records;
  };
  struct Topic {
    std::string_view name;
    std::vector<Partition> partitions;
  };
  std::vector<Topic> topics;
};

struct FetchRequest {
  int32_t max_wait_ms = 0;
  int32_t min_bytes = 0;
  int32_t max_bytes = 0x7fffffff;
  int8_t isolation_level = 0;
  int32_t session_id = 0;
  int32_t session_epoch = -1;
  struct Partition {
    int32_t index = 0;
    int64_t fetch_offset = 0;
    int32_t max_bytes = 0;
  };
  struct Topic {
    std::string_view name;
    std::vector<Partition> partitions;
  };
  std::vector<Topic> topics;
};

struct ListOffsetsRequest {
  struct Partition {
    int32_t index = 0;
    int64_t timestamp = 0;  // -1 latest, -2 earliest, else ms since the epoch
  };
  struct Topic {
    std::string_view name;
    std::vector<Partition> partitions;
  };
  std::vector<Topic> topics;
};

struct InitProducerIdRequest {
  std::optional<std::string_view> transactional_id;
  int32_t transaction_timeout_ms = 0;
};

// ---- Consumer groups (group_coordinator.h acts on them). group_instance_id is read where the
// version has it (JoinGroup 5, SyncGroup 3, Heartbeat 3, OffsetCommit 7, LeaveGroup 3's members).

struct FindCoordinatorRequest {
  std::string_view key;  // the group id (key_type 0) or a transactional id (1)
  int8_t key_type = 0;  // v1+
};

struct JoinGroupRequest {
  std::string_view group_id;
  int32_t session_timeout_ms = 0;
  int32_t rebalance_timeout_ms = -1;  // v1+; v0: the session timeout
  std::string_view member_id;  // "" on a first join
  std::optional<std::string_view> group_instance_id;  // v5+
  std::string_view protocol_type;  // "consumer" for consumers
  struct Protocol {
    std::string_view name;  // the assignor: "range", "roundrobin", ...
    std::string_view metadata;
  };
  std::vector<Protocol> protocols;  // the member's preference order
};

struct SyncGroupRequest {
  std::string_view group_id;
  int32_t generation_id = -1;
  std::string_view member_id;
  std::optional<std::string_view> group_instance_id;  // v3+
  struct Assignment {
    std::string_view member_id;
    std::string_view assignment;
  };
  std::vector<Assignment> assignments;  // the leader's; empty from followers
};

struct HeartbeatRequest {
  std::string_view group_id;
  int32_t generation_id = -1;
  std::string_view member_id;
  std::optional<std::string_view> group_instance_id;  // v3+
};

struct LeaveGroupRequest {
  std::string_view group_id;
  struct Member {
    std::string_view member_id;
    std::optional<std::string_view> group_instance_id;
  };
  std::vector<Member> members;  // v0-2: the one member_id of the request; v3: a batch
};

struct OffsetCommitRequest {
  std::string_view group_id;
  int32_t generation_id = -1;  // -1: a commit outside group management (a standalone consumer)
  std::string_view member_id;
  std::optional<std::string_view> group_instance_id;  // v7+
  struct Partition {
    int32_t index = 0;
    int64_t offset = 0;
    int32_t leader_epoch = -1;  // v6+
    std::optional<std::string_view> metadata;
  };
  struct Topic {
    std::string_view name;
    std::vector<Partition> partitions;
  };
  std::vector<Topic> topics;
};

struct OffsetFetchRequest {
  std::string_view group_id;
  struct Topic {
    std::string_view name;
    std::vector<int32_t> partitions;
  };
  std::optional<std::vector<Topic>> topics;  // nullopt (v2+): every committed partition
};

// ---- SASL (sasl.h acts on the tokens)

struct SaslHandshakeRequest {
  std::string_view mechanism;
};

struct SaslAuthenticateRequest {
  std::string_view auth_bytes;
};

using RequestBody = std::variant<ApiVersionsRequest, MetadataRequest, ProduceRequest, FetchRequest, ListOffsetsRequest,
                                 InitProducerIdRequest, FindCoordinatorRequest, JoinGroupRequest, SyncGroupRequest,
                                 HeartbeatRequest, LeaveGroupRequest, OffsetCommitRequest, OffsetFetchRequest,
                                 SaslHandshakeRequest, SaslAuthenticateRequest>;

struct DecodeError {
  const char* why = nullptr;  // nullptr: no error
  explicit operator bool() const noexcept { return why != nullptr; }
};

// The first 8 bytes: api key, version, correlation id (client_id not read). Error: frame < 8 B.
DecodeError decode_header_prefix(std::string_view frame, RequestHeader& h);
// The whole request of a supported (api, version): header v1 then the body, with nothing left.
DecodeError decode_request(std::string_view frame, RequestHeader& h, RequestBody& body);

}  // namespace lionet::kafka
