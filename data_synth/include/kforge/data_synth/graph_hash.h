// Canonical graph hashes for deduplication (docs/data-synthesis.md#deduplication).
//
// Two tasks are the same task when their graphs are isomorphic: renaming
// tensors, listing nodes in another (valid) order or swapping the inputs of a
// commutative op (add, mul, maximum, minimum, eq, ne) does not make a new
// task. Sizes do not either: the same graph at another batch or width is the
// same kernel to write, so the hash covers ops, attrs, dtypes, ranks, inits
// and topology, not the extents of dims. docs/data-synthesis.md says why.
#pragma once

#include <string>
#include <vector>

#include "kforge/core/task_spec.h"

namespace kforge::synth {

// SHA-256 hex of the canonical form. InputError if the task does not type-check.
std::string canonical_graph_hash(const TaskSpec& task);

// The nodes' ops in a canonical topological order (name- and order-free),
// e.g. {"conv2d", "relu", "add"}: what contamination compares.
std::vector<std::string> canonical_op_sequence(const TaskSpec& task);
// The same order as indices into task.nodes.
std::vector<size_t> canonical_node_order(const TaskSpec& task);

// Whether swapping the first two tensor inputs of `op` leaves its result unchanged.
bool is_commutative(const std::string& op, const json& attrs);

}  // namespace kforge::synth
