// Whole synthesis runs through the real `kforge` binary: determinism under a
// seed, validity of every task (task check, rendering under PyTorch against
// the C++ reference), resume after SIGKILL, serve --tasks, and the
// KernelBench importer.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <thread>

#include "kforge/core/jsonl.h"
#include "kforge/core/kernelbench_render.h"
#include "kforge/core/process.h"
#include "kforge/core/reference.h"
#include "kforge/core/remove_tree.h"
#include "kforge/core/task_set.h"
#include "kforge/data_synth/exporters.h"
#include "kforge/data_synth/graph_hash.h"

namespace kforge::synth {
namespace {
namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("kforge_synth_cli_" + std::to_string(::getpid()) + "_" + name);
  kforge::remove_tree(p);
  fs::create_directories(p);
  return p;
}

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The command lines are written as a shell reads them (option strings), so
// /bin/sh runs them, named as the program.
int run(const std::string& cmd, std::string* output = nullptr) {
  ProcessOptions options;
  options.timeout_s = std::numeric_limits<double>::infinity();  // ctest bounds it
  options.max_output_bytes = size_t{256} << 20;
  const ProcessResult r = run_process({"/bin/sh", "-c", cmd}, options);
  if (output) *output = r.output;
  return r.exit_code;
}

std::string synth_cmd(const fs::path& out, int n, int seed, int workers) {
  return std::string(KFORGE_BIN) + " synth --n " + std::to_string(n) + " --backend cpu --seed " + std::to_string(seed) +
         " --out " + out.string() + " --workers " + std::to_string(workers) +
         " --baselines none --compile-baselines off --quiet";
}

size_t lines_of(const fs::path& p) {
  const std::string s = read(p);
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

// One uninterrupted reference run shared by the tests below.
const fs::path& reference_run() {
  static const fs::path dir = [] {
    fs::path d = scratch("reference");
    std::string out;
    const int rc = run(synth_cmd(d, 8, 11, 2), &out);
    EXPECT_EQ(rc, 0) << out;
    return d;
  }();
  return dir;
}

TEST(SynthCliTest, SameSeedSameFileWhateverTheThreadCount) {
  const fs::path& a = reference_run();
  const fs::path b = scratch("one_worker");
  std::string out;
  ASSERT_EQ(run(synth_cmd(b, 8, 11, 1), &out), 0) << out;
  ASSERT_EQ(lines_of(a / "tasks.jsonl"), 8u);
  EXPECT_EQ(read(a / "tasks.jsonl"), read(b / "tasks.jsonl"));
  const fs::path c = scratch("other_seed");
  ASSERT_EQ(run(synth_cmd(c, 3, 12, 2), &out), 0) << out;
  EXPECT_NE(read(c / "tasks.jsonl").substr(0, 200), read(a / "tasks.jsonl").substr(0, 200));
  kforge::remove_tree(b);
  kforge::remove_tree(c);
}

// Another process spinning on every core (at least two) while it lives: the
// load under which a measured window verdict once gave slot 5 another task.
// Processes, not threads: the child of a threaded test binary may only do
// async-signal-safe work, and forking again and spinning is that.
class CpuHog {
 public:
  CpuHog() {
    const unsigned spinners = std::max(2u, std::thread::hardware_concurrency());
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      // Never outlive the test, even one that crashes before the destructor.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      for (unsigned i = 1; i < spinners; ++i) {
        if (::fork() == 0) {
          ::prctl(PR_SET_PDEATHSIG, SIGKILL);
          break;
        }
      }
      for (volatile uint64_t i = 0;; i = i + 1) {
      }
    }
    if (pid_ > 0) ::setpgid(pid_, pid_);  // as the child does: no race on who is first
  }
  ~CpuHog() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGKILL);  // the whole group: the leader and its spinners
    ::waitpid(pid_, nullptr, 0);
  }
  CpuHog(const CpuHog&) = delete;
  CpuHog& operator=(const CpuHog&) = delete;
  pid_t pid() const { return pid_; }

  // CPU clock ticks the leader has spun so far (/proc/PID/stat utime).
  long ticks() const {
    const std::string stat = read("/proc/" + std::to_string(pid_) + "/stat");
    const size_t name_end = stat.rfind(')');
    if (name_end == std::string::npos) return -1;
    std::istringstream rest(stat.substr(name_end + 1));  // from field 3 (state) on
    std::string field;
    for (int i = 3; i <= 14; ++i) rest >> field;  // field 14 is utime
    return std::atol(field.c_str());
  }

 private:
  pid_t pid_ = -1;
};

