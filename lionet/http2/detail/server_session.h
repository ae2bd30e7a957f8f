// lionet/http2/detail/server_session.h: the HTTP/2 server's private types, shared by its three
// files: H2Stream (one request/response exchange), WriterPipe (the Stream a body writer writes
// into) and Session (one connection and its nghttp2 session), with the helpers more than one of
// them uses (h2_log, header_fields). Session's members are defined in server.cc
// (set-up, the connection loop, the nghttp2 callbacks, requests), server_body.cc (bodies and
// flow control) and server_respond.cc (responses, the access log); locking, the access log and
// lifetimes are described at the top of server.cc. Internal to http2/: serve_connection() in
// server.h is the public entry.
#pragma once

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lionet/base/clock.h"
#include "lionet/http/access_log.h"
#include "lionet/http/field_block.h"
#include "lionet/http/headers.h"
#include "lionet/http2/detail/mem_pool.h"
#include "lionet/http2/detail/output.h"
#include "lionet/http2/detail/sink_stream.h"
#include "lionet/http2/server.h"
#include "lionet/log/log.h"
#include "lionet/sync/cond_var.h"
#include "lionet/sync/mutex.h"
#include "lionet/sync/wait_group.h"

namespace lionet::http2::detail {

inline const std::shared_ptr<spdlog::logger>& h2_log() {
  static const auto lg = log::get("http2");
  return lg;
}

class Session;

// Appends the fields of an HTTP/1-style block ("Name: value\r\n" lines, as Response keeps
// them) to nva, names lowercased into `names` (its bytes overwritten; grown here to the block's
// size first, so it never moves while nva points into it; it must outlive nva), without the
// connection-specific fields that have no meaning in HTTP/2 (RFC 9113 8.2.2) and without
// Content-Length (the caller adds its own). Values are viewed in place, not copied. `flags` go
// on each field: NGHTTP2_NV_FLAG_NO_COPY_NAME | NO_COPY_VALUE when block and names outlive the
// frame (nghttp2 then copies neither).
inline void header_fields(std::string_view block, std::string& names, std::vector<nghttp2_nv>& nva,
                          uint8_t flags = NGHTTP2_NV_FLAG_NONE) {
  if (names.size() < block.size()) names.resize(block.size());  // names are shorter than their lines
  char* out = names.data();
  http::for_each_line(block, [&](size_t, size_t, std::string_view n, std::string_view value) {
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    http::ascii_lower_copy(out, n.data(), n.size());
    std::string_view name(out, n.size());
    // RFC 9113 8.2.2 (the hop-by-hop names are 2-17 bytes: "te" .. "transfer-encoding").
    if (name.size() <= 17 && (http::is_hop_by_hop(name) || name == "content-length")) return true;
    out += n.size();
    nghttp2_nv f = detail::nv(name, value);
    f.flags = flags;
    nva.push_back(f);
    return true;
  });
}

// One request/response exchange.
struct H2Stream final : http::detail::BodySource {
  Session* session = nullptr;
  int32_t id = 0;
  size_t slot = 0;  // its index in Session::streams_ while open

  // Request head: names and values copied into `store`, then viewed by `head`.
  std::string store;
  struct Field {
    uint32_t name_off, name_len, value_off, value_len;
  };
  std::vector<Field> fields;
  int method = -1, path = -1, authority = -1;  // indices into fields (pseudo-headers)
  size_t header_bytes = 0;
  bool head_built = false;  // head's views point into store: nothing is appended after
  http::RequestHead head;
  http::Request request;
  http::Response response;

  // Request body (guarded by Session::mu_).
  std::string body;
  size_t body_read = 0;
  bool body_eof = false;
  bool reset = false;  // closed by the peer or the connection: no more IO
  bool handler_done = false;  // the handler returned: DATA is consumed and dropped
  // The fiber running the handler, while it runs: cancelled when the stream or the connection
  // ends under it (ServerOptions::cancel_on_disconnect).
  Fiber* handler_fiber = nullptr;
  uint64_t body_total = 0;  // DATA bytes received
  bool body_too_large = false;  // over max_body_bytes: the rest is dropped, reads fail EMSGSIZE
  CondVar cv;  // body bytes, writer room, reset

  // Response body source, read by the session (data provider).
  enum class Src : uint8_t { kNone, kMemory, kFile, kWriter } src = Src::kNone;
  std::string_view memory;
  int fd = -1;
  off_t file_offset = 0;
  uint64_t file_left = 0;
  std::string pipe;  // writer bytes not yet framed
  size_t pipe_read = 0;
  bool pipe_eof = false;
  bool deferred = false;  // the session was told NGHTTP2_ERR_DEFERRED
  bool sending = false;  // a response body is submitted and its end not yet framed

