#include "kforge/env/env_pool.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>

#include "kforge/env/analysis.h"
#include "kforge/reward/reward.h"
#include "step_engine.h"

namespace kforge::env {

using internal::EpisodeState;
using internal::StepJob;

namespace {

// The energy window an `energy` reward term turns on when the config set none
// (EvalOptions::energy_window_ms).
constexpr double kEnergyWindowForRewardMs = 100.0;

// The modes a backend can run, in the order offered to the policy.
std::vector<SolutionMode> backend_modes(BackendKind backend) {
  if (backend == BackendKind::kCpu) return {SolutionMode::kCpp};
  return {SolutionMode::kCuda, SolutionMode::kNvrtc, SolutionMode::kTorchExt};
}

// Where the prompt reads kforge/kernel_abi.h: $KFORGE_ABI_INCLUDE_DIR as the
// compile service honours it, else the header in this source tree.
std::filesystem::path abi_include_dir() {
  if (const char* env = std::getenv("KFORGE_ABI_INCLUDE_DIR"); env != nullptr && *env != '\0') return env;
  return KFORGE_ABI_INCLUDE_DIR;
}

std::string join_modes(const std::vector<SolutionMode>& modes) {
  std::string s;
  for (SolutionMode m : modes) s += (s.empty() ? "" : ", ") + solution_mode_name(m);
  return s.empty() ? "none" : s;
}

}  // namespace

struct EnvPool::Impl {
  struct Slot {
    uint64_t episode = 0;
    std::shared_ptr<EpisodeState> state;  // null until the first reset
    std::deque<std::unique_ptr<StepJob>> pending;
    bool running = false;
    bool done = false;                      // the episode ended (as of the last finished step)
    size_t unreceived = 0;                  // steps sent and not yet returned by recv()
    std::optional<Solution> last_solution;  // send-time view, for actions without one
  };

  EnvConfig config;
  EnvServices services;
  std::unique_ptr<reward::RewardFunction> reward;
  std::unique_ptr<Toolset> toolset;
  std::unique_ptr<internal::StepEngine> engine;
  std::string skills;
  std::string system;
  std::string abi_header;

  mutable std::mutex mu;
  std::condition_variable work_cv;
  std::condition_variable ready_cv;
  std::vector<Slot> slots;
  std::deque<int> runnable;
  std::deque<EnvStep> ready;
  size_t in_flight = 0;  // sent and not yet in `ready`
  uint64_t next_seq = 0;
  bool stopping = false;
  std::vector<std::thread> workers;

