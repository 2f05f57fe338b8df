// Presets, config lookup, and the errors a config author sees.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "kforge/core/remove_tree.h"
#include "test_util.h"

namespace kforge::reward {
namespace {

using testing::from_yaml;
using testing::input_error_of;
using testing::timed_correct;

const std::filesystem::path kSourceConfigs = std::filesystem::path(KFORGE_SOURCE_DIR) / "configs";

// Sets KFORGE_CONFIG_DIR for one test and restores it afterwards.
class ScopedConfigDir {
 public:
  explicit ScopedConfigDir(const std::string& value) {
    if (const char* old = std::getenv("KFORGE_CONFIG_DIR")) old_ = old;
    setenv("KFORGE_CONFIG_DIR", value.c_str(), 1);
  }
  ~ScopedConfigDir() {
    if (old_) {
      setenv("KFORGE_CONFIG_DIR", old_->c_str(), 1);
    } else {
      unsetenv("KFORGE_CONFIG_DIR");
    }
  }

 private:
  std::optional<std::string> old_;
};

TEST(RewardPresetTest, EveryPresetLoadsByName) {
  ScopedConfigDir source(kSourceConfigs.string());
  const std::vector<std::string> names = preset_names();
  for (const char* expected : {"contrastive", "default", "linear_capped", "log_speedup", "tiered"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
  for (const std::string& name : names) {
    RewardFunction f = RewardFunction::load(name);
    EXPECT_EQ(f.name(), name);
    EXPECT_EQ(f.source(), (kSourceConfigs / "rewards" / (name + ".yaml")).string());
    // Every preset pays for a fast correct kernel and punishes a cheat.
    EXPECT_GT(f.compute(timed_correct(2.0, 2.0)).total, 0.0) << name;
    Measurement cheat = timed_correct(100.0, 100.0);
    cheat.violations.push_back({"foreign_stream", ""});
    EXPECT_LT(f.compute(cheat).total, f.compute(timed_correct(0.5, 0.5)).total) << name;
  }
}

TEST(RewardPresetTest, PresetsMatchTheirPapers) {
  ScopedConfigDir source(kSourceConfigs.string());
  EXPECT_EQ(RewardFunction::load("tiered").compute(timed_correct(1.2, 1.1)).total, 3.0);
  EXPECT_DOUBLE_EQ(RewardFunction::load("log_speedup").compute(timed_correct(2.0)).total, std::log(2.0));
  EXPECT_DOUBLE_EQ(RewardFunction::load("linear_capped").compute(timed_correct(2.0)).total, 1.5);
  RewardContext ctx;
  ctx.exemplar_speedups = {1.5};
  EXPECT_DOUBLE_EQ(RewardFunction::load("contrastive").compute(timed_correct(3.0), ctx).total, std::log(2.0));
  EXPECT_EQ(RewardFunction::load("contrastive").describe().at("group_normalization").at("mode"), "mean_std");
  RewardFunction d = RewardFunction::load("default");
  EXPECT_EQ(d.component_names(), (std::vector<std::string>{"tiered", "violation_penalty", "turn_cost"}));
}

TEST(RewardPresetTest, CompiledInDirectoryIsTheFallback) {
  const char* old = std::getenv("KFORGE_CONFIG_DIR");
  std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  unsetenv("KFORGE_CONFIG_DIR");
  EXPECT_EQ(std::filesystem::weakly_canonical(config_dir()), std::filesystem::weakly_canonical(kSourceConfigs));
  EXPECT_EQ(RewardFunction::load("tiered").name(), "tiered");
  if (saved) setenv("KFORGE_CONFIG_DIR", saved->c_str(), 1);
}

TEST(RewardPresetTest, LoadAcceptsPaths) {
  const std::filesystem::path path = kSourceConfigs / "rewards" / "linear_capped.yaml";
  EXPECT_EQ(RewardFunction::load(path.string()).name(), "linear_capped");
  EXPECT_EQ(RewardFunction::from_file(path).name(), "linear_capped");

  const std::filesystem::path json_path = std::filesystem::temp_directory_path() / "kforge_reward_test_cfg.json";
  {
    std::ofstream out(json_path);
    out << R"({"name": "from_json", "terms": [{"type": "log_speedup", "hi": 5}]})";
  }
  RewardFunction f = RewardFunction::load(json_path.string());
  EXPECT_EQ(f.name(), "from_json");
  EXPECT_DOUBLE_EQ(f.compute(timed_correct(50.0)).total, std::log(50.0));
  std::filesystem::remove(json_path);

  std::string err = input_error_of([] { RewardFunction::load("/nonexistent/reward.yaml"); });
  EXPECT_NE(err.find("/nonexistent/reward.yaml"), std::string::npos) << err;
}

TEST(RewardPresetTest, UnknownPresetSuggestsTheClosest) {
  ScopedConfigDir source(kSourceConfigs.string());
  std::string err = input_error_of([] { RewardFunction::load("tierd"); });
  EXPECT_NE(err.find("unknown reward preset \"tierd\""), std::string::npos) << err;
  EXPECT_NE(err.find("did you mean \"tiered\""), std::string::npos) << err;
  EXPECT_NE(err.find("log_speedup"), std::string::npos) << err;  // lists what exists
  // Preset names are names, not paths out of rewards/.
  err = input_error_of([] { RewardFunction::load(".."); });
  EXPECT_NE(err.find("unknown reward preset"), std::string::npos) << err;
}

TEST(RewardPresetTest, EnvironmentVariableIsTheOnlyPlaceSearchedWhenSet) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "kforge_reward_test_configs";
  std::filesystem::create_directories(dir / "rewards");
  {
    std::ofstream out(dir / "rewards" / "mine.yaml");
    out << "name: mine\nterms:\n  - {type: correctness}\n";
  }
  {
    ScopedConfigDir scoped(dir.string());
    EXPECT_EQ(config_dir(), dir);
    EXPECT_EQ(preset_names(), (std::vector<std::string>{"mine"}));
    EXPECT_EQ(RewardFunction::load("mine").compute(timed_correct(1.0)).total, 1.0);
    std::string err = input_error_of([] { RewardFunction::load("tiered"); });
    EXPECT_NE(err.find(dir.string()), std::string::npos) << err;
  }
  {
    ScopedConfigDir scoped((dir / "missing").string());
    std::string err = input_error_of([] { config_dir(); });
    EXPECT_NE(err.find("KFORGE_CONFIG_DIR="), std::string::npos) << err;
    EXPECT_NE(err.find("not a directory"), std::string::npos) << err;
  }
  kforge::remove_tree(dir);
}

// ---- config errors ----

TEST(RewardConfigErrorTest, UnknownTermTypeSuggestsAndNamesLine) {
  std::string err = input_error_of([] { from_yaml("name: x\nterms:\n  - type: tiered\n  - type: tierd\n"); });
  EXPECT_NE(err.find("test.yaml:4:"), std::string::npos) << err;
  EXPECT_NE(err.find("/terms/1/type"), std::string::npos) << err;
  EXPECT_NE(err.find("did you mean \"tiered\""), std::string::npos) << err;
}

TEST(RewardConfigErrorTest, BadParamTypeNamesFieldAndLine) {
  std::string err = input_error_of([] { from_yaml("name: x\nterms:\n  - type: tiered\n    margin: fast\n"); });
  EXPECT_NE(err.find("test.yaml:4:"), std::string::npos) << err;
  EXPECT_NE(err.find("/terms/0/margin"), std::string::npos) << err;
  EXPECT_NE(err.find("expected a number >= 0"), std::string::npos) << err;

  err = input_error_of([] { from_yaml("name: x\nterms:\n  - type: tiered\n    values: {correct: high}\n"); });
  EXPECT_NE(err.find("/terms/0/values/correct"), std::string::npos) << err;

  err = input_error_of([] { from_yaml("name: x\nterms:\n  - {type: tiered, missing_compile: judge_on_eagre}\n"); });
  EXPECT_NE(err.find("did you mean \"judge_on_eager\""), std::string::npos) << err;
}

TEST(RewardConfigErrorTest, UnknownParamSuggestsAndNamesLine) {
  std::string err =
      input_error_of([] { from_yaml("name: x\nterms:\n  - type: tiered\n    weight: 1\n    margn: 0.1\n"); });
  EXPECT_NE(err.find("test.yaml:5:"), std::string::npos) << err;
  EXPECT_NE(err.find("unknown key \"margn\""), std::string::npos) << err;
  EXPECT_NE(err.find("did you mean \"margin\""), std::string::npos) << err;
  // Keys of another term type are unknown here too.
  err = input_error_of([] { from_yaml("name: x\nterms:\n  - {type: tiered, cap: 3}\n"); });
  EXPECT_NE(err.find("unknown key \"cap\""), std::string::npos) << err;
}

TEST(RewardConfigErrorTest, TopLevelMistakes) {
  std::string err = input_error_of([] { from_yaml("name: x\nterm: [{type: tiered}]\n"); });
  EXPECT_NE(err.find("test.yaml:2:"), std::string::npos) << err;
  EXPECT_NE(err.find("did you mean \"terms\""), std::string::npos) << err;

  err = input_error_of([] { from_yaml("name: x\nterms: []\n"); });
  EXPECT_NE(err.find("/terms"), std::string::npos) << err;
  EXPECT_NE(err.find("non-empty array"), std::string::npos) << err;

  err = input_error_of([] { from_yaml("terms: [{type: tiered}]\n"); });
  EXPECT_NE(err.find("missing required key \"name\""), std::string::npos) << err;

  err = input_error_of([] { from_yaml("name: x\nterms:\n  - {type: tiered, weight: -1}\n"); });
  EXPECT_NE(err.find("/terms/0/weight"), std::string::npos) << err;

  err = input_error_of([] { from_yaml("name: x\nterms: [{type: tiered}]\ngroup_normalization: {mode: mean-std}\n"); });
  EXPECT_NE(err.find("test.yaml:3:"), std::string::npos) << err;
  EXPECT_NE(err.find("did you mean \"mean_std\""), std::string::npos) << err;

  err = input_error_of(
      [] { from_yaml("name: x\nterms: [{type: tiered}]\ngroup_normalization: {mode: mean, eps: 0}\n"); });
  EXPECT_NE(err.find("/group_normalization/eps"), std::string::npos) << err;
}

TEST(RewardConfigErrorTest, JsonConfigsNameThePointer) {
  std::string err = input_error_of([] {
    RewardFunction::from_document(
        Document::from_json_text(R"({"name": "j", "terms": [{"type": "log_speedup", "scale": "big"}]})", "cfg.json"));
  });
  EXPECT_NE(err.find("cfg.json"), std::string::npos) << err;
  EXPECT_NE(err.find("/terms/0/scale"), std::string::npos) << err;
  EXPECT_NE(err.find("positive number"), std::string::npos) << err;
}

}  // namespace
}  // namespace kforge::reward
