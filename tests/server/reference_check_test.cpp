// The server refuses tasks whose reference cannot be judged (NaN/Inf or a
// constant output): at reset, naming the node, and at start-up for its task
// set; and its socket thread keeps answering while a reset's check runs.
#include <gtest/gtest.h>

#include <future>

#include "kforge/env/executor.h"
#include "server_test_util.h"

namespace kforge::env {
namespace {

namespace protocol = kforge::rpc;
using testing::gym_data;
using testing::RunningServer;
using testing::test_server_config;
using testing::WireClient;

TaskSpec fixture(const std::string& name) { return load_task(gym_data() / (name + ".json")); }

std::shared_ptr<Executor> cpu_executor() {
  ExecutorConfig ec;
  ec.backend = BackendKind::kCpu;
  return make_executor(ec);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(ServerReferenceCheckTest, InlineTaskWithNanReferenceIsRefusedNamingTheNode) {
  RunningServer server(test_server_config());
  WireClient client(server.endpoint());
  const int env_id = client.ok("make")["env_id"];
  protocol::Reply r = client.call("reset", {{"env_id", env_id}, {"task", to_json(fixture("nan_reference"))}});
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.code, "invalid_task");
  EXPECT_EQ(r.field.rfind("/params/task", 0), 0u) << r.field;
  EXPECT_TRUE(has(r.message, "node 1 (log -> t1): ")) << r.message;
  EXPECT_TRUE(has(r.message, "elements are NaN on the base shape (x: [64, 64])")) << r.message;
  // The env is still usable, and an honest task resets.
  EXPECT_EQ(client.ok("reset", {{"env_id", env_id}, {"task", to_json(fixture("scale_bias_relu"))}})["info"]["env_id"],
            env_id);
}

TEST(ServerReferenceCheckTest, TaskSetWithInvalidTasksRefusesToStartNamingEach) {
  ServerConfig config = test_server_config();
  config.tasks = {fixture("scale_bias_relu"), fixture("nan_reference"), fixture("constant_reference")};
  config.tasks_source = "three.jsonl";
  std::string error;
  try {
    Server server(std::move(config));
  } catch (const InputError& e) {
    error = e.what();
  }
  EXPECT_TRUE(has(error, "2 of 3 tasks in three.jsonl cannot be judged")) << error;
  EXPECT_TRUE(has(error, "task 'test/nan_reference': node 1 (log -> t1)")) << error;
  EXPECT_TRUE(has(error, "task 'test/constant_reference': node 1 (sub -> t1)")) << error;
  EXPECT_TRUE(has(error, "--skip-reference-check")) << error;
  EXPECT_FALSE(has(error, "test/scale_bias_relu")) << error;
}

TEST(ServerReferenceCheckTest, SkippedCheckMovesToTheFirstResetOfEachTask) {
  ServerConfig config = test_server_config();
  config.tasks = {fixture("scale_bias_relu"), fixture("nan_reference")};
  config.check_tasks = false;
  RunningServer server(std::move(config));
  WireClient client(server.endpoint());
  const int env_id = client.ok("make")["env_id"];
  protocol::Reply bad = client.call("reset", {{"env_id", env_id}, {"task_id", "test/nan_reference"}});
  EXPECT_EQ(bad.code, "invalid_task");
  EXPECT_EQ(bad.field.rfind("/params/task_id", 0), 0u) << bad.field;
  EXPECT_TRUE(has(bad.message, "node 1 (log -> t1)")) << bad.message;
  EXPECT_EQ(client.ok("reset", {{"env_id", env_id}, {"task_id", "test/scale_bias_relu"}})["info"]["task_id"],
            "test/scale_bias_relu");
}

TEST(ServerReferenceCheckTest, TaskSetIsCheckedAtStartAndResetsByIdHitTheCache) {
  std::shared_ptr<Executor> executor = cpu_executor();
  ServerConfig config = test_server_config();
  config.tasks = {fixture("scale_bias_relu"), fixture("scale_bias_relu_timed")};
  std::vector<std::string> log;
  RunningServer server(std::move(config), &log, EnvServices{nullptr, executor});
  EXPECT_EQ(executor->reference_checks(), 2);
  bool logged = false;
  for (const auto& line : server.log_lines()) logged = logged || has(line, "checked the references of 2 task(s)");
  EXPECT_TRUE(logged);
  WireClient client(server.endpoint());
  const int env_id = client.ok("make")["env_id"];
  client.ok("reset", {{"env_id", env_id}, {"task_id", "test/scale_bias_relu"}});
  client.ok("reset", {{"env_id", env_id}, {"task_id", "test/scale_bias_relu_timed"}});
  // The same content sent inline is the same task.
  client.ok("reset", {{"env_id", env_id}, {"task", to_json(fixture("scale_bias_relu"))}});
  EXPECT_EQ(executor->reference_checks(), 2);
  EXPECT_EQ(executor->health()["reference_requests"], 2);
}

TEST(ServerReferenceCheckTest, PingIsAnsweredWhileAResetWaitsForItsCheck) {
  std::shared_ptr<Executor> executor = cpu_executor();
  RunningServer server(test_server_config(), nullptr, EnvServices{nullptr, executor});
  WireClient client(server.endpoint());
  const int env_id = client.ok("make")["env_id"];
  // Occupy the device queue: a reference timed with a long warm-up. The
  // reset's check queues behind it, so the reset cannot be answered before
  // the warm-up is over, while the socket thread must answer at once.
  ReferenceRequest busy;
  busy.task = fixture("scale_bias_relu");
  busy.check = false;
  busy.time = true;
  busy.options.warmup_ms = 3000;
  busy.options.min_samples = 1;
  busy.options.max_time_ms = 10;
  std::future<ReferenceReport> occupied = executor->submit_reference(busy);
  const uint64_t reset_id = client.send("reset", {{"env_id", env_id}, {"task", to_json(fixture("scale_bias_relu"))}});
  const uint64_t ping_id = client.send("ping");
  protocol::Reply first = client.next();
  EXPECT_EQ(first.id, json(ping_id)) << "the reset was answered before a ping sent after it";
  EXPECT_TRUE(first.ok);
  // The env is busy with its reset meanwhile.
  protocol::Reply step = client.call("step", {{"env_id", env_id}, {"tool_call", testing::tool_call("submit", {})}});
  EXPECT_EQ(step.code, "env_busy");
  EXPECT_TRUE(has(step.message, "reset in flight")) << step.message;
  EXPECT_EQ(occupied.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "the device queue was free before the reset's check could wait on it";
  protocol::Reply reset = client.wait(reset_id);
  ASSERT_TRUE(reset.ok) << reset.code << ": " << reset.message;
  EXPECT_EQ(reset.result["info"]["reference_check"]["status"], "ok");
  EXPECT_EQ(occupied.get().status, ReferenceStatus::kOk);
}

}  // namespace
}  // namespace kforge::env
