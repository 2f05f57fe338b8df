#include "corpus.h"

#include <fstream>
#include <memory>
#include <mutex>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "kforge/core/solution.h"
#include "kforge/env/compile_service.h"

namespace kforge::corpus {
namespace {

json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::stringstream text;
  text << in.rdbuf();
  try {
    return json::parse(text.str());
  } catch (const json::exception& e) {
    throw std::runtime_error(path.string() + ": " + e.what());
  }
}

std::string stem(const std::filesystem::path& p) { return p.stem().string(); }

}  // namespace

std::filesystem::path source_dir() { return KFORGE_SOURCE_DIR; }
std::filesystem::path honest_dir() { return source_dir() / "tests/honest"; }
std::filesystem::path exploit_dir() { return source_dir() / "tests/adversarial/cuda"; }

std::vector<Control> load_controls() {
  const std::filesystem::path manifest = honest_dir() / "controls.json";
  const json j = read_json(manifest);
  std::vector<Control> out;
  for (const json& row : j.at("controls")) {
    try {
      Control c;
      c.file = honest_dir() / row.at("file").get<std::string>();
      c.name = stem(c.file);
      c.task = source_dir() / row.at("task").get<std::string>();
      c.technique = row.at("technique").get<std::string>();
      c.expect_faster = row.at("expect_faster").get<bool>();
      c.expected_speedup = row.at("expected_speedup").get<double>();
      out.push_back(std::move(c));
    } catch (const json::exception& e) {
      throw std::runtime_error(manifest.string() + ": row " + row.dump() + ": " + e.what());
    }
  }
  return out;
}

std::vector<Exploit> load_exploits() {
  const std::filesystem::path table = exploit_dir() / "expectations.json";
  const json j = read_json(table);
  std::vector<Exploit> out;
  for (const json& row : j.at("candidates")) {
    try {
      Exploit e;
      e.file = exploit_dir() / row.at("file").get<std::string>();
      e.name = stem(e.file);
      e.task = source_dir() / row.at("task").get<std::string>();
      e.exploit_class = row.at("class").get<std::string>();
      if (!row.at("load_time").is_null()) e.load_time = row.at("load_time").get<std::string>();
      for (const json& alt : row.at("expect")) {
        Alternative a;
        a.outcome = alt.at("outcome").get<std::string>();
        a.violation = alt.value("violation", "");
        if (alt.contains("max_speedup_eager")) a.max_speedup_eager = alt.at("max_speedup_eager").get<double>();
        e.expect.push_back(std::move(a));
      }
      if (e.expect.empty()) throw std::runtime_error("no expected outcome");
      e.known_gap = row.value("known_gap", "");
      out.push_back(std::move(e));
    } catch (const std::exception& ex) {
      throw std::runtime_error(table.string() + ": row " + row.dump() + ": " + ex.what());
    }
  }
  return out;
}

env::CompileResult compile_cuda(const std::filesystem::path& file, const TaskSpec& task) {
  static std::once_flag once;
  static std::unique_ptr<env::CompileService> service;
  std::call_once(once, [] {
    env::CompileServiceConfig config;
    config.cache_dir = std::filesystem::path(KFORGE_BINARY_DIR) / "tests/corpus/compile-cache";
    config.threads = 2;
    service = std::make_unique<env::CompileService>(config);
    env::add_default_compilers(*service, "cuda");
  });
  const Solution solution = load_solution(file, SolutionMode::kCuda);
  if (solution.mode != SolutionMode::kCuda)
    throw std::runtime_error(file.string() + " did not load as a cuda solution");
  return service->submit(solution, env::compile_context_for(task)).get();
}

void PrintTo(const Control& c, std::ostream* os) { *os << c.name; }
void PrintTo(const Exploit& e, std::ostream* os) { *os << e.name; }

std::string describe(const std::vector<Violation>& violations) {
  if (violations.empty()) return "(none)";
  std::string s;
  for (const auto& v : violations) s += (s.empty() ? "" : "; ") + v.check + ": " + v.detail;
  return s;
}

Measurement measurement_from(const env::EvalReport& report) {
  Measurement m;
  m.action = "submit";
  m.compiled = true;
  m.outcome = report.outcome;
  m.violations = report.violations;
  if (report.timing) {
    auto positive = [](double v) { return v > 0 ? v : 0.0; };
    const double cand = positive(report.timing->candidate.median_ms);
    const double ref = positive(report.timing->reference.median_ms);
    if (cand > 0) {
      m.timed = true;
      m.candidate_ms = cand;
    }
    if (ref > 0) m.eager_ms = ref;
    if (cand > 0 && ref > 0) m.speedup_eager = ref / cand;
  }
  if (report.profile && report.profile->own_kernel_fraction)
    m.own_kernel_fraction = report.profile->own_kernel_fraction;
  return m;
}

std::string timing_dump(const env::EvalReport& report) {
  return report.timing ? to_json(*report.timing).dump(1) : "no timing";
}

env::EvalOptions gpu_options() {
  env::EvalOptions o;  // production verification: 5 seeds, determinism, every variant
  o.warmup_ms = 25;
  o.max_time_ms = 400;
  o.min_samples = 10;
  o.max_samples = 400;
  o.target_rse = 0.01;
  o.timing_input_sets = 3;
  o.call_timeout_ms = 10000;
  o.eval_timeout_ms = 240000;
  return o;
}

}  // namespace kforge::corpus
