// lionet/app/storage_api.h: the log store over HTTP (routes of type `storage`).
//
//   POST {prefix}/{topic}/partitions/{p}/records[?key=K]
//        body = one record; with Content-Type: application/x-ndjson each line is one record and
//        all of them are appended as ONE batch (one write, one CRC, one sync; a final newline
//        does not make an empty record). Answers 201 {"topic","partition","base_offset","count",
//        "offsets":[...]} only once the append returned, i.e. the flush policy is met: that is
//        what "acknowledged" means.
//   GET  {prefix}/{topic}/partitions/{p}/records?offset=N&max_bytes=M
//        application/x-ndjson, one {"offset","timestamp","key","value"} per record, plus
//        X-Next-Offset. offset defaults to the partition's start; max_bytes to
//        default_read_bytes, capped at max_read_bytes (the batch holding `offset` is always
//        returned whole, so a reader always progresses).
//   GET  {prefix}  {"topics":[{"name","partitions"}]}
// Keys and values are JSON strings (control characters as \u00XX); a key or value that is not
// valid UTF-8 is sent as "key_base64"/"value_base64" instead, so every line is valid JSON.
// Errors: JSON {"error": "..."}: 400 bad number / topic name / partition / empty body, 404
// unknown topic (auto_create_topics off), 413 record or batch too large, 416 offset out of
// range (the message gives the valid range), 500 corrupt data or IO error, 503 the log refuses
// appends after a failed fdatasync or its files are not writable (EROFS, EPERM, EACCES), 507 no space (ENOSPC, EDQUOT, EFBIG: the batch was not
// appended; earlier records stay readable and later appends succeed once there is room).
//
// Owns: request parsing and JSON for these routes. Must not: throw on the request path, or
// answer 201 before the append returned.
#pragma once

#include <cstddef>
#include <string_view>

#include "lionet/base/metrics.h"
#include "lionet/http/router.h"
#include "lionet/storage/store.h"

namespace lionet::app {

struct StorageApiOptions {
  std::size_t max_read_bytes = 1 << 20;       // YAML: storage.api.max_read_bytes
  std::size_t default_read_bytes = 64 << 10;  // YAML: storage.api.default_read_bytes
  std::size_t max_records_per_post = 10000;   // YAML: storage.api.max_records_per_post
};

// Relaxed counters for /metrics (base/metrics.h).
struct StorageApiStats {
  Counter appends;         // POSTs acknowledged
  Counter append_records;  // records in them
  Counter append_bytes;    // key + value bytes in them
  Counter reads;           // GETs of records answered 200
  Counter read_records;
  Counter read_bytes;      // key + value bytes returned
  Counter errors;          // requests answered with an error
};

// Registers the routes above on `router`; store and stats must outlive the server.
void add_storage_routes(http::Router& router, std::string_view prefix, storage::Store& store, StorageApiStats& stats,
                        StorageApiOptions options = {});
}  // namespace lionet::app
