#include "kforge/data_synth/exporters.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "card_sections.h"
#include "kforge/core/jsonl.h"
#include "kforge/core/kernelbench_render.h"
#include "kforge/core/number_text.h"
#include "kforge/core/op_registry.h"
#include "kforge/core/process.h"
#include "kforge/data_synth/contamination.h"
#include "kforge/data_synth/filters.h"

namespace kforge::synth {
namespace fs = std::filesystem;
namespace {

void write_file_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    f << text;
    if (!f) throw SystemError(tmp.string() + ": cannot write");
  }
  fs::rename(tmp, path);
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(std::floor(p * static_cast<double>(v.size() - 1) + 0.5)));
  return v[i];
}

json summary_of(const std::vector<double>& v) {
  if (v.empty()) return {{"count", 0}};
  return {{"count", v.size()},         {"min", percentile(v, 0)},
          {"p10", percentile(v, 0.1)}, {"median", percentile(v, 0.5)},
          {"p90", percentile(v, 0.9)}, {"max", percentile(v, 1)}};
}

// Runs the card's plot script (matplotlib) with its output in
// plots/plots.log; "" when it worked, else why not for the card. No
// deadline, as the dataset run that calls it has none.
std::string draw_card_plots(const ExportOptions& options, const fs::path& out) {
  const fs::path python = find_on_path(options.python);
  if (python.empty()) return "the plot script cannot run: " + options.python + " not found";
  ProcessOptions po;
  po.timeout_s = std::numeric_limits<double>::infinity();
  po.output_file = out / "plots" / "plots.log";
  ProcessResult r;
  try {
    r = run_process(
        {python.string(), options.plot_script.string(), (out / "card_stats.json").string(), (out / "plots").string()},
        po);
  } catch (const SystemError& e) {
    return std::string("the plot script cannot run: ") + e.what();
  }
  if (r.ok()) return "";
  return "the plot script failed (exit " + std::to_string(r.exit_code) + "); see plots/plots.log";
}

// What the card says about torch.compile baselines: how many, with which
// PyTorch on which device, or why there are none (compile_baselines.json,
// written by data_synth/python/compile_baselines.py).
std::string compile_line(const fs::path& out, const json& stats) {
  const fs::path summary = out / "compile_baselines.json";
  if (!fs::exists(summary)) return "not measured (--compile-baselines off)";
  try {
    const Document d = Document::from_file(summary);
    if (!d.root.value("available", false)) {
      return "unavailable: " + d.root.value("reason", std::string("unknown reason"));
    }
    return std::to_string(stats["compile_ms_summary"].value("count", 0)) + " of " +
           std::to_string(stats["tasks"].get<size_t>()) + " tasks (PyTorch " + d.root.value("torch", std::string("?")) +
           " on " + d.root.value("device", std::string("?")) + "; " + d.root.value("protocol", std::string()) + ")";
  } catch (const std::exception& e) {
    return std::string("unreadable summary: ") + e.what();
  }
}

// An option of the run (run.json, SynthConfig::identity), or `fallback` for a
// folder without one.
double run_option(const fs::path& out, const std::string& key, double fallback) {
  try {
    if (!fs::exists(out / "run.json")) return fallback;
    const Document d = Document::from_file(out / "run.json");
    return d.root.contains(key) && d.root[key].is_number() ? d.root[key].get<double>() : fallback;
  } catch (const std::exception&) {
    return fallback;
  }
}

// A histogram whose keys are integers written as strings (JSON object keys),
// in numeric order: a JSON object sorts them as strings ("10" before "2").
std::vector<std::pair<int64_t, json>> by_number(const json& histogram) {
  std::vector<std::pair<int64_t, json>> rows;
  for (const auto& [k, v] : histogram.items()) rows.push_back({std::stoll(k), v});
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return rows;
}

}  // namespace

