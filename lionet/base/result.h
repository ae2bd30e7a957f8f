// lionet/base/result.h: lionet::Result<T>, the value-or-error that every layer returns on the
// request path (ARCHITECTURE decision 11: nothing on a request path throws across a fiber
// boundary): net/, ssl/, http/ and the layers above, file/ and storage/.
//
// Owns: Result<T>, Result<void>, errno_error(). Must not allocate or throw, except value() on
// an error result, which is a caller bug and throws std::system_error (convenient at setup
// time: `auto a = Address::parse(s).value();`).
//
// Errors are std::error_code: errno values in std::generic_category() (so
// `r.error() == std::errc::connection_reset` works); the resolver's in net/'s gai_category().
#pragma once

#include <cerrno>
#include <system_error>
#include <type_traits>
#include <utility>

namespace lionet {

inline std::error_code errno_error(int err) noexcept { return {err, std::generic_category()}; }

template <class T>
class [[nodiscard]] Result {
  static_assert(std::is_default_constructible_v<T>, "Result<T> keeps a default T beside an error");

 public:
  Result(T value) noexcept(std::is_nothrow_move_constructible_v<T>) : value_(std::move(value)) {}
  // ec must be an error (non-zero).
  Result(std::error_code ec) noexcept : error_(ec) {}
  static Result failure(int err) noexcept { return Result(errno_error(err)); }

  bool ok() const noexcept { return !error_; }
  explicit operator bool() const noexcept { return ok(); }
  const std::error_code& error() const noexcept { return error_; }

  T& value() & {
    check();
    return value_;
  }
  const T& value() const& {
    check();
    return value_;
  }
  T&& value() && {
    check();
    return std::move(value_);
  }
  T& operator*() & noexcept { return value_; }
  const T& operator*() const& noexcept { return value_; }
  T* operator->() noexcept { return &value_; }
  const T* operator->() const noexcept { return &value_; }
  T value_or(T other) const& { return ok() ? value_ : std::move(other); }

 private:
  void check() const {
    if (error_) throw std::system_error(error_);
  }
  T value_{};
  std::error_code error_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() noexcept = default;
  Result(std::error_code ec) noexcept : error_(ec) {}
  static Result failure(int err) noexcept { return Result(errno_error(err)); }
  bool ok() const noexcept { return !error_; }
  explicit operator bool() const noexcept { return ok(); }
  const std::error_code& error() const noexcept { return error_; }
  void value() const {
    if (error_) throw std::system_error(error_);
  }

 private:
  std::error_code error_;
};
}  // namespace lionet
