#include "kforge/data_synth/splits.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>

#include "kforge/core/error.h"
#include "kforge/core/jsonl.h"
#include "kforge/core/sha256.h"
#include "kforge/data_synth/contamination.h"

namespace kforge::synth {
namespace fs = std::filesystem;
namespace {

using Tokens = std::vector<std::string>;

const std::vector<std::string>& split_names() {
  static const std::vector<std::string> kNames = {"train", "validation", "test"};
  return kNames;
}

bool contains_run(const Tokens& outer, const Tokens& inner) {
  return !inner.empty() && std::search(outer.begin(), outer.end(), inner.begin(), inner.end()) != outer.end();
}

struct UnionFind {
  std::vector<size_t> parent;
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  size_t find(size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  }
  void join(size_t a, size_t b) { parent[find(a)] = find(b); }
};

struct Group {
  std::vector<size_t> families;  // indices into the distinct family list
  size_t tasks = 0;
  std::string key;  // hash of its family names: the tie-break
};

// Distinct families linked by containment, as groups.
std::vector<Group> group_families(const std::vector<Tokens>& cores, const std::vector<size_t>& family_tasks) {
  UnionFind uf(cores.size());
  for (size_t a = 0; a < cores.size(); ++a) {
    for (size_t b = 0; b < cores.size(); ++b) {
      if (a != b && contains_run(cores[b], cores[a])) uf.join(a, b);
    }
  }
  std::map<size_t, Group> by_root;
  for (size_t f = 0; f < cores.size(); ++f) {
    Group& g = by_root[uf.find(f)];
    g.families.push_back(f);
    g.tasks += family_tasks[f];
  }
  std::vector<Group> groups;
  for (auto& [root, g] : by_root) {
    // Sorted names: the key, and so the tie-break, is the set's, whatever
    // order the tasks came in.
    std::vector<std::string> names;
    for (size_t f : g.families) names.push_back(family_name(cores[f]));
    std::sort(names.begin(), names.end());
    std::string joined;
    for (const auto& n : names) joined += n + ";";
    g.key = sha256_hex(joined);
    groups.push_back(std::move(g));
  }
  std::sort(groups.begin(), groups.end(),
            [](const Group& a, const Group& b) { return a.tasks != b.tasks ? a.tasks > b.tasks : a.key < b.key; });
  return groups;
}

// Tasks whose family core occurs in a train task's core (as the family or a
// contiguous run inside it): what the split must leave at 0.
int64_t cores_in_train(const std::vector<Tokens>& cores, const std::vector<std::string>& family_split,
                       const std::string& split) {
  int64_t n = 0;
  for (size_t a = 0; a < cores.size(); ++a) {
    if (family_split[a] != split || cores[a].empty()) continue;
    for (size_t b = 0; b < cores.size(); ++b) {
      if (family_split[b] == "train" && (cores[a] == cores[b] || contains_run(cores[b], cores[a]))) {
        ++n;
        break;
      }
    }
  }
  return n;
}

}  // namespace

Tokens family_core(const TaskSpec& task) { return core_skeleton(contamination_core(contamination_ops(task))); }

std::string family_name(const Tokens& core) {
  if (core.empty()) return "pointwise";
  std::string s;
  for (size_t i = 0; i < core.size(); ++i) s += (i ? ">" : "") + core[i];
  return s;
}

SplitFractions parse_split(const std::string& text) {
  std::vector<double> v;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    char* end = nullptr;
    const double x = std::strtod(part.c_str(), &end);
    if (part.empty() || end != part.c_str() + part.size() || !(x >= 0) || x > 1e6) {
      throw InputError("--split: \"" + text +
                       "\" is not three non-negative numbers TRAIN,VALIDATION,TEST (e.g. 0.8,0.1,0.1)");
    }
    v.push_back(x);
  }
  if (v.size() != 3 || v[0] + v[1] + v[2] <= 0) {
    throw InputError("--split: \"" + text +
                     "\" needs three shares TRAIN,VALIDATION,TEST with a positive sum (e.g. 0.8,0.1,0.1)");
  }
  const double sum = v[0] + v[1] + v[2];
  return {v[0] / sum, v[1] / sum, v[2] / sum};
}

