// The CUDA candidate corpus (docs/threat-model.md): honest controls (tests/honest,
// manifest controls.json) and exploit candidates (tests/adversarial/cuda,
// table expectations.json). Shared by the CI tests (compile + load-time
// checks, no GPU) and the GPU tests (full evaluation through the Executor).
#pragma once

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/measurement.h"
#include "kforge/core/task_spec.h"
#include "kforge/env/compiler.h"
#include "kforge/env/eval.h"

namespace kforge::corpus {

// An honest control: a legitimate optimized kernel and the task it solves.
struct Control {
  std::string name;            // file stem, the test's parameter name
  std::filesystem::path file;  // absolute
  std::filesystem::path task;  // absolute
  std::string technique;
  bool expect_faster = false;     // the GPU test requires speedup_eager > 1
  double expected_speedup = 0.0;  // an honest guess, for the report
};

// One acceptable end state of an exploit's evaluation.
struct Alternative {
  std::string outcome;    // outcome_name(), e.g. "violation", "wrong", "rejected"
  std::string violation;  // a check name the report must carry; empty: any or none
  // The no-gain alternative: the cheat never triggered, the candidate is an
  // ordinary (slow) kernel and may not beat eager by more than this factor.
  std::optional<double> max_speedup_eager;
};

struct Exploit {
  std::string name;
  std::filesystem::path file;
  std::filesystem::path task;
  std::string exploit_class;
  // The violation load-time inspection must report; empty: it must accept the
  // object so that the run-time checks are what catches it.
  std::string load_time;
  std::vector<Alternative> expect;
  std::string known_gap;  // why the current code cannot catch it yet (may be empty)
};

std::filesystem::path source_dir();
std::filesystem::path honest_dir();
std::filesystem::path exploit_dir();

// Read the manifests; throw with the file and entry on malformed rows.
std::vector<Control> load_controls();
std::vector<Exploit> load_exploits();

// gtest prints parameters in test listings (and ctest names); the file stem
// is all a reader needs.
void PrintTo(const Control& c, std::ostream* os);
void PrintTo(const Exploit& e, std::ostream* os);

// gtest parameter names: the file stem.
struct NameOf {
  template <typename T>
  std::string operator()(const T& info) const {
    return info.param.name;
  }
};

// Compiles `file` in cuda mode for `task` through a process-wide
// CompileService (real nvcc), whose disk cache lives in the build tree and is
// shared by every test process of the corpus, so that each source is
// compiled once per build directory. Throws if the toolkit is missing.
env::CompileResult compile_cuda(const std::filesystem::path& file, const TaskSpec& task);

// Human-readable list of violations: "check: detail; ...".
std::string describe(const std::vector<Violation>& violations);

// The Measurement a step would record for this report (as the step engine
// builds it: outcome, violations, median times and the eager speedup).
Measurement measurement_from(const env::EvalReport& report);

// The report's timing as indented JSON, or "no timing", for failure messages.
std::string timing_dump(const env::EvalReport& report);

// Evaluation options for the GPU tests: the production checks (5 seeds, every
// shape variant, run twice, 3 timing input sets, CUPTI profile) with a
// shorter sampling budget.
env::EvalOptions gpu_options();

}  // namespace kforge::corpus
