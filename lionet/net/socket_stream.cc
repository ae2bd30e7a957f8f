// lionet/net/socket_stream.cc: SocketStream::sendfile (see socket_stream.h).
#include "lionet/net/socket_stream.h"

#include <cerrno>

namespace lionet {

Result<size_t> SocketStream::sendfile(int file_fd, off_t offset, size_t count) {
  auto r = sock_.sendfile(file_fd, offset, count);
  if (r.ok()) return r;
  int e = r.error().value();
  if (e == EINVAL || e == ENOSYS || e == EOPNOTSUPP) return sendfile_by_copy(file_fd, offset, count);
  return r;
}
}  // namespace lionet
