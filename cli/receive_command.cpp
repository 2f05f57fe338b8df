// kforge receive: the trainer's end of the trajectory stream for people who
// only want files. Every trajectory is appended to --out as one JSON line and
// acknowledged once written, exactly once across kills of either side.
//
// Exactly once into the file, per batch: (1) the checkpoint in the state
// directory records the keys of the batch about to be written (the file's
// size before it is already there); (2) the lines are written (one write(2);
// with --fsync, fdatasync); (3) the batch is acknowledged; (4) the
// checkpoint records the new size and no pending keys. Killed anywhere in
// between, the next start finds the lines past the recorded size, which are
// the first lines of the pending batch in order: their keys are acknowledged
// as stored (TrajectoryReceiver::ack_stored), so their resends are
// acknowledged, not written again; the rest of the batch is resent and
// written. A torn last line is cut.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <iostream>
#include <memory>

#include "commands.h"
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

void write_all(int fd, const std::string& text, const std::string& path) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw SystemError("receive: cannot write " + path + ": " + std::strerror(errno));
    done += static_cast<size_t>(w);
  }
}

struct Checkpoint {
  std::string out;
  uint64_t committed_bytes = 0;               // the file's size after the last acknowledged batch
  uint64_t records = 0;                       // lines up to committed_bytes
  std::vector<rollout::DeliveryKey> writing;  // keys of the batch being written, in order
};

Checkpoint load_checkpoint(const fs::path& file, const std::string& out) {
  Checkpoint c;
  c.out = out;
  std::error_code ec;
  if (!fs::exists(file, ec)) return c;
  const Document doc = Document::from_file(file);
  ObjectReader r = doc.root_object();
  const std::string recorded = r.required("out").as_string();
  c.committed_bytes = static_cast<uint64_t>(r.required("committed_bytes").as_int());
  c.records = static_cast<uint64_t>(r.required("records").as_int());
  for (const Field& k : r.required("writing").as_array()) {
    const json& v = k.value();
    if (!v.is_array() || v.size() != 2 || !v[0].is_string() || !v[1].is_number_unsigned()) k.fail("[worker, seq]");
    c.writing.push_back({v[0].get<std::string>(), v[1].get<uint64_t>()});
  }
  r.finish();
  if (recorded != out) {
    throw InputError("receive: the state " + file.parent_path().string() + " belongs to the output " + recorded +
                     ", not " + out + "; give each output its own --state");
  }
  return c;
}

void save_checkpoint(const fs::path& file, const Checkpoint& c, bool sync) {
  json writing = json::array();
  for (const auto& k : c.writing) writing.push_back({k.worker, k.seq});
  const json doc = {
      {"out", c.out}, {"committed_bytes", c.committed_bytes}, {"records", c.records}, {"writing", writing}};
  const std::string text = doc.dump() + "\n";
  const fs::path tmp = file.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw SystemError("receive: cannot write " + tmp.string() + ": " + std::strerror(errno));
  write_all(fd, text, tmp.string());
  if (sync) ::fsync(fd);
  ::close(fd);
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    throw SystemError("receive: cannot replace " + file.string() + ": " + std::strerror(errno));
  }
}

struct Tail {
  uint64_t lines = 0;  // whole lines past the checkpoint
  uint64_t size = 0;   // the file's size once a torn last line is cut
};

Tail recover_tail(int fd, const std::string& path, uint64_t from) {
  const off_t size = ::lseek(fd, 0, SEEK_END);
  if (size < 0) throw SystemError("receive: cannot read " + path);
  if (static_cast<uint64_t>(size) < from) {
    throw InputError("receive: " + path + " is shorter (" + std::to_string(size) + " bytes) than the " +
                     std::to_string(from) +
                     " bytes this receiver wrote to it: it was truncated or replaced. Use a new --out and --state");
  }
  std::string tail(static_cast<size_t>(size) - from, '\0');
  size_t got = 0;
  while (got < tail.size()) {
    const ssize_t r = ::pread(fd, tail.data() + got, tail.size() - got, static_cast<off_t>(from + got));
    if (r <= 0) throw SystemError("receive: cannot read " + path);
    got += static_cast<size_t>(r);
  }
  const size_t last_newline = tail.rfind('\n');
  const size_t whole = last_newline == std::string::npos ? 0 : last_newline + 1;
  if (whole < tail.size()) {
    if (::ftruncate(fd, static_cast<off_t>(from + whole)) != 0) throw SystemError("receive: cannot truncate " + path);
    std::cerr << "kforge receive: dropped an incomplete last line of " << path << std::endl;
  }
  return {static_cast<uint64_t>(std::count(tail.begin(), tail.begin() + static_cast<std::ptrdiff_t>(whole), '\n')),
          from + whole};
}

