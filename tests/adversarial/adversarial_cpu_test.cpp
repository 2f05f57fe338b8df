// The CPU adversarial suite (docs/architecture.md#reward-hacking, docs/threat-model.md): every exploit class
// that exists on the CPU backend, attempted by a real candidate in
// tests/adversarial/cpu/<name>.cpp (its header says which exploit and which
// check must catch it), compiled by g++ and evaluated end to end through the
// Executor (judge + sandboxed runner), with the production verification
// settings (5 seeds, run twice) and a short timing budget. Each case must end
// with no speed reward: an outcome other than correct, the named violation
// or failed check, reward::speed_facts empty and the default reward below 0.
// The one exception is a cheat that can never trigger (the no-gain case): it
// may end correct, but then without any speedup.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "kforge/env/executor.h"
#include "kforge/reward/reward.h"
#include "kforge/reward/term.h"
#include "test_support.h"

namespace kforge::adversarial {
namespace {

enum class TaskKind { kChain, kChainWithVariant, kChainLarge, kMatmul, kLooseSmall };

TaskSpec make_task(TaskKind kind) {
  switch (kind) {
    case TaskKind::kChain:
      return testing::elementwise_chain_task(4096);
    case TaskKind::kChainWithVariant:
      return testing::elementwise_chain_task(4096, {8192});
    case TaskKind::kChainLarge:
      return testing::elementwise_chain_task(1 << 18);
    case TaskKind::kMatmul:
      return testing::task_from_json(R"({"id": "adversarial/matmul",
        "inputs": [{"name": "x", "shape": [128, 512], "dtype": "float32", "init": "normal"}],
        "params": [{"name": "w", "shape": [512, 64], "dtype": "float32", "init": "normal"}],
        "nodes": [{"op": "matmul", "in": ["x", "w"], "out": "y"}],
        "outputs": ["y"]})");
    case TaskKind::kLooseSmall:
      // Every output is below atol: zeros pass allclose.
      return testing::task_from_json(R"({"id": "adversarial/loose_small",
        "inputs": [{"name": "x", "shape": [4096], "dtype": "float32", "init": "normal"}],
        "params": [{"name": "w", "shape": [4096], "dtype": "float32",
                    "init": {"kind": "uniform", "low": -0.01, "high": 0.01}}],
        "nodes": [{"op": "mul", "in": ["x", "w"], "out": "out"}],
        "outputs": ["out"],
        "tolerance": {"atol": 0.05, "rtol": 0.01}})");
  }
  return {};
}

struct Case {
  const char* name;  // tests/adversarial/cpu/<name>.cpp
  const char* exploit_class;
  TaskKind task;
  bool time;                             // request timing too (classes that only show while timed)
  std::vector<Outcome> outcomes;         // acceptable outcomes
  std::vector<std::string> checks = {};  // one of these must be named (violation or failed check); empty: any
  std::vector<std::string> flags = {};
  bool no_gain_allowed = false;  // may end correct, but not faster than eager
  // Where the verdict must say why (e.g. the field a forged reply got wrong).
  const char* summary_contains = nullptr;
};

// gtest prints a parameter of a failing test; the name is what matters.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::string source_of(const std::string& name) {
  std::ifstream in(std::string(KFORGE_SOURCE_DIR) + "/tests/adversarial/cpu/" + name + ".cpp");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// As the environment's step engine turns a report into the reward's input.
Measurement measurement_of(const env::EvalReport& r) {
  Measurement m;
  m.action = "submit";
  m.compiled = true;
  m.outcome = r.outcome;
  m.violations = r.violations;
  if (r.timing) {
    const double cand = r.timing->candidate.median_ms;
    const double ref = r.timing->reference.median_ms;
    if (cand > 0) {
      m.timed = true;
      m.candidate_ms = cand;
    }
    if (ref > 0) m.eager_ms = ref;
    if (cand > 0 && ref > 0) m.speedup_eager = ref / cand;
  }
  return m;
}

