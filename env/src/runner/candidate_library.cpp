#include "runner/candidate_library.h"

#include <dlfcn.h>

namespace kforge::runner {

CandidateLibrary load_candidate(const std::string& path) {
  CandidateLibrary lib;
  // RTLD_NOW: unresolved symbols fail here, not in the middle of a timed call.
  // RTLD_LOCAL: nothing the candidate defines can interpose on later lookups.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = ::dlerror();
    lib.error = e ? e : "dlopen failed";
    return lib;
  }
  ::dlerror();
  void* sym = ::dlsym(handle, "kf_forward");
  if (sym == nullptr) {
    const char* e = ::dlerror();
    lib.error = e ? e : "kf_forward not found";
    return lib;
  }
  lib.forward = reinterpret_cast<KfForward>(sym);
  return lib;
}

}  // namespace kforge::runner
