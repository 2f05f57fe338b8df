// kforge receive: the trainer's end of the trajectory stream for people who
// only want files. Every trajectory is appended to --out as one JSON line and
// acknowledged once written, exactly once across kills of either side: the
// receiver (TrajectoryReceiver) hands batches to a TrajectoryFileStore
// (rollout/include/kforge/rollout/stream/trajectory_file_store.h), which
// orders the checkpoint, the write and the acknowledgement.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <iostream>
#include <memory>

#include "commands.h"
#include "kforge/rollout/stream/trajectory_file_store.h"
#include "kforge/rollout/stream/trajectory_receiver.h"

namespace kforge::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::atomic<bool> g_stop{false};
extern "C" void on_receive_stop_signal(int) { g_stop = true; }

struct ReceiveArgs {
  std::string bind = "tcp://127.0.0.1:5557";
  std::string out;
  std::string state;
  uint64_t credit = 128;
  uint64_t count = 0;
  double idle_exit_s = 0;
  bool fsync = false;
  int heartbeat_ms = 1000;
  int heartbeat_timeout_ms = 10000;
  double max_message_mb = 64.0;
  std::string curve_secret;
  std::string curve_clients;
};

int run_receive(const ReceiveArgs& a) {
  const std::string out = fs::absolute(a.out).lexically_normal().string();
  const fs::path state_dir = a.state.empty() ? fs::path(out + ".state") : fs::path(a.state);
  rollout::TrajectoryFileStore store(out, state_dir, a.fsync);
  if (store.dropped_torn_line()) std::cerr << "kforge receive: dropped an incomplete last line of " << out << std::endl;

  rollout::ReceiverConfig config;
  config.bind = a.bind;
  config.state_dir = state_dir;
  config.fsync = a.fsync;
  config.credit = a.credit;
  config.max_message_bytes = static_cast<uint64_t>(a.max_message_mb * 1024 * 1024);
  config.heartbeat_interval = std::chrono::milliseconds(a.heartbeat_ms);
  config.heartbeat_timeout = std::chrono::milliseconds(a.heartbeat_timeout_ms);
  config.curve = rollout::curve_server_options(a.curve_secret, a.curve_clients);
  rollout::TrajectoryReceiver receiver(config);
  // What a killed run wrote but had not acknowledged is stored: acknowledged now.
  const uint64_t recovered = store.recovered().size();
  store.finish_recovery([&](const std::vector<rollout::DeliveryKey>& keys) { receiver.ack_stored(keys); });

  std::signal(SIGINT, on_receive_stop_signal);
  std::signal(SIGTERM, on_receive_stop_signal);
  const nlohmann::ordered_json ready = {{"endpoint", receiver.endpoint()},
                                        {"pid", static_cast<int>(::getpid())},
                                        {"out", out},
                                        {"records", store.records()}};
  std::cout << ready.dump() << std::endl;

  uint64_t written = 0;
  auto last_activity = Clock::now();
  while (!g_stop && !(a.count > 0 && store.records() >= a.count)) {
    std::vector<rollout::Delivery> batch = receiver.next_batch(256, std::chrono::milliseconds(50));
    if (batch.empty()) {
      if (a.idle_exit_s > 0 && std::chrono::duration<double>(Clock::now() - last_activity).count() > a.idle_exit_s) {
        break;
      }
      continue;
    }
    last_activity = Clock::now();
    store.append(batch, [&](const std::vector<rollout::DeliveryKey>& keys) { receiver.ack(keys); });
    written += batch.size();
  }
  const rollout::ReceiverStats s = receiver.stats();
  const nlohmann::ordered_json summary = {
      {"records", store.records()}, {"written", written},     {"recovered", recovered}, {"received", s.received},
      {"duplicates", s.duplicates}, {"rejected", s.rejected}, {"sessions", s.sessions}};
  std::cout << summary.dump() << std::endl;
  return kExitOk;
}

}  // namespace

void add_receive_command(CLI::App& app, CommandFn* selected) {
  auto a = std::make_shared<ReceiveArgs>();
  CLI::App* cmd = app.add_subcommand(
      "receive",
      "Receive streamed trajectories (from rollout workers or kforge send) and append each, exactly once, to a "
      "JSONL file. Prints {\"endpoint\", \"pid\", ...} as one JSON line when ready, a summary line at exit. "
      "SIGINT/SIGTERM stop it. trainer_bridge/STREAM.md");
  cmd->add_option("--bind", a->bind, "Endpoint to bind (port 0 or * picks one)")->capture_default_str();
  cmd->add_option("--out", a->out, "JSONL file the trajectories are appended to")->required();
  cmd->add_option("--state", a->state,
                  "State directory (what was acknowledged, per worker); default: OUT.state. Keep it with the output")
      ->capture_default_str();
  cmd->add_option("--credit", a->credit, "Trajectories each sender may have in flight")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--count", a->count, "Exit once the output holds this many trajectories (0: run until stopped)")
      ->capture_default_str();
  cmd->add_option("--idle-exit", a->idle_exit_s, "Exit after this many seconds without a trajectory (0: never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_flag("--fsync", a->fsync, "fdatasync the output and the state after each batch (machine-crash safety)");
  cmd->add_option("--heartbeat-ms", a->heartbeat_ms, "Heartbeat interval")
      ->check(CLI::Range(10, 3600000))
      ->capture_default_str();
  cmd->add_option("--heartbeat-timeout-ms", a->heartbeat_timeout_ms, "Silence after which a sender's session ends")
      ->check(CLI::Range(20, 36000000))
      ->capture_default_str();
  cmd->add_option("--max-message-mb", a->max_message_mb, "Largest message accepted, in MiB")
      ->check(CLI::Range(0.01, 4096.0))
      ->capture_default_str();
  cmd->add_option("--curve-secret", a->curve_secret,
                  "This receiver's secret key (Z85, or a .key_secret file): turns CurveZMQ on. Env: "
                  "KFORGE_CURVE_SECRET_KEY");
  cmd->add_option("--curve-clients", a->curve_clients,
                  "Directory of the senders' public .key files (or one file); only they may connect. Without it any "
                  "sender that knows the public key may. Env: KFORGE_CURVE_CLIENTS");
  cmd->callback([a, selected] { *selected = [a] { return run_receive(*a); }; });
}

}  // namespace kforge::cli
