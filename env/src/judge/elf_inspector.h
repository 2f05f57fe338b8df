// Static inspection of a candidate shared object before anything loads it
// (docs/architecture.md#isolation): the first line of defence, the runner's sandbox the second.
//
// The checks, each reported as a Violation with a stable `check` name:
//   forbidden_symbol     an undefined dynamic symbol outside the backend's allow-list
//   forbidden_library    a DT_NEEDED library outside the allow-list
//   missing_entry_point  no defined, exported kf_forward function
//   writable_executable  a loadable segment that is both writable and executable
//   raw_syscall          a system-call instruction in the executable code (decoded,
//                        see syscall_scan.h)
//   load_constructor     code the dynamic loader would run before kf_forward that the
//                        toolchain did not generate (see below)
//   load_section         a dynamic-section entry, segment or section that changes how
//                        the object is loaded (text relocations, search paths, filters,
//                        audit libraries, .preinit_array, an executable stack)
//   malformed_elf        not a 64-bit little-endian shared object for this machine
//
// load_constructor: a candidate's code must run only inside kf_forward, where
// the runner's strict (running) seccomp filter applies, the judge times it
// and checks what it did. Code run while dlopen() loads the object runs under
// the looser loading filter (read-only opens, executable mappings), untimed
// and unchecked. So every function the loader calls must be one the toolchain
// generates, identified by its symbol-table name (all names at its address
// must be such names, and the fixed-name ones must be unique in the object):
//   frame_dummy, register_tm_clones, __do_global_ctors_aux  (GCC crtstuff)
//   init_have_lse_atomics                                   (AArch64 libgcc)
//   *__sti____cudaRegisterAll*                              (nvcc: fatbinary registration)
//   _GLOBAL__sub_I_*                                        (C++ namespace-scope initialization)
// DT_INIT must be the C runtime's own _init (crti.o/crtn.o; on x86-64 its bytes
// are compared with that code, so nothing can be spliced into .init). Refused:
// __attribute__((constructor)) functions, hand-made .init_array/.ctors
// entries, entries pointing at imported functions, IFUNC resolvers (they run
// during relocation) and anything the symbol table does not name.
// A toolchain-named initializer is still refused when, on x86-64, it reaches
// an import that does GPU work (a launch, copy, memset, allocation, stream,
// event, graph, cuBLAS/cuDNN call) through direct calls or GOT calls: a
// `static int x = launch_a_kernel();` would otherwise do untimed work at load.
// Known gap, accepted: _GLOBAL__sub_I_* runs whatever CPU work initializers
// of namespace-scope objects compute, GPU work reached only through function
// pointers is not seen, and an object without a symbol table cannot be
// judged (the environment's compilers never strip). The loading filter still
// applies: no writes, network or processes.
//
// raw_syscall decodes the instructions (syscall_scan.h): bytes that only look
// like one (inside a longer instruction, in padding) are not refused. Code
// reached only through computed jumps is not decoded; the runner's seccomp
// filter is the guarantee there.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "judge/symbol_policy.h"
#include "judge/syscall_scan.h"
#include "kforge/core/measurement.h"

namespace kforge::judge {

struct ElfSymbolRef {
  std::string name;
  bool weak = false;
};

// A function the dynamic loader calls while loading the object.
struct ElfLoadTimeCode {
  std::string kind;      // "init_array", "ctors", "init" (DT_INIT) or "ifunc"
  uint64_t address = 0;  // in the object's address space (0: unknown)
  std::string imported;  // set when the entry points at an imported symbol
  // Names of the functions defined at `address` (.symtab, else .dynsym), and
  // how many functions in the object carry each name.
  std::vector<std::string> names;
  std::vector<int> name_counts;
  std::string anomaly;  // kind "init": why it is not the C runtime's _init
  // x86-64: imported functions it reaches through direct calls (followed
  // into the object's own functions) and GOT calls; see CallGraph.
  std::vector<std::string> reaches;
};

// The facts read from the file, independent of any policy.
struct ElfFacts {
  uint16_t machine = 0;                         // EM_X86_64, EM_AARCH64, ...
  std::vector<ElfSymbolRef> undefined;          // undefined dynamic symbols
  std::vector<std::string> exported_functions;  // defined global/weak STT_FUNC in .dynsym
  std::vector<std::string> needed;              // DT_NEEDED sonames
  std::vector<std::string> wx_segments;         // "segment 2 at 0x4000 (RWX)"
  SyscallScan syscalls;                         // system-call instructions of the code
  std::vector<ElfLoadTimeCode> load_time_code;  // constructors, DT_INIT, IFUNC resolvers
  // Entries that change how the object is loaded, described for a report
  // ("DT_RUNPATH /tmp/x: ..."); every one is refused.
  std::vector<std::string> load_hazards;
  bool has_symbol_table = false;  // a .symtab section (names for local functions)
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

}  // namespace kforge::judge
