#include "kforge/env/env_config.h"

#include <algorithm>
#include <cstdlib>

#include "kforge/core/input_limits.h"
#include "kforge/env/device_pool.h"
#include "kforge/reward/reward.h"

namespace kforge::env {
namespace {

const std::vector<std::string>& paid_on_names() {
  static const std::vector<std::string> kNames = {"submit", "every_step"};
  return kNames;
}

const std::vector<std::string>& truncation_names() {
  static const std::vector<std::string> kNames = {"auto_submit", "fail"};
  return kNames;
}

const std::vector<std::string>& backend_names() {
  static const std::vector<std::string> kNames = {"cpu", "cuda"};
  return kNames;
}

// Paths in a config file are relative to the file, so a config and the files
// it names can move together.
std::filesystem::path resolve_path(const Document& doc, const std::string& text) {
  std::filesystem::path p(text);
  if (p.empty() || p.is_absolute() || doc.source.empty() || doc.source.front() == '<') return p;
  return std::filesystem::path(doc.source).parent_path() / p;
}

// A reward function is a preset name unless it looks like a path (the same
// rule RewardFunction::load applies); only paths are made config-relative.
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string resolve_reward(const Document& doc, const std::string& text) {
  const bool is_path = text.find('/') != std::string::npos || ends_with(text, ".yaml") || ends_with(text, ".yml") ||
                       ends_with(text, ".json");
  return is_path ? resolve_path(doc, text).string() : text;
}

SolutionMode mode_from_name(const std::string& name) {
  for (SolutionMode m : {SolutionMode::kCuda, SolutionMode::kNvrtc, SolutionMode::kTorchExt, SolutionMode::kCpp}) {
    if (solution_mode_name(m) == name) return m;
  }
  return SolutionMode::kCuda;
}

void read_episode(ObjectReader r, EnvConfig& c) {
  if (auto f = r.optional("max_turns")) c.max_turns = static_cast<int>(f->as_int_in(1, 1000));
  // Bounded like every duration (limits::kMaxConfigDurationS); 0: no limit.
  if (auto f = r.optional("time_budget_s")) c.time_budget_s = f->as_number_in(0.0, limits::kMaxConfigDurationS);
  r.finish();
}

void read_reward(const Document& doc, ObjectReader r, RewardSchedule& s) {
  if (auto f = r.optional("function")) {
    const std::string v = f->as_string();
    if (v.empty()) f->fail("a reward preset name or a path to a reward YAML");
    s.function = resolve_reward(doc, v);
  }
  if (auto f = r.optional("paid_on")) {
    s.paid_on = f->as_enum(paid_on_names()) == "submit" ? RewardPaidOn::kSubmit : RewardPaidOn::kEveryStep;
  }
  if (auto f = r.optional("step_terms")) s.step_terms = f->as_string_list();
  if (auto f = r.optional("on_truncation")) {
    s.on_truncation =
        f->as_enum(truncation_names()) == "auto_submit" ? TruncationReward::kAutoSubmit : TruncationReward::kFail;
  }
  r.finish();
}

void read_prompt(const Document& doc, ObjectReader r, PromptConfig& p) {
  if (auto f = r.optional("skills")) p.skills = resolve_path(doc, f->as_string());
  if (auto f = r.optional("system")) p.system = resolve_path(doc, f->as_string());
  if (auto f = r.optional("compact")) p.compact = f->as_bool();
  r.finish();
}

void read_compile(const Document& doc, ObjectReader r, EnvConfig& c) {
  if (auto f = r.optional("cache_dir")) c.compile.cache_dir = resolve_path(doc, f->as_string());
  // 0: one per usable core (CompileServiceConfig::threads).
  if (auto f = r.optional("threads")) c.compile.threads = static_cast<int>(f->as_int_in(0, 256));
  if (auto f = r.optional("arch")) {
    c.arch = f->as_string();
    if (c.arch.rfind("sm_", 0) != 0) f->fail("a CUDA architecture such as \"sm_90a\"");
  }
  if (auto f = r.optional("timeout_s")) {
    c.compile_timeout_s = f->as_number_in(0.0, limits::kMaxConfigDurationS);
    if (!(c.compile_timeout_s > 0)) f->fail("a positive number of seconds");
  }
  if (auto f = r.optional("memory_limit_mib")) {
    c.compile_memory_limit_bytes = static_cast<uint64_t>(f->as_int_in(256, int64_t{1} << 20)) << 20;
  }
  if (auto f = r.optional("max_source_bytes")) {
    c.max_source_bytes = static_cast<size_t>(f->as_int_in(1, int64_t{1} << 30));
  }
  if (auto f = r.optional("per_mode_limit")) {
    ObjectReader limits = f->as_object();
    for (const auto& name : solution_mode_names()) {
      if (auto g = limits.optional(name)) {
        c.compile.per_mode_limit[mode_from_name(name)] = static_cast<int>(g->as_int_in(1, 256));
      }
    }
    limits.finish();
  }
  r.finish();
}

// More spare runners than this per judge is a typo: each CUDA spare holds a context.
constexpr int64_t kMaxRunnerSpares = 16;
// CUDA_DEVICE_MAX_CONNECTIONS accepts 1 to 32.
constexpr int64_t kMaxCudaConnections = 32;

void read_executor(const Document& doc, ObjectReader r, EnvConfig& c) {
  if (auto f = r.optional("tools_dir")) c.tools_dir = resolve_path(doc, f->as_string());
  if (auto f = r.optional("scratch_dir")) c.scratch_dir = resolve_path(doc, f->as_string());
  if (auto f = r.optional("gate_dir")) c.gate_dir = resolve_path(doc, f->as_string());
  if (auto f = r.optional("gpu_gate")) c.gpu_gate = f->as_bool();
  if (auto f = r.optional("runner_spares")) c.runner_spares = static_cast<int>(f->as_int_in(0, kMaxRunnerSpares));
  if (auto f = r.optional("runner_cuda_connections")) {
    c.runner_cuda_connections = static_cast<int>(f->as_int_in(0, kMaxCudaConnections));
  }
  if (auto f = r.optional("profiler_spares")) c.profiler_spares = static_cast<int>(f->as_int_in(0, kMaxProfilerSpares));
  if (auto f = r.optional("baseline_cache")) {
    const std::string v = f->as_string();
    c.baseline_cache = v == "off" || v.empty() ? v : resolve_path(doc, v).string();
  }
  r.finish();
}

// Bounds: more than this many GPUs, lanes or slots is a typo, not a machine.
constexpr int64_t kMaxDevices = 64;
constexpr int64_t kMaxLanesPerDevice = 16;
constexpr int64_t kMaxCpuSlots = 256;
// 16 TiB: larger than any GPU's memory by far, small enough not to overflow.
constexpr int64_t kMaxDeviceMemoryMib = int64_t{1} << 24;

void read_placement(const Field& field, EnvConfig& c) {
  ObjectReader r = field.as_object();
  Placement& p = c.placement;
  if (auto f = r.optional("devices")) {
    if (f->value().is_string()) {
      if (f->as_string() != "all") f->fail("a list of GPU indices such as [0, 1], or \"all\"");
      p.all_devices = true;
      p.devices.clear();
    } else {
      if (f->value().is_array() && static_cast<int64_t>(f->value().size()) > kMaxDevices) {
        f->fail("at most " + std::to_string(kMaxDevices) + " GPU indices");
      }
      const std::vector<Field> list = f->as_array();
      if (list.empty()) f->fail("at least one GPU index (or \"all\")");
      p.all_devices = false;
      p.devices.clear();
      for (const Field& item : list) {
        const int index = static_cast<int>(item.as_int_in(0, 1023));
        if (std::find(p.devices.begin(), p.devices.end(), index) != p.devices.end()) {
          item.fail("a GPU index not listed before (" + std::to_string(index) + " is listed twice)");
        }
        p.devices.push_back(index);
      }
    }
  }
  if (auto f = r.optional("lanes_per_device"))
    p.lanes_per_device = static_cast<int>(f->as_int_in(1, kMaxLanesPerDevice));
  if (auto f = r.optional("cpu_slots")) p.cpu_slots = static_cast<int>(f->as_int_in(1, kMaxCpuSlots));
  if (auto f = r.optional("episodes_per_device")) p.episodes_per_device = static_cast<int>(f->as_int_in(1, 4096));
  if (auto f = r.optional("max_system_errors")) p.max_system_errors = static_cast<int>(f->as_int_in(1, 1000));
  // Whether the lanes fit the card is known once a judge has seen it: a
  // placement that does not is its start-up error, with the figures.
  if (auto f = r.optional("lane_device_memory_mib")) p.lane_device_memory_mib = f->as_int_in(0, kMaxDeviceMemoryMib);
  if (auto f = r.optional("device_memory_reserve_mib")) {
    p.device_memory_reserve_mib = f->as_int_in(0, kMaxDeviceMemoryMib);
  }
  r.finish();
}

}  // namespace

const std::string& reward_paid_on_name(RewardPaidOn v) { return paid_on_names()[v == RewardPaidOn::kSubmit ? 0 : 1]; }

const std::string& truncation_reward_name(TruncationReward v) {
  return truncation_names()[v == TruncationReward::kAutoSubmit ? 0 : 1];
}

EnvConfig default_env_config(BackendKind backend) {
  EnvConfig c;
  c.backend = backend;
  c.default_mode = backend == BackendKind::kCuda ? SolutionMode::kCuda : SolutionMode::kCpp;
  return c;
}

EnvConfig parse_env_config(const Document& doc) {
  ObjectReader r = doc.root_object();
  BackendKind backend = BackendKind::kCpu;
  if (auto f = r.optional("backend")) backend = parse_backend(f->as_enum(backend_names()));
  EnvConfig c = default_env_config(backend);
  c.source = doc.source;
  if (auto f = r.optional("device")) c.device = static_cast<int>(f->as_int_in(0, 1023));
  if (auto f = r.optional("solution_mode")) c.default_mode = parse_solution_mode(*f);
  if (auto f = r.optional("episode")) read_episode(f->as_object(), c);
  if (auto f = r.optional("eval")) c.eval = parse_eval_options(*f, c.eval);
  if (auto f = r.optional("reward")) read_reward(doc, f->as_object(), c.reward);
  if (auto f = r.optional("prompt")) read_prompt(doc, f->as_object(), c.prompt);
  if (auto f = r.optional("compile")) read_compile(doc, f->as_object(), c);
  if (auto f = r.optional("executor")) read_executor(doc, f->as_object(), c);
  if (auto f = r.optional("placement")) {
    read_placement(*f, c);
    // `device` is the one-GPU spelling of placement.devices; both may be
    // given (default.yaml lists every key) as long as they agree.
    if (auto d = r.optional("device");
        d && !c.placement.all_devices &&
        std::find(c.placement.devices.begin(), c.placement.devices.end(), c.device) == c.placement.devices.end()) {
      d->fail_message("device " + std::to_string(c.device) + " is not among placement.devices; give one of the two");
    }
    if (!c.placement.all_devices) c.device = c.placement.devices.front();
  } else {
    c.placement.devices = {c.device};
  }
  if (auto f = r.optional("step_threads")) c.step_threads = static_cast<int>(f->as_int_in(1, 1024));
  r.finish();
  return c;
}

EnvConfig load_env_config(const std::string& path_or_preset) {
  const bool is_path =
      path_or_preset.find('/') != std::string::npos || std::filesystem::path(path_or_preset).has_extension();
  if (is_path) return parse_env_config(Document::from_file(path_or_preset));
  const std::filesystem::path dir = reward::config_dir() / "env";
  const std::filesystem::path file = dir / (path_or_preset + ".yaml");
  if (!std::filesystem::exists(file)) {
    std::vector<std::string> presets;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".yaml") presets.push_back(e.path().stem().string());
    }
    std::sort(presets.begin(), presets.end());
    std::string list;
    for (const auto& p : presets) list += (list.empty() ? "" : ", ") + p;
    const std::string hint = closest_match(path_or_preset, presets);
    throw InputError("no environment preset \"" + path_or_preset + "\" in " + dir.string() +
                     (hint.empty() ? "" : " (did you mean \"" + hint + "\"?)") +
                     "; presets: " + (list.empty() ? "(none)" : list) + "; or give a path to a YAML/JSON config");
  }
  return parse_env_config(Document::from_file(file));
}