std::string headroom_bin(double h) {
  static const std::vector<std::pair<double, const char*>> kBins = {{2, "< 2"},    {5, "2-5"},      {10, "5-10"},
                                                                    {30, "10-30"}, {100, "30-100"}, {1000, "100-1000"}};
  for (const auto& [hi, name] : kBins) {
    if (h < hi) return name;
  }
  return ">= 1000";
}

std::string kernelbench_file_name(const std::string& task_id) {
  std::string s = task_id;
  for (char& c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) c = '_';
  }
  return s + ".py";
}

namespace {

// What the accepted tasks themselves say: their ops, shapes, baselines,
// difficulty and nearest KernelBench problems.
struct TaskTally {
  std::map<std::string, int64_t> op_hist, dtype_hist, nearest_hist, baseline_devices, relation_hist;
  std::map<std::string, int64_t> headroom_bins, roofline_devices, families;
  std::map<int64_t, int64_t> op_count_hist, main_loops_hist, atol_scale_hist;
  std::vector<double> numel, eager, compile, distance, per_sample, conv_channels;
  std::vector<double> headroom, predicted_headroom, bound_ms;
  int64_t baselines = 0;

  void add(const TaskSpec& t) {
    if (t.meta.contains("difficulty")) add_difficulty(t.meta["difficulty"]);
    if (t.meta.contains("family")) ++families[t.meta["family"].get<std::string>()];
    add_ops(t);
    const auto& first = t.inputs.front();
    if (!first.shape.empty() && first.shape[0] > 0) {
      per_sample.push_back(static_cast<double>(first.numel()) / static_cast<double>(first.shape[0]));
    }
    ++op_count_hist[static_cast<int64_t>(t.nodes.size())];
    ++dtype_hist[dtype_name(first.dtype)];
    numel.push_back(static_cast<double>(first.numel()));
    if (t.baselines && t.baselines->eager_ms) {
      eager.push_back(*t.baselines->eager_ms);
      ++baselines;
      ++baseline_devices[t.baselines->device];
    }
    if (t.baselines && t.baselines->compile_ms) compile.push_back(*t.baselines->compile_ms);
    if (t.meta.contains("synth") && t.meta["synth"].contains("atol_scale")) {
      ++atol_scale_hist[static_cast<int64_t>(t.meta["synth"]["atol_scale"].get<double>())];
    }
    if (t.meta.contains("nearest_kernelbench")) {
      const json& nk = t.meta["nearest_kernelbench"];
      distance.push_back(nk.value("distance", 1.0));
      ++relation_hist[nk.value("relation", std::string("?"))];
      ++nearest_hist[nk.value("problem", std::string())];
    }
  }

  void add_difficulty(const json& d) {
    if (d.value("headroom", json()).is_number()) {
      headroom.push_back(d["headroom"].get<double>());
      ++headroom_bins[headroom_bin(headroom.back())];
    }
    if (d.value("predicted_headroom", json()).is_number()) {
      predicted_headroom.push_back(d["predicted_headroom"].get<double>());
    }
    if (d.value("bound_ms", json()).is_number()) bound_ms.push_back(d["bound_ms"].get<double>());
    if (d.contains("roofline")) ++roofline_devices[d["roofline"].value("name", std::string("?"))];
  }

  void add_ops(const TaskSpec& t) {
    int64_t main_loops = 0;
    const std::map<std::string, TensorType> types = infer_graph(t);
    for (const auto& n : t.nodes) {
      ++op_hist[n.op];
      const OpSchema* schema = op_registry().find(n.op);
      if (!schema || schema->category != OpCategory::kMainLoop) continue;
      ++main_loops;
      if (n.op.rfind("conv", 0) == 0) {
        const TensorType& in = types.at(n.in.at(0));
        if (in.shape.size() >= 2) conv_channels.push_back(static_cast<double>(in.shape[1]));
      }
    }
    ++main_loops_hist[main_loops];
  }
};

// What the slots of the run say: the attempts, their rejections and timings.
struct SlotTally {
  std::map<std::string, int64_t> rejections, contaminated_by;
  std::vector<double> predicted, measured, total_bytes;
  int64_t measured_in_window = 0, judge_retries = 0;

