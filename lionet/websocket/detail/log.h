// lionet/websocket/detail/log.h: the "websocket" logger, shared by server.cc and socket.cc.
#pragma once

#include <memory>

#include "lionet/log/log.h"

namespace lionet::websocket::detail {
inline const std::shared_ptr<spdlog::logger>& ws_log() {
  static const auto lg = log::get("websocket");
  return lg;
}
}  // namespace lionet::websocket::detail
