// lionet/http2/server_body.cc: the HTTP/2 server's stream bodies and their flow control:
// request DATA buffered per stream (on_data_chunk) and handed to the handler, the window given
// back as it reads (read_body); response bodies framed as the peer's windows open (read_source,
// send_data: memory and file payloads without a copy through nghttp2) and a body writer's
// bytes queued for them (write_pipe). The session, the other callbacks and the protocols
// (top comment) are server.cc; responding and the access log are server_respond.cc.
#include <nghttp2/nghttp2.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lionet/http2/detail/server_session.h"

namespace lionet::http2::detail {

// ---- request bodies -----------------------------------------------------------------------

int Session::on_data_chunk(nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len, void* user) {
  auto* self = static_cast<Session*>(user);
  auto st = self->find(id);
  if (st && !st->handler_done) {
    st->body_total += len;
    if (st->body_total > self->c_.options.limits.max_body_bytes && !st->body_too_large) {
      st->body_too_large = true;  // the handler's next read fails with EMSGSIZE
      st->cv.notify_all();
    }
  }
  if (!st || st->handler_done || st->body_too_large) {
    // Nobody will read it: give the window back at once.
    if (st) nghttp2_session_consume(self->s_, id, len);
    else nghttp2_session_consume_connection(self->s_, len);
    return 0;
  }
  st->body.append(reinterpret_cast<const char*>(data), len);
  st->cv.notify_all();
  return 0;
}

Result<size_t> H2Stream::read_body(void* buf, size_t n) { return session->read_body(*this, buf, n); }

Result<size_t> Session::read_body(H2Stream& st, void* buf, size_t n) {
  std::unique_lock lk(mu_);
  TimePoint deadline = now() + c_.options.body_timeout;
  auto ready = [&] {
    return st.body_read < st.body.size() || st.body_eof || st.reset || st.body_too_large || peer_eof_;
  };
  if (!st.cv.wait_until(lk, deadline, ready)) return errno_error(ETIMEDOUT);
  if (st.body_too_large) return errno_error(EMSGSIZE);
  size_t k = std::min(n, st.body.size() - st.body_read);
  if (k == 0) {
    if ((st.reset || peer_eof_) && !st.body_eof) return errno_error(ECONNABORTED);
    return size_t{0};
  }
  std::memcpy(buf, st.body.data() + st.body_read, k);
  st.body_read += k;
  if (st.body_read == st.body.size()) {
    st.body.clear();
    st.body_read = 0;
  }
  if (!dead_ && !st.reset) {
    nghttp2_session_consume(s_, st.id, k);  // WINDOW_UPDATE: the client may send k more
    flush();
  }
  return k;
}

// ---- response bodies ----------------------------------------------------------------------

ssize_t Session::read_source(nghttp2_session* session, int32_t id, uint8_t* buf, size_t length, uint32_t* flags,
                             nghttp2_data_source* source, void*) {
  auto* st = static_cast<H2Stream*>(source->ptr);
  ssize_t n = read_body_source(st, buf, length, flags);
  if (*flags & NGHTTP2_DATA_FLAG_EOF) {
    st->sending = false;
    const std::string& trailers = st->response.trailer_block();
    if (!trailers.empty()) {
      // The stream ends with a HEADERS frame of trailers instead of END_STREAM on this DATA.
      std::string names;
      std::vector<nghttp2_nv> nva;
      header_fields(trailers, names, nva);
      if (nghttp2_submit_trailer(session, id, nva.data(), nva.size()) == 0) *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
  }
  return n;
}

ssize_t Session::read_body_source(H2Stream* st, uint8_t* buf, size_t length, uint32_t* flags) {
  switch (st->src) {
    case H2Stream::Src::kMemory: {
      // NO_COPY: send_data() puts the bytes straight into the output (no copy into nghttp2).
      size_t n = std::min(length, st->memory.size());
      if (n > 0) *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
      if (n == st->memory.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
      return static_cast<ssize_t>(n);
    }
    case H2Stream::Src::kFile: {
      size_t n = static_cast<size_t>(std::min<uint64_t>(length, st->file_left));
      if (n > 0) *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
      if (n == st->file_left) *flags |= NGHTTP2_DATA_FLAG_EOF;
      return static_cast<ssize_t>(n);
    }
    case H2Stream::Src::kWriter: {
      size_t avail = st->pipe.size() - st->pipe_read;
      if (avail == 0) {
        if (st->pipe_eof) {
          *flags |= NGHTTP2_DATA_FLAG_EOF;
          return 0;
        }
        st->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
      }
      size_t n = std::min(length, avail);
      std::memcpy(buf, st->pipe.data() + st->pipe_read, n);
      st->pipe_read += n;
      if (st->pipe_read == st->pipe.size()) {
        st->pipe.clear();
        st->pipe_read = 0;
        if (st->pipe_eof) *flags |= NGHTTP2_DATA_FLAG_EOF;
      }
      st->cv.notify_all();  // room for the writer
      return static_cast<ssize_t>(n);
    }
    case H2Stream::Src::kNone: break;
  }
  *flags |= NGHTTP2_DATA_FLAG_EOF;
  return 0;
}

// A DATA frame of a memory or file body (NGHTTP2_DATA_FLAG_NO_COPY), called inside
// mem_send: its header, then its payload, appended in order to what flush() has gathered.
// Memory is copied once, into the output; a file's payload is pread straight into the output
// (no copy through nghttp2's frame buffer). Decision, measured (h2load -c 16, 1 MiB file, one
// worker): pread into the output 1929 req/s h2 / 4257 h2c; the old copy through nghttp2 1747 /
// 3829; sendfile per DATA frame (header written, then sendfile of the payload: two system
// calls per 16 KiB frame) 1356 / 1669, and no better when the client allows 1 MiB frames
// (nghttp2 caps DATA at 16 KiB unless the session's frame buffer grows to the frame's size).
int Session::send_data(nghttp2_session*, nghttp2_frame* frame, const uint8_t* framehd, size_t length,
                       nghttp2_data_source* source, void* user) {
  auto* self = static_cast<Session*>(user);
  auto* st = static_cast<H2Stream*>(source->ptr);
  detail::OutBuf& out = *self->out_;  // set: send_data runs inside flush()'s mem_send
  const size_t frame_start = out.size();
  out.append(framehd, 9);
  size_t padlen = frame->data.padlen;  // 0: we never ask for padding
  if (padlen > 0) *out.grow(1) = static_cast<char>(padlen - 1);
  if (st->src == H2Stream::Src::kMemory) {
    out.append(st->memory.data(), length);
    st->memory.remove_prefix(length);
  } else {
    char* at = out.grow(length);
    size_t done = 0;
    while (done < length) {
      ssize_t n = ::pread(st->fd, at + done, length - done, st->file_offset + static_cast<off_t>(done));
      if (n <= 0) {
        out.resize_down(frame_start);  // the file shrank: this frame is dropped, the stream reset
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
      }
      done += static_cast<size_t>(n);
    }
    st->file_offset += static_cast<off_t>(length);
    st->file_left -= length;
  }
  if (padlen > 1) std::memset(out.grow(padlen - 1), 0, padlen - 1);
  return out.full() ? NGHTTP2_ERR_PAUSE : 0;  // full: write before the next frame (send_all carries on)
}

Result<size_t> Session::write_pipe(H2Stream& st, const void* buf, size_t n) {
  std::unique_lock lk(mu_);
  const auto* p = static_cast<const char*>(buf);
  size_t done = 0;
  while (done < n) {
    TimePoint deadline = now() + c_.options.write_timeout;
    if (!st.cv.wait_until(lk, deadline,
                          [&] { return dead_ || st.reset || st.pipe.size() - st.pipe_read < o_.writer_buffer; })) {
      return errno_error(ETIMEDOUT);
    }
    if (dead_ || st.reset) return errno_error(ECONNRESET);
    size_t room = o_.writer_buffer - (st.pipe.size() - st.pipe_read);
    size_t k = std::min(room, n - done);
    st.pipe.append(p + done, k);
    done += k;
    resume(st);
    if (!flush()) return errno_error(ECONNRESET);
  }
  return n;
}

Result<size_t> WriterPipe::write(const void* buf, size_t n) { return st_->session->write_pipe(*st_, buf, n); }

}  // namespace lionet::http2::detail
