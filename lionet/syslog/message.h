// lionet/syslog/message.h: syslog messages (RFC 5424 and RFC 3164) parsed without IO, and the
// JSON value a message is stored as.
//
//   auto m = lionet::syslog::parse("<13>1 2026-11-25T21:05:00.123Z host app 42 ID47 - hello");
//   m.format == Format::kRfc5424; m.severity == 5; m.host == "host"; m.msg == "hello";
//
// Owns: the parsing rules and the stored form. Must not: allocate while parsing (a Message's
// fields are views into the input), or reject anything: input that follows neither RFC is a
// Message with format kRaw and malformed set (its msg is the whole input), so nothing received
// is lost.
//
// Rules (what counts as which):
//   - "<PRI>" (1 to 3 digits, 0..191, no leading zero except "<0>") starts every message; a
//     missing or bad PRI: malformed.
//   - "<PRI>1 " continues as RFC 5424: TIMESTAMP (RFC 3339 with a 'T', fraction up to 6
//     digits, "Z" or +hh:mm, or "-"), HOSTNAME, APP-NAME, PROCID, MSGID (printable ASCII,
//     "-" = none), STRUCTURED-DATA ("-" or [id param="value" ...]... with \" \\ \] escapes),
//     then an optional SP and MSG (a UTF-8 BOM before it is dropped). Any field out of shape:
//     malformed (the whole input kept).
//   - Any other "<PRI>" is RFC 3164 (BSD): "Mmm dd hh:mm:ss " (day space-padded or not) then
//     HOSTNAME and TAG ("app", "app[pid]", ending in ':' or '['), then MSG. A message without
//     that timestamp is still RFC 3164 (RFC 3164 4.3.3: the relay keeps it whole as MSG, host
//     and app unknown). The timestamp has no year or zone: this host's local time in the year
//     that puts it nearest to `now` (a December stamp read in January is last year's).
//   - Trailing '\n', '\r' and '\0' (what senders append over UDP) are not part of the message.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lionet::syslog {

enum class Format : uint8_t { kRfc5424, kRfc3164, kRaw };
const char* to_string(Format f) noexcept;  // "rfc5424", "rfc3164", "raw"

struct Message {
  Format format = Format::kRaw;
  bool malformed = false;  // neither RFC's shape: msg is the whole input
  int facility = -1;  // 0..23, -1 when malformed
  int severity = -1;  // 0..7, -1 when malformed
  // Milliseconds since the Unix epoch from the message's own timestamp; nullopt without one.
  std::optional<int64_t> timestamp_ms;
  std::string_view host, app, procid, msgid;  // empty: absent ("-" in RFC 5424)
  std::string_view structured_data;  // RFC 5424 SD as sent, empty for "-"
  std::string_view msg;
};

// Parses one message (the framing already removed). now_ms: the wall clock, for RFC 3164's
// year. Never fails (see above).
Message parse(std::string_view input, int64_t now_ms);

// The record value a message is stored as: one JSON object,
//   {"format":"rfc5424","facility":1,"severity":5,"host":"h","app":"a","procid":"42",
//    "msgid":"ID47","sd":"[x@1 a=\"b\"]","msg":"hello","peer":"127.0.0.1"}
// absent fields left out; a malformed message: {"format":"raw","malformed":true,
// "peer":"...","msg":"<the whole input>"}; "truncated":true when the input was cut at the
// size limit. Strings are JSON-escaped; bytes that are not valid UTF-8 become \u00XX of their
// value, so the value always parses. Appended to out.
void to_json(const Message& m, std::string_view peer, bool truncated, std::string& out);

// The record key: the host name, or the app name when `by_app` (or when there is no host
// name), empty when neither is known.
std::string_view record_key(const Message& m, bool by_app) noexcept;
}  // namespace lionet::syslog
