// lionet/websocket/detail/frame_reader.cc: detail::FrameReader (see detail/frame_reader.h).
#include "lionet/websocket/detail/frame_reader.h"

#include <algorithm>
#include <cstring>

namespace lionet::websocket::detail {
namespace {
constexpr size_t kGrowStep = 64 * 1024;  // the most msg.data runs ahead of received bytes

// n plus what deflate may add to n bytes that do not compress: 5 bytes per stored block, and a
// sender's memLevel sets the block size (Python websockets uses 5: +0.25%, measured 40,965
// bytes on 16 MiB of random bytes; zlib's smallest, memLevel 1, about +1%). 1/64 + 1 KiB.
uint64_t with_deflate_growth(uint64_t n) noexcept { return n > UINT64_MAX / 2 ? n : n + (n >> 6) + 1024; }
}  // namespace

ReadEvent FrameReader::fail(uint16_t code, const char* why) noexcept {
  end_ = {ReadEvent::kFail, code, why};
  return end_;
}

bool FrameReader::enable_deflate(int peer_window_bits, bool peer_no_context_takeover) {
  inflater_ = std::make_unique<Inflater>(peer_window_bits, peer_no_context_takeover);
  if (!inflater_->ok()) {
    inflater_.reset();
    return false;
  }
  rules_.allow_rsv1 = true;
  // A frame of a compressed message may carry deflate's worst-case growth (see start_frame);
  // the header parser cannot tell a continuation of one from any other frame.
  rules_.max_payload = with_deflate_growth(rules_.max_payload);
  return true;
}

ReadEvent FrameReader::next(const char* data, size_t n, size_t* consumed, Message& msg) {
  size_t used = 0;
  ReadEvent ev;
  while (ev.kind == ReadEvent::kNeedMore) {
    if (finished()) {
      ev = end_;
      break;
    }
    if (state_ == State::kHeader) {
      ParseOutcome o = parse_frame_header(reinterpret_cast<const uint8_t*>(data + used), n - used, rules_, &hdr_);
      if (o.status == ParseOutcome::kNeedMore) break;
      if (o.status == ParseOutcome::kError) {
        ev = fail(o.close_code, o.reason);
        break;
      }
      used += hdr_.header_size;
      ev = start_frame(msg);
      continue;
    }
    if (state_ == State::kControl) {
      size_t k = static_cast<size_t>(std::min<uint64_t>(remaining_, n - used));
      if (k) std::memcpy(control_ + control_len_, data + used, k);  // data may be null when n == 0
      control_len_ = static_cast<uint8_t>(control_len_ + k);
      used += k;
      remaining_ -= k;
      if (remaining_ > 0) break;
      ev = end_control_frame();
      continue;
    }
    // kData
    if (remaining_ == 0) {
      ev = end_data_frame(msg);
      continue;
    }
    if (used == n) break;
    size_t k = static_cast<size_t>(std::min<uint64_t>(remaining_, n - used));
    if (compressed_) {
      zin_.assign(data + used, k);
      used += k;
      take_compressed(msg, zin_.data(), k);
      continue;
    }
    if (msg.data.size() < filled_ + k) msg.data.resize(filled_ + k);
    std::memcpy(msg.data.data() + filled_, data + used, k);
    used += k;
    take(msg, k);
  }
  *consumed = used;
  return ev;
}

ReadEvent FrameReader::start_frame(Message& msg) {
  offset_ = 0;
  remaining_ = hdr_.payload_size;
  if (hdr_.rsv1 && (is_control(hdr_.opcode) || hdr_.opcode == Opcode::kContinuation)) {
    return fail(close_code::kProtocolError, "RSV1 set on a control or continuation frame");
  }
  if (is_control(hdr_.opcode)) {
    state_ = State::kControl;
    control_len_ = 0;
    if (remaining_ == 0) return end_control_frame();
    return {};
  }
  if (hdr_.opcode == Opcode::kContinuation) {
    if (!in_message_) return fail(close_code::kProtocolError, "continuation frame with no message to continue");
  } else {
    if (in_message_) return fail(close_code::kProtocolError, "new message inside a fragmented message");
    in_message_ = true;
    msg.type = hdr_.opcode == Opcode::kText ? MessageType::kText : MessageType::kBinary;
    msg.data.clear();
    filled_ = 0;
    utf8_.reset();
    compressed_ = hdr_.rsv1;
    wire_ = 0;
  }
  // A compressed message's limit is on its inflated size (take_compressed); its wire bytes
  // get deflate's worst-case growth on top (with_deflate_growth), so a message
  // of exactly max_message that did not compress still fits, while a stream of frames that
  // inflate to nothing cannot go on for ever.
  const uint64_t wire_limit = compressed_ ? with_deflate_growth(max_message_) : max_message_;
  if (hdr_.payload_size > wire_limit - (compressed_ ? wire_ : filled_)) {
    return fail(close_code::kTooBig, "message larger than the limit");
  }
  state_ = State::kData;
  return {};
}

void FrameReader::take(Message& msg, size_t k) noexcept {
  char* p = msg.data.data() + filled_;
  if (hdr_.masked) apply_mask(p, k, hdr_.mask_key, offset_);
  offset_ += k;
  remaining_ -= k;
  filled_ += k;
  if (msg.type == MessageType::kText && !utf8_.feed(p, k))
    fail(close_code::kInvalidPayload, "text message is not valid UTF-8");
}

void FrameReader::take_compressed(Message& msg, char* p, size_t k) {
  if (hdr_.masked) apply_mask(p, k, hdr_.mask_key, offset_);
  offset_ += k;
  remaining_ -= k;
  wire_ += k;
  const size_t before = filled_;
  const Inflater::Status st = inflater_->feed(p, k, msg.data, &filled_, max_message_);
  // UTF-8 first, over what was inflated (within the limit): the same bytes give the same
  // verdict however the payload was cut into pieces.
  if (msg.type == MessageType::kText) {
    const size_t upto = std::min<size_t>(filled_, static_cast<size_t>(std::min<uint64_t>(max_message_, SIZE_MAX)));
    if (upto > before && !utf8_.feed(msg.data.data() + before, upto - before)) {
      fail(close_code::kInvalidPayload, "text message is not valid UTF-8");
      return;
    }
  }
  if (st == Inflater::Status::kTooBig) fail(close_code::kTooBig, "message larger than the limit once decompressed");
  if (st == Inflater::Status::kBadData) fail(close_code::kInvalidPayload, "compressed data that does not inflate");
}

ReadEvent FrameReader::end_data_frame(Message& msg) {
  state_ = State::kHeader;
  if (!hdr_.fin) return {};
  in_message_ = false;
  if (compressed_) {
    compressed_ = false;
    const size_t before = filled_;
    const Inflater::Status st = inflater_->finish(msg.data, &filled_, max_message_);
    if (msg.type == MessageType::kText && filled_ > before &&
        !utf8_.feed(msg.data.data() + before, std::min<size_t>(filled_, max_message_) - before)) {
      return fail(close_code::kInvalidPayload, "text message is not valid UTF-8");
    }
    if (st == Inflater::Status::kTooBig)
      return fail(close_code::kTooBig, "message larger than the limit once decompressed");
    if (st == Inflater::Status::kBadData)
      return fail(close_code::kInvalidPayload, "compressed data that does not inflate");
  }
  if (msg.type == MessageType::kText && !utf8_.complete()) {
    return fail(close_code::kInvalidPayload, "text message is not valid UTF-8");
  }
  msg.data.resize(filled_);
  filled_ = 0;
  return {ReadEvent::kMessage, 0, {}};
}

ReadEvent FrameReader::end_control_frame() {
  state_ = State::kHeader;
  if (hdr_.masked) apply_mask(control_, control_len_, hdr_.mask_key, 0);
  std::string_view payload(control_, control_len_);
  switch (hdr_.opcode) {
    case Opcode::kPing: return {ReadEvent::kPing, 0, payload};
    case Opcode::kPong: return {ReadEvent::kPong, 0, payload};
    default: break;
  }
  // Close (RFC 6455 5.5.1): empty, or a 2-byte code and a UTF-8 reason.
  if (payload.empty()) {
    end_ = {ReadEvent::kClose, close_code::kNoStatus, {}};
    return end_;
  }
  if (payload.size() == 1) return fail(close_code::kProtocolError, "close frame with a 1-byte payload");
  const uint16_t code =
      static_cast<uint16_t>((static_cast<uint8_t>(payload[0]) << 8) | static_cast<uint8_t>(payload[1]));
  if (!sendable_close_code(code)) return fail(close_code::kProtocolError, "close frame with an invalid code");
  if (!valid_utf8(payload.substr(2))) return fail(close_code::kInvalidPayload, "close reason is not valid UTF-8");
  end_ = {ReadEvent::kClose, code, payload.substr(2)};
  return end_;
}

char* FrameReader::direct_target(Message& msg, size_t* room) {
  if (finished() || state_ != State::kData || remaining_ == 0) return nullptr;
  if (compressed_) {  // into the piece buffer, inflated at commit
    const size_t step = static_cast<size_t>(std::min<uint64_t>(remaining_, kGrowStep));
    if (zin_.size() < step) zin_.resize(step);
    *room = step;
    return zin_.data();
  }
  size_t have = msg.data.size() - filled_;
  if (have == 0) {
    size_t step = static_cast<size_t>(std::min<uint64_t>(remaining_, std::max(kGrowStep, filled_)));
    msg.data.resize(filled_ + step);
    have = step;
  }
  *room = static_cast<size_t>(std::min<uint64_t>(have, remaining_));
  return msg.data.data() + filled_;
}

void FrameReader::direct_commit(Message& msg, size_t k) {
  if (compressed_) take_compressed(msg, zin_.data(), k);
  else take(msg, k);
}
}  // namespace lionet::websocket::detail