// Which task a slot gets must not depend on the machine's load or on the
// worker count: the cost model decides the window, the measured time only
// annotates (or rejects a gross miss, far from any edge). Two runs beside a
// hog on every core, one and two workers, give the unloaded run's file.
TEST(SynthCliTest, SameFileBesideACpuHog) {
  const fs::path& quiet = reference_run();
  const fs::path one = scratch("hog_one"), two = scratch("hog_two");
  std::string out;
  {
    CpuHog hog;
    ASSERT_GT(hog.pid(), 0);
    ASSERT_EQ(run(synth_cmd(one, 8, 11, 1), &out), 0) << out;
    ASSERT_EQ(run(synth_cmd(two, 8, 11, 2), &out), 0) << out;
    EXPECT_GT(hog.ticks(), 0) << "the hog never ran";
  }
  ASSERT_EQ(lines_of(one / "tasks.jsonl"), 8u);
  EXPECT_EQ(read(one / "tasks.jsonl"), read(two / "tasks.jsonl"));
  EXPECT_EQ(read(one / "tasks.jsonl"), read(quiet / "tasks.jsonl"));
  // The measurement is still recorded, as an annotation.
  for_each_jsonl_line(two / "slots.jsonl", [&](const Document& d, size_t) {
    EXPECT_GT(d.root["measured_ms"].get<double>(), 0.0) << d.root.dump();
    EXPECT_TRUE(d.root.contains("measured_in_window")) << d.root.dump();
  });
  kforge::remove_tree(one);
  kforge::remove_tree(two);
}

TEST(SynthCliTest, EveryTaskIsValidUniqueAndRecordsItsNearestKernelBenchProblem) {
  const fs::path& dir = reference_run();
  const std::vector<TaskSpec> tasks = load_task_set(dir / "tasks.jsonl");  // what serve --tasks reads
  ASSERT_EQ(tasks.size(), 8u);
  std::set<std::string> hashes, ids;
  for (const auto& t : tasks) {
    EXPECT_TRUE(hashes.insert(canonical_graph_hash(t)).second) << "duplicate graph " << t.id;
    EXPECT_TRUE(ids.insert(t.id).second);
    ASSERT_TRUE(t.meta.contains("nearest_kernelbench")) << t.id;
    EXPECT_GT(t.meta["nearest_kernelbench"]["distance"].get<double>(), 0.34) << t.id;
    EXPECT_GE(t.shape_variants.size(), 2u);
    EXPECT_TRUE(fs::exists(dir / "kernelbench" / kernelbench_file_name(t.id))) << t.id;
    // kforge task check on the task as its own file.
    const fs::path file = dir / ("check_" + t.id.substr(6) + ".json");
    std::ofstream(file) << to_json(t).dump();
    std::string out;
    EXPECT_EQ(run(std::string(KFORGE_BIN) + " task check " + file.string(), &out), 0) << out;
  }
  for (const char* f : {"DATASET_CARD.md", "rejections.json", "contamination_report.json", "card_stats.json"}) {
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  }
  const json rej = json::parse(read(dir / "rejections.json"));
  EXPECT_EQ(rej["tasks"], 8);
}

