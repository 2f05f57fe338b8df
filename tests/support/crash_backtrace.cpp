// Linked into every test binary: a test process killed by SIGSEGV, SIGBUS,
// SIGILL or SIGFPE prints where it crashed before it dies, so that a crash
// seen once (a GPU machine without gdb, a CI run) says where it happened.
// Not under AddressSanitizer, whose own reports are better.
//
// Frames, each as `MODULE(+0xOFFSET)` (what `addr2line -f -C -e MODULE
// 0xOFFSET` resolves) and the nearest exported symbol when there is one:
//   #0        the faulting instruction, read from the signal's context (the
//             handler's own frames are not printed);
//   unwound   the callers by the unwinder (glibc backtrace(), from inside the
//             handler, through the kernel's signal frame);
//   scanned   when the unwinder could not get past the faulting frame (code
//             without unwind tables: a driver, JIT code, a stripped
//             library), return addresses found on the faulting thread's
//             stack: words that point just after a call instruction of a
//             loaded module. Stale frames can appear among them.
// The first version printed only backtrace() from the handler; on the H200
// a crash in code without unwind tables printed the handler and libc and
// nothing of the code that crashed.
#include <dlfcn.h>
#include <elf.h>
#include <execinfo.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KFORGE_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define KFORGE_ASAN 1
#endif

#ifndef KFORGE_ASAN
namespace {

// Output with async-signal-safe calls only (no stdio, no allocation).
void write_text(const char* text) { (void)!::write(STDERR_FILENO, text, std::strlen(text)); }

void write_unsigned(uintptr_t v, int base) {
  char digits[32];
  int i = 31;
  digits[i] = '\0';
  do {
    digits[--i] = "0123456789abcdef"[v % static_cast<uintptr_t>(base)];
    v /= static_cast<uintptr_t>(base);
  } while (v > 0 && i > 0);
  if (base == 16) write_text("0x");
  write_text(digits + i);
}

// Reads `size` bytes at `address` of this process, or returns false. Through
// process_vm_readv, which reports an unmapped or unreadable address as EFAULT
// instead of faulting: mincore() said "mapped" for pages that then raised
// SIGBUS when read (a file mapping past its end), killing the handler halfway
// through its report on the H200.
bool safe_read(uintptr_t address, void* out, size_t size) {
  iovec local{out, size};
  iovec remote{reinterpret_cast<void*>(address), size};
  return ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(size);
}

uintptr_t context_pc(const ucontext_t* uc) {
#if defined(__x86_64__)
  return static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return static_cast<uintptr_t>(uc->uc_mcontext.pc);
#else
  (void)uc;
  return 0;
#endif
}

uintptr_t context_sp(const ucontext_t* uc) {
#if defined(__x86_64__)
  return static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
#elif defined(__aarch64__)
  return static_cast<uintptr_t>(uc->uc_mcontext.sp);
#else
  (void)uc;
  return 0;
#endif
}

// "#N 0xPC MODULE(+0xOFFSET) SYMBOL+0xN [how]". The offset is from the
// module's load base for shared objects and PIE executables, which is what
// addr2line expects; a fixed-address executable keeps the address.
void write_frame(int n, uintptr_t pc, const char* how) {
  write_text("  #");
  write_unsigned(static_cast<uintptr_t>(n), 10);
  write_text(" ");
  write_unsigned(pc, 16);
  write_text(" ");
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(pc), &info) != 0 && info.dli_fname != nullptr) {
    Elf64_Half type = 0;
    const bool relative =
        safe_read(reinterpret_cast<uintptr_t>(info.dli_fbase) + offsetof(Elf64_Ehdr, e_type), &type, sizeof(type)) &&
        type == ET_DYN;
    write_text(info.dli_fname[0] != '\0' ? info.dli_fname : "(main program)");
    write_text("(+");
    write_unsigned(relative ? pc - reinterpret_cast<uintptr_t>(info.dli_fbase) : pc, 16);
    write_text(")");
    if (info.dli_sname != nullptr) {
      write_text(" ");
      write_text(info.dli_sname);
      write_text("+");
      write_unsigned(pc - reinterpret_cast<uintptr_t>(info.dli_saddr), 16);
    }
  } else {
    write_text("?? (no loaded module)");
  }
  write_text(" [");
  write_text(how);
  write_text("]\n");
}

