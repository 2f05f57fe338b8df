// Inputs and reference outputs kept across requests (docs/architecture.md#verification):
// verification draws fresh inputs for every (shape case, seed) and runs the
// reference on them, and a task's next candidate with the same input seed (the
// next turn of an episode, a benchmark's next candidate) would draw and run
// the very same. The judge keeps what it computed, in its device's memory,
// for the candidates that follow:
//
//   key      the shape case's task as JSON (its tensors, nodes and outputs, so
//            a changed attribute, init or dtype is a different entry) and
//            the input seed; the
//            judge's device and its numeric settings are fixed per process.
//   value    the pristine inputs and the reference outputs; neither ever
//            reaches a runner (the candidate gets copies in its arena, as
//            before), and verification only reads them.
//   bound    bytes, least recently used first out. Each request sets the
//            bound it may keep (evaluation.cpp, from task_fit.h): the
//            request's own tensors and the candidate's share come first, and
//            what is kept is counted in the judge's share, so a kept entry
//            never takes memory the candidate was promised.
//
// A hit returns the tensors computed earlier; the verdict is the same as
// with fresh ones (the inputs are the same draw; the reference the same ops
// on the same device, within the tolerance that allows for run-to-run
// differences of a nondeterministic library kernel).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <list>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "kforge/core/task_spec.h"

namespace kforge::judge {

struct CachedReference {
  std::vector<at::Tensor> inputs;     // as make_inputs drew them
  std::vector<at::Tensor> reference;  // run_reference on them
  uint64_t bytes() const;
};

class ReferenceCache {
 public:
  // What of a shape case's task decides its inputs and reference: its
  // tensors, nodes and outputs as JSON, without what never changes them
  // (description, meta, baselines, tolerance, libraries), so that a task whose
  // baselines were filled in since, or whose meta is large, finds its entries.
  static std::string case_text(const TaskSpec& case_task);
  // What identifies one entry: case_text, kept whole so two tasks never
  // share an entry, and the input seed.
  static std::string key(const std::string& case_text, uint64_t input_seed);

  // The entry, made the most recently used; nullptr on a miss.
  std::shared_ptr<const CachedReference> find(const std::string& key);
  // Keeps `entry` when it fits the bound, evicting the least recently used
  // entries to make room; an entry larger than the bound is not kept.
  void insert(const std::string& key, std::shared_ptr<const CachedReference> entry);
  // Sets the bound and evicts down to it (0: keep nothing).
  void set_bound(uint64_t bytes);

  uint64_t bound() const { return bound_; }
  uint64_t held_bytes() const { return held_; }
  size_t entries() const { return order_.size(); }
  // For the judge's health: {entries, bytes, bound_bytes, hits, misses, evictions}.
  nlohmann::json to_json() const;

 private:
  struct Slot {
    std::string key;
    std::shared_ptr<const CachedReference> entry;
    uint64_t bytes = 0;
  };
  void evict_to(uint64_t bytes);

  std::list<Slot> order_;  // most recently used first
  std::unordered_map<std::string, std::list<Slot>::iterator> index_;
  uint64_t bound_ = 0;
  uint64_t held_ = 0;
  uint64_t hits_ = 0, misses_ = 0, evictions_ = 0;
};

}  // namespace kforge::judge
