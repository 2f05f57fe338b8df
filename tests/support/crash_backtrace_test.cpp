// The crash handler linked into every test binary (crash_backtrace.cpp) on a
// real SIGSEGV in a function without unwind tables: it must print the
// faulting frame and its caller, each resolvable with addr2line.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "kforge/core/process.h"

extern "C" int kforge_test_crash_here(volatile int* p);

extern "C" __attribute__((noinline)) int kforge_test_call_the_crash() {
  volatile int* nowhere = nullptr;
  const int r = kforge_test_crash_here(nowhere);
  return r + 1;  // not a tail call: this frame stays on the stack
}

// What SynthGpuTest hit on the H200: a call through a null function pointer
// (libtorch's interposed std::filesystem::remove_all), so the faulting "frame"
// is address 0 and only the stack holds the caller.
using Callback = int (*)(int);
extern "C" __attribute__((noinline)) int kforge_test_call_null(Callback volatile* f) {
  const int r = (*f)(1);
  return r + 1;
}

namespace {

struct Frame {
  std::string module, offset, how;
};

// "  #N 0xPC MODULE(+0xOFFSET) ... [how]"
std::vector<Frame> frames_of(const std::string& text) {
  std::vector<Frame> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("  #", 0) != 0) continue;
    const size_t open = line.find("(+0x"), close = line.find(')', open);
    const size_t first_space = line.find(' ', 3), second_space = line.find(' ', first_space + 1);
    const size_t how = line.rfind('[');
    if (open == std::string::npos || close == std::string::npos || how == std::string::npos) continue;
    out.push_back({line.substr(second_space + 1, open - second_space - 1), line.substr(open + 2, close - open - 2),
                   line.substr(how + 1, line.size() - how - 2)});
  }
  return out;
}

std::string addr2line_function(const Frame& f) {
  const std::filesystem::path addr2line = kforge::find_on_path("addr2line");
  if (addr2line.empty()) return "";
  const kforge::ProcessResult r = kforge::run_process({addr2line.string(), "-f", "-C", "-e", f.module, f.offset});
  return r.output.substr(0, r.output.find('\n'));
}

// Runs `crash` in a child whose stderr is captured; returns what the
// handler printed and the signal that ended the child (0: none).
template <typename F>
std::string crash_report(F crash, int* signal) {
  *signal = 0;
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return "pipe failed";
  const pid_t pid = ::fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::close(pipe_fds[0]);
    crash();
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  if (::waitpid(pid, &status, 0) == pid && WIFSIGNALED(status)) *signal = WTERMSIG(status);
  return text;
}

bool has_scanned_caller(const std::vector<Frame>& frames, const std::string& function) {
  for (const Frame& f : frames) {
    if (f.how == "scanned" && addr2line_function(f) == function) return true;
  }
  return false;
}

TEST(CrashBacktrace, PrintsTheFaultingFrameAndItsCallersResolvableWithAddr2line) {
  int signal = 0;
  const std::string text = crash_report([] { kforge_test_call_the_crash(); }, &signal);
  EXPECT_EQ(signal, SIGSEGV) << text;
  EXPECT_NE(text.find("killed by signal 11 (Segmentation fault) at address 0x0"), std::string::npos) << text;

  const std::vector<Frame> frames = frames_of(text);
  ASSERT_FALSE(frames.empty()) << text;
  EXPECT_EQ(frames[0].how, "faulting instruction");
  EXPECT_EQ(addr2line_function(frames[0]), "kforge_test_crash_here") << text;
  // The unwinder stops at a function without unwind tables; the stack scan
  // finds the caller.
  EXPECT_TRUE(has_scanned_caller(frames, "kforge_test_call_the_crash")) << text;
}

TEST(CrashBacktrace, ACallThroughANullPointerNamesTheCaller) {
  int signal = 0;
  const std::string text = crash_report(
      [] {
        Callback volatile f = nullptr;
        kforge_test_call_null(&f);
      },
      &signal);
  EXPECT_EQ(signal, SIGSEGV) << text;
  EXPECT_NE(text.find("#0 0x0 ?? (no loaded module) [faulting instruction]"), std::string::npos) << text;
  // The scan reads the whole stack through process_vm_readv: it ends at the
  // mapping's end without a second fault, and the report is complete.
  EXPECT_TRUE(has_scanned_caller(frames_of(text), "kforge_test_call_null")) << text;
}

}  // namespace
