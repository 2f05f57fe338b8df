// CUDA graphs in the runner: the warm-ups' graph paths, and the capture of a
// kf_forward that EvalOptions::cuda_graph replays instead of calling it.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <string>

namespace kforge::runner {

// Harness work captured on `stream`, then run once and waited for: how the
// warm-ups exercise graph paths before any filter exists. Throws on failure.
void run_as_graph(cudaStream_t stream, const std::function<void()>& enqueue);

// Why a replay of `graph` would differ from the call it captured (host work,
// copies to or from host memory); "" when it would not.
std::string host_work_in(cudaGraph_t graph);

// Captures one kf_forward on `stream` and instantiates it into `*exec`.
// Returns "" on success, else why graph mode cannot be used (calls then run
// eagerly and the report says why); `*exec` is left null then.
std::string capture_graph(cudaStream_t stream, const std::function<int()>& forward, cudaGraphExec_t* exec);

}  // namespace kforge::runner
