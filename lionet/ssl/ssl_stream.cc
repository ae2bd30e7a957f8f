// lionet/ssl/ssl_stream.cc: SslStream (see ssl_stream.h).
//
// Protocol of one call (read, write, handshake), in order:
//   1. Lock ssl_mu_ (a spin lock: nothing inside can park), make one SSL_* call, and if it
//      failed read SSL_get_error() and drain the thread's error queue, all before unlocking.
//      No OpenSSL state that lives in a thread-local survives to the next step, where the
//      fiber may park and resume on another worker.
//   2. WANT_READ: first send any records OpenSSL left in the output buffer (the peer may be
//      waiting for them: a handshake flight, a KeyUpdate answer), then Socket::read into the
//      input buffer (parks; ECANCELED if closed meanwhile, ETIMEDOUT at the call's deadline),
//      and go back to 1. WANT_WRITE (the output buffer is full): send it, back to 1.
//   3. Success: a write sends the output buffer before returning (write_all semantics); a
//      read returns at once unless OpenSSL produced records, which it then sends.
// The first SSL_do_handshake is tried before any wait (a ClientHello that has arrived costs no
// poll), and a TLS 1.3 server leaves its session tickets in the output buffer: they go out
// with the first response (or before the first read waits), one send(2) fewer per handshake.
#include "lionet/ssl/ssl_stream.h"

#include <openssl/err.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "lionet/base/macros.h"
#include "lionet/io/io_manager.h"
#include "lionet/ssl/detail/ssl_errors.h"

namespace lionet {
namespace {
constexpr size_t kStaging = 16 * 1024;  // one full record of plaintext

template <class T>
Result<T> fail(int err) noexcept {
  return Result<T>::failure(err);
}

bool is_ip_literal(const std::string& s) {
  return !s.empty() && (s.find(':') != std::string::npos ||
                        std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; }));
}
}  // namespace

Deadline SslStream::CallTimer::deadline() noexcept {
  if (!resolved) {
    if (limit) at = now() + *limit;
    resolved = true;
  }
  return at ? Deadline::at(*at) : Deadline::never();
}

SslStream::SslStream(std::shared_ptr<SslContext> ctx, Socket&& owned)
    : ctx_(std::move(ctx)), owned_(std::move(owned)), sock_(&owned_) {
  init();
}

SslStream::SslStream(std::shared_ptr<SslContext> ctx, Socket& borrowed) : ctx_(std::move(ctx)), sock_(&borrowed) {
  init();
}

void SslStream::init() {
  read_timeout_ = sock_->read_timeout();
  write_timeout_ = sock_->write_timeout();
  ssl_ = SSL_new(ctx_->native());
  LIONET_CHECK(ssl_ != nullptr, "lionet::SslStream: SSL_new failed (out of memory)");
  BIO* rbio = ssl_detail::new_tls_bio(&io_);
  LIONET_CHECK(rbio != nullptr, "lionet::SslStream: BIO_new failed (out of memory)");
  BIO* wbio = rbio;
  if (ctx_->ktls_enabled()) {
    // kTLS needs OpenSSL's socket BIO on the write side: the kernel takes the keys from it.
    wbio = BIO_new_socket(sock_->fd(), BIO_NOCLOSE);
    LIONET_CHECK(wbio != nullptr, "lionet::SslStream: BIO_new_socket failed (out of memory)");
  }
  SSL_set_bio(ssl_, rbio, wbio);
  // OpenSSL asks for as much as its buffer holds instead of header then body: fewer BIO calls.
  SSL_set_read_ahead(ssl_, 1);
  if (ctx_->is_server()) {
    SSL_set_accept_state(ssl_);
  } else {
    SSL_set_connect_state(ssl_);
    set_server_name(ctx_->options().server_name);
  }
  ssl_detail::clear_errors();
}

SslStream::~SslStream() {
  close();
  SSL_free(ssl_);  // frees the BIO(s); io_ is ours
  ssl_detail::clear_errors();
}

void SslStream::set_server_name(std::string_view name) {
  if (ctx_->is_server()) return;
  std::string n(name);
  if (!n.empty() && !is_ip_literal(n)) SSL_set_tlsext_host_name(ssl_, n.c_str());
  if (SSL_CTX_get_verify_mode(ctx_->native()) & SSL_VERIFY_PEER) {
    if (!n.empty()) {
      X509_VERIFY_PARAM* p = SSL_get0_param(ssl_);
      if (is_ip_literal(n)) X509_VERIFY_PARAM_set1_ip_asc(p, n.c_str());
      else SSL_set1_host(ssl_, n.c_str());
    }
  }
  if (ctx_->options().session_tickets) {
    if (SSL_SESSION* s = ctx_->take_session(n)) {
      SSL_set_session(ssl_, s);
      SSL_SESSION_free(s);
    }
  }
  ssl_detail::clear_errors();
}

