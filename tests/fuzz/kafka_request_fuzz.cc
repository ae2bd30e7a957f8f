// libFuzzer target for lionet/kafka's request decoder: any bytes as one request frame (what
// follows the size prefix). decode_header_prefix and decode_request must refuse or accept
// without reading past the input; every view of an accepted request lies inside the input
// (the group APIs' too: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
// OffsetCommit, OffsetFetch, whose version-dependent shapes are checked as well);
// every Produce partition's records go through decode_batches, whose accepted records' views
// lie inside them too (or inside a compressed batch's inflated copy, never past the inflate
// limit) and whose batches re-encode (encode_batch) to bytes that decode again to
// the same keys, values and headers.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "lionet/kafka/record_batch.h"
#include "lionet/kafka/requests.h"

namespace {
using namespace lionet::kafka;

void inside(std::string_view outer, std::string_view v) {
  if (v.empty()) return;
  if (v.data() < outer.data() || v.data() + v.size() > outer.data() + outer.size()) std::abort();
}
void inside(std::string_view outer, const std::optional<std::string_view>& v) {
  if (v) inside(outer, *v);
}

void check_batches(std::string_view records) {
  std::vector<DecodedBatch> batches;
  // A compressed batch inflates to 1 MiB at most here (the broker: storage.max_batch_bytes).
  if (decode_batches(records, batches, std::size_t{1} << 20).code != ErrorCode::kNone) return;
  for (const DecodedBatch& b : batches) {
    std::vector<OutRecord> out;
    int64_t off = 0;
    // A compressed batch's views lie in its own inflated copy, the others' in the input.
    const std::string_view outer = b.inflated ? std::string_view(*b.inflated) : records;
    if (b.inflated && b.inflated->size() > (std::size_t{1} << 20)) std::abort();
    for (const DecodedRecord& r : b.records) {
      inside(outer, r.key);
      inside(outer, r.value);
      inside(outer, r.headers);
      out.push_back({off++, r.timestamp, r.key.value_or(""), r.value.value_or(""), r.headers});
    }
    std::string again;
    encode_batch(out, again);
    std::vector<DecodedBatch> back;
    if (decode_batches(again, back).code != ErrorCode::kNone || back.size() != 1) std::abort();
    if (back[0].records.size() != b.records.size()) std::abort();
    for (std::size_t i = 0; i < b.records.size(); ++i) {
      const DecodedRecord& x = b.records[i];
      const DecodedRecord& y = back[0].records[i];
      if (x.key.value_or("") != y.key.value_or("") || x.value.value_or("") != y.value.value_or("") ||
          x.headers != y.headers || x.timestamp != y.timestamp)
        std::abort();
    }
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  RequestHeader h;
  RequestBody body;
  (void)decode_header_prefix(in, h);
  if (decode_request(in, h, body)) {
    check_batches(in);  // the same bytes as a Produce partition's records
    return 0;
  }
  inside(in, h.client_id);
  if (auto* p = std::get_if<ProduceRequest>(&body)) {
    inside(in, p->transactional_id);
    for (const auto& t : p->topics) {
      inside(in, t.name);
      for (const auto& part : t.partitions) {
        inside(in, part.records);
        if (part.records) check_batches(*part.records);
      }
    }
  } else if (auto* m = std::get_if<MetadataRequest>(&body)) {
    if (m->topics)
      for (auto t : *m->topics) inside(in, t);
  } else if (auto* f = std::get_if<FetchRequest>(&body)) {
    for (const auto& t : f->topics) inside(in, t.name);
  } else if (auto* l = std::get_if<ListOffsetsRequest>(&body)) {
    for (const auto& t : l->topics) inside(in, t.name);
  } else if (auto* fc = std::get_if<FindCoordinatorRequest>(&body)) {
    inside(in, fc->key);
    if (h.api_version == 0 && fc->key_type != 0) std::abort();
  } else if (auto* j = std::get_if<JoinGroupRequest>(&body)) {
    inside(in, j->group_id);
    inside(in, j->member_id);
    inside(in, j->group_instance_id);
    inside(in, j->protocol_type);
    for (const auto& p : j->protocols) {
      inside(in, p.name);
      inside(in, p.metadata);
    }
    if (h.api_version == 0 && j->rebalance_timeout_ms != j->session_timeout_ms) std::abort();
    if (h.api_version < 5 && j->group_instance_id) std::abort();
  } else if (auto* sg = std::get_if<SyncGroupRequest>(&body)) {
    inside(in, sg->group_id);
    inside(in, sg->member_id);
    inside(in, sg->group_instance_id);
    for (const auto& a : sg->assignments) {
      inside(in, a.member_id);
      inside(in, a.assignment);
    }
  } else if (auto* hb = std::get_if<HeartbeatRequest>(&body)) {
    inside(in, hb->group_id);
    inside(in, hb->member_id);
    inside(in, hb->group_instance_id);
  } else if (auto* lg = std::get_if<LeaveGroupRequest>(&body)) {
    inside(in, lg->group_id);
    for (const auto& m : lg->members) {
      inside(in, m.member_id);
      inside(in, m.group_instance_id);
    }
    if (h.api_version <= 2 && lg->members.size() != 1) std::abort();  // v0-2: one member_id
  } else if (auto* oc = std::get_if<OffsetCommitRequest>(&body)) {
    inside(in, oc->group_id);
    inside(in, oc->member_id);
    inside(in, oc->group_instance_id);
    for (const auto& t : oc->topics) {
      inside(in, t.name);
      for (const auto& p : t.partitions) inside(in, p.metadata);
    }
  } else if (auto* of = std::get_if<OffsetFetchRequest>(&body)) {
    inside(in, of->group_id);
    if (!of->topics && h.api_version < 2) std::abort();  // null: v2+ only
    if (of->topics)
      for (const auto& t : *of->topics) inside(in, t.name);
  }
  return 0;
}
