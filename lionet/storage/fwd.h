// lionet/storage/fwd.h: forward declarations of storage/'s classes, for headers of other layers
// that name them only by reference or pointer (as <iosfwd> for the streams).
#pragma once

namespace lionet::storage {
class File;
class Log;
class Store;
}  // namespace lionet::storage
