// Does the reward's own noise matter, and does the noise-aware reward help?
// (docs/rewards.md, "Noise", "Measured".) A plain program on the CPU backend,
// every evaluation real (compile, verify, time against eager PyTorch through
// the environment), on the bundled examples' tasks with their inputs' leading
// dimension divided by 4 and the template policy's variants (as
// examples/learning does). Four parts, each printed as a table:
//
//   repeat   one kernel evaluated N times at normal length: the spread of the
//            point reward and of the noise-aware (demonstrated) reward, and
//            how often the interval held the long-timed median per-round
//            ratio (what it is an interval for) and the ratio of medians;
//   group    those N evaluations as GRPO groups of identical candidates: the
//            advantages' spread with exact and with statistical ties;
//   order    candidates timed long for ground truth, then at normal length:
//            Kendall tau-b of point and of noise-aware rewards against it,
//            and for the clearly ordered pairs: concordant, tied, inverted;
//   stop     every candidate timed by target_rse (the default) and with
//            eval.stop_when_decided for the tiered and the noise_aware reward:
//            timing time and samples, and whether the tier was right.
//
//   bench_reward_noise [--parts repeat,group,order,stop] [--repeats N] [--tasks N]
//                      [--backend cpu|cuda]
//
// --backend cuda runs the same parts on a GPU: configs/env/cuda.yaml and
// examples/learning/env-cuda.yaml, the examples' own shapes, CUDA variants.
//
// The baseline of every figure is measured in the same run (the point reward,
// target_rse timing). Run it with nice on a shared machine: about 6 minutes
// on 2 cores with --tasks 1 (the default; each task adds 8 candidates).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/action.h"
#include "kforge/core/document.h"
#include "kforge/env/env.h"
#include "kforge/env/step_result.h"
#include "kforge/reward/reward.h"
#include "kforge/rollout/policy/template_policy.h"

namespace {

using namespace kforge;
namespace fs = std::filesystem;

const fs::path kSource = KFORGE_SOURCE_DIR;
const fs::path kBinary = KFORGE_BINARY_DIR;

struct Options {
  std::vector<std::string> parts = {"repeat", "group", "order", "stop"};
  std::string backend = "cpu";
  int repeats = 16;
  int tasks = 1;
};

// --- evaluations -------------------------------------------------------------

// One evaluation's figures.
struct Eval {
  Measurement m;
  double timing_ms = 0;  // the timing phase's wall time (TimingSummary::elapsed_ms)
  // The interval's own estimate (SpeedupInterval::median), when it has one.
  std::optional<double> paired_median;
  int64_t samples = 0;
  std::string stop_reason;
};

// The environment of examples/learning (short timings) or of the CPU preset
// (production timings), with fewer verification seeds: the study is about
// timing, and verification is the same for every variant.
std::string g_backend = "cpu";  // --backend

env::EnvConfig env_config(const std::string& which, const std::string& reward, bool stop_when_decided) {
  env::EnvConfig c = which == "long" || which == "production"
                         ? env::load_env_config(g_backend)
                         : env::load_env_config((kSource / ("examples/learning/env-" + g_backend + ".yaml")).string());
  c.eval.seeds = 2;
  c.max_turns = 1;
  c.time_budget_s = 0;
  c.reward.function = reward;
  c.reward.step_terms.clear();
  c.compile.cache_dir = kBinary / "bench/reward/compile-cache";
  if (which == "long") {
    // Ground truth: many samples, the longest cap.
    c.eval.min_samples = 100;
    c.eval.max_samples = 100000;
    c.eval.target_rse = 0.0005;
    c.eval.max_time_ms = 3000;
  }
  c.eval.stop_when_decided = stop_when_decided;
  return c;
}

class Evaluator {
 public:
  explicit Evaluator(env::EnvConfig config) : env_(std::move(config)) {}

