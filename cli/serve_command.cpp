// kforge serve: the environment as a long-lived server for trainers
// (env/include/kforge/env/server.h, trainer_bridge/PROTOCOL.md).
//
// Once ready it prints one JSON line on stdout, {"endpoint": ..., "pid": ...},
// which scripts and tests wait for; everything else goes to stderr.
// SIGINT/SIGTERM stop it gracefully (exit 0); a second one exits at once.
#include <malloc.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>

#include "commands.h"
#include "kforge/core/input_limits.h"
#include "kforge/env/server.h"

namespace kforge::cli {
namespace {

struct ServeArgs {
  EnvOptions env;
  std::string bind = "tcp://127.0.0.1:5555";
  int envs = 0;  // 0: placement.episodes_per_device x devices
  std::string tasks;
  bool skip_reference_check = false;
  double idle_timeout_s = 0.0;
  double reclaim_after_s = 300.0;
  double max_message_mb = 64.0;
  int max_inflight = 256;
  double drain_timeout_s = 30.0;
};

int run_serve(const ServeArgs& a) {
  // Requests up to --max-message-mb are copied a few times each (socket,
  // decode, env); above glibc's default mmap threshold every copy was a fresh
  // mapping, faulted in page by page and unmapped again (half the server's
  // time on 400 KB steps, bench/server --flood 4). Keep such buffers on the
  // heap and the heap's top for reuse; the largest messages still get their
  // own mapping.
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 256 << 20);
  env::ServerConfig config;
  config.env = a.env.load();
  const int envs =
      a.envs > 0 ? a.envs : config.env.placement.episodes_per_device * env::placed_device_count(config.env);
  config.num_envs = envs;
  config.bind = a.bind;
  config.idle_timeout_s = a.idle_timeout_s;
  config.reclaim_after_s = a.reclaim_after_s;
  config.max_message_bytes = static_cast<size_t>(a.max_message_mb * 1024 * 1024);
  config.max_inflight_per_client = a.max_inflight;
  config.drain_timeout_s = a.drain_timeout_s;
  if (!a.tasks.empty()) {
    config.tasks = load_task_set(a.tasks);
    config.tasks_source = a.tasks;
  }
  config.check_tasks = !a.skip_reference_check;

  // Blocked before any thread exists, so every thread inherits the mask and
  // the signals are taken only by sigwait below (child processes reset it).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  env::Server server(std::move(config));
  std::atomic<bool> releasing{false};
  std::thread signal_thread([&server, &releasing, signals] {
    bool stopping = false;
    for (;;) {
      int sig = 0;
      sigwait(&signals, &sig);
      if (releasing.load()) return;
      if (stopping) {
        // A second signal: the user does not want to wait for the drain.
        std::cerr << "kforge serve: second signal, exiting without waiting for in-flight steps" << std::endl;
        std::_Exit(kExitSystem);
      }
      stopping = true;
      server.stop();
    }
  });

  // Ordered so that the line reads {"endpoint": ..., "pid": ...} as documented.
  const nlohmann::ordered_json ready = {{"endpoint", server.endpoint()},
                                        {"pid", static_cast<int>(::getpid())},
                                        {"protocol_version", server.info()["protocol_version"]},
                                        {"backend", server.info()["backend"]},
                                        {"envs", envs}};
  std::cout << ready.dump() << std::endl;
  std::string summary = "ready on " + server.endpoint() + " (" + server.info()["backend"].get<std::string>() +
                        " backend, " + std::to_string(envs) + " envs";
  if (!a.tasks.empty()) summary += ", tasks from " + a.tasks;
  std::cerr << "kforge serve: " << summary << ")" << std::endl;

  // The signal thread waits in sigwait until a signal comes; when run() ends
  // for another reason (an exception), it is released with a signal of ours.
  auto release_signal_thread = [&signal_thread, &releasing] {
    releasing = true;
    pthread_kill(signal_thread.native_handle(), SIGTERM);
    signal_thread.join();
  };
  try {
    server.run();
  } catch (...) {
    release_signal_thread();
    throw;
  }
  release_signal_thread();
  return kExitOk;
}

}  // namespace

void add_serve_command(CLI::App& app, CommandFn* selected) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Serve the environment to trainers over ZeroMQ (ROUTER socket, MessagePack; trainer_bridge/PROTOCOL.md). "
      "Prints {\"endpoint\", \"pid\"} as one JSON line on stdout when ready; SIGINT/SIGTERM stop it.");
  args->env.add_to(*cmd, /*with_mode=*/true);
  cmd->add_option("--bind", args->bind,
                  "ZeroMQ endpoint to bind; port 0 or * picks a free port. Non-loopback addresses are reachable from "
                  "other hosts without authentication (a warning is printed)")
      ->capture_default_str();
  cmd->add_option("--envs", args->envs,
                  "Env slots (episodes served at once); default: the config's placement.episodes_per_device times "
                  "its devices (8 on the cpu default)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--tasks", args->tasks,
                  "Task set for reset by task_id: a .jsonl file (one task per line), a task file, or a directory of "
                  "task files or of folders holding a task.json. Every task's reference is checked on the judge "
                  "before the server starts; invalid ones are named and the server refuses to start");
  cmd->add_flag("--skip-reference-check", args->skip_reference_check,
                "Serve --tasks without checking their references at start-up (each task is then checked at its "
                "first reset, and an invalid one is refused there)");
  cmd->add_option("--idle-timeout", args->idle_timeout_s,
                  "Seconds a client may stay silent with nothing in flight before its envs are released (0: never; "
                  "a trainer's envs then outlive training steps of any length)")
      ->check(CLI::Range(0.0, kforge::limits::kMaxConfigDurationS))
      ->capture_default_str();
  cmd->add_option("--reclaim-after", args->reclaim_after_s,
                  "When make finds every env held: release the envs of the client quiet longest, if quiet at least "
                  "this many seconds (0: never)")
      ->check(CLI::Range(0.0, kforge::limits::kMaxConfigDurationS))
      ->capture_default_str();
  cmd->add_option("--max-message-mb", args->max_message_mb,
                  "Largest request accepted, in MiB; a larger one makes ZeroMQ drop the connection")
      ->check(CLI::Range(0.001, 4096.0))
      ->capture_default_str();
  cmd->add_option("--max-inflight", args->max_inflight, "Steps one client may have in flight")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--drain-timeout", args->drain_timeout_s,
                  "On SIGINT/SIGTERM: seconds in-flight steps may still finish before they are cancelled")
      ->check(CLI::Range(0.0, kforge::limits::kMaxConfigDurationS))
      ->capture_default_str();
  cmd->callback([args, selected] { *selected = [args] { return run_serve(*args); }; });
}

}  // namespace kforge::cli
