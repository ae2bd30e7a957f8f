// lionet/base/read_file.h: read_regular_file(), a small file (credentials, keys) read whole,
// for http/auth.cc's htpasswd and token files and kafka/sasl.cc's users file.
//
// Owns: what such a read refuses. Must not: wait on anything but the disk: the file is opened
// O_NONBLOCK and must be a regular file, so a FIFO, a device or a directory named by mistake is
// an error at once instead of a process (or `lionet --check`) that hangs.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <string>

namespace lionet {

struct ReadFileResult {
  enum Error { kNone, kOpen, kNotRegular, kRead, kTooLarge } error = kNone;
  int err = 0;  // errno of kOpen / kRead
  std::size_t max_bytes = 0;
  struct stat st {};  // filled once opened (kNotRegular, kRead, kTooLarge, kNone)
  bool ok() const noexcept { return error == kNone; }
  // Without the path: strerror for kOpen and kRead, "not a regular file", "larger than N MiB".
  std::string reason() const;
};

// Reads the regular file at `path` into `out` (replacing it), at most max_bytes. On an error,
// `out` holds what was read so far (the caller wipes it if it holds secrets).
ReadFileResult read_regular_file(const std::string& path, std::size_t max_bytes, std::string& out);

}  // namespace lionet
