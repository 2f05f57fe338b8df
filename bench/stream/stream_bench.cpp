// The trajectory stream's throughput, ack latency and fault tolerance
// (trainer_bridge/STREAM.md#using-it, where its figures are).
//
// Google Benchmark measures the pieces on one thread (codec, serialization,
// spool). The summary then measures the system, everything real on loopback:
//   baseline   raw ZeroMQ PUSH/PULL of the same ~10 KB traj frames from 8
//              threads to one receiver: no spool, no acks, no credit
//   C++        8 TrajectorySenders (spool on disk, credit, acks) writing
//              Trajectory values -> one TrajectoryReceiver whose consumer
//              acks every batch; trajectories/s, MB/s, ratio to baseline,
//              send-to-ack latency
//   Python     the same senders -> kforge.TrajectoryStream in a Python
//              process (bench/stream/python_receiver.py)
//   latency    the C++ pair at a moderate, paced load: write-to-ack and
//              send-to-ack p50/p99 (target p99 < 10 ms)
//   faults     bench/stream/stream_fault_run.py: SIGKILLs of senders and
//              receivers over --fault_runs runs (target 0 lost, 0 duplicated)
//
// Flags (besides Google Benchmark's): --per_worker=N trajectories per sender
// (default 4000), --fault_runs=N (default 10; 0 skips), --python_only,
// --no_python.
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "kforge/core/msgpack.h"
#include "kforge/core/process.h"
#include "kforge/core/remove_tree.h"
#include "kforge/core/trajectory.h"
#include "kforge/rollout/stream/stream_protocol.h"
#include "kforge/rollout/stream/trajectory_receiver.h"
#include "kforge/rollout/stream/trajectory_sender.h"
#include "kforge/rollout/stream/trajectory_spool.h"

#ifndef KFORGE_PYTHON
#define KFORGE_PYTHON "/usr/bin/python3"
#endif

namespace {

namespace fs = std::filesystem;

using namespace kforge;
using namespace kforge::rollout;
using Clock = std::chrono::steady_clock;

// KFORGE_PYTHON as a path ("" when it is not found).
std::string python() { return kforge::find_on_path(KFORGE_PYTHON).string(); }

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The first line of `path` that is a JSON object with `key`, waiting for it
// while `child` runs (a minute at most); null when none came.
json first_json_line_with(const fs::path& path, const std::string& key,
                          const std::future<kforge::ProcessResult>& child) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    const bool finished = child.wait_for(std::chrono::milliseconds(0)) == std::future_status::ready;
    std::istringstream lines(read_text(path));
    for (std::string line; std::getline(lines, line);) {
      const json j = json::parse(line, nullptr, false);
      if (j.is_object() && j.contains(key)) return j;
    }
    if (finished || std::chrono::steady_clock::now() > until) return nullptr;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

constexpr int kWorkers = 8;
constexpr size_t kTrajectoryBytes = 10 * 1024;
int g_per_worker = 4000;
int g_fault_runs = 10;
bool g_python = true;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// CPU seconds (user + system) of every thread of this process so far.
double process_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// A ~10 KB trajectory: one turn whose assistant message carries the bulk.
Trajectory make_trajectory(const std::string& id) {
  Trajectory t;
  t.id = id;
  t.group_id = "g";
  t.task_id = "bench/task";
  Turn turn;
  turn.messages = json::array({{{"role", "user"}, {"content", "make it fast"}},
                               {{"role", "assistant"}, {"content", std::string(kTrajectoryBytes, 'k')}}});
  turn.observation.text = "correct, 1.9x";
  turn.reward = 1.0;
  t.turns.push_back(turn);
  // Trim the content so that the encoded trajectory is about 10 KB.
  const size_t size = msgpack::encode(to_json(t)).size();
  if (size > kTrajectoryBytes) {
    t.turns[0].messages[1]["content"] = std::string(2 * kTrajectoryBytes - size, 'k');
  }
  return t;
}

fs::path scratch(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("kforge-bench-stream-" + std::to_string(::getpid()) + "-" + name);
  kforge::remove_tree(p);
  fs::create_directories(p);
  return p;
}

// ---- micro benchmarks ------------------------------------------------------

void BM_TrajectoryToMsgpack(benchmark::State& state) {
  const Trajectory t = make_trajectory("t");
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string b = msgpack::encode(to_json(t));
    bytes += b.size();
    benchmark::DoNotOptimize(b.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_TrajectoryToMsgpack);

void BM_EncodeTrajFrame(benchmark::State& state) {
  const std::string data = msgpack::encode(to_json(make_trajectory("t")));
  for (auto _ : state) benchmark::DoNotOptimize(stream::encode_traj(12345, "t", data));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * data.size()));
}
BENCHMARK(BM_EncodeTrajFrame);

