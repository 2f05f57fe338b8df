// Built instead of nvrtc_compiler.cpp when the CUDA toolkit was not found.
#include "kforge/core/error.h"
#include "kforge/env/compile/compilers.h"

namespace kforge::env {

std::unique_ptr<Compiler> make_nvrtc_compiler() {
  throw SystemError("this build has no NVRTC: the CUDA toolkit was not found when it was configured");
}
bool have_nvrtc() { return false; }

}  // namespace kforge::env
