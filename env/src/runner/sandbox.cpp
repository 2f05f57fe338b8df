#include "runner/sandbox.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "ipc/runner_protocol.h"
#include "kforge/core/errno_text.h"
#include "kforge/core/unique_fd.h"
#include "runner/landlock.h"

namespace kforge::runner {
namespace {

namespace protocol = ipc::runner_protocol;

[[noreturn]] void fail(const std::string& what, int err) { throw std::runtime_error(what + ": " + errno_text(err)); }

// --- SIGSYS reporter -------------------------------------------------------
// Async-signal-safe: the frame is MessagePack written by hand into a stack
// buffer, sent with one write(2) (allowed on the control fd) and followed by
// exit_group. {"type": "sandbox", "syscall": <int32>, "arg": <str>}, where
// `arg` is what the call was about: the path of a call that takes one (open,
// unlink, symlink, execve, ...: read from the trapped thread's registers; a
// bad pointer would fault, so only a bounded C string is copied) or the first
// argument as a number, so that the report says "openat /proc/self/maps"
// rather than just "openat".
size_t put_decimal(char* out, uint64_t v) {
  char tmp[24];
  size_t n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (size_t i = 0; i < n; ++i) out[i] = tmp[n - 1 - i];
  return n;
}

size_t describe_argument(const siginfo_t* info, void* context, char* out, size_t cap) {
#if defined(__x86_64__)
  const auto* uc = static_cast<const ucontext_t*>(context);
  const greg_t* r = uc->uc_mcontext.gregs;
  // The register that holds the path of each call that takes one (the
  // *at forms take a directory descriptor first); for symlink, the link's.
  int reg = -1;
  switch (info->si_syscall) {
    case SYS_open:
    case SYS_creat:
    case SYS_unlink:
    case SYS_mkdir:
    case SYS_rmdir:
    case SYS_rename:
    case SYS_link:
    case SYS_chmod:
    case SYS_truncate:
    case SYS_execve:
      reg = REG_RDI;
      break;
    case SYS_openat:
    case SYS_unlinkat:
    case SYS_mkdirat:
    case SYS_renameat:
    case SYS_renameat2:
    case SYS_linkat:
    case SYS_fchmodat:
    case SYS_execveat:
    case SYS_symlink:
      reg = REG_RSI;
      break;
    case SYS_symlinkat:
      reg = REG_RDX;
      break;
    default:
      break;
  }
  if (reg >= 0) {
    const char* path = reinterpret_cast<const char*>(r[reg]);
    size_t n = 0;
    while (path != nullptr && n < cap && path[n] != 0) {
      out[n] = path[n];
      ++n;
    }
    return n;
  }
  std::memcpy(out, "arg0=", 5);
  return 5 + put_decimal(out + 5, static_cast<uint64_t>(r[REG_RDI]));
#else
  (void)info;
  (void)context;
  (void)out;
  (void)cap;
  return 0;
#endif
}

void on_sigsys(int, siginfo_t* info, void* context) {
  constexpr size_t kArgCap = 160;
  unsigned char frame[4 + 64 + kArgCap];
  unsigned char* p = frame + 4;
  const unsigned char head[] = {0x83,                                     // map of 3
                                0xa4, 't', 'y', 'p', 'e',                 // "type"
                                0xa7, 's', 'a', 'n', 'd', 'b', 'o', 'x',  // "sandbox"
                                0xa7, 's', 'y', 's', 'c', 'a', 'l', 'l',  // "syscall"
                                0xd2};                                    // int32, big-endian
  std::memcpy(p, head, sizeof(head));
  p += sizeof(head);
  const int32_t nr = info->si_syscall;
  for (int shift = 24; shift >= 0; shift -= 8) *p++ = static_cast<unsigned char>((nr >> shift) & 0xff);
  const unsigned char arg_key[] = {0xa3, 'a', 'r', 'g'};
  std::memcpy(p, arg_key, sizeof(arg_key));
  p += sizeof(arg_key);
  char arg[kArgCap];
  size_t n = describe_argument(info, context, arg, sizeof(arg));
  *p++ = 0xd9;  // str8
  *p++ = static_cast<unsigned char>(n);
  std::memcpy(p, arg, n);
  p += n;
  const size_t payload = static_cast<size_t>(p - (frame + 4));
  frame[0] = static_cast<unsigned char>(payload & 0xff);
  frame[1] = static_cast<unsigned char>((payload >> 8) & 0xff);
  frame[2] = frame[3] = 0;
  ssize_t ignored = ::write(protocol::kControlFd, frame, 4 + payload);
  (void)ignored;
  ::syscall(SYS_exit_group, protocol::kSandboxExitCode);
}

void install_sigsys_reporter() {
  struct sigaction sa {};
  sa.sa_sigaction = on_sigsys;
  sa.sa_flags = SA_SIGINFO;
  sigfillset(&sa.sa_mask);
  if (::sigaction(SIGSYS, &sa, nullptr) != 0) fail("sigaction(SIGSYS)", errno);
}

// --- limits and privileges ---------------------------------------------------

void set_limit(int resource, rlim_t value, const char* name) {
  rlimit rl{value, value};
  if (::setrlimit(resource, &rl) != 0) fail(std::string("setrlimit(") + name + ")", errno);
}

// A runner started as root would otherwise keep CAP_SYS_PTRACE (reading the
// judge's memory through /proc while the loading filter allows read-only
// opens), CAP_DAC_OVERRIDE and friends.
bool drop_capabilities(SandboxState* state) {
  for (int cap = 0; cap < 64; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno == EINVAL) break;  // past the last capability
  }
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (::syscall(SYS_capset, &header, data) != 0) {
    state->notes.push_back(std::string("capset: ") + errno_text(errno));
    return false;
  }
  return true;
}

// --- seccomp -----------------------------------------------------------------

constexpr scmp_datum_t kFileWriteFlags = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND;

// libseccomp's SCMP_A0..SCMP_A5 are C compound literals, which clang's
// -Wpedantic refuses in C++: the same comparison, built as a C++ aggregate.
// For SCMP_CMP_MASKED_EQ, `a` is the mask and `b` the value.
scmp_arg_cmp arg_cmp(unsigned int arg, scmp_compare op, scmp_datum_t a, scmp_datum_t b = 0) {
  return scmp_arg_cmp{arg, op, a, b};
}

class Filter {
 public:
  Filter() : ctx_(seccomp_init(SCMP_ACT_TRAP)) {
    if (ctx_ == nullptr) throw std::runtime_error("seccomp_init failed");
    // no_new_privs is set once, explicitly, by enter_loading_phase.
    seccomp_attr_set(ctx_, SCMP_FLTATR_CTL_NNP, 0);
  }
  ~Filter() { seccomp_release(ctx_); }
  Filter(const Filter&) = delete;
  Filter& operator=(const Filter&) = delete;

