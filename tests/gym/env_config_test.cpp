#include "kforge/env/env_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gym_test_util.h"
#include "kforge/env/env_pool.h"
#include "kforge/reward/reward.h"

namespace kforge::env {
namespace {

json without_source(json j) {
  j.erase("source");
  return j;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(EnvConfigTest, DefaultPresetSpellsOutTheBuiltInDefaults) {
  // configs/env/default.yaml documents every key; it must not drift from the code.
  const EnvConfig file = load_env_config("default");
  EXPECT_EQ(without_source(to_json(file)), without_source(to_json(default_env_config())));
  EXPECT_NE(file.source.find("default.yaml"), std::string::npos);
}

TEST(EnvConfigTest, BackendPresetsPickTheirModeAndGuide) {
  const EnvConfig cpu = load_env_config("cpu");
  EXPECT_EQ(cpu.backend, BackendKind::kCpu);
  EXPECT_EQ(cpu.default_mode, SolutionMode::kCpp);
  EXPECT_NE(load_skills(cpu).find("one thread"), std::string::npos);

  const EnvConfig cuda = load_env_config("cuda");
  EXPECT_EQ(cuda.backend, BackendKind::kCuda);
  EXPECT_EQ(cuda.default_mode, SolutionMode::kCuda);
  EXPECT_NE(load_skills(cuda).find("wgmma"), std::string::npos);
}

TEST(EnvConfigTest, BackendKeyDecidesTheDefaultMode) {
  EXPECT_EQ(parse_env_config(Document::from_yaml_text("backend: cuda\n", "c.yaml")).default_mode, SolutionMode::kCuda);
  EXPECT_EQ(parse_env_config(Document::from_yaml_text("backend: cuda\nsolution_mode: nvrtc\n", "c.yaml")).default_mode,
            SolutionMode::kNvrtc);
  EXPECT_EQ(parse_env_config(Document::from_yaml_text("device: 1\n", "c.yaml")).default_mode, SolutionMode::kCpp);
}

TEST(EnvConfigTest, UnknownKeyNamesFileFieldAndLine) {
  const std::string msg = error_of(
      [] { parse_env_config(Document::from_yaml_text("backend: cpu\nepisode:\n  max_turn: 3\n", "/cfg/my.yaml")); });
  EXPECT_NE(msg.find("/cfg/my.yaml:3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("max_turn"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean \"max_turns\""), std::string::npos) << msg;
}

TEST(EnvConfigTest, BadValuesAreRejectedWithTheirField) {
  EXPECT_NE(error_of([] { parse_env_config(Document::from_yaml_text("backend: gpu\n", "c.yaml")); }).find("/backend"),
            std::string::npos);
  EXPECT_NE(
      error_of([] { parse_env_config(Document::from_yaml_text("eval:\n  seeds: 0\n", "c.yaml")); }).find("/eval/seeds"),
      std::string::npos);
  EXPECT_NE(error_of([] {
              parse_env_config(Document::from_yaml_text("eval:\n  min_samples: 9\n  max_samples: 3\n", "c.yaml"));
            }).find("min_samples"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_env_config(Document::from_yaml_text("reward:\n  paid_on: never\n", "c.yaml"));
            }).find("every_step"),
            std::string::npos);
}

TEST(EnvConfigTest, EveryDurationIsBoundedWithTheFieldNamed) {
  // 1e13 ms would overflow deadline arithmetic downstream; refused at load.
  const std::string eval =
      error_of([] { parse_env_config(Document::from_yaml_text("eval:\n  eval_timeout_ms: 1e13\n", "c.yaml")); });
  EXPECT_NE(eval.find("c.yaml:2:20: field /eval/eval_timeout_ms: expected a number in [0, 8.64e+07]"),
            std::string::npos)
      << eval;
  for (const char* field : {"call_timeout_ms", "warmup_ms", "max_time_ms"}) {
    const std::string msg = error_of(
        [&] { parse_env_config(Document::from_yaml_text(std::string("eval:\n  ") + field + ": 1e300\n", "c.yaml")); });
    EXPECT_NE(msg.find(std::string("/eval/") + field), std::string::npos) << msg;
  }
  EXPECT_NE(error_of([] {
              parse_env_config(Document::from_yaml_text("eval:\n  call_timeout_ms: 0\n", "c.yaml"));
            }).find("/eval/call_timeout_ms: expected a positive number"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_env_config(Document::from_yaml_text("episode:\n  time_budget_s: 1e9\n", "c.yaml"));
            }).find("/episode/time_budget_s: expected a number in [0, 86400]"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_env_config(Document::from_yaml_text("compile:\n  timeout_s: 1e12\n", "c.yaml"));
            }).find("/compile/timeout_s"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_env_config(Document::from_yaml_text("eval:\n  target_rse: 5\n", "c.yaml"));
            }).find("/eval/target_rse: expected a number in [0, 1]"),
            std::string::npos);
  // The largest allowed value loads.
  EXPECT_EQ(
      parse_env_config(Document::from_yaml_text("eval:\n  eval_timeout_ms: 86400000\n", "c.yaml")).eval.eval_timeout_ms,
      86400000.0);
}

