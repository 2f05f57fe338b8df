// CI checks of the CUDA exploit candidates (no GPU needed): each compiles
// with the real nvcc through the CompileService (an exploit that does not
// compile would prove nothing), and load-time inspection gives the verdict
// expectations.json records: the named violation for the classes caught
// before anything loads (forbidden libraries and symbols, raw system calls,
// load-time code), acceptance for the classes only the run-time checks can
// catch (so that the GPU suite really exercises those checks).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <set>

#include "judge/elf_inspector.h"
#include "judge/symbol_policy.h"
#include "corpus.h"
#include "kforge/core/op_registry.h"

namespace kforge::corpus {
namespace {

bool has_check(const std::vector<Violation>& violations, const std::string& check) {
  for (const auto& v : violations) {
    if (v.check == check) return true;
  }
  return false;
}

class CudaExploit : public ::testing::TestWithParam<Exploit> {};

TEST_P(CudaExploit, CompilesAndMeetsItsLoadTimeExpectation) {
  const Exploit& e = GetParam();
  const TaskSpec task = load_task(e.task);
  const env::CompileResult r = compile_cuda(e.file, task);
  ASSERT_TRUE(r.ok) << e.file << "\n" << r.diagnostics << "\n" << r.system_error << "\n" << r.log;

  const judge::ElfInspection inspection =
      judge::inspect_candidate(r.artifact.path, judge::SymbolPolicy::for_backend("cuda", task.libraries));
  const std::string verdict = inspection.accepted ? "accepted" : "refused: " + describe(inspection.violations);
  if (e.load_time.empty()) {
    // Caught only at run time: the object must get past load-time inspection,
    // or the GPU suite would never exercise the run-time defence.
    EXPECT_TRUE(inspection.accepted) << e.name << " (" << e.exploit_class
                                     << ") is meant to reach the run-time checks, but load-time inspection "
                                     << verdict;
    return;
  }
  const bool caught = !inspection.accepted && has_check(inspection.violations, e.load_time);
  if (!e.known_gap.empty()) {
    // A documented gap (docs/threat-model.md) is pinned, not skipped: the day
    // a check closes it, this fails and the table must be updated.
    EXPECT_FALSE(caught) << e.name << " is now refused with " << e.load_time
                         << ": the known gap is closed; drop known_gap from expectations.json";
    return;
  }
  EXPECT_TRUE(caught) << e.name << " (" << e.exploit_class << ") must be refused at load time with `"
                      << e.load_time << "`; load-time inspection " << verdict;
  // A refused object must never be reported as something to run.
  EXPECT_FALSE(inspection.accepted);
}

INSTANTIATE_TEST_SUITE_P(CudaCorpus, CudaExploit, ::testing::ValuesIn(load_exploits()), NameOf());

TEST(CudaCorpusExploits, TableAndDirectoryAgreeAndEveryFileDocumentsItsCatch) {
  const std::vector<Exploit> exploits = load_exploits();
  std::set<std::string> listed;
  for (const auto& e : exploits) {
    EXPECT_TRUE(listed.insert(e.file.filename().string()).second) << "listed twice: " << e.file;
    ASSERT_TRUE(std::filesystem::is_regular_file(e.file)) << e.file;
    ASSERT_TRUE(std::filesystem::is_regular_file(e.task)) << e.task;
    std::ifstream in(e.file);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.rfind("// Exploit:", 0), 0u) << e.file << " must start with a comment naming the exploit";
    EXPECT_NE(text.find("Must be caught by:"), std::string::npos) << e.file << " must say which check catches it";
    // The load-time verdict and the expected end states agree.
    if (!e.load_time.empty()) {
      ASSERT_EQ(e.expect.size(), 1u) << e.name;
      EXPECT_EQ(e.expect[0].outcome, "rejected") << e.name;
      EXPECT_EQ(e.expect[0].violation, e.load_time) << e.name;
    }
    for (const auto& a : e.expect) {
      EXPECT_TRUE(a.outcome == "rejected" || a.outcome == "violation" || a.outcome == "wrong" || a.outcome == "crash" ||
                  a.outcome == "runtime_error" || a.outcome == "timeout" ||
                  (a.outcome == "correct" && a.max_speedup_eager.has_value()))
          << e.name << ": an exploit may end as " << a.outcome << " only as a no-gain alternative";
    }
  }
  for (const auto& entry : std::filesystem::directory_iterator(exploit_dir())) {
    if (entry.path().extension() == ".cu") {
      EXPECT_TRUE(listed.count(entry.path().filename().string())) << entry.path() << " is not in expectations.json";
    }
  }
}

TEST(CudaCorpusExploits, ExploitTasksParseAndTypeCheck) {
  std::set<std::filesystem::path> tasks;
  for (const auto& e : load_exploits()) tasks.insert(e.task);
  for (const auto& path : tasks) {
    const TaskSpec task = load_task(path);
    EXPECT_NO_THROW(infer_graph(task)) << path;
    for (size_t v = 0; v < task.shape_variants.size(); ++v) {
      EXPECT_NO_THROW(infer_graph(task.with_variant(v))) << path << " variant " << v;
    }
  }
}

}  // namespace
}  // namespace kforge::corpus
