// lionet/storage/errors.h: the error codes storage/ returns beside errno values.
//
// Owns: storage::Errc and its std::error_category. Must not: carry anything but codes.
// Library calls return lionet::Result (lionet/base/result.h); system-call failures keep their
// errno in std::generic_category(), storage's own conditions use these codes, so callers can
// write `r.error() == storage::Errc::kCorrupt`.
#pragma once

#include <system_error>

namespace lionet::storage {

enum class Errc {
  kCorrupt = 1,  // a stored batch failed its CRC-32C or its framing: never returned as data
  kOffsetOutOfRange,  // read/truncate at an offset outside [start_offset, end_offset]
  kRecordTooLarge,  // one batch larger than LogOptions::max_batch_bytes
  kInvalidArgument,  // empty batch, bad topic name, partition out of range, bad options
  kLogFailed,  // an fdatasync failed earlier: the log refuses appends (fsync semantics)
  kNotFound,  // unknown topic
};

const std::error_category& storage_category() noexcept;
inline std::error_code make_error_code(Errc e) noexcept { return {static_cast<int>(e), storage_category()}; }

}  // namespace lionet::storage

template <>
struct std::is_error_code_enum<lionet::storage::Errc> : std::true_type {};
