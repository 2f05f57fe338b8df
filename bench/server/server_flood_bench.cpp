// `kforge serve` under a flood of malformed requests (docs/threat-model.md#outside-input; target: the
// honest clients' p99 step latency within 2x of the same run without flood).
//
// A real `kforge serve` process (CPU backend, bench/server/flood.yaml) serves
// 8 honest clients that step in a loop (compile of a correct source: a cache
// hit after the first, so the latency is the server's own responsiveness)
// and, in the second phase, 8 hostile clients that send as fast as the server
// answers: garbage bytes, MessagePack nested 100k deep, steps whose tool-call
// arguments nest 200k deep, resets with 20,000 shape variants or a 1 MiB
// unknown task id (closest_match), unknown methods with 1 MiB names, and
// maps with a repeated key. Baseline: the same honest clients, same run,
// without the flood.
//
//   bench_server_flood [--seconds S] [--kforge PATH] [--flood all|resets|K]
//
// --kforge runs another build's binary (e.g. main's, for a before/after);
// --flood resets sends only the resets, which a server without the hostile-input
// fixes survives (its socket thread parsed them and suggested task ids);
// --flood K sends only hostile message K of the list below (0-based), to find
// which kind costs the honest clients.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "ipc/child_process.h"
#include "kforge/core/rpc.h"

namespace {

namespace fs = std::filesystem;
using kforge::json;
namespace rpc = kforge::rpc;
using Clock = std::chrono::steady_clock;

const fs::path kSource = KFORGE_SOURCE_DIR;
const fs::path kBinary = KFORGE_BINARY_DIR;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

enum Phase : int { kWarmup = 0, kQuiet = 1, kFlood = 2, kStop = 3 };
std::atomic<int> g_phase{kWarmup};
std::atomic<int> g_warmed{0};  // honest clients whose first step (the compile) is done

struct Samples {
  std::mutex mu;
  std::vector<double> quiet_ms, flood_ms;
  void add(int phase, double ms) {
    std::lock_guard<std::mutex> lock(mu);
    if (phase == kQuiet) quiet_ms.push_back(ms);
    if (phase == kFlood) flood_ms.push_back(ms);
  }
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

class Client {
 public:
  Client(zmq::context_t& ctx, const std::string& endpoint) : socket_(ctx, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.connect(endpoint);
  }
  uint64_t send(const std::string& method, const json& params) {
    const uint64_t id = next_id_++;
    send_raw(rpc::encode_request(id, method, params));
    return id;
  }
  void send_raw(const std::string& bytes) { (void)socket_.send(zmq::buffer(bytes), zmq::send_flags::none); }
  // The reply to `id` (others are dropped); throws after `limit`.
  rpc::Reply wait(uint64_t id, std::chrono::milliseconds limit = std::chrono::seconds(120)) {
    const auto until = Clock::now() + limit;
    for (;;) {
      rpc::Reply r;
      if (!read(std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()), &r)) {
        throw std::runtime_error("no reply within the limit");
      }
      if (r.id == json(id)) return r;
    }
  }
  json ok(const std::string& method, const json& params) {
    rpc::Reply r = wait(send(method, params));
    if (!r.ok) throw std::runtime_error(method + ": " + r.code + ": " + r.message);
    return r.result;
  }
  bool read(std::chrono::milliseconds timeout, rpc::Reply* out) {
    zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 1, std::max(timeout, std::chrono::milliseconds(0)));
    if (!(items[0].revents & ZMQ_POLLIN)) return false;
    zmq::message_t m;
    (void)socket_.recv(m, zmq::recv_flags::none);
    *out = rpc::decode_reply(m.to_string_view());
    return true;
  }

 private:
  zmq::socket_t socket_;
  uint64_t next_id_ = 1;
};

json compile_call(const std::string& source) {
  return {{"name", "compile"}, {"arguments", json{{"source", source}}.dump()}};
}

