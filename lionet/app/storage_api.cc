// lionet/app/storage_api.cc: the storage routes (see storage_api.h for the protocol).
#include "lionet/app/storage_api.h"

#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lionet/base/utf8.h"
#include "lionet/http/url.h"
#include "lionet/sched/scheduler.h"
#include "lionet/storage/errors.h"
#include "lionet/storage/log.h"
#include "lionet/websocket/server.h"

namespace lionet::app {
namespace {

constexpr std::string_view kJson = "application/json";
constexpr std::string_view kNdjson = "application/x-ndjson";

// Length of the well-formed UTF-8 sequence at p (base/utf8.h: strict, no overlongs, no
// surrogates, <= U+10FFFF), or 0 if the bytes there are not one. p < e.
std::size_t utf8_sequence(const unsigned char* p, const unsigned char* e) {
  return lionet::utf8_sequence(std::string_view(reinterpret_cast<const char*>(p), static_cast<std::size_t>(e - p)), 0);
}

bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* e = p + s.size();
  while (p < e) {
    const std::size_t n = utf8_sequence(p, e);
    if (n == 0) return false;
    p += n;
  }
  return true;
}

// s as a JSON string. Control characters and DEL become \u00XX. Bytes that are not UTF-8 must
// not reach here as data (callers send those as base64); in messages (which may quote a path
// segment as sent) each such byte becomes U+FFFD, so the answer is still valid JSON.
void json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* e = p + s.size();
  while (p < e) {
    const unsigned char c = *p;
    if (c >= 0x80) {
      const std::size_t n = utf8_sequence(p, e);
      if (n == 0) {
        out += "\\ufffd";
        ++p;
      } else {
        out.append(reinterpret_cast<const char*>(p), n);
        p += n;
      }
      continue;
    }
    ++p;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

// Appends the decimal form of v (no temporary string).
void append_int(std::string& out, int64_t v) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

// Bytes json_string() writes for s (control characters become 6-byte \u00XX escapes).
std::size_t json_escaped_size(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c < 0x20 || c == 0x7f) ? 6 : (c == '"' || c == '\\') ? 2 : 1;
  return n;
}

// "name":"text", or "name_base64":"..." when bytes are not UTF-8 or escaping would more than
// double them (an 8 MB value of NUL bytes would be 48 MB of JSON; base64 is 4/3).
void json_bytes_field(std::string& out, std::string_view name, std::string_view bytes) {
  out += '"';
  out += name;
  if (valid_utf8(bytes) && json_escaped_size(bytes) <= 2 * bytes.size()) {
    out += "\":";
    json_string(out, bytes);
    return;
  }
  out += "_base64\":\"";
  const std::size_t at = out.size();
  out.resize(at + 4 * ((bytes.size() + 2) / 3) + 1);
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data() + at),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(at + static_cast<std::size_t>(n));
  out += '"';
}

}  // namespace

void append_record_json(std::string& out, const storage::RecordView& rec) {
  out += "{\"offset\":";
  append_int(out, rec.offset);
  out += ",\"timestamp\":";
  append_int(out, rec.timestamp);
  out += ',';
  json_bytes_field(out, "key", rec.key);
  out += ',';
  json_bytes_field(out, "value", rec.value);
  out += '}';
}

namespace {
// Content-Type names the ndjson media type (case-insensitive, parameters allowed).
bool is_ndjson(std::string_view ctype) {
  const std::size_t end = ctype.find_first_of("; \t");
  const std::string_view type = ctype.substr(0, end);
  if (type.size() != kNdjson.size()) return false;
  for (std::size_t i = 0; i < type.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(type[i])) != kNdjson[i]) return false;
  }
  return true;
}

void fail(http::Response& res, StorageApiStats& st, int status, std::string_view message) {
  st.errors.add();
  std::string body = "{\"error\":";
  json_string(body, message);
  body += "}\n";
  res.reply(status, body, kJson);
}

