#include "build_support.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "kforge/core/error.h"
#include "kforge/core/sha256.h"
#include "kforge/env/compile/compilers.h"
#include "kforge/env/compile/diagnostics.h"

namespace kforge::env::internal {

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) throw SystemError("cannot write " + path.string() + ": " + std::strerror(errno));
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SystemError("cannot read " + path.string() + ": " + std::strerror(errno));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::filesystem::path resolve_abi_include_dir(const CompileContext& ctx) {
  const std::filesystem::path dir = ctx.abi_include_dir.empty() ? default_abi_include_dir() : ctx.abi_include_dir;
  if (!std::filesystem::is_regular_file(dir / "kforge" / "kernel_abi.h")) {
    throw SystemError("kforge/kernel_abi.h not found under \"" + dir.string() +
                      "\"; set CompileContext::abi_include_dir or $KFORGE_ABI_INCLUDE_DIR to the directory that "
                      "contains kforge/kernel_abi.h");
  }
  return dir;
}

std::string abi_header_hash(const std::filesystem::path& abi_dir) {
  return sha256_hex(read_file(abi_dir / "kforge" / "kernel_abi.h"));
}

std::filesystem::path resolve_torch_ext_include_dir() {
  const std::filesystem::path dir = default_torch_ext_include_dir();
  if (!std::filesystem::is_regular_file(dir / "torch" / "extension.h")) {
    throw SystemError("the torch_ext shim (torch/extension.h) was not found under \"" + dir.string() +
                      "\"; set $KFORGE_TORCH_EXT_INCLUDE_DIR to the build's torch_ext/include directory");
  }
  return dir;
}

std::string directory_hash(const std::filesystem::path& dir) {
  // Walked level by level: recursive_directory_iterator is among the
  // std::filesystem symbols libtorch's wheels interpose (kforge/core/remove_tree.h).
  std::vector<std::filesystem::path> files;
  std::vector<std::filesystem::path> pending{dir};
  while (!pending.empty()) {
    const std::filesystem::path here = pending.back();
    pending.pop_back();
    for (const auto& e : std::filesystem::directory_iterator(here)) {
      if (e.is_directory() && !e.is_symlink()) {
        pending.push_back(e.path());
      } else if (e.is_regular_file()) {
        files.push_back(e.path());
      }
    }
  }
  std::sort(files.begin(), files.end());
  std::string all;
  for (const auto& f : files)
    all += std::filesystem::relative(f, dir).string() + "\n" + sha256_hex(read_file(f)) + "\n";
  return sha256_hex(all);
}

std::string tool_version(const std::filesystem::path& tool, const std::string& marker) {
  if (tool.empty()) throw SystemError("compiler not found");
  // Every CompileService (and so every cache lookup of a new one) needs the
  // versions; probing costs a process spawn, so remember them per binary as
  // long as the binary file stays the same.
  static std::mutex mu;
  static std::map<std::string, std::string> known;
  std::error_code ec;
  const auto size = std::filesystem::file_size(tool, ec);
  const auto mtime = std::filesystem::last_write_time(tool, ec).time_since_epoch().count();
  const std::string key = tool.string() + "|" + std::to_string(size) + "|" + std::to_string(mtime) + "|" + marker;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = known.find(key); it != known.end()) return it->second;
  }
  ProcessOptions options;
  options.timeout_s = 30;
  options.env["LC_ALL"] = "C";
  const ProcessResult r = run_process({tool.string(), "--version"}, options);
  if (!r.ok()) throw SystemError(tool.string() + " --version failed: " + r.output.substr(0, 500));
  std::istringstream in(r.output);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (marker.empty() || line.find(marker) != std::string::npos) {
      std::lock_guard<std::mutex> lock(mu);
      known[key] = line;
      return line;
    }
  }
  throw SystemError(tool.string() + " --version printed no version line: " + r.output.substr(0, 500));
}

