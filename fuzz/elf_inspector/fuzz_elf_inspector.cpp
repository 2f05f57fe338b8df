// The ELF inspector (env/src/judge/elf_inspector.h) reads the candidate's
// shared object, whose every byte the candidate controls through its source
// and link, before anything loads it; the system-call scan decodes its code.
// Any file is accepted or refused with violations; nothing may crash or hang.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "judge/elf_inspector.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/kforge-fuzz-elf-" + std::to_string(::getpid()) + ".so";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  static const kforge::judge::SymbolPolicy policy = kforge::judge::SymbolPolicy::for_backend("cuda");
  (void)kforge::judge::inspect_candidate(path, policy);
  return 0;
}
