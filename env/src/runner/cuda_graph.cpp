#include "runner/cuda_graph.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "runner/cuda_errors.h"

namespace kforge::runner {

// Harness work captured on the stream, then run once and waited for: how
// the warm-ups exercise graph paths before any filter exists.
void run_as_graph(cudaStream_t stream, const std::function<void()>& enqueue) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  enqueue();
  check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// Whether a captured graph touches host memory. A replay repeats each copy
// on the host address the captured call used (often its stack, long gone
// by then), so such a call runs eagerly instead. The H200's CUDA 13 captured
// a device-to-host copy into pageable memory without complaint.
std::string host_work_in(cudaGraph_t graph) {
  size_t n = 0;
  if (cudaGraphGetNodes(graph, nullptr, &n) != cudaSuccess || n == 0) return "";
  std::vector<cudaGraphNode_t> nodes(n);
  if (cudaGraphGetNodes(graph, nodes.data(), &n) != cudaSuccess) return "";
  // Memory the graph allocates itself (cudaMallocAsync captured: torch_ext's
  // scratch tensors) has no mapping until the graph runs, so the pointer
  // query cannot place it; its own allocation nodes say it is the device's
  // (the H200 run took such a copy for a host one).
  std::vector<std::pair<uintptr_t, uintptr_t>> graph_memory;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    cudaMemAllocNodeParams alloc{};
    if (cudaGraphNodeGetType(node, &type) == cudaSuccess && type == cudaGraphNodeTypeMemAlloc &&
        cudaGraphMemAllocNodeGetParams(node, &alloc) == cudaSuccess) {
      const auto begin = reinterpret_cast<uintptr_t>(alloc.dptr);
      graph_memory.emplace_back(begin, begin + alloc.bytesize);
    }
  }
  auto on_host = [&graph_memory](const void* p) {
    if (p == nullptr) return false;
    const auto at = reinterpret_cast<uintptr_t>(p);
    for (const auto& [begin, end] : graph_memory) {
      if (at >= begin && at < end) return false;
    }
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      cudaGetLastError();
      return true;
    }
    return a.type == cudaMemoryTypeHost || a.type == cudaMemoryTypeUnregistered;
  };
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    if (cudaGraphNodeGetType(node, &type) != cudaSuccess) continue;
    if (type == cudaGraphNodeTypeHost) return "kf_forward enqueued host work, which a graph replay would repeat";
    if (type != cudaGraphNodeTypeMemcpy) continue;
    cudaMemcpy3DParms p{};
    if (cudaGraphMemcpyNodeGetParams(node, &p) != cudaSuccess) continue;
    if (on_host(p.srcPtr.ptr) || on_host(p.dstPtr.ptr)) {
      return "kf_forward copies to or from host memory; a graph replay would repeat the copy on host memory the "
             "call no longer owns";
    }
  }
  return "";
}

std::string capture_graph(cudaStream_t stream, const std::function<int()>& forward, cudaGraphExec_t* exec) {
  cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return "cudaStreamBeginCapture failed: " + error_text(e);
  }
  int rc = forward();
  cudaGraph_t graph = nullptr;
  e = cudaStreamEndCapture(stream, &graph);
  cudaGetLastError();  // capture errors are not sticky; do not let them reach the call's checks
  if (rc != 0 || e != cudaSuccess || graph == nullptr) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    return rc != 0 ? "kf_forward returned " + std::to_string(rc) + " while being captured"
                   : "stream capture failed: " + error_text(e) +
                         " (kf_forward synchronized, or used a stream other than the given one)";
  }
  if (std::string why = host_work_in(graph); !why.empty()) {
    cudaGraphDestroy(graph);
    return why;
  }
  e = cudaGraphInstantiate(exec, graph, 0);
  cudaGraphDestroy(graph);
  if (e != cudaSuccess) {
    cudaGetLastError();
    *exec = nullptr;
    return "cudaGraphInstantiate failed: " + error_text(e);
  }
  return "";
}

}  // namespace kforge::runner
