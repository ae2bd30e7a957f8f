// lionet/http2/server_respond.cc: the HTTP/2 server's responses and access log: respond() (a
// handler's response submitted, batched with the others ready, then its body writer run),
// submit() (status and headers to a HEADERS frame, the body's data source) and each stream's
// access log line (log_stream). The session, the callbacks and the protocols (top comment) are
// server.cc; bodies and flow control are server_body.cc.
#include <nghttp2/nghttp2.h>

#include <charconv>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "lionet/base/strings.h"
#include "lionet/http/date.h"
#include "lionet/http/status.h"
#include "lionet/http2/detail/server_session.h"
#include "lionet/log/log.h"
#include "lionet/sched/scheduler.h"

namespace lionet::http2::detail {

// ---- responses ----------------------------------------------------------------------------

bool Session::submit_answer(H2Stream& st) {
  http::Response& res = st.response;
  st.handler_done = true;
  if (!dead_ && !st.reset && st.body.size() > st.body_read) {
    nghttp2_session_consume(s_, st.id, st.body.size() - st.body_read);  // unread body: window back
  }
  st.body.clear();
  st.body_read = 0;
  if (dead_ || st.reset) return false;
  if (st.body_too_large) http::overrule_for_body_error(res, 413, "request body larger than max_body_bytes");
  if (res.has_takeover() || res.status() == 101) [[unlikely]] {
    // A connection takeover (http/takeover.h) is HTTP/1.1's: HTTP/2 has no 101, and RFC
    // 8441's extended CONNECT (WebSocket over a stream) is not supported.
    res.reset();
    res.reply(501,
              "Not Implemented: this resource switches protocols (101), which needs HTTP/1.1; "
              "RFC 8441 (WebSocket over HTTP/2) is not supported\n");
  }
  submit(st);
  return true;
}

void Session::respond(const std::shared_ptr<H2Stream>& sp) {
  H2Stream& st = *sp;
  std::unique_lock lk(mu_);
  if (!submit_answer(st)) return;
  if (running_ > 1) {
    // Other handlers of this connection are still running (a client with many streams in
    // flight): let the ones that are ready submit first, so one write carries several
    // responses (one system call and one TLS record instead of one each). A slow handler
    // holds nobody back: this waits for one turn of the scheduler, not for the others.
    lk.unlock();
    this_fiber::yield();
    lk.lock();
    if (dead_ || st.reset) return;
  }
  flush();
  if (st.src == H2Stream::Src::kWriter) write_body(sp, lk);
}

void Session::write_body(const std::shared_ptr<H2Stream>& sp, std::unique_lock<Mutex>& lk) {
  H2Stream& st = *sp;
  lk.unlock();
  // The body writer runs in this fiber, after the response head was submitted.
  WriterPipe pipe(sp);
  http::BodyWriter bw(pipe, /*chunked=*/false, {});
  bool ok = false;
  try {
    ok = static_cast<bool>(st.response.writer()(bw));
  } catch (const std::exception& e) {
    LIONET_LOG_ERROR(h2_log(), "body writer threw on stream {}: {}", st.id, e.what());
  }
  lk.lock();
  if (dead_ || st.reset) return;
  if (!ok) {
    nghttp2_submit_rst_stream(s_, NGHTTP2_FLAG_NONE, st.id, NGHTTP2_INTERNAL_ERROR);
  } else {
    st.pipe_eof = true;
    resume(st);
  }
  flush();
}

void Session::response_fields(std::string_view block, H2Stream& st, std::vector<nghttp2_nv>& nva) {
  constexpr uint8_t kNoCopy = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;
  FieldsMemo& m = fields_memo_;
  if (block == m.block) {
    st.resp_names.assign(m.names);  // the stream keeps them until its HEADERS frame is sent
    const char* names = st.resp_names.data();
    for (const FieldsMemo::Field& f : m.fields) {
      nghttp2_nv v = detail::nv({names + f.name_off, f.name_len}, {block.data() + f.value_off, f.value_len});
      v.flags = kNoCopy;
      nva.push_back(v);
    }
    return;
  }
  const size_t first = nva.size();
  header_fields(block, st.resp_names, nva, kNoCopy);
  if (block.size() > FieldsMemo::kMemoMax) return;
  // header_fields wrote the names back to back from the start of resp_names.
  const auto* names = reinterpret_cast<const uint8_t*>(st.resp_names.data());
  const auto* base = reinterpret_cast<const uint8_t*>(block.data());
  m.fields.clear();
  size_t names_len = 0;
  for (size_t i = first; i < nva.size(); ++i) {
    const nghttp2_nv& v = nva[i];
    m.fields.push_back({static_cast<uint32_t>(v.name - names), static_cast<uint32_t>(v.namelen),
                        static_cast<uint32_t>(v.valuelen == 0 ? 0 : v.value - base),  // "" may be no view
                        static_cast<uint32_t>(v.valuelen)});
    names_len = static_cast<size_t>(v.name - names) + v.namelen;
  }
  m.names.assign(st.resp_names, 0, names_len);
  m.block.assign(block);
}

void Session::submit(H2Stream& st) {
  http::Response& res = st.response;
  const bool head_only = equals_literal(st.head.method, "HEAD");
  const int status = res.status();
  const bool no_body = head_only || !http::status_has_body(status);
  const int code = status >= 100 && status <= 999 ? status : 500;
  st.status_text[0] = static_cast<char>('0' + code / 100);
  st.status_text[1] = static_cast<char>('0' + code / 10 % 10);
  st.status_text[2] = static_cast<char>('0' + code % 10);

  // Everything but the date is handed over without a copy (nghttp2 reads it when it encodes the
  // HEADERS frame, before this stream can be recycled): literals, the server's name, the
  // response's own header block and what this stream keeps for it.
  constexpr uint8_t kNoCopy = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;
  std::vector<nghttp2_nv>& nva = nva_;
  nva.clear();
  auto add = [&](std::string_view n, std::string_view v, uint8_t flags) {
    nghttp2_nv f = detail::nv(n, v);
    f.flags = flags;
    nva.push_back(f);
  };
  add(":status", std::string_view(st.status_text, 3), kNoCopy);
  std::string_view date = http::date_line();  // "Date: <IMF-fixdate>\r\n", changes each second: copied
  if (date.size() > 8) add("date", date.substr(6, date.size() - 8), NGHTTP2_NV_FLAG_NO_COPY_NAME);
  if (!c_.options.server_name.empty()) add("server", c_.options.server_name, kNoCopy);
  response_fields(res.header_block(), st, nva);

  std::optional<uint64_t> size = res.body_size();
  if (size && status >= 200 && status != 204) {
    char* end = std::to_chars(st.length_text, st.length_text + sizeof st.length_text, *size).ptr;
    add("content-length", std::string_view(st.length_text, static_cast<size_t>(end - st.length_text)), kNoCopy);
  }

  const bool has_trailers = !res.trailer_block().empty();  // sent after the body, so a body it is
  nghttp2_data_provider prd{};
  prd.source.ptr = &st;
  prd.read_callback = read_source;
  const nghttp2_data_provider* use = nullptr;
  if (!no_body) {
    switch (res.body_type()) {
      case http::Response::BodyType::kMemory:
      case http::Response::BodyType::kView:
        st.src = H2Stream::Src::kMemory;
        st.memory = res.body_view();
        if (!st.memory.empty() || has_trailers) use = &prd;
        break;
      case http::Response::BodyType::kFile:
        st.src = H2Stream::Src::kFile;
        st.fd = res.file_fd();
        st.file_offset = res.file_offset();
        st.file_left = res.file_length();
        if (st.file_left > 0 || has_trailers) use = &prd;
        break;
      case http::Response::BodyType::kWriter:
        st.src = H2Stream::Src::kWriter;
        use = &prd;
        break;
    }
  }
  st.sending = use != nullptr;
  int rv = nghttp2_submit_response(s_, st.id, nva.data(), nva.size(), use);
  if (rv == 0) st.status_sent = code;
  if (rv != 0) {
    LIONET_LOG_DEBUG(h2_log(), "submit_response on stream {}: {}", st.id, nghttp2_strerror(rv));
    st.src = H2Stream::Src::kNone;
    st.sending = false;
  }
}

void Session::log_stream(H2Stream& st) {
  if (!alog_ || st.logged) return;
  st.logged = true;
  if (!st.head_built && !st.refused) return;  // no request: refused after GOAWAY, over a header limit
  auto field = [&](int i) { return i < 0 ? std::string_view() : st.field_value(st.fields[static_cast<size_t>(i)]); };
  http::AccessLogEntry e;
  e.remote_addr = peer_.of(c_.info);
  e.method = field(st.method);
  e.target = field(st.path);
  e.protocol = "HTTP/2.0";  // as nginx writes it
  e.status = st.status_sent ? st.status_sent : st.refused ? st.refused : 499;
  e.body_bytes_sent = st.body_sent;
  e.request_time = now() - st.started;
  if (st.head_built) {
    e.referer = st.head.headers.get("referer");
    e.user_agent = st.head.headers.get("user-agent");
  }
  e.server = http::log_server_name(c_.options.tcp.name);
  alog_->log(e);
}

}  // namespace lionet::http2::detail