// The rendered KernelBench modules, fed the C++ reference's own inputs, give
// the C++ reference's outputs under PyTorch (tests/core/render_harness.py).
TEST(SynthCliTest, RenderedPythonRunsUnderPyTorchAndMatchesTheReference) {
  const fs::path& dir = reference_run();
  const fs::path work = scratch("render");
  json manifest = json::array();
  int case_no = 0;
  for (const auto& t : load_task_set(dir / "tasks.jsonl")) {
    const std::string label = "c" + std::to_string(case_no++);
    const std::vector<at::Tensor> in = ref::make_inputs(t, 0, at::Device(at::kCPU));
    const std::vector<at::Tensor> out = ref::run_reference(t, in);
    const std::map<std::string, std::string> names = kernelbench_names(t);
    json c = {{"label", label},
              {"module", (dir / "kernelbench" / kernelbench_file_name(t.id)).string()},
              {"inputs", json::array()},
              {"outputs", json::array()},
              {"rtol", t.tolerance->rtol},
              {"atol", t.tolerance->atol}};
    auto dump = [&](const at::Tensor& x, const std::string& name) {
      const fs::path f = work / (label + "_" + name + ".bin");
      at::Tensor cont = x.contiguous();
      std::ofstream(f, std::ios::binary)
          .write(static_cast<const char*>(cont.data_ptr()), static_cast<std::streamsize>(cont.nbytes()));
      return f.string();
    };
    const std::vector<TensorSpec> specs = t.kernel_inputs();
    for (size_t i = 0; i < specs.size(); ++i) {
      c["inputs"].push_back({{"py", names.at(specs[i].name)},
                             {"file", dump(in[i], "in" + std::to_string(i))},
                             {"dtype", dtype_name(specs[i].dtype)},
                             {"shape", specs[i].shape},
                             {"param", i >= t.inputs.size()}});
    }
    for (size_t i = 0; i < out.size(); ++i) {
      c["outputs"].push_back({{"file", dump(out[i], "out" + std::to_string(i))},
                              {"dtype", dtype_name(ref::from_scalar_type(out[i].scalar_type()))},
                              {"shape", out[i].sizes().vec()}});
    }
    manifest.push_back(c);
  }
  std::ofstream(work / "manifest.json") << manifest.dump();
  std::string out;
  ASSERT_EQ(run(std::string(KFORGE_PYTHON) + " " + KFORGE_SOURCE_DIR + "/tests/core/render_harness.py " +
                    (work / "manifest.json").string() + " " + (work / "results.json").string(),
                &out),
            0)
      << out;
  const json results = json::parse(read(work / "results.json"));
  ASSERT_EQ(results.size(), manifest.size());
  for (const auto& [label, r] : results.items()) EXPECT_TRUE(r["ok"].get<bool>()) << label << ": " << r["detail"];
  kforge::remove_tree(work);
}

TEST(SynthCliTest, ResumesAfterSigkillToTheSameFile) {
  const fs::path& full = reference_run();
  const fs::path dir = scratch("killed");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    const std::string cmd = synth_cmd(dir, 8, 11, 2);
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Kill it once some, not all, tasks are committed.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(dir / "tasks.jsonl") && lines_of(dir / "tasks.jsonl") >= 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the run finished before it could be killed";
  const size_t committed = lines_of(dir / "tasks.jsonl");
  EXPECT_GE(committed, 2u);
  EXPECT_LT(committed, 8u);
  // A record torn by the kill: the resume must cut it off, not keep it.
  std::ofstream(dir / "tasks.jsonl", std::ios::app) << "{\"id\": \"synth/torn";
  std::string out;
  ASSERT_EQ(run(synth_cmd(dir, 8, 11, 2), &out), 0) << out;
  EXPECT_EQ(read(dir / "tasks.jsonl"), read(full / "tasks.jsonl"));
  const json rej = json::parse(read(dir / "rejections.json"));
  EXPECT_EQ(rej["tasks"], 8);
  // A resume with another seed into the same directory is refused, by name.
  ASSERT_EQ(run(synth_cmd(dir, 8, 12, 2), &out), 2) << out;
  EXPECT_NE(out.find("other options"), std::string::npos) << out;
  kforge::remove_tree(dir);
}

