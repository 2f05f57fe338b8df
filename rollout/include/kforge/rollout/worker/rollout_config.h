// The configuration of `kforge rollout` (configs/rollout.yaml, documented
// field by field in docs/rollout.md). YAML or JSON; unknown keys, wrong
// types and out-of-range values are InputErrors that name the file, the
// field and its line. Input paths (env, tasks) are relative to the config
// file; the output path to the working directory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/rollout/policy/openai_policy.h"
#include "kforge/rollout/policy/policy.h"
#include "kforge/rollout/policy/template_policy.h"
#include "kforge/rollout/policy/zmq_policy.h"

namespace kforge::rollout {

enum class PolicyKind {
  kTemplate,  // the built-in template policy, in process
  kZmq,       // a trainer-served policy (kforge.PolicyServer, kforge policy-server)
  kOpenAi,    // an OpenAI-compatible chat-completions server (needs libcurl)
};

struct PolicyConfig {
  PolicyKind kind = PolicyKind::kTemplate;
  ZmqPolicyConfig zmq;
  TemplateConfig template_policy;
  OpenAiPolicyConfig openai;
  SamplingParams sampling;  // sent with every request (seed: per episode)
};

// The trajectory stream to the trainer (trainer_bridge/STREAM.md): the
// runner writes through a TrajectorySender (kforge_rollout_stream) built
// from this; the CLI owns it so that this library needs no stream code.
struct StreamConfig {
  std::string endpoint;  // the receiver's; empty: no stream
  // Stable across restarts of this worker, unique among the receiver's.
  std::string worker_id = "rollout";
  // Unacknowledged trajectories wait here (and survive a restart); empty:
  // "rollout-spool/<worker_id>" in the working directory.
  std::filesystem::path spool_dir;
  // CurveZMQ: the receiver's public key and this worker's secret key, each
  // Z85 text or a certificate file (kforge keygen); empty: the environment
  // (KFORGE_CURVE_SERVER_KEY, KFORGE_CURVE_SECRET_KEY), else no encryption.
  std::string curve_server_key;
  std::string curve_secret_key;
  // At the end of the run, how long to wait for the receiver's acks; what is
  // still unacknowledged stays in the spool and is reported.
  double flush_timeout_s = 60.0;

  std::filesystem::path spool_path() const {
    return spool_dir.empty() ? std::filesystem::path("rollout-spool") / worker_id : spool_dir;
  }
};

enum class GroupNormalization { kAuto, kNone, kMean, kMeanStd };

struct RolloutConfig {
  std::string source = "<defaults>";
  // The environment: a preset of configs/env/ or a config path.
  std::string env = "cpu";
  // The task set (core/task_set.h): a directory, a task file or a .jsonl.
  std::filesystem::path tasks;
  std::vector<std::string> task_ids;  // only these (empty: all)
  // Tasks are drawn in the set's order (sequential) or shuffled with `seed`.
  bool shuffle = true;
  int groups = 4;       // groups to complete; 0: one group per task of the set
  int group_size = 4;   // rollouts per task (GRPO's n)
  int concurrency = 8;  // episodes in flight (the EnvPool's size)
  // Budgets: the environment's (turns, environment time) apply; these
  // override them when set, and wall_time_s bounds an episode's wall clock
  // from its first observation, including the policy's time (0: none).
  std::optional<int> max_turns;
  std::optional<double> time_budget_s;
  double wall_time_s = 0.0;
  PolicyConfig policy;
  // Contrastive prompts (CUDA-L1): up to this many earlier correct solutions
  // of the task, best first, with their measured speedups (0: off).
  int exemplars = 0;
  // Staleness: an episode whose start policy version lags the newest version
  // seen by more than this is dropped and its slot re-queued (-1: no limit).
  int max_policy_lag = -1;
  GroupNormalization group_normalization = GroupNormalization::kAuto;
  // Trajectories: a JSONL file (empty: none), and/or the stream.
  std::filesystem::path output;
  StreamConfig stream;
  uint64_t seed = 0;
  // Deprecated spellings the config used (policy kind `baseline`), one line
  // each saying what to write instead: they still load, and the caller
  // shows these where the user reads them (kforge rollout: stderr).
  std::vector<std::string> warnings;
};

RolloutConfig parse_rollout_config(const Document& doc);
RolloutConfig load_rollout_config(const std::filesystem::path& path);
json to_json(const RolloutConfig& config);

const std::string& group_normalization_name(GroupNormalization g);

}  // namespace kforge::rollout
