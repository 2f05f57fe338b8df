#include "kforge/data_synth/roofline.h"

#include <algorithm>
#include <vector>

#include "kforge/core/op_registry.h"

namespace kforge::synth {
namespace {

// Vendors' dense peaks (TFLOP/s: TF32 tensor, FP16/BF16 tensor, FP32 vector;
// GB/s of device memory). The CPU entry is one core (the judge's CPU timing
// runs one thread): 3 GHz x two 8-wide FMA units (AVX2) = 96 GFLOP/s, and the
// ~15 GB/s one core streams from DRAM.
struct Entry {
  const char* match;  // substring of the device name
  DeviceRoofline roofline;
};

const std::vector<Entry>& entries() {
  static const std::vector<Entry> kEntries = {
      {"H200", {"NVIDIA H200", 494.7, 989.4, 67.0, 4800.0, false}},
      {"H100 PCIe", {"NVIDIA H100 PCIe", 378.0, 756.0, 51.0, 2000.0, false}},
      {"H100", {"NVIDIA H100 SXM", 494.7, 989.4, 67.0, 3350.0, false}},
      {"A100", {"NVIDIA A100", 156.0, 312.0, 19.5, 2039.0, false}},
  };
  return kEntries;
}

DeviceRoofline cpu_core() { return {"one x86-64 core (AVX2, 3 GHz)", 0.096, 0.096, 0.096, 15.0, false}; }

double type_bytes(const TensorType& t) {
  return static_cast<double>(t.numel()) * static_cast<double>(dtype_size(t.dtype));
}

}  // namespace

DeviceRoofline default_roofline(const std::string& backend) {
  return backend == "cuda" ? entries().front().roofline : cpu_core();
}

DeviceRoofline roofline_for(const std::string& device, const std::string& backend) {
  if (backend == "cuda") {
    for (const Entry& e : entries()) {
      if (device.find(e.match) != std::string::npos) return e.roofline;
    }
    DeviceRoofline r = default_roofline(backend);
    r.assumed = true;
    return r;
  }
  // A CPU model name says little about one core's rates: the generic core,
  // named after the measured device.
  DeviceRoofline r = cpu_core();
  if (!device.empty()) r.name = device + " (one core, " + r.name + ")";
  r.assumed = true;
  return r;
}

RooflineBound roofline_bound(const TaskSpec& task, const DeviceRoofline& r) {
  const std::map<std::string, TensorType> types = infer_graph(task);
  RooflineBound b;
  for (const auto& spec : task.kernel_inputs()) b.bytes += type_bytes(types.at(spec.name));
  for (const auto& out : task.outputs) b.bytes += type_bytes(types.at(out));
  double compute_s = 0;
  for (const GraphNode& n : task.nodes) {
    const OpSchema* schema = op_registry().find(n.op);
    std::vector<TensorType> in;
    for (const auto& v : n.in) in.push_back(types.at(v));
    const TensorType& out = types.at(n.out);
    const double flops = schema->flops ? schema->flops(in, out, resolve_attrs(*schema, n.attrs, "")) : 0.0;
    b.flops += flops;
    double tflops = r.other_tflops;
    if (schema->category == OpCategory::kMainLoop) {
      b.main_loop_flops += flops;
      const bool half = out.dtype == DType::kFloat16 || out.dtype == DType::kBFloat16;
      tflops = half ? r.main_loop_half_tflops : r.main_loop_tflops;
    }
    compute_s += flops / (tflops * 1e12);
  }
  b.compute_ms = compute_s * 1e3;
  b.memory_ms = b.bytes / (r.bandwidth_gbps * 1e6);
  b.bound_ms = std::max(b.compute_ms, b.memory_ms);
  return b;
}

double predicted_headroom(const TaskSpec& task, const DeviceProfile& profile, const std::string& backend) {
  const RooflineBound b = roofline_bound(task, default_roofline(backend));
  return b.bound_ms > 0 ? predict_eager_ms(task, profile) / b.bound_ms : 0.0;
}

json difficulty_label(const TaskSpec& task, const std::string& backend, double predicted) {
  const std::string device = task.baselines ? task.baselines->device : std::string();
  const DeviceRoofline r = device.empty() ? default_roofline(backend) : roofline_for(device, backend);
  const RooflineBound b = roofline_bound(task, r);
  const bool measured = task.baselines && task.baselines->eager_ms && b.bound_ms > 0;
  return {{"eager_ms", measured ? json(*task.baselines->eager_ms) : json(nullptr)},
          {"device", device},
          {"roofline",
           {{"name", r.name},
            {"main_loop_tflops", r.main_loop_tflops},
            {"main_loop_half_tflops", r.main_loop_half_tflops},
            {"other_tflops", r.other_tflops},
            {"bandwidth_gbps", r.bandwidth_gbps},
            {"assumed", r.assumed}}},
          {"bytes", b.bytes},
          {"flops", b.flops},
          {"main_loop_flops", b.main_loop_flops},
          {"memory_ms", b.memory_ms},
          {"compute_ms", b.compute_ms},
          {"bound_ms", b.bound_ms},
          {"headroom", measured ? json(*task.baselines->eager_ms / b.bound_ms) : json(nullptr)},
          {"predicted_headroom", predicted}};
}

}  // namespace kforge::synth
