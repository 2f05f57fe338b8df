// kforge-runner driven directly through RunnerProcess, without the judge and
// without the ELF check in front of it: the sandbox must stand on its own.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "candidates.h"
#include "judge/arena_layout.h"
#include "judge/runner_process.h"
#include "test_support.h"

namespace kforge::runner {
namespace {

namespace cand = testing::candidates;
using Status = judge::RunnerReply::Status;

constexpr int64_t kN = 1000;  // float32 elements per tensor

// A runner with the chain task's four tensors (x, y, z, out) in a memfd arena
// that the test maps too.
class RunnerHarness {
 public:
  RunnerHarness() {
    judge::RunnerProcess::Config config;
    config.executable = std::filesystem::path(KFORGE_BINARY_DIR) / "bin" / "kforge-runner";
    config.scratch_root = std::filesystem::path(KFORGE_BINARY_DIR) / "tests" / "exec" / "runner-scratch";
    runner = judge::RunnerProcess::spawn(config);
    layout =
        judge::plan_arena(std::vector<uint64_t>(4, kN * sizeof(float)), static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)));
    arena.reset(::memfd_create("runner-test", MFD_CLOEXEC));
    EXPECT_EQ(::ftruncate(arena.get(), static_cast<off_t>(layout.size)), 0);
    base = static_cast<char*>(::mmap(nullptr, layout.size, PROT_READ | PROT_WRITE, MAP_SHARED, arena.get(), 0));
  }
  ~RunnerHarness() {
    runner.reset();
    ::munmap(base, layout.size);
  }

  float* tensor(size_t slot) { return reinterpret_cast<float*>(base + layout.data_offset(slot, kN * sizeof(float))); }

  judge::RunnerReply setup(const std::filesystem::path& so) { return setup(judge::RunnerCandidate::shared_object(so)); }
  judge::RunnerReply setup(const judge::RunnerCandidate& candidate) {
    json guards = json::array();
    for (const auto& [off, len] : layout.guards) guards.push_back({off, len});
    judge::RunnerLimits limits;
    limits.memory_bytes = 256ull << 20;
    limits.cpu_seconds = 30;
    return runner->setup(candidate, limits, {{"kind", "memfd"}, {"bytes", layout.size}, {"guards", guards}},
                         {arena.get()}, ipc::Deadline::after_ms(10000));
  }

  judge::RunnerReply bind() {
    auto desc = [&](size_t slot) {
      return json{{"offset", layout.data_offset(slot, kN * sizeof(float))},
                  {"nbytes", kN * sizeof(float)},
                  {"dtype", 0},
                  {"shape", {kN}},
                  {"stride", {1}}};
    };
    return runner->bind(json::array({desc(0), desc(1), desc(2)}), json::array({desc(3)}),
                        ipc::Deadline::after_ms(5000));
  }

  // setup + bind, asserting both work; then one call.
  judge::RunnerReply load_and_call(const char* source, double call_ms = 5000) {
    judge::RunnerReply ready = setup(testing::compile_candidate(source));
    EXPECT_TRUE(ready.ok()) << judge::runner_status_name(ready.status) << ": " << ready.detail;
    if (!ready.ok()) return ready;
    judge::RunnerReply bound = bind();
    EXPECT_TRUE(bound.ok()) << bound.detail;
    return runner->call(false, ipc::Deadline::after_ms(call_ms));
  }

  std::unique_ptr<judge::RunnerProcess> runner;
  judge::ArenaLayout layout;
  UniqueFd arena;
  char* base = nullptr;
};

TEST(RunnerSandbox, ComputesInSharedMemory) {
  RunnerHarness h;
  for (int64_t i = 0; i < kN; ++i) {
    h.tensor(0)[i] = static_cast<float>(i % 7) - 3;
    h.tensor(1)[i] = 2;
    h.tensor(2)[i] = 1;
    h.tensor(3)[i] = -42;
  }
  judge::RunnerReply r = h.load_and_call(cand::kChainCorrect);
  ASSERT_TRUE(r.ok()) << r.detail;
  EXPECT_EQ(r.body["rc"], 0);
  for (int64_t i = 0; i < kN; ++i) {
    float v = (static_cast<float>(i % 7) - 3) * 2 + 1;
    ASSERT_EQ(h.tensor(3)[i], v > 0 ? v : 0) << i;
  }
  EXPECT_LE(r.body["self_ns"].get<double>() / 1e6, r.round_trip_ms);
  judge::RunnerReply null_call = h.runner->call(true, ipc::Deadline::after_ms(5000));
  ASSERT_TRUE(null_call.ok());
  EXPECT_EQ(null_call.body["rc"], 0);
}

