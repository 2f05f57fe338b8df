#include "kforge/env/prompt.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>

#include "kforge/core/kernelbench_render.h"
#include "kforge/core/op_registry.h"

namespace kforge::env {
namespace {

std::string abi_enum_name(DType dtype) {
  std::string name = "KF_" + dtype_name(dtype);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::toupper(c); });
  return name;
}

json tensor_row(size_t index, const std::string& name, const std::vector<int64_t>& shape, DType dtype) {
  return {{"index", index}, {"name", name}, {"shape", shape}, {"dtype", dtype_name(dtype)}};
}

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

std::string language_of(SolutionMode mode) {
  switch (mode) {
    case SolutionMode::kCpp:
      return "C++ (host code, built by the host C++ compiler into a shared library)";
    case SolutionMode::kCuda:
      return "CUDA C++ (built by nvcc into a shared library)";
    case SolutionMode::kNvrtc:
      return "CUDA device code (built by NVRTC, launched by your launch plan)";
    case SolutionMode::kTorchExt:
      return "Python with CUDA C++ in load_inline (KernelBench's format)";
  }
  return "";
}

std::string fence_language(SolutionMode mode) { return mode == SolutionMode::kCpp ? "cpp" : "cuda"; }

std::string tolerance_line(const TaskSpec& task) {
  if (!task.tolerance) return "Outputs are compared with the reference at the default tolerance of their dtype.";
  return "Outputs must match the reference within atol " + format_number(task.tolerance->atol) + " and rtol " +
         format_number(task.tolerance->rtol) + " (|out - ref| <= atol + rtol * |ref|, elementwise).";
}

std::string budgets_text(const EnvConfig& c) {
  std::string s = "You have " + std::to_string(c.max_turns) + " turns: every tool call is one turn";
  if (c.time_budget_s > 0) {
    s += ", and " + format_number(c.time_budget_s) + " s of environment time (compiling and running your code)";
  }
  s += ". `submit` ends the episode. ";
  if (c.reward.on_truncation == TruncationReward::kAutoSubmit) {
    s += "If the budget runs out first, your most recent solution is evaluated as your submission.";
  } else {
    s += "If the budget runs out before you submit, the episode counts as failed: submit before then.";
  }
  return s;
}

std::string tools_text(const Toolset& tools) {
  std::string s;
  for (const auto& d : tools.definitions()) {
    s += "- `" + d["function"]["name"].get<std::string>() + "`: " + d["function"]["description"].get<std::string>() +
         "\n";
  }
  return s;
}

std::string exemplars_text(const std::vector<Exemplar>& exemplars) {
  if (exemplars.empty()) return "";
  std::string s =
      "## Earlier solutions\n\nThese solutions of this task were measured before (speedup over eager "
      "PyTorch). Aim to beat the best of them.\n\n";
  for (size_t i = 0; i < exemplars.size(); ++i) {
    const auto& e = exemplars[i];
    char head[96];
    std::snprintf(head, sizeof(head), "### Solution %zu: %.2fx", i + 1, e.speedup_eager);
    s += head;
    if (!e.note.empty()) s += " (" + e.note + ")";
    s += "\n```" + fence_language(e.solution.mode) + "\n" + e.solution.source;
    if (e.solution.source.empty() || e.solution.source.back() != '\n') s += "\n";
    s += "```\n\n";
  }
  return s;
}

}  // namespace

