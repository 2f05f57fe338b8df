#include "synth_solutions.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <vector>

#include "kforge/core/error.h"
#include "kforge/core/jsonl.h"
#include "kforge/data_synth/exporters.h"
#include "kforge/env/env_config.h"
#include "kforge/env/eval_batch.h"
#include "kforge/rollout/policy/template_policy.h"

namespace kforge::cli {
namespace fs = std::filesystem;
namespace {

struct Candidate {
  TaskSpec task;
  std::string blocker;  // why the generator has no template ("" when it has one)
  std::string file;     // solutions/candidates/<stem>.<ext>, relative to solutions/
};

// What stopped the generator: the op of "node N (op): ...", or the dtype of
// "value ... is float16; ...", else the reason's first words.
std::string blocking_op(const std::string& why) {
  static const std::regex kNode("node [0-9]+ \\(([a-z_0-9]+)\\)");
  static const std::regex kDtype(" is (float16|bfloat16|float64|int64|bool);");
  std::smatch m;
  if (std::regex_search(why, m, kNode)) return m[1].str();
  if (std::regex_search(why, m, kDtype)) return "dtype " + m[1].str();
  return why.substr(0, 60);
}

void write_text(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    f << text;
    if (!f) throw SystemError(tmp.string() + ": cannot write");
  }
  fs::rename(tmp, path);
}

// Task ids with a row in solutions/results.jsonl (judged by an earlier run).
std::set<std::string> judged_before(const fs::path& results) {
  std::set<std::string> ids;
  if (!fs::exists(results)) return ids;
  JsonlReadOptions ro;
  ro.allow_torn_tail = true;
  for_each_jsonl_line(
      results, [&](const Document& d, size_t) { ids.insert(d.root.value("task_id", std::string())); }, ro);
  return ids;
}

std::vector<Candidate> write_candidates(const fs::path& out, const std::string& mode, int64_t limit) {
  const fs::path dir = out / "solutions";
  fs::create_directories(dir / "candidates");
  const std::string ext = mode == "cuda" ? ".cu" : ".cpp";
  std::vector<Candidate> all;
  const std::set<std::string> judged = judged_before(dir / "results.jsonl");
  int64_t fresh = 0;
  JsonlWriter pairs(dir / "pairs.jsonl", JsonlWriter::Mode::kTruncate);
  for_each_jsonl_line(out / "tasks.jsonl", [&](const Document& d, size_t) {
    Candidate c;
    c.task = parse_task(d);
    c.blocker = rollout::template_unsupported(c.task);
    if (c.blocker.empty()) {
      const std::string stem = fs::path(synth::kernelbench_file_name(c.task.id)).stem().string();
      c.file = "candidates/" + stem + ext;
      write_text(dir / c.file, rollout::template_source(c.task, mode));
      // Judged before: its row is read back from results.jsonl (the batch
      // skips it). Past the limit: left for a rerun.
      const bool before = judged.count(c.task.id) > 0;
      if (before || limit <= 0 || fresh < limit) {
        fresh += !before;
        pairs.write({{"id", c.task.id}, {"task", to_json(c.task)}, {"solution", c.file}});
      }
    }
    all.push_back(std::move(c));
  });
  return all;
}

json speedup_summary(std::vector<double> v) {
  if (v.empty()) return {{"count", 0}};
  std::sort(v.begin(), v.end());
  return {{"count", v.size()}, {"min", v.front()}, {"median", v[v.size() / 2]}, {"max", v.back()}};
}

// The index: per task and per op, and the ops the generator cannot generate.
json build_index(const std::vector<Candidate>& all, const std::map<std::string, json>& rows, const std::string& mode) {
  struct OpCount {
    int64_t tasks = 0, covered = 0, verified = 0, blocked = 0;
  };
  std::map<std::string, OpCount> ops;
  std::map<std::string, int64_t> blockers;
  json per_task = json::array();
  std::vector<double> speedups;
  int64_t covered = 0, verified = 0, judged = 0;
  std::string device;
  for (const Candidate& c : all) {
    std::set<std::string> used;
    for (const auto& n : c.task.nodes) used.insert(n.op);
    json entry = {{"task_id", c.task.id}, {"covered", c.blocker.empty()}};
    bool ok = false;
    if (!c.blocker.empty()) {
      const std::string op = blocking_op(c.blocker);
      ++blockers[op];
      if (used.count(op)) ++ops[op].blocked;
      entry["blocked_by"] = op;
      entry["why"] = c.blocker;
    } else {
      ++covered;
      auto it = rows.find(c.task.id);
      const json row = it == rows.end() ? json::object() : it->second;
      ok = row.value("verdict", std::string()) == "correct";
      judged += row.contains("verdict");
      entry["file"] = ok ? fs::path(c.file).filename().string() : std::string();
      entry["verdict"] = row.value("verdict", std::string("not judged"));
      entry["speedup"] = row.contains("speedup") ? row["speedup"] : json(nullptr);
      if (!ok && row.contains("summary")) entry["summary"] = row["summary"];
      if (ok && row["speedup"].is_number()) speedups.push_back(row["speedup"].get<double>());
      if (row.contains("device") && device.empty()) device = row["device"].get<std::string>();
      verified += ok;
    }
    for (const auto& op : used) {
      ++ops[op].tasks;
      ops[op].covered += c.blocker.empty();
      ops[op].verified += ok;
    }
    per_task.push_back(entry);
  }
  json by_op = json::object();
  json cannot = json::array();
  for (const auto& [op, n] : ops) {
    by_op[op] = {{"tasks", n.tasks}, {"covered", n.covered}, {"verified", n.verified}, {"blocked", n.blocked}};
    if (n.covered == 0 && n.blocked > 0) cannot.push_back(op);
  }
  for (const auto& [b, n] : blockers) {
    if (b.rfind("dtype ", 0) == 0) cannot.push_back(b);
  }
  return {{"mode", mode},
          {"device", device},
          {"tasks", all.size()},
          {"covered", covered},
          {"judged", judged},
          {"verified", verified},
          {"speedup", speedup_summary(speedups)},
          {"by_op", by_op},
          {"blocked_by", blockers},
          {"cannot_generate", cannot},
          {"per_task", per_task},
          {"rule",
           "the template policy's naive kernel (default variant) for every task whose ops it covers, judged as a "
           "submit (every verification seed and shape variant, then timed against the eager baseline); only "
           "verified solutions are kept in solutions/"}};
}

}  // namespace

