// lionet/base/read_file.cc: read_regular_file (see read_file.h).
#include "lionet/base/read_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace lionet {

std::string ReadFileResult::reason() const {
  switch (error) {
    case kNone: return {};
    case kOpen:
    case kRead: return std::strerror(err);
    case kNotRegular: return "not a regular file";
    case kTooLarge: return "larger than " + std::to_string(max_bytes >> 20) + " MiB";
  }
  return {};
}

ReadFileResult read_regular_file(const std::string& path, std::size_t max_bytes, std::string& out) {
  ReadFileResult r;
  r.max_bytes = max_bytes;
  out.clear();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    r.error = ReadFileResult::kOpen;
    r.err = errno;
    return r;
  }
  if (::fstat(fd, &r.st) != 0 || !S_ISREG(r.st.st_mode)) {  // a FIFO or a device would block or never end
    ::close(fd);
    r.error = ReadFileResult::kNotRegular;
    return r;
  }
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      r.error = ReadFileResult::kRead;
      r.err = errno;
      break;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > max_bytes) {
      r.error = ReadFileResult::kTooLarge;
      break;
    }
  }
  ::close(fd);
  return r;
}

}  // namespace lionet
