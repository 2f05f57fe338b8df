// Pieces the compilers share: files, tool versions, the child environment,
// and turning a finished compiler process into a CompileResult.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "kforge/core/process.h"
#include "kforge/env/compiler.h"

namespace kforge::env::internal {

// Throws SystemError naming the path.
void write_file(const std::filesystem::path& path, const std::string& text);
std::string read_file(const std::filesystem::path& path);

// The ABI include dir of `ctx` (or the default), checked to hold
// kforge/kernel_abi.h; SystemError otherwise.
std::filesystem::path resolve_abi_include_dir(const CompileContext& ctx);
// sha256 of kforge/kernel_abi.h, part of compiler identities: a changed ABI
// must not be served an artifact built against the old one.
std::string abi_header_hash(const std::filesystem::path& abi_dir);

// The torch shim's include dir, checked to hold torch/extension.h.
std::filesystem::path resolve_torch_ext_include_dir();
// sha256 over every file under `dir` (relative names and contents, in name
// order): the shim is part of torch_ext's compiler identity.
std::string directory_hash(const std::filesystem::path& dir);

// The first non-empty line of `<tool> --version` that contains `marker`.
// SystemError if the tool does not run.
std::string tool_version(const std::filesystem::path& tool, const std::string& marker = "");

// For compiler subprocesses: C locale (ASCII quotes in messages the condenser
// reads), TMPDIR inside the compile's own directory (a killed compile leaves
// nothing in /tmp), and no variables that would inject flags or include paths
// behind the cache key's back.
ProcessOptions compiler_process_options(const std::filesystem::path& work_dir, const CompileContext& ctx);

// ok / diagnostics / log / limits / signal handling for a finished compiler
// process whose main output is `artifact`, run under `ctx`'s limits.
CompileResult result_from_process(const ProcessResult& process, const std::string& tool, const std::string& file_name,
                                  const std::string& source, const std::filesystem::path& artifact,
                                  const CompileContext& ctx);

// A compile stopped at one of `ctx`'s limits, or a compiler that crashed on
// the source: a compile error for the policy ("compile exceeded 120 s ..."),
// never a system error. `what` is "time", "memory" or the signal's name.
CompileResult limit_result(const CompileContext& ctx, const std::string& tool, const std::string& what,
                           double elapsed_ms, const std::string& log);

// Whether a failed compile ran out of memory: the compiler said so, or it
// died by a signal with its resident set near the limit.
bool ran_out_of_memory(const std::string& output, int term_signal, uint64_t peak_rss_bytes, uint64_t limit_bytes);

CompileResult rejected_result(const std::string& message);

// A compact text of argv for logs ("$ g++ -O3 ...").
std::string command_line(const std::vector<std::string>& argv);

}  // namespace kforge::env::internal
