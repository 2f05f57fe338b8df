// Composing terms: weights, names, breakdowns, describe(), group normalization.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kforge/reward/term.h"
#include "test_util.h"

namespace kforge::reward {
namespace {

using testing::failed;
using testing::from_yaml;
using testing::input_error_of;
using testing::timed_correct;
using testing::with_violation;

const char* kComposite = R"(name: composite
description: tiered plus shaping
terms:
  - type: tiered
    weight: 2.0
  - type: violation_penalty
    weight: 0.5
  - type: turn_cost
    cost: 0.1
)";

TEST(RewardCompositionTest, WeightedComponentsSumToTotal) {
  RewardFunction f = from_yaml(kComposite);
  Measurement m = timed_correct(1.5, 1.2);
  m.turn = 3;
  RewardBreakdown b = f.compute(m);
  ASSERT_EQ(b.components.size(), 3u);
  EXPECT_EQ(b.components[0], (std::pair<std::string, double>("tiered", 6.0)));
  EXPECT_EQ(b.components[1], (std::pair<std::string, double>("violation_penalty", 0.0)));
  EXPECT_EQ(b.components[2].first, "turn_cost");
  EXPECT_DOUBLE_EQ(b.components[2].second, -0.1);
  EXPECT_DOUBLE_EQ(b.total, 5.9);

  RewardBreakdown cheat = f.compute(with_violation(with_violation(m, "a"), "b"));
  EXPECT_DOUBLE_EQ(cheat.components[0].second, -2.0);
  EXPECT_DOUBLE_EQ(cheat.components[1].second, -1.0);
  EXPECT_DOUBLE_EQ(cheat.total, -3.1);
}

TEST(RewardCompositionTest, ToJsonHasTotalAndEveryComponent) {
  RewardFunction f = from_yaml(kComposite);
  json j = f.compute(failed(Outcome::kWrong)).to_json();
  EXPECT_EQ(j.size(), 4u);
  EXPECT_DOUBLE_EQ(j.at("total").get<double>(), -2.1);
  EXPECT_DOUBLE_EQ(j.at("tiered").get<double>(), -2.0);
  EXPECT_DOUBLE_EQ(j.at("violation_penalty").get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(j.at("turn_cost").get<double>(), -0.1);
  // A zero-weighted negative is a plain 0 in logs, not -0.
  RewardFunction zero = from_yaml("name: z\nterms:\n  - {type: tiered, weight: 0}\n");
  EXPECT_EQ(zero.compute(failed(Outcome::kWrong)).to_json().dump(), R"({"tiered":0.0,"total":0.0})");
}

TEST(RewardCompositionTest, ExplicitNamesLetOneTypeAppearTwice) {
  RewardFunction f = from_yaml(R"(name: two
terms:
  - {type: log_speedup, name: fast, hi: 3}
  - {type: log_speedup, name: damped, scale: 0.5, weight: 0.5}
)");
  EXPECT_EQ(f.component_names(), (std::vector<std::string>{"fast", "damped"}));
  RewardBreakdown b = f.compute(timed_correct(4.0));
  EXPECT_DOUBLE_EQ(b.components[0].second, std::log(4.0));
  EXPECT_DOUBLE_EQ(b.components[1].second, 0.25 * std::log(4.0));
  EXPECT_DOUBLE_EQ(b.total, 1.25 * std::log(4.0));
}

TEST(RewardCompositionTest, DuplicateOrReservedNamesAreRejected) {
  std::string err = input_error_of([] {
    from_yaml("name: d\nterms:\n  - {type: tiered}\n  - {type: turn_cost}\n  - {type: tiered, margin: 0.1}\n");
  });
  EXPECT_NE(err.find("test.yaml:5:"), std::string::npos) << err;
  EXPECT_NE(err.find("already used by /terms/0"), std::string::npos) << err;
  EXPECT_NE(err.find("explicit \"name\""), std::string::npos) << err;

  err = input_error_of([] { from_yaml("name: d\nterms:\n  - {type: tiered, name: total}\n"); });
  EXPECT_NE(err.find("/terms/0/name"), std::string::npos) << err;
  EXPECT_NE(err.find("reserved"), std::string::npos) << err;
}

TEST(RewardCompositionTest, DescribeIsTheResolvedConfigAndRoundTrips) {
  RewardFunction f = from_yaml(kComposite);
  json d = f.describe();
  EXPECT_EQ(d.at("name"), "composite");
  EXPECT_EQ(d.at("description"), "tiered plus shaping");
  ASSERT_EQ(d.at("terms").size(), 3u);
  const json& tiered = d.at("terms").at(0);
  EXPECT_EQ(tiered.at("type"), "tiered");
  EXPECT_EQ(tiered.at("name"), "tiered");
  EXPECT_EQ(tiered.at("weight"), 2.0);
  EXPECT_EQ(tiered.at("margin"), 0.05);  // default filled in
  EXPECT_EQ(tiered.at("missing_compile"), "cap_at_tier_2");
  EXPECT_EQ(tiered.at("values").at("faster_than_both"), 3.0);
  EXPECT_EQ(d.at("group_normalization").at("mode"), "none");
  EXPECT_EQ(f.name(), "composite");
  EXPECT_EQ(f.source(), "test.yaml");

  RewardFunction again = RewardFunction::from_document(Document::from_value(d, "<describe>"));
  EXPECT_EQ(again.describe(), d);
  Measurement m = timed_correct(1.2);
  m.turn = 2;
  EXPECT_EQ(again.compute(m).to_json(), f.compute(m).to_json());
}

TEST(RewardCompositionTest, NewTermTypesNeedNoComposerChange) {
  class Constant final : public RewardTerm {
   public:
    explicit Constant(double v) : v_(v) {}
    double compute(const Measurement&, const RewardContext&) const override { return v_; }
    json params() const override { return {{"value", v_}}; }

   private:
    double v_;
  };
  TermRegistry& registry = TermRegistry::global();
  if (!registry.contains("test_constant")) {
    registry.add("test_constant", [](ObjectReader& r) -> std::unique_ptr<RewardTerm> {
      auto f = r.optional("value");
      return std::make_unique<Constant>(f ? f->as_number() : 0.0);
    });
  }
  EXPECT_THROW(registry.add("test_constant", [](ObjectReader&) { return std::unique_ptr<RewardTerm>(); }),
               std::invalid_argument);
  RewardFunction f = from_yaml("name: c\nterms:\n  - {type: test_constant, value: 0.25, weight: 4}\n");
  EXPECT_DOUBLE_EQ(f.compute(failed(Outcome::kCrash)).total, 1.0);
  // Its parameters are checked like any built-in's.
  std::string err = input_error_of([] { from_yaml("name: c\nterms:\n  - {type: test_constant, valeu: 1}\n"); });
  EXPECT_NE(err.find("did you mean \"value\""), std::string::npos) << err;
}

// ---- group normalization ----

std::vector<double> normalized(const std::string& group_yaml, const std::vector<double>& totals) {
  return from_yaml("name: g\nterms:\n  - {type: tiered}\ngroup_normalization: " + group_yaml + "\n")
      .normalize_group(totals);
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-9) << "at " << i;
}

TEST(RewardGroupNormalizationTest, NoneIsIdentity) {
  EXPECT_EQ(from_yaml("name: g\nterms: [{type: tiered}]\n").normalize_group({3, -1, 2}),
            (std::vector<double>{3, -1, 2}));
  EXPECT_EQ(normalized("{mode: none}", {3, -1}), (std::vector<double>{3, -1}));
}

TEST(RewardGroupNormalizationTest, MeanSubtractsTheGroupMean) {
  expect_near(normalized("{mode: mean}", {3, -1, 2, 0}), {2, -2, 1, -1});
}

TEST(RewardGroupNormalizationTest, MeanStdUsesSampleStdByDefault) {
  // mean 2, sample std 1.
  expect_near(normalized("{mode: mean_std, eps: 1.0e-12}", {1, 2, 3}), {-1, 0, 1});
  // population std sqrt(2/3).
  const double s = std::sqrt(2.0 / 3.0);
  expect_near(normalized("{mode: mean_std, std: population, eps: 1.0e-12}", {1, 2, 3}), {-1 / s, 0, 1 / s});
  // eps is added to the std.
  expect_near(normalized("{mode: mean_std, eps: 1}", {1, 2, 3}), {-0.5, 0, 0.5});
}

TEST(RewardGroupNormalizationTest, ZeroVarianceAndTinyGroupsGiveZeros) {
  expect_near(normalized("{mode: mean_std}", {-1, -1, -1, -1}), {0, 0, 0, 0});
  expect_near(normalized("{mode: mean_std}", {2.5}), {0});
  expect_near(normalized("{mode: mean}", {2.5}), {0});
  EXPECT_TRUE(normalized("{mode: mean_std}", {}).empty());
}

TEST(RewardGroupNormalizationTest, NonFiniteTotalsAreRejected) {
  std::string err = input_error_of([] { normalized("{mode: mean}", {1.0, std::numeric_limits<double>::quiet_NaN()}); });
  EXPECT_NE(err.find("total #1"), std::string::npos) << err;
}

}  // namespace
}  // namespace kforge::reward
