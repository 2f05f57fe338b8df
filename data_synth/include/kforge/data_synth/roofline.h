// Difficulty labels: what a task's computation must at least cost on the
// device its eager baseline was measured on (a roofline bound from the bytes
// it must move and the FLOPs it must do), and the headroom eager / bound, the
// speedup a perfect kernel could reach over PyTorch eager. Every synthesized
// task carries them in meta.difficulty; `kforge synth --headroom LO,HI`
// keeps the tasks whose predicted headroom is in a range (a curriculum: easy
// fusions first, GEMM chains later).
//
// The bound is optimistic on purpose (a lower bound on any kernel's time):
// kernel inputs read once and outputs written once at the peak bandwidth, and
// the FLOPs at peak rate, main-loop FLOPs on the tensor cores (TF32 for
// float32: the float32 tolerance, rtol 1e-2, admits it). Peaks are the
// vendors' dense figures; the CPU's is one core's (the judge times the CPU
// reference on one thread).
#pragma once

#include <string>

#include "kforge/core/document.h"
#include "kforge/core/task_spec.h"
#include "kforge/data_synth/cost_model.h"

namespace kforge::synth {

struct DeviceRoofline {
  std::string name;                  // "NVIDIA H200", "one x86-64 core", ...
  double main_loop_tflops = 0;       // GEMM/conv on tensor cores, float32 (TF32)
  double main_loop_half_tflops = 0;  // the same for float16/bfloat16
  double other_tflops = 0;           // everything else (float32 vector units)
  double bandwidth_gbps = 0;
  bool assumed = false;  // no entry for the measured device: the backend's default
};

// The roofline of the device an eager baseline was measured on, by its name
// as the judge reports it ("NVIDIA H200", "NVIDIA H100 80GB HBM3", a CPU
// model). Unknown devices get the backend's default (H200 for cuda, one
// generic x86-64 core for cpu) with `assumed` set.
DeviceRoofline roofline_for(const std::string& device, const std::string& backend);
// The backend's default roofline: what --headroom is predicted against.
DeviceRoofline default_roofline(const std::string& backend);

struct RooflineBound {
  double bytes = 0;            // kernel inputs read once + outputs written once
  double flops = 0;            // every node's FLOPs
  double main_loop_flops = 0;  // of which GEMM/conv
  double memory_ms = 0, compute_ms = 0;
  double bound_ms = 0;  // max(memory_ms, compute_ms)
};
// InputError if the task does not type-check.
RooflineBound roofline_bound(const TaskSpec& task, const DeviceRoofline& roofline);

// The cost model's eager time over the backend's default roofline bound: the
// headroom --headroom selects by, a function of the seed only.
double predicted_headroom(const TaskSpec& task, const DeviceProfile& profile, const std::string& backend);

// meta.difficulty of a task: {eager_ms, device, roofline: {name, rates,
// assumed}, bytes, flops, bound_ms, headroom, predicted_headroom}; eager_ms
// and headroom null without a measured baseline.
json difficulty_label(const TaskSpec& task, const std::string& backend, double predicted_headroom);

}  // namespace kforge::synth