json to_json(const EnvConfig& c) {
  json limits = json::object();
  for (const auto& [mode, n] : c.compile.per_mode_limit) limits[solution_mode_name(mode)] = n;
  return {{"source", c.source},
          {"backend", backend_name(c.backend)},
          {"device", c.device},
          {"solution_mode", solution_mode_name(c.default_mode)},
          {"episode", {{"max_turns", c.max_turns}, {"time_budget_s", c.time_budget_s}}},
          {"eval", to_json(c.eval)},
          {"reward",
           {{"function", c.reward.function},
            {"paid_on", reward_paid_on_name(c.reward.paid_on)},
            {"step_terms", c.reward.step_terms},
            {"on_truncation", truncation_reward_name(c.reward.on_truncation)}}},
          {"prompt",
           {{"skills", c.prompt.skills.string()}, {"system", c.prompt.system.string()}, {"compact", c.prompt.compact}}},
          {"compile",
           {{"cache_dir", c.compile.cache_dir.string()},
            {"threads", c.compile.threads},
            {"arch", c.arch},
            {"timeout_s", c.compile_timeout_s},
            {"memory_limit_mib", c.compile_memory_limit_bytes >> 20},
            {"max_source_bytes", c.max_source_bytes},
            {"per_mode_limit", limits}}},
          {"executor",
           {{"tools_dir", c.tools_dir.string()},
            {"scratch_dir", c.scratch_dir.string()},
            {"gate_dir", c.gate_dir.string()},
            {"gpu_gate", c.gpu_gate},
            {"runner_spares", c.runner_spares},
            {"runner_cuda_connections", c.runner_cuda_connections},
            {"profiler_spares", c.profiler_spares},
            {"baseline_cache", c.baseline_cache}}},
          {"placement",
           {{"devices", c.placement.all_devices ? json("all") : json(c.placement.devices)},
            {"lanes_per_device", c.placement.lanes_per_device},
            {"cpu_slots", c.placement.cpu_slots},
            {"episodes_per_device", c.placement.episodes_per_device},
            {"max_system_errors", c.placement.max_system_errors},
            {"lane_device_memory_mib", c.placement.lane_device_memory_mib},
            {"device_memory_reserve_mib", c.placement.device_memory_reserve_mib}}},
          {"step_threads", c.step_threads}};
}

