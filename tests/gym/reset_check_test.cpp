// EnvPool::reset refuses a task whose reference cannot be judged (NaN/Inf or
// a constant output), naming the node, and checks each distinct task once.
#include <gtest/gtest.h>

#include <memory>

#include "gym_test_util.h"
#include "kforge/env/env_pool.h"
#include "kforge/env/executor.h"

namespace kforge::env {
namespace {

using testing::make_action;

class ResetCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ExecutorConfig ec;
    ec.backend = BackendKind::kCpu;
    executor_ = make_executor(ec);
    pool_ = std::make_unique<EnvPool>(testing::fast_config(), 2, EnvServices{nullptr, executor_});
  }
  std::string reset_error(int env_id, const TaskSpec& task) {
    try {
      pool_->reset(env_id, task);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }
  static TaskSpec fixture(const std::string& name) { return load_task(testing::data_dir() / (name + ".json")); }

  std::shared_ptr<Executor> executor_;
  std::unique_ptr<EnvPool> pool_;
};

TEST_F(ResetCheckTest, NanReferenceIsRefusedNamingTheNode) {
  const std::string e = reset_error(0, fixture("nan_reference"));
  EXPECT_EQ(e.rfind("task 'test/nan_reference' cannot be judged: node 1 (log -> t1): ", 0), 0u) << e;
  EXPECT_NE(e.find("elements are NaN on the base shape (x: [64, 64])"), std::string::npos) << e;
  // Refused before anything was charged: the env has no episode to step.
  EXPECT_THROW(pool_->send({make_action(ActionType::kCompile, "correct")}, {0}), InputError);
}

TEST_F(ResetCheckTest, ConstantOutputIsRefusedNamingTheNode) {
  const std::string e = reset_error(1, fixture("constant_reference"));
  EXPECT_EQ(e.rfind("task 'test/constant_reference' cannot be judged: node 1 (sub -> t1): the output is constant", 0),
            0u)
      << e;
  // A valid task still resets on the same env afterwards.
  EXPECT_NO_THROW(pool_->reset(1, testing::test_task()));
}

TEST_F(ResetCheckTest, EachDistinctTaskIsCheckedOnce) {
  const TaskSpec task = testing::test_task();
  const ResetResult first = pool_->reset(0, task, 1);
  EXPECT_EQ(first.info.reference_check_status, "ok") << first.info.reference_check_problem;
  EXPECT_EQ(to_json(first.info)["reference_check"], json({{"status", "ok"}}));
  pool_->reset(1, task, 2);
  pool_->reset(0, task, 3);
  // Observed where the work happens: the judge counts the reference requests it served.
  EXPECT_EQ(executor_->reference_checks(), 1);
  EXPECT_EQ(executor_->health()["reference_requests"], 1);
  // An invalid task is remembered too: refused twice, checked once.
  EXPECT_FALSE(reset_error(0, fixture("nan_reference")).empty());
  EXPECT_FALSE(reset_error(0, fixture("nan_reference")).empty());
  EXPECT_EQ(executor_->reference_checks(), 2);
  EXPECT_EQ(executor_->health()["reference_requests"], 2);
}

}  // namespace
}  // namespace kforge::env