void BM_DecodeTrajFrame(benchmark::State& state) {
  const std::string frame = stream::encode_traj(12345, "t", msgpack::encode(to_json(make_trajectory("t"))));
  for (auto _ : state) benchmark::DoNotOptimize(stream::decode(frame));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * frame.size()));
}
BENCHMARK(BM_DecodeTrajFrame);

void BM_SpoolAppendAndAcknowledge(benchmark::State& state) {
  const fs::path dir = scratch("spool-micro");
  const std::string data = msgpack::encode(to_json(make_trajectory("t")));
  {
    SpoolOptions o;
    o.dir = dir;
    o.worker_id = "bench";
    TrajectorySpool spool(o);
    for (auto _ : state) spool.acknowledge({spool.append("t", data)});
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * data.size()));
  kforge::remove_tree(dir);
}
BENCHMARK(BM_SpoolAppendAndAcknowledge);

// ---- the system ------------------------------------------------------------

struct Rate {
  uint64_t trajectories = 0;
  uint64_t bytes = 0;
  double seconds = 0;
  double cpu_seconds = 0;  // of this process, all threads
  double cpu_us_per_trajectory() const {
    return trajectories ? cpu_seconds * 1e6 / static_cast<double>(trajectories) : 0.0;
  }
  double per_s() const { return seconds > 0 ? static_cast<double>(trajectories) / seconds : 0.0; }
  double mb_per_s() const { return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e6 : 0.0; }
};

// 8 PUSH threads -> 1 PULL of the same traj frames, nothing else.
Rate raw_push_pull(int per_worker, const std::string& frame) {
  zmq::context_t ctx(2);
  zmq::socket_t pull(ctx, zmq::socket_type::pull);
  pull.bind("tcp://127.0.0.1:*");
  const std::string endpoint = pull.get(zmq::sockopt::last_endpoint);
  const uint64_t total = static_cast<uint64_t>(per_worker) * kWorkers;
  const double cpu0 = process_cpu_seconds();
  const auto t0 = Clock::now();
  std::vector<std::thread> pushers;
  for (int w = 0; w < kWorkers; ++w) {
    pushers.emplace_back([&] {
      zmq::socket_t push(ctx, zmq::socket_type::push);
      push.set(zmq::sockopt::linger, -1);
      push.connect(endpoint);
      for (int i = 0; i < per_worker; ++i) push.send(zmq::buffer(frame), zmq::send_flags::none);
    });
  }
  uint64_t got = 0, bytes = 0;
  while (got < total) {
    zmq::message_t m;
    (void)pull.recv(m);
    bytes += m.size();
    ++got;
  }
  const double s = seconds_since(t0);
  for (auto& t : pushers) t.join();
  return {got, bytes, s, process_cpu_seconds() - cpu0};
}

SenderConfig sender_config(const std::string& endpoint, int w, const fs::path& dir) {
  SenderConfig c;
  c.endpoint = endpoint;
  c.worker_id = "bench-" + std::to_string(w);
  c.spool_dir = dir / ("spool-" + std::to_string(w));
  c.log = [](const std::string&) {};
  return c;
}

struct Latency {
  double p50 = 0, p99 = 0, delivery_p50 = 0, delivery_p99 = 0;
};