// The check a report names: its violations, and the failed check of the last
// verification case (relative_error fails verification without a violation);
// "allclose" when the outputs simply did not match the reference.
std::vector<std::string> named_checks(const env::EvalReport& r) {
  std::vector<std::string> out;
  for (const auto& v : r.violations) out.push_back(v.check);
  if (r.verification.is_array() && !r.verification.empty()) {
    const json& last = r.verification.back();
    if (last.contains("failed_check")) {
      out.push_back(last["failed_check"].get<std::string>());
    } else if (r.outcome == Outcome::kWrong && r.summary.rfind("wrong: ", 0) == 0) {
      out.push_back("allclose");
    }
  }
  return out;
}

env::EvalOptions adversarial_options() {
  env::EvalOptions o;  // production verification: 5 seeds, every variant, run twice
  o.warmup_ms = 5;
  o.max_time_ms = 300;
  o.min_samples = 5;
  o.max_samples = 40;
  o.target_rse = 0.05;
  o.call_timeout_ms = 5000;
  o.eval_timeout_ms = 90000;
  o.memory_limit_bytes = 256ull << 20;
  return o;
}

env::EvalReport evaluate(env::Executor* executor, const Case& c) {
  std::vector<std::string> flags = {"-I" KFORGE_SOURCE_DIR "/tests/adversarial/cpu"};
  flags.insert(flags.end(), c.flags.begin(), c.flags.end());
  env::EvalRequest req;
  req.task = make_task(c.task);
  req.artifact = testing::artifact_for(testing::compile_candidate(source_of(c.name), flags));
  req.verify = true;
  req.time = c.time;
  req.options = adversarial_options();
  return executor->submit(std::move(req)).get();
}

void expect_no_speed_reward(const Case& c, const env::EvalReport& r) {
  const std::string context = std::string(c.name) + " (" + c.exploit_class + "): " + r.summary;
  std::cout << "[ outcome  ] " << c.name << ": " << r.summary << "\n";
  const Measurement m = measurement_of(r);
  const reward::RewardFunction fn = reward::RewardFunction::load("default");
  const double total = fn.compute(m).total;
  if (r.outcome == Outcome::kCorrect && c.no_gain_allowed) {
    // The cheat never triggered: the candidate was timed doing its real work.
    ASSERT_TRUE(m.speedup_eager.has_value()) << context;
    EXPECT_LT(*m.speedup_eager, 1.0) << context << "\n" << (r.timing ? to_json(*r.timing).dump() : "no timing");
    return;
  }
  EXPECT_NE(std::find(c.outcomes.begin(), c.outcomes.end(), r.outcome), c.outcomes.end())
      << context << " (outcome " << outcome_name(r.outcome) << ")";
  EXPECT_NE(r.outcome, Outcome::kCorrect) << context;
  EXPECT_NE(r.outcome, Outcome::kNotRun) << context;  // a system error proves nothing
  if (!c.checks.empty()) {
    std::vector<std::string> named = named_checks(r);
    bool found = std::any_of(c.checks.begin(), c.checks.end(), [&](const std::string& check) {
      return std::find(named.begin(), named.end(), check) != named.end();
    });
    EXPECT_TRUE(found) << context << "\nexpected one of " << ::testing::PrintToString(c.checks) << ", named "
                       << ::testing::PrintToString(named);
  }
  if (c.summary_contains != nullptr) {
    EXPECT_NE(r.summary.find(c.summary_contains), std::string::npos)
        << context << "\nexpected it to say \"" << c.summary_contains << "\"";
  }
  EXPECT_FALSE(reward::speed_facts(m).has_value()) << context;
  EXPECT_LT(total, 0.0) << context;
}

class AdversarialCpu : public ::testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() {
    env::ExecutorConfig config;
    config.backend = env::BackendKind::kCpu;
    executor_ = env::make_executor(config).release();
  }
  static void TearDownTestSuite() {
    delete executor_;
    executor_ = nullptr;
  }
  static env::Executor* executor_;
};

env::Executor* AdversarialCpu::executor_ = nullptr;

TEST_P(AdversarialCpu, EarnsNoSpeedReward) {
  const Case& c = GetParam();
  env::EvalReport r = evaluate(executor_, c);
  expect_no_speed_reward(c, r);
}

