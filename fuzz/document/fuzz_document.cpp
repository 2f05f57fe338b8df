// The document reader (JSON and YAML) and what reads tasks, solutions and
// actions from it. The first byte picks the syntax; the rest is the text.
// Anything may be refused with InputError; nothing may crash, hang or leak.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kforge/core/action.h"
#include "kforge/core/document.h"
#include "kforge/core/op_registry.h"
#include "kforge/core/solution.h"
#include "kforge/core/task_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool yaml = (data[0] & 1) != 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  kforge::Document doc;
  try {
    doc = yaml ? kforge::Document::from_yaml_text(text, "fuzz.yaml")
               : kforge::Document::from_json_text(text, "fuzz.json");
  } catch (const kforge::InputError&) {
    return 0;
  }
  try {
    kforge::validate_task(kforge::parse_task(doc));
  } catch (const kforge::InputError&) {
  }
  try {
    kforge::parse_solution(doc);
  } catch (const kforge::InputError&) {
  }
  try {
    kforge::parse_action(doc);
  } catch (const kforge::InputError&) {
  }
  return 0;
}
