// The env server's episode methods (trainer_bridge/PROTOCOL.md, "Methods"): reset and step.
// Their socket-thread half reads and checks the params and marks the env busy; the work runs
// elsewhere (a reset on a reset thread, run_reset; a step on the pool's threads) and the reply
// leaves when it is done (socket_loop.cpp, deliver_completions).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kforge/core/action.h"
#include "kforge/core/input_limits.h"
#include "kforge/core/op_registry.h"
#include "server_impl.h"
#include "wire_params.h"

namespace kforge::env {
namespace {

namespace protocol = kforge::rpc;
using protocol::ErrorCode;
using protocol::ProtocolError;
using server::Clock;
using server::reading_params;
using server::wire_seed;
using server::wire_solution;

// How often a reset thread looks up from a reference check to see whether
// the server is stopping.
constexpr std::chrono::milliseconds kCheckPoll{100};

// A reset's params, read on the socket thread.
struct ResetArgs {
  std::optional<json> task;
  std::string task_id;
  bool has_task_id = false;
  uint64_t seed = 0;
  ResetOptions options;
};

std::vector<Exemplar> read_exemplars(const Field& f, SolutionMode default_mode) {
  std::vector<Exemplar> exemplars;
  std::vector<Field> items = f.as_array();
  for (size_t i = 0; i < items.size(); ++i) {
    ObjectReader er = items[i].as_object();
    Exemplar e;
    Field sol = er.required("solution");
    sol.as_object();
    e.solution = wire_solution(sol.value(), default_mode, "/params" + sol.pointer());
    e.speedup_eager = er.required("speedup_eager").as_number_in(0.0, limits::kMaxRewardMagnitude);
    if (auto n = er.optional("note")) e.note = n->as_string();
    er.finish();
    exemplars.push_back(std::move(e));
  }
  return exemplars;
}

// The task is not part of the params' document: it is read as a document
// of its own on a reset thread, so that a task beyond the document limits
// (a deep id or attrs) is an invalid_task like any other bad task.
// The task is moved, not copied: this runs on the socket thread.
ResetArgs read_reset_params(json& params, SolutionMode default_mode) {
  json* task_value = nullptr;
  json rest = json::object();
  if (params.is_object()) {
    for (auto it = params.begin(); it != params.end(); ++it) {
      if (it.key() == "task") {
        task_value = &it.value();
      } else {
        rest[it.key()] = it.value();
      }
    }
  }
  return reading_params([&] {
    ResetArgs out;
    Document doc = Document::from_value(params.is_object() ? rest : params, "params");
    ObjectReader r = doc.root_object();
    r.allow("env_id");
    if (task_value != nullptr) {
      if (!task_value->is_object()) throw InputError("params: field /task: expected an object (a task)");
      // Counted here, before the task goes to a reset thread, as the task
      // reader counts them: a flood of 20,000-variant resets then costs the
      // socket thread their decode only.
      if (auto v = task_value->find("shape_variants");
          v != task_value->end() && v->is_array() && v->size() > limits::kMaxShapeVariants) {
        throw ProtocolError(ErrorCode::kInvalidTask,
                            "task: field /shape_variants: " + std::to_string(v->size()) +
                                " shape variants; a task has at most " + std::to_string(limits::kMaxShapeVariants) +
                                " (limits::kMaxShapeVariants)",
                            "/params/task/shape_variants");
      }
      out.task = std::move(*task_value);
    }
    if (auto f = r.optional("task_id")) {
      out.task_id = f->as_string();
      out.has_task_id = true;
    }
    if (auto f = r.optional("seed")) out.seed = wire_seed(*f);
    if (auto f = r.optional("exemplars")) out.options.exemplars = read_exemplars(*f, default_mode);
    r.finish();
    return out;
  });
}

}  // namespace

void Server::Impl::do_reset(const Envelope& from, uint64_t id, json& params) {
  Slot& slot = owned_slot(from.routing_id, params);
  const int env_id = slots.id_of(slot);
  ResetArgs a = read_reset_params(params, config.env.default_mode);
  if (a.task && a.has_task_id) {
    throw ProtocolError(ErrorCode::kBadRequest, "give either \"task\" or \"task_id\", not both", "/params/task_id");
  }
  if (!a.task && !a.has_task_id) {
    throw ProtocolError(ErrorCode::kBadRequest, "reset needs \"task\" (a task object) or \"task_id\"", "/params");
  }
  if (slot.busy) {
    throw ProtocolError(
        ErrorCode::kEnvBusy,
        "env " + std::to_string(env_id) + " has a step or reset in flight; wait for its reply before reset",
        "/params/env_id");
  }
  check_inflight(from.routing_id);
  ResetJob job;
  job.env_id = env_id;
  job.request_id = id;
  job.reply_to = from;
  job.task = std::move(a.task);
  job.task_id = std::move(a.task_id);
  job.seed = a.seed;
  job.options = std::move(a.options);
  // Until the reply, the env is busy: steps and resets get env_busy.
  slot.busy = true;
  slot.resetting = true;
  slot.request_id = id;
  slot.reply_to = from;
  slot.accept_cost = Clock::now() - handling_since;
  clients.started(from.routing_id);
  {
    std::lock_guard<std::mutex> lock(mu);
    reset_queue.push_back(std::move(job));
  }
  reset_cv.notify_one();
}

Server::Impl::ResetDone Server::Impl::run_reset(const ResetJob& job) {
  ResetDone done;
  done.env_id = job.env_id;
  try {
    TaskSpec parsed;
    const TaskSpec* task = nullptr;
    if (job.task) {
      try {
        parsed = parse_task(Document::from_value(*job.task, "task"));
        // Within the task limits before the judge runs its reference (a
        // 2^40-element variant must never get that far).
        validate_task(parsed);
      } catch (const InputError& e) {
        throw protocol::from_input_error(e, ErrorCode::kInvalidTask, "task", "/params/task");
      }
      task = &parsed;
    } else {
      auto it = task_index.find(job.task_id);
      if (it == task_index.end()) {
        std::vector<std::string> ids;
        for (const auto& kv : task_index) ids.push_back(kv.first);
        const std::string hint = ids.size() <= 100000 ? closest_match(job.task_id, ids) : "";
        throw ProtocolError(ErrorCode::kUnknownTask,
                            "task_id \"" + job.task_id.substr(0, limits::kMaxNameBytes) +
                                "\" is not in the server's task set (" + std::to_string(ids.size()) + " tasks" +
                                (config.tasks_source.empty() ? ", none loaded: start with --tasks" : "") + ")" +
                                (hint.empty() ? "" : "; did you mean \"" + hint + "\"?"),
                            "/params/task_id");
      }
      task = it->second;
    }
    // The judge checks each distinct task once (Executor::check_task); the
    // wait looks up now and then so that a stopping server is not held.
    ResetOptions options = job.options;
    options.reference_check = executor->check_task(*task, config.env.eval);
    while (options.reference_check.wait_for(kCheckPoll) != std::future_status::ready) {
      std::lock_guard<std::mutex> lock(mu);
      if (reset_stop) {
        done.cancelled = true;  // run() answers the slot shutting_down
        return done;
      }
    }
    ResetResult r;
    try {
      r = pool->reset(job.env_id, *task, job.seed, options);
    } catch (const InputError& e) {
      // The params and the slot were checked on the socket thread: what is
      // left is the task failing its checks (shapes, dtypes, op attributes,
      // limits) or its reference check (a node giving NaN/Inf or a constant
      // output).
      throw protocol::from_input_error(e, ErrorCode::kInvalidTask, "task",
                                       job.task ? "/params/task" : "/params/task_id");
    }
    done.payload =
        protocol::encode_result(job.request_id, {{"observation", to_json(r.observation)}, {"info", to_json(r.info)}});
    done.ok = true;
  } catch (const ProtocolError& e) {
    done.payload = protocol::encode_error(job.request_id, e);
  } catch (const std::exception& e) {
    log(std::string("internal error in reset: ") + e.what());
    done.payload =
        protocol::encode_error(job.request_id, ErrorCode::kInternal, std::string("server error: ") + e.what());
  }
  return done;
}

namespace {

// A step's params: exactly one of a tool call, a typed action, an end.
struct StepArgs {
  std::optional<json> tool_call;
  std::optional<json> action;
  std::optional<std::string> end;
};

StepArgs read_step_params(const json& params) {
  StepArgs a = reading_params([&] {
    StepArgs out;
    Document doc = Document::from_value(params, "params");
    ObjectReader r = doc.root_object();
    r.allow("env_id");
    // Any value: what the policy produced is judged by the environment, and a
    // malformed call is an observation for the policy, not an error.
    if (r.has("tool_call")) out.tool_call = r.required("tool_call").value();
    if (auto f = r.optional("action")) {
      f->as_object();
      out.action = f->value();
    }
    // The trainer ends the episode by the environment's truncation rule
    // (EnvPool::end_episodes).
    if (auto f = r.optional("end")) out.end = f->as_string();
    r.finish();
    return out;
  });
  if (int(a.tool_call.has_value()) + int(a.action.has_value()) + int(a.end.has_value()) > 1) {
    throw ProtocolError(ErrorCode::kBadRequest, "give one of \"tool_call\", \"action\" and \"end\"",
                        a.end ? "/params/end" : "/params/action");
  }
  if (!a.tool_call && !a.action && !a.end) {
    throw ProtocolError(ErrorCode::kBadRequest,
                        "step needs \"tool_call\" (an OpenAI-style tool call), \"action\" or \"end\"", "/params");
  }
  if (a.end && std::find(kEndReasons.begin(), kEndReasons.end(), *a.end) == kEndReasons.end()) {
    std::string list;
    for (const auto& reason : kEndReasons) list += (list.empty() ? "" : ", ") + reason;
    throw ProtocolError(
        ErrorCode::kBadRequest,
        "end: \"" + a.end->substr(0, limits::kMaxNameBytes) + "\" is not a reason to end an episode (" + list + ")",
        "/params/end");
  }
  return a;
}

// Typed actions come from the trainer's code, so mistakes in them are
// errors for the trainer (unlike a policy's tool calls).
Action read_typed_action(json v, SolutionMode default_mode) {
  try {
    if (v.contains("solution") && v["solution"].is_object()) {
      if (v["solution"].contains("source_file")) {
        throw ProtocolError(ErrorCode::kInvalidAction,
                            "field /params/action/solution/source_file: not accepted over the wire; send the code "
                            "as \"source\"",
                            "/params/action/solution/source_file");
      }
      if (!v["solution"].contains("mode")) v["solution"]["mode"] = solution_mode_name(default_mode);
    }
    return parse_action(Document::from_value(v, "action"));
  } catch (const InputError& e) {
    throw protocol::from_input_error(e, ErrorCode::kInvalidAction, "action", "/params/action");
  }
}

}  // namespace

void Server::Impl::do_step(const Envelope& from, uint64_t id, const json& params) {
  Slot& slot = owned_slot(from.routing_id, params);
  const int env_id = slots.id_of(slot);
  const StepArgs a = read_step_params(params);
  const std::string env = "env " + std::to_string(env_id);
  if (slot.busy) {
    throw ProtocolError(ErrorCode::kEnvBusy,
                        env + " has a " + (slot.resetting ? "reset" : "step") + " in flight; wait for its reply",
                        "/params/env_id");
  }
  if (!slot.has_episode) {
    throw ProtocolError(ErrorCode::kNoEpisode, env + " has no episode; reset it first", "/params/env_id");
  }
  if (slot.finished) {
    throw ProtocolError(ErrorCode::kEpisodeFinished, "the episode on " + env + " has finished; reset it",
                        "/params/env_id");
  }
  check_inflight(from.routing_id);
  if (a.action) {
    pool->send({read_typed_action(*a.action, config.env.default_mode)}, {env_id});
  } else if (a.end) {
    pool->end_episodes({env_id}, *a.end);
  } else {
    pool->send_tool_calls({*a.tool_call}, {env_id});
  }
  slot.busy = true;
  slot.request_id = id;
  slot.reply_to = from;
  slot.accept_cost = Clock::now() - handling_since;
  clients.started(from.routing_id);
  {
    std::lock_guard<std::mutex> lock(mu);
    ++outstanding;
  }
  cv.notify_one();
}

void Server::Impl::check_inflight(const std::string& routing_id) const {
  if (clients.at_inflight_limit(routing_id)) {
    throw ProtocolError(ErrorCode::kTooManyRequests, "this client has " + std::to_string(clients.inflight(routing_id)) +
                                                         " steps and resets in flight, the server's limit per "
                                                         "client; wait for replies first");
  }
}

}  // namespace kforge::env
