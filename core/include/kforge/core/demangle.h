// Demangling C++ symbol names that come from candidates (kernel names in
// ptxas logs, CUPTI records, SASS listings), with the work bounded.
//
// A mangled name refers back to earlier parts of itself (substitutions), so
// a few hundred characters can stand for a name of 2^40 characters: a
// kernel template instantiated with `typedef P<T39, T39> T40` is cheap for
// the compiler, and `abi::__cxa_demangle` spent minutes and gigabytes
// printing it in the environment's own process (an NVRTC candidate took
// `kforge eval` down that way). This one prints through libiberty's
// callback demangler, which allocates nothing, and stops as soon as the text
// would pass `max_chars`; the input is capped at kMaxMangledChars first,
// since that demangler keeps its parse on the stack.
#pragma once

#include <cstddef>
#include <string>

namespace kforge {

inline constexpr size_t kMaxMangledChars = 4096;
inline constexpr size_t kMaxDemangledChars = 4096;

// The demangled name; `mangled` itself when it is not an Itanium C++ name
// (extern "C" kernels), cannot be demangled, is longer than
// kMaxMangledChars, or demangles to more than `max_chars` characters.
std::string demangle(const std::string& mangled, size_t max_chars = kMaxDemangledChars);

}  // namespace kforge