  // Access log (guarded by Session::mu_).
  TimePoint started{};  // the request's HEADERS frame began
  uint64_t body_sent = 0;  // DATA payload bytes framed
  int status_sent = 0;  // the status of the response submitted (0: none)
  int refused = 0;  // 400: refused as malformed, the handler never ran
  bool logged = false;
  // The response head handed to nghttp2 without a copy (NO_COPY_NAME/VALUE), alive until the
  // stream is recycled, after its HEADERS frame was sent or dropped (or the session ended: see
  // Session::end): the lowercased header names (header_fields), the status and the
  // Content-Length as text.
  std::string resp_names;
  char status_text[3] = {};
  char length_text[24] = {};

  std::string_view field_name(const Field& f) const { return {store.data() + f.name_off, f.name_len}; }
  std::string_view field_value(const Field& f) const { return {store.data() + f.value_off, f.value_len}; }

  Result<size_t> read_body(void* buf, size_t n) override;
  bool body_complete() const noexcept override { return body_eof && body_read == body.size(); }

  // Back to a new stream's state (Session's pool): what the response holds (a file, a cache
  // entry, a writer) is let go here; a buffer keeps its capacity up to kKeepBytes, a larger one
  // (an upload's body, a big memory answer) is freed, so a pool of idle streams stays small.
  static constexpr size_t kKeepBytes = 8 * 1024;
  void recycle() noexcept {
    auto trim = [](std::string& b) {
      if (b.capacity() > kKeepBytes) std::string().swap(b);
      else b.clear();
    };
    id = 0;
    slot = 0;
    trim(store);
    if (fields.capacity() > kKeepBytes / sizeof(Field)) std::vector<Field>().swap(fields);
    fields.clear();
    method = path = authority = -1;
    header_bytes = 0;
    head_built = false;
    http::HeaderList headers = std::move(head.headers);
    headers.clear();
    head = http::RequestHead{};
    head.headers = std::move(headers);
    request.reset(nullptr, nullptr);
    response.reset();
    if (response.body().capacity() > kKeepBytes) response = http::Response();
    trim(body);
    body_read = 0;
    body_eof = reset = handler_done = false;
    handler_fiber = nullptr;
    body_total = 0;
    body_too_large = false;
    src = Src::kNone;
    memory = {};
    fd = -1;
    file_offset = 0;
    file_left = 0;
    trim(pipe);
    pipe_read = 0;
    pipe_eof = deferred = sending = false;
    started = {};
    body_sent = 0;
    status_sent = refused = 0;
    logged = false;
    if (resp_names.capacity() > kKeepBytes) std::string().swap(resp_names);  // its bytes are overwritten
  }
};

// A Stream the response body writer writes into (http::BodyWriter needs one).
class WriterPipe final : public detail::SinkStream {
 public:
  explicit WriterPipe(std::shared_ptr<H2Stream> st) : st_(std::move(st)) {}
  using SinkStream::write;
  Result<size_t> write(const void* buf, size_t n) override;

 private:
  std::shared_ptr<H2Stream> st_;
};

class Session {
 public:
  Session(const http::ProtocolHandoff& c, const Options& o) : c_(c), o_(o) {}
  ~Session() {
    if (s_) nghttp2_session_del(s_);
  }

  void run();

  // For handler fibers and pipes (each takes mu_ itself).
  void respond(const std::shared_ptr<H2Stream>& st);
  Result<size_t> read_body(H2Stream& st, void* buf, size_t n);
  Result<size_t> write_pipe(H2Stream& st, const void* buf, size_t n);