// The status for a storage/system error.
int status_of(const std::error_code& ec) {
  using storage::Errc;
  if (ec == Errc::kOffsetOutOfRange) return 416;
  if (ec == Errc::kRecordTooLarge) return 413;
  if (ec == Errc::kInvalidArgument) return 400;
  if (ec == Errc::kNotFound) return 404;
  if (ec == Errc::kLogFailed) return 503;
  // Out of space (disk full, quota, RLIMIT_FSIZE): nothing of the batch was published.
  if (ec == std::errc::no_space_on_device || ec == std::errc::file_too_large ||
      ec == std::error_code(EDQUOT, std::generic_category()))
    return 507;
  // The data directory became read-only (remount, immutable files, permissions): the store
  // cannot take appends for now, reads go on.
  if (ec == std::errc::read_only_file_system || ec == std::errc::permission_denied ||
      ec == std::errc::operation_not_permitted)
    return 503;
  return 500;  // kCorrupt, IO errors
}

template <class T>
bool parse_number(std::string_view s, T& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

// Value of `name` in a query string (percent-decoded); nullopt if absent or malformed.
std::optional<std::string> query_param(std::string_view query, std::string_view name, bool* malformed) {
  while (!query.empty()) {
    const auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    const auto eq = pair.find('=');
    if (pair.substr(0, eq) != name) continue;
    auto v = http::percent_decode(eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1), true);
    if (!v) *malformed = true;
    return v;
  }
  return std::nullopt;
}

// Whether a request may create the topic it names: appends may (Store::log(), as
// auto_create_topics says), reads never (Store::find()).
enum class Access { kAppend, kRead };

// The partition's log from the path parameters, or an answer already written.
storage::Log* find_log(const http::Request& req, http::Response& res, storage::Store& store, StorageApiStats& st,
                       Access access, uint32_t* partition) {
  const std::string_view topic = req.param("topic");
  if (!storage::valid_topic_name(topic)) {
    fail(res, st, 400, "invalid topic name '" + std::string(topic) + "': 1 to 200 of [A-Za-z0-9._-]");
    return nullptr;
  }
  uint32_t p = 0;
  if (!parse_number(req.param("p"), p)) {
    fail(res, st, 400, "invalid partition '" + std::string(req.param("p")) + "': expected a number");
    return nullptr;
  }
  *partition = p;
  auto log = access == Access::kAppend ? store.log(topic, p) : store.find(topic, p);
  if (!log) {
    std::string what = "topic '" + std::string(topic) + "' partition " + std::to_string(p) + ": ";
    if (log.error() == storage::Errc::kNotFound) what += "no such topic";
    else if (log.error() == storage::Errc::kInvalidArgument) what += "no such partition";
    else what += log.error().message();
    fail(res, st, log.error() == storage::Errc::kInvalidArgument ? 404 : status_of(log.error()), what);
    return nullptr;
  }
  return log.value();
}

// ---- the live tail over WebSocket ----------------------------------------------------------

// The offset a tail starts at: ?offset=N (clamped up to the partition's start: records deleted
// by retention are skipped), or the end (only records appended from now on). nullopt with an
// answer written (400 malformed, 404 unknown topic or partition, 416 past the end).
std::optional<int64_t> tail_offset(const http::Request& req, http::Response& res, storage::Store& store,
                                   StorageApiStats& st, storage::Log** log_out) {
  uint32_t partition = 0;
  storage::Log* log = find_log(req, res, store, st, Access::kRead, &partition);
  if (!log) return std::nullopt;
  bool malformed = false;
  int64_t offset = log->end_offset();
  if (auto v = query_param(req.query(), "offset", &malformed); v && (!parse_number(*v, offset) || offset < 0)) {
    fail(res, st, 400, "offset must be a non-negative number");
    return std::nullopt;
  }
  if (malformed) {
    fail(res, st, 400, "malformed percent-encoding in the query");
    return std::nullopt;
  }
  if (offset > log->end_offset()) {
    fail(res, st, 416,
         "offset " + std::to_string(offset) + " is past the end (" + std::to_string(log->end_offset()) + ")");
    return std::nullopt;
  }
  if (log_out) *log_out = log;
  return std::max(offset, log->start_offset());
}