// How the writers hand trajectories to their senders: as Trajectory values
// (TrajectorySink::write: serialization included, as in a rollout worker),
// or already encoded (write_encoded: the same bytes the baseline sends, so
// that the comparison is the stream's own cost).
enum class Input { kTrajectory, kEncoded };

// Writes per_worker trajectories from each of 8 senders to `endpoint`, paced
// at `rate_per_worker` per second if > 0; returns when every sender's spool
// is acknowledged.
Rate run_senders(const std::string& endpoint, int per_worker, const fs::path& dir, double rate_per_worker,
                 Latency* latency, Input input = Input::kTrajectory) {
  std::vector<std::unique_ptr<TrajectorySender>> senders;
  for (int w = 0; w < kWorkers; ++w)
    senders.push_back(std::make_unique<TrajectorySender>(sender_config(endpoint, w, dir)));
  const Trajectory base = make_trajectory("x");
  const std::string encoded = msgpack::encode(to_json(base));
  const uint64_t traj_bytes = encoded.size();
  const auto t0 = Clock::now();
  std::vector<std::thread> writers;
  for (int w = 0; w < kWorkers; ++w) {
    writers.emplace_back([&, w] {
      Trajectory t = base;
      const auto start = Clock::now();
      for (int i = 0; i < per_worker; ++i) {
        if (rate_per_worker > 0) {
          std::this_thread::sleep_until(
              start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(i / rate_per_worker)));
        }
        t.id = "w" + std::to_string(w) + "-" + std::to_string(i);
        if (input == Input::kTrajectory) {
          senders[static_cast<size_t>(w)]->write(t);
        } else {
          senders[static_cast<size_t>(w)]->write_encoded(t.id, encoded);
        }
      }
    });
  }
  for (auto& t : writers) t.join();
  bool all = true;
  for (auto& s : senders) all = s->flush(std::chrono::minutes(5)) && all;
  const double seconds = seconds_since(t0);
  if (!all) std::printf("  WARNING: not every trajectory was acknowledged\n");
  if (latency) {
    std::vector<double> p50, p99, d50, d99;
    for (auto& s : senders) {
      const SenderStats st = s->stats();
      p50.push_back(st.ack_latency_p50_ms);
      p99.push_back(st.ack_latency_p99_ms);
      d50.push_back(st.delivery_latency_p50_ms);
      d99.push_back(st.delivery_latency_p99_ms);
    }
    std::sort(p50.begin(), p50.end());
    std::sort(d50.begin(), d50.end());
    latency->p50 = p50[p50.size() / 2];
    latency->delivery_p50 = d50[d50.size() / 2];
    latency->p99 = *std::max_element(p99.begin(), p99.end());
    latency->delivery_p99 = *std::max_element(d99.begin(), d99.end());
  }
  const uint64_t n = static_cast<uint64_t>(per_worker) * kWorkers;
  return {n, n * traj_bytes, seconds};
}

// The latency baseline: the same frames, paced the same, each answered at
// once with a small frame by a bare ROUTER (no spool, no state, no trainer):
// what this machine's ZeroMQ round trip costs under the same load.
Latency raw_round_trip(int per_worker, double rate_per_worker, const std::string& frame) {
  zmq::context_t ctx(2);
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.bind("tcp://127.0.0.1:*");
  const std::string endpoint = router.get(zmq::sockopt::last_endpoint);
  std::atomic<bool> stop{false};
  std::thread echo([&] {
    const std::string ack = stream::encode(stream::Ack{{{1, 1}}});
    while (!stop) {
      zmq::pollitem_t item = {router.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(50)) <= 0) continue;
      zmq::message_t rid, body;
      (void)router.recv(rid);
      (void)router.recv(body);
      router.send(rid, zmq::send_flags::sndmore);
      router.send(zmq::buffer(ack), zmq::send_flags::none);
    }
  });
  std::vector<std::vector<double>> samples(kWorkers);
  std::vector<std::thread> clients;
  for (int w = 0; w < kWorkers; ++w) {
    clients.emplace_back([&, w] {
      zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
      dealer.connect(endpoint);
      const auto start = Clock::now();
      for (int i = 0; i < per_worker; ++i) {
        std::this_thread::sleep_until(
            start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(i / rate_per_worker)));
        const auto t0 = Clock::now();
        dealer.send(zmq::buffer(frame), zmq::send_flags::none);
        zmq::message_t reply;
        (void)dealer.recv(reply);
        samples[static_cast<size_t>(w)].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
    });
  }
  for (auto& t : clients) t.join();
  stop = true;
  echo.join();
  std::vector<double> all;
  for (const auto& v : samples) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  Latency l;
  if (!all.empty()) {
    l.p50 = all[all.size() / 2];
    l.p99 = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  }
  return l;
}