  Impl(EnvConfig c, int num_envs, EnvServices s);
  ~Impl();
  void worker();
  Slot& slot_for(int env_id, const char* what);
  void enqueue(std::vector<std::unique_ptr<StepJob>> jobs, const std::vector<int>& env_ids);
};

namespace {

// step_terms must name terms of the reward function.
void check_step_terms(const EnvConfig& config, const reward::RewardFunction& reward) {
  const std::vector<std::string> components = reward.component_names();
  for (const auto& term : config.reward.step_terms) {
    if (std::find(components.begin(), components.end(), term) == components.end()) {
      std::string list;
      for (const auto& n : components) list += (list.empty() ? "" : ", ") + n;
      throw InputError(config.source + ": reward.step_terms: \"" + term + "\" is not a term of reward function \"" +
                       reward.name() + "\" (its terms: " + list + ")");
    }
  }
}

// The tools offered: the solution modes this backend and compiler support
// (the default among them), and the analysis tools that apply to one of them.
std::unique_ptr<Toolset> make_toolset(const EnvConfig& config, const CompileService& compiler,
                                      const AnalysisRegistry& registry) {
  std::vector<SolutionMode> modes;
  for (SolutionMode m : backend_modes(config.backend)) {
    if (compiler.supports(m)) modes.push_back(m);
  }
  if (std::find(modes.begin(), modes.end(), config.default_mode) == modes.end()) {
    throw InputError(config.source + ": solution_mode \"" + solution_mode_name(config.default_mode) +
                     "\" is not available on the " + backend_name(config.backend) +
                     " backend of this build (available: " + join_modes(modes) + ")");
  }
  std::vector<AnalysisToolInfo> analysis;
  for (const auto& name : registry.names()) {
    auto tool = registry.find(name);
    const bool applies =
        tool && std::any_of(modes.begin(), modes.end(), [&](SolutionMode m) { return tool->applies_to(m); });
    if (applies) analysis.push_back({tool->name(), tool->description(), tool->parameters()});
  }
  return std::make_unique<Toolset>(modes, config.default_mode, std::move(analysis));
}

// The executor runs the config's backend, and a CUDA device index is checked
// against the devices the judge sees (its hello), so that a wrong one fails
// here rather than in every step: the config's `device` and every one of
// placement.devices (`all` is what the process sees, so always right).
void check_executor(const EnvConfig& config, Executor& executor) {
  if (executor.backend() != config.backend) {
    throw InputError(config.source + ": the config's backend is " + backend_name(config.backend) +
                     " but the executor given runs " + backend_name(executor.backend()));
  }
  if (config.backend != BackendKind::kCuda) return;
  const int seen = executor.start_report().device_count;
  auto refuse = [&](const std::string& field, int index) {
    throw InputError(config.source + ": field " + field + ": CUDA device " + std::to_string(index) +
                     " does not exist; the judge sees " + std::to_string(seen) + " device(s)" +
                     (seen > 0 ? " (0.." + std::to_string(seen - 1) + ")" : "") + "; set " +
                     (field == "/device" ? "device" : "placement.devices") + " in the config");
  };
  if (seen >= 0 && config.device >= seen) refuse("/device", config.device);
  if (seen >= 0 && !config.placement.all_devices) {
    for (size_t i = 0; i < config.placement.devices.size(); ++i) {
      if (config.placement.devices[i] >= seen)
        refuse("/placement/devices/" + std::to_string(i), config.placement.devices[i]);
    }
  }
}

}  // namespace

void fit_eval_to_reward(const reward::RewardFunction& reward, EvalOptions* eval) {
  // Energy per call costs every profiled evaluation twice its window, so it is
  // measured only when a reward term pays for it. What only the profile stage
  // measures (energy, the own-kernel share) must be measured on the submits
  // the reward scores.
  for (const auto& term : reward.describe().value("terms", json::array())) {
    if (term.value("type", "") == "energy") {
      if (!(eval->energy_window_ms > 0)) eval->energy_window_ms = kEnergyWindowForRewardMs;
      eval->profile_on_submit = true;
    }
    if (term.value("own_kernel_weight", 0.0) > 0) eval->profile_on_submit = true;
  }
  // Timing that stops once the reward is decided: what the reward needs of
  // the speedup travels with every request (sample_stats.h's decision rule).
  if (eval->stop_when_decided) {
    const reward::TimingNeed need = reward.timing_need();
    eval->decision_edges = need.eager_edges;
    eval->decision_compile_edges = need.compile_edges;
    eval->decision_resolution = std::min(need.log_resolution, 1.0);  // wider decides nothing more
  }
}

EnvPool::Impl::Impl(EnvConfig c, int num_envs, EnvServices s) : config(std::move(c)), services(std::move(s)) {
  if (num_envs < 1) throw InputError("an EnvPool needs at least one env, got " + std::to_string(num_envs));
  if (config.backend == BackendKind::kCpu && config.device != 0) {
    throw InputError(config.source + ": field /device: the cpu backend has one device, 0; got " +
                     std::to_string(config.device));
  }
  // Config mistakes first, before any process or thread is started.
  reward = std::make_unique<reward::RewardFunction>(reward::RewardFunction::load(config.reward.function));
  check_step_terms(config, *reward);
  fit_eval_to_reward(*reward, &config.eval);
  skills = load_skills(config);
  if (!config.prompt.system.empty()) system = read_text_file(config.prompt.system);
  abi_header = read_text_file(abi_include_dir() / "kforge" / "kernel_abi.h");

  if (!services.compiler) {
    services.compiler = std::make_shared<CompileService>(config.compile);
    add_default_compilers(*services.compiler, backend_name(config.backend));
  }
  const AnalysisRegistry& registry = AnalysisRegistry::global();
  toolset = make_toolset(config, *services.compiler, registry);
  if (!services.executor) {
    services.executor = make_executor(executor_config(config));
  }
  check_executor(config, *services.executor);

  // abi_include_dir stays empty: the compile service stages the header, and
  // the prompt shows the same file (abi_include_dir() follows the same rule).
  CompileContext ctx;
  ctx.arch = config.arch;
  ctx.timeout_s = config.compile_timeout_s;
  ctx.memory_limit_bytes = config.compile_memory_limit_bytes;
  ctx.max_source_bytes = config.max_source_bytes;
  engine =
      std::make_unique<internal::StepEngine>(config, *services.compiler, *services.executor, *reward, registry, ctx);

  slots = std::vector<Slot>(static_cast<size_t>(num_envs));
  // Every lane of every device must be able to have a step waiting on it.
  const int threads = std::min(
      std::max(config.step_threads, config.placement.episodes_per_device * placed_device_count(config)), num_envs);
  for (int i = 0; i < threads; ++i) workers.emplace_back([this] { worker(); });
}

EnvPool::Impl::~Impl() {
  {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
    for (auto& s : slots) s.pending.clear();
  }
  work_cv.notify_all();
  ready_cv.notify_all();
  for (auto& t : workers) t.join();
}

void EnvPool::Impl::worker() {
  for (;;) {
    int env_id = -1;
    std::unique_ptr<StepJob> job;
    std::shared_ptr<EpisodeState> state;
    {
      std::unique_lock<std::mutex> lock(mu);
      work_cv.wait(lock, [this] { return stopping || !runnable.empty(); });
      if (stopping) return;
      env_id = runnable.front();
      runnable.pop_front();
      Slot& slot = slots[static_cast<size_t>(env_id)];
      job = std::move(slot.pending.front());
      slot.pending.pop_front();
      slot.running = true;
      state = slot.state;
    }
    EnvStep step;
    step.env_id = env_id;
    try {
      step.result = engine->run(*state, *job);
    } catch (const std::exception& e) {
      // A bug of ours must not lose the step: the caller still gets exactly
      // one result for it.
      step.result.observation.text = std::string("The environment failed on this step: ") + e.what() + "\n";
      step.result.observation.data = {{"type", "step"}, {"error", {{"kind", "system"}, {"message", e.what()}}}};
      StepInfo info;
      info.env_id = env_id;
      info.episode = state->episode;
      info.task_id = state->task.id;
      info.seed = state->seed;
      info.turn = state->turns;
      info.action = !job->end_reason.empty() ? "end" : job->action ? action_type_name(job->action->type) : "invalid";
      info.episode_return = state->episode_return;
      info.budget = {state->turns, config.max_turns, state->time_used_ms / 1000.0, config.time_budget_s,
                     state->compile_errors};
      info.error = StepError{StepErrorKind::kSystem, e.what()};
      step.result.info = std::move(info);
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      Slot& slot = slots[static_cast<size_t>(env_id)];
      slot.running = false;
      slot.done = state->terminated || state->truncated;
      ready.push_back(std::move(step));
      --in_flight;
      if (!slot.pending.empty()) {
        runnable.push_back(env_id);
        work_cv.notify_one();
      }
    }
    ready_cv.notify_all();
  }
}

EnvPool::Impl::Slot& EnvPool::Impl::slot_for(int env_id, const char* what) {
  if (env_id < 0 || static_cast<size_t>(env_id) >= slots.size()) {
    throw InputError(std::string(what) + ": unknown env_id " + std::to_string(env_id) + " (this pool has env_ids 0.." +
                     std::to_string(slots.size() - 1) + ")");
  }
  return slots[static_cast<size_t>(env_id)];
}

void EnvPool::Impl::enqueue(std::vector<std::unique_ptr<StepJob>> jobs, const std::vector<int>& env_ids) {
  if (jobs.size() != env_ids.size()) {
    throw InputError("send: " + std::to_string(jobs.size()) + " actions for " + std::to_string(env_ids.size()) +
                     " env_ids; give one env_id per action");
  }
  std::lock_guard<std::mutex> lock(mu);
  if (stopping) throw InputError("send: the pool is shutting down");
  // Check everything before queueing anything, so that a rejected call
  // changes nothing.
  for (int id : env_ids) {
    Slot& slot = slot_for(id, "send");
    if (!slot.state) {
      throw InputError("send: env " + std::to_string(id) + " has no episode; call reset(" + std::to_string(id) +
                       ", task) first");
    }
    if (slot.done && slot.pending.empty() && !slot.running) {
      throw InputError("send: the episode on env " + std::to_string(id) + " has finished (" +
                       (slot.state->terminated ? "terminated by submit" : "truncated") + "); call reset(" +
                       std::to_string(id) + ", task) to start a new one");
    }
  }
  const auto now = internal::Clock::now();
  for (size_t i = 0; i < jobs.size(); ++i) {
    Slot& slot = slots[static_cast<size_t>(env_ids[i])];
    StepJob& job = *jobs[i];
    job.seq = next_seq++;
    job.sent = now;
    if (job.end_reason.empty()) {
      if (job.error == StepErrorKind::kNone) {
        if (std::string why = toolset->check(*job.action); !why.empty()) {
          job.error = StepErrorKind::kInvalidAction;
          job.error_message = why;
        }
      }
      engine->prepare(job, slot.last_solution, slot.state->task);
    }
    const bool idle = slot.pending.empty() && !slot.running;
    slot.pending.push_back(std::move(jobs[i]));
    ++slot.unreceived;
    ++in_flight;
    if (idle) runnable.push_back(env_ids[i]);
  }
  work_cv.notify_all();
}

EnvPool::EnvPool(EnvConfig config, int num_envs, EnvServices services)
    : impl_(std::make_unique<Impl>(std::move(config), num_envs, std::move(services))) {}

EnvPool::~EnvPool() = default;

int EnvPool::size() const { return static_cast<int>(impl_->slots.size()); }
const EnvConfig& EnvPool::config() const { return impl_->config; }
const Toolset& EnvPool::tools() const { return *impl_->toolset; }

namespace {

// The phases of reset that need no slot: a resumed episode's state, checked
// against the budgets, and the reset's info.
ResumedInfo resume_episode(EpisodeState& state, const EpisodeResume& r, const EnvConfig& c, const Toolset& toolset) {
  if (r.turns_used < 0 || r.compile_errors < 0 || r.compile_errors > r.turns_used) {
    throw InputError("reset: resume.turns_used (" + std::to_string(r.turns_used) + ") and resume.compile_errors (" +
                     std::to_string(r.compile_errors) + ") must be >= 0, with compile_errors <= turns_used");
  }
  if (r.turns_used >= c.max_turns) {
    throw InputError("reset: resume.turns_used is " + std::to_string(r.turns_used) + " but episodes have " +
                     std::to_string(c.max_turns) + " turns (episode.max_turns): nothing is left to continue");
  }
  if (!std::isfinite(r.time_used_s) || r.time_used_s < 0 || (c.time_budget_s > 0 && r.time_used_s >= c.time_budget_s)) {
    throw InputError("reset: resume.time_used_s must be finite, >= 0 and below the time budget (" +
                     std::to_string(c.time_budget_s) + " s, episode.time_budget_s)");
  }
  if (!std::isfinite(r.episode_return)) throw InputError("reset: resume.episode_return must be finite");
  if (r.last_solution) {
    Action probe;
    probe.solution = r.last_solution;
    if (std::string why = toolset.check(probe); !why.empty()) throw InputError("reset: resume.last_solution: " + why);
  }
  state.turns = r.turns_used;
  state.time_used_ms = r.time_used_s * 1000.0;
  state.compile_errors = r.compile_errors;
  state.episode_return = r.episode_return;
  state.last_solution = r.last_solution;
  return {r.turns_used, r.time_used_s, r.compile_errors, r.episode_return, r.last_solution.has_value()};
}

ResetInfo describe_reset(int env_id, const EpisodeState& state, const EnvConfig& config, const Toolset& toolset,
                         const reward::RewardFunction& reward, const ReferenceReport& check) {
  ResetInfo info;
  info.env_id = env_id;
  info.episode = state.episode;
  info.task_id = state.task.id;
  info.seed = state.seed;
  info.backend = backend_name(config.backend);
  info.solution_mode = solution_mode_name(config.default_mode);
  info.max_turns = config.max_turns;
  info.time_budget_s = config.time_budget_s;
  info.tools = toolset.definitions();
  info.reward_function = reward.name();
  info.reward_source = reward.source();
  info.reference_check_status = reference_status_name(check.status);
  if (!check.ok()) info.reference_check_problem = check.problem;
  return info;
}

}  // namespace

ResetResult EnvPool::reset(int env_id, const TaskSpec& task, uint64_t seed, const ResetOptions& options) {
  auto check_idle = [&](Impl::Slot& slot) {
    if (slot.unreceived > 0) {
      throw InputError("reset: env " + std::to_string(env_id) + " has " + std::to_string(slot.unreceived) +
                       " step(s) not yet returned by recv(); receive them before resetting");
    }
  };
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    check_idle(impl_->slot_for(env_id, "reset"));
  }
  PromptInputs in;
  in.task = &task;
  in.config = &impl_->config;
  in.tools = impl_->toolset.get();
  in.abi_header = impl_->abi_header;
  in.skills = impl_->skills;
  in.system = impl_->system;
  in.exemplars = options.exemplars;
  const Prompt prompt = build_prompt(in);  // InputError for a task that does not type-check
  // A task that no solution can pass (its reference gives NaN/Inf or a
  // constant output, or fails to run) is refused before any candidate is
  // charged for it. The judge checks each distinct task once per Executor
  // (Executor::check_task); a system error lets the episode start (steps
  // then report the same system error, charging no one) and is retried at
  // the next reset.
  const ReferenceReport check = options.reference_check.valid()
                                    ? options.reference_check.get()
                                    : impl_->services.executor->check_task(task, impl_->config.eval).get();
  if (check.invalid()) throw InputError("task '" + task.id + "' cannot be judged: " + check.problem);

