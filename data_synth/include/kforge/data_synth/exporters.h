// What a synthesis run leaves besides tasks.jsonl (docs/data-synthesis.md#what-a-run-writes): the
// tasks as KernelBench-format Python files, the rejection and contamination
// reports, and a dataset card with plots. All are derived from tasks.jsonl and
// slots.jsonl, so they can be rebuilt at any time (`kforge synth` rebuilds
// them at the end of every run, resumed or not).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/task_spec.h"

namespace kforge::synth {

struct ExportSummary {
  size_t tasks = 0;
  size_t python_files = 0;
  bool plots = false;
  std::string plots_note;  // why there are no plots, when there are none
};

struct ExportOptions {
  std::string python = "/usr/bin/python3";  // for the plots (matplotlib)
  std::filesystem::path plot_script;        // data_synth/python/dataset_card_plots.py
  std::string device;                       // where the filters ran, for the card
  double elapsed_s = 0;                     // of the run that just finished
  // Only kernelbench/*.py (what torch.compile baselines compile), not the
  // reports, card and plots, which a second call writes once they are in.
  bool python_files_only = false;
};

// File name of a task's KernelBench rendering: its id with '/' as '_'.
std::string kernelbench_file_name(const std::string& task_id);

// Writes <out>/kernelbench/*.py, rejections.json, contamination_report.json,
// card_stats.json, plots/*.png (when matplotlib runs) and DATASET_CARD.md.
ExportSummary export_dataset(const std::filesystem::path& out, const ExportOptions& options);

// The card's bin of a headroom (eager / roofline bound): "< 2", "2-5", "5-10",
// "10-30", "30-100", "100-1000", ">= 1000".
std::string headroom_bin(double headroom);

// Statistics the card and its plots are made from (exposed for tests).
json dataset_stats(const std::vector<TaskSpec>& tasks, const std::vector<json>& slots);

}  // namespace kforge::synth
