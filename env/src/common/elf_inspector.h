// Static inspection of a candidate shared object before anything loads it
// (DESIGN.md §6): the first line of defence, the runner's sandbox the second.
//
// The checks, each reported as a Violation with a stable `check` name:
//   forbidden_symbol     an undefined dynamic symbol outside the backend's allow-list
//   forbidden_library    a DT_NEEDED library outside the allow-list
//   missing_entry_point  no defined, exported kf_forward function
//   writable_executable  a loadable segment that is both writable and executable
//   raw_syscall          a system-call instruction in an executable segment
//   malformed_elf        not a 64-bit little-endian shared object for this machine
//
// raw_syscall is a heuristic: it scans bytes, not decoded instructions (x86-64:
// 0f 05 syscall, 0f 34 sysenter, cd 80 int 0x80; AArch64: the svc #0 word), so
// an immediate that happens to contain those bytes is a false positive. We
// accept that: compiled kernels almost never contain them, and the runner's
// seccomp filter is the real guarantee.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/symbol_policy.h"
#include "kforge/core/measurement.h"

namespace kforge::exec {

struct ElfSymbolRef {
  std::string name;
  bool weak = false;
};

// The facts read from the file, independent of any policy.
struct ElfFacts {
  uint16_t machine = 0;                         // EM_X86_64, EM_AARCH64, ...
  std::vector<ElfSymbolRef> undefined;          // undefined dynamic symbols
  std::vector<std::string> exported_functions;  // defined global/weak STT_FUNC in .dynsym
  std::vector<std::string> needed;              // DT_NEEDED sonames
  std::vector<std::string> wx_segments;         // "segment 2 at 0x4000 (RWX)"
  std::vector<uint64_t> syscall_offsets;        // file offsets of system-call instructions
};

// Parses the file. Throws InputError with a precise message if it is not an
// ELF shared object we can read (truncated, wrong class, offsets out of range).
ElfFacts read_elf_facts(const std::filesystem::path& path);

struct ElfInspection {
  bool accepted = false;
  std::vector<Violation> violations;  // empty when accepted
  ElfFacts facts;
};

// Applies the policy. Never throws for bad candidate files: those become a
// malformed_elf violation.
ElfInspection inspect_candidate(const std::filesystem::path& path, const SymbolPolicy& policy);

}  // namespace kforge::exec
