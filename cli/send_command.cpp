// kforge send: stream a JSONL file of trajectories to a trainer's receiver
// through a TrajectorySender (spool, acks, resend; trainer_bridge/STREAM.md).
//
// What a spool has taken is kept by trajectory id, not by input line: the
// spool's send-ledger.jsonl holds {"seq", "id", "sha256"} for every
// trajectory it was given. A rerun skips the ids the ledger holds, whatever
// path names the input (the same file, a copy, a symlink, a renamed file),
// and a second line with an id already seen in the input is not sent again:
// the receiver deduplicates by (worker, seq) only, so a trajectory spooled
// twice would reach the trainer twice. A repeated id with other content is
// reported (exit 2) and not sent: the id is the trajectory's identity
// (STREAM.md, "Identifiers").
//
// The ledger line is written before the spool's record, with the seq the
// spool will assign. A kill between the two leaves a line whose seq the spool
// never reached (>= its next seq): it is dropped at the next start, and that
// trajectory is spooled then. A kill after both leaves the trajectory in the
// spool and in the ledger. Either way nothing is lost or sent twice.
#include <csignal>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <unordered_map>

#include "commands.h"
#include "kforge/core/jsonl.h"
#include "kforge/core/msgpack.h"
#include "kforge/core/sha256.h"
#include "kforge/rollout/stream/trajectory_sender.h"

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

struct LedgerEntry {
  uint64_t seq = 0;
  std::string sha256;  // of the trajectory's MessagePack encoding
};

// Ids of the trajectories this spool was given. A ledger line is written
// before its spool record (see the top of the file); lines whose seq the
// spool never reached, and a line cut short by a kill, are dropped here.
class SendLedger {
 public:
  SendLedger(const fs::path& spool, uint64_t next_seq, bool fsync) : path_(spool / "send-ledger.jsonl") {
    bool rewrite = false;
    std::error_code ec;
    if (fs::exists(path_, ec)) {
      JsonlReadOptions options;
      options.allow_torn_tail = true;
      options.max_line_bytes = 16 * 1024;  // an id is at most 1024 bytes
      for_each_jsonl_line(
          path_,
          [&](const Document& doc, size_t) {
            ObjectReader r = doc.root_object();
            LedgerEntry e;
            e.seq = static_cast<uint64_t>(r.required("seq").as_int_in(1, INT64_MAX));
            const std::string id = r.required("id").as_string();
            e.sha256 = r.required("sha256").as_string();
            r.finish();
            if (e.seq >= next_seq) {
              rewrite = true;  // written, but its record never reached the spool
              return;
            }
            entries_[id] = std::move(e);
          },
          options);
      rewrite = rewrite || torn_tail();
    } else {
      migrate_cursor(spool, next_seq);
      rewrite = !entries_.empty();
    }
    if (rewrite) save_all();
    writer_ = std::make_unique<JsonlWriter>(path_, JsonlWriter::Mode::kAppend, fsync);
  }

  const LedgerEntry* find(const std::string& id) const {
    auto it = entries_.find(id);
    return it == entries_.end() ? nullptr : &it->second;
  }
  void add(const std::string& id, LedgerEntry e) {
    writer_->write(json{{"seq", e.seq}, {"id", id}, {"sha256", e.sha256}});
    entries_[id] = std::move(e);
  }

 private:
  bool torn_tail() const {
    std::ifstream in(path_, std::ios::binary | std::ios::ate);
    const std::streamoff size = in.tellg();
    if (size <= 0) return false;
    in.seekg(size - 1);
    return in.get() != '\n';
  }

  // Spools written by kforge send before the ledger kept send-cursor.json:
  // line k of one input file was seq first_seq + k - 1. Those lines' ids go
  // into the ledger so that a rerun does not send them again.
  void migrate_cursor(const fs::path& spool, uint64_t next_seq) {
    const fs::path cursor = spool / "send-cursor.json";
    std::error_code ec;
    if (!fs::exists(cursor, ec)) return;
    const Document doc = Document::from_file(cursor);
    ObjectReader r = doc.root_object();
    const fs::path input = r.required("input").as_string();
    const uint64_t first = static_cast<uint64_t>(r.required("first_seq").as_int_in(1, INT64_MAX));
    r.finish();
    if (!fs::is_regular_file(input, ec)) {
      throw InputError("send: the spool's send-cursor.json names " + input.string() +
                       ", which is gone; without it the spool cannot tell which trajectories it sent. Restore "
                       "the file or use a new --spool and --worker");
    }
    uint64_t seq = first;
    for_each_jsonl_line(input, [&](const Document& line, size_t) {
      if (seq >= next_seq) return;
      if (line.root.is_object() && line.root.contains("id") && line.root["id"].is_string()) {
        entries_[line.root["id"].get<std::string>()] = {seq, sha256_hex(msgpack::encode(line.root))};
      }
      ++seq;
    });
  }