  Eval evaluate(const TaskSpec& task, const std::string& source) {
    env_.reset(task, ++seed_);
    Action a;
    a.type = ActionType::kSubmit;
    Solution s;
    s.mode = g_backend == "cuda" ? SolutionMode::kCuda : SolutionMode::kCpp;
    s.source = source;
    a.solution = s;
    const env::StepResult r = env_.step(a);
    const env::StepInfo& info = r.info;
    Eval e;
    e.m = info.measurement;
    if (info.eval_report && info.eval_report->timing) {
      e.timing_ms = info.eval_report->timing->elapsed_ms;
      e.samples = info.eval_report->timing->candidate.samples;
      e.stop_reason = info.eval_report->timing->stop_reason;
      if (const auto& i = info.eval_report->timing->speedup_interval) e.paired_median = i->median;
    }
    return e;
  }

 private:
  env::Env env_;
  uint64_t seed_ = 0;
};

// --- tasks and candidates ----------------------------------------------------

// On the CPU the examples' inputs' leading dimension divided by 4 (their
// shapes take seconds per verification there); on a GPU their own shapes.
TaskSpec shrunk(const fs::path& path) {
  TaskSpec t = load_task(path);
  if (g_backend == "cuda") return t;
  for (auto& x : t.inputs) {
    if (!x.shape.empty() && x.shape[0] >= 16) x.shape[0] /= 4;
  }
  t.shape_variants.clear();
  return t;
}

std::vector<TaskSpec> study_tasks(int count) {
  std::vector<TaskSpec> out;
  for (const char* name : {"affine_relu6", "bias_gelu_residual", "layernorm_residual", "sum_of_squares"}) {
    if (static_cast<int>(out.size()) < count) out.push_back(shrunk(kSource / "examples" / name / "task.json"));
  }
  return out;
}

// Variants whose knobs matter on the CPU (fusion, unrolling, accumulators):
// some clearly apart, some nearly the same kernel.
const std::vector<std::string>& variants() {
  static const std::vector<std::string> kCpu = {
      "fuse=0 unroll=1 acc=1", "fuse=0 unroll=4 acc=4", "fuse=1 unroll=1 acc=1", "fuse=1 unroll=1 acc=4",
      "fuse=1 unroll=2 acc=4", "fuse=1 unroll=4 acc=4", "fuse=1 unroll=8 acc=8", "fuse=0 unroll=8 acc=8"};
  static const std::vector<std::string> kCuda = {"fuse=0 block=256 vec=1",          "fuse=0 block=256 vec=4",
                                                 "fuse=1 block=128 vec=1",          "fuse=1 block=256 vec=1",
                                                 "fuse=1 block=256 vec=4",          "fuse=1 block=512 vec=4",
                                                 "fuse=1 block=256 vec=4 unroll=4", "fuse=1 block=128 vec=4 unroll=2"};
  return g_backend == "cuda" ? kCuda : kCpu;
}

// A variant text with every knob (the template's parser wants them all):
// the knobs given, the defaults for the others.
std::string full_variant(const std::string& partial) {
  std::vector<std::pair<std::string, std::string>> knobs = {{"fuse", "1"},        {"block", "256"}, {"vec", "4"},
                                                            {"unroll", "1"},      {"acc", "4"},     {"tile", "16"},
                                                            {"naive_matmul", "0"}};
  size_t pos = 0;
  while (pos < partial.size()) {
    const size_t end = std::min(partial.find(' ', pos), partial.size());
    const std::string token = partial.substr(pos, end - pos);
    const size_t eq = token.find('=');
    for (auto& [name, value] : knobs) {
      if (eq != std::string::npos && token.substr(0, eq) == name) value = token.substr(eq + 1);
    }
    pos = end + 1;
  }
  std::string out;
  for (const auto& [name, value] : knobs) out += (out.empty() ? "" : " ") + name + "=" + value;
  return out;
}

const std::string& template_mode() {
  static const std::string kCpp = "cpp", kCuda = "cuda";
  return g_backend == "cuda" ? kCuda : kCpp;
}

// --- rewards -----------------------------------------------------------------

// The learning example's wide log speedup (nothing clipped on these tasks),
// as measured (point) and as demonstrated.
reward::RewardFunction log_reward(bool demonstrated, bool statistical_ties) {
  const std::string yaml = std::string("name: study\nterms:\n  - {type: log_speedup, lo: -5, hi: 3, penalty: -6") +
                           (demonstrated ? ", speedup_estimate: demonstrated" : "") +
                           "}\ngroup_normalization: {mode: mean_std" + (statistical_ties ? ", ties: statistical" : "") +
                           "}\n";
  return reward::RewardFunction::from_document(Document::from_yaml_text(yaml, "<study>"));
}

reward::RewardFunction tiered_reward(bool demonstrated) {
  const std::string yaml = std::string("name: study\nterms:\n  - {type: tiered") +
                           (demonstrated ? ", speedup_estimate: demonstrated" : "") + "}\n";
  return reward::RewardFunction::from_document(Document::from_yaml_text(yaml, "<study>"));
}

// --- statistics --------------------------------------------------------------

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

double sd(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

double range(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end()) - *std::min_element(v.begin(), v.end());
}

// Kendall's tau-b of two rankings (ties in either count as neither).
double kendall_tau_b(const std::vector<double>& a, const std::vector<double>& b) {
  double concordant = 0, discordant = 0, ties_a = 0, ties_b = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t j = i + 1; j < a.size(); ++j) {
      const double da = a[i] - a[j], db = b[i] - b[j];
      if (da == 0 && db == 0) continue;
      if (da == 0) {
        ++ties_a;
      } else if (db == 0) {
        ++ties_b;
      } else {
        (da * db > 0 ? concordant : discordant) += 1;
      }
    }
  }
  const double denom = std::sqrt((concordant + discordant + ties_a) * (concordant + discordant + ties_b));
  return denom > 0 ? (concordant - discordant) / denom : 0;
}

