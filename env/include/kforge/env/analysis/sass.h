// SASS listings (`cuobjdump -sass`, `nvdisasm`) parsed into functions and
// instructions, and the static instruction mix of a function: counts by
// opcode, by class (fp32, tensor, global_load, ...) and by access width.
//
// Counts are static (instructions in the binary, not executed instructions):
// a load inside a hot loop counts once. They answer "which instructions did
// the compiler choose", not "where does the time go".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/task_spec.h"

namespace kforge::env {

struct SassInstruction {
  uint64_t address = 0;
  std::string predicate;  // "@P0", "@!PT", "@UP1"; empty when unpredicated
  std::string opcode;     // with modifiers: "LDG.E.128.CONSTANT"
  std::string base;       // opcode without modifiers: "LDG"
  std::string operands;   // the rest of the line, without ';' and encoding
};

struct SassFunction {
  std::string name;  // mangled
  std::string arch;  // "sm_90a" when the listing says so, else empty
  std::vector<SassInstruction> instructions;
};

// Functions in listing order. Understands cuobjdump's "Function : <name>"
// headers (with the "arch = sm_XX" / "code for sm_XX" lines before them) and
// nvdisasm's ".text.<name>:" section labels; instruction lines are
// "/*<hex address>*/ [@pred] OPCODE[.MODS] operands ;" with an optional
// trailing "/* 0x... */" encoding. Encoding-only lines, labels, directives and
// blank lines are skipped.
std::vector<SassFunction> parse_sass(const std::string& text);

// The class of an opcode (base, without modifiers), one of sass_class_names().
// Unknown opcodes are "other".
const std::string& sass_opcode_class(const std::string& base);
const std::vector<std::string>& sass_class_names();

// Bits moved per thread by a load/store opcode with modifiers: 8, 16, 32
// (no width modifier), 64, 128 or 256. 0 for opcodes that are not plain
// loads/stores (atomics, LDSM, ...).
int sass_access_bits(const std::string& opcode);

struct SassMix {
  std::string name;
  std::string arch;
  int64_t instructions = 0;  // excluding NOP padding
  int64_t predicated = 0;
  std::map<std::string, int64_t> by_opcode;    // base opcode
  std::map<std::string, int64_t> by_mnemonic;  // opcode with modifiers
  std::map<std::string, int64_t> by_class;
  // class (global_load, global_store, shared_load, shared_store, local_load,
  // local_store) -> bits per access -> count
  std::map<std::string, std::map<int, int64_t>> access_bits;

  int64_t count_class(const std::string& cls) const;
  int64_t count_opcode(const std::string& base) const;
};

SassMix summarize_sass(const SassFunction& function);
// {"name", "demangled", "arch", "instructions", "predicated", "by_class",
//  "by_opcode", "top_mnemonics" (the `top` most frequent), "tensor_mnemonics",
//  "access_bits": {"global_load": {"32": n, "128": m}, ...}}
json to_json(const SassMix& mix, size_t top);

// The sass_mix tool's hints for one function: local-memory traffic, FP64 in a
// task without float64, a matmul-like task without tensor cores (or without
// wgmma on sm_90a), 32-bit global accesses, IEEE division, register-staged
// tiles, integer-heavy code. `task` may be null; `device_arch` is used when the
// listing names no arch.
std::vector<std::string> sass_mix_hints(const SassMix& mix, const TaskSpec* task, const std::string& device_arch);

}  // namespace kforge::env