void honest_client(zmq::context_t& ctx, const std::string& endpoint, const json& task, const std::string& source,
                   Samples* samples) {
  Client c(ctx, endpoint);
  const int env_id = c.ok("make", json::object())["env_id"];
  c.ok("reset", {{"env_id", env_id}, {"task", task}});
  bool warmed = false;
  while (g_phase.load() != kStop) {
    const int phase = g_phase.load();
    const auto t0 = Clock::now();
    const rpc::Reply r = c.wait(c.send("step", {{"env_id", env_id}, {"tool_call", compile_call(source)}}));
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (!r.ok) throw std::runtime_error("honest step failed: " + r.code + ": " + r.message);
    if (phase == kWarmup && !warmed) {
      warmed = true;
      ++g_warmed;
    }
    if (phase == g_phase.load()) samples->add(phase, ms);
    if (r.result.value("terminated", false) || r.result.value("truncated", false)) {
      c.ok("reset", {{"env_id", env_id}, {"task", task}});
    }
  }
}

// The hostile messages, one list per client; sent round robin.
std::vector<std::string> all_hostile_messages(const json& task, bool resets_only, int env_id) {
  std::vector<std::string> out;
  json variants = task;
  variants["shape_variants"] = json::array();
  for (int i = 0; i < 20000; ++i) variants["shape_variants"].push_back({{task["inputs"][0]["name"], {64, 32}}});
  out.push_back(rpc::encode_request(1, "reset", {{"env_id", env_id}, {"task", variants}}));
  out.push_back(rpc::encode_request(2, "reset", {{"env_id", env_id}, {"task_id", std::string(1 << 20, 't')}}));
  if (resets_only) return out;
  std::mt19937 rng(static_cast<unsigned>(env_id));
  std::string garbage(1024, '\0');
  for (char& ch : garbage) ch = static_cast<char>(rng());
  out.push_back(garbage);
  out.push_back(std::string(100000, '\x91') + '\x01');
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  out.push_back(
      rpc::encode_request(3, "step", {{"env_id", env_id}, {"tool_call", {{"name", "compile"}, {"arguments", deep}}}}));
  out.push_back(rpc::encode_request(4, std::string(1 << 20, 'm'), json::object()));
  out.push_back(std::string("\x84\xa1v\x01\xa2id\x05\xa6method\xa5hello\xa6method\xa4make", 33));
  out.push_back(rpc::encode_request(5, "hello", {{"clinet", "x"}, {"bogus", std::string(1000, 'b')}}));
  return out;
}

// -1: all kinds; otherwise only kind `only`.
int g_only = -1;

std::vector<std::string> hostile_messages(const json& task, bool resets_only, int env_id) {
  std::vector<std::string> all = all_hostile_messages(task, resets_only, env_id);
  if (g_only < 0) return all;
  return {all.at(static_cast<size_t>(g_only) % all.size())};
}

void hostile_client(zmq::context_t& ctx, const std::string& endpoint, const json& task, bool resets_only,
                    std::atomic<uint64_t>* sent) {
  Client c(ctx, endpoint);
  const int env_id = c.ok("make", json::object())["env_id"];
  c.ok("reset", {{"env_id", env_id}, {"task", task}});
  const std::vector<std::string> messages = hostile_messages(task, resets_only, env_id);
  while (g_phase.load() != kFlood) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  size_t next = 0;
  int inflight = 0;
  rpc::Reply r;
  while (g_phase.load() == kFlood) {
    // As fast as the server answers: up to 8 unanswered, then wait for one.
    while (inflight >= 8 && g_phase.load() == kFlood) {
      if (c.read(std::chrono::milliseconds(200), &r)) --inflight;
    }
    c.send_raw(messages[next++ % messages.size()]);
    ++inflight;
    ++*sent;
    while (c.read(std::chrono::milliseconds(0), &r)) --inflight;
  }
}

struct Server {
  kforge::ipc::ChildProcess process;
  std::string endpoint;
};

