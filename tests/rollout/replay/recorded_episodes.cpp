#include "recorded_episodes.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <stdexcept>

#include "kforge/core/action.h"
#include "kforge/core/error.h"
#include "kforge/core/jsonl.h"
#include "kforge/core/trajectory.h"

namespace kforge::rollout::testing {
namespace {

namespace fs = std::filesystem;

// The file is rebuilt when the test binary is newer than it.
bool fresh(const fs::path& file) {
  struct stat f {
  }, exe{};
  if (::stat(file.c_str(), &f) != 0 || ::stat("/proc/self/exe", &exe) != 0) return false;
  return f.st_mtime >= exe.st_mtime && f.st_size > 0;
}

void record_all(const fs::path& out) {
  env::Env env(fast_config());
  const TaskSpec affine = load_task(rollout_data() / "affine_relu6_small.json");
  const TaskSpec timed = load_task(gym_data() / "scale_bias_relu_timed.json");
  const fs::path ex = source_dir() / "examples/affine_relu6/cpu";
  std::vector<json> lines;
  lines.push_back(
      record_episode(env, affine, 11,
                     {tool_call("compile", source_args(ex / "naive.cpp")), tool_call("verify", json::object()),
                      tool_call("submit", source_args(ex / "fast.cpp"))},
                     {"ep-a", "g-affine", "v1", true, false}));
  lines.push_back(record_episode(env, affine, 12, {tool_call("submit", source_args(ex / "wrong.cpp"))},
                                 {"ep-b", "g-affine", "v1", false, false}));
  std::vector<json> verifies(4, tool_call("verify", source_args(ex / "naive.cpp")));
  lines.push_back(record_episode(env, affine, 13, verifies, {"ep-c", "g-affine", "v2", true, false}));
  lines.push_back(record_episode(env, timed, 5,
                                 {json{{"name", "submit"}, {"arguments", "{not json"}},
                                  tool_call("submit", source_args(gym_data() / "correct.cpp"))},
                                 {"ep-d", "g-timed", "v2", false, true}));
  // A worker records an episode whose policy never answered (HTTP 503 after
  // its retries): no turns, truncated, no penalty.
  lines.push_back({{"schema_version", kTrajectorySchemaVersion},
                   {"id", "ep-e"},
                   {"group_id", "g-affine"},
                   {"task_id", affine.id},
                   {"turns", json::array()},
                   {"policy_version_start", "v2"},
                   {"policy_version_end", "v2"},
                   {"total_reward", 0.0},
                   {"terminated", false},
                   {"truncated", true},
                   {"info",
                    {{"seed", 14},
                     {"policy_error",
                      "POST http://127.0.0.1:8000/v1/chat/completions: HTTP 503: overloaded (gave up "
                      "after 5 attempts)"}}}});
  const fs::path tmp = out.string() + ".tmp";
  {
    JsonlWriter writer(tmp, JsonlWriter::Mode::kTruncate);
    for (const auto& l : lines) writer.write(l);
  }
  fs::rename(tmp, out);
}

}  // namespace

env::EnvConfig fast_config() {
  env::EnvConfig c = env::load_env_config((gym_data() / "fast.yaml").string());
  c.compile.cache_dir = fs::path(KFORGE_BINARY_DIR) / "tests/gym/compile-cache";
  return c;
}

json tool_call(const std::string& name, const json& arguments) {
  return {{"name", name}, {"arguments", arguments.dump()}};
}

json source_args(const fs::path& file) { return {{"source", read_text_file(file)}}; }

json record_episode(env::Env& env, const TaskSpec& task, uint64_t seed, const std::vector<json>& calls,
                    const EpisodeTags& tags) {
  const env::ResetResult reset = env.reset(task, seed);
  Trajectory t;
  t.id = tags.id;
  t.group_id = tags.group_id;
  t.task_id = task.id;
  t.policy_version_start = tags.policy_version;
  t.policy_version_end = tags.policy_version;
  t.info = {{"seed", seed},
            {"env", {{"backend", env::backend_name(env.config().backend)}, {"reward", reset.info.reward_json()}}}};
  if (tags.carry_task) t.info["task"] = to_json(task);
  std::vector<json> turn_info;
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& call = calls[i];
    Turn turn;
    const std::string call_id = "call_" + std::to_string(i);
    try {
      turn.action = to_json(env.tools().decode(call));
    } catch (const InputError&) {
      turn.action = nullptr;  // the env shows the policy why; the recorder keeps no parsed action
    }
    const env::StepResult r = env.step_tool_call(call);
    turn.messages =
        json::array({{{"role", "assistant"},
                      {"content", ""},
                      {"tool_calls", json::array({{{"id", call_id}, {"type", "function"}, {"function", call}}})}},
                     {{"role", "tool"}, {"tool_call_id", call_id}, {"content", r.observation.text}}});
    turn.observation = r.observation;
    turn.reward = r.reward;
    turn.reward_components = r.info.reward_components.to_json();
    turn.timings = env::to_json(r.info.timings);
    t.total_reward += r.reward;
    t.turns.push_back(std::move(turn));
    turn_info.push_back({{"env", env::to_json(r.info)}, {"policy", {{"policy_version", tags.policy_version}}}});
    if (r.terminated || r.truncated) {
      t.terminated = r.terminated;
      t.truncated = r.truncated;
      break;
    }
  }
  json j = to_json(t);
  if (tags.with_env_info) {
    for (size_t i = 0; i < turn_info.size(); ++i) j["turns"][i]["info"] = turn_info[i];
  }
  return j;
}

fs::path recorded_episodes_file() {
  const fs::path dir = fs::path(KFORGE_BINARY_DIR) / "tests/rollout/replay";
  fs::create_directories(dir);
  const fs::path file = dir / "replay-episodes.jsonl";
  const int lock = ::open((dir / "replay-episodes.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0 || ::flock(lock, LOCK_EX) != 0) throw std::runtime_error("cannot lock the recorded episodes");
  try {
    if (!fresh(file)) record_all(file);
  } catch (...) {
    ::close(lock);
    throw;
  }
  ::close(lock);
  return file;
}

}  // namespace kforge::rollout::testing