int run_receive(const ReceiveArgs& a) {
  const std::string out = fs::absolute(a.out).lexically_normal().string();
  const fs::path state_dir = a.state.empty() ? fs::path(out + ".state") : fs::path(a.state);
  std::error_code ec;
  fs::create_directories(state_dir, ec);
  if (ec) throw InputError("receive: cannot create the state directory " + state_dir.string() + ": " + ec.message());
  if (fs::path(out).has_parent_path()) fs::create_directories(fs::path(out).parent_path(), ec);
  const fs::path checkpoint_file = state_dir / "receive-out.json";
  Checkpoint cp = load_checkpoint(checkpoint_file, out);

  const int fd = ::open(out.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw InputError("receive: cannot open " + out + ": " + std::strerror(errno));
  const Tail tail = recover_tail(fd, out, cp.committed_bytes);
  if (tail.lines > cp.writing.size()) {
    throw InputError("receive: " + out + " has " + std::to_string(tail.lines) +
                     " lines past what this receiver checkpointed; something else wrote to it. Use a new --out and "
                     "--state");
  }

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
  const std::vector<rollout::DeliveryKey> recovered(cp.writing.begin(),
                                                    cp.writing.begin() + static_cast<std::ptrdiff_t>(tail.lines));
  receiver.ack_stored(recovered);
  cp.committed_bytes = tail.size;
  cp.records += tail.lines;
  cp.writing.clear();
  save_checkpoint(checkpoint_file, cp, a.fsync);

  std::signal(SIGINT, on_receive_stop_signal);
  std::signal(SIGTERM, on_receive_stop_signal);
  const nlohmann::ordered_json ready = {
      {"endpoint", receiver.endpoint()}, {"pid", static_cast<int>(::getpid())}, {"out", out}, {"records", cp.records}};
  std::cout << ready.dump() << std::endl;

  uint64_t written = 0;
  auto last_activity = Clock::now();
  while (!g_stop && !(a.count > 0 && cp.records >= a.count)) {
    std::vector<rollout::Delivery> batch = receiver.next_batch(256, std::chrono::milliseconds(50));
    if (batch.empty()) {
      if (a.idle_exit_s > 0 && std::chrono::duration<double>(Clock::now() - last_activity).count() > a.idle_exit_s) {
        break;
      }
      continue;
    }
    last_activity = Clock::now();
    std::string text;
    std::vector<rollout::DeliveryKey> keys;
    for (const auto& d : batch) {
      text += d.trajectory().dump(-1, ' ', false, json::error_handler_t::replace);
      text += '\n';
      keys.push_back(d.key());
    }
    cp.writing = keys;
    save_checkpoint(checkpoint_file, cp, a.fsync);  // (1) what is about to be written
    write_all(fd, text, out);                       // (2)
    if (a.fsync && ::fdatasync(fd) != 0) throw SystemError("receive: fdatasync of " + out + " failed");
    receiver.ack(keys);  // (3)
    cp.committed_bytes += text.size();
    cp.records += batch.size();
    cp.writing.clear();
    save_checkpoint(checkpoint_file, cp, a.fsync);  // (4)
    written += batch.size();
  }
  ::close(fd);
  const rollout::ReceiverStats s = receiver.stats();
  const nlohmann::ordered_json summary = {
      {"records", cp.records},      {"written", written},     {"recovered", tail.lines}, {"received", s.received},
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
