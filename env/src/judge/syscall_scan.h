// Finds the system-call instructions of a candidate's machine code by
// decoding it (Capstone), not by matching bytes: `0f 05` inside a longer
// instruction (an immediate, a displacement) or in padding is not a syscall,
// and rejecting such honest kernels was the bug this replaced (the template
// policy's own nvcc builds were refused on the H200's GCC 13).
//
// What is decoded, x86-64:
//   1. every code region linearly from its start, restarting at every
//      function symbol that the sweep would otherwise step over (compilers
//      put no data in .text, so this recovers the instructions exactly);
//   2. from every direct branch or call target that step 1 did not reach as
//      an instruction start (code that jumps into the middle of another
//      instruction to hide a syscall there), until a return, an
//      unconditional jump or an undecodable byte.
// Targets reached only through computed jumps are not followed: the runner's
// seccomp filter is the guarantee, this check is the early, explained refusal.
// AArch64 instructions are fixed 4-byte words, so decoding is reading each
// aligned word: every SVC (any immediate) counts.
//
// Cost: the byte patterns are searched first; code without any of them is
// not decoded at all (most candidates), so the scan stays off the critical
// path of an evaluation.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kforge::judge {

// Executable bytes of the file, at their load address.
struct CodeRegion {
  uint64_t address = 0;
  uint64_t file_offset = 0;
  uint64_t size = 0;
  std::string name;  // section name, or "segment N" without section headers
};

struct SyscallSite {
  uint64_t file_offset = 0;
  uint64_t address = 0;
  std::string instruction;  // "syscall", "sysenter", "int 0x80", "svc #0"
  std::string where;        // "kf_forward+0x1c", or the region's name
};

struct SyscallScan {
  std::vector<SyscallSite> sites;
  // Byte patterns that decoding showed are not instructions (inside a longer
  // instruction, or in bytes no decoded path reaches): reported, not refused.
  int pattern_hits_not_instructions = 0;
  int64_t instructions_decoded = 0;
};

// `functions`: function start address -> name (symbol tables), used as
// decode starts and to say where a site is. `machine`: EM_X86_64 or
// EM_AARCH64 (others: nothing is found). Bounded: each byte of `bytes` is
// decoded at most a few times.
SyscallScan scan_syscalls(const std::vector<uint8_t>& bytes, uint16_t machine, const std::vector<CodeRegion>& regions,
                          const std::map<uint64_t, std::string>& functions);

}  // namespace kforge::judge
