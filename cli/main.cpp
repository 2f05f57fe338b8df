// kforge: the command-line entry to KernelForge. Subcommands live one per
// file (commands.h); this file parses and maps errors to exit codes.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "commands.h"
#include "kforge/core/error.h"

int main(int argc, char** argv) {
  using namespace kforge::cli;
  CLI::App app{"KernelForge: a reinforcement-learning environment for CUDA kernel optimization.", "kforge"};
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 done (whatever the verdict), 1 done but some item could not be evaluated, "
      "2 bad input or usage, 3 system failure.");
  CommandFn selected;
  add_eval_command(app, &selected);
  add_task_command(app, &selected);
  add_demo_command(app, &selected);
  add_serve_command(app, &selected);
  add_rollout_command(app, &selected);
  add_policy_server_command(app, &selected);
  add_replay_command(app, &selected);
  add_keygen_command(app, &selected);
  add_send_command(app, &selected);
  add_receive_command(app, &selected);
  add_synth_commands(app, &selected);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    // --help and --version are successes; every other parse error is usage.
    return code == 0 ? kExitOk : kExitBadInput;
  }
  if (!selected) {
    std::fprintf(stderr, "kforge: choose a subcommand (see kforge --help)\n");
    return kExitBadInput;
  }
  try {
    return selected();
  } catch (const kforge::InputError& e) {
    std::fprintf(stderr, "kforge: error: %s\n", e.what());
    return kExitBadInput;
  } catch (const kforge::SystemError& e) {
    std::fprintf(stderr, "kforge: system error: %s\n", e.what());
    return kExitSystem;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kforge: internal error: %s\n", e.what());
    return kExitSystem;
  }
}
