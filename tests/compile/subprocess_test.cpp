#include "kforge/env/compile/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <fstream>

#include "kforge/core/error.h"
#include "test_support.h"

namespace kforge::env {
namespace {

// Dead means gone or a zombie waiting for init; either way not running.
bool process_running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z' && line[close + 2] != 'X';
}

TEST(SubprocessTest, CapturesStdoutAndStderrAndTheExitCode) {
  const ProcessResult r = run_process({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(r.timed_out);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.output.find("out\n"), std::string::npos);
  EXPECT_NE(r.output.find("err\n"), std::string::npos);
}

TEST(SubprocessTest, AppliesCwdAndEnvironmentOverrides) {
  testing::TempDir dir;
  setenv("KFORGE_SUBPROCESS_TEST_DROP", "present", 1);
  ProcessOptions options;
  options.cwd = dir.path();
  options.env["KFORGE_SUBPROCESS_TEST_SET"] = "value";
  options.env["KFORGE_SUBPROCESS_TEST_DROP"] = std::nullopt;
  const ProcessResult r = run_process(
      {"/bin/sh", "-c", "pwd; echo set=$KFORGE_SUBPROCESS_TEST_SET; echo drop=${KFORGE_SUBPROCESS_TEST_DROP:-gone}"},
      options);
  unsetenv("KFORGE_SUBPROCESS_TEST_DROP");
  ASSERT_TRUE(r.ok()) << r.output;
  EXPECT_NE(r.output.find(dir.path().string()), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("set=value"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("drop=gone"), std::string::npos) << r.output;
}

TEST(SubprocessTest, TimeoutKillsTheWholeProcessTreeAndLeavesNoZombie) {
  testing::TempDir dir;
  const std::string pid_file = (dir.path() / "grandchild.pid").string();
  ProcessOptions options;
  options.timeout_s = 0.5;
  // The grandchild keeps our pipe open: only killing the group ends it.
  const ProcessResult r = run_process({"/bin/sh", "-c", "sleep 60 & echo $! > " + pid_file + "; wait"}, options);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_FALSE(r.ok());
  std::ifstream in(pid_file);
  pid_t grandchild = 0;
  ASSERT_TRUE(in >> grandchild);
  // SIGKILL is delivered before kill() returns, but the exit can take a moment
  // to show in /proc: poll briefly rather than assume.
  for (int i = 0; i < 500 && process_running(grandchild); ++i) usleep(10000);
  EXPECT_FALSE(process_running(grandchild));
  // Our child was reaped: nothing is left for us to wait for.
  errno = 0;
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(SubprocessTest, OutputBeyondTheCapIsDropped) {
  ProcessOptions options;
  options.max_output_bytes = 1000;
  const ProcessResult r = run_process({"/bin/sh", "-c", "yes x | head -c 100000"}, options);
  EXPECT_TRUE(r.ok());
  EXPECT_LT(r.output.size(), 1200u);
  EXPECT_NE(r.output.find("[output truncated at 1000 bytes]"), std::string::npos);
}

TEST(SubprocessTest, MissingProgramIsASystemError) {
  EXPECT_THROW(run_process({"/nonexistent/compiler", "--version"}), SystemError);
  EXPECT_TRUE(find_on_path("kforge-no-such-program-xyz").empty());
  EXPECT_FALSE(find_on_path("sh").empty());
}

}  // namespace
}  // namespace kforge::env