SplitAssignment split_tasks(const std::vector<TaskSpec>& tasks, const SplitFractions& fractions) {
  std::map<std::string, size_t> index;  // family name -> distinct family
  std::vector<Tokens> cores;
  std::vector<size_t> family_tasks, task_family;
  for (const auto& t : tasks) {
    const Tokens core = family_core(t);
    auto [it, fresh] = index.try_emplace(family_name(core), cores.size());
    if (fresh) {
      cores.push_back(core);
      family_tasks.push_back(0);
    }
    ++family_tasks[it->second];
    task_family.push_back(it->second);
  }
  const std::vector<Group> groups = group_families(cores, family_tasks);
  const double total = static_cast<double>(tasks.size());
  const double target[3] = {fractions.train * total, fractions.validation * total, fractions.test * total};
  double placed[3] = {0, 0, 0};
  std::vector<std::string> family_split(cores.size());
  size_t largest = 0;
  for (const Group& g : groups) {
    // The split with the most room left below its target, in tasks: a group
    // larger than a small split's target goes where it fits (a relative
    // measure sent an 83-task group to a 40-task validation split). A split
    // with a zero target never takes a group.
    int pick = 0;
    double best = -1e300;
    for (int s = 0; s < 3; ++s) {
      if (target[s] <= 0) continue;
      const double open = target[s] - placed[s];
      if (open > best) {
        best = open;
        pick = s;
      }
    }
    placed[pick] += static_cast<double>(g.tasks);
    for (size_t f : g.families) family_split[f] = split_names()[static_cast<size_t>(pick)];
    largest = std::max(largest, g.tasks);
  }
  SplitAssignment a;
  json task_counts = json::object(), family_counts = json::object(), families = json::object();
  for (const auto& s : split_names()) task_counts[s] = 0, family_counts[s] = 0;
  for (size_t t = 0; t < tasks.size(); ++t) {
    a.split.push_back(family_split[task_family[t]]);
    task_counts[a.split.back()] = task_counts[a.split.back()].get<int64_t>() + 1;
  }
  for (size_t f = 0; f < cores.size(); ++f) {
    family_counts[family_split[f]] = family_counts[family_split[f]].get<int64_t>() + 1;
    families[family_name(cores[f])] = {{"split", family_split[f]}, {"tasks", family_tasks[f]}};
  }
  size_t largest_families = 0;
  for (const Group& g : groups) {
    if (g.tasks == largest) largest_families = std::max(largest_families, g.families.size());
  }
  a.report = {
      {"fractions", {{"train", fractions.train}, {"validation", fractions.validation}, {"test", fractions.test}}},
      {"tasks", task_counts},
      {"families", family_counts},
      {"distinct_families", cores.size()},
      {"groups", groups.size()},
      {"largest_group", {{"tasks", largest}, {"families", largest_families}}},
      {"family_splits", families},
      {"test_cores_in_train", cores_in_train(cores, family_split, "test")},
      {"validation_cores_in_train", cores_in_train(cores, family_split, "validation")},
      {"rule",
       "family = the task's skeleton (main-loop and heavy tokens of its contamination core, canonical "
       "order); families whose skeletons contain one another as a contiguous run are one group; whole "
       "groups go to one split, largest first, each to the split with the most room below its target"}};
  return a;
}

json write_split(const fs::path& out, const std::vector<TaskSpec>& tasks, const SplitFractions& fractions) {
  const SplitAssignment a = split_tasks(tasks, fractions);
  const fs::path dir = out / "split";
  fs::create_directories(dir);
  std::map<std::string, std::unique_ptr<JsonlWriter>> writers;
  for (const auto& s : split_names()) {
    writers[s] = std::make_unique<JsonlWriter>(dir / (s + ".jsonl"), JsonlWriter::Mode::kTruncate);
  }
  for (size_t t = 0; t < tasks.size(); ++t) writers[a.split[t]]->write(to_json(tasks[t]));
  writers.clear();
  const fs::path tmp = dir / "split.json.tmp";
  {
    std::ofstream f(tmp);
    f << a.report.dump(2) << "\n";
    if (!f) throw SystemError(tmp.string() + ": cannot write");
  }
  fs::rename(tmp, dir / "split.json");
  return a.report;
}

}  // namespace kforge::synth
