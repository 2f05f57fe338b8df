// The policy's tool calls as the environment decodes them: the raw text a
// trainer may pass (Toolset::decode of a string) and the arguments string of
// a call ({"name", "arguments": "<text>"}), for every tool name.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kforge/core/action.h"
#include "kforge/env/tools.h"

namespace {

const kforge::env::Toolset& toolset() {
  static const kforge::env::Toolset kTools(
      {kforge::SolutionMode::kCuda, kforge::SolutionMode::kNvrtc, kforge::SolutionMode::kTorchExt},
      kforge::SolutionMode::kCuda, {{"resource_usage", "per-kernel registers", kforge::json::object()}});
  return kTools;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    toolset().decode(kforge::json(text));
  } catch (const kforge::InputError&) {
  }
  for (const char* name : {"compile", "submit", "analyze", "resource_usage"}) {
    try {
      toolset().decode(kforge::json{{"name", name}, {"arguments", text}});
    } catch (const kforge::InputError&) {
    }
  }
  return 0;
}