json abi_table(const TaskSpec& task) {
  json t = {{"inputs", json::array()}, {"outputs", json::array()}, {"shape_variants", json::array()}};
  size_t i = 0;
  for (const auto& in : task.inputs) {
    json row = tensor_row(i++, in.name, in.shape, in.dtype);
    row["kind"] = "input";
    t["inputs"].push_back(row);
  }
  for (const auto& p : task.params) {
    json row = tensor_row(i++, p.name, p.shape, p.dtype);
    row["kind"] = "param";
    t["inputs"].push_back(row);
  }
  // Every variant is typed and checked against the task limits here, so a
  // task that reaches a prompt (reset, `task prompt`, `task check`) passed them.
  const std::vector<std::vector<TensorType>> typed = validate_task(task);
  const std::vector<TensorType>& outs = typed[0];
  for (size_t k = 0; k < outs.size(); ++k) {
    t["outputs"].push_back(tensor_row(k, task.outputs.at(k), outs[k].shape, outs[k].dtype));
  }
  for (size_t v = 0; v < task.shape_variants.size(); ++v) {
    json inputs = json::object();
    for (const auto& [name, shape] : task.shape_variants[v]) inputs[name] = shape;
    json shapes = json::array();
    for (const auto& o : typed[v + 1]) shapes.push_back(o.shape);
    t["shape_variants"].push_back({{"inputs", inputs}, {"outputs", shapes}});
  }
  return t;
}

std::string render_abi_table(const json& table) {
  std::ostringstream s;
  s << "| tensor | name | kind | shape | dtype (code) | C type |\n|---|---|---|---|---|---|\n";
  auto row = [&s](const std::string& where, const json& r, const std::string& kind) {
    DType dt = DType::kFloat32;
    parse_dtype(r["dtype"].get<std::string>(), &dt);
    s << "| " << where << "[" << r["index"].get<size_t>() << "] | " << r["name"].get<std::string>() << " | " << kind
      << " | " << shape_to_string(r["shape"].get<std::vector<int64_t>>()) << " | " << r["dtype"].get<std::string>()
      << " (" << abi_enum_name(dt) << ") | " << dtype_c_type(dt) << " |\n";
  };
  for (const auto& r : table["inputs"]) row("inputs", r, r["kind"].get<std::string>());
  for (const auto& r : table["outputs"]) row("outputs", r, "output");
  if (!table["shape_variants"].empty()) {
    s << "\nThe same kf_forward is also called with these shape variants (besides the shapes above): read shapes "
         "from the kf_tensor structs on every call, never hard-code them.\n";
    // Numbered from 0, as the judge numbers them in its reports.
    size_t v = 0;
    for (const auto& variant : table["shape_variants"]) {
      s << "- variant " << v++ << ":";
      std::string sep = " ";
      for (auto it = variant["inputs"].begin(); it != variant["inputs"].end(); ++it) {
        s << sep << it.key() << " " << shape_to_string(it.value().get<std::vector<int64_t>>());
        sep = ", ";
      }
      s << " ->";
      sep = " ";
      size_t k = 0;
      for (const auto& shape : variant["outputs"]) {
        s << sep << table["outputs"][k++]["name"].get<std::string>() << " "
          << shape_to_string(shape.get<std::vector<int64_t>>());
        sep = ", ";
      }
      s << "\n";
    }
  }
  return s.str();
}

std::string default_system_message(BackendKind backend) {
  const bool cuda = backend == BackendKind::kCuda;
  std::string s =
      cuda ? "You are an expert GPU performance engineer. You write CUDA kernels that compute exactly what a given "
             "PyTorch model computes, and run faster than PyTorch on an NVIDIA Hopper GPU (H100/H200, sm_90a)."
           : "You are an expert performance engineer. You write C++ code that computes exactly what a given PyTorch "
             "model computes, and runs faster than PyTorch on the CPU.";
  s += "\n\nYou work through tools: each reply makes exactly one tool call, and the environment answers with what "
       "it observed (compiler errors, correctness, timings). Correctness comes first: a wrong or disqualified "
       "solution earns nothing, however fast. The checks run fresh random inputs for several seeds and every shape "
       "variant, poison the outputs before each call, and watch for shortcuts. ";
  s += cuda ? "Enqueue all GPU work on the given stream; do not create streams or threads, cache results across "
              "calls, call PyTorch or libraries the task does not allow, or special-case inputs."
            : "Do all work inside kf_forward on the calling thread; do not start threads that outlive the call, "
              "cache results across calls, call libraries the task does not allow, or special-case inputs.";
  s += " Such tricks are detected and penalized.";
  return s;
}