TEST(RunnerSandbox, ReportsWhatWasApplied) {
  RunnerHarness h;
  judge::RunnerReply ready = h.setup(testing::compile_candidate(cand::kChainCorrect));
  ASSERT_TRUE(ready.ok()) << ready.detail;
  const json& s = ready.body["sandbox"];
  EXPECT_TRUE(s["seccomp"].get<bool>());
  EXPECT_TRUE(s["no_new_privs"].get<bool>());
  EXPECT_GT(s["address_space_limit"].get<uint64_t>(), 256ull << 20);
  EXPECT_TRUE(s.contains("network"));
  // The CPU runner asks for no writable files: none may be opened for writing.
  EXPECT_EQ(s.value("file_writes", ""), "none");
}

TEST(RunnerSandbox, RawOpenatIsTrapped) {
  RunnerHarness h;
  judge::RunnerReply r = h.load_and_call(cand::kRawOpenat);
  EXPECT_EQ(r.status, Status::kSandbox) << judge::runner_status_name(r.status) << ": " << r.detail;
  EXPECT_EQ(r.syscall, "openat");
  EXPECT_FALSE(h.runner->alive());
}

TEST(RunnerSandbox, RawOpenatReportNamesThePath) {
  RunnerHarness h;
  judge::RunnerReply r = h.load_and_call(cand::kRawOpenat);
  EXPECT_NE(r.detail.find("(/etc/hostname)"), std::string::npos) << r.detail;
}

TEST(RunnerSandbox, SymlinkIsTrappedAndTheReportNamesTheLink) {
  RunnerHarness h;
  judge::RunnerReply r = h.load_and_call(cand::kRawSymlinkat);
  EXPECT_EQ(r.status, Status::kSandbox) << judge::runner_status_name(r.status) << ": " << r.detail;
  EXPECT_EQ(r.syscall, "symlinkat");
  EXPECT_NE(r.detail.find("(/tmp/kforge-link)"), std::string::npos) << r.detail;
  EXPECT_FALSE(std::filesystem::is_symlink("/tmp/kforge-link"));
}

TEST(RunnerSandbox, RawSocketIsTrapped) {
  RunnerHarness h;
  judge::RunnerReply r = h.load_and_call(cand::kRawSocket);
  EXPECT_EQ(r.status, Status::kSandbox) << r.detail;
  EXPECT_EQ(r.syscall, "socket");
}

TEST(RunnerSandbox, LibcFileAccessIsTrapped) {
  // fopen would be refused by the ELF check; here it reaches the kernel.
  RunnerHarness h;
  judge::RunnerReply r = h.load_and_call(cand::kUsesFopen);
  EXPECT_EQ(r.status, Status::kSandbox) << r.detail;
  EXPECT_EQ(r.syscall, "openat");
}

TEST(RunnerSandbox, ThreadCreationIsTrapped) {
  RunnerHarness h;
  judge::RunnerReply r = h.load_and_call(cand::kUsesPthread);
  EXPECT_EQ(r.status, Status::kSandbox) << r.detail;
  // glibc maps the thread stack first, then clone3 (or clone).
  EXPECT_TRUE(r.syscall == "clone3" || r.syscall == "clone" || r.syscall == "mprotect" || r.syscall == "rt_sigaction")
      << r.syscall;
}

TEST(RunnerSandbox, StaticConstructorsRunConfined) {
  RunnerHarness h;
  judge::RunnerReply ready = h.setup(testing::compile_candidate(cand::kConstructorSocket));
  EXPECT_EQ(ready.status, Status::kSandbox) << ready.detail;
  EXPECT_EQ(ready.syscall, "socket");
}