Server start_server(const fs::path& kforge_bin, int envs) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  const std::string cache = (kBinary / "bench/server/compile-cache").string();
  ::setenv("KFORGE_CACHE_DIR", cache.c_str(), 1);
  kforge::ipc::SpawnSpec spec;
  spec.executable = kforge_bin;
  spec.args = {
      "serve",  "--config",          (kSource / "bench/server/flood.yaml").string(), "--bind", "tcp://127.0.0.1:0",
      "--envs", std::to_string(envs)};
  spec.fds = {{0, devnull}, {1, out[1]}, {2, devnull}};
  Server s;
  s.process = kforge::ipc::ChildProcess::spawn(spec);
  ::close(out[1]);
  ::close(devnull);
  std::string line;
  char ch = 0;
  while (::read(out[0], &ch, 1) == 1 && ch != '\n') line += ch;
  ::close(out[0]);
  if (line.empty()) throw std::runtime_error(kforge_bin.string() + " serve did not report ready");
  s.endpoint = json::parse(line).at("endpoint").get<std::string>();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 10;
  fs::path kforge_bin = kBinary / "cli/kforge";
  bool resets_only = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    if (key == "--seconds") seconds = std::atof(argv[i + 1]);
    if (key == "--kforge") kforge_bin = argv[i + 1];
    if (key == "--flood") {
      const std::string v = argv[i + 1];
      resets_only = v == "resets";
      if (v != "resets" && v != "all") g_only = std::atoi(v.c_str());
    }
  }
  constexpr int kHonest = 8;
  constexpr int kHostile = 8;
  Server server = start_server(kforge_bin, kHonest + kHostile);
  const json task = json::parse(read_file(kSource / "tests/gym/data/scale_bias_relu.json"));
  const std::string source = read_file(kSource / "tests/gym/data/correct.cpp");

  zmq::context_t ctx(2);
  Samples samples;
  std::atomic<uint64_t> sent{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kHonest; ++i) {
    threads.emplace_back([&] { honest_client(ctx, server.endpoint, task, source, &samples); });
  }
  for (int i = 0; i < kHostile; ++i) {
    threads.emplace_back([&] { hostile_client(ctx, server.endpoint, task, resets_only, &sent); });
  }
  // Warm-up: every honest client's first step (the compile that fills the
  // cache), then the two phases.
  const auto warm_until = Clock::now() + std::chrono::seconds(300);
  while (g_warmed.load() < kHonest && Clock::now() < warm_until)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  g_phase = kQuiet;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  g_phase = kFlood;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  g_phase = kStop;
  for (auto& t : threads) t.join();
  const bool alive = server.process.running() && !server.process.poll_exit();
  ::kill(server.process.pid(), SIGTERM);
  server.process.wait_for(30000);

  const double q50 = percentile(samples.quiet_ms, 0.5), q99 = percentile(samples.quiet_ms, 0.99);
  const double f50 = percentile(samples.flood_ms, 0.5), f99 = percentile(samples.flood_ms, 0.99);
  std::printf("bench_server_flood: %s, %d honest + %d hostile clients, %.0f s per phase, flood: %s\n",
              kforge_bin.c_str(), kHonest, kHostile, seconds,
              g_only >= 0   ? ("kind " + std::to_string(g_only)).c_str()
              : resets_only ? "resets"
                            : "all");
  std::printf("  without flood: %zu honest steps, p50 %.2f ms, p99 %.2f ms\n", samples.quiet_ms.size(), q50, q99);
  std::printf("  with flood:    %zu honest steps, p50 %.2f ms, p99 %.2f ms; %llu hostile messages (%.0f/s)\n",
              samples.flood_ms.size(), f50, f99, static_cast<unsigned long long>(sent.load()),
              static_cast<double>(sent.load()) / seconds);
  std::printf("  ratio flood/quiet: p50 %.2fx, p99 %.2fx (target p99 <= 2x); server %s\n", q50 > 0 ? f50 / q50 : 0.0,
              q99 > 0 ? f99 / q99 : 0.0, alive ? "alive" : "DIED");
  return alive ? 0 : 1;
}
