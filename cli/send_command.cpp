// kforge send: stream a JSONL file of trajectories to a trainer's receiver
// through a TrajectorySender (spool, acks, resend; trainer_bridge/STREAM.md).
//
// Killed and started again with the same arguments, it resumes: line k of the
// input becomes seq first_seq + k - 1 of the spool (first_seq is recorded in
// the spool as send-cursor.json before the first line), so the lines the
// spool already holds are skipped and the unacknowledged ones are resent by
// the spool itself. Nothing is sent twice to the trainer, nothing is lost.
// The cursor stays after a complete run, so running the same command again
// sends nothing new; another input file may use the spool once everything
// of the previous one is acknowledged.
#include <csignal>
#include <iostream>
#include <memory>

#include "commands.h"
#include "kforge/core/jsonl.h"
#include "kforge/rollout/trajectory_sender.h"

namespace kforge::cli {
namespace {

namespace fs = std::filesystem;

struct SendArgs {
  std::string input;
  std::string to = "tcp://127.0.0.1:5557";
  std::string worker;
  std::string spool;
  double flush_timeout_s = 60.0;
  double max_spool_mb = 1024.0;
  int heartbeat_ms = 1000;
  int heartbeat_timeout_ms = 10000;
  bool fsync = false;
  std::string curve_server_key;
  std::string curve_secret;
};

// The input line that seq `first_seq` was given to, kept in the spool.
uint64_t load_or_start_cursor(const fs::path& spool, const fs::path& input, const rollout::SenderStats& stats) {
  const fs::path cursor = spool / "send-cursor.json";
  const std::string abs_input = fs::absolute(input).lexically_normal().string();
  std::error_code ec;
  if (fs::exists(cursor, ec)) {
    const Document doc = Document::from_file(cursor);
    ObjectReader r = doc.root_object();
    const std::string recorded = r.required("input").as_string();
    const uint64_t first = static_cast<uint64_t>(r.required("first_seq").as_int());
    r.finish();
    if (recorded == abs_input) return first;
    if (stats.unacked > 0) {
      throw InputError("send: the spool " + spool.string() + " still holds " + std::to_string(stats.unacked) +
                       " unacknowledged trajectories of " + recorded +
                       "; finish that first (run its command again) or use another --spool and --worker");
    }
  }
  const json doc = {{"input", abs_input}, {"first_seq", stats.next_seq}};
  const fs::path tmp = spool / "send-cursor.json.tmp";
  {
    JsonlWriter w(tmp, JsonlWriter::Mode::kTruncate, /*sync=*/true);
    w.write(doc);
  }
  fs::rename(tmp, cursor);
  return stats.next_seq;
}

int run_send(const SendArgs& a) {
  if (!fs::is_regular_file(a.input)) throw InputError("send: " + a.input + " is not a file");
  rollout::SenderConfig config;
  config.endpoint = a.to;
  config.worker_id = a.worker;
  config.spool_dir = a.spool;
  config.max_spool_bytes = static_cast<uint64_t>(a.max_spool_mb * 1024 * 1024);
  config.heartbeat_interval = std::chrono::milliseconds(a.heartbeat_ms);
  config.heartbeat_timeout = std::chrono::milliseconds(a.heartbeat_timeout_ms);
  config.fsync = a.fsync;
  config.curve = rollout::curve_client_options(a.curve_server_key, a.curve_secret);
  rollout::TrajectorySender sender(config);

  const uint64_t first_seq = load_or_start_cursor(a.spool, a.input, sender.stats());
  const uint64_t already = sender.stats().next_seq - first_seq;  // lines the spool holds
  uint64_t record = 0, written = 0;
  for_each_jsonl_line(a.input, [&](const Document& doc, size_t line) {
    ++record;
    if (record <= already) return;
    if (!doc.root.is_object() || !doc.root.contains("id") || !doc.root["id"].is_string()) {
      throw InputError(a.input + ":" + std::to_string(line) + ": a trajectory must be an object with a string \"id\"");
    }
    sender.write_value(doc.root);
    ++written;
  });
  const bool done = sender.flush(std::chrono::milliseconds(static_cast<int64_t>(a.flush_timeout_s * 1000)));
  const rollout::SenderStats s = sender.stats();
  const nlohmann::ordered_json summary = {{"records", record},
                                          {"written", written},
                                          {"resumed_after", already},
                                          {"acked", s.acked},
                                          {"unacked", s.unacked},
                                          {"rejected", s.rejected},
                                          {"resent", s.resent},
                                          {"reconnects", s.reconnects},
                                          {"ack_latency_p50_ms", s.ack_latency_p50_ms},
                                          {"ack_latency_p99_ms", s.ack_latency_p99_ms},
                                          {"delivery_latency_p99_ms", s.delivery_latency_p99_ms},
                                          {"complete", done}};
  std::cout << summary.dump() << std::endl;
  if (!done) {
    std::cerr << "kforge send: " << s.unacked << " trajectories not acknowledged within " << a.flush_timeout_s
              << " s; they stay in " << a.spool << " (run the same command again to resume)" << std::endl;
    return kExitIncomplete;
  }
  return kExitOk;
}

}  // namespace

void add_send_command(CLI::App& app, CommandFn* selected) {
  auto a = std::make_shared<SendArgs>();
  CLI::App* cmd = app.add_subcommand(
      "send",
      "Stream trajectories (a JSONL file, one trajectory object with an \"id\" per line) to a trainer's receiver "
      "(kforge receive, kforge.TrajectoryStream), exactly once: spooled to disk, resent until acknowledged. "
      "Run it again with the same arguments after a kill to resume. Exit 0 when all are acknowledged, 1 when "
      "--flush-timeout passed first (the rest stays in the spool). trainer_bridge/STREAM.md");
  cmd->add_option("input", a->input, "JSONL file of trajectories")->required();
  cmd->add_option("--to", a->to, "The receiver's endpoint")->capture_default_str();
  cmd->add_option("--worker", a->worker,
                  "Worker id: names this sender's sequence numbers at the receiver; keep it across restarts")
      ->required();
  cmd->add_option("--spool", a->spool, "Spool directory (one per worker id; keeps what is not acknowledged)")
      ->required();
  cmd->add_option("--flush-timeout", a->flush_timeout_s, "Seconds to wait for the last acknowledgements")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--max-spool-mb", a->max_spool_mb, "Disk the spool may use; writing blocks when it is full")
      ->check(CLI::Range(1.0, 1e7))
      ->capture_default_str();
  cmd->add_option("--heartbeat-ms", a->heartbeat_ms, "Heartbeat interval")
      ->check(CLI::Range(10, 3600000))
      ->capture_default_str();
  cmd->add_option("--heartbeat-timeout-ms", a->heartbeat_timeout_ms,
                  "Silence from the receiver after which the sender reconnects and resends")
      ->check(CLI::Range(20, 36000000))
      ->capture_default_str();
  cmd->add_flag("--fsync", a->fsync, "fdatasync each spooled trajectory (survives a machine crash)");
  cmd->add_option("--curve-server-key", a->curve_server_key,
                  "The receiver's public key (Z85, or its .key file): turns CurveZMQ on. Env: KFORGE_CURVE_SERVER_KEY");
  cmd->add_option("--curve-secret", a->curve_secret,
                  "This sender's secret key (Z85, or a .key_secret file); without it a fresh pair is made. Env: "
                  "KFORGE_CURVE_SECRET_KEY");
  cmd->callback([a, selected] { *selected = [a] { return run_send(*a); }; });
}

}  // namespace kforge::cli
