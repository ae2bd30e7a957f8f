// lionet/http/static_files.cc: StaticFiles (see static_files.h): serving: the file modes'
// names, the constructor's checks of the options, serve() (the method, the path checks, the
// cached or resolved entry), respond() (the representation, conditionals, range and the three
// body paths), the try_files fallback and the public calls. Owns the answer to a request and
// the counters; opening beneath the root, resolution and try_files are static_path.cc; the
// open-file cache, precompressed siblings and MEMORY bytes are static_cache.cc; the ETag,
// Range and Accept-Encoding parsers are detail/static_conditional.cc; the types they share
// are detail/static_files.h.
#include "lionet/http/static_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "lionet/base/strings.h"
#include "lionet/http/date.h"
#include "lionet/http/detail/static_files.h"
#include "lionet/http/headers.h"
#include "lionet/http/mime.h"
#include "lionet/http/status.h"
#include "lionet/http/url.h"
#include "lionet/sched/scheduler.h"

namespace lionet::http {

using detail::accepts_encoding;
using detail::contains_encoded_separator;
using detail::Encoding;
using detail::etag_matches;
using detail::FileEntry;
using detail::kEncodings;
using detail::not_found;
using detail::parse_range;
using detail::RangeResult;
using detail::read_exact;
using detail::safe_relative;

std::optional<FileMode> parse_file_mode(std::string_view s) {
  if (s == "memory") return FileMode::kMemory;
  if (s == "chunk") return FileMode::kChunk;
  if (s == "sendfile") return FileMode::kSendfile;
  if (s == "auto") return FileMode::kAuto;
  return std::nullopt;
}

std::string_view file_mode_name(FileMode m) noexcept {
  switch (m) {
    case FileMode::kMemory: return "memory";
    case FileMode::kChunk: return "chunk";
    case FileMode::kSendfile: return "sendfile";
    case FileMode::kAuto: return "auto";
  }
  return "?";
}

void StaticFiles::Impl::fall_back(Request& req, Response& res) {
  if (opt.fallback) return opt.fallback(req, res);
  const int status = opt.fallback_status ? opt.fallback_status : 404;
  if (status == 404) return not_found(res);
  if (!status_has_body(status)) {
    res.set_status(status);
    res.set_body(std::string_view());
    return;
  }
  std::string body(reason_phrase(status));
  body += '\n';
  res.reply(status, body);
}

// ---- the cache's per-request hit path (the rest of the cache is static_cache.cc) ----

std::shared_ptr<const FileEntry> StaticFiles::Impl::cache_find(std::string_view key) {
  std::lock_guard lk(mu);
  auto it = map.find(key);
  if (it == map.end()) return nullptr;
  auto& lru = it->second.in_memory ? mem_lru : fd_lru;
  lru.splice(lru.begin(), lru, it->second.pos);
  return it->second.entry;
}

namespace {
// open_file_cache_valid 0: a check stands for one I/O generation, and for at most this long
// (CLOCK_MONOTONIC_COARSE moves in ticks of 1-4 ms, so a few ms in all).
constexpr int64_t kRecheckMs = 2;
}  // namespace

bool StaticFiles::Impl::still_fresh(const FileEntry& e) {
  int64_t now = 0;
  uint64_t gen = 0;
  if (valid_ms > 0) {
    now = detail::coarse_now_ms();
    if (now - e.checked_ms.load(std::memory_order_relaxed) < valid_ms) return true;
  } else {
    // Once per I/O poll (h2o's rule): a check made since the workers last polled already saw
    // every change made before the requests now being served arrived (sched/scheduler.h); and
    // at least every kRecheckMs, for a connection whose reads never wait (no poll moves then).
    gen = io_generation();
    now = detail::coarse_now_ms();
    if (e.checked_gen.load(std::memory_order_relaxed) == gen &&
        now - e.checked_ms.load(std::memory_order_relaxed) < kRecheckMs)
      return true;
  }
  struct stat st;
  bool ok =
      ::fstatat(root_fd, e.path.c_str(), &st, 0) == 0 ? !e.missing && e.same_file(st) : e.missing && errno == ENOENT;
  if (ok) e.checked_ms.store(now, std::memory_order_relaxed);
  if (ok && valid_ms == 0) e.checked_gen.store(gen, std::memory_order_relaxed);
  return ok;
}

std::shared_ptr<const FileEntry> StaticFiles::Impl::lookup(std::string_view key) {
  std::shared_ptr<const FileEntry> e = cache_find(key);
  if (e && !still_fresh(*e)) {
    cache_drop(key, e.get());
    e = nullptr;
  }
  return e;
}

void StaticFiles::Impl::serve(Request& req, Response& res, std::string_view rel_raw) {
  std::string_view method = req.method();
  if (!equals_literal(method, "GET") && !equals_literal(method, "HEAD")) {
    if (opt.fallback && !opt.try_files.empty()) return opt.fallback(req, res);  // a file cannot be POSTed
    res.set_header("Allow", "GET, HEAD");
    res.reply(405, "method not allowed\n");
    return;
  }
  // A path without '%' is its own decoding: viewed, not copied.
  std::string decoded;
  std::string_view rel = rel_raw;
  if (rel_raw.find('%') != std::string_view::npos) {
    if (contains_encoded_separator(rel_raw)) return not_found(res);
    std::optional<std::string> d = percent_decode(rel_raw);
    if (!d) return not_found(res);
    decoded = std::move(*d);
    rel = decoded;
  }
  if (!safe_relative(rel)) return not_found(res);
  if (!opt.try_files.empty()) {
    std::shared_ptr<const FileEntry> found = try_candidates(std::string(rel));
    if (!found) return fall_back(req, res);
    return respond(req, res, std::move(found));
  }
  // The redirect decision uses the URL as sent: "/static" mounted at "/static" must become
  // "/static/" too, or relative links in its index would resolve against the parent.
  bool trailing_slash = req.path().empty() ? (rel.empty() || rel.back() == '/') : req.path().back() == '/';

  std::shared_ptr<const FileEntry> base = lookup(rel);
  if (base && (rel.empty() || rel.back() == '/') != trailing_slash) base = nullptr;  // "/dir" must redirect
  if (base) {
    open_hits.fetch_add(1, std::memory_order_relaxed);
  } else {
    open_misses.fetch_add(1, std::memory_order_relaxed);
    base = resolve(req, res, std::string(rel), trailing_slash);
    if (!base) return;
  }
  respond(req, res, std::move(base));
}

void StaticFiles::Impl::respond(Request& req, Response& res, std::shared_ptr<const FileEntry> base) {
  // The representation: the file, or a precompressed sibling the client accepts.
  const FileEntry* file = base.get();
  // Each field below is named once: with no field set before (no middleware), appending is
  // replacing, without set_header's scan of the fields already there.
  const bool fresh = res.header_block().empty();
  auto put = [&](std::string_view name, std::string_view value) {
    if (fresh) res.add_header(name, value);
    else res.set_header(name, value);
  };
  std::shared_ptr<const FileEntry> encoded;
  if (!encodings.empty()) {
    put("Vary", "Accept-Encoding");
    if (std::string_view ae = req.header("Accept-Encoding"); !ae.empty()) {
      for (const Encoding& enc : encodings) {
        if (!accepts_encoding(ae, enc.name)) continue;
        if ((encoded = sibling(*base, enc))) {
          put("Content-Encoding", enc.name);
          file = encoded.get();
          break;
        }
      }
    }
  }

  const uint64_t size = file->size;
  if (fresh && !file->validator_fields.empty()) {
    res.add_fields(file->validator_fields);  // the three below, checked when the entry was made
  } else {
    put("ETag", file->etag);
    put("Last-Modified", file->last_modified);
    put("Accept-Ranges", "bytes");
  }

  // Conditional GET: If-None-Match wins over If-Modified-Since (RFC 9110 13.2.2).
  std::string_view inm = req.header("If-None-Match");
  bool not_modified = false;
  if (!inm.empty()) {
    not_modified = etag_matches(inm, file->etag);
  } else if (std::string_view ims = req.header("If-Modified-Since"); !ims.empty()) {
    if (auto t = parse_http_date(trim_ows(ims))) not_modified = file->mtime_sec <= *t;
  }
  if (not_modified) {
    res.set_status(304);
    res.set_body(std::string_view());
    return;
  }

  if (fresh && !base->type_field.empty()) res.add_fields(base->type_field);
  else put("Content-Type", base->content_type);
  uint64_t off = 0, len = size;
  int status = 200;
  if (std::string_view range = req.header("Range"); !range.empty()) {
    std::string_view if_range = trim_ows(req.header("If-Range"));
    bool range_applies = if_range.empty() || if_range == file->etag || if_range == file->last_modified;
    if (range_applies) {
      switch (parse_range(range, size, off, len)) {
        case RangeResult::kNone:
          off = 0;
          len = size;
          break;
        case RangeResult::kUnsatisfiable: {
          std::string cr = "bytes */" + std::to_string(size);
          res.set_header("Content-Range", cr);
          res.reply(416, "range not satisfiable\n");
          return;
        }
        case RangeResult::kOk: {
          status = 206;
          std::string cr =
              "bytes " + std::to_string(off) + "-" + std::to_string(off + len - 1) + "/" + std::to_string(size);
          res.set_header("Content-Range", cr);
          break;
        }
      }
    }
  }
  res.set_status(status);
  files_served.fetch_add(1, std::memory_order_relaxed);
  if (encoded) precompressed_served.fetch_add(1, std::memory_order_relaxed);
  if (!req.is_head()) bytes_sent.fetch_add(len, std::memory_order_relaxed);

  FileMode mode = opt.mode;
  if (mode == FileMode::kAuto)
    mode = size < opt.memory_max      ? FileMode::kMemory
           : size >= opt.sendfile_min ? FileMode::kSendfile
                                      : FileMode::kChunk;
  if (!file->fd) mode = FileMode::kMemory;  // its bytes are cached: no fd kept

  switch (mode) {
    case FileMode::kMemory: {
      std::shared_ptr<const std::string> bytes = bytes_of(*file);
      if (!bytes) {
        res.reply(500, "read error\n");
        return;
      }
      std::string_view all(*bytes);
      res.set_body_view(all.substr(off, len), std::move(bytes));
      return;
    }
    case FileMode::kChunk: {
      size_t chunk = opt.chunk_size ? opt.chunk_size : 64 * 1024;
      res.set_body_writer([owner = file->fd, off, len, chunk](BodyWriter& w) -> Result<void> {
        std::unique_ptr<char[]> buf(new char[std::min<uint64_t>(chunk, std::max<uint64_t>(len, 1))]);
        uint64_t pos = off, left = len;
        while (left > 0) {
          uint64_t want = std::min<uint64_t>(chunk, left);
          if (!read_exact(owner->fd, buf.get(), want, pos)) return errno_error(errno);
          if (auto r = w.write(std::string_view(buf.get(), want), want == left); !r) return r;
          pos += want;
          left -= want;
        }
        return {};
      });
      return;
    }
    case FileMode::kSendfile:
    case FileMode::kAuto: {
      res.set_file(file->fd->fd, static_cast<off_t>(off), len, file->fd);
      return;
    }
  }
}

StaticFiles::StaticFiles(StaticOptions o) : impl_(std::make_shared<Impl>()) {
  impl_->opt = std::move(o);
  const std::string& root = impl_->opt.root;
  auto fail = [&](const std::string& why) { throw std::runtime_error("static root '" + root + "': " + why); };
  if (root.empty()) fail("empty path");
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(std::strerror(errno));
  impl_->root_fd = fd;
  char real[4096];
  if (!::realpath(root.c_str(), real)) fail(std::strerror(errno));
  impl_->root_real = real;
  if (::faccessat(fd, ".", R_OK | X_OK, 0) != 0) fail(std::strerror(errno));
  impl_->use_openat2.store(!impl_->opt.force_realpath_check);
  if (impl_->opt.index.empty() || impl_->opt.index.find('/') != std::string::npos) fail("bad index name");
  for (const std::string& name : impl_->opt.precompressed) {
    auto it =
        std::find_if(std::begin(kEncodings), std::end(kEncodings), [&](const Encoding& e) { return e.name == name; });
    if (it == std::end(kEncodings)) fail("unknown precompressed encoding '" + name + "' (expected br, gzip or zstd)");
    if (std::find_if(impl_->encodings.begin(), impl_->encodings.end(),
                     [&](const Encoding& e) { return e.name == name; }) != impl_->encodings.end())
      fail("precompressed encoding '" + name + "' listed twice");
    impl_->encodings.push_back(*it);
  }
  if (impl_->opt.open_file_cache_valid.count() < 0) fail("negative open_file_cache_valid");
  for (const std::string& c : impl_->opt.try_files)
    if (std::string why = try_files_candidate_error(c); !why.empty()) fail("try_files: " + why);
  const int fs = impl_->opt.fallback_status;
  if (fs != 0 && (fs < 200 || fs > 599)) fail("fallback_status " + std::to_string(fs) + " is not in 200..599");
  impl_->valid_ms = impl_->opt.open_file_cache_valid.count();
}

StaticFiles::~StaticFiles() = default;

void StaticFiles::serve(Request& req, Response& res, std::string_view rel_path) { impl_->serve(req, res, rel_path); }

Handler StaticFiles::handler() {
  Handler h = [impl = impl_](Request& q, Response& s) { impl->serve(q, s, q.param("**")); };
  // Local file-system calls only, unless a fallback route may be called (a proxy, a backend).
  return impl_->opt.fallback ? h : nonblocking(std::move(h));
}

StaticFiles::Stats StaticFiles::stats() const {
  return {
      impl_->memory_hits.load(std::memory_order_relaxed),         impl_->memory_misses.load(std::memory_order_relaxed),
      impl_->files_served.load(std::memory_order_relaxed),        impl_->bytes_sent.load(std::memory_order_relaxed),
      impl_->open_hits.load(std::memory_order_relaxed),           impl_->open_misses.load(std::memory_order_relaxed),
      impl_->precompressed_served.load(std::memory_order_relaxed)};
}

const StaticOptions& StaticFiles::options() const noexcept { return impl_->opt; }

}  // namespace lionet::http