  auto state = std::make_shared<EpisodeState>();
  state->env_id = env_id;
  state->seed = seed;
  state->task = task;
  for (const auto& e : options.exemplars) state->reward_context.exemplar_speedups.push_back(e.speedup_eager);
  std::optional<ResumedInfo> resumed;
  if (options.resume) resumed = resume_episode(*state, *options.resume, impl_->config, *impl_->toolset);

  ResetResult out;
  out.observation = prompt_observation(prompt, in);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    Impl::Slot& slot = impl_->slot_for(env_id, "reset");
    check_idle(slot);
    state->episode = ++slot.episode;
    slot.state = state;
    slot.done = false;
    slot.last_solution = state->last_solution;
  }
  out.info = describe_reset(env_id, *state, impl_->config, *impl_->toolset, *impl_->reward, check);
  out.info.resumed = resumed;
  return out;
}

void EnvPool::send(const std::vector<Action>& actions, const std::vector<int>& env_ids) {
  std::vector<std::unique_ptr<StepJob>> jobs;
  jobs.reserve(actions.size());
  for (const auto& a : actions) {
    auto job = std::make_unique<StepJob>();
    job->action = a;
    jobs.push_back(std::move(job));
  }
  impl_->enqueue(std::move(jobs), env_ids);
}

void EnvPool::send_tool_calls(const std::vector<json>& calls, const std::vector<int>& env_ids) {
  std::vector<std::unique_ptr<StepJob>> jobs;
  jobs.reserve(calls.size());
  for (const auto& call : calls) {
    auto job = std::make_unique<StepJob>();
    job->raw_call = call;
    try {
      job->action = impl_->toolset->decode(call);
    } catch (const InputError& e) {
      job->error = StepErrorKind::kInvalidAction;
      job->error_message = e.what();
    }
    jobs.push_back(std::move(job));
  }
  impl_->enqueue(std::move(jobs), env_ids);
}