void SslStream::set_timeouts(std::optional<Duration> read, std::optional<Duration> write) {
  read_timeout_ = read;
  write_timeout_ = write;
}

// ---- the call protocol (steps at the top) ----

SslStream::Step SslStream::after_failure(int r, bool reading, CallTimer& t, std::error_code& err) noexcept {
  int e = SSL_get_error(ssl_, r);
  unsigned long first = ssl_detail::drain_first_error();  // before any park (see ssl_errors.h)
  ssl_mu_.unlock();
  switch (e) {
    case SSL_ERROR_WANT_READ: {
      if (!reading) {  // renegotiation is refused, so a writer never needs the peer's records
        err = errno_error(EPROTO);
        return Step::kFail;
      }
      if (pending_output()) {
        if (auto f = flush(t); !f) return err = f.error(), Step::kFail;
      }
      if (auto f = fill(t); !f) return err = f.error(), Step::kFail;
      return Step::kRetry;
    }
    case SSL_ERROR_WANT_WRITE: {
      auto f = ctx_->ktls_enabled() ? wait_writable(t) : (reading ? flush(t) : flush_locked(t));
      if (!f) return err = f.error(), Step::kFail;
      return Step::kRetry;
    }
    case SSL_ERROR_ZERO_RETURN: return Step::kDone;  // close_notify (or end of stream): the caller reports 0
    default:
      if (first) last_error_.store(first, std::memory_order_relaxed);
      // The socket's own failure (reset, EPIPE) arrives through fill/flush; what reaches here
      // is a TLS failure, or a stream closed by another fiber.
      err = errno_error(closed_.load(std::memory_order_acquire) ? ECANCELED : EPROTO);
      return Step::kFail;
  }
}

bool SslStream::pending_output() noexcept {
  std::lock_guard lk(ssl_mu_);
  return io_.out.len != 0;
}

Result<void> SslStream::flush(CallTimer& t) noexcept {
  std::lock_guard wl(write_mu_);
  return flush_locked(t);
}

Result<void> SslStream::flush_locked(CallTimer& t) noexcept {
  for (;;) {
    {
      std::lock_guard lk(ssl_mu_);
      if (io_.out.len == 0) return {};
      std::swap(io_.out, io_.sending);  // OpenSSL keeps appending to the (empty) other buffer
    }
    auto w = sock_->write(io_.sending.data.get(), io_.sending.len, t.deadline());
    io_.sending.len = 0;
    if (!w) return w.error();
  }
}

Result<void> SslStream::fill(CallTimer& t) noexcept {
  // Only the reader gets here (a writer never needs input: renegotiation is refused).
  // WANT_READ can come with input left (OpenSSL stops after a post-handshake message such as
  // a ticket): then there is nothing to read yet, retry at once.
  if (io_.in_pos < io_.in.len) return {};
  io_.in.len = 0;
  io_.in_pos = 0;
  if (!io_.in.data && !io_.in.reserve_more(ssl_detail::TlsIo::kInCapacity)) return fail<void>(ENOMEM);
  auto r = sock_->read(io_.in.data.get(), io_.in.cap, t.deadline());
  if (!r) return r.error();
  // close() from another fiber sends close_notify before closing the socket: the peer's answer
  // (end of stream) may wake this read first. The stream is closed either way.
  if (LIONET_UNLIKELY(closed_.load(std::memory_order_acquire))) return fail<void>(ECANCELED);
  if (*r == 0) io_.in_eof = true;
  io_.in.len = *r;
  return {};
}

Result<void> SslStream::wait_writable(CallTimer& t) noexcept {
  // kTLS path only: OpenSSL's socket BIO saw EAGAIN on the fd. close() cancels this wait.
  if (closed_.load(std::memory_order_acquire)) return fail<void>(ECANCELED);
  Deadline d = t.deadline();
  std::optional<TimePoint> at = d.resolve(std::nullopt);
  int rc;
  if (IOManager* io = IOManager::current()) {
    waited_io_.store(io, std::memory_order_release);
    rc = io->wait_writable_after_eagain(sock_->fd(), at);
  } else {
    int ms = -1;
    if (at)
      ms = static_cast<int>(std::max<int64_t>(0, std::chrono::ceil<std::chrono::milliseconds>(*at - now()).count()));
    pollfd p{sock_->fd(), POLLOUT, 0};
    rc = ::poll(&p, 1, ms) == 0 ? ETIMEDOUT : 0;
  }
  if (closed_.load(std::memory_order_acquire)) return fail<void>(ECANCELED);
  if (rc) return fail<void>(rc);
  return {};
}

