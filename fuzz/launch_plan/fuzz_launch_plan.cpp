// nvrtc launch plans: parsed as JSON (the policy's tool-call argument), then
// checked against a task's tensor names, then evaluated for concrete shapes
// as the runner does. Every failure is an InputError or a LaunchError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kforge/core/document.h"
#include "kforge/env/cuda/launch_plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> names = {"x", "w", "y"};
  try {
    const kforge::Document doc = kforge::Document::from_json_text(text, "launch");
    const kforge::env::LaunchPlan plan = kforge::env::parse_launch_plan(doc.root, names);
    (void)kforge::env::to_json(plan);
    const kforge::env::ShapeMap shapes = {{"x", {4096, 1024}}, {"w", {1024}}, {"y", {4096, 1024}}};
    for (auto& launch : kforge::env::evaluate_launch_plan(plan, shapes)) {
      launch.bind_tensors({{"x", nullptr}, {"w", nullptr}, {"y", nullptr}});
      (void)launch.kernel_params();
    }
  } catch (const kforge::InputError&) {
  } catch (const kforge::env::LaunchError&) {
  }
  return 0;
}