// Whether `ret` follows a call instruction of a loaded module: the bytes
// before it encode one (x86-64: e8 rel32; ff /2 with a register, a disp8 or
// a disp32 operand; AArch64: bl or blr).
bool follows_a_call(uintptr_t ret) {
  Dl_info info{};
  if (ret < 8 || ::dladdr(reinterpret_cast<void*>(ret), &info) == 0 || info.dli_fname == nullptr) return false;
  unsigned char code[8];
  if (!safe_read(ret - 8, code, sizeof(code))) return false;
  const unsigned char* b = code + 8;  // b[-k]: the k-th byte before `ret`
#if defined(__x86_64__)
  if (b[-5] == 0xe8) return true;
  const bool reg_or_plain_memory =
      (b[-1] & 0xc0) == 0xc0 || ((b[-1] & 0xc0) == 0 && (b[-1] & 0x07) != 4 && (b[-1] & 0x07) != 5);
  if (b[-2] == 0xff && (b[-1] & 0x38) == 0x10 && reg_or_plain_memory) return true;     // call reg, call [reg]
  if (b[-3] == 0xff && (b[-2] & 0x38) == 0x10 && (b[-2] & 0xc0) == 0x40) return true;  // call [reg+disp8]
  if (b[-6] == 0xff && (b[-5] & 0x38) == 0x10 && ((b[-5] & 0xc0) == 0x80 || (b[-5] & 0xc7) == 0x05)) return true;
  return b[-7] == 0xff && (b[-6] & 0xf8) == 0x90 && (b[-6] & 0x07) == 0x04;  // call [sib+disp32]
#elif defined(__aarch64__)
  uint32_t word = 0;
  std::memcpy(&word, b - 4, 4);
  return (word & 0xfc000000u) == 0x94000000u || (word & 0xfffffc1fu) == 0xd63f0000u;
#else
  return false;
#endif
}

// Return addresses on the faulting thread's stack, from its stack pointer
// up, while the pages are mapped.
void scan_stack(uintptr_t sp, int first_frame) {
  constexpr uintptr_t kScanBytes = 256 * 1024;
  constexpr int kMaxFrames = 32;
  int n = first_frame;
  for (uintptr_t at = sp & ~uintptr_t{7}; at < sp + kScanBytes && n < first_frame + kMaxFrames; at += 8) {
    uintptr_t word = 0;
    if (!safe_read(at, &word, sizeof(word))) break;  // the end of the stack's mapping
    if (follows_a_call(word)) write_frame(n++, word, "scanned");
  }
  if (n == first_frame) write_text("  (no return addresses found on the stack)\n");
}

void on_fatal_signal(int sig, siginfo_t* info, void* context) {
  const auto* uc = static_cast<const ucontext_t*>(context);
  write_text("\n*** test process killed by signal ");
  write_unsigned(static_cast<uintptr_t>(sig), 10);
  write_text(" (");
  write_text(strsignal(sig));
  write_text(") at address ");
  write_unsigned(reinterpret_cast<uintptr_t>(info->si_addr), 16);
  write_text(" in thread ");
  write_unsigned(static_cast<uintptr_t>(::syscall(SYS_gettid)), 10);
  write_text("; resolve a frame with: addr2line -f -C -e MODULE OFFSET\n");
  const uintptr_t pc = context_pc(uc);
  write_frame(0, pc, "faulting instruction");
  // The unwinder's frames start in this handler; those after the faulting
  // instruction are its callers.
  void* frames[64];
  const int count = ::backtrace(frames, 64);
  int n = 1;
  bool past_fault = false;
  for (int i = 0; i < count; ++i) {
    const auto f = reinterpret_cast<uintptr_t>(frames[i]);
    if (past_fault) write_frame(n++, f, "unwound");
    past_fault |= f == pc;
  }
  if (n == 1) {
    write_text("  (the unwinder did not get past the faulting frame; scanning the stack)\n");
    scan_stack(context_sp(uc), 1);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

[[maybe_unused]] const bool installed = [] {
  // backtrace()'s first call may allocate (it loads libgcc_s): done here.
  void* prime[1];
  (void)::backtrace(prime, 1);
  // A stack overflow must still be able to run the handler.
  static char alt_stack[64 * 1024];
  stack_t ss{};
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof(alt_stack);
  ::sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_sigaction = on_fatal_signal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE}) ::sigaction(sig, &sa, nullptr);
  return true;
}();

}  // namespace
#endif  // KFORGE_ASAN