// Eager baselines from the CPU judge's reference request: every task gets
// one, with the judge's clock and stopping rule, and the set itself is the
// one the run without baselines made (tasks.jsonl is the same apart from the
// measured baselines). torch.compile is recorded as unavailable with the
// reason (Debian's PyTorch 1.13 has none), never guessed.
TEST(SynthCliTest, JudgeBaselinesLeaveTheSetAsItIs) {
  const fs::path& ref = reference_run();
  const fs::path dir = scratch("judge");
  std::string out;
  ASSERT_EQ(run(std::string(KFORGE_BIN) + " synth --n 3 --backend cpu --seed 11 --workers 2 --out " + dir.string() +
                    " --baselines judge --compile-baselines auto --quiet > " + (dir / "summary.json").string(),
                &out),
            0)
      << out;
  const std::vector<TaskSpec> with = load_task_set(dir / "tasks.jsonl");
  const std::vector<TaskSpec> without = load_task_set(ref / "tasks.jsonl");
  ASSERT_EQ(with.size(), 3u);
  for (size_t i = 0; i < with.size(); ++i) {
    ASSERT_TRUE(with[i].baselines.has_value()) << with[i].id;
    ASSERT_TRUE(with[i].baselines->eager_ms.has_value()) << with[i].id;
    EXPECT_GT(*with[i].baselines->eager_ms, 0.0);
    EXPECT_FALSE(with[i].baselines->device.empty());
    EXPECT_FALSE(with[i].baselines->compile_ms.has_value());
    // The difficulty label holds the measurement: eager over the roofline
    // bound of the device it was measured on.
    const json& d = with[i].meta["difficulty"];
    EXPECT_DOUBLE_EQ(d["eager_ms"].get<double>(), *with[i].baselines->eager_ms) << d.dump();
    EXPECT_DOUBLE_EQ(d["headroom"].get<double>(), d["eager_ms"].get<double>() / d["bound_ms"].get<double>())
        << d.dump();
    EXPECT_EQ(d["device"], with[i].baselines->device) << d.dump();
    EXPECT_TRUE(without[i].meta["difficulty"]["headroom"].is_null());
    TaskSpec stripped = with[i], plain = without[i];
    stripped.baselines.reset();
    stripped.meta.erase("difficulty");
    plain.meta.erase("difficulty");
    EXPECT_EQ(to_json(stripped).dump(), to_json(plain).dump()) << "task " << i;
  }
  // The judge's timing record: its clock and its stopping rule, with the
  // options synthesis chose (at least 10 samples, RSE 1 % or 200 ms).
  size_t slots = 0;
  for_each_jsonl_line(dir / "slots.jsonl", [&](const Document& d, size_t) {
    ++slots;
    const json& t = d.root["baseline_detail"];
    EXPECT_EQ(t["timer"], "cpu_time") << t.dump();
    EXPECT_GE(t["samples"].get<int>(), 10) << t.dump();
    EXPECT_TRUE(t["stop_reason"] == "converged" || t["stop_reason"] == "time_cap") << t.dump();
    EXPECT_EQ(t["input_sets"], 2) << t.dump();
    EXPECT_DOUBLE_EQ(t["median_ms"].get<double>(), d.root["baseline"].get<double>());
  });
  EXPECT_EQ(slots, 3u);
  const json summary = json::parse(read(dir / "summary.json"));
  EXPECT_NE(summary["eager_baselines"].get<std::string>().find("RSE 0.01"), std::string::npos) << summary.dump();
  const json compile = json::parse(read(dir / "compile_baselines.json"));
  EXPECT_FALSE(compile["available"].get<bool>());
  EXPECT_NE(compile["reason"].get<std::string>().find("no torch.compile"), std::string::npos) << compile.dump();
  EXPECT_NE(read(dir / "DATASET_CARD.md").find("torch.compile baselines: unavailable"), std::string::npos);
  EXPECT_NE(read(dir / "DATASET_CARD.md").find("Eager baselines from the judge: 3 of 3"), std::string::npos);
  kforge::remove_tree(dir);
}

