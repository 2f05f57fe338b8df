#include "kforge/rollout/policy/template_policy.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <random>
#include <regex>

#include "kforge/core/elapsed.h"
#include "kforge/core/error.h"
#include "kforge/core/fnv1a.h"
#include "kforge/core/splitmix64.h"
#include "policy/template_policy/codegen.h"
#include "policy/template_policy/kernel_graph.h"
#include "policy/template_policy/variant.h"

namespace kforge::rollout {
namespace {

using template_policy::Variant;

std::string text_of(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  // OpenAI content parts: [{"type": "text", "text": ...}].
  std::string out;
  if (content.is_array()) {
    for (const auto& part : content) {
      if (part.is_object() && part.value("type", "") == "text") out += part.value("text", "");
    }
  }
  return out;
}

// What earlier turns tried: the variant each assistant message named, and the
// speedup the following tool message reported ("-> 1.23x"), if any.
struct Tried {
  Variant variant;
  std::optional<double> speedup;
};

std::vector<Tried> history(const json& messages) {
  static const std::regex kSpeedup(R"(->\s*([0-9]+(\.[0-9]+)?)x)");
  std::vector<Tried> out;
  bool open = false;
  for (const auto& m : messages) {
    if (!m.is_object()) continue;
    const std::string role = m.value("role", "");
    const std::string text = text_of(m.value("content", json(nullptr)));
    if (role == "assistant") {
      Variant v;
      open = template_policy::parse_variant(text, &v);
      if (open) out.push_back({v, std::nullopt});
    } else if (role == "tool" && open) {
      std::smatch match;
      if (std::regex_search(text, match, kSpeedup)) out.back().speedup = std::strtod(match[1].str().c_str(), nullptr);
      open = false;
    }
  }
  return out;
}

bool offers_mode_choice(const json& tools) {
  for (const auto& t : tools) {
    const json& props =
        t.value("function", json::object()).value("parameters", json::object()).value("properties", json::object());
    if (props.contains("mode")) return true;
  }
  return false;
}

json tool_call(const std::string& id, const std::string& name, const json& arguments) {
  return {{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", arguments.dump()}}}};
}

}  // namespace

TemplatePolicy::TemplatePolicy(TemplateConfig config) : config_(std::move(config)) {
  if (config_.mode != "auto" && config_.mode != "cpp" && config_.mode != "cuda") {
    throw InputError("template policy: mode \"" + config_.mode + "\" is not one of auto, cpp, cuda");
  }
  if (config_.explore_turns < 0 || config_.explore_turns > 64) {
    throw InputError("template policy: explore_turns must be in [0, 64], got " + std::to_string(config_.explore_turns));
  }
}

std::string TemplatePolicy::describe() const {
  return "template mode=" + config_.mode + " explore_turns=" + std::to_string(config_.explore_turns) +
         " seed=" + std::to_string(config_.seed);
}

std::vector<PolicyReply> TemplatePolicy::act(const std::vector<PolicyRequest>& requests) {
  std::vector<PolicyReply> out;
  out.reserve(requests.size());
  for (const auto& r : requests) {
    const auto t0 = std::chrono::steady_clock::now();
    PolicyReply reply;
    try {
      reply = act_one(r);
    } catch (const std::exception& e) {
      reply = PolicyReply{};
      reply.error = std::string("template policy: ") + e.what();
    }
    // Trajectories of builds before the rename say "baseline": readers take
    // the version as an opaque tag, so both read.
    reply.policy_version = "template";
    reply.latency_ms = ms_since(t0);
    out.push_back(std::move(reply));
  }
  return out;
}

PolicyReply TemplatePolicy::act_one(const PolicyRequest& request) const {
  if (!request.task.is_object()) {
    throw InputError(
        "the request carries no task (PolicyRequest::task): the template policy reads the graph, not the text");
  }
  const TaskSpec task = parse_task(Document::from_value(request.task, "<request task>"));
  const std::string mode = config_.mode != "auto" ? config_.mode : (offers_mode_choice(request.tools) ? "cuda" : "cpp");
  const template_policy::KernelGraph graph = [&] {
    try {
      return template_policy::lower(task);
    } catch (const template_policy::Unsupported& e) {
      throw InputError(std::string("no template for this task: ") + e.what());
    }
  }();

  const std::vector<Tried> tried = history(request.messages);
  const uint64_t episode_seed = request.sampling.seed ? *request.sampling.seed : fnv1a(request.episode_id);
  std::mt19937_64 rng(splitmix64(splitmix64(config_.seed) ^ episode_seed) + static_cast<uint64_t>(tried.size()));

  const Tried* best = nullptr;
  for (const auto& t : tried) {
    if (t.speedup && (!best || !best->speedup || *t.speedup > *best->speedup)) best = &t;
  }
  Variant variant;
  std::string action = "profile";
  if (tried.empty()) {
    variant = template_policy::random_variant(mode, rng);
  } else if (static_cast<int>(tried.size()) < config_.explore_turns) {
    const Variant base = best ? best->variant : tried.back().variant;
    // A mutation nobody tried yet, when a few draws find one.
    for (int attempt = 0; attempt < 16; ++attempt) {
      variant = template_policy::mutate(base, mode, rng);
      const bool seen = std::any_of(tried.begin(), tried.end(), [&](const Tried& t) { return t.variant == variant; });
      if (!seen) break;
    }
  } else {
    variant = best ? best->variant : tried.back().variant;
  }
  if (static_cast<int>(tried.size()) >= config_.explore_turns) action = "submit";

  const std::string source =
      mode == "cuda" ? template_policy::generate_cuda(graph, variant) : template_policy::generate_cpp(graph, variant);
  json args = {{"source", source}};
  if (offers_mode_choice(request.tools)) args["mode"] = mode;
  PolicyReply reply;
  reply.content = std::string(action == "submit" ? "Submitting the best template so far" : "Profiling a template") +
                  " (" + mode + "), variant: " + variant.describe();
  reply.tool_calls = json::array({tool_call("call_" + std::to_string(request.turn), action, args)});
  reply.finish_reason = "tool_calls";
  return reply;
}

std::string template_source(const TaskSpec& task, const std::string& mode, const std::string& variant) {
  if (mode != "cpp" && mode != "cuda") throw InputError("template policy: mode \"" + mode + "\" is not cpp or cuda");
  Variant v;
  if (!variant.empty() && !template_policy::parse_variant(variant, &v)) {
    throw InputError("template policy: \"" + variant + "\" is not a variant (expected \"" + Variant{}.describe() +
                     "\")");
  }
  try {
    const template_policy::KernelGraph graph = template_policy::lower(task);
    return mode == "cuda" ? template_policy::generate_cuda(graph, v) : template_policy::generate_cpp(graph, v);
  } catch (const template_policy::Unsupported& e) {
    throw InputError(std::string("template policy: no template: ") + e.what());
  }
}

std::string template_unsupported(const TaskSpec& task) {
  try {
    template_policy::lower(task);
    return "";
  } catch (const template_policy::Unsupported& e) {
    return e.what();
  }
}

std::vector<std::string> template_variants(const std::string& mode, int count, uint64_t seed) {
  std::vector<std::string> out;
  Variant first;
  if (mode != "cuda") first.tile = 4;
  out.push_back(first.describe());
  std::mt19937_64 rng(splitmix64(seed));
  for (int attempt = 0; static_cast<int>(out.size()) < count && attempt < 64 * count; ++attempt) {
    const std::string d = template_policy::random_variant(mode, rng).describe();
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  }
  return out;
}

}  // namespace kforge::rollout
