// Configuration of an environment (docs/architecture.md#environment): backend, episode budgets,
// evaluation protocol, reward schedule, prompt material and the services the
// environment runs on. Read from YAML or JSON (configs/env/*.yaml); unknown
// keys are errors that name the file, field and line.
//
// Layout (every key optional; configs/env/default.yaml lists them all):
//   backend: cpu | cuda          device: 0
//   solution_mode: cpp | cuda | nvrtc | torch_ext   (default: cpp on cpu, cuda on cuda)
//   episode: {max_turns, time_budget_s}
//   eval: EvalOptions keys (eval.h)
//   reward: {function, paid_on, step_terms, on_truncation}
//   prompt: {skills, system, compact}
//   compile: {cache_dir, threads, arch, timeout_s, memory_limit_mib, max_source_bytes, per_mode_limit: {mode: n}}
//   executor: {tools_dir, scratch_dir, gate_dir, gpu_gate, runner_spares, runner_cuda_connections,
//              profiler_spares, baseline_cache}
//   placement: {devices: [0, 1] | all, lanes_per_device, cpu_slots,
//               episodes_per_device, max_system_errors}
//   step_threads: n
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/solution.h"
#include "kforge/env/compile_service.h"
#include "kforge/env/eval.h"
#include "kforge/env/executor.h"

