#include "kforge/core/trajectory.h"

namespace kforge {

json to_json(const Turn& turn) {
  return {{"messages", turn.messages},
          {"action", turn.action},
          {"observation", to_json(turn.observation)},
          {"reward", turn.reward},
          {"reward_components", turn.reward_components},
          {"timings", turn.timings},
          {"info", turn.info}};
}

json to_json(const Trajectory& t) {
  json turns = json::array();
  for (const auto& turn : t.turns) turns.push_back(to_json(turn));
  return {{"schema_version", t.schema_version},
          {"id", t.id},
          {"group_id", t.group_id},
          {"task_id", t.task_id},
          {"turns", turns},
          {"policy_version_start", t.policy_version_start},
          {"policy_version_end", t.policy_version_end},
          {"total_reward", t.total_reward},
          {"terminated", t.terminated},
          {"truncated", t.truncated},
          {"info", t.info}};
}

Trajectory parse_trajectory(const Document& doc) {
  ObjectReader r = doc.root_object();
  Trajectory t;
  Field version = r.required("schema_version");
  t.schema_version = static_cast<int>(version.as_int());
  if (t.schema_version < kOldestReadableTrajectorySchemaVersion || t.schema_version > kTrajectorySchemaVersion) {
    version.fail("schema version " + std::to_string(kOldestReadableTrajectorySchemaVersion) + " to " +
                 std::to_string(kTrajectorySchemaVersion) + " (the versions this build reads)");
  }
  t.id = r.required("id").as_string();
  if (auto f = r.optional("group_id")) t.group_id = f->as_string();
  t.task_id = r.required("task_id").as_string();
  for (const Field& f : r.required("turns").as_array()) {
    ObjectReader tr = f.as_object();
    Turn turn;
    if (auto m = tr.optional("messages")) turn.messages = m->value();
    if (auto a = tr.optional("action")) turn.action = a->value();
    ObjectReader obs = tr.required("observation").as_object();
    turn.observation.text = obs.required("text").as_string();
    if (auto d = obs.optional("data")) turn.observation.data = d->value();
    obs.finish();
    turn.reward = tr.required("reward").as_number();
    if (auto c = tr.optional("reward_components")) turn.reward_components = c->value();
    if (auto c = tr.optional("timings")) turn.timings = c->value();
    if (auto c = tr.optional("info")) turn.info = c->value();
    tr.finish();
    t.turns.push_back(std::move(turn));
  }
  if (auto f = r.optional("policy_version_start")) t.policy_version_start = f->as_string();
  if (auto f = r.optional("policy_version_end")) t.policy_version_end = f->as_string();
  if (auto f = r.optional("total_reward")) t.total_reward = f->as_number();
  if (auto f = r.optional("terminated")) t.terminated = f->as_bool();
  if (auto f = r.optional("truncated")) t.truncated = f->as_bool();
  if (auto f = r.optional("info")) t.info = f->value();
  r.finish();
  return t;
}

}  // namespace kforge
