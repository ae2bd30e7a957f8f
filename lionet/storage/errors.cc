// lionet/storage/errors.cc: the storage error category.
#include "lionet/storage/errors.h"

#include <string>

namespace lionet::storage {
namespace {
class StorageCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "storage"; }
  std::string message(int c) const override {
    switch (static_cast<Errc>(c)) {
      case Errc::kCorrupt: return "stored data is corrupt (CRC or framing mismatch)";
      case Errc::kOffsetOutOfRange: return "offset out of range";
      case Errc::kRecordTooLarge: return "record batch larger than max_batch_bytes";
      case Errc::kInvalidArgument: return "invalid argument";
      case Errc::kLogFailed: return "an earlier fdatasync failed; the log refuses appends";
      case Errc::kNotFound: return "no such topic";
    }
    return "unknown storage error";
  }
};
}  // namespace

const std::error_category& storage_category() noexcept {
  static const StorageCategory c;
  return c;
}
}  // namespace lionet::storage