std::filesystem::path default_baseline_cache_dir() {
  if (const char* dir = std::getenv("KFORGE_BASELINE_CACHE_DIR"); dir != nullptr && *dir != '\0') return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::filesystem::path(xdg) / "kforge" / "baselines";
  }
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home != nullptr && *home != '\0' ? home : "/tmp") / ".cache" / "kforge" / "baselines";
}

int placed_device_count(const EnvConfig& c) {
  if (c.backend == BackendKind::kCpu) return c.placement.cpu_slots;
  if (c.placement.all_devices) return std::max<int>(1, static_cast<int>(visible_gpu_indices().size()));
  return std::max<int>(1, static_cast<int>(c.placement.devices.size()));
}

ExecutorConfig executor_config(const EnvConfig& c) {
  ExecutorConfig ec;
  ec.backend = c.backend;
  ec.device = c.device;
  ec.devices = c.placement.devices;
  ec.all_devices = c.placement.all_devices;
  ec.lanes_per_device = c.placement.lanes_per_device;
  ec.cpu_slots = c.placement.cpu_slots;
  ec.max_system_errors = c.placement.max_system_errors;
  ec.lane_device_memory_bytes = static_cast<uint64_t>(c.placement.lane_device_memory_mib) << 20;
  ec.device_memory_reserve_bytes = static_cast<uint64_t>(c.placement.device_memory_reserve_mib) << 20;
  ec.tools_dir = c.tools_dir;
  ec.scratch_dir = c.scratch_dir;
  ec.gate_dir = c.gate_dir;
  ec.gpu_gate = c.gpu_gate;
  ec.runner_spares = c.runner_spares;
  ec.runner_cuda_connections = c.runner_cuda_connections;
  ec.profiler_spares = c.profiler_spares;
  if (c.baseline_cache != "off") {
    ec.baseline_cache_dir =
        c.baseline_cache.empty() ? default_baseline_cache_dir() : std::filesystem::path(c.baseline_cache);
  }
  return ec;
}

std::string load_skills(const EnvConfig& config) {
  std::filesystem::path path = config.prompt.skills;
  if (path.empty()) path = reward::config_dir() / "skills" / (backend_name(config.backend) + ".md");
  try {
    return read_text_file(path);
  } catch (const InputError& e) {
    throw InputError(std::string(e.what()) + " (the skills guide of " + config.source +
                     "; set prompt.skills to a markdown file)");
  }
}

}  // namespace kforge::env
