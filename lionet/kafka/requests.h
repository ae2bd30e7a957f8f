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

using RequestBody = std::variant<ApiVersionsRequest, MetadataRequest, ProduceRequest, FetchRequest,
                                 ListOffsetsRequest, InitProducerIdRequest>;

struct DecodeError {
  const char* why = nullptr;  // nullptr: no error
  explicit operator bool() const noexcept { return why != nullptr; }
};

// The first 8 bytes: api key, version, correlation id (client_id not read). Error: frame < 8 B.
DecodeError decode_header_prefix(std::string_view frame, RequestHeader& h);
// The whole request of a supported (api, version): header v1 then the body, with nothing left.
DecodeError decode_request(std::string_view frame, RequestHeader& h, RequestBody& body);

}  // namespace lionet::kafka