  void add(const json& s) {
    predicted.push_back(s.value("predicted_ms", 0.0));
    measured.push_back(s.value("measured_ms", 0.0));
    if (s.value("measured_in_window", false)) ++measured_in_window;
    judge_retries += s.value("judge_retries", int64_t{0});
    total_bytes.push_back(s.value("bytes", 0.0));
    if (s.contains("rejections")) {
      for (const auto& [k, v] : s["rejections"].items()) rejections[k] += v.get<int64_t>();
    }
    if (s.contains("contaminated_by")) {
      for (const auto& [k, v] : s["contaminated_by"].items()) contaminated_by[k] += v.get<int64_t>();
    }
  }

  int64_t rejected(const std::string& reason) const {
    auto it = rejections.find(reason);
    return it == rejections.end() ? 0 : it->second;
  }
};

json keys_as_text(const std::map<int64_t, int64_t>& histogram) {
  json out = json::object();
  for (const auto& [k, v] : histogram) out[std::to_string(k)] = v;
  return out;
}

// The ten KernelBench problems most tasks are nearest to.
json nearest_problems_top(const std::map<std::string, int64_t>& nearest_hist) {
  std::vector<std::pair<int64_t, std::string>> sorted;
  for (const auto& [k, v] : nearest_hist) sorted.push_back({-v, k});
  std::sort(sorted.begin(), sorted.end());
  json top = json::array();
  for (size_t i = 0; i < sorted.size() && i < 10; ++i) {
    top.push_back({{"problem", sorted[i].second}, {"tasks", -sorted[i].first}});
  }
  return top;
}

json composition_stats(const TaskTally& t, size_t task_count) {
  json unused = json::array();
  for (const auto& name : op_registry().names()) {
    if (!t.op_hist.count(name)) unused.push_back(name);
  }
  double op_total = 0;
  for (const auto& [k, v] : t.op_count_hist) op_total += static_cast<double>(k * v);
  return {{"op_histogram", t.op_hist},
          {"op_count_histogram", keys_as_text(t.op_count_hist)},
          {"mean_ops", task_count == 0 ? 0.0 : op_total / static_cast<double>(task_count)},
          {"main_loops_per_task", keys_as_text(t.main_loops_hist)},
          {"atol_scale_histogram", keys_as_text(t.atol_scale_hist)},
          {"per_sample_elements_summary", summary_of(t.per_sample)},
          {"conv_input_channels_summary", summary_of(t.conv_channels)},
          {"ops_never_used", unused},
          {"nearest_relation_histogram", t.relation_hist},
          {"dtype_histogram", t.dtype_hist},
          {"first_input_numel", t.numel},
          {"first_input_numel_summary", summary_of(t.numel)},
          {"families", t.families}};
}

json baseline_and_difficulty_stats(const TaskTally& t) {
  return {{"eager_ms", t.eager},
          {"eager_ms_summary", summary_of(t.eager)},
          {"compile_ms_summary", summary_of(t.compile)},
          {"tasks_with_eager_baseline", t.baselines},
          {"eager_baseline_devices", t.baseline_devices},
          {"kernelbench_distance", t.distance},
          {"kernelbench_distance_summary", summary_of(t.distance)},
          {"nearest_problems_top", nearest_problems_top(t.nearest_hist)},
          {"headroom", t.headroom},
          {"headroom_summary", summary_of(t.headroom)},
          {"headroom_histogram", t.headroom_bins},
          {"predicted_headroom_summary", summary_of(t.predicted_headroom)},
          {"bound_ms_summary", summary_of(t.bound_ms)},
          {"roofline_devices", t.roofline_devices}};
}

json attempt_stats(const SlotTally& s, size_t task_count) {
  json rej = json::object();
  for (const auto& r : rejection_reasons()) rej[r] = s.rejected(r);
  int64_t shortcuts = 0;
  for (const char* r : {"near_constant", "constant_passes", "constant_node", "seed_insensitive",
                        "activation_insensitive", "op_is_noop", "near_roofline"}) {
    shortcuts += s.rejected(r);
  }
  int64_t rejected_total = 0;
  for (const auto& [k, v] : s.rejections) rejected_total += v;
  return {{"tasks", task_count},
          {"attempts_recorded", rejected_total + static_cast<int64_t>(task_count)},
          {"rejected", rejected_total},
          {"rejections", rej},
          {"shortcut_rejections", shortcuts},
          {"bytes", s.total_bytes},
          {"predicted_ms", s.predicted},
          {"measured_ms", s.measured},
          {"measured_ms_summary", summary_of(s.measured)},
          {"measured_in_window", s.measured_in_window},
          {"judge_retries", s.judge_retries},
          {"contaminated_by", s.contaminated_by}};
}

}  // namespace

