// lionet/kafka/requests.cc: request decoding (see requests.h). Field lists follow Kafka's
// message definitions (clients/src/main/resources/common/message/*Request.json); a field is
// read only in the versions that have it.
#include "lionet/kafka/requests.h"

#include "lionet/kafka/codec.h"
#include "lionet/kafka/protocol.h"

namespace lionet::kafka {
namespace {

MetadataRequest metadata(Reader& r, int16_t v) {
  MetadataRequest m;
  const int32_t n = r.array_count(true, 2);
  if (n >= 0) {
    m.topics.emplace();
    for (int32_t i = 0; i < n && r.ok(); ++i) m.topics->push_back(r.string());
  }
  if (v >= 4) m.allow_auto_topic_creation = r.boolean();
  if (v >= 8) {
    r.boolean();  // include_cluster_authorized_operations
    r.boolean();  // include_topic_authorized_operations
  }
  return m;
}

ProduceRequest produce(Reader& r, int16_t v) {
  ProduceRequest p;
  if (v >= 3) p.transactional_id = r.nullable_string();
  p.acks = r.i16();
  p.timeout_ms = r.i32();
  const int32_t nt = r.array_count(false, 6);
  for (int32_t i = 0; i < nt && r.ok(); ++i) {
    ProduceRequest::Topic t;
    t.name = r.string();
    const int32_t np = r.array_count(false, 8);
    for (int32_t j = 0; j < np && r.ok(); ++j) {
      ProduceRequest::Partition part;
      part.index = r.i32();
      part.records = r.nullable_bytes();
      t.partitions.push_back(part);
    }
    p.topics.push_back(std::move(t));
  }
  return p;
}

FetchRequest fetch(Reader& r, int16_t v) {
  FetchRequest f;
  r.i32();  // replica_id
  f.max_wait_ms = r.i32();
  f.min_bytes = r.i32();
  if (v >= 3) f.max_bytes = r.i32();
  if (v >= 4) f.isolation_level = r.i8();
  if (v >= 7) {
    f.session_id = r.i32();
    f.session_epoch = r.i32();
  }
  const int32_t nt = r.array_count(false, 6);
  for (int32_t i = 0; i < nt && r.ok(); ++i) {
    FetchRequest::Topic t;
    t.name = r.string();
    const int32_t np = r.array_count(false, 16);
    for (int32_t j = 0; j < np && r.ok(); ++j) {
      FetchRequest::Partition part;
      part.index = r.i32();
      if (v >= 9) r.i32();  // current_leader_epoch
      part.fetch_offset = r.i64();
      if (v >= 5) r.i64();  // log_start_offset (a follower's)
      part.max_bytes = r.i32();
      t.partitions.push_back(part);
    }
    f.topics.push_back(std::move(t));
  }
  if (v >= 7) {  // forgotten topics: only meaningful in fetch sessions, which we do not keep
    const int32_t nf = r.array_count(false, 6);
    for (int32_t i = 0; i < nf && r.ok(); ++i) {
      r.string();
      const int32_t np = r.array_count(false, 4);
      for (int32_t j = 0; j < np && r.ok(); ++j) r.i32();
    }
  }
  if (v >= 11) r.string();  // rack_id
  return f;
}

ListOffsetsRequest list_offsets(Reader& r, int16_t v) {
  ListOffsetsRequest l;
  r.i32();  // replica_id
  if (v >= 2) r.i8();  // isolation_level
  const int32_t nt = r.array_count(false, 6);
  for (int32_t i = 0; i < nt && r.ok(); ++i) {
    ListOffsetsRequest::Topic t;
    t.name = r.string();
    const int32_t np = r.array_count(false, 12);
    for (int32_t j = 0; j < np && r.ok(); ++j) {
      ListOffsetsRequest::Partition part;
      part.index = r.i32();
      if (v >= 4) r.i32();  // current_leader_epoch
      part.timestamp = r.i64();
      t.partitions.push_back(part);
    }
    l.topics.push_back(std::move(t));
  }
  return l;
}

FindCoordinatorRequest find_coordinator(Reader& r, int16_t v) {
  FindCoordinatorRequest f;
  f.key = r.string();
  if (v >= 1) f.key_type = r.i8();
  return f;
}

JoinGroupRequest join_group(Reader& r, int16_t v) {
  JoinGroupRequest j;
  j.group_id = r.string();
  j.session_timeout_ms = r.i32();
  j.rebalance_timeout_ms = v >= 1 ? r.i32() : j.session_timeout_ms;
  j.member_id = r.string();
  if (v >= 5) j.group_instance_id = r.nullable_string();
  j.protocol_type = r.string();
  const int32_t n = r.array_count(false, 6);
  for (int32_t i = 0; i < n && r.ok(); ++i) {
    JoinGroupRequest::Protocol p;
    p.name = r.string();
    p.metadata = r.bytes();
    j.protocols.push_back(p);
  }
  return j;
}

SyncGroupRequest sync_group(Reader& r, int16_t v) {
  SyncGroupRequest s;
  s.group_id = r.string();
  s.generation_id = r.i32();
  s.member_id = r.string();
  if (v >= 3) s.group_instance_id = r.nullable_string();
  const int32_t n = r.array_count(false, 6);
  for (int32_t i = 0; i < n && r.ok(); ++i) {
    SyncGroupRequest::Assignment a;
    a.member_id = r.string();
    a.assignment = r.bytes();
    s.assignments.push_back(a);
  }
  return s;
}

HeartbeatRequest heartbeat(Reader& r, int16_t v) {
  HeartbeatRequest h;
  h.group_id = r.string();
  h.generation_id = r.i32();
  h.member_id = r.string();
  if (v >= 3) h.group_instance_id = r.nullable_string();
  return h;
}

LeaveGroupRequest leave_group(Reader& r, int16_t v) {
  LeaveGroupRequest l;
  l.group_id = r.string();
  if (v <= 2) {
    l.members.push_back({r.string(), std::nullopt});
    return l;
  }
  const int32_t n = r.array_count(false, 4);
  for (int32_t i = 0; i < n && r.ok(); ++i) {
    LeaveGroupRequest::Member m;
    m.member_id = r.string();
    m.group_instance_id = r.nullable_string();
    l.members.push_back(m);
  }
  return l;
}

OffsetCommitRequest offset_commit(Reader& r, int16_t v) {
  OffsetCommitRequest c;
  c.group_id = r.string();
  c.generation_id = r.i32();  // v1+ (v2 is the lowest implemented)
  c.member_id = r.string();
  if (v >= 7) c.group_instance_id = r.nullable_string();
  if (v <= 4) r.i64();  // retention_time_ms (v2-4): offsets follow the store's retention
  const int32_t nt = r.array_count(false, 6);
  for (int32_t i = 0; i < nt && r.ok(); ++i) {
    OffsetCommitRequest::Topic t;
    t.name = r.string();
    const int32_t np = r.array_count(false, 14);
    for (int32_t j = 0; j < np && r.ok(); ++j) {
      OffsetCommitRequest::Partition p;
      p.index = r.i32();
      p.offset = r.i64();
      if (v >= 6) p.leader_epoch = r.i32();
      p.metadata = r.nullable_string();
      t.partitions.push_back(p);
    }
    c.topics.push_back(std::move(t));
  }
  return c;
}

OffsetFetchRequest offset_fetch(Reader& r, int16_t v) {
  OffsetFetchRequest f;
  f.group_id = r.string();
  const int32_t nt = r.array_count(v >= 2, 6);
  if (nt < 0) return f;  // null (v2+): every partition the group committed
  f.topics.emplace();
  for (int32_t i = 0; i < nt && r.ok(); ++i) {
    OffsetFetchRequest::Topic t;
    t.name = r.string();
    const int32_t np = r.array_count(false, 4);
    for (int32_t j = 0; j < np && r.ok(); ++j) t.partitions.push_back(r.i32());
    f.topics->push_back(std::move(t));
  }
  return f;
}

}  // namespace

DecodeError decode_header_prefix(std::string_view frame, RequestHeader& h) {
  Reader r(frame);
  h.api_key = r.i16();
  h.api_version = r.i16();
  h.correlation_id = r.i32();
  if (!r.ok()) return {"a request shorter than its header"};
  return {};
}

DecodeError decode_request(std::string_view frame, RequestHeader& h, RequestBody& body) {
  Reader r(frame);
  h.api_key = r.i16();
  h.api_version = r.i16();
  h.correlation_id = r.i32();
  h.client_id = r.nullable_string();
  if (!r.ok()) return {"a request shorter than its header"};
  const int16_t v = h.api_version;
  if (!supported(h.api_key, v)) return {"an unsupported API or version"};
  switch (static_cast<ApiKey>(h.api_key)) {
    case ApiKey::kApiVersions: body = ApiVersionsRequest{}; break;
    case ApiKey::kMetadata: body = metadata(r, v); break;
    case ApiKey::kProduce: body = produce(r, v); break;
    case ApiKey::kFetch: body = fetch(r, v); break;
    case ApiKey::kListOffsets: body = list_offsets(r, v); break;
    case ApiKey::kInitProducerId: {
      InitProducerIdRequest ip;
      ip.transactional_id = r.nullable_string();
      ip.transaction_timeout_ms = r.i32();
      body = ip;
      break;
    }
    case ApiKey::kFindCoordinator: body = find_coordinator(r, v); break;
    case ApiKey::kJoinGroup: body = join_group(r, v); break;
    case ApiKey::kSyncGroup: body = sync_group(r, v); break;
    case ApiKey::kHeartbeat: body = heartbeat(r, v); break;
    case ApiKey::kLeaveGroup: body = leave_group(r, v); break;
    case ApiKey::kOffsetCommit: body = offset_commit(r, v); break;
    case ApiKey::kOffsetFetch: body = offset_fetch(r, v); break;
    case ApiKey::kSaslHandshake: body = SaslHandshakeRequest{r.string()}; break;
    case ApiKey::kSaslAuthenticate:
      if (v >= 2) {  // flexible (KIP-482): request header v2's tagged fields, compact bytes
        r.skip_tagged_fields();
        body = SaslAuthenticateRequest{r.compact_bytes()};
        r.skip_tagged_fields();
      } else {
        body = SaslAuthenticateRequest{r.bytes()};
      }
      break;
  }
  if (!r.ok()) return {r.error()};
  if (!r.at_end()) return {"bytes after the request's last field"};
  return {};
}

}  // namespace lionet::kafka
