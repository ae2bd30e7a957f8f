// lionet/http/tls.cc: HTTPS glue for the client (and, once ssl/ lands, the server). Until
// then https:// URLs fail with EPROTONOSUPPORT.
#include "lionet/http/detail/client_tls.h"

namespace lionet::http::detail {
Result<std::unique_ptr<Stream>> client_tls_stream(const std::shared_ptr<SslContext>&, Socket&&, const std::string&,
                                                  TimePoint) {
  return errno_error(EPROTONOSUPPORT);
}
}  // namespace lionet::http::detail
