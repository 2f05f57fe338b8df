// Mode torch_ext: turns a KernelBench-style solution into the CUDA file that
// nvcc builds against KernelForge's torch shim (docs/torch-ext.md).
//
// Two spellings are accepted:
//   - the Python file a KernelBench policy writes (`load_inline(...,
//     cuda_sources=..., cpp_sources=..., functions=[...])` and `ModelNew`):
//     the CUDA and C++ sources are read out of its string literals, with
//     `#line` directives so that compiler errors point at lines of the .py;
//   - the CUDA/C++ source alone (what would go into `cuda_sources`).
// The entry is the one function listed in `functions` (with several, the one
// ModelNew.forward calls); for a bare source, the one function that returns
// a torch::Tensor. Its parameters are the task's inputs then params.
//
// Kernel launches without a stream (`<<<g, b>>>`, `<<<g, b, smem>>>`, or an
// explicit default stream 0/NULL/nullptr/cudaStreamDefault) are given the
// harness's stream: in KernelBench's harness the default stream is the one
// torch times, and here that is the stream kf_forward receives.
#pragma once

#include <string>
#include <vector>

namespace kforge::env {

struct TorchExtSource {
  std::string error;      // non-empty: why the solution cannot be built (names the fix)
  std::string file_name;  // what compiler messages call the candidate's own file
  std::string text;       // the .cu that nvcc compiles (candidate code + the kf_forward wrapper)
  std::string entry;      // the function kf_forward calls
  int rewritten_launches = 0;
};

TorchExtSource prepare_torch_ext_source(const std::string& source);

// Adds the harness stream to every launch that has none (see above). Comments,
// string and character literals are left alone; line breaks are kept, so line
// numbers do not move. `count` (optional) receives how many launches changed.
std::string give_launches_the_stream(const std::string& cuda, const std::string& stream_expr, int* count = nullptr);

}  // namespace kforge::env