bool tail_start(http::Request& req, http::Response& res, storage::Store& store, StorageApiStats& st) {
  return tail_offset(req, res, store, st, nullptr).has_value();
}

// Sends every record from the start offset on as one text message each (append_record_json's
// shape), waiting on the log between appends (Log::wait_beyond: no polling); a second fiber
// receives (pings are answered, the client's close is seen). A client more than tail_max_lag
// records behind is closed with 1008: a slow client never slows the producers.
void live_tail(websocket::Socket& ws, const http::Request& req, storage::Store& store, StorageApiStats& st,
               const StorageApiOptions& opt) {
  http::Response scratch;
  storage::Log* log = nullptr;
  auto start = tail_offset(req, scratch, store, st, &log);
  if (!start || !log) {  // the partition went away between the check and the upgrade
    (void)ws.close(websocket::close_code::kPolicyViolation, "no such topic or partition");
    return;
  }
  int64_t off = *start;
  std::atomic<bool> client_gone{false};
  auto receiver = Scheduler::current()->spawn([&] {
    while (ws.receive()) {
    }  // the tail sends; anything the client sends is dropped
    client_gone.store(true, std::memory_order_release);
    log->wake_waiters();  // the sender below may be parked in wait_beyond
  });
  storage::ReadResult rr;
  std::string msg;
  // Replaying what existed at the start is not falling behind: the lag bound applies once the
  // tail has reached the end.
  bool caught_up = off >= log->end_offset();
  while (!client_gone.load(std::memory_order_acquire) && ws.is_open()) {
    const int64_t end = log->wait_beyond(off, now() + std::chrono::seconds(5));
    if (end <= off) {
      caught_up = true;
      continue;
    }
    if (caught_up && static_cast<uint64_t>(end - off) > opt.tail_max_lag) {
      (void)ws.close(websocket::close_code::kPolicyViolation,
                     "too slow: " + std::to_string(end - off) + " records behind (storage.api.tail_max_lag)");
      break;
    }
    if (auto r = log->read(off, opt.max_read_bytes, rr); !r) {
      if (r.error() == storage::Errc::kOffsetOutOfRange && off < log->start_offset()) {
        off = log->start_offset();  // retention deleted what we had not sent yet
        continue;
      }
      (void)ws.close(websocket::close_code::kInternalError, "read failed: " + r.error().message());
      break;
    }
    // Replaying (not caught up yet): send() parks while the client reads. Caught up: queue
    // without waiting; a full queue means the client fell behind.
    bool sent = true, full = false;
    for (const auto& rec : rr.records()) {
      msg.clear();
      append_record_json(msg, rec);
      if (!caught_up) {
        sent = ws.send_text(msg).ok();
      } else {
        const websocket::SendResult q = ws.try_send_text(msg);
        full = q == websocket::SendResult::kFull;
        sent = q == websocket::SendResult::kQueued;
      }
      if (!sent) break;
      st.read_records.add();
      st.read_bytes.add(rec.key.size() + rec.value.size());
    }
    if (full) {
      (void)ws.close(websocket::close_code::kPolicyViolation, "too slow: over " + std::to_string(opt.tail_queue_bytes) +
                                                                  " bytes queued (storage.api.tail_queue_bytes)");
      break;
    }
    if (!sent) break;
    off = rr.next_offset();
  }
  if (ws.is_open()) (void)ws.close(websocket::close_code::kNormal, "tail ended");
  CancelShield shield;  // the receiver uses this frame: wait for it even when cancelled
  receiver.join();
}