ProcessOptions compiler_process_options(const std::filesystem::path& work_dir, const CompileContext& ctx) {
  ProcessOptions options;
  options.cwd = work_dir;
  options.timeout_s = ctx.timeout_s;
  options.memory_limit_bytes = ctx.memory_limit_bytes;
  const std::filesystem::path tmp = work_dir / "tmp";
  std::filesystem::create_directories(tmp);
  options.env["TMPDIR"] = tmp.string();
  options.env["LC_ALL"] = "C";
  for (const char* var : {"NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH",
                          "GCC_EXEC_PREFIX", "COMPILER_PATH", "DEPENDENCIES_OUTPUT", "SUNPRO_DEPENDENCIES"}) {
    options.env[var] = std::nullopt;
  }
  return options;
}

namespace {

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g s", s);
  return buf;
}

}  // namespace

bool ran_out_of_memory(const std::string& output, int term_signal, uint64_t peak_rss_bytes, uint64_t limit_bytes) {
  if (limit_bytes == 0) return false;
  // What g++ (cc1plus), nvcc's tools and the C++ runtime print when an
  // allocation fails under RLIMIT_AS.
  for (const char* said : {"out of memory", "Out of memory", "virtual memory exhausted", "Cannot allocate memory",
                           "std::bad_alloc", "memory exhausted"}) {
    if (output.find(said) != std::string::npos) return true;
  }
  return term_signal != 0 && peak_rss_bytes >= limit_bytes / 2;
}

CompileResult limit_result(const CompileContext& ctx, const std::string& tool, const std::string& what,
                           double elapsed_ms, const std::string& log) {
  CompileResult r;
  r.log = log;
  r.compile_ms = elapsed_ms;
  const std::string advice = "; simplify the code: fewer macro expansions, template instantiations or unrolled loops\n";
  if (what == "time") {
    r.timed_out = true;
    r.diagnostics =
        "compile exceeded " + seconds(ctx.timeout_s) + " (the compile time limit; " + tool + " was stopped)" + advice;
  } else if (what == "memory") {
    r.out_of_memory = true;
    r.diagnostics = "compile exceeded " + mib(ctx.memory_limit_bytes) + " of memory (the compile memory limit; " +
                    tool + " was stopped)" + advice;
  } else {
    r.compiler_crashed = true;
    r.diagnostics =
        "the compiler (" + tool + ") crashed on this source (" + what + "); change the construct it fails on\n";
  }
  r.log += "\n[kforge] " + r.diagnostics;
  return r;
}

CompileResult result_from_process(const ProcessResult& process, const std::string& tool, const std::string& file_name,
                                  const std::string& source, const std::filesystem::path& artifact,
                                  const CompileContext& ctx) {
  if (process.timed_out) return limit_result(ctx, tool, "time", process.wall_ms, process.output);
  const bool failed = process.exit_code != 0 || process.term_signal != 0;
  if (failed &&
      ran_out_of_memory(process.output, process.term_signal, process.peak_rss_bytes, ctx.memory_limit_bytes)) {
    return limit_result(ctx, tool, "memory", process.wall_ms, process.output);
  }
  if (process.term_signal != 0) {
    return limit_result(ctx, tool, "killed by " + std::string(strsignal(process.term_signal)), process.wall_ms,
                        process.output);
  }
  CompileResult r;
  r.log = process.output;
  r.compile_ms = process.wall_ms;
  r.ok = process.exit_code == 0 && std::filesystem::is_regular_file(artifact);
  if (process.exit_code == 0 && !r.ok) {
    r.system_error = tool + " exited with 0 but wrote no " + artifact.filename().string();
  }
  r.diagnostics = condense_diagnostics(process.output, file_name, source, !r.ok);
  return r;
}

CompileResult rejected_result(const std::string& message) {
  CompileResult r;
  r.rejected = true;
  r.diagnostics = message;
  return r;
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string s = "$";
  for (const auto& a : argv) s += " " + a;
  return s + "\n";
}

}  // namespace kforge::env::internal
