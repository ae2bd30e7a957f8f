// lionet/http/static_files.h: lionet::http::StaticFiles, a handler serving one directory tree
// over HTTP with four body modes:
//   MEMORY   file bytes cached in memory (LRU bounded by cache_bytes), revalidated on every
//            request against the open file's size / mtime / inode (so a changed file is re-read);
//   CHUNK    read with pread in chunk_size pieces and sent Transfer-Encoding: chunked;
//   SENDFILE Response::set_file: kernel sendfile on TCP, the TLS path under TLS;
//   AUTO     MEMORY below memory_max, SENDFILE at or above sendfile_min, CHUNK in between
//            (by default both are 256 KiB: no CHUNK).
// Open-file cache: a resolved file keeps its fd, stat, ETag and Last-Modified (and, in MEMORY
// mode, its bytes instead of the fd); it is checked with one stat of the path (same inode,
// device, size and mtime, or it is resolved anew) once per I/O poll of the server's workers,
// or only after open_file_cache_valid. Precompressed siblings (file.br / file.gz / file.zst) are served to
// clients that accept them when the route lists the encodings.
// Also: MIME type by extension, index file for directories (and 301 "/dir" -> "/dir/"), ETag
// ("<size hex>-<mtime ns hex>") and Last-Modified with 304 on If-None-Match / If-Modified-Since,
// a single byte Range (206, 416 with "Content-Range: bytes */size"; several ranges or a
// malformed Range header: the full 200 body), If-Range, HEAD; other methods 405 (Allow: GET, HEAD).
// try_files (nginx's): candidate paths built from the request path ("$uri", "$uri/",
// "$uri.html", "/index.html"), the first that exists served as above, else a fallback handler
// (every method but GET/HEAD goes straight to it) or a status.
//
// Security (why each check): the path is percent-decoded exactly once; a raw "%2f"/"%5c" (a
// slash hidden in a segment), a NUL byte, a backslash, an empty, "." or ".." segment after
// decoding is answered 404 before touching the file system. The file is then opened relative
// to the root directory's fd with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS), so no
// symlink, ".." or absolute component can leave the root in the kernel's own resolution
// (RESOLVE_BENEATH is dropped only when follow_symlinks_outside_root). Kernels without
// openat2 fall back to openat + a realpath (/proc/self/fd) prefix check. Only regular files
// are served (a FIFO or device under the root is 403; opened O_NONBLOCK so a FIFO cannot block).
//
// Owns: the root directory fd, the memory cache and counters. Must not: hold the cache lock
// while reading a file or sending, or serve any byte of a file resolved outside the root.
// Thread-safe: serve() runs concurrently in many connection fibers.
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "lionet/http/request.h"
#include "lionet/http/response.h"
#include "lionet/http/server.h"

