#include "judge/syscall_scan.h"

#include <capstone/capstone.h>
#include <elf.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <sstream>

namespace kforge::judge {
namespace {

std::string hex(uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

// Byte patterns of the instructions that enter the kernel: x86-64 syscall,
// sysenter, int 0x80. Only a hint of where to look: decoding decides.
bool has_x86_pattern(const std::vector<uint8_t>& b, const CodeRegion& r) {
  for (uint64_t i = r.file_offset; i + 1 < r.file_offset + r.size; ++i) {
    if ((b[i] == 0x0f && (b[i + 1] == 0x05 || b[i + 1] == 0x34)) || (b[i] == 0xcd && b[i + 1] == 0x80)) return true;
  }
  return false;
}

int count_x86_patterns(const std::vector<uint8_t>& b, const CodeRegion& r) {
  int n = 0;
  for (uint64_t i = r.file_offset; i + 1 < r.file_offset + r.size; ++i) {
    n += (b[i] == 0x0f && (b[i + 1] == 0x05 || b[i + 1] == 0x34)) || (b[i] == 0xcd && b[i + 1] == 0x80);
  }
  return n;
}

// Where an address is, for the report: the nearest function at or below it
// within the same region, else the region.
std::string describe(uint64_t address, const CodeRegion& region, const std::map<uint64_t, std::string>& functions) {
  auto it = functions.upper_bound(address);
  if (it != functions.begin()) {
    --it;
    if (it->first >= region.address) return it->second + "+" + hex(address - it->first);
  }
  return region.name + "+" + hex(address - region.address);
}

struct CapstoneHandle {
  csh handle = 0;
  bool open = false;
  CapstoneHandle() {
    open = cs_open(CS_ARCH_X86, CS_MODE_64, &handle) == CS_ERR_OK;
    if (open) cs_option(handle, CS_OPT_DETAIL, CS_OPT_ON);
  }
  ~CapstoneHandle() {
    if (open) cs_close(&handle);
  }
  CapstoneHandle(const CapstoneHandle&) = delete;
  CapstoneHandle& operator=(const CapstoneHandle&) = delete;
};

struct InsnDeleter {
  void operator()(cs_insn* insn) const { cs_free(insn, 1); }
};

// Decodes x86-64 code; see the header for the two passes.
class X86Scan {
 public:
  X86Scan(const std::vector<uint8_t>& bytes, const std::vector<CodeRegion>& regions,
          const std::map<uint64_t, std::string>& functions, SyscallScan* out)
      : bytes_(bytes), regions_(regions), functions_(functions), out_(out) {}

  void run() {
    if (!cs_.open) {
      // Without a decoder nothing can be told apart: every pattern counts.
      for (const auto& r : regions_) report_patterns_undecoded(r);
      return;
    }
    insn_.reset(cs_malloc(cs_.handle));
    for (size_t i = 0; i < regions_.size(); ++i) sweep(i);
    // Pass 2: branch targets that are not instruction starts.
    while (!targets_.empty() && out_->instructions_decoded < budget()) {
      const uint64_t target = *targets_.begin();
      targets_.erase(targets_.begin());
      const int region = region_of(target);
      if (region >= 0 && !starts_.count(target)) follow(static_cast<size_t>(region), target);
    }
  }

 private:
  // Each byte decoded a few times at most, whatever the code does.
  int64_t budget() const {
    uint64_t total = 0;
    for (const auto& r : regions_) total += r.size;
    return static_cast<int64_t>(4 * total + 1024);
  }

  int region_of(uint64_t address) const {
    for (size_t i = 0; i < regions_.size(); ++i) {
      if (address >= regions_[i].address && address < regions_[i].address + regions_[i].size) {
        return static_cast<int>(i);
      }
    }
    return -1;
  }

  // Decodes one instruction at `address` of region `r`; false when the bytes
  // are not an instruction.
  bool decode(const CodeRegion& r, uint64_t address) {
    const uint8_t* code = bytes_.data() + r.file_offset + (address - r.address);
    size_t size = static_cast<size_t>(r.address + r.size - address);
    uint64_t at = address;
    ++out_->instructions_decoded;
    return cs_disasm_iter(cs_.handle, &code, &size, &at, insn_.get());
  }

  // After a successful decode: records the instruction, a syscall, and a
  // direct branch target. Returns whether execution can fall through.
  bool record(const CodeRegion& r) {
    const cs_insn* insn = insn_.get();
    starts_.insert(insn->address);
    std::string name;
    if (insn->id == X86_INS_SYSCALL) name = "syscall";
    if (insn->id == X86_INS_SYSENTER) name = "sysenter";
    if (insn->id == X86_INS_INT && insn->detail->x86.op_count == 1 &&
        insn->detail->x86.operands[0].type == X86_OP_IMM && insn->detail->x86.operands[0].imm == 0x80) {
      name = "int 0x80";
    }
    if (!name.empty() && reported_.insert(insn->address).second) {
      out_->sites.push_back(
          {r.file_offset + (insn->address - r.address), insn->address, name, describe(insn->address, r, functions_)});
    }
    const bool jump = cs_insn_group(cs_.handle, insn, CS_GRP_JUMP);
    const bool call = cs_insn_group(cs_.handle, insn, CS_GRP_CALL);
    if ((jump || call) && insn->detail->x86.op_count == 1 && insn->detail->x86.operands[0].type == X86_OP_IMM) {
      const auto target = static_cast<uint64_t>(insn->detail->x86.operands[0].imm);
      if (!starts_.count(target)) targets_.insert(target);
    }
    const bool ret = cs_insn_group(cs_.handle, insn, CS_GRP_RET) || cs_insn_group(cs_.handle, insn, CS_GRP_IRET);
    return !ret && !(jump && insn->id == X86_INS_JMP) && insn->id != X86_INS_UD2;
  }

  // Pass 1: the whole region in order, restarting at function starts.
  void sweep(size_t index) {
    const CodeRegion& r = regions_[index];
    auto next_function = functions_.lower_bound(r.address);
    uint64_t address = r.address;
    const uint64_t end = r.address + r.size;
    while (address < end && out_->instructions_decoded < budget()) {
      // A function that starts inside the previous instruction: start over there.
      while (next_function != functions_.end() && next_function->first < address) {
        if (next_function->first >= r.address && !starts_.count(next_function->first)) {
          targets_.insert(next_function->first);
        }
        ++next_function;
      }
      if (decode(r, address)) {
        record(r);
        address += insn_->size;
      } else {
        ++address;  // not an instruction (padding, data): step over one byte
      }
    }
  }

  // Pass 2: one path from a target, until control cannot fall through.
  void follow(size_t index, uint64_t address) {
    const CodeRegion& r = regions_[index];
    const uint64_t end = r.address + r.size;
    while (address < end && out_->instructions_decoded < budget()) {
      if (starts_.count(address)) return;  // joins code already decoded
      if (!decode(r, address)) return;
      if (!record(r)) return;
      address += insn_->size;
    }
  }

  void report_patterns_undecoded(const CodeRegion& r) {
    for (uint64_t i = r.file_offset; i + 1 < r.file_offset + r.size; ++i) {
      const bool hit = (bytes_[i] == 0x0f && (bytes_[i + 1] == 0x05 || bytes_[i + 1] == 0x34)) ||
                       (bytes_[i] == 0xcd && bytes_[i + 1] == 0x80);
      if (hit) {
        const uint64_t address = r.address + (i - r.file_offset);
        out_->sites.push_back(
            {i, address, "undecoded bytes of a system-call instruction", describe(address, r, functions_)});
      }
    }
  }

  const std::vector<uint8_t>& bytes_;
  const std::vector<CodeRegion>& regions_;
  const std::map<uint64_t, std::string>& functions_;
  SyscallScan* out_;
  CapstoneHandle cs_;
  std::unique_ptr<cs_insn, InsnDeleter> insn_;
  std::set<uint64_t> starts_;    // instruction starts decoded so far
  std::set<uint64_t> targets_;   // direct branch targets still to follow
  std::set<uint64_t> reported_;  // syscall sites already in the report
};

// A64: fixed 4-byte instructions, so each aligned word is an instruction;
// SVC #imm16 is 0xd4000001 | imm16 << 5.
void scan_aarch64(const std::vector<uint8_t>& b, const std::vector<CodeRegion>& regions,
                  const std::map<uint64_t, std::string>& functions, SyscallScan* out) {
  for (const auto& r : regions) {
    const uint64_t first = (r.address + 3) & ~uint64_t{3};
    for (uint64_t a = first; a + 4 <= r.address + r.size; a += 4) {
      uint32_t word = 0;
      std::memcpy(&word, b.data() + r.file_offset + (a - r.address), 4);
      ++out->instructions_decoded;
      if ((word & 0xffe0001fu) == 0xd4000001u) {
        out->sites.push_back({r.file_offset + (a - r.address), a, "svc #" + std::to_string((word >> 5) & 0xffff),
                              describe(a, r, functions)});
      }
    }
  }
}

}  // namespace

SyscallScan scan_syscalls(const std::vector<uint8_t>& bytes, uint16_t machine, const std::vector<CodeRegion>& regions,
                          const std::map<uint64_t, std::string>& functions) {
  SyscallScan out;
  // Regions past the end of the file are cut to it (the caller checked the
  // headers; a truncated file still must not be read past its end).
  std::vector<CodeRegion> inside;
  for (CodeRegion r : regions) {
    if (r.file_offset >= bytes.size()) continue;
    r.size = std::min<uint64_t>(r.size, bytes.size() - r.file_offset);
    if (r.size > 0) inside.push_back(r);
  }
  if (machine == EM_AARCH64) {
    scan_aarch64(bytes, inside, functions, &out);
  } else if (machine == EM_X86_64) {
    if (std::none_of(inside.begin(), inside.end(), [&](const CodeRegion& r) { return has_x86_pattern(bytes, r); })) {
      return out;
    }
    X86Scan(bytes, inside, functions, &out).run();
    int patterns = 0;
    for (const auto& r : inside) patterns += count_x86_patterns(bytes, r);
    out.pattern_hits_not_instructions = std::max(0, patterns - static_cast<int>(out.sites.size()));
  }
  std::sort(out.sites.begin(), out.sites.end(),
            [](const SyscallSite& a, const SyscallSite& b) { return a.file_offset < b.file_offset; });
  return out;
}

}  // namespace kforge::judge