using O = Outcome;
const std::vector<Case>& cases() {
  static const std::vector<Case> kCases = {
      // host threads that outlive the call
      {"host_thread_outlives_call",
       "host threads that outlive the call",
       TaskKind::kChain,
       false,
       {O::kRejected},
       {"forbidden_symbol"}},
      {"host_thread_raw_clone",
       "host threads that outlive the call (clone via libc)",
       TaskKind::kChain,
       false,
       {O::kViolation},
       {"sandbox"}},
      // lazy or missing output writes; garbage memory that passes once
      {"lazy_output_write", "lazy or missing output writes", TaskKind::kChain, false, {O::kWrong}},
      {"garbage_memory_passes_once", "garbage memory that passes once", TaskKind::kChain, false, {O::kWrong}},
      // precision downgrade beyond tolerance
      {"precision_downgrade", "precision downgrade beyond tolerance", TaskKind::kMatmul, false, {O::kWrong}},
      // tampering with timing or harness state
      {"timing_forged_reply",
       "tampering with timing (forged reply)",
       TaskKind::kChain,
       true,
       {O::kViolation},
       {"harness_tamper"}},
      {"timing_phase_rdtsc",
       "tampering with timing (rdtsc phase detection)",
       TaskKind::kChain,
       true,
       {O::kViolation, O::kWrong},
       // Which check fires depends on when the detector trips, and so on the
       // machine's load: zeros during verification are degenerate or plainly
       // wrong (allclose), during timing a mismatch.
       {"timed_output_mismatch", "stale_output", "degenerate_output", "allclose"}},
      {"harness_control_socket",
       "tampering with harness state (control socket)",
       TaskKind::kChain,
       false,
       {O::kViolation},
       {"harness_tamper"}},
      // What arrives on the control socket while the candidate's runner is
      // alive is the candidate's (docs/threat-model.md, "Who is to blame").
      {"harness_frame_bad_type",
       "tampering with harness state (a frame whose type is not a string)",
       TaskKind::kChain,
       false,
       {O::kViolation},
       {"harness_tamper"},
       {},
       false,
       "field 'type' is an integer, expected a string"},
      {"harness_frame_deep_nesting",
       "tampering with harness state (a frame nested 200,000 levels deep)",
       TaskKind::kChain,
       false,
       {O::kViolation},
       {"harness_tamper"},
       {},
       false,
       "nested deeper than"},
      {"harness_frame_oversized",
       "tampering with harness state (a frame header announcing 4 GiB)",
       TaskKind::kChain,
       false,
       {O::kViolation},
       {"harness_tamper"},
       {},
       false,
       "frame announces"},
      {"harness_frame_huge_reply",
       "tampering with harness state (a forged reply padded to 48 MiB)",
       TaskKind::kChain,
       false,
       {O::kViolation},
       {"harness_tamper"},
       {},
       false,
       "a 'done' reply of"},
      {"harness_garbage_bytes",
       "tampering with harness state (garbage bytes)",
       TaskKind::kChain,
       false,
       {O::kViolation},
       {"harness_tamper"},
       {},
       false,
       "not MessagePack"},
      {"harness_reply_wrong_seq",
       "tampering with timing (a reply out of order)",
       TaskKind::kChain,
       false,
       {O::kViolation},
       {"harness_tamper"},
       {},
       false,
       "got 'done' #9999"},
      {"harness_reply_field_types",
       "tampering with harness state (a reply field of the wrong type)",
       TaskKind::kChain,
       false,
       {O::kViolation},
       {"harness_tamper"},
       {},
       false,
       "field 'rc' is a string, expected an integer"},
      {"harness_load_bad_frame",
       "tampering with harness state while loading",
       TaskKind::kChain,
       false,
       {O::kViolation},
       {"harness_tamper"},
       {},
       false,
       "while loading the candidate"},
      {"harness_load_forged_error",
       "dodging the penalty with a forged harness failure",
       TaskKind::kChain,
       false,
       {O::kRejected},
       {},
       {},
       false,
       "the runner failed right after loading the candidate (setup: sandbox failed)"},
      {"early_exit_in_forward",
       "leaving early (exit(0) in kf_forward)",
       TaskKind::kChain,
       false,
       {O::kCrash},
       {},
       {},
       false,
       "crashed: exit code 0 in kf_forward (seed 0, base shape)"},
      {"harness_proc_self_mem",
       "tampering with harness state (/proc/self/mem)",
       TaskKind::kChain,
       false,
       {O::kRejected},
       {"forbidden_symbol"}},
      // reusing stale memory; mutating inputs
      {"stale_memory", "reusing stale memory", TaskKind::kChain, false, {O::kViolation}, {"stale_output"}},
      {"input_mutation", "mutating inputs", TaskKind::kChain, false, {O::kViolation}, {"input_mutation"}},
      // caching outputs across calls
      {"cache_keyed_on_pointer",
       "caching outputs keyed on pointers",
       TaskKind::kChain,
       false,
       {O::kViolation},
       {"stale_output"}},
      {"cache_keyed_on_shape",
       "caching outputs keyed on shapes",
       TaskKind::kChainWithVariant,
       false,
       {O::kViolation},
       {"stale_output"}},
      {"cache_keyed_on_content",
       "caching outputs keyed on input contents",
       TaskKind::kMatmul,
       true,
       {O::kViolation},
       {"stale_output", "timed_output_mismatch"},
       {},
       /*no_gain_allowed=*/true},
      // The verification seeds are fixed, so the bucket collision comes on
      // the same seed every run.
      {"cache_keyed_on_coarse_content",
       "caching outputs keyed on a content fingerprint",
       TaskKind::kChain,
       true,
       {O::kViolation},
       {"stale_output"}},
      // batch-and-skip; detecting warm-up vs timed phases
      {"batch_and_skip",
       "batch-and-skip across timed calls",
       TaskKind::kChain,
       true,
       {O::kViolation},
       {"timed_output_mismatch"}},
      {"warmup_detection",
       "detecting warm-up vs timed phases",
       TaskKind::kChain,
       true,
       {O::kViolation},
       {"timed_output_mismatch"}},
      // reading harness memory
      {"read_beyond_arena",
       "reading harness memory (beyond the arena)",
       TaskKind::kChain,
       false,
       {O::kCrash},
       {},
       {},
       false,
       "crashed: SIGSEGV in kf_forward"},
      {"write_before_output",
       "writing outside its tensors (before the output, in its slot's slack)",
       TaskKind::kChainWithVariant,
       false,
       {O::kViolation},
       {"out_of_bounds_write"},
       {},
       false,
       "the first 4 bytes before the start of output out (seed 0, base shape)"},
      {"read_proc_maps",
       "reading harness memory (/proc/self/maps)",
       TaskKind::kChain,
       false,
       {O::kRejected},
       {"forbidden_symbol"}},
      {"read_judge_memory_gadget",
       "reading harness memory (judge's /proc/pid/mem)",
       TaskKind::kChain,
       false,
       {O::kViolation},
       {"sandbox"}},
      // libraries outside the allow-list
      {"library_dlopen",
       "calling libraries outside the allow-list (dlopen)",
       TaskKind::kChain,
       false,
       {O::kRejected},
       {"forbidden_symbol"}},
      {"library_pytorch_symbol", "calling PyTorch", TaskKind::kChain, false, {O::kRejected}, {"forbidden_symbol"}},
      {"library_system",
       "calling programs outside the allow-list (system)",
       TaskKind::kChain,
       false,
       {O::kRejected},
       {"forbidden_symbol"}},
      // constant/zero outputs that pass loose tolerances
      {"constant_zero_output",
       "zero outputs that pass loose tolerances",
       TaskKind::kLooseSmall,
       false,
       {O::kViolation},
       {"degenerate_output"}},
      {"near_constant_output",
       "near-constant outputs that pass loose tolerances",
       TaskKind::kLooseSmall,
       false,
       {O::kViolation},
       {"degenerate_output"}},
      {"loose_tolerance_half_result",
       "rough results that pass a loose atol",
       TaskKind::kLooseSmall,
       false,
       {O::kWrong},
       {"relative_error"}},
      // shape hard-coding
      {"shape_hardcoded", "shape hard-coding", TaskKind::kChainWithVariant, false, {O::kWrong}},
      // editing or escaping the harness
      {"escape_write_outside_scratch",
       "escaping the harness (file outside scratch)",
       TaskKind::kChain,
       false,
       {O::kRejected},
       {"forbidden_symbol"}},
      {"escape_chdir", "escaping the harness (chdir)", TaskKind::kChain, false, {O::kRejected}, {"forbidden_symbol"}},
      {"escape_ptrace", "editing the harness (ptrace)", TaskKind::kChain, false, {O::kRejected}, {"forbidden_symbol"}},
      {"escape_write_gadget",
       "escaping the harness (openat via libc)",
       TaskKind::kChain,
       false,
       {O::kViolation},
       {"sandbox"}},
      {"load_constructor",
       "work at load time (constructor)",
       TaskKind::kChain,
       false,
       {O::kRejected},
       {"load_constructor"}},
      {"load_ifunc_resolver",
       "work at load time (IFUNC resolver)",
       TaskKind::kChain,
       false,
       {O::kRejected},
       {"load_constructor"}},
      {"load_init_array_entry",
       "work at load time (.init_array entry)",
       TaskKind::kChain,
       false,
       {O::kRejected},
       {"load_constructor"}},
      {"load_search_path",
       "loading other code (DT_RUNPATH, executable stack)",
       TaskKind::kChain,
       false,
       {O::kRejected},
       {"load_section"},
       {"-Wl,-rpath,/tmp/kforge-planted", "-Wl,-z,execstack"}},
      {"raw_syscall_instruction",
       "escaping the allow-list (inline syscall)",
       TaskKind::kChain,
       false,
       {O::kRejected},
       {"raw_syscall"}},
      // network, file or process escapes
      {"network_socket", "network escape", TaskKind::kChain, false, {O::kRejected}, {"forbidden_symbol"}},
      {"network_socket_gadget",
       "network escape (socket via libc)",
       TaskKind::kChain,
       false,
       {O::kViolation},
       {"sandbox"}},
      {"process_fork_exec", "process escape", TaskKind::kChain, false, {O::kRejected}, {"forbidden_symbol"}},
      {"process_fork_gadget", "process escape (fork via libc)", TaskKind::kChain, false, {O::kViolation}, {"sandbox"}},
      {"process_execve_gadget",
       "process escape (execve via libc)",
       TaskKind::kChain,
       false,
       {O::kViolation},
       {"sandbox"}},
      {"file_etc_write", "file escape (/etc)", TaskKind::kChain, false, {O::kRejected}, {"forbidden_symbol"}},
  };
  return kCases;
}

