// Reading a KernelBench Python solution (torch_ext_source.h): the
// load_inline(...) call, its string sources (literals, names bound to them
// and lists of those) and the entry among `functions`.
#pragma once

#include <cctype>
#include <string>

#include "kforge/env/compile/torch_ext_source.h"

namespace kforge::env::internal {

// A character of a C++ or Python identifier.
inline bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The .cu text of the solution's sources, with #line directives pointing at
// the .py, and its entry; or an error naming the fix.
TorchExtSource from_python(const std::string& source);

}  // namespace kforge::env::internal
