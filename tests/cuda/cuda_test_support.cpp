#include "cuda_test_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "kforge/core/document.h"
#include "kforge/env/compile_service.h"

namespace kforge::testing {
namespace {

namespace fs = std::filesystem;

env::CompileService& service() {
  static env::CompileService* s = [] {
    env::CompileServiceConfig config;
    config.cache_dir = fs::path(KFORGE_BINARY_DIR) / "tests" / "cuda" / "compile-cache";
    auto* created = new env::CompileService(config);
    env::add_default_compilers(*created, "cuda");
    return created;
  }();
  return *s;
}

}  // namespace

namespace {

// Every mode through the production CompileService; a failure fails the test.
env::Artifact compile(SolutionMode mode, const std::string& source, const json& launch, const TaskSpec& task) {
  Solution solution;
  solution.mode = mode;
  solution.source = source;
  solution.launch = launch;
  solution.origin = "test (" + solution_mode_name(mode) + ")";
  env::CompileResult r = service().submit(solution, env::compile_context_for(task)).get();
  if (!r.ok) {
    ADD_FAILURE() << solution_mode_name(mode) << " build failed:\n" << r.diagnostics << "\n" << r.log;
    throw std::runtime_error("candidate did not compile");
  }
  return r.artifact;
}

}  // namespace

env::Artifact compile_cuda(const std::string& source, const TaskSpec& task) {
  return compile(SolutionMode::kCuda, source, nullptr, task);
}

env::Artifact compile_nvrtc(const std::string& source, const json& launch, const TaskSpec& task) {
  return compile(SolutionMode::kNvrtc, source, launch, task);
}

env::Artifact compile_torch_ext(const std::string& source, const TaskSpec& task) {
  return compile(SolutionMode::kTorchExt, source, nullptr, task);
}

TaskSpec example_task(const std::string& name) {
  return load_task(fs::path(KFORGE_SOURCE_DIR) / "examples" / name / "task.json");
}

std::string example_source(const std::string& name, const std::string& file) {
  std::ifstream in(fs::path(KFORGE_SOURCE_DIR) / "examples" / name / "cuda" / (file + ".cu"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> example_names() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(fs::path(KFORGE_SOURCE_DIR) / "examples")) {
    if (fs::exists(entry.path() / "task.json") && fs::exists(entry.path() / "cuda")) {
      names.push_back(entry.path().filename().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

TaskSpec affine_task(int64_t rows, int64_t cols) {
  json j = {{"id", "test/affine_relu"},
            {"source", "user"},
            {"inputs", {{{"name", "x"}, {"shape", {rows, cols}}, {"dtype", "float32"}, {"init", "normal"}}}},
            {"params",
             {{{"name", "w"}, {"shape", {cols}}, {"dtype", "float32"}, {"init", "uniform"}},
              {{"name", "b"}, {"shape", {cols}}, {"dtype", "float32"}, {"init", "uniform"}}}},
            {"nodes",
             {{{"op", "mul"}, {"in", {"x", "w"}}, {"out", "t0"}},
              {{"op", "add"}, {"in", {"t0", "b"}}, {"out", "t1"}},
              {{"op", "relu"}, {"in", {"t1"}}, {"out", "y"}}}},
            {"outputs", {"y"}},
            {"tolerance", {{"atol", 1e-5}, {"rtol", 1e-5}}}};
  return parse_task(Document::from_json_text(j.dump(), "<test task>"));
}

TaskSpec task_larger_than_the_gpu() {
  // Every tensor within the static limits (limits::kMaxTensorElements), the
  // task as a whole not: 20 inputs of 32768 x 65535 floats (8 GiB each) are
  // 160 GiB, more than an H200's 141 GB.
  constexpr int kInputs = 20;
  json inputs = json::array();
  json nodes = json::array();
  for (int i = 0; i < kInputs; ++i) {
    const std::string name = "x" + std::to_string(i);
    inputs.push_back({{"name", name}, {"shape", {32768, 65535}}, {"dtype", "float32"}, {"init", "normal"}});
    if (i == 0) continue;
    const std::string prev = i == 1 ? "x0" : "t" + std::to_string(i - 1);
    const std::string out = i == kInputs - 1 ? "y" : "t" + std::to_string(i);
    nodes.push_back({{"op", "add"}, {"in", {prev, name}}, {"out", out}});
  }
  json j = {{"id", "test/larger_than_the_gpu"},
            {"source", "user"},
            {"inputs", inputs},
            {"nodes", nodes},
            {"outputs", {"y"}},
            {"tolerance", {{"atol", 1e-5}, {"rtol", 1e-5}}}};
  return parse_task(Document::from_json_text(j.dump(), "<test task>"));
}

env::EvalOptions gpu_quick_options() {
  env::EvalOptions o;
  o.seeds = 5;
  o.warmup_ms = 20;
  o.max_time_ms = 300;
  o.min_samples = 10;
  o.max_samples = 300;
  o.call_timeout_ms = 5000;
  o.eval_timeout_ms = 90000;
  return o;
}

std::string device_clock_problem(const TimingSummary& t) {
  if (t.timer == "device_events") {
    return t.device_clock_rejected.empty() ? "" : "timed on device events, yet the device clock was rejected";
  }
  if (t.timer != "wall_round_trip") return "timed on '" + t.timer + "', neither device events nor the round trip";
  if (t.device_clock_rejected.empty()) return "timed by the round trip without the device clock's rejection";
  return "";
}

}  // namespace kforge::testing
