// lionet/kafka/protocol.h: the Kafka protocol's numbers this layer speaks: API keys, error
// codes, and the version range of each API it implements (what ApiVersions advertises).
//
// Owns: ApiKey, ErrorCode, kSupportedApis and supported(). Must not: encode or decode anything
// (codec.h, requests.h, record_batch.h do), or advertise a version that is not implemented.
//
// Versions: only non-flexible ones (request header v1, response header v0). The ranges reach
// down to Produce 3 and Fetch 4 because librdkafka disables its v2 record format (MsgVer2)
// unless both are advertised, and include ApiVersions 0 because librdkafka retries a refused
// ApiVersions v3 with v0 (it cannot read the v0-format refusal as v3). The group APIs
// (group_coordinator.h) reach down to 0 (OffsetCommit 2, OffsetFetch 1) and up to the last
// non-flexible version of each. SaslHandshake (0-1) and SaslAuthenticate (0-2) are advertised
// on every listener (Kafka does too); a listener without SASL refuses them. SaslAuthenticate
// v2 is the one flexible version spoken (request header v2, response header v1, compact fields).
#pragma once

#include <cstdint>
#include <span>

namespace lionet::kafka {

enum class ApiKey : int16_t {
  kProduce = 0,
  kFetch = 1,
  kListOffsets = 2,
  kMetadata = 3,
  kOffsetCommit = 8,
  kOffsetFetch = 9,
  kFindCoordinator = 10,
  kJoinGroup = 11,
  kHeartbeat = 12,
  kLeaveGroup = 13,
  kSyncGroup = 14,
  kSaslHandshake = 17,
  kApiVersions = 18,
  kInitProducerId = 22,
  kSaslAuthenticate = 36,
};

// Kafka's error codes (org.apache.kafka.common.protocol.Errors) that this layer returns.
enum class ErrorCode : int16_t {
  kUnknownServerError = -1,
  kNone = 0,
  kOffsetOutOfRange = 1,
  kCorruptMessage = 2,
  kUnknownTopicOrPartition = 3,
  kMessageTooLarge = 10,
  kOffsetMetadataTooLarge = 12,
  kCoordinatorNotAvailable = 15,
  kInvalidTopic = 17,
  kRecordListTooLarge = 18,
  kInvalidRequiredAcks = 21,
  kIllegalGeneration = 22,
  kInconsistentGroupProtocol = 23,
  kInvalidGroupId = 24,
  kUnknownMemberId = 25,
  kInvalidSessionTimeout = 26,
  kRebalanceInProgress = 27,
  kTopicAuthorizationFailed = 29,
  kGroupAuthorizationFailed = 30,
  kClusterAuthorizationFailed = 31,
  kUnsupportedSaslMechanism = 33,
  kIllegalSaslState = 34,
  kUnsupportedVersion = 35,
  kInvalidRequest = 42,
  kOutOfOrderSequenceNumber = 45,
  kInvalidProducerEpoch = 47,
  kTransactionalIdAuthorizationFailed = 53,
  kKafkaStorageError = 56,
  kSaslAuthenticationFailed = 58,
  kUnknownProducerId = 59,
  kFetchSessionIdNotFound = 70,
  kUnsupportedCompressionType = 76,
  kMemberIdRequired = 79,
};

struct ApiRange {
  ApiKey key;
  int16_t min;
  int16_t max;
};

// Exactly what the request handlers implement (broker.h), in api-key order.
inline constexpr ApiRange kSupportedApis[] = {
    {ApiKey::kProduce, 3, 8},         {ApiKey::kFetch, 4, 11},         {ApiKey::kListOffsets, 1, 5},
    {ApiKey::kMetadata, 1, 8},        {ApiKey::kOffsetCommit, 2, 7},   {ApiKey::kOffsetFetch, 1, 5},
    {ApiKey::kFindCoordinator, 0, 2}, {ApiKey::kJoinGroup, 0, 5},      {ApiKey::kHeartbeat, 0, 3},
    {ApiKey::kLeaveGroup, 0, 3},      {ApiKey::kSyncGroup, 0, 3},      {ApiKey::kSaslHandshake, 0, 1},
    {ApiKey::kApiVersions, 0, 2},     {ApiKey::kInitProducerId, 0, 1}, {ApiKey::kSaslAuthenticate, 0, 2},
};

inline bool supported(int16_t api_key, int16_t version) noexcept {
  for (const ApiRange& r : kSupportedApis)
    if (static_cast<int16_t>(r.key) == api_key) return version >= r.min && version <= r.max;
  return false;
}

}  // namespace lionet::kafka
