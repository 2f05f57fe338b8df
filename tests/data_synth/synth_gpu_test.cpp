// Synthesis on a CUDA device: shape search, filters and the runtime window
// run on the GPU in-process; the same seed gives the same tasks.jsonl for
// different worker counts there too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "kforge/core/remove_tree.h"
#include "kforge/core/task_set.h"
#include "kforge/data_synth/synthesizer.h"

namespace kforge::synth {
namespace {
namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(SynthGpuTest, TasksFromTheGpuAreDeterministicAndInTheWindow) {
  SynthConfig c;
  c.n = 24;
  c.seed = 3;
  c.backend = "cuda";
  c.shapes.window = default_window("cuda");
  const fs::path a = fs::temp_directory_path() / ("kforge_synth_gpu_a_" + std::to_string(::getpid()));
  const fs::path b = fs::temp_directory_path() / ("kforge_synth_gpu_b_" + std::to_string(::getpid()));
  kforge::remove_tree(a);
  kforge::remove_tree(b);
  c.workers = 8;
  const SynthProgress pa = synthesize(c, a, {}, {});
  c.workers = 3;
  synthesize(c, b, {}, {});
  EXPECT_EQ(pa.accepted, 24);
  EXPECT_EQ(read(a / "tasks.jsonl"), read(b / "tasks.jsonl"));
  for (const auto& line : load_task_set(a / "tasks.jsonl")) EXPECT_EQ(line.meta["synth"]["backend"], "cuda");
  // Every committed slot's in-process time on the GPU is inside the window.
  std::ifstream slots(a / "slots.jsonl");
  std::string line;
  int n = 0;
  while (std::getline(slots, line)) {
    const json s = json::parse(line);
    EXPECT_GE(s["measured_ms"].get<double>(), 0.05) << line;
    EXPECT_LE(s["measured_ms"].get<double>(), 20.0) << line;
    ++n;
  }
  EXPECT_EQ(n, 24);
  kforge::remove_tree(a);
  kforge::remove_tree(b);
}

}  // namespace
}  // namespace kforge::synth
