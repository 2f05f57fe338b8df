// nvrtc candidates on the cuda backend, the parts that need no GPU (label cpu,
// part of cuda_unit_test): what the judge accepts and sends to the runner
// (setup message with the CUBIN, plan and tensor names; no ELF checks for a
// CUBIN), and the runner's plan logic against a fake CubinKernels (shapes from
// the bound tensors, pointers and scalars in the parameter block, launch
// order, errors naming the kernel and field). The launches themselves are in
// cuda_executor_test (label gpu).
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "judge/candidate_session.h"
#include "judge/evaluation.h"
#include "judge/judge_device.h"
#include "judge/runner_process.h"
#include "kforge/core/document.h"
#include "runner/plan_candidate.h"

namespace kforge {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// x [rows, cols] input, w [cols] param, y [rows, cols] output.
TaskSpec small_task() {
  json j = {{"id", "test/scale"},
            {"source", "user"},
            {"inputs", {{{"name", "x"}, {"shape", {4, 8}}, {"dtype", "float32"}, {"init", "normal"}}}},
            {"params", {{{"name", "w"}, {"shape", {8}}, {"dtype", "float32"}, {"init", "uniform"}}}},
            {"nodes", {{{"op", "mul"}, {"in", {"x", "w"}}, {"out", "y"}}}},
            {"outputs", {"y"}}};
  return parse_task(Document::from_json_text(j.dump(), "<test task>"));
}

// A compiled plan as the NVRTC compiler stores it: normalized, lowered names.
json compiled_plan() {
  return json::parse(R"J({"kernels": [
    {"name": "scale<128>", "lowered_name": "_Z5scaleILi128EEvPKfS1_Pfli",
     "grid": ["cdiv(numel(x), 128)", "1", "1"], "block": ["128", "1", "1"], "shared_mem": "dim(x, 1) * 4",
     "args": ["x", "w", "y", "i64(numel(x))", "i32(dim(x, -1))"]},
    {"name": "finish", "lowered_name": "finish", "grid": ["1", "1", "1"], "block": ["32", "1", "1"],
     "shared_mem": "0", "args": ["y", "f32(0.5)"]}]})J");
}

