// A split for generalization (`kforge synth --split 0.8,0.1,0.1`): whole
// op-graph families go to train, validation or test, so that a model is
// tested on kinds of computation it never trained on.
//
// A task's family is its skeleton: the main-loop and heavy tokens of its
// contamination core (contamination.h: gemm, conv2d, softmax, layer_norm,
// sum, ...) in canonical order, whatever pointwise and layout work surrounds
// them ("pointwise" for a task with none). Two families whose skeletons
// contain one another as a contiguous run ([gemm, softmax] inside
// [gemm, softmax, sum]) form one group, and a group goes to one split whole:
// no test family's core appears in a train task, as a family or inside one.
// Groups are placed largest first into the split with the most room left
// below its target in tasks (ties by a hash of the group's family names), so
// the split is a function of the set.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/task_spec.h"

namespace kforge::synth {

// The family's tokens ({} for a pointwise-only task) and its name ("gemm>softmax", "pointwise").
std::vector<std::string> family_core(const TaskSpec& task);
std::string family_name(const std::vector<std::string>& core);

struct SplitFractions {
  double train = 0.8, validation = 0.1, test = 0.1;
};
// "0.8,0.1,0.1" (or percentages "80,10,10"): three non-negative numbers with a
// positive sum, normalized. InputError naming --split otherwise.
SplitFractions parse_split(const std::string& text);

struct SplitAssignment {
  std::vector<std::string> split;  // per task, "train" | "validation" | "test"
  // {"fractions" (asked), "tasks" {split: n}, "families" {split: n},
  //  "groups", "largest_group" {families, tasks}, "family_splits" {family: split},
  //  "test_cores_in_train", "validation_cores_in_train" (both 0 by construction),
  //  "rule"}
  json report;
};
SplitAssignment split_tasks(const std::vector<TaskSpec>& tasks, const SplitFractions& fractions);

// Writes <out>/split/{train,validation,test}.jsonl (the tasks, in tasks.jsonl
// order) and <out>/split/split.json (the report). Returns the report.
json write_split(const std::filesystem::path& out, const std::vector<TaskSpec>& tasks, const SplitFractions& fractions);

}  // namespace kforge::synth
