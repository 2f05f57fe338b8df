#include "kforge/core/demangle.h"

#include <libiberty/demangle.h>

#include <algorithm>
#include <csetjmp>

namespace kforge {
namespace {

struct Output {
  std::string text;
  size_t max_chars = 0;
  std::jmp_buf too_long;
};

// The demangler hands its output over in pieces. Leaving it with longjmp is
// safe: the callback variant allocates nothing, holds no lock, and only C
// frames (libiberty's) lie between here and the setjmp.
extern "C" void append_piece(const char* piece, size_t size, void* opaque) {
  auto* out = static_cast<Output*>(opaque);
  if (out->text.size() + size > out->max_chars) std::longjmp(out->too_long, 1);
  out->text.append(piece, size);
}

}  // namespace

std::string demangle(const std::string& mangled, size_t max_chars) {
  if (mangled.size() < 3 || mangled.compare(0, 2, "_Z") != 0 || mangled.size() > kMaxMangledChars) return mangled;
  Output out;
  out.max_chars = max_chars;
  out.text.reserve(std::min(max_chars, size_t{256}));
  // The options of abi::__cxa_demangle, so that names read as before.
  if (setjmp(out.too_long) != 0) return mangled;
  if (cplus_demangle_v3_callback(mangled.c_str(), DMGL_PARAMS | DMGL_TYPES, append_piece, &out) == 0) return mangled;
  return out.text;
}

}  // namespace kforge