Result<void> SslStream::handshake() {
  if (handshake_done()) return {};
  // A reader and a writer fiber may both start with an implicit handshake: one runs it, the
  // other waits here and finds it done.
  std::lock_guard hl(handshake_mu_);
  if (handshake_done()) return {};
  if (closed_.load(std::memory_order_acquire)) return fail<void>(EBADF);
  CallTimer t{ctx_->options().handshake_timeout};
  (void)t.deadline();  // the whole handshake is bounded from now
  for (;;) {
    ssl_mu_.lock();
    int r = SSL_do_handshake(ssl_);
    if (r == 1) {
      ssl_mu_.unlock();
      break;
    }
    std::error_code err;
    Step s = after_failure(r, /*reading=*/true, t, err);
    if (s == Step::kFail) return err;
    if (s == Step::kDone) return fail<void>(EPROTO);  // close_notify during the handshake
  }
  ktls_send_ = ctx_->ktls_enabled() && BIO_get_ktls_send(SSL_get_wbio(ssl_));
  handshake_done_.store(true, std::memory_order_release);
  // A TLS 1.3 server's pending output is only its session tickets: no peer waits for them,
  // they go out with the first write. Anything else (a client's Finished, a TLS 1.2 server's
  // Finished) is awaited by the peer and goes now.
  if (!(ctx_->is_server() && SSL_version(ssl_) == TLS1_3_VERSION)) {
    if (auto f = flush(t); !f) return f.error();
  }
  return {};
}

// Open and past the handshake (which runs on first use): EBADF after close(), or the
// handshake's error.
Result<void> SslStream::ready() {
  if (closed_.load(std::memory_order_acquire)) return fail<void>(EBADF);
  if (LIONET_UNLIKELY(!handshake_done())) return handshake();
  return {};
}

// ---- reading ----

Result<size_t> SslStream::read(void* buf, size_t n) {
  if (n == 0) return size_t{0};
  if (auto r = ready(); LIONET_UNLIKELY(!r)) return r.error();
  CallTimer t{read_timeout_};
  for (;;) {
    size_t got = 0;
    ssl_mu_.lock();
    int r = SSL_read_ex(ssl_, buf, n, &got);
    if (LIONET_LIKELY(r == 1)) {
      bool pending = io_.out.len != 0;  // a KeyUpdate answer, a no_renegotiation alert
      ssl_mu_.unlock();
      if (LIONET_UNLIKELY(pending)) {
        if (auto f = flush(t); !f) return f.error();
      }
      return got;
    }
    std::error_code err;
    Step s = after_failure(r, /*reading=*/true, t, err);
    if (s == Step::kDone) return size_t{0};
    if (s == Step::kFail) return err;
  }
}

Result<size_t> SslStream::readv(const iovec* iov, int iovcnt) {
  // One record at most per SSL_read anyway: fill the first non-empty iovec.
  for (int i = 0; i < iovcnt; ++i) {
    if (iov[i].iov_len) return read(iov[i].iov_base, iov[i].iov_len);
  }
  return size_t{0};
}

// ---- writing ----

Result<void> SslStream::write_records(const void* buf, size_t n, CallTimer& t) noexcept {
  for (;;) {
    size_t w = 0;
    ssl_mu_.lock();
    // Without SSL_MODE_ENABLE_PARTIAL_WRITE this writes all n bytes or reports WANT_WRITE and
    // resumes where it stopped on the next call with the same bytes.
    int r = SSL_write_ex(ssl_, buf, n, &w);
    if (LIONET_LIKELY(r == 1)) {
      ssl_mu_.unlock();
      return {};
    }
    std::error_code err;
    Step s = after_failure(r, /*reading=*/false, t, err);
    if (s == Step::kDone) return fail<void>(EPIPE);  // the peer's close_notify seen: no more writes
    if (s == Step::kFail) return err;
  }
}

Result<size_t> SslStream::write(const void* buf, size_t n) {
  if (n == 0) return size_t{0};
  if (auto r = ready(); LIONET_UNLIKELY(!r)) return r.error();
  std::lock_guard wl(write_mu_);
  CallTimer t{write_timeout_};
  if (auto r = write_records(buf, n, t); !r) return r.error();
  if (auto f = flush_locked(t); !f) return f.error();
  return n;
}

Result<size_t> SslStream::writev(const iovec* iov, int iovcnt) {
  if (auto r = ready(); LIONET_UNLIKELY(!r)) return r.error();
  std::lock_guard wl(write_mu_);
  CallTimer t{write_timeout_};
  size_t total = 0, staged = 0;
  for (int i = 0; i < iovcnt; ++i) {
    const char* p = static_cast<const char*>(iov[i].iov_base);
    size_t len = iov[i].iov_len;
    total += len;
    while (len) {
      if (staged == 0 && len >= kStaging) {  // big and aligned on a record: no copy
        if (auto r = write_records(p, len, t); !r) return r.error();
        break;
      }
      if (!staging_) staging_.reset(new char[kStaging]);
      size_t take = std::min(len, kStaging - staged);
      std::memcpy(staging_.get() + staged, p, take);
      staged += take;
      p += take;
      len -= take;
      if (staged == kStaging) {
        if (auto r = write_records(staging_.get(), staged, t); !r) return r.error();
        staged = 0;
      }
    }
  }
  if (staged) {
    if (auto r = write_records(staging_.get(), staged, t); !r) return r.error();
  }
  if (auto f = flush_locked(t); !f) return f.error();
  return total;
}