  void save_all() {
    const fs::path tmp = path_.string() + ".tmp";
    {
      JsonlWriter w(tmp, JsonlWriter::Mode::kTruncate, /*sync=*/true);
      for (const auto& [id, e] : entries_) w.write(json{{"seq", e.seq}, {"id", id}, {"sha256", e.sha256}});
    }
    fs::rename(tmp, path_);
  }

  fs::path path_;
  std::unordered_map<std::string, LedgerEntry> entries_;
  std::unique_ptr<JsonlWriter> writer_;
};

// Ids of the records the spool set aside (rejected by the receiver, or too
// large for it): spool/rejected.jsonl, one line each.
std::set<std::string> rejected_ids(const fs::path& spool) {
  std::set<std::string> ids;
  const fs::path path = spool / "rejected.jsonl";
  std::error_code ec;
  if (!fs::exists(path, ec)) return ids;
  JsonlReadOptions options;
  options.allow_torn_tail = true;
  options.max_line_bytes = 1 << 20;
  for_each_jsonl_line(
      path,
      [&](const Document& doc, size_t) {
        if (doc.root.is_object() && doc.root.contains("id") && doc.root["id"].is_string()) {
          ids.insert(doc.root["id"].get<std::string>());
        }
      },
      options);
  return ids;
}

rollout::SenderConfig sender_config(const SendArgs& a) {
  rollout::SenderConfig config;
  config.endpoint = a.to;
  config.worker_id = a.worker;
  config.spool_dir = a.spool;
  config.max_spool_bytes = static_cast<uint64_t>(a.max_spool_mb * 1024 * 1024);
  config.heartbeat_interval = std::chrono::milliseconds(a.heartbeat_ms);
  config.heartbeat_timeout = std::chrono::milliseconds(a.heartbeat_timeout_ms);
  config.fsync = a.fsync;
  config.curve = rollout::curve_client_options(a.curve_server_key, a.curve_secret);
  return config;
}

// What spooling the input did, line by line.
struct SpoolCounts {
  uint64_t records = 0, written = 0, already = 0, repeated = 0;
  std::unordered_map<std::string, size_t> first_line;  // id -> its first line in this input
  std::vector<std::string> conflicts;
};

// Spools each trajectory of the input whose id the ledger does not hold yet;
// the others are counted, and an id sent before with other content is a
// conflict.
SpoolCounts spool_input(const SendArgs& a, rollout::TrajectorySender& sender, SendLedger& ledger) {
  SpoolCounts c;
  for_each_jsonl_line(a.input, [&](const Document& doc, size_t line) {
    ++c.records;
    if (!doc.root.is_object() || !doc.root.contains("id") || !doc.root["id"].is_string()) {
      throw InputError(a.input + ":" + std::to_string(line) + ": a trajectory must be an object with a string \"id\"");
    }
    const std::string id = doc.root["id"].get<std::string>();
    const std::string payload = msgpack::encode(doc.root);
    const std::string sha = sha256_hex(payload);
    const auto [first, inserted] = c.first_line.emplace(id, line);
    if (const LedgerEntry* e = ledger.find(id)) {
      if (e->sha256 != sha) {
        c.conflicts.push_back(a.input + ":" + std::to_string(line) + ": trajectory id \"" + id +
                              "\" was already sent (seq " + std::to_string(e->seq) +
                              ") with other content; not sent again (give it a new id)");
      } else if (inserted) {
        ++c.already;
      } else {
        ++c.repeated;
      }
      return;
    }
    // Written before the spool's record, with the seq the spool assigns next
    // (this process holds the spool's lock: nobody else writes to it).
    const uint64_t expected = sender.stats().next_seq;
    ledger.add(id, {expected, sha});
    if (const uint64_t seq = sender.write_encoded(id, payload); seq != expected) {
      throw SystemError("send: the spool gave trajectory \"" + id + "\" seq " + std::to_string(seq) + ", not " +
                        std::to_string(expected) + "; is another process writing to " + a.spool + "?");
    }
    ++c.written;
  });
  return c;
}

