// tests/common/test_pch.h: the precompiled header of every test program (tests/CMakeLists.txt,
// LIONET_PCH). GoogleTest and the standard headers most tests include: parsing them cost ~2.4 s
// of each of the ~100 test files. Only third-party and standard headers go here, never
// lionet's own: a test must still include what it uses, and editing a lionet header must not
// rebuild this.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>