TEST(RunnerSandbox, GuardPageStopsOutOfBoundsWrites) {
  RunnerHarness h;
  judge::RunnerReply r = h.load_and_call(cand::kOutOfBoundsWrite);
  EXPECT_EQ(r.status, Status::kCrashed);
  EXPECT_EQ(r.detail, "SIGSEGV");
}

TEST(RunnerSandbox, HangIsKilledAtTheDeadline) {
  RunnerHarness h;
  pid_t pid = h.runner->pid();
  judge::RunnerReply r = h.load_and_call(cand::kHang, 200);
  EXPECT_EQ(r.status, Status::kTimedOut);
  EXPECT_FALSE(h.runner->alive());
  // Reaped, not a zombie: the pid no longer exists.
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST(RunnerSandbox, AllocationStopsAtTheLimit) {
  RunnerHarness h;
  judge::RunnerReply r = h.load_and_call(cand::kUnboundedAllocation, 20000);
  // std::bad_alloc escapes kf_forward; the runner survives and says so.
  EXPECT_EQ(r.status, Status::kError) << judge::runner_status_name(r.status) << ": " << r.detail;
  EXPECT_EQ(r.detail, "kf_forward threw std::bad_alloc");
  EXPECT_EQ(r.body["stage"], "kf_forward");
  EXPECT_TRUE(h.runner->alive());
  // A plain malloc loop hits the same limit: malloc returns NULL.
  RunnerHarness plain;
  std::string src = std::string("#include <kforge/kernel_abi.h>\n#include <stdlib.h>\n") +
                    "extern \"C\" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {\n"
                    "  for (long total = 0; total < (1L << 40); total += 1 << 20) {\n"
                    "    char* p = (char*)malloc(1 << 20); if (!p) return 12; p[0] = 1; }\n"
                    "  return 0; }\n";
  judge::RunnerReply m = plain.load_and_call(src.c_str(), 20000);
  ASSERT_TRUE(m.ok()) << m.detail;
  EXPECT_EQ(m.body["rc"], 12);
}

TEST(RunnerSandbox, OutputIsCapturedAndScratchRemoved) {
  RunnerHarness h;
  std::string src = std::string("#include <kforge/kernel_abi.h>\n#include <stdio.h>\n") +
                    "extern \"C\" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {\n"
                    "  printf(\"hello from the candidate\\n\"); fprintf(stderr, \"and from stderr\\n\");\n"
                    "  fflush(stdout); return 0; }\n";
  std::filesystem::path scratch = h.runner->scratch_dir();
  EXPECT_TRUE(std::filesystem::is_directory(scratch));
  judge::RunnerReply r = h.load_and_call(src.c_str());
  ASSERT_TRUE(r.ok()) << judge::runner_status_name(r.status) << ": " << r.detail;
  h.runner->terminate();
  std::string out = h.runner->output_tail();
  EXPECT_NE(out.find("hello from the candidate"), std::string::npos) << out;
  EXPECT_NE(out.find("and from stderr"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(scratch));
}

// Blame (docs/threat-model.md, "Who is to blame"): the runner says `loading`
// before the candidate's first instruction can run; failures before it are
// the harness's, after it the candidate's.
TEST(RunnerBlame, SetupMarksWhereTheCandidatesCodeStarts) {
  RunnerHarness h;
  judge::RunnerReply ready = h.setup(testing::compile_candidate(cand::kChainCorrect));
  ASSERT_TRUE(ready.ok()) << ready.detail;
  EXPECT_TRUE(ready.candidate_ran);
  judge::RunnerReply call = h.bind();
  EXPECT_TRUE(call.candidate_ran);
}

TEST(RunnerBlame, ARunnerThatDiedBeforeLoadingIsNotTheCandidates) {
  RunnerHarness h;
  ASSERT_TRUE(h.runner->await_started(ipc::Deadline::after_ms(10000)).ok());
  ::kill(h.runner->pid(), SIGKILL);
  judge::RunnerReply ready = h.setup(testing::compile_candidate(cand::kChainCorrect));
  EXPECT_EQ(ready.status, Status::kCrashed) << ready.detail;
  EXPECT_FALSE(ready.candidate_ran);
}

TEST(RunnerBlame, AnErrorForgedByAConstructorIsAfterLoading) {
  RunnerHarness h;
  // A namespace-scope initializer writes {"type": "error", "seq": 1, ...} to
  // the control socket while the runner loads it.
  std::string src =
      std::string("#include <kforge/kernel_abi.h>\n#include <stdio.h>\n") +
      "static int forge() {\n"
      "  static const unsigned char f[] = {30,0,0,0, 0x83, 0xa4,'t','y','p','e', 0xa5,'e','r','r','o','r',\n"
      "    0xa3,'s','e','q', 0x01, 0xa7,'m','e','s','s','a','g','e', 0xa4,'f','a','k','e'};\n"
      "  fputc('\\n', stdout); fflush(stdout); int s = stdout->_fileno; stdout->_fileno = 3;\n"
      "  fwrite(f, 1, sizeof(f), stdout); fflush(stdout); stdout->_fileno = s; return 1; }\n"
      "static int g_forged = forge();\n"
      "extern \"C\" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) { return g_forged; }\n";
  judge::RunnerReply ready = h.setup(testing::compile_candidate(src.c_str()));
  // The forged error lacks its `stage`: not even a well-formed error.
  EXPECT_EQ(ready.status, Status::kProtocol) << judge::runner_status_name(ready.status) << ": " << ready.detail;
  EXPECT_EQ(ready.detail, "an 'error' reply whose field 'stage' is missing");
  EXPECT_TRUE(ready.candidate_ran);
  EXPECT_FALSE(h.runner->alive());
}

TEST(RunnerSandbox, ExitIsACrashWithItsCode) {
  RunnerHarness h;
  judge::RunnerReply r = h.load_and_call(cand::kExit3);
  EXPECT_EQ(r.status, Status::kCrashed);
  EXPECT_EQ(r.detail, "exit code 3");
}

// nvrtc setups reach the runner's CUBIN path: the plan is read and checked
// there, inside the loading phase, and only a device that can load a CUBIN
// (cuda) accepts it. A refused load leaves the runner serving.
TEST(RunnerSandbox, ACubinIsReadInTheLoadingPhaseAndNeedsTheCudaBackend) {
  const std::filesystem::path cubin = std::filesystem::path(KFORGE_BINARY_DIR) / "tests" / "exec" /
                                      ("runner-test-" + std::to_string(::getpid()) + ".cubin");
  std::ofstream(cubin, std::ios::binary) << "not really a cubin";
  const json plan =
      json::parse(R"J({"kernels": [{"name": "add", "lowered_name": "add", "grid": ["cdiv(numel(out), 256)"],
      "block": ["256"], "shared_mem": "0", "args": ["x", "y", "out", "i64(numel(out))"]}]})J");
  const std::vector<std::string> names = {"x", "y", "z", "out"};

  RunnerHarness h;
  judge::RunnerReply r = h.setup(judge::RunnerCandidate::nvrtc(cubin, plan, names));
  EXPECT_EQ(r.status, Status::kError) << judge::runner_status_name(r.status) << ": " << r.detail;
  EXPECT_EQ(r.body.value("stage", ""), "load") << r.body.dump();
  EXPECT_NE(r.detail.find("runs on the cuda backend only"), std::string::npos) << r.detail;
  EXPECT_TRUE(h.runner->alive());

  json unlowered = plan;
  unlowered["kernels"][0].erase("lowered_name");
  RunnerHarness h2;
  judge::RunnerReply r2 = h2.setup(judge::RunnerCandidate::nvrtc(cubin, unlowered, names));
  EXPECT_EQ(r2.status, Status::kError) << judge::runner_status_name(r2.status) << ": " << r2.detail;
  EXPECT_NE(r2.detail.find("kernels[0] (add) has no lowered_name"), std::string::npos) << r2.detail;

  RunnerHarness h3;
  judge::RunnerReply r3 = h3.setup(judge::RunnerCandidate::nvrtc(cubin.string() + ".missing", plan, names));
  EXPECT_EQ(r3.status, Status::kError) << judge::runner_status_name(r3.status) << ": " << r3.detail;
  EXPECT_NE(r3.detail.find("cannot open the CUBIN"), std::string::npos) << r3.detail;
  std::filesystem::remove(cubin);
}

}  // namespace
}  // namespace kforge::runner