void EnvPool::end_episodes(const std::vector<int>& env_ids, const std::string& reason) {
  if (std::find(kEndReasons.begin(), kEndReasons.end(), reason) == kEndReasons.end()) {
    std::string list;
    for (const auto& r : kEndReasons) list += (list.empty() ? "" : ", ") + r;
    throw InputError("end_episodes: unknown reason \"" + reason.substr(0, 64) + "\" (the reasons: " + list + ")");
  }
  std::vector<std::unique_ptr<StepJob>> jobs;
  jobs.reserve(env_ids.size());
  for (size_t i = 0; i < env_ids.size(); ++i) {
    auto job = std::make_unique<StepJob>();
    job->end_reason = reason;
    jobs.push_back(std::move(job));
  }
  impl_->enqueue(std::move(jobs), env_ids);
}

std::vector<EnvStep> EnvPool::recv(size_t min_count, std::optional<std::chrono::milliseconds> timeout,
                                   size_t max_count) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  auto enough = [this, min_count] {
    const size_t reachable = impl_->ready.size() + impl_->in_flight;
    return impl_->ready.size() >= std::min(min_count, reachable);
  };
  if (timeout) {
    impl_->ready_cv.wait_for(lock, *timeout, enough);
  } else {
    impl_->ready_cv.wait(lock, enough);
  }
  std::vector<EnvStep> out;
  const size_t n = std::min(impl_->ready.size(), max_count);
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(std::move(impl_->ready.front()));
    impl_->ready.pop_front();
    --impl_->slots[static_cast<size_t>(out.back().env_id)].unreceived;
  }
  return out;
}

size_t EnvPool::pending() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->ready.size() + impl_->in_flight;
}

}  // namespace kforge::env
