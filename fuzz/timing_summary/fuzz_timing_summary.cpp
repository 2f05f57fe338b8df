// Fuzz target: reading the judge's timing summary (docs/schemas.md), as the
// environment does with every report and replay with recorded ones: a
// TimingSummary or an InputError naming the field, never a crash; what it
// accepts serializes again and reads back the same, its speedup interval
// included.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "kforge/core/error.h"
#include "kforge/core/timing_summary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const kforge::Document doc = kforge::Document::from_json_text(text, "<fuzz>");
    const kforge::TimingSummary t = kforge::timing_summary_from_field(doc.root_object().self());
    const kforge::json again = kforge::to_json(t);
    if (kforge::to_json(kforge::timing_summary_from_json(again)) != again) std::abort();
  } catch (const kforge::InputError&) {
  }
  return 0;
}
