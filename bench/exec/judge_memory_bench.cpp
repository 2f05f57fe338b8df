// The judge's resident memory across many evaluations over tasks of mixed
// size (docs/execution.md#the-judges-memory: a judge that never gave memory
// back after a huge task starved every env on the device). Every
// evaluation is a real one through the Executor (CPU backend, production
// verification: 5 seeds, two runs each): mostly small tasks, and every
// `KFORGE_BENCH_BIG_EVERY`-th one a large task whose tensors alone take
// hundreds of MiB. After each, the judge's resident set is read from its
// health reply.
//
// Two runs in the same process, same sequence:
//   bounded   the default memory bound (trim above 1 GiB, retire above 4 GiB)
//   baseline  no bound (the judge keeps every freed byte, as before), over
//             the first KFORGE_BENCH_BASELINE_EVALS evaluations
// Printed: resident memory after the first evaluation, the largest after any
// evaluation, after the last, and the ratios of those to the first.
//
//   bench_judge_memory                     # 1000 evaluations (a few minutes)
//   KFORGE_BENCH_EVALS=200 bench_judge_memory
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "chain_candidate.h"
#include "kforge/core/document.h"
#include "kforge/env/executor.h"

namespace {

std::filesystem::path build_candidate() { return kforge::bench::build_chain_candidate("memory_chain"); }

kforge::TaskSpec chain_task(int64_t n) {
  kforge::json j = {{"id", "bench/memory_chain_" + std::to_string(n)},
                    {"inputs",
                     {{{"name", "x"}, {"shape", {n}}, {"dtype", "float32"}},
                      {{"name", "y"}, {"shape", {n}}, {"dtype", "float32"}},
                      {{"name", "z"}, {"shape", {n}}, {"dtype", "float32"}}}},
                    {"nodes",
                     {{{"op", "mul"}, {"in", {"x", "y"}}, {"out", "t0"}},
                      {{"op", "add"}, {"in", {"t0", "z"}}, {"out", "t1"}},
                      {{"op", "relu"}, {"in", {"t1"}}, {"out", "out"}}}},
                    {"outputs", {"out"}}};
  return kforge::parse_task(kforge::Document::from_value(j, "<bench>"));
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::max(1, std::atoi(v)) : fallback;
}

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

struct Run {
  uint64_t first = 0, peak = 0, last = 0;
  int failures = 0, trims = 0, restarts = 0, evaluations = 0;
};

// Small tasks cycle through 2^12..2^18 elements; every big_every-th is 2^big_log2.
Run run(const kforge::env::ExecutorConfig& config, int evaluations, int big_every, int big_log2,
        const std::filesystem::path& so) {
  std::unique_ptr<kforge::env::Executor> ex = kforge::env::make_executor(config);
  ex->device_name();
  Run r;
  for (int i = 0; i < evaluations; ++i) {
    const bool big = (i + 1) % big_every == 0;
    kforge::env::EvalRequest req;
    req.task = chain_task(big ? int64_t{1} << big_log2 : int64_t{1} << (12 + i % 7));
    req.artifact.mode = kforge::SolutionMode::kCpp;
    req.artifact.path = so;
    req.verify = true;
    req.options.eval_timeout_ms = 600000;
    kforge::env::EvalReport report = ex->submit(req).get();
    if (!report.correct()) {
      ++r.failures;
      std::fprintf(stderr, "evaluation %d: %s\n", i, report.summary.c_str());
    }
    const kforge::json h = ex->health();
    const uint64_t rss = h.value("memory", kforge::json::object()).value("rss_bytes", uint64_t{0});
    r.trims = h.value("memory", kforge::json::object()).value("trims", 0);
    if (i == 0) r.first = rss;
    r.peak = std::max(r.peak, rss);
    r.last = rss;
    ++r.evaluations;
    if ((i + 1) % 100 == 0) {
      std::fprintf(stderr, "  %d evaluations, judge resident %.0f MiB\n", i + 1, mib(rss));
    }
  }
  r.restarts = ex->restarts();
  return r;
}

void print(const char* name, const Run& r) {
  std::printf(
      "%-9s %5d evals  first %7.0f MiB  max after an eval %7.0f MiB (%5.2fx first)  last %7.0f MiB "
      "(%5.2fx first)  trims %d  judge restarts %d  failures %d\n",
      name, r.evaluations, mib(r.first), mib(r.peak), static_cast<double>(r.peak) / r.first, mib(r.last),
      static_cast<double>(r.last) / r.first, r.trims, r.restarts, r.failures);
}

}  // namespace

int main() {
  const int evaluations = env_int("KFORGE_BENCH_EVALS", 1000);
  const int baseline_evaluations = env_int("KFORGE_BENCH_BASELINE_EVALS", 100);
  const int big_every = env_int("KFORGE_BENCH_BIG_EVERY", 50);
  const int big_log2 = env_int("KFORGE_BENCH_BIG_LOG2", 24);
  const std::filesystem::path so = build_candidate();
  std::printf("tasks: elementwise chain of 2^12..2^18 elements, every %dth of 2^%d (%.0f MiB per tensor)\n", big_every,
              big_log2, mib((uint64_t{1} << big_log2) * 4));

  kforge::env::ExecutorConfig bounded;  // the defaults
  std::fprintf(stderr, "bounded run:\n");
  const Run b = run(bounded, evaluations, big_every, big_log2, so);

  kforge::env::ExecutorConfig unbounded;
  unbounded.judge_trim_above_bytes = ~uint64_t{0} >> 1;
  unbounded.judge_retire_above_bytes = ~uint64_t{0} >> 1;
  std::fprintf(stderr, "baseline run (no bound):\n");
  const Run u = run(unbounded, std::min(baseline_evaluations, evaluations), big_every, big_log2, so);

  std::printf("bound: trim above %.0f MiB, retire above %.0f MiB\n", mib(bounded.judge_trim_above_bytes),
              mib(bounded.judge_retire_above_bytes));
  print("bounded", b);
  print("baseline", u);
  std::printf("last after %d evaluations, bounded vs baseline after %d: %.2fx\n", b.evaluations, u.evaluations,
              static_cast<double>(b.last) / u.last);
  return b.failures + u.failures == 0 ? 0 : 1;
}
