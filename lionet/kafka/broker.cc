// lionet/kafka/broker.cc: the request handlers (see broker.h). Response layouts follow Kafka's
// message definitions (common/message/*Response.json), field by field per version.
#include "lionet/kafka/broker.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <vector>

#include "lionet/base/clock.h"
#include "lionet/kafka/codec.h"
#include "lionet/kafka/detail/buffer_pool.h"
#include "lionet/kafka/header_store.h"
#include "lionet/kafka/log_watchers.h"
#include "lionet/kafka/protocol.h"
#include "lionet/kafka/record_batch.h"
#include "lionet/log/log.h"
#include "lionet/storage/file_system.h"
#include "lionet/storage/store.h"

namespace lionet::kafka {
namespace {

ErrorCode from_storage(const std::error_code& ec) {
  if (ec == storage::Errc::kNotFound || ec == storage::Errc::kInvalidArgument)
    return ErrorCode::kUnknownTopicOrPartition;
  if (ec == storage::Errc::kOffsetOutOfRange) return ErrorCode::kOffsetOutOfRange;
  if (ec == storage::Errc::kRecordTooLarge) return ErrorCode::kMessageTooLarge;
  return ErrorCode::kKafkaStorageError;  // kCorrupt, kLogFailed, IO errors
}

// An append's error: kInvalidArgument there is a batch the store refused (decode_batches
// accepted it, so the store's stricter rules did: CreateTime, no transaction or control bits).
ErrorCode append_error(const std::error_code& ec) {
  return ec == storage::Errc::kInvalidArgument ? ErrorCode::kCorruptMessage : from_storage(ec);
}

int16_t code(ErrorCode e) { return static_cast<int16_t>(e); }

bool internal_topic(std::string_view name) { return name.substr(0, 7) == "__kafka"; }

int32_t seq_add(int32_t base, int32_t n) {  // Kafka's sequences wrap at INT32_MAX to 0
  const int64_t s = static_cast<int64_t>(base) + n;
  return static_cast<int32_t>(s > INT32_MAX ? s - INT32_MAX - 1 : s);
}

}  // namespace

struct Broker::Impl {
  storage::Store& store;
  BrokerOptions opt;  // advertise() writes it before serving
  std::unique_ptr<ProducerState> producers;
  std::unique_ptr<HeaderStore> headers;
  std::unique_ptr<GroupCoordinator> groups;
  LogWatchers watchers;  // Fetches over several partitions wait here
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> requests{0}, records_in{0}, records_out{0}, duplicates{0}, malformed{0};
  std::atomic<uint64_t> sasl_ok[kSaslMechanismCount] = {}, sasl_failed[kSaslMechanismCount] = {};
  std::atomic<uint64_t> unauthenticated{0}, topic_denied{0}, group_denied{0}, cluster_denied{0};