TEST(EnvConfigTest, RewardNumbersAreBounded) {
  const auto path = std::filesystem::temp_directory_path() / ("kforge-reward-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << "name: r\nterms:\n  - type: log_speedup\n    weight: 1e300\n";
  const std::string msg = error_of([&] { reward::RewardFunction::load(path.string()); });
  std::filesystem::remove(path);
  EXPECT_NE(msg.find("weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected a number in [0, 1e+06]"), std::string::npos) << msg;
}

TEST(EnvConfigTest, CpuBackendHasOnlyDeviceZero) {
  EnvConfig c = testing::fast_config();
  c.device = 3;
  const std::string msg = error_of([&] { EnvPool pool(c, 1); });
  EXPECT_NE(msg.find("field /device: the cpu backend has one device, 0; got 3"), std::string::npos) << msg;
}

TEST(EnvConfigTest, PathsAreRelativeToTheConfigFile) {
  const EnvConfig c = parse_env_config(Document::from_yaml_text(
      "prompt:\n  skills: ../skills/mine.md\nreward:\n  function: rewards/r.yaml\ncompile:\n  cache_dir: cache\n",
      "/etc/kforge/env/c.yaml"));
  EXPECT_EQ(c.prompt.skills, std::filesystem::path("/etc/kforge/env/../skills/mine.md"));
  EXPECT_EQ(c.reward.function, "/etc/kforge/env/rewards/r.yaml");
  EXPECT_EQ(c.compile.cache_dir, std::filesystem::path("/etc/kforge/env/cache"));
  // A preset name is not a path.
  EXPECT_EQ(parse_env_config(Document::from_yaml_text("reward:\n  function: tiered\n", "/x/c.yaml")).reward.function,
            "tiered");
}

TEST(EnvConfigTest, EvalOptionsAndScheduleAreRead) {
  const EnvConfig c = parse_env_config(
      Document::from_yaml_text("eval:\n  seeds: 3\n  float64_reference: true\n  max_time_ms: 15\n"
                               "reward:\n  paid_on: every_step\n  on_truncation: fail\n  step_terms: []\n"
                               "compile:\n  per_mode_limit: {cpp: 7}\n",
                               "c.yaml"));
  EXPECT_EQ(c.eval.seeds, 3);
  EXPECT_TRUE(c.eval.float64_reference);
  EXPECT_DOUBLE_EQ(c.eval.max_time_ms, 15.0);
  EXPECT_EQ(c.eval.min_samples, EvalOptions{}.min_samples);
  EXPECT_EQ(c.reward.paid_on, RewardPaidOn::kEveryStep);
  EXPECT_EQ(c.reward.on_truncation, TruncationReward::kFail);
  EXPECT_TRUE(c.reward.step_terms.empty());
  EXPECT_EQ(c.compile.per_mode_limit.at(SolutionMode::kCpp), 7);
}

TEST(EnvConfigTest, PlacementIsReadBoundedAndBecomesTheExecutorConfig) {
  const EnvConfig c = parse_env_config(Document::from_yaml_text(
      "backend: cuda\nplacement:\n  devices: [2, 0]\n  lanes_per_device: 4\n  episodes_per_device: 16\n"
      "  max_system_errors: 5\nexecutor:\n  gate_dir: gates\n  baseline_cache: \"off\"\n  runner_cuda_connections: 4\n"
      "  profiler_spares: 3\n",
      "/cfg/p.yaml"));
  EXPECT_EQ(c.placement.devices, (std::vector<int>{2, 0}));
  EXPECT_EQ(c.device, 2) << "device follows placement.devices";
  const ExecutorConfig ec = executor_config(c);
  EXPECT_EQ(ec.devices, (std::vector<int>{2, 0}));
  EXPECT_EQ(ec.lanes_per_device, 4);
  EXPECT_EQ(ec.max_system_errors, 5);
  EXPECT_EQ(ec.gate_dir, "/cfg/gates");
  EXPECT_EQ(ec.runner_cuda_connections, 4);
  EXPECT_EQ(ec.profiler_spares, 3);
  EXPECT_EQ(
      executor_config(parse_env_config(Document::from_yaml_text("backend: cuda\n", "c.yaml"))).runner_cuda_connections,
      0)
      << "0: the device pool's default (one queue) unless the config says otherwise";
  EXPECT_TRUE(ec.baseline_cache_dir.empty());
  EXPECT_EQ(placed_device_count(c), 2);

  // `device` alone is the one-GPU spelling; `all` is resolved at start.
  EXPECT_EQ(parse_env_config(Document::from_yaml_text("backend: cuda\ndevice: 3\n", "c.yaml")).placement.devices,
            (std::vector<int>{3}));
  const EnvConfig all =
      parse_env_config(Document::from_yaml_text("backend: cuda\nplacement: {devices: all}\n", "c.yaml"));
  EXPECT_TRUE(all.placement.all_devices);
  EXPECT_TRUE(executor_config(all).all_devices);
  const EnvConfig cpu = parse_env_config(Document::from_yaml_text("placement: {cpu_slots: 3}\n", "c.yaml"));
  EXPECT_EQ(executor_config(cpu).cpu_slots, 3);
  EXPECT_EQ(placed_device_count(cpu), 3);
  EXPECT_FALSE(executor_config(cpu).baseline_cache_dir.empty()) << "the baseline cache is on by default";

  auto error = [](const std::string& yaml) {
    return error_of([&] { parse_env_config(Document::from_yaml_text(yaml, "/cfg/p.yaml")); });
  };
  std::string msg = error("placement: {devices: [0, 1, 0]}\n");
  EXPECT_NE(msg.find("listed twice"), std::string::npos) << msg;
  msg = error("placement: {devices: []}\n");
  EXPECT_NE(msg.find("at least one GPU index"), std::string::npos) << msg;
  msg = error("placement: {devices: some}\n");
  EXPECT_NE(msg.find("\"all\""), std::string::npos) << msg;
  msg = error("placement: {devices: [0, 2000]}\n");
  EXPECT_NE(msg.find("placement/devices/1"), std::string::npos) << msg;
  msg = error("placement: {lanes_per_device: 0}\n");
  EXPECT_NE(msg.find("lanes_per_device"), std::string::npos) << msg;
  msg = error("executor: {runner_cuda_connections: 33}\n");
  EXPECT_NE(msg.find("runner_cuda_connections"), std::string::npos) << msg;
  msg = error("executor: {profiler_spares: 5}\n");
  EXPECT_NE(msg.find("profiler_spares"), std::string::npos) << msg;
  msg = error("placement: {cpu_slots: 100000}\n");
  EXPECT_NE(msg.find("cpu_slots"), std::string::npos) << msg;
  msg = error("device: 1\nplacement: {devices: [0, 2]}\n");
  EXPECT_NE(msg.find("not among placement.devices"), std::string::npos) << msg;
  msg = error("placement: {lanes: 2}\n");
  EXPECT_NE(msg.find("unknown key \"lanes\"; allowed keys: cpu_slots, device_memory_reserve_mib, devices, "
                     "episodes_per_device, lane_device_memory_mib, lanes_per_device"),
            std::string::npos)
      << msg;
  msg = error("placement: {lane_per_device: 2}\n");
  EXPECT_NE(msg.find("did you mean \"lanes_per_device\""), std::string::npos) << msg;
  std::string big = "placement: {devices: [";
  for (int i = 0; i < 65; ++i) big += (i ? ", " : "") + std::to_string(i);
  msg = error(big + "]}\n");
  EXPECT_NE(msg.find("at most 64"), std::string::npos) << msg;
}

// Each lane's share of its GPU's memory (docs/execution.md, "Device memory
// per lane"): read in MiB, bounded, and carried to the executor in bytes.
// Whether the lanes fit the card is the judge's to say, once it has seen it.
TEST(EnvConfigTest, LaneDeviceMemoryIsReadBoundedAndBecomesTheExecutorConfig) {
  const ExecutorConfig defaults = executor_config(default_env_config(BackendKind::kCuda));
  EXPECT_EQ(defaults.lane_device_memory_bytes, 0u) << "an even share of the card by default";
  EXPECT_EQ(defaults.device_memory_reserve_bytes, uint64_t{2048} << 20);

  const EnvConfig c = parse_env_config(
      Document::from_yaml_text("backend: cuda\nplacement:\n  lanes_per_device: 4\n  lane_device_memory_mib: 18000\n"
                               "  device_memory_reserve_mib: 1024\n",
                               "/cfg/p.yaml"));
  EXPECT_EQ(c.placement.lane_device_memory_mib, 18000);
  const ExecutorConfig ec = executor_config(c);
  EXPECT_EQ(ec.lane_device_memory_bytes, uint64_t{18000} << 20);
  EXPECT_EQ(ec.device_memory_reserve_bytes, uint64_t{1024} << 20);
  EXPECT_EQ(to_json(c)["placement"]["lane_device_memory_mib"], 18000);

  auto error = [](const std::string& yaml) {
    return error_of([&] { parse_env_config(Document::from_yaml_text(yaml, "/cfg/p.yaml")); });
  };
  std::string msg = error("placement: {lane_device_memory_mib: -1}\n");
  EXPECT_NE(msg.find("lane_device_memory_mib"), std::string::npos) << msg;
  msg = error("placement: {device_memory_reserve_mib: 99999999999}\n");
  EXPECT_NE(msg.find("device_memory_reserve_mib"), std::string::npos) << msg;
  msg = error("placement: {lane_device_memory_mib: lots}\n");
  EXPECT_NE(msg.find("lane_device_memory_mib"), std::string::npos) << msg;
}

TEST(EnvConfigTest, HardwareCountersAreForProfileActionsUnlessAsked) {
  const EnvConfig c = load_env_config("default");
  EXPECT_TRUE(c.eval.hardware_metrics);
  EXPECT_FALSE(c.eval.hardware_metrics_on_submit);
  const EnvConfig on = parse_env_config(Document::from_yaml_text("eval: {hardware_metrics_on_submit: true}\n", "c"));
  EXPECT_TRUE(on.eval.hardware_metrics_on_submit);
}

TEST(EnvConfigTest, UnknownPresetListsThePresets) {
  const std::string msg = error_of([] { load_env_config("cpuu"); });
  EXPECT_NE(msg.find("did you mean \"cpu\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("default"), std::string::npos) << msg;
}

TEST(EnvConfigTest, MissingSkillsFileIsNamed) {
  EnvConfig c = default_env_config();
  c.prompt.skills = "/nonexistent/guide.md";
  const std::string msg = error_of([&] { load_skills(c); });
  EXPECT_NE(msg.find("/nonexistent/guide.md"), std::string::npos) << msg;
}

TEST(EnvConfigTest, StepTermsMustBeTermsOfTheRewardFunction) {
  EnvConfig c = testing::fast_config();
  c.reward.function = "tiered";
  c.reward.step_terms = {"turn_cost"};
  const std::string msg = error_of([&] { EnvPool pool(c, 1); });
  EXPECT_NE(msg.find("reward.step_terms"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tiered"), std::string::npos) << msg;
}

}  // namespace
}  // namespace kforge::env