std::string add_template_solutions(const fs::path& out, const SolutionOptions& o) {
  const std::string mode = o.backend == "cuda" ? "cuda" : "cpp";
  const fs::path dir = out / "solutions";
  const std::vector<Candidate> all = write_candidates(out, mode, o.limit);
  std::map<std::string, json> rows;
  if (fs::exists(dir / "pairs.jsonl") && fs::file_size(dir / "pairs.jsonl") > 0) {
    env::EvalBatchOptions b;
    b.solutions = dir / "pairs.jsonl";
    b.results = dir / "results.jsonl";
    b.concurrency = o.concurrency;
    b.time_limit_s = o.time_limit_s;
    env::EnvConfig config = env::load_env_config(o.backend);
    // A shipped solution's speedup is a label of the dataset, read for itself
    // rather than through a reward: timed to target_rse, not until a reward
    // is decided.
    config.eval.stop_when_decided = false;
    const env::EvalBatchResult r = env::run_eval_batch(b, config);
    for (const json& row : r.rows) rows[row.value("task_id", std::string())] = row;
  }
  // Only verified solutions stay in solutions/.
  for (const Candidate& c : all) {
    if (!c.blocker.empty()) continue;
    const fs::path shipped = dir / fs::path(c.file).filename();
    auto it = rows.find(c.task.id);
    if (it != rows.end() && it->second.value("verdict", std::string()) == "correct") {
      fs::copy_file(dir / c.file, shipped, fs::copy_options::overwrite_existing);
    } else {
      fs::remove(shipped);
    }
  }
  const json index = build_index(all, rows, mode);
  write_text(dir / "index.json", index.dump(2) + "\n");
  return std::to_string(index["covered"].get<int64_t>()) + " of " + std::to_string(all.size()) +
         " tasks covered by the template generator, " + std::to_string(index["verified"].get<int64_t>()) +
         " verified by the judge (" + mode + "); median speedup " +
         (index["speedup"].contains("median") ? std::to_string(index["speedup"]["median"].get<double>()) : "n/a");
}

}  // namespace kforge::cli
