// Helpers the built-in tools share: argument reading, kernel selection, launch
// plans, and facts about the task.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/env/analysis.h"
#include "kforge/env/analysis/resources.h"
#include "text_util.h"

namespace kforge::env::internal {

using Dims = std::array<int64_t, 3>;

// Wraps a tool's args so that errors read "<tool> arguments: field /x: ...".
Document args_document(const std::string& tool, const json& args);

// An integer or an array of 1-3 positive integers (x, y, z); each at most
// `max_each`, their product at most `max_product`.
Dims read_dims(const Field& field, int64_t max_each, int64_t max_product);
int64_t dims_product(const Dims& d);
json dims_to_json(const Dims& d);
std::string dims_to_string(const Dims& d);  // "256", "(16, 16)", "(8, 8, 4)"

// A literal from a launch plan: integers or strings holding only an integer;
// nullopt for expressions (they depend on the task's shapes).
std::optional<int64_t> literal_int(const json& value);
std::optional<Dims> literal_dims(const json& value);

// One kernel's launch from an nvrtc launch plan (docs/launch-plan.md), with
// the values that are literals; an expression over the task's shapes leaves
// its field empty and its text in the *_text field.
struct PlanLaunch {
  std::string name;          // as written in the plan ("scale<float, 4>")
  std::string lowered_name;  // mangled, in the normalized plan
  std::optional<Dims> block;
  std::optional<Dims> grid;
  std::optional<int64_t> shared_bytes;  // 0 when the plan gives none
  std::string block_text;
  std::string shared_text;
};

// The kernels of the input's launch plan: the artifact's normalized plan,
// else the solution's (either {"kernels": [...]} or one kernel's fields at the
// top level). Empty when there is no plan.
std::vector<PlanLaunch> plan_launches(const AnalysisInput& input);
// The plan entry for a kernel of the binary: by lowered (mangled) name, by
// name, or the only entry when both the plan and the binary have one kernel.
const PlanLaunch* find_plan_launch(const std::vector<PlanLaunch>& plan, const std::string& mangled, bool sole_kernel);

// The artifact, or InputError telling the policy to compile first.
const Artifact& require_artifact(const AnalysisInput& input);

// Readable kernel name for text: demangled, cut to `max_chars`.
std::string display_name(const std::string& mangled, size_t max_chars = 100);

// The items whose mangled or demangled name equals `filter` or contains it;
// all items without a filter. InputError listing the kernels when nothing
// matches.
template <class T>
std::vector<const T*> select_kernels(const std::vector<T>& items, const std::optional<std::string>& filter) {
  std::vector<const T*> out;
  for (const auto& item : items) {
    if (!filter || item.name == *filter || item.name.find(*filter) != std::string::npos ||
        demangle(item.name).find(*filter) != std::string::npos) {
      out.push_back(&item);
    }
  }
  if (out.empty() && filter) {
    std::vector<std::string> names;
    names.reserve(items.size());
    for (const auto& item : items) names.push_back(display_name(item.name, 80));
    throw InputError("no kernel matches \"" + *filter +
                     "\"; kernels in this binary: " + (names.empty() ? std::string("none") : join(names)));
  }
  return out;
}

// The "kernel" parameter every built-in tool takes.
json kernel_parameter_schema();

// A task whose graph has a main-loop operator that tensor cores can run
// (matmul, bmm, linear, conv, ...).
bool task_is_matmul_like(const TaskSpec* task);
// A task with any float64 tensor.
bool task_uses_float64(const TaskSpec* task);

}  // namespace kforge::env::internal
