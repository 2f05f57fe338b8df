// The crash handler linked into every test binary (crash_backtrace.cpp) on a
// real SIGSEGV in a function without unwind tables: it must print the
// faulting frame and its caller, each resolvable with addr2line.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

extern "C" int kforge_test_crash_here(volatile int* p);

extern "C" __attribute__((noinline)) int kforge_test_call_the_crash() {
  volatile int* nowhere = nullptr;
  const int r = kforge_test_crash_here(nowhere);
  return r + 1;  // not a tail call: this frame stays on the stack
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
  const std::string command = "addr2line -f -C -e '" + f.module + "' " + f.offset + " 2>&1";
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return "";
  char buf[4096] = {};
  std::string out;
  while (std::fgets(buf, sizeof(buf), p) != nullptr) out += buf;
  ::pclose(p);
  return out.substr(0, out.find('\n'));
}

TEST(CrashBacktrace, PrintsTheFaultingFrameAndItsCallersResolvableWithAddr2line) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::close(pipe_fds[0]);
    kforge_test_call_the_crash();
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << text;
  EXPECT_EQ(WTERMSIG(status), SIGSEGV) << text;
  EXPECT_NE(text.find("killed by signal 11 (Segmentation fault) at address 0x0"), std::string::npos) << text;

  const std::vector<Frame> frames = frames_of(text);
  ASSERT_FALSE(frames.empty()) << text;
  EXPECT_EQ(frames[0].how, "faulting instruction");
  EXPECT_EQ(addr2line_function(frames[0]), "kforge_test_crash_here") << text;
  // The unwinder stops at a function without unwind tables; the stack scan
  // finds the caller.
  bool caller = false;
  for (size_t i = 1; i < frames.size(); ++i) {
    caller |= frames[i].how == "scanned" && addr2line_function(frames[i]) == "kforge_test_call_the_crash";
  }
  EXPECT_TRUE(caller) << text;
}

}  // namespace