  void allow(const char* name) { add(name, {}); }
  void allow_if(const char* name, scmp_arg_cmp cmp) { add(name, {cmp}); }
  void allow_on_fds(const char* name, std::initializer_list<int> fds) {
    for (int fd : fds) allow_if(name, arg_cmp(0, SCMP_CMP_EQ, static_cast<scmp_datum_t>(fd)));
  }
  // `writes_confined`: Landlock restricts file writes to granted paths
  // (landlock.h), so opens may ask for write access.
  void allow_any(const std::vector<std::string>& names, bool writes_confined) {
    for (const auto& n : names) {
      // Device runtimes may change page protections of their own buffers;
      // never to executable, which would let candidate code create code.
      if (n == "mprotect") {
        allow_if("mprotect", arg_cmp(2, SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
      } else if (n == "mmap" && writes_confined) {
        // Executable mappings of files, never of anonymous memory: with
        // writes confined (Landlock) no file can be made or changed, so only
        // libraries already on the machine can be mapped, as dlopen does
        // (CUPTI loads one while collecting counters, seen on the H200).
        allow_if("mmap", arg_cmp(3, SCMP_CMP_MASKED_EQ, MAP_ANONYMOUS, 0));
      } else if ((n == "openat" || n == "open") && writes_confined) {
        allow(n.c_str());
      } else if (n == "openat") {
        // Read-only: the filter cannot see the path, so without Landlock no
        // device may ask for file writes.
        allow_if("openat", arg_cmp(2, SCMP_CMP_MASKED_EQ, kFileWriteFlags, 0));
      } else if (n == "open") {
        allow_if("open", arg_cmp(1, SCMP_CMP_MASKED_EQ, kFileWriteFlags, 0));
      } else if (!n.empty() && n[0] == '!') {
        refuse(n.c_str() + 1);  // "!name": fails with EPERM, the runner carries on
      } else {
        allow(n.c_str());
      }
    }
  }

  // The compiled BPF program: built while the process may still do anything,
  // loaded later with the raw seccomp(2) call the loading filter allows.
  std::vector<sock_filter> export_program() const {
    UniqueFd mem(static_cast<int>(::syscall(SYS_memfd_create, "kforge-bpf", MFD_CLOEXEC)));
    if (!mem) fail("memfd_create", errno);
    int rc = seccomp_export_bpf(ctx_, mem.get());
    if (rc != 0) fail("seccomp_export_bpf", -rc);
    off_t size = ::lseek(mem.get(), 0, SEEK_END);
    if (size <= 0 || size % sizeof(sock_filter) != 0) throw std::runtime_error("seccomp_export_bpf: bad program size");
    std::vector<sock_filter> prog(static_cast<size_t>(size) / sizeof(sock_filter));
    if (::pread(mem.get(), prog.data(), static_cast<size_t>(size), 0) != size) fail("read BPF program", errno);
    return prog;
  }

  void load() {
    int rc = seccomp_load(ctx_);
    if (rc != 0) fail("seccomp_load", -rc);
  }

 private:
  // Fails the call with EPERM instead of stopping the runner: for library
  // housekeeping that may fail harmlessly (see RunnerDevice::extra_syscalls).
  void refuse(const char* name) { add(name, {}, SCMP_ACT_ERRNO(EPERM)); }

  void add(const char* name, std::vector<scmp_arg_cmp> cmps, uint32_t action = SCMP_ACT_ALLOW) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) return;  // does not exist on this architecture
    int rc = seccomp_rule_add_array(ctx_, action, nr, static_cast<unsigned>(cmps.size()),
                                    cmps.empty() ? nullptr : cmps.data());
    if (rc != 0 && rc != -EEXIST) fail(std::string("seccomp rule for ") + name, -rc);
  }