// The C++ receiver with a trainer thread that acknowledges every batch.
Rate stream_cpp(int per_worker, double rate_per_worker, Latency* latency, Input input = Input::kTrajectory) {
  const fs::path dir = scratch(rate_per_worker > 0 ? "paced" : "cpp");
  ReceiverConfig rc;
  rc.bind = "tcp://127.0.0.1:0";
  rc.state_dir = dir / "receiver-state";
  rc.log = [](const std::string&) {};
  const double cpu0 = process_cpu_seconds();
  TrajectoryReceiver receiver(rc);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> received{0};
  std::thread trainer([&] {
    while (!stop) {
      auto batch = receiver.next_batch(512, std::chrono::milliseconds(10));
      std::vector<DeliveryKey> keys;
      keys.reserve(batch.size());
      for (const auto& d : batch) keys.push_back(d.key());
      if (!keys.empty()) receiver.ack(keys);
      received += batch.size();
    }
  });
  Rate r = run_senders(receiver.endpoint(), per_worker, dir, rate_per_worker, latency, input);
  stop = true;
  trainer.join();
  r.cpu_seconds = process_cpu_seconds() - cpu0;
  if (received != r.trajectories) {
    std::printf("  WARNING: the receiver delivered %llu, expected %llu\n",
                static_cast<unsigned long long>(received.load()), static_cast<unsigned long long>(r.trajectories));
  }
  kforge::remove_tree(dir);
  return r;
}

// The Python receiver in its own process; its own clock (first receipt to
// last ack) gives the rate.
Rate stream_python(int per_worker, double* python_seconds) {
  const fs::path dir = scratch("python");
  const uint64_t total = static_cast<uint64_t>(per_worker) * kWorkers;
  // The receiver runs while the senders do: run_process waits for it on a
  // thread of its own, its output going to a file we read as it grows.
  kforge::ProcessOptions options;
  options.timeout_s = 600;
  options.output_file = dir / "python_receiver.out";
  auto child = std::async(std::launch::async, [&] {
    return kforge::run_process(
        {python(), KFORGE_SOURCE_DIR "/bench/stream/python_receiver.py", "--count", std::to_string(total)}, options);
  });
  const json ready = first_json_line_with(options.output_file, "endpoint", child);
  Rate r;
  if (ready.is_object()) r = run_senders(ready.value("endpoint", ""), per_worker, dir, 0, nullptr);
  const kforge::ProcessResult done = child.get();
  json summary;
  std::istringstream lines(read_text(options.output_file));
  for (std::string line; std::getline(lines, line);) {
    const json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("seconds")) summary = j;
  }
  if (!done.ok() || !ready.is_object()) {
    std::printf("  the Python receiver failed (exit %d):\n%s\n", done.exit_code,
                read_text(options.output_file).c_str());
  }
  *python_seconds = summary.is_object() ? summary.value("seconds", 0.0) : 0.0;
  kforge::remove_tree(dir);
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

std::string load_average() {
  FILE* f = std::fopen("/proc/loadavg", "r");
  char buf[128] = {};
  if (f) {
    if (!std::fgets(buf, sizeof buf, f)) buf[0] = 0;
    std::fclose(f);
  }
  std::string s(buf);
  return s.substr(0, s.find(' '));
}

