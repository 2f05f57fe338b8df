#include "kforge/env/observation.h"

#include <gtest/gtest.h>

namespace kforge::env {
namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

StepRecord record(const std::string& action) {
  StepRecord r;
  r.action = action;
  r.turn = 1;
  r.max_turns = 5;
  r.solution_mode = "cpp";
  r.solution_hash = "0123456789abcdef";
  return r;
}

TEST(ObservationTest, CompileErrorShowsTheDiagnostics) {
  StepRecord r = record("compile");
  CompileResult c;
  c.ok = false;
  c.diagnostics = "candidate.cpp:7:10: error: 'undeclared_scale' was not declared in this scope";
  r.compile = c;
  r.measurement.outcome = Outcome::kCompileError;
  const Observation o = step_observation(r);
  EXPECT_TRUE(has(o.text, "Compilation failed")) << o.text;
  EXPECT_TRUE(has(o.text, "undeclared_scale")) << o.text;
  EXPECT_TRUE(has(o.text, "[compile, turn 2/5] solution 01234567")) << o.text;
  EXPECT_TRUE(has(o.text, "3 turns left")) << o.text;
  EXPECT_EQ(o.data["compile"]["ok"], false);
  EXPECT_EQ(o.data["outcome"], "compile_error");
}

TEST(ObservationTest, LongDiagnosticsAreCut) {
  StepRecord r = record("compile");
  CompileResult c;
  for (int i = 0; i < 200; ++i) c.diagnostics += "candidate.cpp:" + std::to_string(i) + ": error: bad\n";
  r.compile = c;
  const Observation o = step_observation(r);
  EXPECT_TRUE(has(o.text, "more lines cut")) << o.text;
  EXPECT_FALSE(has(o.text, "candidate.cpp:150:"));
  EXPECT_EQ(o.data["compile"]["diagnostics"], c.diagnostics) << "the data keeps everything";
}

TEST(ObservationTest, MismatchStatisticsNameTheFailingCheck) {
  StepRecord r = record("verify");
  EvalReport e;
  e.outcome = Outcome::kWrong;
  e.verification = json::array({{{"seed", 0}, {"variant", 0}, {"passed", true}, {"max_abs_err", 0.0}},
                                {{"seed", 1},
                                 {"variant", 1},
                                 {"shapes", {{"x", {17, 32}}}},
                                 {"passed", false},
                                 {"max_abs_err", 0.5},
                                 {"max_rel_err", 2.0},
                                 {"mismatches", 10},
                                 {"numel", 544},
                                 {"first_mismatch", {{"index", {0, 3}}, {"got", 1.0}, {"expected", 0.5}}}}});
  r.eval = e;
  r.measurement.outcome = Outcome::kWrong;
  const Observation o = step_observation(r);
  EXPECT_TRUE(has(o.text, "Mismatch in 1 of 2 checks")) << o.text;
  EXPECT_TRUE(has(o.text, "seed 1, shape variant 1")) << o.text;
  EXPECT_TRUE(has(o.text, "max rel err 2")) << o.text;
  EXPECT_TRUE(has(o.text, "max abs err 0.5")) << o.text;
  EXPECT_TRUE(has(o.text, "10/544 elements")) << o.text;
  EXPECT_TRUE(has(o.text, "got=1")) << o.text;
  EXPECT_EQ(o.data["correctness"]["failures"].size(), 1u);
  EXPECT_EQ(o.data["correctness"]["worst"]["max_abs_err"], 0.5);
}

TEST(ObservationTest, TimingHasSpreadAndSpeedups) {
  StepRecord r = record("profile");
  EvalReport e;
  e.outcome = Outcome::kCorrect;
  TimingSummary& t = e.timing.emplace();
  t.candidate.median_ms = 0.5;
  t.candidate.p25_ms = 0.45;
  t.candidate.p75_ms = 0.55;
  t.candidate.samples = 20;
  t.reference.median_ms = 1.0;
  t.reference.samples = 20;
  e.profile.emplace().hints = {"memory-bound at 40% of peak bandwidth: vectorize loads"};
  r.eval = e;
  r.measurement.outcome = Outcome::kCorrect;
  r.measurement.speedup_eager = 2.0;
  r.measurement.compile_ms = 0.8;
  r.measurement.speedup_compile = 1.6;
  const Observation o = step_observation(r);
  EXPECT_TRUE(has(o.text, "0.5000 ms median (p25-p75 0.45-0.55)")) << o.text;
  EXPECT_TRUE(has(o.text, "2.00x faster")) << o.text;
  EXPECT_TRUE(has(o.text, "torch.compile")) << o.text;
  EXPECT_TRUE(has(o.text, "vectorize loads")) << o.text;
  EXPECT_EQ(o.data["timing"]["speedup_eager"], 2.0);
  EXPECT_EQ(o.data["hints"].size(), 1u);
}

TEST(ObservationTest, CrashAndViolationAreExplained) {
  StepRecord r = record("submit");
  EvalReport e;
  e.outcome = Outcome::kCrash;
  e.summary = "crashed: SIGSEGV in kf_forward (seed 0, shape 0)";
  e.candidate_output = "about to write\n";
  e.verification = json::array({{{"seed", 0}, {"variant", -1}, {"passed", false}}});
  r.eval = e;
  r.measurement.outcome = Outcome::kCrash;
  r.measurement.violations = {{"foreign_stream", "a kernel ran on stream 7, not the given stream"}};
  r.terminated = true;
  const Observation o = step_observation(r);
  EXPECT_TRUE(has(o.text, "crashed: SIGSEGV in kf_forward")) << o.text;
  EXPECT_TRUE(has(o.text, "about to write")) << o.text;
  EXPECT_TRUE(has(o.text, "foreign_stream: a kernel ran on stream 7")) << o.text;
  EXPECT_TRUE(has(o.text, "The episode is over")) << o.text;
  EXPECT_FALSE(has(o.text, "Mismatch")) << "a crash is not a mismatch: " << o.text;
  EXPECT_EQ(o.data["violations"][0]["check"], "foreign_stream");
  EXPECT_EQ(o.data["episode"]["terminated"], true);
}

TEST(ObservationTest, ErrorsSayWhatWasWrong) {
  StepRecord r = record("invalid");
  r.solution_hash.clear();
  r.error = StepErrorKind::kInvalidAction;
  r.error_message = "unknown tool \"compiel\" (did you mean \"compile\"?)";
  const Observation o = step_observation(r);
  EXPECT_TRUE(has(o.text, "Invalid tool call: unknown tool")) << o.text;
  EXPECT_EQ(o.data["error"]["kind"], "invalid_action");

  r.error = StepErrorKind::kSystem;
  EXPECT_TRUE(has(step_observation(r).text, "did not count as a turn"));
}

TEST(ObservationTest, TruncationNoteCarriesTheFinalVerdict) {
  StepRecord fin = record("submit");
  fin.measurement.outcome = Outcome::kCorrect;
  fin.measurement.speedup_eager = 1.5;
  EXPECT_TRUE(has(truncation_note(fin, true), "correct, 1.50x vs eager"));
  EXPECT_TRUE(has(truncation_note(fin, false), "counts as failed"));
}

}  // namespace
}  // namespace kforge::env
