// Ending an episode (runner_impl.h): its trajectory's totals, the staleness
// check (drop and re-queue), the exemplars it adds for contrastive prompts,
// and its place in its group.
#include <algorithm>
#include <chrono>

#include "kforge/core/elapsed.h"
#include "kforge/core/error.h"
#include "runner_impl.h"

namespace kforge::rollout {
namespace {

// At most this many re-queues of one group member dropped for staleness.
constexpr int kMaxStaleRequeues = 3;
// Earlier solutions kept per task for contrastive prompts.
constexpr size_t kExemplarPool = 16;

}  // namespace

// The one JSON form of the episode's typed infos, for its sinks.
Trajectory RolloutRunner::Impl::Record::written() && {
  Trajectory out = std::move(traj);
  out.info = to_json(info);
  for (size_t i = 0; i < out.turns.size() && i < turn_info.size(); ++i) out.turns[i].info = to_json(turn_info[i]);
  return out;
}

std::optional<int64_t> RolloutRunner::Impl::as_integer(const std::string& s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  size_t i = s[0] == '-' ? 1 : 0;
  if (i == s.size()) return std::nullopt;
  for (size_t k = i; k < s.size(); ++k) {
    if (s[k] < '0' || s[k] > '9') return std::nullopt;
  }
  return std::stoll(s);
}

int64_t RolloutRunner::Impl::lag(const std::string& version, const std::string& newest) {
  const auto v = as_integer(version), n = as_integer(newest);
  if (v && n) return std::max<int64_t>(0, *n - *v);
  return version == newest ? 0 : 1;
}

void RolloutRunner::Impl::remember_exemplar(const Episode& ep) {
  if (ep.turn_info.empty() || ep.solution_turn < 0) return;
  // The last turn's step info (a fork's may be its parent's, from its file).
  const std::optional<env::StepInfo>& last = ep.turn_info.back().env;
  if (!last) return;
  const Measurement& m = last->scored_measurement();
  if (!m.correct() || !m.speedup_eager) return;
  // The scored solution is the episode's latest one (submit or auto-submit).
  env::Exemplar e;
  try {
    const Action a = pool->tools().decode(ep.traj.turns[static_cast<size_t>(ep.solution_turn)].action);
    if (!a.solution) return;
    e.solution = *a.solution;
  } catch (const InputError&) {
    return;
  }
  e.speedup_eager = *m.speedup_eager;
  e.note = "trajectory " + ep.traj.id;
  auto& list = best[ep.traj.task_id];
  for (const auto& other : list) {
    if (other.solution.source == e.solution.source) return;
  }
  list.push_back(std::move(e));
  std::sort(list.begin(), list.end(),
            [](const env::Exemplar& a, const env::Exemplar& b) { return a.speedup_eager > b.speedup_eager; });
  if (list.size() > kExemplarPool) list.resize(kExemplarPool);
}

// Ends the episode in its slot; `ep` is gone afterwards.
void RolloutRunner::Impl::finish(Episode& ep, bool terminated, const std::string& truncation_reason) {
  const Spec spec = ep.spec;
  Group& g = groups[spec.group];
  const size_t member = static_cast<size_t>(spec.member);
  ep.traj.terminated = terminated;
  ep.traj.truncated = !terminated;
  if (!terminated) ep.info.truncation_reason = truncation_reason;
  double total = 0;
  for (const auto& t : ep.traj.turns) total += t.reward;
  ep.traj.total_reward = total;
  ep.info.timings = EpisodeTimings{ep.reset_ms, ms_since(ep.started), ep.policy_total_ms, ep.env_total_ms};
  const int env_id = ep.env_id;
  const std::string start_version = ep.traj.policy_version_start;
  // Staleness: judged against the newest version seen when it finishes.
  if (config.max_policy_lag >= 0 && lag(start_version, newest_version) > config.max_policy_lag) {
    ++stats.stale_dropped;
    say("episode " + ep.traj.id + " dropped: started at policy version " + start_version + ", newest is " +
        newest_version);
    if (g.requeues[member] < kMaxStaleRequeues) {
      ++g.requeues[member];
      queue.push_front(spec);
    } else {
      ++stats.stale_abandoned;
      g.abandoned[member] = true;
      ++g.finished;
    }
    slots[static_cast<size_t>(env_id)].reset();
    maybe_complete(spec.group);
    return;
  }
  if (terminated) {
    ++stats.terminated;
  } else {
    ++stats.truncated;
  }
  remember_exemplar(ep);
  g.done[member] = Record{std::move(ep.traj), std::move(ep.info), std::move(ep.turn_info)};
  ++g.finished;
  slots[static_cast<size_t>(env_id)].reset();
  maybe_complete(spec.group);
}

}  // namespace kforge::rollout
