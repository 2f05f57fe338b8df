#include "kforge/data_synth/reach.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <variant>

#include "kforge/core/error.h"
#include "kforge/data_synth/graph_hash.h"
#include "kforge/data_synth/rng.h"

namespace kforge::synth {
namespace {

// Seeds apart from every slot's (slots use derive_seed(seed, {slot, k}) with
// slot < 10^7).
constexpr uint64_t kReachStream = 0x7265616368ull << 24;

}  // namespace

json ReachEstimate::to_json() const {
  return {{"samples", samples},
          {"passed_compose_shapes_contamination", passed},
          {"distinct", distinct},
          {"seen_once", seen_once},
          {"seen_twice", seen_twice},
          {"chao1", chao1},
          {"filter_pass_share", filter_pass_share},
          {"estimate", estimate},
          {"target", kReachTarget},
          {"seconds", seconds},
          {"method",
           "M graphs drawn with their own seeds through compose, shape search and contamination; Chao1 over their "
           "canonical hashes (sizes not hashed), times the share of such graphs the run's filters and judge "
           "accepted; a lower bound in expectation where some graphs are likelier than others"}};
}

ReachEstimate estimate_reach(uint64_t seed, int64_t samples, const ComposeOptions& compose, const ShapeOptions& shapes,
                             const DeviceProfile& profile, const KernelBenchSignatures& signatures, int workers) {
  const auto t0 = std::chrono::steady_clock::now();
  std::atomic<int64_t> next{0};
  std::mutex mu;
  std::map<std::string, int64_t> seen;
  int64_t passed = 0;
  auto work = [&] {
    std::vector<std::string> mine;
    for (int64_t i = next++; i < samples; i = next++) {
      const uint64_t s = derive_seed(seed, {kReachStream, static_cast<uint64_t>(i)});
      try {
        auto sampled = sample_shapes(s, compose, shapes, profile);
        const SampledShapes* ok = std::get_if<SampledShapes>(&sampled);
        if (!ok) continue;
        const NearestProblem n = signatures.judge(ok->task, profile);
        if (!n.problem.empty() && n.distance <= kContaminationThreshold) continue;
        mine.push_back(canonical_graph_hash(ok->task));
      } catch (const InputError&) {
        // compose_invalid: not a task
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    for (auto& h : mine) ++seen[h];
    passed += static_cast<int64_t>(mine.size());
  };
  const int n = workers > 0 ? workers : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back(work);
  for (auto& t : threads) t.join();
  ReachEstimate r;
  r.samples = samples;
  r.passed = passed;
  r.distinct = static_cast<int64_t>(seen.size());
  for (const auto& [h, k] : seen) {
    r.seen_once += k == 1;
    r.seen_twice += k == 2;
  }
  const double f1 = static_cast<double>(r.seen_once), f2 = static_cast<double>(r.seen_twice);
  r.chao1 = static_cast<double>(r.distinct) + f1 * (f1 - 1) / (2 * (f2 + 1));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

double filter_pass_share(int64_t tasks, const json& rejections) {
  // Rejections made before the filters (compose, shape search, contamination,
  // the curriculum) are already in the sampled count; duplicates of committed
  // tasks are not new tasks either.
  static const std::vector<std::string> kBefore = {"compose_invalid", "shape_search",   "memory_cap", "near_roofline",
                                                   "contaminated",    "headroom_range", "duplicate"};
  int64_t after = 0;
  for (const auto& [reason, n] : rejections.items()) {
    if (std::find(kBefore.begin(), kBefore.end(), reason) == kBefore.end() && n.is_number_integer()) {
      after += n.get<int64_t>();
    }
  }
  return tasks + after > 0 ? static_cast<double>(tasks) / static_cast<double>(tasks + after) : 0.0;
}

}  // namespace kforge::synth