 private:
  bool setup();
  // The stream's access log line, once (mu_ held; see the top of server.cc).
  void log_stream(H2Stream& st);
  // Writes what the session has to send (mu_ held). False once the connection is dead.
  bool flush();
  void end();  // mu_ held: every stream reset, waiters woken
  // A request head is complete: its handler runs inline (queued for run_inline) or in a fiber.
  void start_handler(const std::shared_ptr<H2Stream>& st);
  // The handlers of the requests the last input carried that run on this fiber
  // (ServerOptions::runs_inline), their answers submitted (lk holds mu_; released while they run).
  void run_inline(std::unique_lock<Mutex>& lk);
  // Runs the handler, an exception answered 500 (mu_ not held).
  void call_handler(H2Stream& st);
  // mu_ held: the handler has answered: the unread body's window back, the overrulings, then
  // submit(). False: nothing goes out (the stream or the connection is gone).
  bool submit_answer(H2Stream& st);
  // mu_ held by lk: runs the response's body writer (lk released meanwhile), then ends the body.
  void write_body(const std::shared_ptr<H2Stream>& sp, std::unique_lock<Mutex>& lk);
  // mu_ held: a fiber for the body writer of a response answered inline.
  void spawn_writer(const std::shared_ptr<H2Stream>& st);
  // mu_ held: a fiber named `name` running work(st) (mu_ not held), counted in running_ and
  // handlers_ until it ends; if none can be had, st is reset with refuse_code (server.cc).
  template <class Work>
  void spawn_for(const std::shared_ptr<H2Stream>& st, std::string_view name, uint32_t refuse_code, Work work);
  void cancel_handler(H2Stream& st);  // under mu_: the stream ended while its handler runs
  // 0, or the status that refuses the request (400 malformed, 413 body over the limit).
  int build_head(H2Stream& st);
  void submit(H2Stream& st);
  // Appends the fields of the response's header block to nva (header_fields, NO_COPY), the
  // names lowercased into st.resp_names; through fields_memo_ when the block is the last one's.
  void response_fields(std::string_view block, H2Stream& st, std::vector<nghttp2_nv>& nva);

