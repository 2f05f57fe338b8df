#include "test_support.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>

#include "kforge/core/document.h"
#include "kforge/core/process.h"

namespace kforge::testing {
namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::filesystem::path compile_candidate(const std::string& source, const std::vector<std::string>& flags) {
  std::string all_flags;
  for (const auto& f : flags) all_flags += " " + f;
  size_t key = std::hash<std::string>{}(source + "\n" + all_flags);
  std::filesystem::path dir = std::filesystem::path(KFORGE_BINARY_DIR) / "tests" / "exec" / "candidates";
  std::filesystem::create_directories(dir);
  std::filesystem::path so = dir / (std::to_string(key) + ".so");
  if (std::filesystem::exists(so)) return so;

  // Unique temporaries, then an atomic rename: parallel test processes may
  // build the same candidate at once.
  std::string tag = std::to_string(key) + "." + std::to_string(::getpid());
  std::filesystem::path src = dir / (tag + ".cpp"), tmp = dir / (tag + ".so.tmp"), log = dir / (tag + ".log");
  std::ofstream(src) << source;
  std::vector<std::string> argv = {find_on_path("g++").string(),          "-std=c++17", "-O2", "-shared", "-fPIC",
                                   "-I" KFORGE_SOURCE_DIR "/core/include"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"-o", tmp.string(), src.string()});
  ProcessOptions options;
  options.output_file = log;
  const ProcessResult r = run_process(argv, options);
  std::string output = read_file(log);
  std::filesystem::remove(src);
  std::filesystem::remove(log);
  if (!r.ok()) {
    ADD_FAILURE() << "g++ failed for a test candidate:\n" << output;
    throw std::runtime_error("candidate did not compile");
  }
  std::filesystem::rename(tmp, so);
  return so;
}

env::Artifact artifact_for(const std::filesystem::path& so) {
  env::Artifact a;
  a.mode = SolutionMode::kCpp;
  a.path = so;
  a.hash = so.stem().string();
  return a;
}

TaskSpec task_from_json(const std::string& json_text) {
  return parse_task(Document::from_json_text(json_text, "<test task>"));
}

TaskSpec elementwise_chain_task(int64_t n, const std::vector<int64_t>& variant_sizes) {
  json j = {{"id", "test/chain"},
            {"inputs",
             {{{"name", "x"}, {"shape", {n}}, {"dtype", "float32"}},
              {{"name", "y"}, {"shape", {n}}, {"dtype", "float32"}},
              {{"name", "z"}, {"shape", {n}}, {"dtype", "float32"}}}},
            {"nodes",
             {{{"op", "mul"}, {"in", {"x", "y"}}, {"out", "t0"}},
              {{"op", "add"}, {"in", {"t0", "z"}}, {"out", "t1"}},
              {{"op", "relu"}, {"in", {"t1"}}, {"out", "out"}}}},
            {"outputs", {"out"}}};
  if (!variant_sizes.empty()) {
    j["shape_variants"] = json::array();
    for (int64_t v : variant_sizes) {
      j["shape_variants"].push_back({{"x", {v}}, {"y", {v}}, {"z", {v}}});
    }
  }
  return task_from_json(j.dump());
}

env::EvalOptions quick_options() {
  env::EvalOptions o;
  o.seeds = 5;  // the production checks (5 seeds, every variant): sizes shrink, checks do not
  o.warmup_ms = 5;
  o.max_time_ms = 150;
  o.min_samples = 5;
  o.max_samples = 50;
  o.target_rse = 0.05;
  o.timing_input_sets = 2;
  o.call_timeout_ms = 3000;
  o.eval_timeout_ms = 60000;
  o.memory_limit_bytes = 256ull << 20;
  return o;
}

int open_fd_count() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)entry;
    ++n;
  }
  return n - 1;  // the iterator's own descriptor
}

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = read_file(entry.path() / "stat");
    // pid (comm) state ppid ...: comm may contain spaces, so parse after ')'.
    auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent) out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

std::vector<pid_t> processes_mentioning(const std::string& needle) {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = read_file(entry.path() / "cmdline");
    for (auto& c : cmdline) {
      if (c == '\0') c = ' ';
    }
    if (cmdline.find(needle) != std::string::npos) out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

}  // namespace kforge::testing