double point_log(const Measurement& m) { return m.speedup_eager ? std::log(*m.speedup_eager) : 0.0; }

// --- the parts ---------------------------------------------------------------

struct RepeatData {
  std::vector<Eval> evals;
  double truth = 0;  // the long-timed speedup (the ratio of the medians)
  double truth_lo = 0, truth_hi = 0;
  // The long-timed median per-round ratio: what each interval is an
  // interval for (SpeedupInterval::median), the truth its coverage is
  // checked against; the ratio of the medians where it is missing.
  double truth_paired = 0;
};

RepeatData run_repeat(const Options& o, const TaskSpec& task, const std::string& source) {
  RepeatData d;
  Evaluator long_run(env_config("long", "log_speedup", false));
  const Eval truth = long_run.evaluate(task, source);
  d.truth = truth.m.speedup_eager.value_or(0);
  d.truth_lo = truth.m.speedup_eager_lo.value_or(0);
  d.truth_hi = truth.m.speedup_eager_hi.value_or(0);
  d.truth_paired = truth.paired_median.value_or(d.truth);
  Evaluator normal(env_config("normal", "log_speedup", false));
  for (int i = 0; i < o.repeats; ++i) d.evals.push_back(normal.evaluate(task, source));
  return d;
}

void print_repeat(const RepeatData& d, const std::string& label) {
  const reward::RewardFunction point = log_reward(false, false), demo = log_reward(true, false);
  const reward::RewardFunction tiered = tiered_reward(false), tiered_demo = tiered_reward(true);
  std::vector<double> s, rp, rd, tp, td;
  int covered = 0, covered_medians = 0, with_interval = 0;
  for (const Eval& e : d.evals) {
    s.push_back(e.m.speedup_eager.value_or(0));
    rp.push_back(point.compute(e.m).total);
    rd.push_back(demo.compute(e.m).total);
    tp.push_back(tiered.compute(e.m).total);
    td.push_back(tiered_demo.compute(e.m).total);
    if (e.m.speedup_eager_lo) {
      ++with_interval;
      covered += *e.m.speedup_eager_lo <= d.truth_paired && d.truth_paired <= *e.m.speedup_eager_hi;
      covered_medians += *e.m.speedup_eager_lo <= d.truth && d.truth <= *e.m.speedup_eager_hi;
    }
  }
  std::printf("\n== repeat: %s, %zu evaluations at normal length ==\n", label.c_str(), d.evals.size());
  std::printf("long-timed speedup %.3fx (ratio of medians); median per-round ratio %.3fx [%.3f, %.3f]\n", d.truth,
              d.truth_paired, d.truth_lo, d.truth_hi);
  std::printf("speedup: mean %.3fx, sd %.3f (CV %.1f %%), range %.3f\n", mean(s), sd(s), 100 * sd(s) / mean(s),
              range(s));
  std::printf("%-34s %8s %8s %8s\n", "reward", "mean", "sd", "range");
  std::printf("%-34s %8.3f %8.3f %8.3f\n", "log_speedup, point", mean(rp), sd(rp), range(rp));
  std::printf("%-34s %8.3f %8.3f %8.3f\n", "log_speedup, demonstrated", mean(rd), sd(rd), range(rd));
  std::printf("%-34s %8.3f %8.3f %8.3f\n", "tiered, point", mean(tp), sd(tp), range(tp));
  std::printf("%-34s %8.3f %8.3f %8.3f\n", "tiered, demonstrated", mean(td), sd(td), range(td));
  std::printf("sd ratio demonstrated / point: log_speedup %.2f, tiered %.2f\n", sd(rp) > 0 ? sd(rd) / sd(rp) : 0.0,
              sd(tp) > 0 ? sd(td) / sd(tp) : 0.0);
  std::printf("intervals holding the long-timed median per-round ratio: %d of %d (the ratio of medians: %d)\n", covered,
              with_interval, covered_medians);
}