// SIGINT (what the GPU script's deadline sends): the run stops after the
// attempts in flight, writes its reports for what it committed, says so
// (exit 1, "interrupted"), and a rerun completes the same set.
TEST(SynthCliTest, SigintStopsCleanlyAndARerunCompletes) {
  const fs::path& full = reference_run();
  const fs::path dir = scratch("sigint");
  const fs::path summary = dir.string() + ".json";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = ::open(summary.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(fd, 1);
    ::dup2(null, 2);
    const std::string cmd = synth_cmd(dir, 8, 11, 2);
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(dir / "tasks.jsonl") && lines_of(dir / "tasks.jsonl") >= 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "SIGINT must end the run through its own exit, not kill it";
  const size_t committed = lines_of(dir / "tasks.jsonl");
  if (committed < 8) {
    EXPECT_EQ(WEXITSTATUS(status), 1);
    const json s = json::parse(read(summary));
    EXPECT_TRUE(s["interrupted"].get<bool>()) << s.dump();
    EXPECT_FALSE(s["complete"].get<bool>()) << s.dump();
    EXPECT_EQ(s["tasks"], committed) << s.dump();
  } else {
    EXPECT_EQ(WEXITSTATUS(status), 0) << "finished before the signal arrived";
  }
  // The reports cover exactly what was committed.
  EXPECT_EQ(json::parse(read(dir / "rejections.json"))["tasks"], committed);
  EXPECT_EQ(read(full / "tasks.jsonl").substr(0, read(dir / "tasks.jsonl").size()), read(dir / "tasks.jsonl"));
  std::string out;
  ASSERT_EQ(run(synth_cmd(dir, 8, 11, 2), &out), 0) << out;
  EXPECT_EQ(read(dir / "tasks.jsonl"), read(full / "tasks.jsonl"));
  kforge::remove_tree(dir);
  fs::remove(summary);
}

TEST(SynthCliTest, ServeAcceptsTheSynthesizedJsonl) {
  const fs::path& dir = reference_run();
  const fs::path log = scratch("serve") / "serve.out";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execl(KFORGE_BIN, KFORGE_BIN, "serve", "--backend", "cpu", "--envs", "1", "--bind", "tcp://127.0.0.1:0",
            "--tasks", (dir / "tasks.jsonl").c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  bool ready = false;
  while (!ready && std::chrono::steady_clock::now() < deadline) {
    ready = read(log).find("\"endpoint\"") != std::string::npos;
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid, SIGTERM);
  ::waitpid(pid, nullptr, 0);
  EXPECT_TRUE(ready) << read(log);
  EXPECT_NE(read(log).find("tasks from"), std::string::npos) << read(log);
  kforge::remove_tree(log.parent_path());
}

TEST(SynthCliTest, ImportsKernelBenchFilesAndReportsWhatItCannot) {
  const fs::path dir = scratch("kb");
  fs::create_directories(dir / "level2");
  std::ofstream(dir / "level2" / "1_Gemm_Scale_GELU.py") << R"(import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super(Model, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        x = self.gemm(x)
        x = x * self.scale
        return torch.nn.functional.gelu(x)

def get_inputs():
    return [torch.rand(16, 32)]

def get_init_inputs():
    return [32, 24, 0.5]
)";
  std::ofstream(dir / "level2" / "2_LSTM.py") << R"(import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 8)

    def forward(self, x):
        return self.rnn(x)[0]

def get_inputs():
    return [torch.randn(4, 2, 8)]

def get_init_inputs():
    return []
)";
  std::string out;
  ASSERT_EQ(
      run(std::string(KFORGE_BIN) + " import-kernelbench " + dir.string() + " --out " + (dir / "kb.jsonl").string(),
          &out),
      0)
      << out;
  const std::vector<TaskSpec> tasks = load_task_set(dir / "kb.jsonl");
  ASSERT_EQ(tasks.size(), 1u) << out;
  EXPECT_EQ(tasks[0].id, "kernelbench/level2/1_Gemm_Scale_GELU");
  EXPECT_EQ(tasks[0].source, "kernelbench");
  ASSERT_EQ(tasks[0].nodes.size(), 3u);
  EXPECT_EQ(tasks[0].nodes[0].op, "linear");
  EXPECT_EQ(tasks[0].nodes[1].attrs["other"], 0.5);
  EXPECT_EQ(tasks[0].inputs[0].init.kind, "uniform");
  const json report = json::parse(read(dir / "kb.jsonl.report.json"));
  EXPECT_EQ(report["imported"], 1);
  bool lstm_listed = false;
  for (const auto& p : report["problems"]) {
    if (p["task_id"] == "kernelbench/level2/2_LSTM") {
      lstm_listed = true;
      EXPECT_FALSE(p["imported"].get<bool>());
      EXPECT_NE(p["reason"].get<std::string>().find("LSTM"), std::string::npos) << p.dump();
    }
  }
  EXPECT_TRUE(lstm_listed) << report.dump();
  kforge::remove_tree(dir);
}

}  // namespace
}  // namespace kforge::synth