namespace kforge::env {

// Which step's reward carries the reward function's full value.
enum class RewardPaidOn {
  // The final step of an episode (submit, or the truncating step) pays the
  // full reward; earlier steps pay only the `step_terms` components. The
  // usual choice for multi-turn RL: exploring (compile/verify/profile) is
  // neither rewarded nor punished beyond shaping.
  kSubmit,
  // Every step pays its own full reward (dense; single-turn or bandit setups).
  kEveryStep,
};

// What the final step pays when an episode is truncated without a submit.
enum class TruncationReward {
  // The episode's last solution is evaluated as if it had been submitted, and
  // the truncating step pays that reward: running out of turns is not worse
  // than submitting the last attempt.
  kAutoSubmit,
  // The truncating step pays the reward of a failed submission (what the
  // reward function gives a submit that was never judged).
  kFail,
};

const std::string& reward_paid_on_name(RewardPaidOn v);
const std::string& truncation_reward_name(TruncationReward v);

struct RewardSchedule {
  // A preset of configs/rewards/ by name, or a path to a reward YAML
  // (RewardFunction::load). Paths in a config file are relative to it.
  std::string function = "default";
  RewardPaidOn paid_on = RewardPaidOn::kSubmit;
  // Components of the reward function paid on every step when paid_on is
  // kSubmit (e.g. "turn_cost"); each must be a component of `function`.
  std::vector<std::string> step_terms = {"turn_cost"};
  TruncationReward on_truncation = TruncationReward::kAutoSubmit;
};

struct PromptConfig {
  // Markdown optimization guide appended to the first observation. Empty: the
  // backend's guide, <config_dir>/skills/<backend>.md.
  std::filesystem::path skills;
  // A text file that replaces the built-in system message; empty: built-in.
  std::filesystem::path system;
  // For short contexts: no optimization guide and no prose about the tools
  // (their definitions still reach the chat template); the task, the ABI and
  // the budgets stay. About 3-6 KB shorter than the full prompt.
  bool compact = false;
};

// Where evaluations run (docs/execution.md, "Lanes and the device pool").
struct Placement {
  // GPUs of the cuda backend (the top-level `device` alone means {device}).
  // `all`: every GPU the process sees (CUDA_VISIBLE_DEVICES, else the
  // driver's list).
  std::vector<int> devices = {0};
  bool all_devices = false;
  // Judge processes per GPU: compilation, runner start-up and verification
  // of several candidates overlap; timing holds the GPU alone.
  int lanes_per_device = 1;
  // Judge processes of the cpu backend (one core each when there are enough).
  int cpu_slots = 1;
  // Episodes kept in flight per device by the batch commands (`kforge eval`
  // over many solutions, the default of `kforge serve --envs`), and the
  // least number of step threads per device.
  int episodes_per_device = 8;
  // System errors in a row after which a device leaves the pool.
  int max_system_errors = 3;
  // Each lane's share of its GPU's memory in MiB (cuda): 0 for an even share
  // of the card less `device_memory_reserve_mib` among lanes_per_device
  // (docs/execution.md, "Device memory per lane").
  int64_t lane_device_memory_mib = 0;
  int64_t device_memory_reserve_mib = 2048;
};

struct EnvConfig {
  std::string source = "<defaults>";  // where the config was read from, for messages
  BackendKind backend = BackendKind::kCpu;
  int device = 0;
  // Mode of solutions that do not name one (tool calls without "mode").
  SolutionMode default_mode = SolutionMode::kCpp;
  // Episode budgets. A step that reaches either truncates the episode.
  int max_turns = 8;
  // Environment time an episode may use, in seconds: the sum over its steps of
  // compile and evaluation time (queueing behind other episodes and the
  // policy's own thinking time do not count). 0: no limit.
  double time_budget_s = 600.0;
  EvalOptions eval;
  RewardSchedule reward;
  PromptConfig prompt;
  CompileServiceConfig compile;
  std::string arch = "sm_90a";  // CUDA modes
  double compile_timeout_s = 120.0;
  // Address-space limit of each compile (g++, nvcc and what they start, or
  // the NVRTC worker): a source that makes the compiler allocate without
  // end is a compile error "compile exceeded N MiB" (CompileContext).
  uint64_t compile_memory_limit_bytes = uint64_t{4} << 30;
  size_t max_source_bytes = 1 << 20;
  std::filesystem::path tools_dir;    // judge/runner binaries; empty: executor's default
  std::filesystem::path scratch_dir;  // runner scratch; empty: executor's default
  std::filesystem::path gate_dir;     // GPU gate lock files; empty: executor's default
  bool gpu_gate = true;
  // Spare timing runners each judge keeps started (ExecutorConfig::runner_spares).
  int runner_spares = 0;
  // Hardware queues of a CUDA runner's context (ExecutorConfig::runner_cuda_connections).
  int runner_cuda_connections = 0;
  // Spare profiler runners of a CUDA judge (ExecutorConfig::profiler_spares).
  int profiler_spares = 0;
  // Timed references kept per task, device model and software versions:
  // empty = default_baseline_cache_dir(); "off" = no cache.
  std::string baseline_cache;
  Placement placement;
  // Threads that drive steps (wait on compiles and evaluations, build
  // observations). Steps beyond this many wait in a queue; compiles are
  // submitted at send() time regardless, so they still overlap.
  int step_threads = 16;
};

// The defaults for a backend (its solution mode and guide).
EnvConfig default_env_config(BackendKind backend = BackendKind::kCpu);
// Reads a config document on top of the backend's defaults (the backend key
// is read first). Relative paths resolve against the document's directory.
EnvConfig parse_env_config(const Document& doc);
// A file path, or a preset name ("default", "cpu", "cuda") looked up as
// <config_dir>/env/<name>.yaml (see reward::config_dir()).
EnvConfig load_env_config(const std::string& path_or_preset);
json to_json(const EnvConfig& config);

// The devices a config places evaluations on (cpu: its slots), as the
// executor will number them.
int placed_device_count(const EnvConfig& config);
// The executor a config asks for (placement, tools, scratch, gate, baseline cache).
ExecutorConfig executor_config(const EnvConfig& config);
// $KFORGE_BASELINE_CACHE_DIR, else $XDG_CACHE_HOME/kforge/baselines, else
// ~/.cache/kforge/baselines.
std::filesystem::path default_baseline_cache_dir();

// The skills text for a config: its prompt.skills file, or the backend's
// built-in guide. InputError naming the path if it cannot be read.
std::string load_skills(const EnvConfig& config);

}  // namespace kforge::env