  scmp_filter_ctx ctx_;
};

// What a running kernel (and the runner's own request loop) needs.
void add_running_rules(Filter* f, const std::vector<std::string>& extra, bool writes_confined) {
  const int control = protocol::kControlFd;
  f->allow_on_fds("read", {control});
  f->allow_on_fds("recvmsg", {control});
  f->allow_on_fds("recvfrom", {control});
  f->allow_on_fds("sendmsg", {control});
  f->allow_on_fds("sendto", {control});
  f->allow_on_fds("write", {1, 2, control});
  f->allow_on_fds("writev", {1, 2});
  // stdio asks for the block size of stdout/stderr on first use.
  f->allow_on_fds("fstat", {1, 2});
  f->allow_on_fds("newfstatat", {1, 2});
  f->allow_on_fds("lseek", {1, 2});
  // Memory: anonymous or not, never executable.
  f->allow_if("mmap", arg_cmp(2, SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
  f->allow("munmap");
  f->allow("mremap");
  f->allow("brk");
  f->allow("madvise");
  f->allow("futex");
  f->allow("sched_yield");
  f->allow("clock_gettime");
  f->allow("clock_getres");
  f->allow("gettimeofday");
  f->allow("getpid");
  f->allow("gettid");
  f->allow("rt_sigprocmask");
  f->allow("rt_sigreturn");
  f->allow("restart_syscall");
  // abort() and raise() signal the calling thread; nothing else may be signalled.
  f->allow_if("tgkill", arg_cmp(0, SCMP_CMP_EQ, static_cast<scmp_datum_t>(::getpid())));
  f->allow("exit");
  f->allow("exit_group");
  f->allow_any(extra, writes_confined);
}

// Additionally, what dlopen and the arena mapping need: read-only file opens,
// executable mappings, mprotect (guard pages), and seccomp(2) to stack the
// running filter.
void add_loading_rules(Filter* f) {
  f->allow_if("openat", arg_cmp(2, SCMP_CMP_MASKED_EQ, kFileWriteFlags, 0));
  f->allow_if("open", arg_cmp(1, SCMP_CMP_MASKED_EQ, kFileWriteFlags, 0));
  f->allow("read");
  f->allow("pread64");
  f->allow("close");
  f->allow("fstat");
  f->allow("newfstatat");
  f->allow("statx");
  f->allow("lseek");
  f->allow("mmap");
  f->allow("mprotect");
  f->allow("access");
  f->allow("faccessat");
  f->allow("faccessat2");
  f->allow("getcwd");
  f->allow("readlink");
  f->allow("readlinkat");
  f->allow("getrlimit");
  f->allow("prlimit64");
  // Thread-attribute set-up in libraries' initialization (cuBLAS on the
  // H200): queries of the scheduler's priority range, nothing more.
  f->allow("sched_get_priority_max");
  f->allow("sched_get_priority_min");
  f->allow_if("seccomp", arg_cmp(0, SCMP_CMP_EQ, SECCOMP_SET_MODE_FILTER));
}

std::vector<sock_filter> g_running_program;

uint64_t current_address_space() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0;
  if (!(statm >> pages)) throw std::runtime_error("cannot read /proc/self/statm");
  return pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

nlohmann::json SandboxState::to_json() const {
  return {{"network", network},
          {"capabilities_dropped", capabilities_dropped},
          {"no_new_privs", no_new_privs},
          {"file_writes", file_writes},
          {"landlock", landlock},
          {"seccomp", loading_filter && running_filter},
          {"address_space_limit", address_space_limit},
          {"notes", notes}};
}

void isolate_network(SandboxState* state) {
  if (::unshare(CLONE_NEWNET) == 0) {
    state->network = "private";
    return;
  }
  int err = errno;
  // Unprivileged: a user namespace makes the network namespace possible.
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0) {
    state->network = "private (user namespace)";
    return;
  }
  state->notes.push_back(std::string("unshare(CLONE_NEWNET): ") + errno_text(err) +
                         "; network stays shared, seccomp still blocks sockets");
}

void enter_loading_phase(const SandboxLimits& limits, const std::vector<std::string>& extra_syscalls,
                         const std::vector<std::string>& writable_files, SandboxState* state,
                         const std::vector<std::string>& device_ioctl_files) {
  set_limit(RLIMIT_CORE, 0, "RLIMIT_CORE");
  set_limit(RLIMIT_FSIZE, limits.output_bytes, "RLIMIT_FSIZE");
  set_limit(RLIMIT_NOFILE, static_cast<rlim_t>(limits.open_files), "RLIMIT_NOFILE");
  set_limit(RLIMIT_CPU, static_cast<rlim_t>(std::ceil(std::max(limits.cpu_seconds, 1.0))), "RLIMIT_CPU");
  // Past RLIMIT_FSIZE a write must fail, not kill the runner with SIGXFSZ.
  ::signal(SIGXFSZ, SIG_IGN);
  state->capabilities_dropped = drop_capabilities(state);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("PR_SET_NO_NEW_PRIVS", errno);
  state->no_new_privs = true;
  install_sigsys_reporter();
  FileConfinement c = confine_file_writes(writable_files, device_ioctl_files);
  state->landlock = c.applied ? "ABI " + std::to_string(c.abi) : "not applied: " + c.why_not;
  const bool writes_confined = c.applied && !writable_files.empty();
  if (writes_confined) {
    state->file_writes = "landlock ABI " + std::to_string(c.abi) + ": only";
    for (const auto& path : c.writable) state->file_writes += " " + path;
  } else if (!writable_files.empty()) {
    state->file_writes = "read-only opens";
    state->notes.push_back("file writes not confined by path (" + c.why_not + "); opens stay read-only");
  } else if (!c.applied) {
    state->notes.push_back("Landlock not applied (" + c.why_not + "); the filters alone refuse writable opens");
  }

  Filter running;
  add_running_rules(&running, extra_syscalls, writes_confined);
  g_running_program = running.export_program();

  Filter loading;
  add_running_rules(&loading, extra_syscalls, writes_confined);
  add_loading_rules(&loading);
  loading.load();
  state->loading_filter = true;
}

void enter_running_phase(const SandboxLimits& limits, SandboxState* state) {
  uint64_t limit = current_address_space() + limits.memory_bytes;
  set_limit(RLIMIT_AS, limit, "RLIMIT_AS");
  state->address_space_limit = limit;
  sock_fprog prog{static_cast<unsigned short>(g_running_program.size()), g_running_program.data()};
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) fail("seccomp(running filter)", errno);
  state->running_filter = true;
}

}  // namespace kforge::runner