  // ------------------------------------------------------------------ authorization (acl.h)
  // true: `perms` refuses `op` on `topic` (counted). perms nullptr: everything allowed.
  bool topic_refused(const Permissions* perms, bool (Permissions::*op)(std::string_view) const noexcept,
                     std::string_view topic) {
    if (!perms || (perms->*op)(topic)) return false;
    topic_denied.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  bool group_refused(const Permissions* perms, std::string_view group) {
    if (!perms || perms->may_use_group(group)) return false;
    group_denied.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  Impl(storage::Store& s, const BrokerOptions& o) : store(s), opt(o) {}

  // ------------------------------------------------------------------ ApiVersions
  void api_versions(const RequestHeader& h, Writer& w, bool refused) {
    w.i16(code(refused ? ErrorCode::kUnsupportedVersion : ErrorCode::kNone));
    w.array_count(static_cast<int32_t>(std::size(kSupportedApis)));
    for (const ApiRange& r : kSupportedApis) {
      w.i16(static_cast<int16_t>(r.key));
      w.i16(r.min);
      w.i16(r.max);
    }
    if (!refused && h.api_version >= 1) w.i32(0);  // throttle_time_ms
  }

  // ------------------------------------------------------------------ SASL (sasl.h)
  void mechanisms(Writer& w) {
    const std::size_t n = opt.sasl ? opt.sasl->mechanisms.size() : 0;
    w.array_count(static_cast<int32_t>(n));
    for (std::size_t i = 0; i < n; ++i) w.string(mechanism_name(opt.sasl->mechanisms[i]));
  }

  // false: answered with an error, then the connection is closed (Kafka's behaviour).
  bool sasl_handshake(const RequestHeader& h, const SaslHandshakeRequest& r, Writer& w, Session& s) {
    const auto m = parse_mechanism(r.mechanism);
    ErrorCode err = ErrorCode::kNone;
    if (!opt.sasl || !m || !opt.sasl->enabled(*m)) err = ErrorCode::kUnsupportedSaslMechanism;
    else if (s.authenticated || s.exchange) err = ErrorCode::kIllegalSaslState;
    w.i16(code(err));
    mechanisms(w);  // the enabled ones (none without SASL)
    if (err != ErrorCode::kNone) return false;
    s.exchange = std::make_unique<SaslExchange>(*opt.sasl->users, *m);
    s.raw_tokens = h.api_version == 0;  // v0: the tokens follow as bare frames
    return true;
  }

  // One token through the session's exchange. `out`: the server's token. false: failed (the
  // reason in `error`, counted).
  bool sasl_step(Session& s, std::string_view token, std::string& out, std::string& error) {
    const int m = static_cast<int>(s.exchange->mechanism());
    switch (s.exchange->step(token, out)) {
      case SaslExchange::Step::kContinue: return true;
      case SaslExchange::Step::kDone:
        s.authenticated = true;
        s.raw_tokens = false;
        s.principal = s.exchange->principal();
        s.permissions = opt.sasl->acl.for_user(s.principal);
        s.exchange.reset();
        sasl_ok[m].fetch_add(1, std::memory_order_relaxed);
        return true;
      case SaslExchange::Step::kFailed: break;
    }
    error = s.exchange->error();
    s.exchange.reset();
    sasl_failed[m].fetch_add(1, std::memory_order_relaxed);
    return false;
  }

  bool sasl_authenticate(const RequestHeader& h, const SaslAuthenticateRequest& r, Writer& w, Session& s) {
    std::string out, error;
    ErrorCode err = ErrorCode::kNone;
    if (!s.exchange || s.raw_tokens) {
      err = ErrorCode::kIllegalSaslState;
      error = s.authenticated ? "already authenticated" : "SaslAuthenticate before SaslHandshake";
    } else if (!sasl_step(s, r.auth_bytes, out, error)) {
      err = ErrorCode::kSaslAuthenticationFailed;
    }
    const bool flexible = h.api_version >= 2;
    if (flexible) w.no_tagged_fields();  // response header v1
    w.i16(code(err));
    const std::optional<std::string_view> message =
        err == ErrorCode::kNone ? std::nullopt : std::optional<std::string_view>(error);
    if (flexible) w.compact_nullable_string(message);
    else w.nullable_string(message);
    if (flexible) w.compact_bytes(out);
    else w.bytes(out);
    if (h.api_version >= 1) w.i64(0);  // session_lifetime_ms: no re-authentication (KIP-368)
    if (flexible) w.no_tagged_fields();
    return err == ErrorCode::kNone;
  }

  // ------------------------------------------------------------------ Metadata
  void metadata(const RequestHeader& h, const MetadataRequest& m, Writer& w, const Permissions* perms) {
    const int16_t v = h.api_version;
    if (v >= 3) w.i32(0);  // throttle_time_ms
    w.array_count(1);  // brokers: this one
    w.i32(opt.node_id);
    w.string(opt.advertised_host);
    w.i32(opt.advertised_port);
    w.nullable_string(std::nullopt);  // rack
    if (v >= 2) w.nullable_string(opt.cluster_id);
    w.i32(opt.node_id);  // controller_id
    std::vector<std::string> names;
    if (m.topics) {
      for (auto t : *m.topics) names.emplace_back(t);
    } else {
      for (auto& t : store.list_topics())  // the topics this user may see
        if (!internal_topic(t) && (!perms || perms->may_describe(t))) names.push_back(std::move(t));
    }
    w.array_count(static_cast<int32_t>(names.size()));
    for (const std::string& name : names) {
      ErrorCode err = ErrorCode::kNone;
      const bool refused = topic_refused(perms, &Permissions::may_describe, name);
      auto info = refused ? Result<storage::TopicInfo>(storage::Errc::kNotFound) : store.describe(name);
      if (refused) {
        err = ErrorCode::kTopicAuthorizationFailed;  // whether it exists or not
      } else if (!info && !storage::valid_topic_name(name)) {
        err = ErrorCode::kInvalidTopic;
      } else if (!info) {
        err = ErrorCode::kUnknownTopicOrPartition;
        if (m.allow_auto_topic_creation && store.options().auto_create_topics) {
          storage::TopicOptions to;
          to.name = name;
          to.partitions = store.options().default_partitions;
          if (store.create_topic(to)) info = store.describe(name);
          if (info) err = ErrorCode::kNone;
        }
      }
      w.i16(code(err));
      w.string(name);
      w.boolean(internal_topic(name));  // is_internal
      const std::size_t n = info ? info->partitions.size() : 0;
      w.array_count(static_cast<int32_t>(n));
      for (std::size_t p = 0; p < n; ++p) {
        w.i16(0);
        w.i32(static_cast<int32_t>(p));
        w.i32(opt.node_id);  // leader
        if (v >= 7) w.i32(0);  // leader_epoch
        w.array_count(1);  // replicas
        w.i32(opt.node_id);
        w.array_count(1);  // isr
        w.i32(opt.node_id);
        if (v >= 5) w.array_count(0);  // offline replicas
      }
      if (v >= 8) w.i32(INT32_MIN);  // topic_authorized_operations: not requested/known
    }
    if (v >= 8) w.i32(INT32_MIN);  // cluster_authorized_operations
  }

  // ------------------------------------------------------------------ Produce
  struct PartResult {
    ErrorCode error = ErrorCode::kNone;
    int64_t base_offset = -1;
    int64_t log_start = -1;
  };

  // One batch into the log: as sent (headers, compression and producer fields in it) where the
  // log writes Kafka's batch format (the default); else its records, with headers through
  // HeaderStore's protocol.
  Result<int64_t> append(storage::Log& log, std::string_view topic, int32_t partition, const DecodedBatch& b,
                         std::span<const storage::Record> recs) {
    if (log.options().batch_format == storage::BatchFormat::kKafka) {
      return log.append_kafka_batches(std::span<const std::string_view>(&b.raw, 1));
    }
    bool headed = false;
    for (const DecodedRecord& r : b.records) headed |= r.header_count > 0;
    if (!headed) return log.append_batch(recs);
    std::lock_guard<lionet::Mutex> lk(headers->lock_for(topic, partition));
    headers->begin(topic, partition, log.end_offset());
    auto r = log.append_batch(recs);
    if (!r) {
      headers->abort(topic, partition);
      return r;
    }
    // A failed side append loses these headers, not the records: they are acknowledged.
    (void)headers->commit(topic, partition, *r, b.records, log.start_offset());
    return r;
  }

  // Appends one partition's batches; a malformed batch sets `malformed_why`.
  PartResult produce_partition(const ProduceRequest& req, std::string_view topic, const ProduceRequest::Partition& p,
                               const char*& malformed_why) {
    PartResult res;
    if (req.transactional_id) return {ErrorCode::kTransactionalIdAuthorizationFailed};
    if (req.acks != 0 && req.acks != 1 && req.acks != -1) return {ErrorCode::kInvalidRequiredAcks};
    if (internal_topic(topic)) return {ErrorCode::kInvalidTopic};  // this layer's own state: read-only to clients
    if (p.index < 0) return {ErrorCode::kUnknownTopicOrPartition};
    auto log = store.find(topic, static_cast<uint32_t>(p.index));
    if (!log) return {from_storage(log.error())};
    if (!p.records || p.records->empty()) return {ErrorCode::kCorruptMessage};
    std::vector<DecodedBatch> batches;
    // A compressed batch inflates to at most what the store takes in one batch
    // (storage.max_batch_bytes): past that the append would be refused anyway.
    const BatchError be = decode_batches(*p.records, batches, store.options().log.max_batch_bytes);
    if (be.code == ErrorCode::kCorruptMessage) {
      malformed_why = be.why;
      return {ErrorCode::kCorruptMessage};
    }
    if (be.code != ErrorCode::kNone) return {be.code};
    res.log_start = (*log)->start_offset();
    std::vector<storage::Record> recs;
    for (const DecodedBatch& b : batches) {
      if (b.transactional() || b.control()) return {ErrorCode::kTransactionalIdAuthorizationFailed};
      recs.clear();
      for (const DecodedRecord& r : b.records)
        recs.push_back({r.key.value_or(std::string_view{}), r.value.value_or(std::string_view{}), r.timestamp});
      int64_t base = -1;
      if (b.producer_id >= 0) {
        const int32_t last = seq_add(b.base_sequence, static_cast<int32_t>(b.records.size()) - 1);
        lionet::Mutex& mu = producers->lock_for(topic, p.index);
        std::lock_guard<lionet::Mutex> lk(mu);
        const ProducerState::Check c =
            producers->check(topic, p.index, b.producer_id, b.producer_epoch, b.base_sequence, last);
        if (c.error != ErrorCode::kNone) return {c.error};
        if (c.duplicate_of) {
          duplicates.fetch_add(1, std::memory_order_relaxed);
          base = *c.duplicate_of;
        } else {
          auto r = append(**log, topic, p.index, b, recs);
          if (!r) return {append_error(r.error())};
          base = *r;
          records_in.fetch_add(recs.size(), std::memory_order_relaxed);
          if (auto s = producers->record(topic, p.index, b.producer_id, b.producer_epoch, b.base_sequence, last, base);
              !s)
            return {ErrorCode::kKafkaStorageError};
        }
      } else {
        auto r = append(**log, topic, p.index, b, recs);
        if (!r) return {append_error(r.error())};
        base = *r;
        records_in.fetch_add(recs.size(), std::memory_order_relaxed);
      }
      if (res.base_offset < 0) res.base_offset = base;
    }
    return res;
  }

  // false: malformed (close).
  bool produce(const RequestHeader& h, const ProduceRequest& req, Writer& w, const char*& why,
               const Permissions* perms) {
    const int16_t v = h.api_version;
    w.array_count(static_cast<int32_t>(req.topics.size()));
    for (const auto& t : req.topics) {
      w.string(t.name);
      w.array_count(static_cast<int32_t>(t.partitions.size()));
      const bool refused = topic_refused(perms, &Permissions::may_produce, t.name);
      for (const auto& p : t.partitions) {
        const char* bad = nullptr;
        const PartResult r =
            refused ? PartResult{ErrorCode::kTopicAuthorizationFailed} : produce_partition(req, t.name, p, bad);
        if (bad) {
          why = bad;
          return false;
        }
        w.i32(p.index);
        w.i16(code(r.error));
        w.i64(r.error == ErrorCode::kNone ? r.base_offset : -1);
        w.i64(-1);  // log_append_time_ms: CreateTime topics
        if (v >= 5) w.i64(r.log_start);
        if (v >= 8) {
          w.array_count(0);  // record_errors
          w.nullable_string(std::nullopt);
        }
      }
    }
    w.i32(0);  // throttle_time_ms
    return true;
  }

  // ------------------------------------------------------------------ Fetch
  struct FetchPart {
    storage::Log* log = nullptr;
    ErrorCode error = ErrorCode::kNone;
    storage::ReadResult rr;  // records of a BatchFormat::kLionet segment, re-encoded
    storage::Log::StoredBatches stored;  // or stored Kafka batches, sent as they are
    bool read = false;
    bool from_store = false;  // read: `stored` holds the answer, not rr
    std::size_t bytes() const { return !read ? 0 : from_store ? stored.bytes : rr.bytes(); }
  };

  // One pass over every partition; returns the bytes read.
  std::size_t fetch_pass(const FetchRequest& f, std::vector<FetchPart>& parts) {
    std::size_t total = 0, i = 0;
    const std::size_t max_total = f.max_bytes > 0 ? static_cast<std::size_t>(f.max_bytes) : 1;
    for (const auto& t : f.topics) {
      for (const auto& p : t.partitions) {
        FetchPart& fp = parts[i++];
        fp.read = false;
        if (fp.error != ErrorCode::kNone && fp.error != ErrorCode::kOffsetOutOfRange) continue;
        fp.error = ErrorCode::kNone;
        if (p.fetch_offset < fp.log->start_offset() || p.fetch_offset > fp.log->end_offset()) {
          fp.error = ErrorCode::kOffsetOutOfRange;
          continue;
        }
        // KIP-74: the first partition with data returns at least one batch, whatever max_bytes.
        if (total >= max_total && total > 0) continue;
        const std::size_t want = std::min<std::size_t>(p.max_bytes > 0 ? static_cast<std::size_t>(p.max_bytes) : 1,
                                                       max_total > total ? max_total - total : 1);
        auto st = fp.log->read_stored(p.fetch_offset, want);
        if (!st) {
          fp.error = from_storage(st.error());
          continue;
        }
        fp.from_store = st->format == storage::BatchFormat::kKafka;
        if (fp.from_store) {
          fp.stored = std::move(*st);
        } else if (auto r = fp.log->read(p.fetch_offset, want, fp.rr); !r) {
          fp.error = from_storage(r.error());
          continue;
        }
        fp.read = true;
        total += fp.bytes();
      }
    }
    return total;
  }

  void fetch(const RequestHeader& h, const FetchRequest& f, Writer& w, std::vector<FileSlice>& slices,
             const Permissions* perms) {
    const int16_t v = h.api_version;
    w.i32(0);  // throttle_time_ms
    if (v >= 7 && (f.session_id != 0 || f.session_epoch > 0)) {
      // Incremental fetch sessions are not kept: the client falls back to full fetches.
      w.i16(code(ErrorCode::kFetchSessionIdNotFound));
      w.i32(0);
      w.array_count(0);
      return;
    }
    if (v >= 7) {
      w.i16(0);
      w.i32(0);  // session_id 0: no session, every fetch is a full one
    }
    std::size_t n = 0;
    for (const auto& t : f.topics) n += t.partitions.size();
    std::vector<FetchPart> parts(n);
    std::size_t i = 0;
    std::vector<storage::Log*> logs;  // distinct readable logs: where a long poll waits
    for (const auto& t : f.topics) {
      const bool refused = topic_refused(perms, &Permissions::may_consume, t.name);
      for (const auto& p : t.partitions) {
        FetchPart& fp = parts[i++];
        if (refused) {
          fp.error = ErrorCode::kTopicAuthorizationFailed;
          continue;
        }
        auto log = p.index < 0 ? Result<storage::Log*>(storage::Errc::kNotFound)
                               : store.find(t.name, static_cast<uint32_t>(p.index));
        if (!log) {
          fp.error = ErrorCode::kUnknownTopicOrPartition;
          continue;
        }
        fp.log = *log;
        fp.rr = detail::take_read();  // buffers sized by an earlier Fetch, when one is kept
        if (std::find(logs.begin(), logs.end(), fp.log) == logs.end()) logs.push_back(fp.log);
      }
    }
    const TimePoint deadline = lionet::now() + std::chrono::milliseconds(std::max(0, f.max_wait_ms));
    const std::size_t min_bytes = static_cast<std::size_t>(std::max(1, f.min_bytes));
    std::vector<int64_t> ends(logs.size());
    for (;;) {
      for (std::size_t k = 0; k < logs.size(); ++k) ends[k] = logs[k]->end_offset();  // before the reads
      const std::size_t got = fetch_pass(f, parts);
      if (got >= min_bytes || logs.empty() || stopping.load(std::memory_order_acquire) || lionet::now() >= deadline)
        break;
      bool grew = false;
      while (!grew && !stopping.load(std::memory_order_acquire) && lionet::now() < deadline) {
        if (logs.size() == 1) {
          // In slices of at most a second: a stop() whose wake_waiters() ran between the check
          // above and this park is noticed within one (LogWatchers has no such window).
          logs[0]->wait_beyond(ends[0], std::min(deadline, lionet::now() + std::chrono::seconds(1)));
        } else {
          watchers.wait_any(logs, ends, deadline);
        }
        for (std::size_t k = 0; k < logs.size(); ++k) grew |= logs[k]->end_offset() != ends[k];
      }
      if (!grew) {  // the deadline (or stop): one last pass
        fetch_pass(f, parts);
        break;
      }
    }
    i = 0;
    // The response is sized once for the records read (a kept buffer when it is big: see
    // detail/buffer_pool.h), so encoding them never reallocates it.
    std::size_t payload = 0;
    for (const FetchPart& fp : parts) payload += fp.read && !fp.from_store ? fp.rr.bytes() : 0;
    const std::size_t need = w.size() + payload + 128 * (parts.size() + 1);
    if (std::string& buf = w.buffer(); need > buf.capacity()) {
      if (need >= detail::kPoolMinBytes) {
        buf = detail::take_string(buf, need);
      } else {
        buf.reserve(need);
      }
    }
    std::vector<OutRecord> out;
    w.array_count(static_cast<int32_t>(f.topics.size()));
    for (const auto& t : f.topics) {
      w.string(t.name);
      w.array_count(static_cast<int32_t>(t.partitions.size()));
      for (const auto& p : t.partitions) {
        FetchPart& fp = parts[i++];
        w.i32(p.index);
        w.i16(code(fp.error));
        const int64_t hw = fp.log ? fp.log->end_offset() : -1;
        const int64_t ls = fp.log ? fp.log->start_offset() : -1;
        w.i64(hw);
        w.i64(hw);  // last_stable_offset: no transactions
        if (v >= 5) w.i64(ls);
        w.array_count(0);  // aborted_transactions
        if (v >= 11) w.i32(-1);  // preferred_read_replica
        // The records' bytes (NULLABLE_BYTES), encoded in place: a length patched afterwards.
        const std::size_t len_at = w.reserve_i32();
        const std::size_t records_from = w.size();
        std::size_t stored_bytes = 0;
        if (fp.read && fp.error == ErrorCode::kNone && fp.from_store) {
          if (fp.stored.bytes > 0) {
            stored_bytes = static_cast<std::size_t>(fp.stored.bytes);
            slices.push_back(
                {w.size(), std::move(fp.stored.keep), fp.stored.file, fp.stored.position, fp.stored.bytes});
            records_out.fetch_add(
                static_cast<uint64_t>(fp.stored.next_offset - std::max(fp.stored.first_offset, p.fetch_offset)),
                std::memory_order_relaxed);
          }
        } else if (fp.read && fp.error == ErrorCode::kNone && !fp.rr.empty()) {
          // Records whose headers are still being recorded wait for the next Fetch.
          const int64_t visible = headers->visible_end(t.name, p.index);
          out.clear();
          for (const storage::RecordView& r : fp.rr.records())
            if (r.offset < visible) out.push_back({r.offset, r.timestamp, r.key, r.value, {}});
          if (!out.empty()) {
            const auto heads = headers->lookup(t.name, p.index, out.front().offset, out.back().offset);
            for (OutRecord& o : out)
              if (auto h = heads.find(o.offset); h != heads.end()) o.headers = h->second;
            encode_batch(out, w.buffer());
            records_out.fetch_add(out.size(), std::memory_order_relaxed);
          }
        }
        w.patch_i32(len_at, static_cast<int32_t>(w.size() - records_from + stored_bytes));
      }
    }
    i = 0;
    for (const auto& t : f.topics) {
      for (const auto& p : t.partitions) {
        FetchPart& fp = parts[i++];
        detail::give_read(std::move(fp.rr), static_cast<std::size_t>(std::max(p.max_bytes, 1)));
      }
    }
  }

  // ------------------------------------------------------------------ ListOffsets
  void list_offsets(const RequestHeader& h, const ListOffsetsRequest& l, Writer& w, const Permissions* perms) {
    const int16_t v = h.api_version;
    if (v >= 2) w.i32(0);  // throttle_time_ms
    w.array_count(static_cast<int32_t>(l.topics.size()));
    storage::ReadResult rr;
    for (const auto& t : l.topics) {
      w.string(t.name);
      w.array_count(static_cast<int32_t>(t.partitions.size()));
      const bool refused = topic_refused(perms, &Permissions::may_describe, t.name);
      for (const auto& p : t.partitions) {
        ErrorCode err = ErrorCode::kNone;
        int64_t ts = -1, off = -1;
        auto log = refused || p.index < 0 ? Result<storage::Log*>(storage::Errc::kNotFound)
                                          : store.find(t.name, static_cast<uint32_t>(p.index));
        if (refused) {
          err = ErrorCode::kTopicAuthorizationFailed;
        } else if (!log) {
          err = ErrorCode::kUnknownTopicOrPartition;
        } else if (p.timestamp == -2) {
          off = (*log)->start_offset();
        } else if (p.timestamp == -1) {
          off = (*log)->end_offset();
        } else if (p.timestamp < 0) {
          err = ErrorCode::kUnsupportedVersion;  // -3 (max timestamp) and others: newer versions
        } else if (auto o = (*log)->offset_for_time(p.timestamp); !o) {
          err = from_storage(o.error());
        } else if (*o < (*log)->end_offset()) {
          off = *o;
          if ((*log)->read(off, 1, rr) && !rr.empty()) ts = rr[0].timestamp;
        }
        w.i32(p.index);
        w.i16(code(err));
        w.i64(ts);
        w.i64(off);
        if (v >= 4) w.i32(0);  // leader_epoch
      }
    }
  }

  // ------------------------------------------------------------------ InitProducerId
  void init_producer_id(const InitProducerIdRequest& r, Writer& w, const Permissions* perms) {
    w.i32(0);  // throttle_time_ms
    if (!r.transactional_id && perms && perms->produce.empty()) {  // Kafka: IdempotentWrite or Write on a topic
      cluster_denied.fetch_add(1, std::memory_order_relaxed);
      w.i16(code(ErrorCode::kClusterAuthorizationFailed));
      w.i64(-1);
      w.i16(-1);
      return;
    }
    if (r.transactional_id) {  // transactions are not implemented: refused, fatal in clients
      w.i16(code(ErrorCode::kTransactionalIdAuthorizationFailed));
      w.i64(-1);
      w.i16(-1);
      return;
    }
    auto id = producers->allocate();
    w.i16(code(id ? ErrorCode::kNone : ErrorCode::kKafkaStorageError));
    w.i64(id ? *id : -1);
    w.i16(id ? 0 : -1);
  }

  // ------------------------------------------------------------------ FindCoordinator
  void find_coordinator(const RequestHeader& h, const FindCoordinatorRequest& f, Writer& w, const Permissions* perms) {
    const int16_t v = h.api_version;
    // Key type 0: a group, coordinated here. 1: a transactional id (transactions are refused
    // everywhere with this code, fatal in clients). Anything else is not a key type.
    const ErrorCode err = f.key_type == 0 && group_refused(perms, f.key) ? ErrorCode::kGroupAuthorizationFailed
                          : f.key_type == 0                              ? ErrorCode::kNone
                          : f.key_type == 1 ? ErrorCode::kTransactionalIdAuthorizationFailed
                                            : ErrorCode::kInvalidRequest;
    if (v >= 1) w.i32(0);  // throttle_time_ms
    w.i16(code(err));
    if (v >= 1) {
      if (err == ErrorCode::kNone) {
        w.nullable_string(std::nullopt);
      } else {
        w.nullable_string(err == ErrorCode::kInvalidRequest             ? "unknown key type"
                          : err == ErrorCode::kGroupAuthorizationFailed ? "not authorized for this group"
                                                                        : "transactions are not supported");
      }
    }
    const bool ok = err == ErrorCode::kNone;
    w.i32(ok ? opt.node_id : -1);
    w.string(ok ? std::string_view(opt.advertised_host) : std::string_view());
    w.i32(ok ? opt.advertised_port : -1);
  }

  // ------------------------------------------------------------------ JoinGroup, SyncGroup, ...
  void join_group(const RequestHeader& h, const JoinGroupRequest& r, Writer& w, const Permissions* perms) {
    const int16_t v = h.api_version;
    GroupCoordinator::JoinResult res;
    if (group_refused(perms, r.group_id)) {
      res.error = ErrorCode::kGroupAuthorizationFailed;
      res.member_id = std::string(r.member_id);
    } else {
      res = groups->join(r, h.client_id.value_or(""), v >= 4);
    }
    if (v >= 2) w.i32(0);  // throttle_time_ms
    w.i16(code(res.error));
    w.i32(res.generation_id);
    w.string(res.protocol_name);
    w.string(res.leader_id);
    w.string(res.member_id);
    w.array_count(static_cast<int32_t>(res.members.size()));
    for (const auto& m : res.members) {
      w.string(m.member_id);
      if (v >= 5) w.nullable_string(std::nullopt);  // group_instance_id: no static members
      w.bytes(m.metadata);
    }
  }

  void sync_group(const RequestHeader& h, const SyncGroupRequest& r, Writer& w, const Permissions* perms) {
    GroupCoordinator::SyncResult res;
    if (group_refused(perms, r.group_id)) res.error = ErrorCode::kGroupAuthorizationFailed;
    else res = groups->sync(r);
    if (h.api_version >= 1) w.i32(0);  // throttle_time_ms
    w.i16(code(res.error));
    w.bytes(res.assignment);
  }

  void heartbeat(const RequestHeader& h, const HeartbeatRequest& r, Writer& w, const Permissions* perms) {
    const ErrorCode err =
        group_refused(perms, r.group_id) ? ErrorCode::kGroupAuthorizationFailed : groups->heartbeat(r);
    if (h.api_version >= 1) w.i32(0);  // throttle_time_ms
    w.i16(code(err));
  }

  void leave_group(const RequestHeader& h, const LeaveGroupRequest& r, Writer& w, const Permissions* perms) {
    const int16_t v = h.api_version;
    GroupCoordinator::LeaveResult res;
    if (group_refused(perms, r.group_id)) {
      res.error = ErrorCode::kGroupAuthorizationFailed;
      res.members.assign(r.members.size(), ErrorCode::kGroupAuthorizationFailed);
    } else {
      res = groups->leave(r);
    }
    if (v >= 1) w.i32(0);  // throttle_time_ms
    if (v <= 2) {  // one member: its error is the request's (Kafka's LeaveGroupResponse)
      ErrorCode e = res.error;
      if (e == ErrorCode::kNone && !res.members.empty()) e = res.members.front();
      w.i16(code(e));
      return;
    }
    w.i16(code(res.error));
    w.array_count(static_cast<int32_t>(res.members.size()));
    for (std::size_t i = 0; i < res.members.size(); ++i) {
      w.string(r.members[i].member_id);
      w.nullable_string(r.members[i].group_instance_id);
      w.i16(code(res.members[i]));
    }
  }

  void offset_commit(const RequestHeader& h, const OffsetCommitRequest& r, Writer& w, const Permissions* perms) {
    GroupCoordinator::CommitResult res(r.topics.size());
    if (group_refused(perms, r.group_id)) {
      for (std::size_t t = 0; t < r.topics.size(); ++t)
        res[t].assign(r.topics[t].partitions.size(), ErrorCode::kGroupAuthorizationFailed);
    } else if (!perms) {
      res = groups->commit_offsets(r);
    } else {  // the topics this user may consume are committed; the others refused
      OffsetCommitRequest allowed = r;
      allowed.topics.clear();
      std::vector<std::size_t> from;
      for (std::size_t t = 0; t < r.topics.size(); ++t) {
        if (topic_refused(perms, &Permissions::may_consume, r.topics[t].name)) {
          res[t].assign(r.topics[t].partitions.size(), ErrorCode::kTopicAuthorizationFailed);
        } else {
          allowed.topics.push_back(r.topics[t]);
          from.push_back(t);
        }
      }
      if (!allowed.topics.empty()) {
        GroupCoordinator::CommitResult part = groups->commit_offsets(allowed);
        for (std::size_t k = 0; k < from.size(); ++k) res[from[k]] = std::move(part[k]);
      }
    }
    if (h.api_version >= 3) w.i32(0);  // throttle_time_ms
    w.array_count(static_cast<int32_t>(r.topics.size()));
    for (std::size_t t = 0; t < r.topics.size(); ++t) {
      w.string(r.topics[t].name);
      w.array_count(static_cast<int32_t>(r.topics[t].partitions.size()));
      for (std::size_t p = 0; p < r.topics[t].partitions.size(); ++p) {
        w.i32(r.topics[t].partitions[p].index);
        w.i16(code(res[t][p]));
      }
    }
  }

  void offset_fetch(const RequestHeader& h, const OffsetFetchRequest& r, Writer& w, const Permissions* perms) {
    const int16_t v = h.api_version;
    GroupCoordinator::FetchResult res;
    std::vector<std::string> refused;  // topics answered TOPIC_AUTHORIZATION_FAILED
    if (group_refused(perms, r.group_id)) {
      res.error = ErrorCode::kGroupAuthorizationFailed;
      if (v < 2 && r.topics) {  // v1 has no request-level error: one per partition
        for (const auto& t : *r.topics) {
          auto& parts =
              res.topics.emplace_back(std::string(t.name), std::vector<GroupCoordinator::FetchedOffset>{}).second;
          for (int32_t p : t.partitions) parts.push_back({.partition = p});
        }
      }
    } else {
      res = groups->fetch_offsets(r);
      if (perms) {  // topics this user may not consume: refused when asked for, else left out
        std::erase_if(res.topics, [&](auto& t) {
          if (perms->may_consume(t.first)) return false;
          if (!r.topics) return true;
          topic_denied.fetch_add(1, std::memory_order_relaxed);
          for (auto& p : t.second) p = {.partition = p.partition};
          refused.push_back(t.first);
          return false;
        });
      }
    }
    if (v >= 3) w.i32(0);  // throttle_time_ms
    w.array_count(static_cast<int32_t>(res.topics.size()));
    for (const auto& [topic, parts] : res.topics) {
      w.string(topic);
      w.array_count(static_cast<int32_t>(parts.size()));
      for (const auto& p : parts) {
        w.i32(p.partition);
        w.i64(p.offset);
        if (v >= 5) w.i32(p.leader_epoch);
        w.nullable_string(p.metadata);
        // v1 has no request-level error: it goes on every partition.
        const bool topic_refused = std::find(refused.begin(), refused.end(), topic) != refused.end();
        w.i16(code(topic_refused ? ErrorCode::kTopicAuthorizationFailed : v >= 2 ? ErrorCode::kNone : res.error));
      }
    }
    if (v >= 2) w.i16(code(res.error));
  }
};

Broker::Broker(storage::Store& store, BrokerOptions options)
    : impl_(std::make_unique<Impl>(store, std::move(options))) {
  auto p = ProducerState::open(store);
  if (!p)
    throw std::runtime_error("kafka: producer state (topic " + std::string(kProducerStateTopic) +
                             "): " + p.error().message());
  impl_->producers = std::move(*p);
  auto tails = impl_->producers->recover_tails(store);
  if (!tails)
    throw std::runtime_error("kafka: producer state (topic " + std::string(kProducerStateTopic) +
                             "): " + tails.error().message());
  if (*tails > 0) {
    LIONET_LOG_INFO(lionet::log::get("kafka"),
                    "kafka: {} idempotent batch(es) appended before a crash cut off their "
                    "producer state: state restored from the stored batches (their retries will not be appended twice)",
                    *tails);
  }
  auto h = HeaderStore::open(store);
  if (!h)
    throw std::runtime_error("kafka: record headers (topic " + std::string(kHeaderTopic) + "): " + h.error().message());
  impl_->headers = std::move(*h);
  auto g = GroupCoordinator::open(store, impl_->opt.groups);
  if (!g)
    throw std::runtime_error("kafka: committed offsets (topic " + std::string(kOffsetsTopic) +
                             "): " + g.error().message());
  impl_->groups = std::move(*g);
}

Broker::~Broker() { stop(); }

Broker::Outcome Broker::handle(std::string_view frame, std::string& response) {
  std::vector<FileSlice> slices;
  const Outcome o = handle(frame, response, slices);
  if (slices.empty()) return o;
  // Inline the stored bytes (tests, and callers that cannot sendfile).
  std::string whole;
  std::size_t from = 0;
  for (const FileSlice& sl : slices) {
    whole.append(response, from, sl.at - from);
    const std::size_t at = whole.size();
    whole.resize(at + static_cast<std::size_t>(sl.bytes));
    auto n = sl.file->pread(whole.data() + at, static_cast<std::size_t>(sl.bytes), sl.position);
    if (!n || *n != sl.bytes) return {Outcome::kClose, "stored batches could not be read back (truncated meanwhile?)"};
    from = sl.at;
  }
  whole.append(response, from, std::string::npos);
  response.swap(whole);
  return o;
}

Session Broker::new_session() const {
  Session s;
  s.authenticated = impl_->opt.sasl == nullptr;
  return s;
}

Broker::Outcome Broker::handle(std::string_view frame, std::string& response, std::vector<FileSlice>& slices) {
  Session s = new_session();
  return handle(frame, response, slices, s);
}

Broker::Outcome Broker::handle(std::string_view frame, std::string& response, std::vector<FileSlice>& slices,
                               Session& session) {
  Impl& im = *impl_;
  if (session.raw_tokens) {  // after SaslHandshake v0: a bare token in, a bare token out
    response.clear();
    slices.clear();
    Writer w(response);
    const std::size_t size_at = w.reserve_i32();
    std::string out, error;
    if (!im.sasl_step(session, frame, out, error)) return {Outcome::kClose, "SASL authentication failed", true};
    w.raw(out);
    w.patch_i32(size_at, static_cast<int32_t>(response.size() - 4));
    return {};
  }
  im.requests.fetch_add(1, std::memory_order_relaxed);
  response.clear();
  slices.clear();
  Writer w(response);
  const std::size_t size_at = w.reserve_i32();
  RequestHeader h;
  if (DecodeError e = decode_header_prefix(frame, h)) {
    im.malformed.fetch_add(1, std::memory_order_relaxed);
    return {Outcome::kClose, e.why};
  }
  if (!session.authenticated && h.api_key != static_cast<int16_t>(ApiKey::kApiVersions) &&
      h.api_key != static_cast<int16_t>(ApiKey::kSaslHandshake) &&
      h.api_key != static_cast<int16_t>(ApiKey::kSaslAuthenticate)) {
    im.unauthenticated.fetch_add(1, std::memory_order_relaxed);
    return {Outcome::kClose, "a request before SASL authentication", true};
  }
  const Permissions* perms = session.permissions;
  auto finish = [&] {
    std::size_t stored = 0;
    for (const FileSlice& sl : slices) stored += static_cast<std::size_t>(sl.bytes);
    w.patch_i32(size_at, static_cast<int32_t>(response.size() - 4 + stored));
  };
  if (!supported(h.api_key, h.api_version)) {
    w.i32(h.correlation_id);
    if (h.api_key == static_cast<int16_t>(ApiKey::kApiVersions)) {
      im.api_versions(h, w, true);  // v0 layout, whatever version was asked (clients retry lower)
    } else {
      w.i16(code(ErrorCode::kUnsupportedVersion));  // a client that skipped ApiVersions
    }
    finish();
    return {};
  }
  RequestBody body;
  if (DecodeError e = decode_request(frame, h, body)) {
    im.malformed.fetch_add(1, std::memory_order_relaxed);
    return {Outcome::kClose, e.why};
  }
  w.i32(h.correlation_id);
  Outcome out;
  if (auto* p = std::get_if<ProduceRequest>(&body)) {
    const char* why = nullptr;
    if (!im.produce(h, *p, w, why, perms)) {
      im.malformed.fetch_add(1, std::memory_order_relaxed);
      return {Outcome::kClose, why};
    }
    if (p->acks == 0) {
      response.clear();
      return {Outcome::kNoResponse};
    }
  } else if (std::get_if<ApiVersionsRequest>(&body)) {
    im.api_versions(h, w, false);
  } else if (auto* m = std::get_if<MetadataRequest>(&body)) {
    im.metadata(h, *m, w, perms);
  } else if (auto* f = std::get_if<FetchRequest>(&body)) {
    im.fetch(h, *f, w, slices, perms);
  } else if (auto* l = std::get_if<ListOffsetsRequest>(&body)) {
    im.list_offsets(h, *l, w, perms);
  } else if (auto* ip = std::get_if<InitProducerIdRequest>(&body)) {
    im.init_producer_id(*ip, w, perms);
  } else if (auto* fc = std::get_if<FindCoordinatorRequest>(&body)) {
    im.find_coordinator(h, *fc, w, perms);
  } else if (auto* jg = std::get_if<JoinGroupRequest>(&body)) {
    im.join_group(h, *jg, w, perms);
  } else if (auto* sg = std::get_if<SyncGroupRequest>(&body)) {
    im.sync_group(h, *sg, w, perms);
  } else if (auto* hb = std::get_if<HeartbeatRequest>(&body)) {
    im.heartbeat(h, *hb, w, perms);
  } else if (auto* lg = std::get_if<LeaveGroupRequest>(&body)) {
    im.leave_group(h, *lg, w, perms);
  } else if (auto* oc = std::get_if<OffsetCommitRequest>(&body)) {
    im.offset_commit(h, *oc, w, perms);
  } else if (auto* of = std::get_if<OffsetFetchRequest>(&body)) {
    im.offset_fetch(h, *of, w, perms);
  } else if (auto* sh = std::get_if<SaslHandshakeRequest>(&body)) {
    if (!im.sasl_handshake(h, *sh, w, session)) out = {Outcome::kRespondAndClose, "SASL handshake refused", true};
  } else if (auto* sa = std::get_if<SaslAuthenticateRequest>(&body)) {
    if (!im.sasl_authenticate(h, *sa, w, session))
      out = {Outcome::kRespondAndClose, "SASL authentication failed", true};
  }
  finish();
  return out;
}

void Broker::advertise(std::string host, int32_t port) {
  impl_->opt.advertised_host = std::move(host);
  impl_->opt.advertised_port = port;
}

void Broker::stop() {
  Impl& im = *impl_;
  if (im.stopping.exchange(true, std::memory_order_acq_rel)) return;
  for (const std::string& t : im.store.list_topics()) {
    for (uint32_t p = 0;; ++p) {
      auto log = im.store.find(t, p);
      if (!log) break;
      (*log)->wake_waiters();
    }
  }
  im.watchers.stop();  // the watcher fibers were woken above (or wake within a second)
  im.groups->stop();
}

BrokerStats Broker::stats() const noexcept {
  const Impl& im = *impl_;
  auto g = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  BrokerStats s{g(im.requests),   g(im.records_in), g(im.records_out),
                g(im.duplicates), g(im.malformed),  im.groups->stats()};
  for (int m = 0; m < kSaslMechanismCount; ++m) {
    s.sasl_ok[m] = g(im.sasl_ok[m]);
    s.sasl_failed[m] = g(im.sasl_failed[m]);
  }
  s.unauthenticated = g(im.unauthenticated);
  s.topic_denied = g(im.topic_denied);
  s.group_denied = g(im.group_denied);
  s.cluster_denied = g(im.cluster_denied);
  return s;
}

}  // namespace lionet::kafka
