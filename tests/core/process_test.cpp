// run_process with real programs (/bin/sh, /bin/echo, yes, sleep): exit
// codes, signals, deadlines that kill the whole tree, bounded output, files,
// environment and working directory, and arguments that a shell would have
// interpreted passed as they are.
#include "kforge/core/process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "kforge/core/error.h"
#include "kforge/core/remove_tree.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "kforge-process-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw SystemError("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() { remove_tree(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Dead means gone or a zombie waiting for init; either way not running.
bool process_running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z' && line[close + 2] != 'X';
}

TEST(RunProcess, CapturesStdoutAndStderrInterleavedAndTheExitCode) {
  const ProcessResult r = run_process({"/bin/sh", "-c", "echo out; echo err >&2; echo more; exit 3"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.term_signal, 0);
  EXPECT_FALSE(r.timed_out);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.output, "out\nerr\nmore\n");  // one pipe: the order they were written in
  EXPECT_TRUE(r.error_output.empty());
  EXPECT_GT(r.wall_ms, 0.0);
}

TEST(RunProcess, ExitCodeZeroIsOk) {
  const ProcessResult r = run_process({"/bin/true"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(run_process({"/bin/sh", "-c", "exit 255"}).exit_code, 255);
}

TEST(RunProcess, SeparatesStderrWhenAsked) {
  ProcessOptions options;
  options.separate_stderr = true;
  const ProcessResult r = run_process({"/bin/sh", "-c", "echo out; echo err >&2"}, options);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.output, "out\n");
  EXPECT_EQ(r.error_output, "err\n");
}

TEST(RunProcess, ReportsTheSignalThatEndedIt) {
  const ProcessResult r = run_process({"/bin/sh", "-c", "kill -TERM $$"});
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_EQ(r.term_signal, SIGTERM);
  EXPECT_FALSE(r.timed_out);
  EXPECT_FALSE(r.ok());
}

TEST(RunProcess, ChildGetsDefaultSignalHandlingWhateverWeIgnore) {
  // An embedding program that ignores SIGTERM must not hand that to a
  // compiler it starts: the child gets default dispositions.
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGTERM, &ignore, &old), 0);
  const ProcessResult r = run_process({"/bin/sh", "-c", "kill -TERM $$; exit 7"});
  ::sigaction(SIGTERM, &old, nullptr);
  EXPECT_EQ(r.term_signal, SIGTERM);
}

TEST(RunProcess, PassesArgumentsLiterallyWithoutAShell) {
  TempDir dir;
  const fs::path marker = dir.path() / "marker";
  // Each of these would run a command or expand in a shell.
  const std::vector<std::string> args = {"a;touch " + marker.string(),
                                         "$(touch " + marker.string() + ")",
                                         "`touch " + marker.string() + "`",
                                         "$HOME",
                                         "'q' \"d\"",
                                         "x > y",
                                         "*"};
  std::vector<std::string> argv = {"/bin/echo"};
  argv.insert(argv.end(), args.begin(), args.end());
  const ProcessResult r = run_process(argv);
  ASSERT_TRUE(r.ok()) << r.output;
  std::string expected;
  for (const auto& a : args) expected += (expected.empty() ? "" : " ") + a;
  EXPECT_EQ(r.output, expected + "\n");
  EXPECT_FALSE(fs::exists(marker));
  EXPECT_FALSE(fs::exists(dir.path() / "y"));
}

TEST(RunProcess, AppliesCwdAndEnvironmentOverrides) {
  TempDir dir;
  ::setenv("KFORGE_PROCESS_TEST_DROP", "present", 1);
  ProcessOptions options;
  options.cwd = dir.path();
  options.env["KFORGE_PROCESS_TEST_SET"] = "value";
  options.env["KFORGE_PROCESS_TEST_DROP"] = std::nullopt;
  const ProcessResult r = run_process(
      {"/bin/sh", "-c", "pwd; echo set=$KFORGE_PROCESS_TEST_SET; echo drop=${KFORGE_PROCESS_TEST_DROP:-gone}"},
      options);
  ::unsetenv("KFORGE_PROCESS_TEST_DROP");
  ASSERT_TRUE(r.ok()) << r.output;
  EXPECT_EQ(r.output, fs::canonical(dir.path()).string() + "\nset=value\ndrop=gone\n");
}

TEST(RunProcess, StdinIsEmpty) {
  const ProcessResult r = run_process({"/bin/sh", "-c", "cat; echo end"});
  EXPECT_EQ(r.output, "end\n");
}

TEST(RunProcess, TimeoutKillsTheWholeProcessTreeAndLeavesNoZombie) {
  TempDir dir;
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
  for (int i = 0; i < 500 && process_running(grandchild); ++i) ::usleep(10000);
  EXPECT_FALSE(process_running(grandchild));
  // Our child was reaped: nothing is left for us to wait for.
  errno = 0;
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(RunProcess, TimeoutAlsoEndsAChildThatClosedItsOutput) {
  ProcessOptions options;
  options.timeout_s = 0.3;
  const ProcessResult r = run_process({"/bin/sh", "-c", "exec >&- 2>&-; sleep 60"}, options);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.term_signal, SIGKILL);
}

