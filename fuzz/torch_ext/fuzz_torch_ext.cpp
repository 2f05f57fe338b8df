// The torch_ext source reader: the Python (load_inline) or CUDA text of a
// KernelBench-style solution, read before nvcc sees it. It returns an error
// string for what it cannot read; it must never crash or take long.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kforge/env/compile/torch_ext_source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)kforge::env::prepare_torch_ext_source(text);
  int count = 0;
  (void)kforge::env::give_launches_the_stream(text, "s", &count);
  return 0;
}