Prompt build_prompt(const PromptInputs& in) {
  const TaskSpec& task = *in.task;
  const EnvConfig& c = *in.config;
  Prompt p;
  p.abi = abi_table(task);
  p.system = in.system.empty() ? default_system_message(c.backend) : in.system;

  std::ostringstream u;
  u << "# Task: " << task.id << "\n\n";
  if (!task.description.empty()) u << task.description << "\n\n";
  u << "## Reference (PyTorch)\n\n```python\n" << render_kernelbench(task) << "```\n\n";
  if (c.default_mode == SolutionMode::kTorchExt) {
    // docs/torch-ext.md: the file is read, not run; the entry is called with
    // the same tensors kf_forward would get.
    u << "## What to write\n\nOne file in " << language_of(c.default_mode)
      << ": a `ModelNew` whose `forward` calls one function built by "
         "`torch.utils.cpp_extension.load_inline(cuda_sources=..., functions=[\"<entry>\"])`. The entry takes "
         "one `torch::Tensor` per input and parameter, in the order below, and returns the output tensor(s). "
         "`#include <torch/extension.h>` provides tensors (`numel`, `size`, `data_ptr<T>()`, `options`), "
         "`torch::empty`/`zeros`/`*_like`, `TORCH_CHECK`, `AT_DISPATCH_*` and the current stream, but no "
         "PyTorch operators: `torch::matmul` and the like do not exist, so compute with your own kernels. "
         "Launches without a stream run on the timed stream.\n\n"
      << render_abi_table(p.abi) << "\n"
      << tolerance_line(task) << "\n\n";
  } else {
    u << "## What to write\n\nOne source file in " << language_of(c.default_mode)
      << " that computes `Model.forward` through this C ABI. Include it with `#include <kforge/kernel_abi.h>`; "
         "it is the only header of ours you need:\n\n```c\n"
      << in.abi_header << (in.abi_header.empty() || in.abi_header.back() == '\n' ? "" : "\n") << "```\n\n";
    u << "`inputs` holds the tensors `get_inputs()` returns, then the model's parameters in the order "
         "`Model.__init__` creates them; `outputs` are preallocated:\n\n"
      << render_abi_table(p.abi) << "\n"
      << tolerance_line(task) << "\n\n";
  }
  if (!task.libraries.empty()) {
    u << "Libraries you may use besides the "
      << (c.backend == BackendKind::kCuda ? "CUDA runtime" : "C and C++ standard libraries") << ": ";
    for (size_t i = 0; i < task.libraries.size(); ++i) u << (i ? ", " : "") << task.libraries[i];
    u << ".\n\n";
  }
  u << exemplars_text(in.exemplars);
  if (c.prompt.compact) {
    // The tools' definitions reach the model through the chat template.
    u << budgets_text(c) << "\n";
  } else {
    u << "## Tools\n\n" << tools_text(*in.tools) << "\n" << budgets_text(c) << "\n";
    if (!in.skills.empty()) u << "\n## Optimization guide\n\n" << in.skills << (in.skills.back() == '\n' ? "" : "\n");
  }
  p.user = u.str();
  p.messages = json::array({{{"role", "system"}, {"content", p.system}}, {{"role", "user"}, {"content", p.user}}});
  return p;
}

Observation prompt_observation(const Prompt& prompt, const PromptInputs& in) {
  Observation obs;
  obs.text = prompt.user;
  obs.data = {{"type", "reset"},
              {"messages", prompt.messages},
              {"tools", in.tools->definitions()},
              {"task", {{"id", in.task->id}, {"source", in.task->source}, {"description", in.task->description}}},
              {"abi", prompt.abi},
              {"solution_mode", solution_mode_name(in.config->default_mode)},
              {"budgets", {{"max_turns", in.config->max_turns}, {"time_budget_s", in.config->time_budget_s}}}};
  if (!in.exemplars.empty()) {
    json ex = json::array();
    for (const auto& e : in.exemplars) ex.push_back({{"speedup_eager", e.speedup_eager}, {"note", e.note}});
    obs.data["exemplars"] = ex;
  }
  return obs;
}

}  // namespace kforge::env
