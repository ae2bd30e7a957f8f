// lionet/http/detail/static_files.h: StaticFiles' private types, shared by its four files
// (internal to http/): FileEntry (one resolved file: an entry of the open-file cache) and its
// FdOwner, the precompressed Encodings, StaticFiles::Impl (the state, the cache, the counters),
// the per-request helpers more than one file calls (inline: the lexical path checks,
// not_found/forbidden, read_exact) and the parsers defined in detail/static_conditional.cc.
// Impl's members are defined in static_files.cc (serving: serve, respond, the fallback, the
// public calls), static_path.cc (opening beneath the root, resolution, try_files) and
// static_cache.cc (the open-file cache, precompressed siblings, MEMORY bytes). The public API
// is static_files.h.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lionet/base/strings.h"
#include "lionet/http/field_block.h"
#include "lionet/http/request.h"
#include "lionet/http/response.h"
#include "lionet/http/static_files.h"

namespace lionet::http::detail {

// CLOCK_MONOTONIC_COARSE in ms: the open-file cache's clock (open_file_cache_valid).
inline int64_t coarse_now_ms() noexcept {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// Owns an fd; the shared_ptr handed to Response keeps it open until the bytes are out.
struct FdOwner {
  int fd;
  explicit FdOwner(int f) noexcept : fd(f) {}
  ~FdOwner() {
    if (fd >= 0) ::close(fd);
  }
  FdOwner(const FdOwner&) = delete;
  FdOwner& operator=(const FdOwner&) = delete;
};

inline int64_t mtime_ns_of(const struct stat& st) noexcept {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// ---- the request path's checks (serve() on every request; static_path.cc) ------------------

// Checks the decoded relative path: segments separated by '/', none empty (except a
// trailing '/'), ".", "..", and no NUL or backslash. Returns false to answer 404.
inline bool safe_relative(std::string_view p) {
  if (p.find('\0') != std::string_view::npos || p.find('\\') != std::string_view::npos) return false;
  if (!p.empty() && p.back() == '/') p.remove_suffix(1);
  if (p.empty()) return true;  // the root itself
  size_t start = 0;
  for (;;) {
    size_t slash = p.find('/', start);
    std::string_view seg = p.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (seg.empty() || seg == "." || seg == "..") return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

inline bool contains_encoded_separator(std::string_view raw) {
  for (size_t i = 0; i + 2 < raw.size(); ++i) {
    if (raw[i] != '%') continue;
    char h = raw[i + 1], l = static_cast<char>(raw[i + 2] | 0x20);
    if ((h == '2' && l == 'f') || (h == '5' && l == 'c')) return true;
  }
  return false;
}

// ---- conditional requests (detail/static_conditional.cc; respond() calls them) -------------

// True if the If-None-Match list names etag (weak comparison, as RFC 9110 asks for GET) or "*".
bool etag_matches(std::string_view list, std::string_view etag);

enum class RangeResult { kNone, kOk, kUnsatisfiable };

// A single "bytes=a-b" / "a-" / "-n" range. kNone for several ranges or a malformed header
// (the full body is sent, as RFC 9110 allows).
RangeResult parse_range(std::string_view h, uint64_t size, uint64_t& off, uint64_t& len);

// True if an Accept-Encoding field value allows `coding` (RFC 9110 12.5.3): listed with q > 0,
// or "*" with q > 0 and the coding not listed. "x-gzip" counts as "gzip".
bool accepts_encoding(std::string_view header, std::string_view coding);

// ---- the open-file cache's entry (static_cache.cc) ------------------------------------------

// One resolved file: what a request needs to answer without touching the file system again.
// Immutable once published in the cache (checked_ms aside), so readers hold no lock.
struct FileEntry {
  std::string key;  // its cache key (the decoded request path, or "<path>\0<suffix>")
  std::string path;  // relative to the root, as opened (a directory's index appended)
  bool missing = false;  // a precompressed sibling that does not exist (a negative entry)
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  time_t mtime_sec = 0;
  ino_t ino = 0;
  dev_t dev = 0;
  std::string etag, last_modified;
  std::shared_ptr<FdOwner> fd;  // null when data holds the bytes (or missing)
  std::shared_ptr<const std::string> data;  // MEMORY: the file's bytes
  mutable std::atomic<int64_t> checked_ms{0};  // CLOCK_MONOTONIC_COARSE ms of the last check
  mutable std::atomic<uint64_t> checked_gen{0};  // io_generation() of the last check (valid 0)
  std::string_view content_type;  // mime_type_for(path): a static string
  // The fields every answer from this entry carries, checked once (make_entry): ETag,
  // Last-Modified and Accept-Ranges; and Content-Type (of the file asked for, not of a
  // precompressed sibling). Empty when not built: respond() then adds them one by one.
  FieldBlock validator_fields, type_field;

  bool same_file(const struct stat& st) const noexcept {
    return S_ISREG(st.st_mode) && size == static_cast<uint64_t>(st.st_size) && mtime_ns == mtime_ns_of(st) &&
           ino == st.st_ino && dev == st.st_dev;
  }
};

// Encodings a route may serve from precompressed siblings.
struct Encoding {
  std::string_view name, suffix;
};
constexpr Encoding kEncodings[] = {{"br", ".br"}, {"gzip", ".gz"}, {"zstd", ".zst"}};

// ---- answers and reads (serving, resolution, the MEMORY cache) ------------------------------

inline void not_found(Response& res) { res.reply(404, "not found\n"); }
inline void forbidden(Response& res) { res.reply(403, "forbidden\n"); }

// Reads exactly len bytes at off (pread: the hooks run regular-file reads safely in fibers).
inline bool read_exact(int fd, char* dst, uint64_t len, uint64_t off) {
  while (len > 0) {
    ssize_t n = ::pread(fd, dst, len, static_cast<off_t>(off));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = EIO;  // the file ended early (truncated under us)
    if (n <= 0) return false;
    dst += n;
    len -= static_cast<uint64_t>(n);
    off += static_cast<uint64_t>(n);
  }
  return true;
}

}  // namespace lionet::http::detail

namespace lionet::http {

struct StaticFiles::Impl {
  StaticOptions opt;
  int root_fd = -1;
  std::string root_real;  // realpath of the root, for the fallback check
  std::atomic<bool> use_openat2{true};  // relaxed: a one-way latch to the fallback
  std::vector<detail::Encoding> encodings;  // opt.precompressed, resolved
  int64_t valid_ms = 0;

  // The cache of resolved files. Entries holding an fd are bounded by open_file_cache (fd_lru),
  // entries holding bytes by cache_bytes (mem_lru); each entry is on exactly one list.
  std::mutex mu;  // guards map, the lists and cached_bytes; never held across I/O
  struct Slot {
    std::shared_ptr<const detail::FileEntry> entry;
    std::list<std::string>::iterator pos;
    bool in_memory;
  };
  // Keyed by the decoded relative path; looked up by a view of it (no copy per request).
  using Map = std::unordered_map<std::string, Slot, StringHash, std::equal_to<>>;
  Map map;
  std::list<std::string> fd_lru, mem_lru;  // most recent first
  size_t cached_bytes = 0;

  std::atomic<uint64_t> memory_hits{0}, memory_misses{0}, files_served{0}, bytes_sent{0};
  std::atomic<uint64_t> open_hits{0}, open_misses{0}, precompressed_served{0};

  ~Impl() {
    if (root_fd >= 0) ::close(root_fd);
  }

  // Opens rel (decoded, checked) beneath dirfd. -1 with errno on failure. (static_path.cc)
  int open_beneath(int dirfd, const char* rel);

  // ---- the cache (static_cache.cc) ----------------------------------------------------------
  std::shared_ptr<const detail::FileEntry> cache_find(std::string_view key);

  void erase_locked(Map::iterator it);

  // Drops key's entry if it is still `e` (a newer one put meanwhile stays).
  void cache_drop(std::string_view key, const detail::FileEntry* e);

  // Publishes e under e->key, replacing what was there, then evicts past the bounds.
  void cache_put(std::shared_ptr<const detail::FileEntry> e);

  // Still the file the entry describes: within open_file_cache_valid of the last check, or one
  // stat of its path finds the same inode, device, size and mtime (a missing sibling: still
  // absent). stat follows symlinks without RESOLVE_BENEATH, which is safe here: the entry was
  // opened beneath the root, and only that same inode passes.
  bool still_fresh(const detail::FileEntry& e);

  // The cached entry for key if it is still fresh (else dropped), or null.
  std::shared_ptr<const detail::FileEntry> lookup(std::string_view key);

  std::shared_ptr<detail::FileEntry> make_entry(std::string key, std::string path, int fd, const struct stat& st,
                                                std::string_view etag_tag);

  // Opens rel (decoded, checked) beneath the root: a regular file, or with `index` a
  // directory's index file; the entry is published in the cache under key. Null with errno set
  // otherwise: ENOENT/ENOTDIR/ENAMETOOLONG (absent), EISDIR (a directory and not `index`),
  // anything else (refused: outside the root, not a regular file, ...). (static_path.cc)
  std::shared_ptr<const detail::FileEntry> open_entry(const std::string& key, const std::string& rel, bool index);

  // Resolves the request path rel (decoded, checked) beneath the root: a regular file's entry,
  // or null once the request has been answered (404, 403, or the 301 for "dir"). (static_path.cc)
  std::shared_ptr<const detail::FileEntry> resolve(Request& req, Response& res, const std::string& rel,
                                                   bool trailing_slash);

  // try_files: the entry of the first candidate that exists for rel (decoded, checked), or null.
  // (static_path.cc)
  std::shared_ptr<const detail::FileEntry> try_candidates(const std::string& rel);
  // try_files found nothing (or the method is not GET/HEAD): the fallback, or fallback_status.
  void fall_back(Request& req, Response& res);

  // Answers from base (a regular file's entry): representation, conditionals, range, body.
  void respond(Request& req, Response& res, std::shared_ptr<const detail::FileEntry> base);

  // The precompressed sibling of base for enc, if it exists and is not older than base.
  // (static_cache.cc)
  std::shared_ptr<const detail::FileEntry> sibling(const detail::FileEntry& base, const detail::Encoding& enc);

  // MEMORY mode: the bytes of e, read and cached on first use; null after a read error.
  // (static_cache.cc)
  std::shared_ptr<const std::string> bytes_of(const detail::FileEntry& e);

  void serve(Request& req, Response& res, std::string_view rel_raw);
};

}  // namespace lionet::http