// The keys are distinct across the three parts; a JSON object keeps them sorted.
json dataset_stats(const std::vector<TaskSpec>& tasks, const std::vector<json>& slots) {
  TaskTally t;
  for (const auto& task : tasks) t.add(task);
  SlotTally s;
  for (const auto& slot : slots) s.add(slot);
  json stats = attempt_stats(s, tasks.size());
  stats.update(composition_stats(t, tasks.size()));
  stats.update(baseline_and_difficulty_stats(t));
  return stats;
}

namespace {

// The card's opening list: what the set holds and how the run went.
void card_summary(std::ostream& md, const fs::path& out, const ExportOptions& options, const json& stats,
                  size_t task_count, size_t slot_count) {
  md << "# Dataset card: synthesized KernelForge tasks\n\n";
  md << "- Tasks: " << task_count << " (tasks.jsonl; KernelBench-format files in kernelbench/)\n";
  md << "- Filters and shape search ran on: " << (options.device.empty() ? "?" : options.device) << "\n";
  md << "- Eager baselines from the judge: " << stats["tasks_with_eager_baseline"] << " of " << task_count;
  for (const auto& [device, n] : stats["eager_baseline_devices"].items()) md << "; " << n << " on " << device;
  md << "\n";
  md << "- torch.compile baselines: " << compile_line(out, stats) << "\n";
  md << "- In-process eager time inside the runtime window: " << stats["measured_in_window"] << " of " << slot_count
     << " (the cost model decides the window; a measurement rejects only beyond a factor "
     << format_significant(run_option(out, "measured_far_outside", 10.0)) << " of an edge)\n";
  md << "- Attempts: " << stats["attempts_recorded"] << ", rejected: " << stats["rejected"] << "\n";
  md << "- Judge system errors asked again: " << stats["judge_retries"]
     << "; attempts rejected as judge_error after their retries: " << stats["rejections"]["judge_error"] << "\n";
  if (options.elapsed_s > 0) md << "- Wall time of the last run: " << format_fixed(options.elapsed_s, 1) << " s\n";
}

// Rejections, op counts, tolerances, dtypes and ops, as tables.
void card_composition(std::ostream& md, const json& stats) {
  md << "\n## Rejections by reason\n\n| reason | attempts |\n|---|---|\n";
  for (const auto& r : rejection_reasons()) md << "| " << r << " | " << stats["rejections"][r] << " |\n";
  md << "\n## Op counts per task\n\n| ops | tasks |\n|---|---|\n";
  for (const auto& [k, v] : by_number(stats["op_count_histogram"])) md << "| " << k << " | " << v << " |\n";
  md << "\nMean ops per task: " << format_significant(stats["mean_ops"].get<double>()) << "\n";
  md << "\n## GEMM/conv ops per task\n\n| main-loop ops | tasks |\n|---|---|\n";
  for (const auto& [k, v] : by_number(stats["main_loops_per_task"])) md << "| " << k << " | " << v << " |\n";
  md << "\nOps of the vocabulary no task uses (" << stats["ops_never_used"].size() << "): ";
  for (size_t i = 0; i < stats["ops_never_used"].size(); ++i) {
    md << (i ? ", " : "") << stats["ops_never_used"][i].get<std::string>();
  }
  md << "\n\nShortcut rejections (near_constant, constant_passes, constant_node, seed_insensitive, "
        "activation_insensitive, op_is_noop, near_roofline): "
     << stats["shortcut_rejections"] << "; contamination rejections: " << stats["rejections"]["contaminated"] << "\n";
  md << "\n## Tolerances\n\nEach task's atol is its dtype's (float32 1e-2, float16 2e-2, bfloat16 4e-2) times the "
        "power of two nearest its outputs' typical magnitude (median |x| over the nonzero elements), at least 1, so "
        "that an honest kernel summing in another order (errors of the order of the outputs' magnitude) passes "
        "where a long reduction or a big GEMM gives large outputs; rtol is the dtype's. Tasks by atol factor:\n\n| "
        "factor | tasks |\n|---|---|\n";
  for (const auto& [k, v] : by_number(stats["atol_scale_histogram"])) md << "| " << k << " | " << v << " |\n";
  md << "\n## Dtypes\n\n| dtype | tasks |\n|---|---|\n";
  for (const auto& [k, v] : stats["dtype_histogram"].items()) md << "| " << k << " | " << v << " |\n";
  md << "\n## Ops\n\n| op | uses |\n|---|---|\n";
  std::vector<std::pair<int64_t, std::string>> ops;
  for (const auto& [k, v] : stats["op_histogram"].items()) ops.push_back({-v.get<int64_t>(), k});
  std::sort(ops.begin(), ops.end());
  for (const auto& [n, op] : ops) md << "| " << op << " | " << -n << " |\n";
}

// The distributions and the contamination summary.
void card_distributions(std::ostream& md, const json& stats) {
  auto line = [&](const char* what, const json& s) {
    md << "| " << what << " | " << s.value("count", 0);
    for (const char* k : {"min", "median", "p90", "max"})
      md << " | " << (s.contains(k) ? format_significant(s[k].get<double>()) : "-");
    md << " |\n";
  };
  md << "\n## Distributions\n\n| quantity | n | min | median | p90 | max |\n|---|---|---|---|---|---|\n";
  line("eager baseline (judge), ms", stats["eager_ms_summary"]);
  line("torch.compile baseline, ms", stats["compile_ms_summary"]);
  line("in-process eager time, ms", stats["measured_ms_summary"]);
  line("first input elements", stats["first_input_numel_summary"]);
  line("first input elements per sample", stats["per_sample_elements_summary"]);
  line("convolution input channels", stats["conv_input_channels_summary"]);
  line("distance to nearest KernelBench problem", stats["kernelbench_distance_summary"]);
  md << "\n## Contamination\n\nThreshold " << kContaminationThreshold
     << " (contamination_report.json has every task's nearest problem, both cores and why it passed). Nearest "
        "problem by relation:";
  for (const auto& [k, v] : stats["nearest_relation_histogram"].items()) md << " " << k << " " << v << ";";
  md << " most frequent nearest problems:\n\n";
  for (const auto& p : stats["nearest_problems_top"]) {
    md << "- " << p["problem"].get<std::string>() << ": " << p["tasks"] << " tasks\n";
  }
}

// A decision the set leaves to its owner, stated in the card.
void card_owner_decision(std::ostream& md) {
  md << "\n## Decision for the owner: level-3-like blocks\n\n"
        "No level-3-like family (a small block of a real model: an MLP, attention without SDPA, a residual conv "
        "block) is in this set, by construction: such a block contains a KernelBench level-2 core as a contiguous "
        "run (an MLP's [gemm, gelu] is level2/86's core, a conv block's [conv2d, batch_norm] level2/73's), and "
        "contamination by meaning "
        "rejects every task whose core contains a KernelBench problem's core of two or more tokens. The policy "
        "is unchanged here: whether a block that contains a level-2 core may pass, because the block "
        "as a whole is more than that problem, is for the owner to decide.\n";
}

// The plots, or why there are none.
void card_plots(std::ostream& md, const ExportSummary& summary) {
  md << "\n## Plots\n\n";
  if (summary.plots) {
    for (const char* p :
         {"op_histogram", "op_count", "shapes", "runtime", "rejections", "kernelbench_distance", "headroom"}) {
      md << "![" << p << "](plots/" << p << ".png)\n";
    }
  } else {
    md << "No plots: " << summary.plots_note << "\n";
  }
}

// rejections.json, contamination_report.json and card_stats.json.
void write_reports(const fs::path& out, const std::vector<TaskSpec>& tasks, const json& stats) {
  write_file_atomically(
      out / "rejections.json",
      json({{"tasks", tasks.size()}, {"rejected", stats["rejected"]}, {"by_reason", stats["rejections"]}}).dump(2) +
          "\n");

  json per_task = json::array();
  for (const auto& t : tasks) {
    per_task.push_back({{"task_id", t.id}, {"nearest", t.meta.value("nearest_kernelbench", json::object())}});
  }
  write_file_atomically(out / "contamination_report.json",
                        json({{"threshold", kContaminationThreshold},
                              {"rule",
                               "cores by meaning (composites fused, the clamp family aliased, layout ops and "
                               "scalar/bias epilogues stripped); rejected when the task's core equals a KernelBench "
                               "problem's, contains one of 2+ tokens as a contiguous run, or is within the threshold "
                               "in normalized Levenshtein distance. Each task's `nearest.why` says how it passed"},
                              {"rejected_as_contaminated", stats["rejections"]["contaminated"]},
                              {"accepted_distance_summary", stats["kernelbench_distance_summary"]},
                              {"most_frequent_nearest", stats["nearest_problems_top"]},
                              {"tasks", per_task}})
                                .dump(2) +
                            "\n");
  write_file_atomically(out / "card_stats.json", stats.dump() + "\n");
}

}  // namespace

