// tests/fuzz/replay_main.cc: a plain main for the libFuzzer targets, so the ordinary builds
// (release, ASan+UBSan with gcc) replay every kept input of tests/corpus/<target>/ as a ctest
// (label `fuzz`): crashes found by fuzzing stay regression tests in every `make test` stage.
//   <target>_replay DIR   runs LLVMFuzzerTestOneInput once per file of DIR (sorted by name);
// fails when DIR has no inputs. A violated invariant traps, which fails the test.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::filesystem::path> inputs;
  for (const auto& e : std::filesystem::recursive_directory_iterator(argv[1]))
    if (e.is_regular_file()) inputs.push_back(e.path());
  std::sort(inputs.begin(), inputs.end());
  for (const auto& p : inputs) {
    // Named before it runs: a trap in the target ends the process, and ctest shows this line.
    std::fprintf(stderr, "replay: %s\n", p.c_str());
    std::ifstream f(p, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("replayed %zu input(s) of %s\n", inputs.size(), argv[1]);
  return inputs.empty() ? 1 : 0;
}