void print_group(const RepeatData& d, int group_size) {
  const reward::RewardFunction exact = log_reward(false, false), ties = log_reward(false, true);
  const reward::RewardFunction demo_ties = log_reward(true, true);
  std::vector<double> a_exact, a_ties, a_demo;
  int groups = 0, one_class = 0;
  for (size_t start = 0; start + group_size <= d.evals.size(); start += group_size, ++groups) {
    std::vector<reward::GroupMember> members, demo_members;
    for (size_t i = start; i < start + group_size; ++i) {
      const Measurement& m = d.evals[i].m;
      members.push_back({exact.compute(m).total, reward::speed_evidence(m)});
      demo_members.push_back({demo_ties.compute(m).total, reward::speed_evidence(m)});
    }
    std::vector<double> totals;
    for (const auto& m : members) totals.push_back(m.total);
    for (double a : exact.normalize_group(totals)) a_exact.push_back(a);
    const std::vector<double> t = ties.normalize_group(members);
    for (double a : t) a_ties.push_back(a);
    for (double a : demo_ties.normalize_group(demo_members)) a_demo.push_back(a);
    one_class += range(t) == 0;
  }
  std::printf("\n== group: %d GRPO groups of %d identical candidates (mean_std) ==\n", groups, group_size);
  std::printf("%-44s %8s %8s\n", "advantages", "sd", "max |a|");
  auto max_abs = [](const std::vector<double>& v) {
    double m = 0;
    for (double x : v) m = std::max(m, std::abs(x));
    return m;
  };
  std::printf("%-44s %8.3f %8.3f\n", "log_speedup point, exact ties", sd(a_exact), max_abs(a_exact));
  std::printf("%-44s %8.3f %8.3f\n", "log_speedup point, statistical ties", sd(a_ties), max_abs(a_ties));
  std::printf("%-44s %8.3f %8.3f\n", "log_speedup demonstrated, statistical ties", sd(a_demo), max_abs(a_demo));
  std::printf("groups pooled into one tie class: %d of %d\n", one_class, groups);
}

}  // namespace

