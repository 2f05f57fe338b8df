// The bounded demangler (kforge/core/demangle.h): kernel names from ptxas
// logs, CUPTI records and SASS listings are the candidate's choice. Any
// input gives a string of at most the bound, quickly; nothing may crash,
// hang or blow up (a substitution bomb once took minutes and gigabytes).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "kforge/core/demangle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string name(reinterpret_cast<const char*>(data), size);
  const std::string out = kforge::demangle(name, 1024);
  if (out != name && out.size() > 1024) std::abort();
  return 0;
}
