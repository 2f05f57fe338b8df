// Reward terms: the pieces a RewardFunction sums, and the registry that maps a
// config's `type:` to the code that builds one. New terms are registered here
// (TermRegistry::global().add) and need no change to the composer.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/measurement.h"

namespace kforge::reward {

struct RewardContext;

// What a step established about the candidate's correctness.
enum class Verdict {
  // Nothing was judged: a compile or analyze step that did not run the
  // candidate (Outcome::kNotRun) and raised no violation.
  kNotJudged,
  // Any outcome other than kCorrect (including kNotRun on a verify, profile or
  // submit step, which should have judged the candidate), or any violation.
  kFailed,
  // Outcome::kCorrect and no violation.
  kPassed,
};

Verdict judge(const Measurement& m);
const std::string& verdict_name(Verdict verdict);

// The only view of a step that speed-based terms get. It exists only for a
// passed, timed step with a usable eager speedup; every field has already been
// checked (finite and positive; a fraction within [0, 1]), and absent means
// "unknown or unusable", never "zero".
struct SpeedFacts {
  double speedup_eager = 1.0;
  std::optional<double> speedup_compile;
  std::optional<double> own_kernel_fraction;
  std::optional<double> energy_j;
  // The eager speedup's confidence interval (Measurement::speedup_eager_lo,
  // _hi), when the timing gave a usable one (finite, 0 < lo <= hi).
  std::optional<double> speedup_eager_lo;
  std::optional<double> speedup_eager_hi;

  // The noise-aware estimate (docs/rewards.md, "Noise"): the eager speedup
  // the step demonstrated relative to `pivot` (the speedup at which a term
  // pays nothing extra: 1 for a log speedup, the best exemplar for
  // contrastive, a tier's threshold): the point of the interval nearest to
  // pivot, i.e. pivot itself when the interval holds it. The interval is
  // first widened to hold the point estimate, so the result always lies
  // between the point estimate and pivot. Without an interval: the point.
  double demonstrated_eager(double pivot) const;
  // The same for the compile speedup (its interval is the eager one scaled
  // by speedup_compile / speedup_eager); absent when speedup_compile is.
  std::optional<double> demonstrated_compile(double pivot) const;
};

// What a reward needs of the timing to be decided (EvalOptions::decision_*,
// filled by the environment when eval.stop_when_decided is set): the eager
// and torch.compile speedups at which it steps, and the largest half-width
// of the log-speedup interval that its continuous terms can still pay for
// (0: no continuous term asks).
struct TimingNeed {
  std::vector<double> eager_edges;
  std::vector<double> compile_edges;
  double log_resolution = 0.0;
};

// A step's speedup as the tie test of group normalization sees it: the log
// of the point estimate and of the interval's bounds, and the interval's
// coverage. Present for a passed, timed step whose measurement carries an
// interval.
struct SpeedEvidence {
  double log_speedup = 0.0;
  double log_lo = 0.0;
  double log_hi = 0.0;
  double confidence = 0.95;  // Measurement::speedup_confidence
  // The log speedup's standard error implied by the interval: its half-width
  // over the normal quantile of its coverage (1.96 at 95 %).
  double standard_error() const;
};
std::optional<SpeedEvidence> speed_evidence(const Measurement& m);

// Speedups are statistically indistinguishable when Cochran's homogeneity
// statistic Q = sum w_i (l_i - m)^2 (l_i the log speedups, w_i = 1 / se_i^2,
// m their w-weighted mean) is within the 95 % quantile of chi-square with
// n - 1 degrees of freedom: a test of "all equal" at 5 % for the set as a
// whole, so a group of n identical kernels is called tied at that rate
// whatever n. For two: |l_a - l_b| <= 1.96 sqrt(se_a^2 + se_b^2).
bool statistically_tied(const std::vector<SpeedEvidence>& speeds);
bool statistically_tied(const SpeedEvidence& a, const SpeedEvidence& b);

// SpeedFacts for `m`, or nullopt when the step earns no speed reward: not
// passed, not timed, or no finite positive eager speedup.
std::optional<SpeedFacts> speed_facts(const Measurement& m);

// The finite, positive values of `speedups` (exemplars shown in a prompt).
std::vector<double> usable_speedups(const std::vector<double>& speedups);

class RewardTerm {
 public:
  virtual ~RewardTerm() = default;
  // The unweighted value of this term for one step. Must be finite.
  virtual double compute(const Measurement& m, const RewardContext& ctx) const = 0;
  // The term's resolved parameters (defaults filled in), as config keys.
  virtual json params() const = 0;
  // Adds what the term needs of the timing (edges, resolution) to `need`;
  // nothing by default (terms that do not read the speedup).
  virtual void add_timing_need(TimingNeed& /*need*/) const {}
};

// Steps whose action asks for timing (profile, submit): a passed one of these
// whose timing is unusable is "correct, speed unknown".
bool timing_action(const std::string& action);

// Base of every term whose value depends on speed (or other performance
// measurements). The gate lives here, not in configs or in each term:
//   failed step      -> failure_value()
//   not judged       -> 0
//   passed, no usable timing -> untimed_pass_value() on a profile or submit
//                               step, 0 otherwise
//   otherwise        -> score(facts)
// score() never sees the Measurement, so a term cannot pay for speed that the
// gate withheld.
class SpeedTerm : public RewardTerm {
 public:
  double compute(const Measurement& m, const RewardContext& ctx) const final;

 protected:
  virtual double failure_value() const = 0;
  virtual double score(const SpeedFacts& facts, const RewardContext& ctx) const = 0;
  // A passed profile or submit step whose timing was unusable (a kernel
  // faster than the harness resolves, no samples): what the term pays for
  // correctness alone. It must not depend on speed; 0 unless a term's
  // definition has a "correct" level that does not need a timing (tiered).
  virtual double untimed_pass_value() const { return 0.0; }
};

// Builds a term from its config object. The composer has already consumed
// `type`, `name` and `weight`; the factory reads its own keys from `params`
// and the composer then rejects any key nobody read.
using TermFactory = std::function<std::unique_ptr<RewardTerm>(ObjectReader& params)>;

class TermRegistry {
 public:
  // The process-wide registry, holding the built-in terms.
  static TermRegistry& global();

  // Throws std::invalid_argument if `type` is already registered or empty.
  void add(const std::string& type, TermFactory factory);
  bool contains(const std::string& type) const;
  std::vector<std::string> types() const;  // sorted
  // Throws std::out_of_range for an unknown type (configs check first).
  std::unique_ptr<RewardTerm> create(const std::string& type, ObjectReader& params) const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::pair<std::string, TermFactory>> factories_;
};

}  // namespace kforge::reward