// A file that exists until the test ends.
class TempFile {
 public:
  explicit TempFile(const std::string& bytes) {
    path_ = fs::temp_directory_path() /
            ("kforge-nvrtc-unit-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++) + ".cubin");
    std::ofstream(path_, std::ios::binary) << bytes;
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

// --- judge side --------------------------------------------------------------

TEST(NvrtcSetup, CarriesTheCubinThePlanAndTheTensorNamesInBindingOrder) {
  env::Artifact artifact;
  artifact.mode = SolutionMode::kNvrtc;
  artifact.path = "/cache/ab/kernel.cubin";
  artifact.launch = compiled_plan();
  const judge::RunnerCandidate candidate = judge::runner_candidate(artifact, small_task());
  EXPECT_EQ(candidate.cubin, artifact.path);
  EXPECT_TRUE(candidate.library.empty());
  EXPECT_EQ(candidate.tensor_names, (std::vector<std::string>{"x", "w", "y"}));

  judge::RunnerLimits limits;
  limits.open_files = 7;
  const json arena = {{"kind", "cuda_ipc"}, {"bytes", 4096}};
  const json setup = judge::setup_request(candidate, limits, arena);
  EXPECT_EQ(setup["type"], "setup");
  EXPECT_EQ(setup["cubin"], "/cache/ab/kernel.cubin");
  EXPECT_EQ(setup["launch"], compiled_plan());
  EXPECT_EQ(setup["tensors"], json({"x", "w", "y"}));
  EXPECT_FALSE(setup.contains("library")) << setup.dump();
  EXPECT_EQ(setup["arena"], arena);
  EXPECT_EQ(setup["limits"]["open_files"], 7);
}

TEST(NvrtcSetup, SharedObjectsStillSendOnlyTheLibrary) {
  env::Artifact artifact;
  artifact.mode = SolutionMode::kCuda;
  artifact.path = "/cache/cd/candidate.so";
  const json setup =
      judge::setup_request(judge::runner_candidate(artifact, small_task()), judge::RunnerLimits{}, json::object());
  EXPECT_EQ(setup["library"], "/cache/cd/candidate.so");
  EXPECT_FALSE(setup.contains("cubin") || setup.contains("launch") || setup.contains("tensors")) << setup.dump();
}

// Answers as the CUDA judge device would for everything evaluate() asks
// before it needs a runner; the rest is never reached by these tests.
class StaticCudaDevice final : public judge::JudgeDevice {
 public:
  std::string backend() const override { return "cuda"; }
  std::string name() const override { return "static test device"; }
  at::Device device() const override { return at::Device(at::kCPU); }
  uint64_t page_size() const override { return 4096; }
  std::unique_ptr<judge::SharedArena> create_arena(const judge::ArenaLayout&) override {
    throw std::logic_error("no arena in static tests");
  }
  void flush_cache() override {}
  uint64_t flush_bytes() const override { return 0; }
  void synchronize() override {}
  double time_ms(const std::function<void()>& fn) override {
    fn();
    return 0;
  }
  json clocks() override { return json::object(); }
  uint64_t task_memory_bytes() const override { return uint64_t{1} << 30; }
  PeakRates peak_rates() const override { return {1e15, 1e12}; }
};

env::EvalReport evaluate_statically(SolutionMode mode, const fs::path& path, json launch) {
  env::EvalRequest request;
  request.task = small_task();
  request.artifact.mode = mode;
  request.artifact.path = path;
  request.artifact.launch = std::move(launch);
  // Neither verification nor timing: evaluate() stops after its static checks.
  request.verify = false;
  request.time = false;
  StaticCudaDevice device;
  judge::EvaluationCounters counters;
  return judge::evaluate(request, &device, /*pool=*/nullptr, &counters);
}

TEST(NvrtcEvaluation, ACubinPassesTheStaticChecksOfTheCudaBackend) {
  // Not an ELF shared object at all: the checks for shared objects would
  // refuse it, and they do not apply to a CUBIN.
  TempFile cubin(
      "\x7f"
      "ELF but a cubin, not a shared object");
  env::EvalReport r = evaluate_statically(SolutionMode::kNvrtc, cubin.path(), compiled_plan());
  EXPECT_EQ(r.outcome, Outcome::kNotRun) << r.summary;
  EXPECT_EQ(r.summary.rfind("inspected only", 0), 0u) << r.summary;
  EXPECT_TRUE(r.violations.empty());
  EXPECT_FALSE(r.phase_ms.contains("inspect")) << r.phase_ms.dump();

  env::EvalReport as_cuda = evaluate_statically(SolutionMode::kCuda, cubin.path(), nullptr);
  EXPECT_EQ(as_cuda.outcome, Outcome::kRejected) << as_cuda.summary;
  ASSERT_FALSE(as_cuda.violations.empty());
  EXPECT_EQ(as_cuda.violations[0].check, "malformed_elf");
}

TEST(NvrtcEvaluation, WithoutALaunchPlanOrAsAnotherModeItIsRejected) {
  TempFile cubin("cubin bytes");
  env::EvalReport no_plan = evaluate_statically(SolutionMode::kNvrtc, cubin.path(), nullptr);
  EXPECT_EQ(no_plan.outcome, Outcome::kRejected);
  EXPECT_NE(no_plan.summary.find("no launch plan"), std::string::npos) << no_plan.summary;

  // torch_ext artifacts are shared objects: the ELF checks judge them.
  env::EvalReport torch_ext = evaluate_statically(SolutionMode::kTorchExt, cubin.path(), nullptr);
  EXPECT_EQ(torch_ext.outcome, Outcome::kRejected) << torch_ext.summary;
  ASSERT_FALSE(torch_ext.violations.empty()) << torch_ext.summary;
  EXPECT_EQ(torch_ext.violations[0].check, "malformed_elf");

  env::EvalReport cpp = evaluate_statically(SolutionMode::kCpp, cubin.path(), nullptr);
  EXPECT_EQ(cpp.outcome, Outcome::kRejected);
  EXPECT_NE(cpp.summary.find("cannot run on the cuda backend (use cuda, nvrtc or torch_ext)"), std::string::npos)
      << cpp.summary;
}

TEST(NvrtcEvaluation, AMissingCubinIsASystemError) {
  env::EvalReport r = evaluate_statically(SolutionMode::kNvrtc, "/nonexistent/kernel.cubin", compiled_plan());
  EXPECT_EQ(r.outcome, Outcome::kNotRun);
  EXPECT_EQ(r.summary.rfind("system error", 0), 0u) << r.summary;
}

// --- runner side: the plan against a fake device -----------------------------

struct Launched {
  size_t index;
  std::array<uint32_t, 3> grid, block;
  uint32_t shared_mem;
  std::vector<uint64_t> args;  // each argument's bytes, zero-extended
};

class FakeKernels final : public runner::CubinKernels {
 public:
  struct Log {
    std::vector<size_t> prepared;
    std::vector<Launched> launched;
  };
  FakeKernels(Log* log, int refuse_launch = -1, int refuse_prepare = -1)
      : log_(log), refuse_launch_(refuse_launch), refuse_prepare_(refuse_prepare) {}

  void prepare(size_t index, const env::KernelLaunch&) override {
    if (static_cast<int>(index) == refuse_prepare_) throw std::runtime_error("too much shared memory");
    log_->prepared.push_back(index);
  }
  std::string launch(size_t index, const env::KernelLaunch& launch, void** params) override {
    if (static_cast<int>(index) == refuse_launch_) return "cudaLaunchKernel failed: cudaErrorInvalidValue";
    Launched l{index, launch.grid, launch.block, launch.shared_mem_bytes, {}};
    for (size_t a = 0; a < launch.slots().size(); ++a) {
      uint64_t v = 0;
      std::memcpy(&v, params[a], launch.slots()[a].size);
      l.args.push_back(v);
    }
    log_->launched.push_back(l);
    return "";
  }

 private:
  Log* log_;
  int refuse_launch_, refuse_prepare_;
};

kf_tensor tensor(void* data, std::vector<int64_t> shape) {
  kf_tensor t{};
  t.data = data;
  t.ndim = static_cast<int32_t>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
  return t;
}

uint64_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

std::unique_ptr<runner::Candidate> plan_candidate(const json& plan, FakeKernels::Log* log, int refuse_launch = -1,
                                                  int refuse_prepare = -1) {
  const std::vector<std::string> names = {"x", "w", "y"};
  return runner::make_plan_candidate(env::parse_launch_plan(plan, names), names,
                                     std::make_unique<FakeKernels>(log, refuse_launch, refuse_prepare));
}

std::string bind_error(runner::Candidate* c, const std::vector<kf_tensor>& in, const std::vector<kf_tensor>& out) {
  try {
    c->bind(in, out);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(PlanCandidate, LaunchesEveryKernelInOrderWithTheBoundShapesAndPointers) {
  FakeKernels::Log log;
  auto c = plan_candidate(compiled_plan(), &log);
  float x = 0, w = 0, y = 0;
  c->bind({tensor(&x, {300, 64}), tensor(&w, {64})}, {tensor(&y, {300, 64})});
  EXPECT_EQ(log.prepared, (std::vector<size_t>{0, 1}));
  ASSERT_EQ(c->forward(), 0) << c->error();
  EXPECT_TRUE(c->error().empty());
  ASSERT_EQ(log.launched.size(), 2u);
  const Launched& k0 = log.launched[0];
  EXPECT_EQ(k0.index, 0u);
  EXPECT_EQ(k0.grid, (std::array<uint32_t, 3>{150, 1, 1}));  // cdiv(19200, 128)
  EXPECT_EQ(k0.block, (std::array<uint32_t, 3>{128, 1, 1}));
  EXPECT_EQ(k0.shared_mem, 256u);
  EXPECT_EQ(k0.args, (std::vector<uint64_t>{address(&x), address(&w), address(&y), 19200, 64}));
  const Launched& k1 = log.launched[1];
  EXPECT_EQ(k1.index, 1u);
  EXPECT_EQ(k1.block, (std::array<uint32_t, 3>{32, 1, 1}));
  float half = 0;
  std::memcpy(&half, &k1.args[1], sizeof(float));
  EXPECT_EQ(k1.args[0], address(&y));
  EXPECT_EQ(half, 0.5f);

  // Another case: re-evaluated for its shapes and tensors.
  float x2 = 0, y2 = 0;
  c->bind({tensor(&x2, {10, 64}), tensor(&w, {64})}, {tensor(&y2, {10, 64})});
  log.launched.clear();
  ASSERT_EQ(c->forward(), 0);
  ASSERT_EQ(log.launched.size(), 2u);
  EXPECT_EQ(log.launched[0].grid[0], 5u);  // cdiv(640, 128)
  EXPECT_EQ(log.launched[0].args[0], address(&x2));
  EXPECT_EQ(log.launched[0].args[3], 640u);
  EXPECT_EQ(log.launched[1].args[0], address(&y2));
}

TEST(PlanCandidate, APlanThatFailsForTheBoundShapesNamesTheKernelAndField) {
  json plan = compiled_plan();
  plan["kernels"][0]["grid"][0] = "cdiv(numel(x), dim(x, 1) - 64)";
  FakeKernels::Log log;
  auto c = plan_candidate(plan, &log);
  float x = 0, w = 0, y = 0;
  // Fine for 100 columns...
  c->bind({tensor(&x, {2, 100}), tensor(&w, {100})}, {tensor(&y, {2, 100})});
  ASSERT_EQ(c->forward(), 0);
  // ...division by zero for 64.
  const std::string e = bind_error(c.get(), {tensor(&x, {2, 64}), tensor(&w, {64})}, {tensor(&y, {2, 64})});
  EXPECT_EQ(e.rfind("launch plan: kernels[0] (scale<128>): grid.x = ", 0), 0u) << e;
  EXPECT_NE(e.find("division by zero"), std::string::npos) << e;
  // Unbound after the failure: nothing is launched with the previous case's launches.
  log.launched.clear();
  EXPECT_NE(c->forward(), 0);
  EXPECT_TRUE(log.launched.empty());
  EXPECT_NE(c->error().find("no tensors are bound"), std::string::npos) << c->error();
}

TEST(PlanCandidate, ARefusedLaunchStopsTheCallAndSaysWhich) {
  FakeKernels::Log log;
  auto c = plan_candidate(compiled_plan(), &log, /*refuse_launch=*/1);
  float x = 0, w = 0, y = 0;
  c->bind({tensor(&x, {4, 8}), tensor(&w, {8})}, {tensor(&y, {4, 8})});
  EXPECT_NE(c->forward(), 0);
  EXPECT_EQ(log.launched.size(), 1u);
  EXPECT_EQ(c->error(), "kernels[1] (finish): cudaLaunchKernel failed: cudaErrorInvalidValue");
}

TEST(PlanCandidate, WhatTheDeviceRefusesAtBindNamesTheKernel) {
  FakeKernels::Log log;
  auto c = plan_candidate(compiled_plan(), &log, -1, /*refuse_prepare=*/0);
  float x = 0, w = 0, y = 0;
  const std::string e = bind_error(c.get(), {tensor(&x, {4, 8}), tensor(&w, {8})}, {tensor(&y, {4, 8})});
  EXPECT_EQ(e, "launch plan: kernels[0] (scale<128>): too much shared memory");
  EXPECT_NE(c->forward(), 0);
}

TEST(PlanCandidate, TheTensorCountMustMatchTheNames) {
  FakeKernels::Log log;
  auto c = plan_candidate(compiled_plan(), &log);
  float x = 0, y = 0;
  const std::string e = bind_error(c.get(), {tensor(&x, {4, 8})}, {tensor(&y, {4, 8})});
  EXPECT_NE(e.find("set up for 3 tensors, but 2 were bound"), std::string::npos) << e;
}

runner::CubinLoader recording_loader(std::string* image, std::vector<std::string>* names, FakeKernels::Log* log) {
  return [=](const std::string& i, const std::vector<std::string>& n) {
    *image = i;
    *names = n;
    return std::make_unique<FakeKernels>(log);
  };
}

TEST(PlanCandidateLoad, ReadsTheCubinAndLoadsTheLoweredNames) {
  TempFile cubin(
      std::string("\x7f"
                  "ELF\0cubin",
                  9));
  const json setup = {{"cubin", cubin.path().string()}, {"launch", compiled_plan()}, {"tensors", {"x", "w", "y"}}};
  std::string image;
  std::vector<std::string> names;
  FakeKernels::Log log;
  auto c = runner::load_plan_candidate(setup, recording_loader(&image, &names, &log));
  EXPECT_EQ(image, std::string("\x7f"
                               "ELF\0cubin",
                               9));
  EXPECT_EQ(names, (std::vector<std::string>{"_Z5scaleILi128EEvPKfS1_Pfli", "finish"}));
  float x = 0, w = 0, y = 0;
  c->bind({tensor(&x, {4, 8}), tensor(&w, {8})}, {tensor(&y, {4, 8})});
  EXPECT_EQ(c->forward(), 0);
  EXPECT_EQ(log.launched.size(), 2u);
}

TEST(PlanCandidateLoad, RefusesWhatDidNotComeFromTheCompiler) {
  TempFile cubin("cubin");
  std::string image;
  std::vector<std::string> names;
  FakeKernels::Log log;
  auto load_error = [&](const json& setup) -> std::string {
    try {
      runner::load_plan_candidate(setup, recording_loader(&image, &names, &log));
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  };
  json no_lowered = compiled_plan();
  no_lowered["kernels"][1].erase("lowered_name");
  EXPECT_NE(load_error({{"cubin", cubin.path().string()}, {"launch", no_lowered}, {"tensors", {"x", "w", "y"}}})
                .find("kernels[1] (finish) has no lowered_name"),
            std::string::npos);
  // The plan is checked against the names the judge sent.
  const std::string unknown =
      load_error({{"cubin", cubin.path().string()}, {"launch", compiled_plan()}, {"tensors", {"x", "w", "out"}}});
  EXPECT_EQ(unknown.rfind("launch plan: ", 0), 0u) << unknown;
  EXPECT_NE(unknown.find("\"y\" is neither a tensor of the task"), std::string::npos) << unknown;
  const std::string missing =
      load_error({{"cubin", "/nonexistent/kernel.cubin"}, {"launch", compiled_plan()}, {"tensors", {"x", "w", "y"}}});
  EXPECT_NE(missing.find("cannot open the CUBIN /nonexistent/kernel.cubin"), std::string::npos) << missing;
  EXPECT_TRUE(names.empty()) << "nothing reached the device";
}

}  // namespace
}  // namespace kforge