void post_records(http::Request& req, http::Response& res, storage::Store& store, StorageApiStats& st,
                  const StorageApiOptions& opt) {
  uint32_t partition = 0;
  storage::Log* log = find_log(req, res, store, st, Access::kAppend, &partition);
  if (!log) return;
  bool bad_query = false;
  const std::optional<std::string> key = query_param(req.query(), "key", &bad_query);
  if (bad_query) return fail(res, st, 400, "malformed percent-encoding in the query");
  const std::string_view key_view = key ? std::string_view(*key) : std::string_view{};
  std::string body;
  if (auto r = req.read_body(body); !r) {
    if (r.error() == std::errc::message_size)
      return fail(res, st, 413, "request body over the server's max_body_bytes");
    st.errors.add();
    return;  // the server answers 400/408 or the connection is gone
  }
  if (body.empty()) return fail(res, st, 400, "empty body: nothing to append");
  std::vector<storage::Record> records;
  if (is_ndjson(req.header("Content-Type"))) {
    // Each line is one record's value, as bytes (not parsed as JSON). The final newline ends
    // the last line rather than starting an empty one; a CR before a newline is part of the
    // line end (ndjson allows CRLF), so "a\r\nb" is "a" and "b". ?key= keys every record.
    std::string_view rest = body;
    if (rest.back() == '\n') rest.remove_suffix(1);
    while (true) {
      const auto nl = rest.find('\n');
      std::string_view line = rest.substr(0, nl);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (records.size() == opt.max_records_per_post) {
        return fail(res, st, 413, "more than " + std::to_string(opt.max_records_per_post) + " records in one POST");
      }
      records.push_back({key_view, line, -1});
      if (nl == std::string_view::npos) break;
      rest.remove_prefix(nl + 1);
    }
  } else {
    records.push_back({key_view, body, -1});
  }
  auto first = log->append_batch(records);
  if (!first) {
    std::string msg = "append to topic '" + std::string(req.param("topic")) + "' partition " +
                      std::to_string(partition) + " failed: " + first.error().message();
    if (first.error() == storage::Errc::kRecordTooLarge) {
      msg += " (" + std::to_string(log->options().max_batch_bytes) + " bytes)";
    }
    return fail(res, st, status_of(first.error()), msg);
  }
  // Acknowledged: append_batch returned, so the flush policy is met.
  std::string out;
  out.reserve(96 + req.param("topic").size() + records.size() * 8);
  out += "{\"topic\":";
  json_string(out, req.param("topic"));
  out += ",\"partition\":";
  append_int(out, partition);
  out += ",\"base_offset\":";
  append_int(out, first.value());
  out += ",\"count\":";
  append_int(out, static_cast<int64_t>(records.size()));
  out += ",\"offsets\":[";
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (i) out += ',';
    append_int(out, first.value() + static_cast<int64_t>(i));
    bytes += records[i].key.size() + records[i].value.size();
  }
  out += "]}\n";
  st.appends.add();
  st.append_records.add(records.size());
  st.append_bytes.add(bytes);
  res.set_status(201);
  res.set_content_type(kJson);
  res.set_body(std::move(out));
}

void get_records(http::Request& req, http::Response& res, storage::Store& store, StorageApiStats& st,
                 const StorageApiOptions& opt) {
  uint32_t partition = 0;
  storage::Log* log = find_log(req, res, store, st, Access::kRead, &partition);
  if (!log) return;
  bool malformed = false, bad = false;
  int64_t offset = log->start_offset();
  std::size_t max_bytes = opt.default_read_bytes;
  // One rule for malformed numbers (400): "-1" is as malformed as "abc" (offsets are >= 0).
  if (auto v = query_param(req.query(), "offset", &malformed); v && (!parse_number(*v, offset) || offset < 0))
    bad = true;
  if (auto v = query_param(req.query(), "max_bytes", &malformed); v && (!parse_number(*v, max_bytes) || max_bytes == 0))
    bad = true;
  if (malformed) return fail(res, st, 400, "malformed percent-encoding in the query");
  if (bad) return fail(res, st, 400, "offset and max_bytes must be non-negative numbers (max_bytes > 0)");
  max_bytes = std::min(max_bytes, opt.max_read_bytes);
  // An offset outside the log is answered 416 with the valid range: the client learns where
  // the log starts and ends.
  storage::ReadResult rr;
  if (auto r = log->read(offset, max_bytes, rr); !r) {
    std::string msg = "read at offset " + std::to_string(offset) + ": " + r.error().message();
    if (r.error() == storage::Errc::kOffsetOutOfRange) {
      msg +=
          " (valid offsets: " + std::to_string(log->start_offset()) + " to " + std::to_string(log->end_offset()) + ")";
    }
    return fail(res, st, status_of(r.error()), msg);
  }
  std::string& out = res.body();
  out.clear();
  // Stored bytes are the payload plus 20 per record; JSON adds ~60 per record on top. Control
  // characters (x6) and base64 (x4/3) may still grow it: correctness first, this saves the
  // usual regrowths.
  out.reserve(rr.bytes() + rr.size() * 64);
  std::size_t bytes = 0;
  for (const auto& rec : rr.records()) {
    append_record_json(out, rec);
    out += '\n';
    bytes += rec.key.size() + rec.value.size();
  }
  st.reads.add();
  st.read_records.add(rr.size());
  st.read_bytes.add(bytes);
  char next[24];
  const auto [next_end, ec] = std::to_chars(next, next + sizeof next, rr.next_offset());
  res.set_status(200);
  res.set_content_type(kNdjson);
  res.set_header("X-Next-Offset", std::string_view(next, static_cast<std::size_t>(next_end - next)));
}

