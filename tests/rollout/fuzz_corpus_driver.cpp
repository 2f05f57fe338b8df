// Runs a fuzz target's seed corpus through it (one call per file), so every
// corpus entry stays a regression test in the ordinary build. The argument
// is the corpus directory. (fuzz/CMakeLists.txt's kforge_fuzz_target does
// the same once it is on this branch; see docs/rollout.md.)
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(argv[1])) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ++n;
  }
  std::printf("%d corpus inputs ran\n", n);
  return n > 0 ? 0 : 1;
}
