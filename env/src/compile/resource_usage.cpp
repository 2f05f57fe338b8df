#include "kforge/env/compile/resource_usage.h"

#include <cstdlib>
#include <memory>
#include <regex>
#include <sstream>

#include "kforge/core/demangle.h"

namespace kforge::env {
namespace {

// Each "<N> bytes <what>" / "<N> <what>" item of a comma-separated ptxas line.
void read_items(const std::string& text, json& kernel) {
  static const std::regex kItem(R"((\d+)\s+(bytes\s+)?([A-Za-z][A-Za-z ]*?)(\[\d+\])?\s*$)");
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::smatch m;
    if (!std::regex_search(item, m, kItem)) continue;
    const long long value = std::stoll(m[1].str());
    const std::string what = m[3].str();
    if (what == "registers") {
      kernel["registers"] = value;
    } else if (what == "barriers") {
      kernel["barriers"] = value;
    } else if (what == "smem") {
      kernel["shared_bytes"] = value;
    } else if (what == "cmem") {
      kernel["constant_bytes"] = kernel.value("constant_bytes", 0LL) + value;
    } else if (what == "stack frame") {
      kernel["stack_bytes"] = value;
    } else if (what == "spill stores") {
      kernel["spill_store_bytes"] = value;
    } else if (what == "spill loads") {
      kernel["spill_load_bytes"] = value;
    }
  }
}

json empty_kernel(const std::string& mangled) {
  return {{"mangled", mangled},  {"registers", 0},   {"barriers", 0},          {"shared_bytes", 0},
          {"constant_bytes", 0}, {"stack_bytes", 0}, {"spill_store_bytes", 0}, {"spill_load_bytes", 0}};
}

}  // namespace

json parse_ptxas_resource_usage(const std::string& log) {
  json by_mangled = json::object();
  std::string entry;       // the entry function being compiled
  std::string properties;  // the function whose properties follow
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    const size_t compiling = line.find("Compiling entry function '");
    if (compiling != std::string::npos) {
      const size_t start = compiling + 26;
      entry = line.substr(start, line.find('\'', start) - start);
      if (!by_mangled.contains(entry)) by_mangled[entry] = empty_kernel(entry);
      continue;
    }
    const size_t props = line.find("Function properties for ");
    if (props != std::string::npos) {
      properties = line.substr(props + 24);
      while (!properties.empty() && (properties.back() == ' ' || properties.back() == '\r')) properties.pop_back();
      continue;
    }
    if (line.find("bytes stack frame") != std::string::npos) {
      // "    0 bytes stack frame, ..." (nvcc) or "ptxas         .     0 bytes stack frame, ..." (NVRTC).
      if (by_mangled.contains(properties))
        read_items(line.substr(line.find_first_of("0123456789")), by_mangled[properties]);
      continue;
    }
    const size_t used = line.find("Used ");
    if (used != std::string::npos && line.find("registers") != std::string::npos && by_mangled.contains(entry)) {
      read_items(line.substr(used + 5), by_mangled[entry]);
    }
  }
  json out = json::object();
  for (auto& [mangled, kernel] : by_mangled.items()) out[demangle(mangled)] = kernel;
  return out;
}

}  // namespace kforge::env