  static int on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user);
  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                       const uint8_t* value, size_t valuelen, uint8_t flags, void* user);
  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user);
  static int on_data_chunk(nghttp2_session*, uint8_t flags, int32_t id, const uint8_t* data, size_t len, void* user);
  static int on_stream_close(nghttp2_session*, int32_t id, uint32_t error_code, void* user);
  static int on_begin_frame(nghttp2_session*, const nghttp2_frame_hd* hd, void* user);
  static int on_frame_send(nghttp2_session*, const nghttp2_frame* frame, void* user);
  static int on_invalid_frame(nghttp2_session*, const nghttp2_frame* frame, int lib_error, void* user);
  static ssize_t read_source(nghttp2_session*, int32_t id, uint8_t* buf, size_t length, uint32_t* flags,
                             nghttp2_data_source* source, void* user);
  static ssize_t read_body_source(H2Stream* st, uint8_t* buf, size_t length, uint32_t* flags);
  static int send_data(nghttp2_session*, nghttp2_frame* frame, const uint8_t* framehd, size_t length,
                       nghttp2_data_source* source, void* user);

  // A stream from this thread's cache (or a new one): its last reference gives it back
  // (release(), to the cache of the thread it drops on; server.cc). Every reference is dropped
  // before the session ends (handlers_ waits for the fibers holding one).
  std::shared_ptr<H2Stream> new_stream();
  static void release(H2Stream* st) noexcept;

  // The open stream `id` (nghttp2's stream user data; our reference is in streams_), or null.
  // The last one found is remembered: each field of a HEADERS frame asks for the same stream
  // (nghttp2 looks it up in a hash map each time).
  H2Stream* find(int32_t id) {
    if (id == found_id_) return found_;
    auto* st = static_cast<H2Stream*>(nghttp2_session_get_stream_user_data(s_, id));
    if (st) {
      found_id_ = id;
      found_ = st;
    }
    return st;
  }
  // streams_ without st (swapped out of its slot): nghttp2 no longer names it.
  void forget(H2Stream& st) {
    if (found_id_ == st.id) {
      found_id_ = 0;  // 0 is never a stream's
      found_ = nullptr;
    }
    nghttp2_session_set_stream_user_data(s_, st.id, nullptr);  // fails harmlessly for a closed stream
    std::shared_ptr<H2Stream>& last = streams_.back();
    last->slot = st.slot;
    std::swap(streams_[st.slot], last);  // st's reference goes last, then is dropped
    streams_.pop_back();
  }

  const http::ProtocolHandoff& c_;
  const Options& o_;
  MemPool mem_pool_;  // how libnghttp2 allocates for this session (per-thread free lists)
  nghttp2_session* s_ = nullptr;
  Mutex mu_;
  bool dead_ = false;  // the stream failed or ended: nothing more is written
  // The open streams (each found by find(), nghttp2's stream user data), in no order.
  std::vector<std::shared_ptr<H2Stream>> streams_;
  WaitGroup handlers_;
  detail::OutBuf* out_ = nullptr;  // the buffer flush() gathers output in, while it runs (send_all)
  std::vector<nghttp2_nv> nva_;  // submit()'s field list (mu_), reused
  // What header_fields made of the last response header block of this connection (mu_): the
  // next response whose block holds the same bytes (a static file's fields, a fixed handler's)
  // copies its lowercased names and places its values by offset instead of walking the lines
  // again. Blocks over kMemoMax bytes are not kept; a connection with no stream for a read
  // timeout drops it (run()).
  struct FieldsMemo {
    static constexpr size_t kMemoMax = 1024;
    struct Field {
      uint32_t name_off, name_len, value_off, value_len;
    };
    std::string block;  // the block
    std::string names;  // its fields' lowercased names, back to back (resp_names' bytes)
    std::vector<Field> fields;  // name offsets into names, value offsets into block
    // Frees the three buffers (assigning an empty memo would keep the strings' heap buffers).
    void release() noexcept {
      std::string().swap(block);
      std::string().swap(names);
      std::vector<Field>().swap(fields);
    }
  } fields_memo_;
  int32_t found_id_ = 0;  // find()'s last answer (mu_), forgotten with its stream
  H2Stream* found_ = nullptr;
  // Streams whose handlers run inline after the current input (run_inline), and the batch
  // running; swapped, so neither allocates once warm.
  std::vector<std::shared_ptr<H2Stream>> inline_ready_, inline_batch_;
  int32_t max_peer_stream_ = 0;  // highest stream id a client HEADERS frame has used
  // The last streams we reset or refused, at most reset_memory() of them, each noted when
  // its RST_STREAM is queued (remember_reset): their DATA and trailers may still come, and are
  // ignored (RFC 9113 5.1, "closed"). ignored_ is the last id found here (a run of DATA
  // frames for one reset stream looks it up once).
  std::vector<int32_t> reset_sent_;
  int32_t ignored_ = 0;
  size_t reset_memory() const noexcept { return std::clamp<size_t>(2 * size_t{o_.max_concurrent_streams}, 64, 1024); }
  void remember_reset(int32_t id);
  // A client stream nghttp2 no longer knows (it forgets closed streams) that the peer closed:
  // below the highest id used, and not one we reset or refused after our GOAWAY.
  bool closed_by_peer(int32_t id);
  // Input to nghttp2 (mem_recv), cut before each DATA frame's header completes so that
  // closed_by_peer judges it with every earlier frame processed: nghttp2 ignores DATA on a
  // stream it has forgotten without calling back. Frame boundaries are followed in `scan_`.
  ssize_t recv(const uint8_t* in, size_t n);
  struct FrameScan {
    size_t skip = 24;  // bytes before the next frame header: the client preface, then payloads
    uint8_t hd[9];  // a frame header split over two inputs
    uint8_t have = 0;  // its bytes so far
  } scan_;
  // Limits (see Options).
  int terminate(uint32_t code);  // GOAWAY code, then the connection ends
  // Writer bytes (or their end) for a stream the session was told to defer: frame them again.
  void resume(H2Stream& st) {
    if (!st.deferred) return;
    st.deferred = false;
    nghttp2_session_resume_data(s_, st.id);
  }
  // GOAWAY NO_ERROR naming `last`: streams above it are refused, the open ones finish.
  void goaway(int32_t last) {
    goaway_last_ = last;
    nghttp2_submit_goaway(s_, NGHTTP2_FLAG_NONE, last, NGHTTP2_NO_ERROR, nullptr, 0);
    goaway_sent_ = true;
  }
  void fail(ssize_t rv);  // mem_recv failed: GOAWAY (if none is queued), then end
  bool terminated_ = false;
  bool write_shut_ = false;
  bool write_failed_ = false;  // a write to the peer failed: no lingering close
  bool peer_eof_ = false;  // no more input will come
  CondVar drained_;  // a handler finished (run() waits for the last ones at end of input)
  int running_ = 0;  // handler fibers that have not yet submitted their response
  uint64_t streams_opened_ = 0;
  bool goaway_sent_ = false;
  int32_t goaway_last_ = INT32_MAX;  // streams above it are refused once goaway_sent_
  double reset_tokens_ = 0;
  TimePoint reset_refill_{};
  uint32_t continuations_ = 0;  // CONTINUATION frames of the header block being received
  uint64_t block_bytes_ = 0;  // its size as sent
  uint32_t empty_frames_ = 0;
  TimePoint last_write_{};  // the last time flush() wrote bytes
  uint64_t conn_id_ = 0;  // for fiber names
  http::AccessLog* const alog_ = c_.options.access_log.get();  // null: no access log
  http::RemoteAddr peer_;  // the client, for the access log (looked up once)
};

}  // namespace lionet::http2::detail
