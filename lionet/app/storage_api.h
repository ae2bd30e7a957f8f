// lionet/app/storage_api.h: the log store over HTTP (routes of type `storage`).
//
//   POST {prefix}/{topic}/partitions/{p}/records[?key=K]
//        body = one record (K, percent-decoded, is its key); with Content-Type:
//        application/x-ndjson (any letter case, parameters allowed) each line is one record's
//        value, stored as the bytes sent (not parsed), and all of them are appended as ONE
//        batch (one write, one CRC, one sync; a final newline does not make an empty record, a
//        CR before a newline belongs to the line end, K keys every record; at most
//        max_records_per_post lines). Answers 201 {"topic","partition","base_offset","count",
//        "offsets":[...]} only once the append returned, i.e. the flush policy is met: that is
//        what "acknowledged" means.
//   GET  {prefix}/{topic}/partitions/{p}/records?offset=N&max_bytes=M
//        application/x-ndjson, one {"offset","timestamp","key","value"} per record, plus
//        X-Next-Offset. offset defaults to the partition's start; max_bytes to
//        default_read_bytes, capped at max_read_bytes (the batch holding `offset` is always
//        returned whole, so a reader always progresses).
//   GET  {prefix}/{topic}/partitions/{p}/ws?offset=N   (a WebSocket handshake)
//        the live tail: after 101, one text message per record in the GET's JSON shape, from
//        offset N (default: the end, i.e. records appended from now on; below the partition's
//        start: its start) on, each sent as soon as it is appended (the fiber parks on the
//        log, Log::wait_beyond: no polling). Checked before the upgrade as a GET (400, 404; an
//        offset past the end: 416); not a WebSocket handshake: 426. Replaying older records
//        waits for the client (send parks); once a tail has reached the end, new records are
//        queued without waiting (try_send), and a client whose queue would pass
//        tail_queue_bytes, or that is more than tail_max_lag records behind, is closed with
//        1008 and a reason: a slow client never slows the producers (they never wait for a
//        tail). A tail that cannot read closes with 1011.
//   GET  {prefix}  {"topics":[{"name","partitions"}]}
// Keys and values are JSON strings (control characters and DEL as \u00XX); a key or value that
// is not valid UTF-8 (strict: no overlongs or surrogates), or whose escapes would more than
// double it (mostly control bytes: 8 MB of NUL would be 48 MB of \u0000), is sent as
// "key_base64" / "value_base64" (RFC 4648 with padding) instead, so every line is valid JSON,
// no answer grows past 2x its data, and every byte round-trips. An error message quoting request bytes that are not UTF-8 shows each as U+FFFD.
// Errors: JSON {"error": "..."}:
//   400 malformed number (not digits, negative, overflowing: offset=-1 as offset=abc), topic
//       name or partition, empty body, malformed percent-encoding;
//   404 unknown topic (a read, or an append with auto_create_topics off), or a partition past
//       the topic's count;
//   405 other methods (the Router's answer, plain text, with Allow);
//   413 record or batch over max_batch_bytes, body over the server's max_body_bytes (a
//       Content-Length over it is answered from the head, the body unread, and the connection
//       closes), too many lines;
//   416 offset out of range (the message gives the valid range);
//   500 corrupt data (the message names the offset) or an IO error (the append whose
//       fdatasync failed gets this one: EIO);
//   503 the log refuses appends after a failed fdatasync, or its files are not writable
//       (EROFS, EPERM, EACCES); reads go on;
//   507 no space (ENOSPC, EDQUOT, EFBIG): the batch was not appended; earlier records stay
//       readable and later appends succeed once there is room.
// With auto_create_topics on, an append naming a valid unknown topic creates it, as Store::log()
// does. Reads never create (Store::find()): a GET of an unknown topic is 404, and the topic list
// and the data directory stay as they were.
//
// Owns: request parsing and JSON for these routes. Must not: throw on the request path, or
// answer 201 before the append returned.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "lionet/base/metrics.h"
#include "lionet/http/router.h"
#include "lionet/storage/store.h"

namespace lionet::app {

struct StorageApiOptions {
  std::size_t max_read_bytes = 1 << 20;  // YAML: storage.api.max_read_bytes
  std::size_t default_read_bytes = 64 << 10;  // YAML: storage.api.default_read_bytes
  std::size_t max_records_per_post = 10000;  // YAML: storage.api.max_records_per_post
  // A live tail (GET .../ws) that has caught up and then falls this many records behind the
  // end, or whose send queue would pass tail_queue_bytes, is closed with 1008.
  std::size_t tail_max_lag = 10000;  // YAML: storage.api.tail_max_lag
  std::size_t tail_queue_bytes = 1 << 20;  // YAML: storage.api.tail_queue_bytes
};

// Relaxed counters for /metrics (base/metrics.h).
struct StorageApiStats {
  Counter appends;  // POSTs acknowledged
  Counter append_records;  // records in them
  Counter append_bytes;  // key + value bytes in them
  Counter reads;  // GETs of records answered 200
  Counter read_records;
  Counter read_bytes;  // key + value bytes returned
  Counter errors;  // requests answered with an error
};

// Registers the routes above on `router`, each with its JSON answer to requests the server
// refuses by their head (the 413 above: it reaches clients when the server's
// ServerOptions::refusal is router.refusal_handler()); store and stats must outlive the server.
// `wrap`, when given, is put around each handler (the route's address rules, rate limit and
// authentication: app/routes.cc).
void add_storage_routes(http::Router& router, std::string_view prefix, storage::Store& store, StorageApiStats& stats,
                        StorageApiOptions options = {}, const std::function<http::Handler(http::Handler)>& wrap = {});

// One record as the GET answer writes it (without the newline): {"offset":..,"timestamp":..,
// "key":..,"value":..}, key and value as JSON strings when they are UTF-8 (and escaping at most
// doubles them), else as "key_base64" / "value_base64".
void append_record_json(std::string& out, const storage::RecordView& rec);
}  // namespace lionet::app
