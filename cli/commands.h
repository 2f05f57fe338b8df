// The `kforge` command's subcommands. Each file registers one subcommand (or a
// group) on the CLI11 app; main() parses, then runs the selected command.
//
// Exit codes, the same for every subcommand:
//   0  done: the command did its job (`eval` evaluated the solution, whatever
//      the verdict; `task check` found the task valid; `demo` evaluated
//      every example)
//   1  done, but something could not be evaluated (a `demo` example hit an
//      environment failure)
//   2  bad input: unknown flags, a missing or invalid task, solution or config
//   3  system failure: the environment could not run (missing compiler,
//      judge that cannot start, ...)
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "kforge/env/env_config.h"

namespace kforge::cli {

enum ExitCode : int { kExitOk = 0, kExitIncomplete = 1, kExitBadInput = 2, kExitSystem = 3 };

// What a parsed subcommand runs; returns the exit code.
using CommandFn = std::function<int()>;

void add_eval_command(CLI::App& app, CommandFn* selected);
void add_task_command(CLI::App& app, CommandFn* selected);
void add_demo_command(CLI::App& app, CommandFn* selected);
void add_serve_command(CLI::App& app, CommandFn* selected);
void add_rollout_command(CLI::App& app, CommandFn* selected);
void add_policy_server_command(CLI::App& app, CommandFn* selected);
void add_replay_command(CLI::App& app, CommandFn* selected);
// The trajectory stream (trainer_bridge/STREAM.md).
void add_keygen_command(CLI::App& app, CommandFn* selected);
void add_send_command(CLI::App& app, CommandFn* selected);
void add_receive_command(CLI::App& app, CommandFn* selected);
// synth and import-kernelbench (synth_command.cpp).
void add_synth_commands(CLI::App& app, CommandFn* selected);

// Options every evaluating subcommand shares, and the config they produce:
// the file or preset given by --config (default: the preset named after the
// backend, else "default"), then --backend, --mode, --reward and --seeds on
// top of it.
struct EnvOptions {
  std::string config;
  std::string backend;
  std::string mode;
  std::string reward;
  int seeds = 0;

  void add_to(CLI::App& cmd, bool with_mode, bool with_backend = true);
  env::EnvConfig load() const;
};

}  // namespace kforge::cli