TEST(RunProcess, NoDeadlineWaitsForTheEnd) {
  ProcessOptions options;
  options.timeout_s = std::numeric_limits<double>::infinity();
  const ProcessResult r = run_process({"/bin/sh", "-c", "sleep 0.2; echo done"}, options);
  EXPECT_TRUE(r.ok());
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.output, "done\n");
}

TEST(RunProcess, OutputBeyondTheBoundIsDroppedAndTheChildFinishes) {
  ProcessOptions options;
  options.max_output_bytes = 1000;
  const ProcessResult r = run_process({"/bin/sh", "-c", "yes x | head -c 100000; exit 4"}, options);
  EXPECT_EQ(r.exit_code, 4);  // it ran to its end
  EXPECT_TRUE(r.output_truncated);
  std::string kept;
  for (int i = 0; i < 500; ++i) kept += "x\n";
  EXPECT_EQ(r.output.substr(0, 1000), kept);
  EXPECT_EQ(r.output.substr(1000), "\n[output truncated at 1000 bytes]\n");
}

TEST(RunProcess, EndlessOutputWithKillOnOverflowStopsAtTheBound) {
  ProcessOptions options;
  options.max_output_bytes = 1 << 20;
  options.kill_on_overflow = true;
  options.separate_stderr = true;
  options.timeout_s = 60;  // far beyond what the test takes: the bound ends it
  const ProcessResult r = run_process({"/usr/bin/yes"}, options);
  EXPECT_TRUE(r.output_truncated);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_EQ(r.output.size(), size_t{1} << 20);  // no marker: the caller decides what to say
}

TEST(RunProcess, StderrIsBoundedOnItsOwn) {
  ProcessOptions options;
  options.max_output_bytes = 100;
  options.separate_stderr = true;
  const ProcessResult r = run_process({"/bin/sh", "-c", "echo small; yes e | head -c 5000 >&2"}, options);
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.output_truncated);
  EXPECT_EQ(r.error_output.size(), 100u);
  EXPECT_EQ(r.output.substr(0, 6), "small\n");
}

TEST(RunProcess, WritesOutputToAFileWhenAsked) {
  TempDir dir;
  const fs::path log = dir.path() / "run.log";
  {
    std::ofstream old(log);
    old << "stale text that must go\n";
  }
  ProcessOptions options;
  options.output_file = log;
  const ProcessResult r = run_process({"/bin/sh", "-c", "echo out; echo err >&2; exit 2"}, options);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.output.empty());
  EXPECT_EQ(read_file(log), "out\nerr\n");
}

TEST(RunProcess, WhatCannotStartIsASystemError) {
  EXPECT_THROW(run_process({"/nonexistent/compiler", "--version"}), SystemError);
  EXPECT_THROW(run_process({}), SystemError);
  ProcessOptions bad_cwd;
  bad_cwd.cwd = "/nonexistent/dir";
  EXPECT_THROW(run_process({"/bin/true"}, bad_cwd), SystemError);
  ProcessOptions bad_file;
  bad_file.output_file = "/nonexistent/dir/log";
  EXPECT_THROW(run_process({"/bin/true"}, bad_file), SystemError);
  try {
    run_process({"/nonexistent/compiler"});
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/compiler"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos) << e.what();
  }
  // No zombie left by the failed starts.
  errno = 0;
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(RunProcess, NameWithoutASlashIsNotSearchedOnPath) {
  // argv[0] is a path: "sh" means ./sh, which is not here.
  EXPECT_THROW(run_process({"sh", "-c", "true"}), SystemError);
}

TEST(FindOnPath, FindsExecutablesAndOnlyThose) {
  EXPECT_TRUE(find_on_path("kforge-no-such-program-xyz").empty());
  EXPECT_FALSE(find_on_path("sh").empty());
  EXPECT_EQ(find_on_path("/bin/sh"), fs::path("/bin/sh"));
  TempDir dir;
  std::ofstream(dir.path() / "plain") << "text";
  EXPECT_TRUE(find_on_path((dir.path() / "plain").string()).empty());  // a file, not executable
  EXPECT_TRUE(find_on_path("").empty());
}

TEST(LastLines, KeepsTheTailFromTheNthLineFromTheEnd) {
  EXPECT_EQ(last_lines("a\nb\nc\nd", 2), "c\nd");
  EXPECT_EQ(last_lines("a\nb\nc\n", 2), "c\n");  // the final newline ends the last line
  EXPECT_EQ(last_lines("one line", 3), "one line");
  EXPECT_EQ(last_lines("", 3), "");
}

}  // namespace
}  // namespace kforge
