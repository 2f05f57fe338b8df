// The runner's seccomp filters, exercised directly in a forked child: a
// device's "!name" extra fails that call with EPERM and the process carries
// on, while a call outside every list still stops it with SIGSYS. (The
// runner end to end is in runner_sandbox_test.cpp.)
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "runner/sandbox.h"

namespace kforge::runner {
namespace {

// Runs `body` in a child that entered both sandbox phases with `extras`;
// returns the child's wait status.
template <typename Body>
int in_sandbox(const std::vector<std::string>& extras, Body body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    SandboxState state;
    SandboxLimits limits;
    limits.open_files = 64;
    enter_loading_phase(limits, extras, &state);
    enter_running_phase(limits, &state);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(SandboxFilterTest, RefusedCallFailsWithEpermAndTheProcessCarriesOn) {
  const int status = in_sandbox({"!unlink", "!unlinkat"}, [] {
    const long rc = ::syscall(SYS_unlinkat, AT_FDCWD, "/nonexistent-kforge-file", 0);
    return rc == -1 && errno == EPERM ? 7 : 1;
  });
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 7);
}

TEST(SandboxFilterTest, CallOutsideEveryListStillStopsTheProcess) {
  const int status = in_sandbox({}, [] {
    ::syscall(SYS_unlinkat, AT_FDCWD, "/nonexistent-kforge-file", 0);
    return 7;
  });
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 7) << "status " << status;
}

}  // namespace
}  // namespace kforge::runner
