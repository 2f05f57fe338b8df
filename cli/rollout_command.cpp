// kforge rollout: rollout workers over a task set with a policy, writing
// trajectories (rollout/include/kforge/rollout/worker/rollout_runner.h, docs/rollout.md).
//
// Trajectories go to a JSONL file, to the trainer's receiver through the
// reliable stream (TrajectorySender, trainer_bridge/STREAM.md), or both.
//
// Prints a summary at the end (or JSON with --json); progress lines go to
// stderr. Exit 0 when the run completed (whatever the rewards), 1 when the
// stream's receiver had not acknowledged everything within
// stream.flush_timeout_s (the rest stays in the spool and is sent by the next
// run on it), 2 for bad configs, 3 when the environment or an output failed.
#include <iostream>
#include <memory>

#include "commands.h"
#include "kforge/rollout/jsonl_sink.h"
#include "kforge/rollout/stream/curve.h"
#include "kforge/rollout/stream/trajectory_sender.h"
#include "kforge/rollout/worker/rollout_runner.h"

namespace kforge::cli {
namespace {

struct RolloutArgs {
  std::string config;
  std::string env;
  std::string output;
  std::string policy_endpoint;
  std::string stream;
  std::string stream_worker;
  std::string stream_spool;
  int groups = -1;
  int64_t seed = -1;
  int group_size = 0;
  int concurrency = 0;
  std::string fork_file;
  std::string fork_id;
  int fork_turn = -1;
  int fork_n = 4;
  bool json_output = false;
  bool quiet = false;
};

// The rollout config with the command line's overrides applied.
rollout::RolloutConfig rollout_config(const RolloutArgs& a) {
  rollout::RolloutConfig config = rollout::load_rollout_config(a.config);
  // Not progress: --quiet keeps them, since the config must be edited.
  for (const std::string& w : config.warnings) std::cerr << "kforge rollout: warning: " << w << std::endl;
  if (!a.env.empty()) config.env = a.env;
  if (!a.output.empty()) config.output = a.output;
  if (a.groups >= 0) config.groups = a.groups;
  if (a.seed >= 0) config.seed = static_cast<uint64_t>(a.seed);
  if (a.group_size > 0) config.group_size = a.group_size;
  if (a.concurrency > 0) config.concurrency = a.concurrency;
  if (config.concurrency < config.group_size) config.concurrency = config.group_size;
  if (!a.policy_endpoint.empty()) {
    config.policy.kind = rollout::PolicyKind::kZmq;
    config.policy.zmq.endpoint = a.policy_endpoint;
  }
  if (!a.stream.empty()) config.stream.endpoint = a.stream;
  if (!a.stream_worker.empty()) config.stream.worker_id = a.stream_worker;
  if (!a.stream_spool.empty()) config.stream.spool_dir = a.stream_spool;
  return config;
}

// Where the trajectories go: the JSONL file, the stream, or both.
struct RolloutSinks {
  std::unique_ptr<rollout::JsonlTrajectorySink> jsonl;
  std::unique_ptr<rollout::TrajectorySender> sender;
  std::vector<TrajectorySink*> all;
};

RolloutSinks open_sinks(const rollout::RolloutConfig& config, bool quiet) {
  RolloutSinks sinks;
  if (!config.output.empty()) {
    sinks.jsonl = std::make_unique<rollout::JsonlTrajectorySink>(config.output);
    sinks.all.push_back(sinks.jsonl.get());
  }
  if (!config.stream.endpoint.empty()) {
    rollout::SenderConfig sc;
    sc.endpoint = config.stream.endpoint;
    sc.worker_id = config.stream.worker_id;
    sc.spool_dir = config.stream.spool_path();
    sc.curve = rollout::curve_client_options(config.stream.curve_server_key, config.stream.curve_secret_key);
    if (quiet) sc.log = [](const std::string&) {};
    sinks.sender = std::make_unique<rollout::TrajectorySender>(std::move(sc));
    sinks.all.push_back(sinks.sender.get());
  }
  return sinks;
}

// --fork-file/--fork-id: the recorded trajectory's forks join the run.
void add_forks(const RolloutArgs& a, rollout::RolloutRunner* runner) {
  if (a.fork_file.empty()) return;
  bool found = false;
  for (const Trajectory& t : rollout::read_trajectories(a.fork_file)) {
    if (t.id != a.fork_id) continue;
    runner->add_fork(t, a.fork_turn, a.fork_n);
    found = true;
  }
  if (!found) throw InputError("--fork-id: no trajectory \"" + a.fork_id + "\" in " + a.fork_file);
}

json stream_stats_json(const rollout::RolloutConfig& config, const rollout::TrajectorySender& sender) {
  const rollout::SenderStats ss = sender.stats();
  return {{"endpoint", config.stream.endpoint},
          {"worker_id", sender.worker_id()},
          {"spool_dir", config.stream.spool_path().string()},
          {"written", ss.written},
          {"acked", ss.acked},
          {"unacked", ss.unacked},
          {"resent", ss.resent},
          {"reconnects", ss.reconnects},
          {"ack_latency_p99_ms", ss.ack_latency_p99_ms}};
}

// The summary for a reader (without --json).
void print_rollout_summary(const rollout::RolloutStats& stats, const json& out, const rollout::RolloutConfig& config,
                           const rollout::Policy& policy, const rollout::TrajectorySender* sender) {
  std::printf("%d groups, %d trajectories (%d submitted, %d truncated, %d policy errors, %d stale dropped)\n",
              stats.groups_completed, stats.episodes_written, stats.terminated, stats.truncated, stats.policy_errors,
              stats.stale_dropped);
  std::printf("%lld steps in %.1f s: %.2f steps/s; mean reward %.3f\n", static_cast<long long>(stats.steps),
              stats.wall_s, out["steps_per_s"].get<double>(), stats.mean_reward);
  std::printf("policy: %s, %lld batches, %.1f s answering; environment: %.1f s of steps (%s backend)\n",
              policy.describe().c_str(), static_cast<long long>(stats.policy_batches), stats.policy_ms / 1000.0,
              stats.env_step_ms / 1000.0, out["backend"].get<std::string>().c_str());
  if (!config.output.empty()) std::printf("trajectories: %s\n", config.output.string().c_str());
  if (sender) {
    std::printf("stream: %lld of %lld trajectories acknowledged by %s (worker %s)\n",
                static_cast<long long>(out["stream"]["acked"].get<uint64_t>()),
                static_cast<long long>(out["stream"]["written"].get<uint64_t>()), config.stream.endpoint.c_str(),
                sender->worker_id().c_str());
  }
}

int run_rollout(const RolloutArgs& a) {
  const rollout::RolloutConfig config = rollout_config(a);
  RolloutSinks sinks = open_sinks(config, a.quiet);
  std::shared_ptr<rollout::Policy> policy = rollout::make_policy(config.policy);
  rollout::RolloutRunner runner(config, policy, sinks.all);
  if (!a.quiet) runner.set_log([](const std::string& line) { std::cerr << "kforge rollout: " << line << std::endl; });
  add_forks(a, &runner);
  const rollout::RolloutStats stats = runner.run();
  json out = stats.to_json();
  out["output"] = config.output.string();
  out["policy"] = policy->describe();
  out["backend"] = env::backend_name(runner.env_config().backend);
  uint64_t unacked = 0;
  if (sinks.sender) {
    out["stream"] = stream_stats_json(config, *sinks.sender);
    unacked = out["stream"]["unacked"].get<uint64_t>();
  }
  if (a.json_output) {
    std::cout << out.dump(2) << std::endl;
  } else {
    print_rollout_summary(stats, out, config, *policy, sinks.sender.get());
  }
  if (unacked > 0) {
    std::cerr << "kforge rollout: " << unacked << " trajectories not acknowledged by " << config.stream.endpoint
              << " within " << config.stream.flush_timeout_s << " s; they stay in " << config.stream.spool_path()
              << " and go out with the next run on that spool (or kforge send's resume)" << std::endl;
    return kExitIncomplete;
  }
  return kExitOk;
}

}  // namespace

void add_rollout_command(CLI::App& app, CommandFn* selected) {
  auto args = std::make_shared<RolloutArgs>();
  CLI::App* cmd = app.add_subcommand(
      "rollout",
      "Run rollout workers: groups of episodes per task with a policy (the built-in template policy or a "
      "trainer-served one over ZeroMQ or an OpenAI-compatible server), writing trajectories as JSONL and/or "
      "streaming them to the trainer (docs/rollout.md).");
  cmd->add_option("--config", args->config, "Rollout config (configs/rollout.yaml documents every field)")->required();
  cmd->add_option("--env", args->env, "Environment config or preset (overrides the config's \"env\")");
  cmd->add_option("--output", args->output, "Trajectories JSONL file (overrides output.jsonl)");
  cmd->add_option("--policy-endpoint", args->policy_endpoint,
                  "Use the trainer-served policy at this ZeroMQ endpoint (overrides the config's policy)");
  cmd->add_option("--stream", args->stream,
                  "Also stream trajectories to this receiver (kforge receive, kforge.TrajectoryStream), e.g. "
                  "tcp://127.0.0.1:5557 (overrides stream.endpoint)");
  cmd->add_option("--stream-worker", args->stream_worker, "The stream's worker id (overrides stream.worker_id)");
  cmd->add_option("--stream-spool", args->stream_spool, "The stream's spool directory (overrides stream.spool_dir)");
  cmd->add_option("--groups", args->groups, "Groups to run (0: one per task)")->check(CLI::Range(0, 1000000));
  cmd->add_option("--seed", args->seed,
                  "Seed of task order and episode seeds (overrides the config's seed); give each worker of a run its "
                  "own, e.g. its rank")
      ->check(CLI::Range(int64_t{0}, INT64_MAX));
  cmd->add_option("--group-size", args->group_size, "Rollouts per task")->check(CLI::Range(1, 1024));
  cmd->add_option("--concurrency", args->concurrency, "Episodes in flight")->check(CLI::Range(1, 4096));
  cmd->add_option("--fork", args->fork_file, "Fork: the JSONL file holding the trajectory to continue");
  cmd->add_option("--fork-id", args->fork_id, "Fork: the trajectory's id");
  cmd->add_option("--fork-turn", args->fork_turn, "Fork: continue after this turn (0-based)")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--fork-n", args->fork_n, "Fork: episodes to start from that turn")->check(CLI::Range(1, 1024));
  cmd->add_flag("--json", args->json_output, "Print the summary as JSON");
  cmd->add_flag("--quiet", args->quiet, "No progress lines on stderr");
  cmd->callback([args, selected] {
    if (!args->fork_file.empty() && (args->fork_id.empty() || args->fork_turn < 0)) {
      throw CLI::ValidationError("--fork", "needs --fork-id and --fork-turn");
    }
    *selected = [args] { return run_rollout(*args); };
  });
}

}  // namespace kforge::cli