ExportSummary export_dataset(const fs::path& out, const ExportOptions& options) {
  ExportSummary summary;
  std::vector<TaskSpec> tasks;
  std::vector<json> slots;
  JsonlReadOptions ro;
  ro.allow_torn_tail = true;
  for_each_jsonl_line(
      out / "tasks.jsonl", [&](const Document& d, size_t) { tasks.push_back(parse_task(d)); }, ro);
  if (fs::exists(out / "slots.jsonl")) {
    for_each_jsonl_line(
        out / "slots.jsonl", [&](const Document& d, size_t) { slots.push_back(d.root); }, ro);
  }
  summary.tasks = tasks.size();

  const fs::path py_dir = out / "kernelbench";
  fs::create_directories(py_dir);
  for (const auto& t : tasks) {
    write_file_atomically(py_dir / kernelbench_file_name(t.id), render_kernelbench(t));
    ++summary.python_files;
  }
  if (options.python_files_only) return summary;

  json stats = dataset_stats(tasks, slots);
  stats["device"] = options.device;
  stats["elapsed_s"] = options.elapsed_s;
  write_reports(out, tasks, stats);

  // Plots: matplotlib in a child process; the card says so when it cannot run.
  fs::create_directories(out / "plots");
  if (!options.plot_script.empty() && fs::exists(options.plot_script)) {
    summary.plots_note = draw_card_plots(options, out);
    summary.plots = summary.plots_note.empty();
  } else {
    summary.plots_note = "plot script not found: " + options.plot_script.string();
  }

  std::ostringstream md;
  card_summary(md, out, options, stats, tasks.size(), slots.size());
  card_composition(md, stats);
  card_distributions(md, stats);
  card_owner_decision(md);
  md << card_extra_sections(out, stats);
  card_plots(md, summary);
  write_file_atomically(out / "DATASET_CARD.md", md.str());
  return summary;
}

}  // namespace kforge::synth