INSTANTIATE_TEST_SUITE_P(Cpu, AdversarialCpu, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& param) { return std::string(param.param.name); });

// Faster-than-roofline: its own Executor, whose judge is told (through
// KFORGE_PEAK_MEMORY_BPS, read when the judge starts) that memory moves at
// 1 MB/s; see tests/adversarial/cpu/faster_than_roofline.cpp.
TEST(AdversarialCpuRoofline, FasterThanRoofline) {
  ::setenv("KFORGE_PEAK_MEMORY_BPS", "1e6", 1);
  env::ExecutorConfig config;
  config.backend = env::BackendKind::kCpu;
  std::unique_ptr<env::Executor> executor = env::make_executor(config);
  executor->device_name();  // the judge has started and read the variable
  ::unsetenv("KFORGE_PEAK_MEMORY_BPS");
  Case c{"faster_than_roofline", "faster-than-roofline results", TaskKind::kChainLarge, true, {O::kViolation},
         {"below_roofline"}};
  env::EvalReport r = evaluate(executor.get(), c);
  expect_no_speed_reward(c, r);
  ASSERT_TRUE(r.timing.has_value()) << r.summary;
  EXPECT_TRUE(r.timing->roofline["checked"].get<bool>()) << to_json(*r.timing).dump();
}

// Every candidate file is in the table (or is the roofline case) and says
// what it tries and what must catch it.
TEST(AdversarialCpuCorpus, EveryCandidateIsListedAndDocumented) {
  std::vector<std::string> listed = {"faster_than_roofline"};
  for (const auto& c : cases()) listed.push_back(c.name);
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(KFORGE_SOURCE_DIR) + "/tests/adversarial/cpu")) {
    if (entry.path().extension() != ".cpp") continue;
    std::string name = entry.path().stem().string();
    EXPECT_NE(std::find(listed.begin(), listed.end(), name), listed.end()) << name << " is not in the table";
    std::string text = source_of(name);
    EXPECT_TRUE(text.rfind("// Exploit", 0) == 0) << name << " must start with a comment naming the exploit";
    EXPECT_NE(text.find("Must be caught by:"), std::string::npos) << name << " must say which check catches it";
  }
}

}  // namespace
}  // namespace kforge::adversarial
