// Replay on trajectory files produced by real CPU-backend episodes
// (recorded_episodes.h): reading, summaries, techniques, re-evaluation through
// the environment, the HTML report with its plots, and `kforge replay`.
#include "kforge/rollout/replay/replay.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>

#include "kforge/core/error.h"
#include "kforge/core/process.h"
#include "kforge/core/remove_tree.h"
#include "kforge/core/trajectory.h"
#include "kforge/env/analysis.h"
#include "kforge/env/analysis/sass.h"
#include "kforge/rollout/jsonl_sink.h"
#include "kforge/rollout/replay/replay_report.h"
#include "recorded_episodes.h"

namespace kforge::rollout::replay {
namespace {

namespace fs = std::filesystem;
using testing::gym_data;
using testing::recorded_episodes_file;
using testing::rollout_data;
using testing::source_dir;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const RecordedEpisode& episode(const RecordedSet& set, const char* id) {
  for (const auto& e : set.episodes) {
    if (e.id == id) return e;
  }
  throw std::runtime_error(std::string("no episode ") + id);
}

const GroupSummary& group(const std::vector<GroupSummary>& groups, const char* key) {
  for (const auto& g : groups) {
    if (g.key == key) return g;
  }
  throw std::runtime_error(std::string("no group ") + key);
}

class TempDir {
 public:
  TempDir() {
    std::string p = (fs::temp_directory_path() / "kforge-replay-test-XXXXXX").string();
    if (mkdtemp(p.data()) == nullptr) throw std::runtime_error("mkdtemp");
    path_ = p;
  }
  ~TempDir() { kforge::remove_tree(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void write_lines(const fs::path& file, const std::vector<std::string>& lines, bool final_newline = true) {
  std::ofstream out(file);
  for (size_t i = 0; i < lines.size(); ++i) out << lines[i] << (i + 1 < lines.size() || final_newline ? "\n" : "");
}

std::vector<std::string> read_lines(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

TEST(ReplayReadTest, RealEpisodesAreReadAndTheirEndingsDerived) {
  const RecordedSet set = read_trajectory_files({recorded_episodes_file()});
  ASSERT_TRUE(set.problems.empty()) << set.problems[0].message;
  ASSERT_EQ(set.episodes.size(), 5u);

  const RecordedEpisode& a = episode(set, "ep-a");
  EXPECT_TRUE(a.terminated);
  EXPECT_TRUE(a.success) << a.failure_cause;
  EXPECT_EQ(a.turns_used, 3);
  EXPECT_EQ(a.final_turn, 2);
  ASSERT_TRUE(a.final_speedup.has_value());
  EXPECT_GT(*a.final_speedup, 0.0);
  EXPECT_EQ(a.seed, 11u);
  ASSERT_EQ(a.turns.size(), 3u);
  EXPECT_EQ(a.turns[0].action, "compile");
  EXPECT_EQ(a.turns[1].action, "verify");
  EXPECT_TRUE(a.turns[1].solution_inherited) << "a verify without source acts on the last solution";
  EXPECT_EQ(a.turns[1].solution->source, a.turns[0].solution->source);
  EXPECT_EQ(a.turns[1].outcome, "correct");
  ASSERT_TRUE(a.turns[2].step.has_value()) << "read from the turn's env info";
  EXPECT_EQ(a.turns[2].step->action, "submit");
  EXPECT_EQ(a.turns[2].step->seed, 11u);
  EXPECT_EQ(a.turns[2].solution->mode, SolutionMode::kCpp);

  const RecordedEpisode& b = episode(set, "ep-b");
  EXPECT_FALSE(b.success);
  EXPECT_EQ(b.failure_cause, "wrong");
  EXPECT_EQ(b.turns_used, 1);
  EXPECT_FALSE(b.turns[0].step.has_value()) << "ep-b was recorded without env info: observation data is used";
  EXPECT_EQ(b.turns[0].outcome, "wrong");

  const RecordedEpisode& c = episode(set, "ep-c");
  EXPECT_TRUE(c.truncated);
  EXPECT_FALSE(c.terminated);
  EXPECT_EQ(c.turns_used, 4);
  EXPECT_TRUE(c.success) << "the truncated episode's last solution was auto-submitted: " << c.failure_cause;
  EXPECT_EQ(c.final_turn, 3);
  EXPECT_TRUE(c.final_speedup.has_value());

  const RecordedEpisode& d = episode(set, "ep-d");
  EXPECT_EQ(d.turns[0].action, "invalid");
  EXPECT_EQ(d.turns[0].error_kind, "invalid_action");
  EXPECT_EQ(d.turns_used, 2) << "a malformed call is the policy's turn";
  EXPECT_TRUE(d.success);
  EXPECT_TRUE(d.task.is_object());

  const RecordedEpisode& e = episode(set, "ep-e");
  EXPECT_EQ(e.failure_cause, "policy_error");
  EXPECT_EQ(e.turns_used, 0);
  EXPECT_TRUE(has(e.policy_error, "HTTP 503"));
}

// Trajectory files of schema version 1 written by an earlier build (the
// recorded episodes above and a rollout worker's truncated, auto-submitted
// episode, as main wrote them at 57eb3a8) read as they did, their step infos
// into StepInfo and back unchanged.
TEST(ReplayReadTest, SchemaVersion1FilesOfAnEarlierBuildStillRead) {
  const fs::path dir = rollout_data() / "schema_v1";
  const RecordedSet old = read_trajectory_files({dir});
  ASSERT_TRUE(old.problems.empty()) << old.problems[0].message;
  ASSERT_EQ(old.files, 2u);
  ASSERT_EQ(old.episodes.size(), 6u);
  const RecordedSet now = read_trajectory_files({recorded_episodes_file()});
  for (const auto& e : now.episodes) {
    const RecordedEpisode& o = episode(old, e.id.c_str());
    EXPECT_EQ(o.schema_version, 1);
    EXPECT_EQ(o.success, e.success) << e.id;
    EXPECT_EQ(o.failure_cause, e.failure_cause) << e.id;
    EXPECT_EQ(o.final_turn, e.final_turn) << e.id;
    EXPECT_EQ(o.turns_used, e.turns_used) << e.id;
    EXPECT_EQ(o.seed, e.seed) << e.id;
    ASSERT_EQ(o.turns.size(), e.turns.size()) << e.id;
    for (size_t i = 0; i < e.turns.size(); ++i) {
      EXPECT_EQ(o.turns[i].action, e.turns[i].action) << e.id << " turn " << i;
      EXPECT_EQ(o.turns[i].outcome, e.turns[i].outcome) << e.id << " turn " << i;
      EXPECT_EQ(o.turns[i].error_kind, e.turns[i].error_kind) << e.id << " turn " << i;
      EXPECT_EQ(o.turns[i].step.has_value(), e.turns[i].step.has_value()) << e.id << " turn " << i;
    }
  }
  // The rollout worker's episode: two compiles, then the turn budget; its
  // last solution was auto-submitted and scored correct.
  const RecordedEpisode* worker = nullptr;
  for (const auto& e : old.episodes) {
    if (e.file.find("rollout-turn-budget") != std::string::npos) worker = &e;
  }
  ASSERT_NE(worker, nullptr);
  EXPECT_TRUE(worker->truncated);
  EXPECT_EQ(worker->truncation_reason, "max_turns");
  EXPECT_TRUE(worker->success) << worker->failure_cause;
  ASSERT_TRUE(worker->turns.back().step.has_value());
  const env::StepInfo& last = *worker->turns.back().step;
  ASSERT_TRUE(last.final_evaluation.has_value());
  EXPECT_TRUE(last.final_evaluation->auto_submitted);
  EXPECT_TRUE(last.final_evaluation->eval_report.has_value());
  EXPECT_EQ(last.truncation_reason, "max_turns");

  // Every recorded step info reads into StepInfo and writes back as it was.
  int infos = 0;
  for (const char* name : {"replay-episodes.jsonl", "rollout-turn-budget.jsonl"}) {
    std::ifstream in(dir / name);
    for (std::string line; std::getline(in, line);) {
      const json t = json::parse(line);
      for (const auto& turn : t["turns"]) {
        if (!turn.contains("info") || !turn["info"].contains("env")) continue;
        const json& recorded = turn["info"]["env"];
        EXPECT_EQ(env::to_json(env::step_info_from_json(recorded)), recorded) << recorded.dump(1);
        ++infos;
      }
    }
  }
  EXPECT_EQ(infos, 9) << "ep-a 3, ep-c 4, the worker's 2";
}

// Trajectory files of schema version 2, the shape written before the
// speedup's interval: the recorded episodes above as version 2 wrote them
// (made from this suite's recording by removing the keys version 3 added:
// the measurements' speedup_eager_lo, speedup_eager_hi, speedup_confidence,
// the timing summaries' speedup_interval, and the reward description's new
// defaults). They read as they did, their measurements without an interval,
// and every step info writes back unchanged.
TEST(ReplayReadTest, SchemaVersion2FilesStillRead) {
  const fs::path file = rollout_data() / "schema_v2" / "replay-episodes.jsonl";
  const RecordedSet old = read_trajectory_files({file});
  ASSERT_TRUE(old.problems.empty()) << old.problems[0].message;
  const RecordedSet now = read_trajectory_files({recorded_episodes_file()});
  ASSERT_EQ(old.episodes.size(), now.episodes.size());
  bool interval_now = false;
  for (const auto& e : now.episodes) {
    const RecordedEpisode& o = episode(old, e.id.c_str());
    EXPECT_EQ(o.schema_version, 2);
    EXPECT_EQ(e.schema_version, kTrajectorySchemaVersion);
    EXPECT_EQ(o.success, e.success) << e.id;
    EXPECT_EQ(o.failure_cause, e.failure_cause) << e.id;
    EXPECT_EQ(o.final_speedup.has_value(), e.final_speedup.has_value()) << e.id;
    ASSERT_EQ(o.turns.size(), e.turns.size()) << e.id;
    for (size_t i = 0; i < e.turns.size(); ++i) {
      EXPECT_EQ(o.turns[i].outcome, e.turns[i].outcome) << e.id << " turn " << i;
      if (!o.turns[i].step) continue;
      EXPECT_FALSE(o.turns[i].step->measurement.speedup_eager_lo.has_value()) << e.id << " turn " << i;
      interval_now = interval_now || (e.turns[i].step && e.turns[i].step->measurement.speedup_eager_lo);
    }
  }
  // The recording of this build does carry intervals (its timed submit).
  EXPECT_TRUE(interval_now);
  std::ifstream in(file);
  int infos = 0;
  for (std::string line; std::getline(in, line);) {
    const json t = json::parse(line);
    for (const auto& turn : t["turns"]) {
      if (!turn.contains("info") || !turn["info"].contains("env")) continue;
      const json& recorded = turn["info"]["env"];
      EXPECT_EQ(env::to_json(env::step_info_from_json(recorded)), recorded) << recorded.dump(1);
      ++infos;
    }
  }
  EXPECT_GT(infos, 0);
}

// The template policy was called "baseline" and wrote that name into its
// trajectories (info.policy, the policy versions, each turn's version).
// data/baseline_policy holds schema_v1's worker episode with exactly those
// strings, as baseline_policy.cpp wrote them at c911a58: both readers take
// it, and the name reads back as recorded, not rewritten.
TEST(ReplayReadTest, TrajectoriesOfThePolicyWhenItWasCalledBaselineStillRead) {
  const fs::path file = rollout_data() / "baseline_policy" / "rollout-baseline-policy.jsonl";
  const RecordedSet old = read_trajectory_files({file});
  ASSERT_TRUE(old.problems.empty()) << old.problems[0].message;
  ASSERT_EQ(old.episodes.size(), 1u);
  const RecordedEpisode& e = old.episodes[0];
  EXPECT_EQ(e.policy_version, "baseline");
  EXPECT_EQ(e.policy_version_end, "baseline");
  EXPECT_TRUE(e.success) << e.failure_cause;
  EXPECT_EQ(e.truncation_reason, "max_turns");
  const ReplaySummary summary = summarize(old.episodes);
  ASSERT_EQ(summary.by_policy_version.size(), 1u);
  EXPECT_EQ(summary.by_policy_version[0].key, "baseline");

  // The worker's own reader (kforge rollout --fork).
  const std::vector<Trajectory> read = read_trajectories(file);
  ASSERT_EQ(read.size(), 1u);
  EXPECT_EQ(read[0].info["policy"], "baseline mode=cpp explore_turns=0 seed=3");
  EXPECT_EQ(read[0].policy_version_start, "baseline");
  EXPECT_EQ(read[0].turns.size(), e.turns.size());
}

TEST(ReplayReadTest, SummaryPerTaskAndPolicyVersion) {
  const RecordedSet set = read_trajectory_files({recorded_episodes_file()});
  const ReplaySummary s = summarize(set.episodes);
  EXPECT_EQ(s.overall.episodes, 5u);
  EXPECT_EQ(s.overall.successes, 3u);
  const GroupSummary& affine = group(s.by_task, "test/affine_relu6_small");
  EXPECT_EQ(affine.episodes, 4u);
  EXPECT_EQ(affine.successes, 2u);
  EXPECT_EQ(affine.failure_causes.at("wrong"), 1u);
  EXPECT_EQ(affine.failure_causes.at("policy_error"), 1u);
  EXPECT_DOUBLE_EQ(affine.turns_used.max, 4.0);
  EXPECT_EQ(affine.speedup.n, 2u) << "the two successful affine episodes were timed";
  const GroupSummary& timed = group(s.by_task, "test/scale_bias_relu_timed");
  EXPECT_EQ(timed.episodes, 1u);
  EXPECT_DOUBLE_EQ(timed.success_rate(), 1.0);
  EXPECT_EQ(group(s.by_policy_version, "v1").episodes, 2u);
  EXPECT_EQ(group(s.by_policy_version, "v1").successes, 1u);
  EXPECT_EQ(group(s.by_policy_version, "v2").episodes, 3u);
  EXPECT_EQ(group(s.by_policy_version, "v2").successes, 2u);
  // ep-a solved at turn 1 (verify correct), ep-c at turn 0; ep-b and ep-e never.
  const auto& progress = s.progress.at("test/affine_relu6_small");
  ASSERT_EQ(progress.size(), 4u);
  EXPECT_DOUBLE_EQ(progress[0].solved_fraction, 0.25);
  EXPECT_DOUBLE_EQ(progress[1].solved_fraction, 0.5);
  EXPECT_DOUBLE_EQ(progress[3].solved_fraction, 0.5);
  EXPECT_TRUE(progress[3].mean_best_speedup.has_value());
  const std::string text = format_summary(s);
  EXPECT_TRUE(has(text, "test/affine_relu6_small")) << text;
  EXPECT_TRUE(has(text, "policy_error x1")) << text;
}

TEST(ReplayReadTest, BadLinesAreReportedByLineAndTheRestIsRead) {
  TempDir dir;
  const auto good = read_lines(recorded_episodes_file());
  json future = json::parse(good[0]);
  future["schema_version"] = 99;
  json stolen = json::parse(good[1]);
  stolen["turns"][0]["action"]["solution"] = {{"mode", "cpp"}, {"source_file", "/etc/passwd"}};
  json wrapped = {{"worker", "w1"}, {"seq", 7}, {"trajectory", json::parse(good[2])}};
  const fs::path file = dir.path() / "mixed.jsonl";
  write_lines(file,
              {good[0], "[1, 2, 3]", future.dump(), R"({"messages": [], "reward": 1.0})", stolen.dump(), wrapped.dump(),
               "", good[3], good[4].substr(0, good[4].size() / 2)},
              /*final_newline=*/false);
  const RecordedSet set = read_trajectory_files({file, dir.path() / "missing.jsonl"});
  std::vector<std::string> ids;
  for (const auto& e : set.episodes) ids.push_back(e.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"ep-a", "ep-c", "ep-d"})) << "the torn last line is skipped silently";
  ASSERT_EQ(set.problems.size(), 5u);
  EXPECT_EQ(set.problems[0].line, 2u);
  EXPECT_TRUE(has(set.problems[0].message, "expected a trajectory object")) << set.problems[0].message;
  EXPECT_EQ(set.problems[1].line, 3u);
  EXPECT_TRUE(has(set.problems[1].message, "schema_version: 99 is not readable by this build"))
      << set.problems[1].message;
  EXPECT_TRUE(has(set.problems[2].message, "a chat-messages export")) << set.problems[2].message;
  EXPECT_EQ(set.problems[3].line, 5u);
  EXPECT_TRUE(has(set.problems[3].message, "source_file")) << set.problems[3].message;
  EXPECT_TRUE(has(set.problems[4].file, "missing.jsonl"));
  EXPECT_EQ(set.problems[4].message, "no such file");
}

TEST(ReplayTechniquesTest, SourceEvidenceIgnoresComments) {
  Solution cuda;
  cuda.mode = SolutionMode::kCuda;
  cuda.source = read_text_file(source_dir() / "examples/sum_of_squares/cuda/fast.cu");
  const TechniqueReport r = techniques_from_source(cuda, nullptr);
  for (const char* t : {"shared_memory", "vectorized_access", "warp_shuffle", "read_only_cache"}) {
    EXPECT_TRUE(r.has(t)) << t;
  }
  EXPECT_FALSE(r.has("tensor_cores"));
  EXPECT_FALSE(r.has("fusion")) << "no task given, no fusion verdict";

  Solution commented;
  commented.mode = SolutionMode::kCuda;
  commented.source =
      "// uses __shfl_xor_sync and float4 and wmma\n/* __shared__ float s[32]; #pragma unroll */\n"
      "__global__ void k(float* y) { y[0] = 1.0f; }\n";
  EXPECT_TRUE(techniques_from_source(commented, nullptr).found.empty());

  Solution ptx;
  ptx.mode = SolutionMode::kCuda;
  ptx.source =
      "__global__ void k() { asm volatile(\"wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0}, ...;\");\n"
      "asm volatile(\"cp.async.bulk.tensor.2d.shared::cluster.global [%0], [%1];\"); }\n";
  const TechniqueReport p = techniques_from_source(ptx, nullptr);
  EXPECT_EQ(p.names(), (std::vector<std::string>{"tensor_cores", "wgmma", "tma"}));
  EXPECT_FALSE(p.has("async_copy")) << "cp.async.bulk is TMA, not cp.async";
}

TEST(ReplayTechniquesTest, FusionAndSimdOnTheCpuExamples) {
  const TaskSpec task = load_task(rollout_data() / "affine_relu6_small.json");
  Solution fast;
  fast.mode = SolutionMode::kCpp;
  fast.source = read_text_file(source_dir() / "examples/affine_relu6/cpu/fast.cpp");
  const TechniqueReport r = techniques_from_source(fast, &task);
  EXPECT_EQ(r.names(), (std::vector<std::string>{"fusion", "simd"}));
  Solution staged = fast;
  staged.source = "#include <vector>\nstd::vector<float> tmp;\n" + fast.source;
  EXPECT_FALSE(techniques_from_source(staged, &task).has("fusion")) << "an intermediate buffer";

  Solution two_kernels;
  two_kernels.mode = SolutionMode::kCuda;
  two_kernels.source = "__global__ void a() {}\n__global__ void b() {}\n";
  const TechniqueReport k = techniques_from_source(two_kernels, &task);
  ASSERT_TRUE(k.has("fusion")) << "3 graph ops in 2 kernels";
  EXPECT_EQ(k.found[0].evidence[0], "source: 3 graph ops in 2 kernels");
}

TEST(ReplayTechniquesTest, SassEvidenceFromTheSassMixFacts) {
  const std::string listing = read_text_file(source_dir() / "tests/analysis/fixtures/sass_sm90a_handwritten.txt");
  json kernels = json::array();
  for (const auto& f : env::parse_sass(listing)) kernels.push_back(env::to_json(env::summarize_sass(f), 10));
  TechniqueReport r;
  add_sass_evidence({{"kernels", kernels}}, &r);
  EXPECT_TRUE(r.sass_read);
  for (const char* t : {"shared_memory", "vectorized_access", "tensor_cores", "wgmma", "async_copy"}) {
    EXPECT_TRUE(r.has(t)) << t;
  }
  const auto tc = std::find_if(r.found.begin(), r.found.end(), [](const auto& f) { return f.name == "tensor_cores"; });
  EXPECT_TRUE(has(tc->evidence[0], "HGMMA")) << tc->evidence[0];
}

TEST(ReplayTechniquesTest, CudaSolutionsSaySassIsUnavailableWithoutCuobjdump) {
  Solution cuda;
  cuda.mode = SolutionMode::kCuda;
  cuda.source = read_text_file(source_dir() / "examples/sum_of_squares/cuda/fast.cu");
  const TechniqueReport r = find_techniques(cuda, nullptr, TechniqueOptions{});
  if (env::find_cuda_binary_tool("cuobjdump")) {
    GTEST_SKIP() << "cuobjdump is present: the gpu suite checks the SASS path";
  }
  EXPECT_FALSE(r.sass_read);
  EXPECT_EQ(r.sass_note, "SASS not read: cuobjdump not found on this machine");
  EXPECT_TRUE(r.has("warp_shuffle")) << "source evidence is still there";
}

TEST(ReplayReevaluationTest, RecordedSubmitsAreRerunAndCompared) {
  const RecordedSet set = read_trajectory_files({recorded_episodes_file()});
  std::vector<RecordedEpisode> episodes = set.episodes;
  // A submit recorded on a GPU machine: its mode needs the cuda backend.
  RecordedEpisode gpu = episode(set, "ep-b");
  gpu.id = "ep-gpu";
  gpu.turns[0].solution->mode = SolutionMode::kCuda;
  episodes.push_back(gpu);
  // A task nobody can look up.
  RecordedEpisode lost = episode(set, "ep-b");
  lost.id = "ep-lost";
  lost.task_id = "test/not_in_any_set";
  episodes.push_back(lost);

  const TaskSpec affine = load_task(rollout_data() / "affine_relu6_small.json");
  TaskLookup lookup = [&](const RecordedEpisode& e) -> const TaskSpec* {
    if (e.task_id == affine.id) return &affine;
    static const TaskSpec timed = load_task(gym_data() / "scale_bias_relu_timed.json");
    return e.task_id == timed.id ? &timed : nullptr;
  };
  ReevalOptions options;
  options.repeats = 2;
  const ReevalReport r = reevaluate(episodes, lookup, testing::fast_config(), options);
  ASSERT_EQ(r.rows.size(), 5u) << "the submits of ep-a, ep-b, ep-d, ep-gpu, ep-lost";
  EXPECT_EQ(r.runs, 6u) << "3 runnable submits x 2 repeats";
  std::map<std::string, const ReevalRow*> by_id;
  for (const auto& row : r.rows) by_id[row.trajectory_id] = &row;

  // A wrong solution fails the same way with the same seed: the reward is
  // the failure reward, exactly.
  const ReevalRow& b = *by_id.at("ep-b");
  EXPECT_EQ(b.verdict, ReevalVerdict::kExact) << b.note;
  EXPECT_EQ(b.outcomes, (std::vector<std::string>{"wrong", "wrong"}));
  for (const char* id : {"ep-a", "ep-d"}) {
    const ReevalRow& row = *by_id.at(id);
    EXPECT_EQ(row.outcomes, (std::vector<std::string>{"correct", "correct"})) << id;
    EXPECT_NE(row.verdict, ReevalVerdict::kOutcomeDiffers) << id << ": " << row.note;
    EXPECT_NE(row.verdict, ReevalVerdict::kNotReevaluated) << id << ": " << row.note;
    EXPECT_EQ(row.rewards.size(), 2u);
    EXPECT_TRUE(row.speedups[0].has_value());
  }
  EXPECT_EQ(by_id.at("ep-a")->turn, 2);
  EXPECT_EQ(by_id.at("ep-gpu")->verdict, ReevalVerdict::kNotReevaluated);
  EXPECT_TRUE(has(by_id.at("ep-gpu")->note, "mode cuda needs another backend")) << by_id.at("ep-gpu")->note;
  EXPECT_TRUE(has(by_id.at("ep-lost")->note, "--tasks")) << by_id.at("ep-lost")->note;
  const std::string text = format_reevaluation(r);
  EXPECT_TRUE(has(text, "5 recorded submits, 3 re-run (6 runs)")) << text;
}

TEST(ReplayReevaluationTest, RewardIsScoredAtTheRecordedTurn) {
  // A submit recorded at turn 3 under a linear turn cost pays 4x the cost of
  // a first-turn submit; re-evaluation must pay the same, not a fresh episode's.
  const RecordedSet set = read_trajectory_files({recorded_episodes_file()});
  RecordedEpisode b = episode(set, "ep-b");
  TempDir dir;
  const fs::path reward = dir.path() / "linear.yaml";
  write_lines(reward, {"name: linear_cost", "terms:", "  - type: tiered", "    margin: 0.05", "  - type: turn_cost",
                       "    cost: 0.5", "    schedule: linear"});
  env::EnvConfig config = testing::fast_config();
  config.reward.function = reward.string();
  config.reward.step_terms = {"turn_cost"};
  b.turns[0].env_turn = 3;
  b.turns[0].reward = -1.0 - 0.5 * 4;  // the tiered failure reward plus 4 turns of linear cost
  TaskSpec affine = load_task(rollout_data() / "affine_relu6_small.json");
  ReevalOptions options;
  options.repeats = 1;
  const ReevalReport r = reevaluate(
      {b}, [&](const RecordedEpisode&) { return &affine; }, config, options);
  ASSERT_EQ(r.rows.size(), 1u);
  ASSERT_EQ(r.rows[0].rewards.size(), 1u) << r.rows[0].note;
  EXPECT_EQ(r.rows[0].verdict, ReevalVerdict::kExact)
      << "recorded " << r.rows[0].recorded_reward << ", re-run " << r.rows[0].rewards[0];
  // The recording says which reward it paid; a different one is pointed out.
  EXPECT_EQ(b.recorded_reward, "default");
  EXPECT_EQ(b.recorded_backend, "cpu");
  EXPECT_TRUE(has(r.rows[0].note, "recorded with reward default, re-scored with linear_cost")) << r.rows[0].note;
}

TEST(ReplayReportTest, HtmlWithPlotsFromARealReplay) {
  ReplayOptions options;
  options.task_sets = {rollout_data()};
  options.reevaluate = true;
  options.reeval.repeats = 1;
  options.env = testing::fast_config();
  ReplayAnalysis a = analyze_replay({recorded_episodes_file()}, options);
  ASSERT_EQ(a.recorded.episodes.size(), 5u);
  ASSERT_TRUE(a.reevaluation.has_value());
  EXPECT_EQ(a.reevaluation->rows.size(), 3u);
  ASSERT_FALSE(a.technique_stats.empty());
  EXPECT_EQ(a.technique_stats.front().name, "fusion") << "ep-a's final solution is examples' fused fast.cpp";
  // An id that would be markup in the report.
  a.recorded.episodes[0].task_id = "<script>alert(1)</script>";
  a.summary = summarize(a.recorded.episodes);

  TempDir dir;
  const ReportResult r = write_replay_report(dir.path() / "report", a);
  EXPECT_EQ(r.plot_error, "");
  const std::vector<std::string> expected = {
      "reward_distribution.png", "speedup_distribution.png", "progress_over_turns.png", "failure_causes.png",
      "turns_used.png",          "techniques.png",           "reevaluation.png"};
  EXPECT_EQ(r.plots, expected);
  for (const auto& p : r.plots) {
    const std::string png = read_text_file(dir.path() / "report" / p);
    EXPECT_EQ(png.substr(1, 3), "PNG") << p;
  }
  const std::string html = read_text_file(r.html);
  EXPECT_TRUE(has(html, "&lt;script&gt;alert(1)&lt;/script&gt;"));
  EXPECT_FALSE(has(html, "<script>"));
  EXPECT_TRUE(has(html, "<img src=\"progress_over_turns.png\""));
  EXPECT_TRUE(has(html, "Re-evaluation on this machine"));
  EXPECT_TRUE(has(html, "policy_error"));
  const json data = json::parse(read_text_file(r.data));
  EXPECT_EQ(data["episodes"].size(), 5u);
}

TEST(ReplayReportTest, WithoutPythonTheHtmlSaysWhyThereAreNoPlots) {
  ReplayOptions options;
  options.techniques = false;
  const ReplayAnalysis a = analyze_replay({recorded_episodes_file()}, options);
  TempDir dir;
  ReportOptions ro;
  ro.python = "/nonexistent/python3";
  const ReportResult r = write_replay_report(dir.path(), a, ro);
  EXPECT_TRUE(r.plots.empty());
  EXPECT_FALSE(r.plot_error.empty());
  EXPECT_TRUE(has(read_text_file(r.html), "Plots: ")) << "the reason is in the report";
  EXPECT_TRUE(has(read_text_file(r.html), "test/affine_relu6_small"));
}

struct Cmd {
  int code = -1;
  std::string output;
};

Cmd run_kforge(const std::string& args) {
  const std::string cache = std::string(KFORGE_BINARY_DIR) + "/tests/gym/compile-cache";
  // The arguments are written as a shell reads them (quoted paths), so
  // /bin/sh runs the line, named as the program.
  ProcessOptions options;
  options.env["KFORGE_CACHE_DIR"] = cache;
  options.timeout_s = std::numeric_limits<double>::infinity();  // ctest bounds it
  options.max_output_bytes = size_t{256} << 20;
  const ProcessResult p =
      run_process({"/bin/sh", "-c", "'" + std::string(KFORGE_BINARY_DIR) + "/cli/kforge' " + args}, options);
  Cmd r;
  r.code = p.exit_code;
  r.output = p.output;
  return r;
}

TEST(ReplayCliTest, ReplayReevaluatesAndWritesTheReport) {
  TempDir dir;
  const Cmd r = run_kforge("replay '" + recorded_episodes_file().string() + "' --tasks '" + rollout_data().string() +
                           "' --reevaluate --repeats 1 --config '" + (gym_data() / "fast.yaml").string() + "' --out '" +
                           (dir.path() / "rep").string() + "'");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "5 episodes, 2 tasks, 2 policy versions")) << r.output;
  EXPECT_TRUE(has(r.output, "3 recorded submits, 3 re-run")) << r.output;
  EXPECT_TRUE(has(r.output, "report: " + (dir.path() / "rep" / "index.html").string())) << r.output;
  EXPECT_TRUE(fs::exists(dir.path() / "rep" / "reward_distribution.png"));
}

TEST(ReplayCliTest, ExitCodesForBadAndPartialInput) {
  TempDir dir;
  const fs::path bad = dir.path() / "bad.jsonl";
  write_lines(bad, {"[1]"});
  const Cmd none = run_kforge("replay '" + bad.string() + "' --no-report");
  EXPECT_EQ(none.code, 2) << none.output;
  EXPECT_TRUE(has(none.output, "no trajectory could be read")) << none.output;
  EXPECT_TRUE(has(none.output, "bad.jsonl:1")) << none.output;

  const fs::path partial = dir.path() / "partial.jsonl";
  auto lines = read_lines(recorded_episodes_file());
  lines.insert(lines.begin() + 1, "{\"schema_version\": 1}");
  write_lines(partial, lines);
  const Cmd some = run_kforge("replay '" + partial.string() + "' --no-report --json");
  EXPECT_EQ(some.code, 1) << some.output;
  const json j = json::parse(some.output.substr(some.output.find('{')));
  EXPECT_EQ(j["episodes"].size(), 5u);
  EXPECT_EQ(j["problems"][0]["line"], 2);
}

}  // namespace
}  // namespace kforge::rollout::replay
