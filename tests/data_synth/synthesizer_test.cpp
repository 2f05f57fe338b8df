// The synthesis run in-process: determinism across thread counts, baselines
// from the callback, resumption, and the exported dataset.
#include "kforge/data_synth/synthesizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "kforge/core/task_set.h"
#include "kforge/data_synth/exporters.h"

namespace kforge::synth {
namespace {
namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("kforge_synth_run_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  return p;
}

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

SynthConfig config(int workers) {
  SynthConfig c;
  c.n = 5;
  c.seed = 21;
  c.workers = workers;
  c.shapes.window = default_window("cpu");
  return c;
}

TEST(SynthesizerTest, SameFileForOneAndThreeWorkersWithCallbackBaselines) {
  const fs::path a = scratch("a"), b = scratch("b");
  int calls = 0;
  std::mutex mu;
  BaselineFn baseline = [&](const TaskSpec& t) {
    std::lock_guard<std::mutex> lock(mu);
    ++calls;
    BaselineResult r;
    r.device = "test-judge";
    r.eager_ms = 0.5;  // a value the test can find in the output
    EXPECT_TRUE(t.meta.contains("synth"));
    return r;
  };
  const SynthProgress pa = synthesize(config(3), a, baseline, {});
  const SynthProgress pb = synthesize(config(1), b, baseline, {});
  EXPECT_EQ(pa.accepted, 5);
  EXPECT_EQ(pb.accepted, 5);
  EXPECT_EQ(read(a / "tasks.jsonl"), read(b / "tasks.jsonl"));
  EXPECT_GE(calls, 10);
  const std::vector<TaskSpec> tasks = load_task_set(a / "tasks.jsonl");
  for (const auto& t : tasks) {
    ASSERT_TRUE(t.baselines.has_value());
    EXPECT_EQ(*t.baselines->eager_ms, 0.5);
    EXPECT_EQ(t.baselines->device, "test-judge");
  }

  // Resume: cut the file back to two tasks plus a torn line; the rerun
  // restores exactly the same five.
  const std::string full = read(a / "tasks.jsonl");
  size_t cut = 0;
  for (int i = 0; i < 2; ++i) cut = full.find('\n', cut) + 1;
  std::ofstream(a / "tasks.jsonl", std::ios::trunc) << full.substr(0, cut) << "{\"id\": \"torn";
  const SynthProgress pc = synthesize(config(2), a, baseline, {});
  EXPECT_EQ(pc.resumed, 2);
  EXPECT_EQ(read(a / "tasks.jsonl"), full);

  ExportOptions eo;
  eo.python = KFORGE_PYTHON;
  eo.plot_script = fs::path(KFORGE_SOURCE_DIR) / "data_synth" / "python" / "dataset_card_plots.py";
  const ExportSummary s = export_dataset(a, eo);
  EXPECT_EQ(s.tasks, 5u);
  EXPECT_EQ(s.python_files, 5u);
  EXPECT_TRUE(fs::exists(a / "DATASET_CARD.md"));
  EXPECT_TRUE(fs::exists(a / "contamination_report.json"));
  const std::string card = read(a / "DATASET_CARD.md");
  EXPECT_NE(card.find("Rejections by reason"), std::string::npos);
  if (s.plots) {
    EXPECT_TRUE(fs::exists(a / "plots" / "op_histogram.png"));
  }
  fs::remove_all(a);
  fs::remove_all(b);
}

}  // namespace
}  // namespace kforge::synth
