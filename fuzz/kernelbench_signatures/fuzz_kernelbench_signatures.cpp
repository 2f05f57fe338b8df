// Fuzz target: the KernelBench signature file (`kforge synth --signatures`,
// data_synth/contamination.h), read and then used for a contamination
// verdict: signatures or an InputError naming the field, never a crash, and
// a nearest problem for any ops.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kforge/core/error.h"
#include "kforge/data_synth/contamination.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const kforge::Document doc = kforge::Document::from_json_text(text, "<fuzz>");
    const auto sigs = kforge::synth::KernelBenchSignatures::from_json(doc.root, "<fuzz>");
    (void)sigs.nearest({"linear", "mul@scalar", "sigmoid", "mul", "minimum@scalar", "reshape"});
  } catch (const kforge::InputError&) {
  }
  return 0;
}
