// The runner's seccomp filters and Landlock confinement, exercised directly
// in a forked child: a device's "!name" extra fails that call with EPERM and
// the process carries on, while a call outside every list still stops it
// with SIGSYS; a device's writable files are the only ones it can open for
// writing. (The runner end to end is in runner_sandbox_test.cpp.)
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "kforge/core/remove_tree.h"
#include "runner/landlock.h"
#include "runner/sandbox.h"

namespace kforge::runner {
namespace {

// Runs `body` in a child that entered both sandbox phases with `extras`;
// returns the child's wait status.
template <typename Body>
int in_sandbox(const std::vector<std::string>& extras, Body body, const std::vector<std::string>& writable = {}) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    SandboxState state;
    SandboxLimits limits;
    limits.open_files = 64;
    enter_loading_phase(limits, extras, writable, &state);
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

// A directory with two files, `granted` and `other`, removed afterwards.
class TwoFiles {
 public:
  TwoFiles() : dir_(std::filesystem::temp_directory_path() / ("kforge-landlock-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(dir_);
    std::ofstream(granted()) << "granted";
    std::ofstream(other()) << "other";
  }
  ~TwoFiles() { kforge::remove_tree(dir_); }
  std::string granted() const { return (dir_ / "granted").string(); }
  std::string other() const { return (dir_ / "other").string(); }
  std::string created() const { return (dir_ / "created").string(); }

 private:
  std::filesystem::path dir_;
};

// Exit codes of the confined child: which step went wrong.
enum : int { kConfined = 7, kGrantedNotWritable = 1, kOtherWritable = 2, kCreated = 3, kRemoved = 4 };

int write_through_confinement(const TwoFiles& files) {
  const int fd = static_cast<int>(::syscall(SYS_openat, AT_FDCWD, files.granted().c_str(), O_WRONLY | O_TRUNC));
  if (fd < 0 || ::write(fd, "w", 1) != 1) return kGrantedNotWritable;
  ::close(fd);
  if (::syscall(SYS_openat, AT_FDCWD, files.other().c_str(), O_WRONLY) >= 0 || errno != EACCES) return kOtherWritable;
  if (::syscall(SYS_openat, AT_FDCWD, files.created().c_str(), O_WRONLY | O_CREAT, 0600) >= 0) return kCreated;
  // Reading anything stays allowed.
  if (::syscall(SYS_openat, AT_FDCWD, files.other().c_str(), O_RDONLY) < 0) return kOtherWritable;
  if (::syscall(SYS_unlinkat, AT_FDCWD, files.other().c_str(), 0) == 0) return kRemoved;
  return kConfined;
}

TEST(SandboxFilterTest, WritableFilesAreTheOnlyOnesOpenedForWriting) {
  TwoFiles files;
  const int status = in_sandbox({"openat", "close", "write", "!unlinkat"},
                                [&] { return write_through_confinement(files); }, {files.granted()});
  const long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, 1 /* LANDLOCK_CREATE_RULESET_VERSION */);
  ASSERT_TRUE(WIFEXITED(status) || abi < 1) << "status " << status;
  if (abi >= 1) {
    EXPECT_EQ(WEXITSTATUS(status), kConfined) << "Landlock ABI " << abi;
    std::ifstream in(files.granted());
    std::string text;
    in >> text;
    EXPECT_EQ(text, "w");
    EXPECT_TRUE(std::filesystem::exists(files.other()));
    EXPECT_FALSE(std::filesystem::exists(files.created()));
  } else {
    // Without Landlock the filter keeps opens read-only: the first writable
    // open stops the child.
    EXPECT_FALSE(WIFEXITED(status)) << "exit " << WEXITSTATUS(status);
  }
}

TEST(SandboxFilterTest, WithConfinedWritesFilesMayBeMappedExecutableButNotAnonymousMemory) {
  TwoFiles files;
  auto map_exec = [&](bool anonymous) {
    return in_sandbox({"mmap", "openat"},
                      [&] {
                        const int fd =
                            anonymous ? -1 : static_cast<int>(::syscall(SYS_openat, AT_FDCWD, "/bin/sh", O_RDONLY));
                        if (!anonymous && fd < 0) return 2;
                        void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_EXEC,
                                         anonymous ? MAP_PRIVATE | MAP_ANONYMOUS : MAP_PRIVATE, fd, 0);
                        return p == MAP_FAILED ? 3 : 7;
                      },
                      {files.granted()});
  };
  const long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, 1 /* LANDLOCK_CREATE_RULESET_VERSION */);
  const int file = map_exec(false);
  const int anonymous = map_exec(true);
  if (abi >= 1) {
    ASSERT_TRUE(WIFEXITED(file)) << "status " << file;
    EXPECT_EQ(WEXITSTATUS(file), 7);
  } else {
    EXPECT_FALSE(WIFEXITED(file) && WEXITSTATUS(file) == 7) << "without Landlock no executable mapping";
  }
  EXPECT_FALSE(WIFEXITED(anonymous) && WEXITSTATUS(anonymous) == 7) << "status " << anonymous;
}

TEST(SandboxFilterTest, ConfinementReportsWhatWasGranted) {
  TwoFiles files;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    FileConfinement c = confine_file_writes({files.granted(), files.granted() + ".missing"});
    const bool ok = c.applied ? c.writable.size() == 1 && c.writable[0] == files.granted() && c.abi >= 1
                              : !c.why_not.empty() && c.writable.empty();
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// Every runner is under Landlock, with nothing writable unless its device
// asks (the timing runners too, not only the profiler's): a second wall
// behind the filters' read-only opens.
TEST(SandboxFilterTest, AnEmptyGrantLeavesNothingWritableButEverythingReadable) {
  TwoFiles files;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    FileConfinement c = confine_file_writes({}, {"/dev/null"});
    if (!c.applied) ::_exit(9);
    if (::open(files.other().c_str(), O_WRONLY) >= 0 || errno != EACCES) ::_exit(kOtherWritable);
    if (::open(files.created().c_str(), O_WRONLY | O_CREAT, 0600) >= 0) ::_exit(kCreated);
    if (::unlink(files.other().c_str()) == 0) ::_exit(kRemoved);
    if (::open(files.other().c_str(), O_RDONLY) < 0) ::_exit(kGrantedNotWritable);
    ::_exit(kConfined);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  const long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, 1 /* LANDLOCK_CREATE_RULESET_VERSION */);
  EXPECT_EQ(WEXITSTATUS(status), abi >= 1 ? kConfined : 9);
  EXPECT_TRUE(std::filesystem::exists(files.other()));
  EXPECT_FALSE(std::filesystem::exists(files.created()));
}

TEST(SandboxFilterTest, EveryRunnerReportsItsLandlockState) {
  // Asked here: the child's filters refuse the call once they exist.
  const long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, 1 /* LANDLOCK_CREATE_RULESET_VERSION */);
  const pid_t pid = ::fork();
  if (pid == 0) {
    SandboxState state;
    SandboxLimits limits;
    enter_loading_phase(limits, {}, {}, &state);
    const bool ok = abi >= 1 ? state.landlock == "ABI " + std::to_string(abi) && state.file_writes == "none"
                             : state.landlock.rfind("not applied: ", 0) == 0;
    ::_exit(ok ? 7 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 7);
}

}  // namespace
}  // namespace kforge::runner
