// lionet/http/detail/log.h: the "http" logger, shared by the HTTP/1 server's files.
#pragma once

#include <memory>

#include "lionet/log/log.h"

namespace lionet::http::detail {
inline const std::shared_ptr<spdlog::logger>& http_log() {
  static const auto lg = log::get("http");
  return lg;
}
}  // namespace lionet::http::detail