namespace lionet::http {

enum class FileMode { kMemory, kChunk, kSendfile, kAuto };
// Every mode, in the order the docs list them.
inline constexpr FileMode kFileModes[] = {FileMode::kMemory, FileMode::kChunk, FileMode::kSendfile, FileMode::kAuto};

// "memory" | "chunk" | "sendfile" | "auto" (lower case); nullopt otherwise.
std::optional<FileMode> parse_file_mode(std::string_view s);
std::string_view file_mode_name(FileMode m) noexcept;

struct StaticOptions {
  std::string root{};  // directory served          YAML: <route>.root
  FileMode mode = FileMode::kAuto;  //                           YAML: <route>.mode
  // AUTO's thresholds, from measurements (README-static.md): MEMORY below 256 KiB, SENDFILE
  // from it; CHUNK only between the two when they are set apart.
  std::size_t memory_max = 256 * 1024;  // AUTO: below -> MEMORY     YAML: <route>.memory_max
  std::size_t sendfile_min = 256 * 1024;  // AUTO: at/above -> SENDFILE, between -> CHUNK
      //                           YAML: <route>.sendfile_min
  std::size_t chunk_size = 64 * 1024;  // CHUNK bytes per read/chunk YAML: <route>.chunk_size
  // MEMORY cache bound in bytes of file data: LRU eviction; a single file larger than the
  // bound is served from a fresh read per request and not cached.   YAML: <route>.cache_bytes
  std::size_t cache_bytes = 64 * 1024 * 1024;
  std::string index = "index.html";  // served for "dir/"          YAML: <route>.index
  bool follow_symlinks_outside_root = false;  //                YAML: <route>.follow_symlinks_outside_root
  // Resolved files kept open (fd + stat + ETag) for later requests, LRU; 0 = none kept (every
  // SENDFILE/CHUNK request opens its file). Files held in the MEMORY cache hold no fd.
  //                                                                 YAML: <route>.open_file_cache
  std::size_t open_file_cache = 1000;
  // How long a cached file (open or in memory) is used without checking it. 0 = check it with
  // one stat of its path once per I/O poll of the server's workers (io_generation(),
  // sched/scheduler.h; h2o's once per event-loop turn) and at least every ~2 ms: a changed,
  // replaced or removed file is seen by every request read after the change, and the requests
  // that arrived together (an HTTP/2 client's batch, the connections one poll woke) share one
  // stat; above 0 = nginx's open_file_cache_valid: changes are seen up to this late, and a
  // request costs no file-system call.                       YAML: <route>.open_file_cache_valid
  std::chrono::milliseconds open_file_cache_valid{0};
  // Encodings served from precompressed siblings, in the server's order of preference: "br"
  // (file.br), "gzip" (file.gz), "zstd" (file.zst). A sibling is used when the client's
  // Accept-Encoding allows it and it is not older than the file; the answer carries
  // Content-Encoding, Vary: Accept-Encoding and an ETag of its own, and a Range counts the
  // encoded bytes (as nginx's gzip_static). Empty = off.     YAML: <route>.precompressed
  std::vector<std::string> precompressed{};
  // nginx's try_files: candidates tried in order for GET/HEAD; the first that exists is served
  // (with everything above: modes, caches, precompressed, ETag/Range/304). In each, every
  // "$uri" becomes "/" + the decoded request path below the route (after the checks in
  // "Security" below); the result is relative to root. A candidate ending in '/' names a
  // directory and exists when its index file does ("$uri/"); any other names a regular file
  // ("$uri", "$uri.html", "/index.html"). A candidate that cannot be opened for any reason
  // (missing, a directory, outside the root, a FIFO) is skipped. Candidates start with "$uri"
  // or '/' and have no ".", ".." or empty segment (the constructor throws). No candidate
  // "/dir" -> "/dir/" redirect is made. Empty = off: the request path alone, as described above.
  //                                                                 YAML: <route>.try_files
  std::vector<std::string> try_files{};
  // With try_files: called with the request unchanged when no candidate exists, and for every
  // method but GET and HEAD (a file cannot be POSTed; register the route for "*" then). Empty =
  // none: fallback_status answers, and other methods get 405 as without try_files.
  //                                              YAML: <route>.try_files' last entry "@name"
  Handler fallback{};
  // With try_files and no fallback: the status answered when no candidate exists, 200..599
  // (404 as a missing file; others with their reason phrase as a text body, none for 204/304).
  // 0 = none given: 404.                                        YAML: last entry "=CODE"
  int fallback_status = 0;
  // Tests only: use the openat + realpath fallback even when openat2 exists.
  bool force_realpath_check = false;
};

// Why a try_files candidate is refused ("" if it is fine): it must start with "$uri" or '/',
// and once "$uri" stands for a path it must have no ".", ".." or empty segment.
std::string try_files_candidate_error(std::string_view candidate);

class StaticFiles {
 public:
  // Throws std::runtime_error("static root '<root>': <reason>") if root is not a readable
  // directory, or an option is invalid (a try_files candidate, fallback_status out of 200..599).
  explicit StaticFiles(StaticOptions o);
  ~StaticFiles();
  StaticFiles(const StaticFiles&) = delete;
  StaticFiles& operator=(const StaticFiles&) = delete;

  // Serves rel_path (already stripped of the route prefix; raw, percent-encoded) from root.
  void serve(Request& req, Response& res, std::string_view rel_path);

  // A handler for Router::prefix(...): uses req.param("**") as rel_path. The handler shares
  // ownership of the state, so it stays valid even if this object is destroyed first. Marked
  // nonblocking() (server.h) unless a fallback handler is set (it may wait on anything).
  Handler handler();

  // Drops the cached resolutions (fd or bytes) of the file rel_path names, relative to the root
  // as on disk ("docs/a.html"; a directory drops everything beneath it), so the next request
  // resolves and reads it anew even within open_file_cache_valid. For a file watcher (the
  // lionet binary's `watch: true`). Returns how many entries were dropped. Thread-safe.
  std::size_t invalidate(std::string_view rel_path);
  // Drops every cached resolution (after a watcher lost events). Thread-safe.
  void invalidate_all();

  struct Stats {
    uint64_t memory_hits, memory_misses, files_served, bytes_sent_hint;
    uint64_t open_cache_hits;  // requests answered from a cached resolution (fd or memory)
    uint64_t open_cache_misses;  // requests that resolved the path (openat2 + fstat)
    uint64_t precompressed_served;  // answers from a precompressed sibling
  };
  Stats stats() const;

  const StaticOptions& options() const noexcept;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace lionet::http
