// Which external symbols and libraries a candidate shared object may use, per
// backend (docs/architecture.md#isolation). The lists are data: tables of exact names and glob
// patterns in symbol_policy.cpp, one per backend plus optional groups a task
// may enable (TaskSpec::libraries, e.g. "cublas").
#pragma once

#include <string>
#include <vector>

namespace kforge::judge {

class SymbolPolicy {
 public:
  // `backend` is "cpu" or "cuda"; `task_libraries` enables extra groups (unknown
  // names enable nothing). Throws std::invalid_argument for an unknown backend.
  static SymbolPolicy for_backend(const std::string& backend, const std::vector<std::string>& task_libraries = {});

  const std::string& backend() const { return backend_; }
  bool allows_symbol(const std::string& name) const;
  // DT_NEEDED entries: "libm.so.6" is allowed when "libm.so" is listed.
  bool allows_library(const std::string& soname) const;
  // Why a symbol is typically refused ("file access", "threads", ...), for the
  // report; empty when no category is known.
  static std::string refusal_reason(const std::string& name);

 private:
  std::string backend_;
  std::vector<std::string> symbol_patterns_;  // fnmatch(3) globs, most are plain names
  std::vector<std::string> library_prefixes_;
};

}  // namespace kforge::judge