void print_summary() {
  const Trajectory t = make_trajectory("w0-0");
  const std::string frame = stream::encode_traj(1, t.id, msgpack::encode(to_json(t)));
  std::printf(
      "\ntrajectory stream, 8 workers -> 1 receiver on loopback, %zu-byte trajectories, %d per worker, %u CPUs, "
      "load average %s:\n",
      frame.size(), g_per_worker, std::thread::hardware_concurrency(), load_average().c_str());
  // Baseline and stream alternate, so that both see the same machine.
  constexpr int kRounds = 3;
  std::vector<double> base_rates, cpp_rates, enc_rates, base_mb, cpp_mb, enc_mb, p50s, p99s, d99s, base_cpu, cpp_cpu,
      enc_cpu;
  for (int round = 0; round < kRounds; ++round) {
    const Rate base = raw_push_pull(g_per_worker, frame);
    Latency full;
    const Rate cpp = stream_cpp(g_per_worker, 0, &full);
    const Rate enc = stream_cpp(g_per_worker, 0, nullptr, Input::kEncoded);
    base_rates.push_back(base.per_s());
    base_mb.push_back(base.mb_per_s());
    cpp_rates.push_back(cpp.per_s());
    cpp_mb.push_back(cpp.mb_per_s());
    enc_rates.push_back(enc.per_s());
    enc_mb.push_back(enc.mb_per_s());
    p50s.push_back(full.p50);
    p99s.push_back(full.p99);
    d99s.push_back(full.delivery_p99);
    base_cpu.push_back(base.cpu_us_per_trajectory());
    cpp_cpu.push_back(cpp.cpu_us_per_trajectory());
    enc_cpu.push_back(enc.cpu_us_per_trajectory());
    std::printf(
        "  round %d: baseline %.0f traj/s (%.1f us CPU each), stream %.0f traj/s (%.1f us), pre-encoded %.0f "
        "traj/s (%.1f us)\n",
        round + 1, base.per_s(), base.cpu_us_per_trajectory(), cpp.per_s(), cpp.cpu_us_per_trajectory(), enc.per_s(),
        enc.cpu_us_per_trajectory());
  }
  const double base_rate = median(base_rates), cpp_rate = median(cpp_rates), enc_rate = median(enc_rates);
  std::printf("  baseline: raw ZeroMQ PUSH/PULL, no acks             %9.0f traj/s  %7.1f MB/s  (median of %d)\n",
              base_rate, median(base_mb), kRounds);
  std::printf(
      "  stream -> C++ receiver, acked, Trajectory values  %9.0f traj/s  %7.1f MB/s  ratio to baseline %.3f   target "
      ">= 10000 traj/s  %s\n",
      cpp_rate, median(cpp_mb), base_rate > 0 ? cpp_rate / base_rate : 0.0, cpp_rate >= 10000 ? "OK" : "BELOW TARGET");
  std::printf(
      "  stream -> C++ receiver, acked, pre-encoded        %9.0f traj/s  %7.1f MB/s  ratio to baseline %.3f   target "
      ">= 10000 traj/s  %s\n",
      enc_rate, median(enc_mb), base_rate > 0 ? enc_rate / base_rate : 0.0, enc_rate >= 10000 ? "OK" : "BELOW TARGET");
  std::printf(
      "    at full load (queues full by design): send-to-ack p50 %.2f ms, p99 %.2f ms; write-to-ack p99 %.1f ms\n",
      median(p50s), median(p99s), median(d99s));
  // CPU time per trajectory does not depend on what else the machine runs:
  // it bounds what the cores could carry if they were the stream's alone.
  const double cores = std::thread::hardware_concurrency();
  std::printf(
      "    CPU per trajectory, all threads (writers, senders, receiver, trainer, ZeroMQ): %.1f us (pre-encoded %.1f "
      "us), baseline %.1f us; %u cores to themselves would carry about %.0f traj/s (pre-encoded %.0f)\n",
      median(cpp_cpu), median(enc_cpu), median(base_cpu), std::thread::hardware_concurrency(),
      median(cpp_cpu) > 0 ? cores * 1e6 / median(cpp_cpu) : 0.0,
      median(enc_cpu) > 0 ? cores * 1e6 / median(enc_cpu) : 0.0);
  if (g_python) {
    double py_seconds = 0;
    const Rate py = stream_python(g_per_worker, &py_seconds);
    const double py_rate = py_seconds > 0 ? static_cast<double>(py.trajectories) / py_seconds : 0.0;
    std::printf("  stream -> Python TrajectoryStream, acked   %9.0f traj/s  %7.1f MB/s  ratio to baseline %.3f\n",
                py_rate, py_seconds > 0 ? static_cast<double>(py.bytes) / py_seconds / 1e6 : 0.0,
                base_rate > 0 ? py_rate / base_rate : 0.0);
  }
  // Paced at about a quarter of what the C++ pair sustains: the latency a
  // trainer sees when the stream is not the bottleneck.
  const double paced_total = std::max(1000.0, std::min(cpp_rate / 4, 4000.0));
  Latency paced;
  const int paced_each = static_cast<int>(paced_total / kWorkers * 3);  // about 3 s
  const Latency raw = raw_round_trip(paced_each, paced_total / kWorkers, frame);
  stream_cpp(paced_each, paced_total / kWorkers, &paced);
  std::printf("  ack latency at %.0f traj/s, paced over 8 workers:\n", paced_total);
  std::printf("    baseline: raw ZeroMQ round trip of the same frames   p50 %6.2f ms   p99 %6.2f ms\n", raw.p50,
              raw.p99);
  std::printf(
      "    stream: write-to-ack (spool, receiver, trainer ack)   p50 %6.2f ms   p99 %6.2f ms   p99 ratio to baseline "
      "%.2f   target p99 < 10 ms  %s\n",
      paced.delivery_p50, paced.delivery_p99, raw.p99 > 0 ? paced.delivery_p99 / raw.p99 : 0.0,
      paced.delivery_p99 < 10.0 ? "OK" : "ABOVE TARGET");
  std::printf("    stream: send-to-ack                                   p50 %6.2f ms   p99 %6.2f ms\n", paced.p50,
              paced.p99);
  std::fflush(stdout);
  if (g_fault_runs > 0) {
    // Without pyzmq (the GPU machines) only the C++ receiver takes part.
    std::vector<std::string> argv = {python(),   KFORGE_SOURCE_DIR "/bench/stream/stream_fault_run.py",
                                     "--kforge", KFORGE_BINARY_DIR "/cli/kforge",
                                     "--runs",   std::to_string(g_fault_runs)};
    if (!g_python) argv.insert(argv.end(), {"--receiver", "cpp"});
    std::printf("\n");
    std::fflush(stdout);
    kforge::ProcessOptions options;
    options.timeout_s = std::numeric_limits<double>::infinity();  // as many runs as asked for
    const kforge::ProcessResult r = kforge::run_process(argv, options);
    std::fwrite(r.output.data(), 1, r.output.size(), stdout);
    if (!r.ok()) std::printf("  fault run exit status %d\n", r.exit_code);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest;
  bool python_only = false;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--per_worker=", 0) == 0) {
      g_per_worker = std::max(1, std::atoi(a.c_str() + 13));
    } else if (a.rfind("--fault_runs=", 0) == 0) {
      g_fault_runs = std::max(0, std::atoi(a.c_str() + 13));
    } else if (a == "--no_python") {
      g_python = false;
    } else if (a == "--python_only") {
      python_only = true;
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (g_python) {
    if (python().empty() || !kforge::run_process({python(), "-c", "import zmq, msgpack"}).ok()) {
      std::printf("%s has no pyzmq/msgpack: the Python receiver is left out\n", KFORGE_PYTHON);
      g_python = false;
    }
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 1;
  if (python_only) {
    double s = 0;
    const Rate py = stream_python(g_per_worker, &s);
    std::printf("python receiver: %.0f traj/s\n", s > 0 ? static_cast<double>(py.trajectories) / s : 0.0);
    return 0;
  }
  benchmark::RunSpecifiedBenchmarks();
  print_summary();
  benchmark::Shutdown();
  return 0;
}
