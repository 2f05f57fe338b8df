// A deterministic estimate of a task's eager (unfused, op-by-op) time on a
// kind of device. The shape sampler aims its sizes with it and decides the
// runtime window by it, so which task a slot gets depends on the seed only,
// never on the machine's load (docs/data-synthesis.md, "Determinism").
#pragma once

#include <string>
#include <vector>

#include "kforge/core/task_spec.h"

namespace kforge::synth {

// Throughputs of eager PyTorch on one kind of device, as effective rates of
// whole ops (not peaks): each node reads its inputs and writes its output once.
struct DeviceProfile {
  std::string name;                  // "cpu" or "cuda"
  double gemm_gflops = 0;            // matmul / linear / bmm
  double conv_gflops = 0;            // conv1d/2d/3d
  double conv_transpose_gflops = 0;  // conv_transpose*: mkldnn's CPU path is ~4x slower than conv
  double other_gflops = 0;           // everything else (transcendentals dominate)
  double bandwidth_gbps = 0;         // bytes moved per node
  double per_node_ms = 0;            // launch / dispatch overhead of one op
  double half_gemm_speedup = 1;      // float16/bfloat16 main-loop ops vs float32
};

// Calibrated on one thread of the development machine's CPU (libtorch 1.13)
// and on an H200 with PyTorch 2.x; see docs/data-synthesis.md.
const DeviceProfile& cpu_profile();
const DeviceProfile& cuda_profile();

// Estimated eager milliseconds of one call. InputError if the task does not
// type-check.
double predict_eager_ms(const TaskSpec& task, const DeviceProfile& profile);

// Each node's share of that estimate without the per-op overhead, in
// task.nodes order: max(FLOPs / rate, bytes / bandwidth). What contamination
// reads to find the part of a task that dominates its cost.
std::vector<double> node_costs_ms(const TaskSpec& task, const DeviceProfile& profile);

// The bandwidth bound of the whole task fused: its kernel inputs read and its
// outputs written once at the profile's bandwidth. A task whose eager time is
// close to it has nothing for a kernel to gain (an audit of an H200 set found
// 11 tasks within 1.5x of it).
double bandwidth_bound_ms(const TaskSpec& task, const DeviceProfile& profile);

// Bytes of every tensor one call holds: kernel inputs, intermediates and
// outputs (an upper bound on the reference's peak memory).
double graph_bytes(const TaskSpec& task);

}  // namespace kforge::synth
