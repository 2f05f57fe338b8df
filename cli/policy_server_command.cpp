// kforge policy-server: serve a policy over the policy protocol
// (trainer_bridge/POLICY.md) — today the built-in template policy, so that rollouts
// and the demo go through the same ZeroMQ path a trainer-served model does.
//
// Once bound it prints one JSON line on stdout, {"endpoint": ..., "pid": ...};
// SIGINT/SIGTERM stop it (exit 0).
#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <iostream>
#include <memory>
#include <thread>

#include "commands.h"
#include "kforge/rollout/policy/policy_server.h"
#include "kforge/rollout/policy/template_policy.h"

namespace kforge::cli {
namespace {

struct PolicyServerArgs {
  bool template_policy = false;
  // --template's name until "baseline" came to mean only the eager reference
  // time; still accepted, with a warning.
  bool deprecated_baseline = false;
  std::string bind = "tcp://127.0.0.1:5556";
  std::string mode = "auto";
  int explore_turns = 2;
  uint64_t seed = 0;
};

int run_policy_server(const PolicyServerArgs& a) {
  if (a.deprecated_baseline) {
    std::cerr << "kforge policy-server: warning: --baseline is deprecated; write --template (the same policy)"
              << std::endl;
  }
  if (!a.template_policy && !a.deprecated_baseline) {
    throw InputError("choose the policy to serve: --template (the only one built in)");
  }
  rollout::TemplateConfig tc;
  tc.mode = a.mode;
  tc.explore_turns = a.explore_turns;
  tc.seed = a.seed;
  rollout::TemplatePolicy policy(tc);

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  rollout::PolicyServerConfig config;
  config.bind = a.bind;
  rollout::PolicyServer server(policy, config);
  std::thread signal_thread([&server, signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    server.stop();
  });
  const nlohmann::ordered_json ready = {
      {"endpoint", server.endpoint()}, {"pid", static_cast<int>(::getpid())}, {"policy", policy.describe()}};
  std::cout << ready.dump() << std::endl;
  std::cerr << "kforge policy-server: serving " << policy.describe() << " on " << server.endpoint() << std::endl;
  try {
    server.run();
  } catch (...) {
    pthread_kill(signal_thread.native_handle(), SIGTERM);
    signal_thread.join();
    throw;
  }
  // run() returns only after stop(), i.e. after the signal thread's sigwait.
  signal_thread.join();
  std::cerr << "kforge policy-server: stopped after " << server.batches_served() << " batches" << std::endl;
  return kExitOk;
}

}  // namespace

void add_policy_server_command(CLI::App& app, CommandFn* selected) {
  auto args = std::make_shared<PolicyServerArgs>();
  CLI::App* cmd = app.add_subcommand(
      "policy-server",
      "Serve a policy to rollout workers over ZeroMQ (trainer_bridge/POLICY.md). Prints {\"endpoint\", \"pid\"} as "
      "one JSON line on stdout once bound; SIGINT/SIGTERM stop it.");
  cmd->add_flag("--template", args->template_policy, "Serve the built-in template policy (kernel templates, no model)");
  cmd->add_flag("--baseline", args->deprecated_baseline, "Deprecated name of --template");
  cmd->add_option("--bind", args->bind, "ZeroMQ endpoint to bind; port 0 picks a free port")->capture_default_str();
  cmd->add_option("--mode", args->mode, "Solution mode of the templates: auto (from the tools offered), cpp, cuda")
      ->check(CLI::IsMember({"auto", "cpp", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--explore-turns", args->explore_turns, "Variants profiled before the submit")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Mixed into every episode's choices")->capture_default_str();
  cmd->callback([args, selected] { *selected = [args] { return run_policy_server(*args); }; });
}

}  // namespace kforge::cli
