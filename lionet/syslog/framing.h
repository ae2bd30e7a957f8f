// lionet/syslog/framing.h: syslog over TCP (RFC 6587): a byte stream cut into messages.
//
//   StreamFramer f(8192);
//   f.feed(bytes_read, [](std::string_view msg, bool truncated) { store(msg, truncated); });
//   f.finish(on_message);   // at end of stream: a last message without its LF still counts
//
// Owns: the bytes of an unfinished message (at most max_message). Must not: buffer more than
// max_message + a few bytes per connection, whatever the peer sends.
//
// Each message is framed on its own (senders do not mix, but nothing here assumes they do):
//   - Octet counting (RFC 6587 3.4.1) when it starts with a digit 1-9: "MSG-LEN SP MSG", the
//     length in at most 9 digits.
//   - Otherwise non-transparent framing (3.4.2): up to a LF (a NUL also ends it, as rsyslog
//     accepts); the LF is not part of the message. Empty lines are skipped.
// A message longer than max_message is delivered cut to max_message with truncated = true and
// the rest of it is skipped (octet counting: its announced length; non-transparent: up to its
// LF). A length field that is not digits + SP is an error: bad() turns true and the
// connection should be closed (the stream can no longer be cut reliably); the bytes seen so
// far were delivered.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace lionet::syslog {

class StreamFramer {
 public:
  explicit StreamFramer(std::size_t max_message) : max_(max_message) {}

  // F: void(std::string_view message, bool truncated); the view is valid during the call.
  template <class F>
  void feed(std::string_view in, F&& on_message);
  // End of stream: an unfinished non-transparent message is delivered as it is.
  template <class F>
  void finish(F&& on_message);
  bool bad() const noexcept { return bad_; }

 private:
  enum class State : uint8_t { kStart, kLength, kCounted, kLine, kSkipLine };
  const std::size_t max_;
  State state_ = State::kStart;
  uint64_t left_ = 0;  // kCounted: message bytes still to come (beyond max_: read and dropped)
  int len_digits_ = 0;
  bool truncated_ = false;
  bool bad_ = false;
  std::string msg_;  // the message so far (at most max_)
};

template <class F>
void StreamFramer::feed(std::string_view in, F&& on_message) {
  std::size_t i = 0;
  while (i < in.size() && !bad_) {
    switch (state_) {
      case State::kStart: {
        const char c = in[i];
        if (c == '\n' || c == '\r' || c == '\0') {
          ++i;  // empty line
        } else if (c >= '1' && c <= '9') {
          state_ = State::kLength;
          left_ = 0;
          len_digits_ = 0;
        } else {
          state_ = State::kLine;
        }
        msg_.clear();
        truncated_ = false;
        break;
      }
      case State::kLength: {
        const char c = in[i++];
        if (c >= '0' && c <= '9' && len_digits_ < 9) {
          left_ = left_ * 10 + static_cast<uint64_t>(c - '0');
          ++len_digits_;
        } else if (c == ' ' && len_digits_ > 0) {
          state_ = left_ > 0 ? State::kCounted : State::kStart;
        } else {
          bad_ = true;
        }
        break;
      }
      case State::kCounted: {
        const std::size_t take = static_cast<std::size_t>(std::min<uint64_t>(left_, in.size() - i));
        const std::size_t room = max_ - msg_.size();
        msg_.append(in.data() + i, std::min(take, room));
        if (take > room) truncated_ = true;
        i += take;
        left_ -= take;
        if (left_ == 0) {
          on_message(std::string_view(msg_), truncated_);
          state_ = State::kStart;
        }
        break;
      }
      case State::kLine: {
        std::size_t end = i;
        while (end < in.size() && in[end] != '\n' && in[end] != '\0') ++end;
        const std::size_t room = max_ - msg_.size();
        const std::size_t n = end - i;
        msg_.append(in.data() + i, std::min(n, room));
        if (n > room) truncated_ = true;
        i = end;
        if (end < in.size()) {  // the LF (or NUL)
          ++i;
          on_message(std::string_view(msg_), truncated_);
          state_ = State::kStart;
        } else if (truncated_) {  // over the limit and no end in sight: deliver, skip the rest
          on_message(std::string_view(msg_), true);
          state_ = State::kSkipLine;
        }
        break;
      }
      case State::kSkipLine: {
        while (i < in.size() && in[i] != '\n' && in[i] != '\0') ++i;
        if (i < in.size()) {
          ++i;
          state_ = State::kStart;
        }
        break;
      }
    }
  }
}

template <class F>
void StreamFramer::finish(F&& on_message) {
  if (state_ == State::kLine && !msg_.empty()) on_message(std::string_view(msg_), truncated_);
  state_ = State::kStart;
  msg_.clear();
}
}  // namespace lionet::syslog
