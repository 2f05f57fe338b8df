// What each action asks the judge for (pay only for what is asked): the
// profile stage (kernel attribution, energy) on profile actions, and on
// submits only with eval.profile_on_submit or a reward that reads what only
// the profile measures; hardware counters only on profile actions unless
// eval.hardware_metrics_on_submit says so. The requests are recorded on their
// way to a real executor, whose judge serves them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <vector>

#include "gym_test_util.h"
#include "kforge/env/env_pool.h"
#include "kforge/env/executor.h"

namespace kforge::env {
namespace {

using testing::make_action;

// Forwards everything to `inner`, keeping a copy of each evaluation request.
class RecordingExecutor final : public Executor {
 public:
  explicit RecordingExecutor(std::unique_ptr<Executor> inner) : inner_(std::move(inner)) {}
  std::future<EvalReport> submit(EvalRequest request) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      requests_.push_back(request);
    }
    return inner_->submit(std::move(request));
  }
  std::future<ReferenceReport> submit_reference(ReferenceRequest request) override {
    return inner_->submit_reference(std::move(request));
  }
  std::shared_future<ReferenceReport> check_task(const TaskSpec& task, const EvalOptions& options) override {
    return inner_->check_task(task, options);
  }
  int reference_checks() const override { return inner_->reference_checks(); }
  BackendKind backend() const override { return inner_->backend(); }
  std::string device_name() override { return inner_->device_name(); }
  int restarts() const override { return inner_->restarts(); }
  int judge_pid() const override { return inner_->judge_pid(); }
  json health() override { return inner_->health(); }

  std::vector<EvalRequest> requests() {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }

 private:
  std::unique_ptr<Executor> inner_;
  std::mutex mutex_;
  std::vector<EvalRequest> requests_;
};

std::vector<EvalRequest> requests_for(const EnvConfig& config) {
  ExecutorConfig ec;
  ec.backend = BackendKind::kCpu;
  auto recorder = std::make_shared<RecordingExecutor>(make_executor(ec));
  EnvPool pool(config, 1, EnvServices{nullptr, recorder});
  pool.reset(0, testing::test_task());
  for (ActionType type : {ActionType::kVerify, ActionType::kProfile, ActionType::kSubmit}) {
    pool.send({make_action(type, "correct")}, {0});
    const std::vector<EnvStep> steps = pool.recv(1);
    EXPECT_EQ(steps.size(), 1u);
  }
  return recorder->requests();
}

TEST(StepRequestsTest, ProfileAndCountersOnlyOnProfileActions) {
  const std::vector<EvalRequest> r = requests_for(testing::fast_config());
  ASSERT_EQ(r.size(), 3u);
  // verify: checks only.
  EXPECT_TRUE(r[0].verify);
  EXPECT_FALSE(r[0].time);
  EXPECT_FALSE(r[0].profile);
  // profile: timed, attributed, counters.
  EXPECT_TRUE(r[1].time);
  EXPECT_TRUE(r[1].profile);
  EXPECT_TRUE(r[1].options.hardware_metrics);
  // submit: timed (the submit checks are timing's), no profile, no counters.
  EXPECT_TRUE(r[2].time);
  EXPECT_FALSE(r[2].profile);
  EXPECT_FALSE(r[2].options.hardware_metrics);
}

TEST(StepRequestsTest, TheConfigOrARewardThatReadsTheProfileAsksForItOnSubmits) {
  EnvConfig asked = testing::fast_config();
  asked.eval.profile_on_submit = true;
  std::vector<EvalRequest> r = requests_for(asked);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_FALSE(r[0].profile);
  EXPECT_TRUE(r[2].profile);
  EXPECT_FALSE(r[2].options.hardware_metrics);

  // A reward paying for the own-kernel share turns it on by itself.
  const std::filesystem::path yaml =
      std::filesystem::temp_directory_path() / ("kforge-own-kernel-reward-" + std::to_string(::getpid()) + ".yaml");
  {
    std::ofstream out(yaml);
    out << "name: own_kernels\nterms:\n  - type: linear_capped\n    own_kernel_weight: 0.25\n";
  }
  EnvConfig paying = testing::fast_config();
  paying.reward.function = yaml.string();
  paying.reward.step_terms = {};
  r = requests_for(paying);
  std::filesystem::remove(yaml);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(r[2].profile);
}

TEST(StepRequestsTest, TheConfigDecidesCountersOnSubmitsAndOverall) {
  EnvConfig on_submit = testing::fast_config();
  on_submit.eval.hardware_metrics_on_submit = true;
  std::vector<EvalRequest> r = requests_for(on_submit);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(r[2].options.hardware_metrics);

  EnvConfig off = testing::fast_config();
  off.eval.hardware_metrics = false;
  off.eval.hardware_metrics_on_submit = true;
  r = requests_for(off);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_FALSE(r[1].options.hardware_metrics);
  EXPECT_FALSE(r[2].options.hardware_metrics);
}

}  // namespace
}  // namespace kforge::env