// The answer to a request the server refused by its head alone (a Content-Length over the
// server's max_body_bytes, 413; the body is never read): the API's JSON error instead of
// http/'s plain text.
void refused(http::Request& req, http::Response& res, StorageApiStats& st, int status, std::string_view reason) {
  if (status != 413) return fail(res, st, status, reason);
  fail(res, st, status,
       "request body over the server's max_body_bytes (Content-Length: " +
           std::to_string(req.content_length().value_or(0)) + ")");
}

void list_topics(http::Response& res, storage::Store& store) {
  std::string out = "{\"topics\":[";
  bool first = true;
  for (const auto& name : store.list_topics()) {
    auto info = store.describe(name);
    if (!info) continue;
    if (!first) out += ',';
    first = false;
    out += "{\"name\":";
    json_string(out, name);
    out += ",\"partitions\":" + std::to_string(info.value().partitions.size()) + "}";
  }
  out += "]}\n";
  res.reply(200, out, kJson);
}
}  // namespace

void add_storage_routes(http::Router& router, std::string_view prefix, storage::Store& store, StorageApiStats& stats,
                        StorageApiOptions options, const std::function<http::Handler(http::Handler)>& wrap) {
  std::string base(prefix);
  while (!base.empty() && base.back() == '/') base.pop_back();
  const std::string records = base + "/{topic}/partitions/{p}/records";
  const http::RefusalHandler refusal = [&stats](http::Request& q, http::Response& s, int status,
                                                std::string_view reason) { refused(q, s, stats, status, reason); };
  auto w = [&wrap](http::Handler h) { return wrap ? wrap(std::move(h)) : h; };
  router.get(base.empty() ? "/" : base, w([&store](http::Request&, http::Response& res) { list_topics(res, store); }),
             refusal);
  router.post(records, w([&store, &stats, options](http::Request& q, http::Response& s) {
                post_records(q, s, store, stats, options);
              }),
              refusal);
  router.get(records, w([&store, &stats, options](http::Request& q, http::Response& s) {
               get_records(q, s, store, stats, options);
             }),
             refusal);
  // The live tail: checked as a GET of records, then upgraded (websocket::accept answers 101,
  // or 426/400 to a request that is no WebSocket handshake).
  websocket::Options wo;
  wo.max_message_size = 64 * 1024;  // a tail's client sends nothing but control frames
  wo.send_queue_bytes = options.tail_queue_bytes;
  const http::Handler upgrade =
      websocket::accept([&store, &stats, options](websocket::Socket& ws,
                                                  const http::Request& q) { live_tail(ws, q, store, stats, options); },
                        wo);
  router.get(base + "/{topic}/partitions/{p}/ws", w([&store, &stats, upgrade](http::Request& q, http::Response& s) {
               if (tail_start(q, s, store, stats)) upgrade(q, s);
             }),
             refusal);
}
}  // namespace lionet::app