nlohmann::ordered_json send_summary(const SpoolCounts& c, const rollout::SenderStats& s, size_t rejected,
                                    bool complete) {
  return {{"records", c.records},
          {"written", c.written},
          {"already_sent", c.already},
          {"duplicate_ids", c.repeated},
          {"id_conflicts", c.conflicts.size()},
          {"acked", s.acked},
          {"unacked", s.unacked},
          {"rejected", rejected},
          {"rejected_total", s.rejected},
          {"resent", s.resent},
          {"reconnects", s.reconnects},
          {"ack_latency_p50_ms", s.ack_latency_p50_ms},
          {"ack_latency_p99_ms", s.ack_latency_p99_ms},
          {"delivery_latency_p99_ms", s.delivery_latency_p99_ms},
          {"complete", complete}};
}

// On stderr: the id conflicts, the set-aside trajectories, what is still
// waiting for an ack.
void report_send_problems(const SendArgs& a, const SpoolCounts& c, const std::vector<std::string>& rejected,
                          bool flushed, const rollout::SenderStats& s) {
  for (const std::string& conflict : c.conflicts) std::cerr << "kforge send: " << conflict << std::endl;
  if (!rejected.empty()) {
    std::cerr << "kforge send: " << rejected.size() << " trajectories of " << a.input
              << " were set aside, never delivered (the receiver rejected them or they exceed its message size; "
                 "see "
              << (fs::path(a.spool) / "rejected.jsonl").string() << ", e.g. id \"" << rejected.front() << "\")"
              << std::endl;
  }
  if (!flushed) {
    std::cerr << "kforge send: " << s.unacked << " trajectories not acknowledged within " << a.flush_timeout_s
              << " s; they stay in " << a.spool << " (run the same command again to resume)" << std::endl;
  }
}

int run_send(const SendArgs& a) {
  if (!fs::is_regular_file(a.input)) throw InputError("send: " + a.input + " is not a file");
  rollout::TrajectorySender sender(sender_config(a));
  SendLedger ledger(a.spool, sender.stats().next_seq, a.fsync);
  const SpoolCounts counts = spool_input(a, sender, ledger);
  const bool flushed = sender.flush(std::chrono::milliseconds(static_cast<int64_t>(a.flush_timeout_s * 1000)));
  const rollout::SenderStats s = sender.stats();
  // Set-aside records of this input's trajectories: never delivered.
  std::vector<std::string> rejected;
  for (const std::string& id : rejected_ids(a.spool)) {
    if (counts.first_line.count(id) > 0) rejected.push_back(id);
  }
  const bool complete = flushed && rejected.empty() && counts.conflicts.empty();
  std::cout << send_summary(counts, s, rejected.size(), complete).dump() << std::endl;
  report_send_problems(a, counts, rejected, flushed, s);
  if (!counts.conflicts.empty()) return kExitBadInput;
  return complete ? kExitOk : kExitIncomplete;
}

}  // namespace

void add_send_command(CLI::App& app, CommandFn* selected) {
  auto a = std::make_shared<SendArgs>();
  CLI::App* cmd = app.add_subcommand(
      "send",
      "Stream trajectories (a JSONL file, one trajectory object with an \"id\" per line) to a trainer's receiver "
      "(kforge receive, kforge.TrajectoryStream), exactly once: spooled to disk, resent until acknowledged. "
      "Run it again after a kill to resume: the spool remembers trajectory ids (send-ledger.jsonl), so a rerun "
      "through any path to the file, and a repeated id inside it, sends nothing twice. Exit 0 when every "
      "trajectory of the input was acknowledged; 1 when --flush-timeout passed first (the rest stays in the "
      "spool) or the receiver rejected some (set aside in the spool's rejected.jsonl); 2 for bad input, "
      "including an id repeated with other content. trainer_bridge/STREAM.md");
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
