#include "kforge/rollout/replay/recorded_episode.h"

#include <algorithm>

#include "kforge/core/action.h"
#include "kforge/core/error.h"
#include "kforge/core/jsonl.h"
#include "kforge/core/trajectory.h"

namespace kforge::rollout::replay {
namespace {

namespace fs = std::filesystem;

// Lenient accessors: a key of the wrong type reads as absent. Only the keys
// replay cannot work without are checked strictly (episode_from_json).
const json* find(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

const json& find_or_null(const json& obj, const char* key) {
  static const json kNull;
  const json* v = find(obj, key);
  return v == nullptr ? kNull : *v;
}

std::string string_at(const json& obj, const char* key) {
  const json* v = find(obj, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

std::optional<double> number_at(const json& obj, const char* key) {
  const json* v = find(obj, key);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  return v->get<double>();
}

bool bool_at(const json& obj, const char* key) {
  const json* v = find(obj, key);
  return v != nullptr && v->is_boolean() && v->get<bool>();
}

std::vector<std::string> violation_checks(const json& list) {
  std::vector<std::string> out;
  if (!list.is_array()) return out;
  for (const auto& v : list) {
    const std::string check = string_at(v, "check");
    if (!check.empty()) out.push_back(check);
  }
  return out;
}

// The parts of a measurement replay uses.
void read_measurement(const Measurement& m, std::string* outcome, std::optional<double>* speedup,
                      std::vector<std::string>* violations) {
  *outcome = outcome_name(m.outcome);
  *speedup = m.speedup_eager;
  violations->clear();
  for (const auto& v : m.violations) {
    if (!v.check.empty()) violations->push_back(v.check);
  }
}

// The step info a turn recorded (info.env). One that does not read as a
// step info (a foreign or damaged writer) counts as not recorded: the turn is
// then read from its observation, as the turns of writers that keep none.
std::optional<env::StepInfo> step_info_of(const json& turn, const std::string& where) {
  const json& env_info = find_or_null(find_or_null(turn, "info"), "env");
  if (!env_info.is_object()) return std::nullopt;
  try {
    return env::step_info_from_json(env_info, where + ": info.env");
  } catch (const InputError&) {
    return std::nullopt;
  }
}

// A solution recorded in a trajectory. "source_file" is refused: a recorded
// trajectory must not make replay read files of this machine.
std::optional<Solution> solution_from_json(const json& s, const std::string& where) {
  if (!s.is_object()) return std::nullopt;
  if (s.contains("source_file")) {
    throw InputError(where + ": field solution/source_file: a recorded solution must carry its source, not a path");
  }
  return parse_solution(Document::from_value(s, where));
}

// The step's action: the parsed form {"type", "solution", ...} that the
// recorder writes, or a raw tool call ({"name", "arguments"} or the OpenAI
// envelope) from writers that kept the policy's call.
void read_action(const json& action, const std::string& where, RecordedTurn* turn) {
  if (!action.is_object()) return;
  if (const json* type = find(action, "type"); type != nullptr && type->is_string() && *type != "function") {
    turn->action = type->get<std::string>();
    if (const json* s = find(action, "solution")) turn->solution = solution_from_json(*s, where);
    return;
  }
  // A raw tool call: decoded as the environment would. A call the env found
  // malformed stays without a solution; its observation says "invalid".
  try {
    const Action a = parse_tool_call(action, SolutionMode::kCpp);
    turn->action = action_type_name(a.type);
    turn->solution = a.solution;
  } catch (const InputError&) {
    turn->action = "invalid";
  }
}

RecordedTurn read_turn(const json& t, size_t index, const std::string& where) {
  if (!t.is_object()) throw InputError(where + ": expected an object, got " + describe_value(t));
  RecordedTurn turn;
  turn.index = static_cast<int>(index);
  turn.env_turn = static_cast<int>(index);
  const json& obs = find_or_null(t, "observation");
  const json& data = find_or_null(obs, "data");
  read_action(find_or_null(t, "action"), where, &turn);
  if (turn.action.empty()) turn.action = string_at(data, "action");
  if (turn.solution) {
    // A raw tool call without "mode" was decoded with a placeholder; the
    // environment's record of the solution names the real one.
    const std::string mode = string_at(find_or_null(data, "solution"), "mode");
    if (!mode.empty() && !find(find_or_null(find_or_null(t, "action"), "solution"), "mode")) {
      for (size_t i = 0; i < solution_mode_names().size(); ++i) {
        if (solution_mode_names()[i] == mode) turn.solution->mode = static_cast<SolutionMode>(i);
      }
    }
  }
  if (auto n = number_at(data, "turn")) turn.env_turn = static_cast<int>(*n);
  turn.error_kind = string_at(find_or_null(data, "error"), "kind");
  // Prefer the step's info when the recorder kept it.
  turn.step = step_info_of(t, where);
  if (turn.step) {
    read_measurement(turn.step->measurement, &turn.outcome, &turn.speedup, &turn.violations);
    turn.env_turn = turn.step->measurement.turn;
    turn.error_kind = turn.step->error ? env::step_error_kind_name(turn.step->error->kind) : "";
  } else {
    turn.outcome = string_at(data, "outcome");
    turn.speedup = number_at(find_or_null(data, "timing"), "speedup_eager");
    turn.violations = violation_checks(find_or_null(data, "violations"));
  }
  if (turn.outcome == "not_run") turn.outcome.clear();
  if (auto r = number_at(t, "reward")) turn.reward = *r;
  if (const json* c = find(t, "reward_components"); c != nullptr && c->is_object()) turn.reward_components = *c;
  return turn;
}

// How the episode ended, from its turns (RecordedEpisode's derived fields).
void derive(RecordedEpisode* e) {
  e->turns_used = 0;
  for (const auto& t : e->turns) {
    if (t.error_kind != "system" && t.error_kind != "episode_finished") ++e->turns_used;
  }
  if (e->turns.empty()) {
    e->failure_cause = e->policy_error.empty() ? "no_turns" : "policy_error";
    return;
  }
  std::vector<std::string> violations;
  bool system_error = false;
  for (int i = static_cast<int>(e->turns.size()) - 1; i >= 0; --i) {
    const RecordedTurn& t = e->turns[static_cast<size_t>(i)];
    if (t.action == "submit" && (!t.outcome.empty() || t.error_kind.empty())) {
      e->final_turn = i;
      e->final_outcome = t.outcome;
      e->final_speedup = t.speedup;
      violations = t.violations;
      system_error = t.error_kind == "system";
      break;
    }
  }
  // A truncated episode's last step carries the evaluation of its last
  // solution as if submitted (env step_engine), when there was one: in its
  // info (the typed FinalEvaluation), or in its observation for writers that
  // kept no info.
  const RecordedTurn& last = e->turns.back();
  const env::FinalEvaluation* fin = last.step && last.step->final_evaluation ? &*last.step->final_evaluation : nullptr;
  if (e->final_turn < 0 && (fin != nullptr || !e->truncation_final.is_null())) {
    const json& fe = e->truncation_final;
    if (fin != nullptr ? fin->auto_submitted : bool_at(fe, "auto_submitted")) {
      if (fin != nullptr) {
        read_measurement(fin->measurement, &e->final_outcome, &e->final_speedup, &violations);
      } else {
        const json& m = find_or_null(fe, "measurement");
        e->final_outcome = string_at(m, "outcome");
        e->final_speedup = number_at(m, "speedup_eager");
        violations = violation_checks(find_or_null(m, "violations"));
      }
      if (e->final_outcome == "not_run") e->final_outcome.clear();
      // The auto-submitted solution is the episode's most recent one.
      for (int i = static_cast<int>(e->turns.size()) - 1; i >= 0; --i) {
        if (e->turns[static_cast<size_t>(i)].solution) {
          e->final_turn = i;
          break;
        }
      }
    }
    system_error = fin != nullptr ? fin->system_error.has_value() : find(fe, "system_error") != nullptr;
  }
  e->success = e->final_outcome == "correct" && violations.empty();
  if (e->success) {
    e->failure_cause.clear();
  } else if (!violations.empty()) {
    e->failure_cause = "violation:" + violations.front();
  } else if (!e->final_outcome.empty()) {
    e->failure_cause = e->final_outcome;
  } else if (!e->policy_error.empty()) {
    e->failure_cause = "policy_error";
  } else if (system_error || e->turns.back().error_kind == "system") {
    e->failure_cause = "system_error";
  } else {
    e->failure_cause = "no_solution";
  }
}

// trajectory.info's policy error: a string, or {"message"}.
std::string policy_error_of(const json& info) {
  for (const char* key : {"policy_error", "error"}) {
    const json* v = find(info, key);
    if (v == nullptr || v->is_null()) continue;
    if (v->is_string()) return v->get<std::string>();
    const std::string m = string_at(*v, "message");
    if (!m.empty()) return m;
  }
  return "";
}

std::vector<double> exemplar_speedups_of(const json& info) {
  std::vector<double> out;
  if (const json* v = find(info, "exemplar_speedups"); v != nullptr && v->is_array()) {
    for (const auto& x : *v) {
      if (x.is_number()) out.push_back(x.get<double>());
    }
  } else if (const json* ex = find(info, "exemplars"); ex != nullptr && ex->is_array()) {
    // The rollout workers write {"speedup_eager", "note", "solution"}.
    for (const auto& x : *ex) {
      if (auto s = number_at(x, "speedup_eager")) {
        out.push_back(*s);
      } else if (auto t = number_at(x, "speedup")) {
        out.push_back(*t);
      }
    }
  }
  return out;
}

std::vector<fs::path> expand(const fs::path& path, std::vector<ReadProblem>* problems) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      if (entry.is_regular_file() && entry.path().extension() == ".jsonl") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) problems->push_back({path.string(), 0, "a directory without .jsonl files"});
    return files;
  }
  if (!fs::exists(path, ec)) {
    problems->push_back({path.string(), 0, "no such file"});
    return {};
  }
  return {path};
}

}  // namespace

int max_readable_schema_version() { return kTrajectorySchemaVersion; }

RecordedEpisode episode_from_json(const json& value, const std::string& file, size_t line) {
  const std::string where = file + (line > 0 ? ":" + std::to_string(line) : "");
  const json* root = &value;
  // Envelopes such as {"worker", "seq", "trajectory": {...}}.
  if (const json* inner = find(value, "trajectory"); inner != nullptr && inner->is_object()) root = inner;
  const json& t = *root;
  if (!t.is_object()) throw InputError(where + ": expected a trajectory object, got " + describe_value(t));
  RecordedEpisode e;
  e.file = file;
  e.line = line;
  const json* version = find(t, "schema_version");
  if (version == nullptr || !version->is_number_integer()) {
    if (find(t, "messages") != nullptr && find(t, "turns") == nullptr) {
      throw InputError(where +
                       ": a chat-messages export (kforge.export), not a trajectory; replay reads the trajectory "
                       "JSONL of the rollout workers or of `kforge receive --out`");
    }
    throw InputError(where + ": field schema_version: expected an integer (is this a trajectory file?)");
  }
  e.schema_version = version->get<int>();
  if (e.schema_version < kOldestReadableTrajectorySchemaVersion || e.schema_version > max_readable_schema_version()) {
    throw InputError(where + ": field schema_version: " + std::to_string(e.schema_version) +
                     " is not readable by this build (it reads versions " +
                     std::to_string(kOldestReadableTrajectorySchemaVersion) + " to " +
                     std::to_string(max_readable_schema_version()) + "); use a newer kforge");
  }
  e.id = string_at(t, "id");
  e.task_id = string_at(t, "task_id");
  if (e.id.empty()) throw InputError(where + ": field id: expected the trajectory's id (a non-empty string)");
  if (e.task_id.empty()) throw InputError(where + ": field task_id: expected a non-empty string");
  const json* turns = find(t, "turns");
  if (turns == nullptr || !turns->is_array()) throw InputError(where + ": field turns: expected an array");
  e.group_id = string_at(t, "group_id");
  e.policy_version = string_at(t, "policy_version_start");
  e.policy_version_end = string_at(t, "policy_version_end");
  e.terminated = bool_at(t, "terminated");
  e.truncated = bool_at(t, "truncated");
  if (auto r = number_at(t, "total_reward")) e.total_reward = *r;
  const json& info = find_or_null(t, "info");
  if (const json* s = find(info, "seed"); s != nullptr && s->is_number_unsigned()) e.seed = s->get<uint64_t>();
  if (const json* task = find(info, "task"); task != nullptr && task->is_object()) e.task = *task;
  e.policy_error = policy_error_of(info);
  e.truncation_reason = string_at(info, "truncation_reason");
  e.exemplar_speedups = exemplar_speedups_of(info);
  e.recorded_backend = string_at(find_or_null(info, "env"), "backend");
  e.recorded_reward = string_at(find_or_null(find_or_null(info, "env"), "reward"), "function");

  std::optional<Solution> last_solution;
  for (size_t i = 0; i < turns->size(); ++i) {
    RecordedTurn turn = read_turn((*turns)[i], i, where + ": turn " + std::to_string(i));
    if (turn.solution) {
      last_solution = turn.solution;
    } else if (last_solution && (turn.action == "compile" || turn.action == "verify" || turn.action == "profile" ||
                                 turn.action == "submit")) {
      turn.solution = last_solution;
      turn.solution_inherited = true;
    }
    // The first step's info carries the reset seed when the trajectory's
    // info does not.
    if (!e.seed && turn.step) e.seed = turn.step->seed;
    const json& data = find_or_null(find_or_null((*turns)[i], "observation"), "data");
    if (i + 1 == turns->size()) {
      if (const json* fe = find(data, "final_evaluation"); fe != nullptr && fe->is_object()) e.truncation_final = *fe;
      if (e.truncation_reason.empty()) e.truncation_reason = string_at(find_or_null(data, "episode"), "reason");
    }
    e.turns.push_back(std::move(turn));
  }
  derive(&e);
  return e;
}

RecordedSet read_trajectory_files(const std::vector<fs::path>& paths) {
  RecordedSet set;
  for (const auto& path : paths) {
    for (const auto& file : expand(path, &set.problems)) {
      ++set.files;
      JsonlReadOptions options;
      // A writer killed mid-line leaves a torn last line: not a problem.
      options.allow_torn_tail = true;
      try {
        for_each_jsonl_line(
            file,
            [&](const Document& doc, size_t line) {
              ++set.lines;
              try {
                set.episodes.push_back(episode_from_json(doc.root, file.string(), line));
              } catch (const InputError& e) {
                set.problems.push_back({file.string(), line, e.what()});
              }
            },
            options);
      } catch (const InputError& e) {
        // A line that is not JSON at all stops the reader; what came before
        // it is kept.
        set.problems.push_back({file.string(), 0, e.what()});
      }
    }
  }
  return set;
}

}  // namespace kforge::rollout::replay