Result<size_t> SslStream::sendfile(int file_fd, off_t offset, size_t count) {
  if (count == 0) return size_t{0};
  if (auto r = ready(); LIONET_UNLIKELY(!r)) return r.error();
  std::lock_guard wl(write_mu_);
  CallTimer t{write_timeout_};
  if (ktls_send_) return sendfile_by_ktls(file_fd, offset, count, t);
  // Fallback: pread a record's worth at a time into the stream's staging buffer.
  if (!staging_) staging_.reset(new char[kStaging]);
  auto done = copy_from_file(file_fd, offset, count, staging_.get(), kStaging,
                             [&](const char* p, size_t n) { return write_records(p, n, t); });
  if (!done) return done;
  if (auto f = flush_locked(t); !f) return f.error();
  return done;
}

Result<size_t> SslStream::sendfile_by_ktls(int file_fd, off_t offset, size_t count, CallTimer& t) noexcept {
  if (auto f = flush_locked(t); !f) return f.error();
  size_t done = 0;
  while (done < count) {
    ssl_mu_.lock();
    ossl_ssize_t r = SSL_sendfile(ssl_, file_fd, offset + static_cast<off_t>(done), count - done, 0);
    if (r > 0) {
      ssl_mu_.unlock();
      done += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) {
      ssl_mu_.unlock();
      break;
    }
    std::error_code err;
    Step s = after_failure(static_cast<int>(r), /*reading=*/false, t, err);
    if (s == Step::kDone) return fail<size_t>(EPIPE);
    if (s == Step::kFail) return err;
  }
  return done;
}

// ---- closing ----

Result<void> SslStream::shutdown_write() {
  if (closed_.load(std::memory_order_acquire)) return fail<void>(EBADF);
  if (!handshake_done()) return fail<void>(ENOTCONN);
  std::lock_guard wl(write_mu_);
  CallTimer t{write_timeout_};
  ssl_mu_.lock();
  // First SSL_shutdown call: queues close_notify, returns 0 (1 if the peer's came already).
  int r = SSL_shutdown(ssl_);
  ssl_detail::clear_errors();
  ssl_mu_.unlock();
  if (r < 0) return fail<void>(EPROTO);
  if (auto f = flush_locked(t); !f) return f.error();
  return {};
}

void SslStream::close() noexcept {
  if (closed_.exchange(true, std::memory_order_acq_rel)) return;
  // Best effort close_notify (it also keeps a client's TLS 1.2 session resumable), only if it
  // cannot wait: no writer is in a call, and the socket takes it at once.
  if (handshake_done() && write_mu_.try_lock()) {
    ssl_mu_.lock();
    bool send = !(SSL_get_shutdown(ssl_) & SSL_SENT_SHUTDOWN) && !ctx_->ktls_enabled();
    if (send) SSL_shutdown(ssl_);
    ssl_detail::clear_errors();
    bool pending = io_.out.len != 0;
    if (pending) std::swap(io_.out, io_.sending);
    ssl_mu_.unlock();
    if (pending) {
      (void)sock_->write(io_.sending.data.get(), io_.sending.len, Deadline::at(now()));
      io_.sending.len = 0;
    }
    write_mu_.unlock();
  }
  if (IOManager* io = waited_io_.load(std::memory_order_acquire)) io->cancel(sock_->fd());  // kTLS waits
  sock_->close();
}

// ---- after the handshake ----

std::string_view SslStream::alpn_selected() const noexcept {
  const unsigned char* p = nullptr;
  unsigned len = 0;
  SSL_get0_alpn_selected(ssl_, &p, &len);
  return p ? std::string_view(reinterpret_cast<const char*>(p), len) : std::string_view();
}

bool SslStream::session_reused() const noexcept { return SSL_session_reused(ssl_) == 1; }

x509_st* SslStream::verified_peer_certificate() const noexcept {
  if (!ssl_ || !handshake_done()) return nullptr;
  X509* cert = SSL_get0_peer_certificate(ssl_);
  return cert && SSL_get_verify_result(ssl_) == X509_V_OK ? cert : nullptr;
}

const char* SslStream::version() const noexcept { return SSL_get_version(ssl_); }

std::string SslStream::last_error() const {
  unsigned long e = last_error_.load(std::memory_order_relaxed);
  if (!e) return "";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}
}  // namespace lionet
