// The optimization techniques a solution uses, found from its source and, for
// CUDA solutions where nvcc and cuobjdump are present, from its SASS (through
// the sass_mix analysis tool, env/src/analysis): what the compiler actually
// emitted confirms or adds to what the source asks for.
//
// Source evidence is lexical (comments removed, identifiers matched whole):
// it says what the code uses, not whether it pays off. SASS evidence is static
// instruction counts. Names (technique_names()):
//   shared_memory      __shared__ / LDS, STS, LDSM
//   vectorized_access  float4, __half2, ld.global.v4 ... / 64-128-bit LDG, STG
//   warp_shuffle       __shfl_*_sync, __reduce_*_sync / SHFL, REDUX
//   tensor_cores       wmma, mma.sync, wgmma / HMMA, HGMMA, IMMA ...
//   wgmma              wgmma.mma_async / HGMMA (Hopper warpgroup MMA)
//   async_copy         cp.async, memcpy_async / LDGSTS
//   tma                cp.async.bulk, CUtensorMap / UTMALDG, UBLKCP ...
//   unrolling          #pragma unroll, #pragma GCC unroll
//   fusion             the task's graph in fewer kernels than ops (CUDA), or in
//                      one pass without intermediate buffers (C++)
//   atomics            atomicAdd ... / ATOMG, RED, ATOMS
//   read_only_cache    __ldg, ld.global.nc / LDG.E.CONSTANT
//   fast_math          __expf, __fdividef, -use_fast_math, ex2.approx
//   simd               (C++) SSE/AVX/AVX-512 intrinsics, omp simd, ivdep
//   multithreading     (C++) std::thread, omp parallel
//   vendor_library     cuBLAS, cuDNN, CUTLASS/CuTe
#pragma once

#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/solution.h"
#include "kforge/core/task_spec.h"

namespace kforge::rollout::replay {

struct TechniqueFinding {
  std::string name;
  // "source: __shfl_xor_sync", "sass: SHFL x10"; at most a few per source.
  std::vector<std::string> evidence;
};

struct TechniqueReport {
  std::vector<TechniqueFinding> found;  // in technique_names() order
  bool sass_read = false;
  std::string sass_note;  // why SASS was not read ("cuobjdump not found", ...)

  bool has(const std::string& name) const;
  std::vector<std::string> names() const;
};

const std::vector<std::string>& technique_names();

// Source only. `task` may be null (then no fusion verdict).
TechniqueReport techniques_from_source(const Solution& solution, const TaskSpec* task);

// Adds SASS evidence from the sass_mix tool's facts ({"kernels": [{"name",
// "by_class", "by_opcode", "access_bits", "tensor_mnemonics", ...}]}).
void add_sass_evidence(const json& sass_mix_facts, TechniqueReport* report);

struct TechniqueOptions {
  bool read_sass = true;
  std::string arch = "sm_90a";
  double compile_timeout_s = 300.0;
};

// Source, then (CUDA modes, when enabled and cuobjdump/nvdisasm are found)
// the SASS of the solution compiled with nvcc or NVRTC into a temporary
// directory. Never throws: a compile or tool failure is `sass_note`.
TechniqueReport find_techniques(const Solution& solution, const TaskSpec* task, const TechniqueOptions& options);

json to_json(const TechniqueReport& report);

}  // namespace kforge::rollout::replay
