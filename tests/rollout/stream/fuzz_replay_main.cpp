// Runs a libFuzzer target (fuzz/<name>/fuzz_<name>.cpp) without libFuzzer:
// every file of its seed corpus, then random mutations of them, so that CI
// exercises each target on every build. The real fuzzing is the `fuzz`
// preset's (docs/fuzzing.md once it lands).
//   fuzz_replay_<name> CORPUS_DIR [ITERATIONS]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [ITERATIONS]\n", argv[0]);
    return 2;
  }
  std::vector<std::string> corpus;
  for (const auto& entry : std::filesystem::directory_iterator(argv[1])) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    corpus.push_back(text.str());
  }
  if (corpus.empty()) {
    std::fprintf(stderr, "%s: no seed in %s\n", argv[0], argv[1]);
    return 2;
  }
  for (const auto& seed : corpus) LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(seed.data()), seed.size());
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 2000;
  std::mt19937 rng(12345);
  for (int i = 0; i < iterations; ++i) {
    std::string bytes = corpus[rng() % corpus.size()];
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits && !bytes.empty(); ++e) {
      const size_t at = rng() % bytes.size();
      switch (rng() % 5) {
        case 0:
          bytes[at] = static_cast<char>(rng());
          break;
        case 1:
          bytes.erase(at, 1 + rng() % 8);
          break;
        case 2:
          bytes.insert(at, 1, static_cast<char>(rng()));
          break;
        case 3:
          bytes.resize(at);
          break;
        default:  // a chunk of another seed
          const std::string& other = corpus[rng() % corpus.size()];
          bytes.insert(at, other.substr(rng() % (other.size() + 1), 1 + rng() % 64));
          break;
      }
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("%zu seeds and %d mutations ran\n", corpus.size(), iterations);
  return 0;
}