namespace {

// Every variant of every task, timed long once: the ground truth of "order"
// and "stop".
struct Candidate {
  const TaskSpec* task = nullptr;
  std::string variant, source;
  Eval truth;
};

std::vector<Candidate> candidates(const std::vector<TaskSpec>& tasks) {
  std::vector<Candidate> out;
  Evaluator long_run(env_config("long", "log_speedup", false));
  for (const TaskSpec& t : tasks) {
    for (const std::string& v : variants()) {
      Candidate c;
      c.task = &t;
      c.variant = v;
      c.source = rollout::template_source(t, template_mode(), full_variant(v));
      c.truth = long_run.evaluate(t, c.source);
      std::fprintf(stderr, "truth %s %s: %.3fx\n", t.id.c_str(), v.c_str(), c.truth.m.speedup_eager.value_or(0));
      out.push_back(std::move(c));
    }
  }
  return out;
}

struct PairCounts {
  int concordant = 0, tied = 0, inverted = 0;
};

void count_pairs(const std::vector<Candidate>& cs, size_t begin, size_t end, const std::vector<double>& rewards,
                 PairCounts* counts) {
  for (size_t i = begin; i < end; ++i) {
    for (size_t j = i + 1; j < end; ++j) {
      const auto a = reward::speed_evidence(cs[i].truth.m), b = reward::speed_evidence(cs[j].truth.m);
      if (!a || !b || reward::statistically_tied(*a, *b)) continue;  // not clearly ordered
      const double truth = a->log_speedup - b->log_speedup, got = rewards[i - begin] - rewards[j - begin];
      if (got == 0) {
        ++counts->tied;
      } else {
        (truth * got > 0 ? counts->concordant : counts->inverted) += 1;
      }
    }
  }
}

void run_order(const std::vector<Candidate>& cs, int replicates) {
  const reward::RewardFunction point = log_reward(false, false), demo = log_reward(true, false);
  Evaluator normal(env_config("normal", "log_speedup", false));
  const size_t per_task = variants().size();
  std::vector<double> tau_point, tau_demo;
  PairCounts pc_point, pc_demo;
  for (int r = 0; r < replicates; ++r) {
    for (size_t begin = 0; begin < cs.size(); begin += per_task) {
      std::vector<double> truth, rp, rd;
      for (size_t i = begin; i < begin + per_task; ++i) {
        const Eval e = normal.evaluate(*cs[i].task, cs[i].source);
        truth.push_back(point_log(cs[i].truth.m));
        rp.push_back(point.compute(e.m).total);
        rd.push_back(demo.compute(e.m).total);
      }
      tau_point.push_back(kendall_tau_b(truth, rp));
      tau_demo.push_back(kendall_tau_b(truth, rd));
      count_pairs(cs, begin, begin + per_task, rp, &pc_point);
      count_pairs(cs, begin, begin + per_task, rd, &pc_demo);
    }
  }
  std::printf("\n== order: %zu candidates (%zu per task), %d normal-length timings each, vs long timing ==\n",
              cs.size(), per_task, replicates);
  std::printf("%-28s %10s %11s %7s %9s\n", "reward", "tau-b mean", "concordant", "tied", "inverted");
  std::printf("%-28s %10.3f %11d %7d %9d\n", "log_speedup, point", mean(tau_point), pc_point.concordant, pc_point.tied,
              pc_point.inverted);
  std::printf("%-28s %10.3f %11d %7d %9d\n", "log_speedup, demonstrated", mean(tau_demo), pc_demo.concordant,
              pc_demo.tied, pc_demo.inverted);
  std::printf("(pairs counted: those the long timings order clearly, i.e. not statistically tied)\n");
}

// One stopping configuration over every candidate.
struct StopFigures {
  std::vector<double> timing_ms, samples;
  std::map<std::string, int> reasons;
  int tier_right = 0, n = 0;
};

StopFigures run_stop_config(const std::vector<Candidate>& cs, const std::string& reward, bool decided) {
  Evaluator ev(env_config("production", reward, decided));
  const reward::RewardFunction tiered = tiered_reward(false);
  StopFigures f;
  for (const Candidate& c : cs) {
    const Eval e = ev.evaluate(*c.task, c.source);
    f.timing_ms.push_back(e.timing_ms);
    f.samples.push_back(static_cast<double>(e.samples));
    ++f.reasons[e.stop_reason];
    f.tier_right += tiered.compute(e.m).total == tiered.compute(c.truth.m).total;
    ++f.n;
  }
  return f;
}

void run_stop(const std::vector<Candidate>& cs) {
  struct Row {
    const char* label;
    StopFigures f;
  };
  std::vector<Row> rows;
  rows.push_back({"target_rse (today)", run_stop_config(cs, "default", false)});
  rows.push_back({"decided, tiered edges", run_stop_config(cs, "default", true)});
  rows.push_back({"decided, noise_aware res.", run_stop_config(cs, "noise_aware", true)});
  const double base = mean(rows[0].f.timing_ms);
  std::printf("\n== stop: %zu candidates, configs/env/%s.yaml timing ==\n", cs.size(), g_backend.c_str());
  std::printf("%-28s %10s %8s %9s %9s  %s\n", "stopping rule", "timing ms", "ratio", "samples", "tier ok",
              "stop reasons");
  for (const Row& r : rows) {
    std::string reasons;
    for (const auto& [k, v] : r.f.reasons) reasons += k + " " + std::to_string(v) + "  ";
    std::printf("%-28s %10.1f %8.2f %9.1f %6d/%-2d  %s\n", r.label, mean(r.f.timing_ms), mean(r.f.timing_ms) / base,
                mean(r.f.samples), r.f.tier_right, r.f.n, reasons.c_str());
  }
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--parts") {
      o.parts.clear();
      for (size_t p = 0; p <= v.size();) {
        const size_t q = std::min(v.find(',', p), v.size());
        o.parts.push_back(v.substr(p, q - p));
        p = q + 1;
      }
    } else if (k == "--repeats") {
      o.repeats = std::stoi(v);
    } else if (k == "--tasks") {
      o.tasks = std::stoi(v);
    } else if (k == "--backend" && (v == "cpu" || v == "cuda")) {
      o.backend = v;
    } else {
      std::fprintf(stderr, "unknown option %s %s (--parts, --repeats, --tasks, --backend cpu|cuda)\n", k.c_str(),
                   v.c_str());
      std::exit(2);
    }
  }
  return o;
}

bool wants(const Options& o, const char* part) {
  return std::find(o.parts.begin(), o.parts.end(), part) != o.parts.end();
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each table as it is done, also into a file
  const Options o = parse(argc, argv);
  g_backend = o.backend;
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<TaskSpec> tasks = study_tasks(o.tasks);
  if (wants(o, "repeat") || wants(o, "group")) {
    const std::string v = variants()[3];
    const RepeatData d =
        run_repeat(o, tasks.front(), rollout::template_source(tasks.front(), template_mode(), full_variant(v)));
    if (wants(o, "repeat")) print_repeat(d, tasks.front().id + " " + v);
    if (wants(o, "group")) print_group(d, 8);
  }
  if (wants(o, "order") || wants(o, "stop")) {
    const std::vector<Candidate> cs = candidates(tasks);
    if (wants(o, "order")) run_order(cs, 2);
    if (wants(o, "stop")) run_stop(cs);
  }
  std::printf("\n%.0f s in all\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}
