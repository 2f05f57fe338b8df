// Compile latency per mode (NVRTC, nvcc, torch_ext, host C++), cache hits, and the
// in-run baseline KernelForge is meant to beat: nvcc of the same kernel with
// `#include <torch/extension.h>`, as torch.utils.cpp_extension.load_inline
// builds it. Prints p50/p95 per case and the speedup over the baseline.
//
//   bench_compile                          # all cases (the torch case takes minutes)
//   bench_compile --benchmark_filter=-NvccTorchExtension  # everything but the baseline
// Environment: KFORGE_BENCH_TORCH_SAMPLES (default 1), KFORGE_TORCH_INCLUDE
// (':'-separated include dirs for torch/extension.h and Python.h; default:
// asked from a Python that has torch).
#include <benchmark/benchmark.h>
#include <unistd.h>

#ifdef KFORGE_BENCH_NVRTC_IN_PROCESS
#include <nvrtc.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "kforge/core/process.h"
#include "kforge/core/remove_tree.h"
#include "kforge/env/compile/compilers.h"
#include "kforge/env/compile_service.h"

namespace kforge::env {
namespace {

using Clock = std::chrono::steady_clock;

// The same elementwise kernel in every mode.
const char* kKernel = R"(
template <typename T>
__global__ void scale(const T* __restrict__ x, T* __restrict__ y, long n, T alpha) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = alpha * x[i];
}
)";

const char* kLauncher = R"(
extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  long n = (long)kf_numel(&in[0]);
  scale<float><<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>(
      (const float*)in[0].data, (float*)out[0].data, n, 2.0f);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
)";

const char* kCpp = R"(#include "kforge/kernel_abi.h"
extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  const float* x = (const float*)in[0].data;
  float* y = (float*)out[0].data;
  for (int64_t i = 0, n = kf_numel(&in[0]); i < n; ++i) y[i] = 2.0f * x[i];
  return 0;
}
)";

std::string cuda_source() {
  return std::string("#include \"kforge/kernel_abi.h\"\n#include <cuda_runtime.h>\n") + kKernel + kLauncher;
}

// Samples per case, in milliseconds, for the summary.
std::map<std::string, std::vector<double>>& samples() {
  static std::map<std::string, std::vector<double>> s;
  return s;
}
std::map<std::string, std::string>& notes() {
  static std::map<std::string, std::string> n;
  return n;
}

class Scratch {
 public:
  Scratch() {
    static std::atomic<int> counter{0};
    dir_ = std::filesystem::temp_directory_path() /
           ("kforge-bench-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(dir_);
  }
  ~Scratch() { kforge::remove_tree(dir_); }
  const std::filesystem::path& path() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

void record(benchmark::State& state, const std::string& name, double ms) {
  state.SetIterationTime(ms / 1000.0);
  samples()[name].push_back(ms);
}

// A compile through a Compiler with a fresh output directory per iteration:
// the raw latency without the cache.
void run_compiler(benchmark::State& state, Compiler& compiler, const Solution& solution, const CompileContext& ctx,
                  const std::string& name) {
  for (auto _ : state) {
    Scratch out;
    const auto t = Clock::now();
    const CompileResult r = compiler.compile(solution, ctx, out.path());
    const double ms = ms_since(t);
    if (!r.ok) {
      state.SkipWithError((name + " failed: " + r.diagnostics + "\n--- compiler log ---\n" + r.log).c_str());
      return;
    }
    record(state, name, ms);
  }
}

Solution cpp_solution() {
  Solution s;
  s.mode = SolutionMode::kCpp;
  s.source = kCpp;
  return s;
}

Solution nvrtc_solution() {
  Solution s;
  s.mode = SolutionMode::kNvrtc;
  s.source = kKernel;
  s.launch = json::parse(R"J({"name": "scale<float>", "grid": "cdiv(numel(x), 256)", "block": 256,
                             "args": ["x", "y", "i64(numel(x))", "f32(2.0)"]})J");
  return s;
}

CompileContext nvrtc_context() {
  CompileContext ctx;
  ctx.tensor_names = {"x", "y"};
  return ctx;
}

void BM_Nvrtc(benchmark::State& state) {
  static auto compiler = make_nvrtc_compiler();
  // The first NVRTC compile in a process loads and initializes the library
  // (~0.2 s); the target is about warm compiles, the cold one is reported.
  static const double cold = [] {
    Scratch out;
    const auto t = Clock::now();
    compiler->compile(nvrtc_solution(), nvrtc_context(), out.path());
    return ms_since(t);
  }();
  notes()["nvrtc"] = "first compile in the process (cold): " + std::to_string(static_cast<int>(cold)) + " ms";
  run_compiler(state, *compiler, nvrtc_solution(), nvrtc_context(), "nvrtc");
}

#ifdef KFORGE_BENCH_NVRTC_IN_PROCESS
// The baseline for the worker: the same program, options and name
// expression compiled by NVRTC inside this process, CUBIN and lowered name
// read back, as nvrtc_compiler.cpp did before compiles moved to kforge-nvrtc.
// What the worker adds is the request and reply frames and a process switch.
void BM_NvrtcInProcess(benchmark::State& state) {
  std::vector<std::string> args = {"--gpu-architecture=sm_90a", "-std=c++17", "-default-device", "--ptxas-options=-v"};
  for (const auto& d : default_cuda_include_dirs()) args.push_back("--include-path=" + d.string());
  std::vector<const char*> c_args;
  for (const auto& a : args) c_args.push_back(a.c_str());
  auto once = [&] {
    nvrtcProgram prog = nullptr;
    nvrtcCreateProgram(&prog, kKernel, "candidate.cu", 0, nullptr, nullptr);
    nvrtcAddNameExpression(prog, "scale<float>");
    const nvrtcResult r = nvrtcCompileProgram(prog, static_cast<int>(c_args.size()), c_args.data());
    size_t log_size = 0, cubin_size = 0;
    nvrtcGetProgramLogSize(prog, &log_size);
    std::string log(log_size, '\0');
    nvrtcGetProgramLog(prog, log.data());
    const char* lowered = nullptr;
    nvrtcGetLoweredName(prog, "scale<float>", &lowered);
    nvrtcGetCUBINSize(prog, &cubin_size);
    std::string cubin(cubin_size, '\0');
    nvrtcGetCUBIN(prog, cubin.data());
    nvrtcDestroyProgram(&prog);
    return r == NVRTC_SUCCESS && lowered != nullptr;
  };
  static const double cold = [&] {
    const auto t = Clock::now();
    once();
    return ms_since(t);
  }();
  notes()["nvrtc_in_process"] =
      "first compile in the process (cold): " + std::to_string(static_cast<int>(cold)) + " ms";
  for (auto _ : state) {
    const auto t = Clock::now();
    if (!once()) {
      state.SkipWithError("NVRTC failed in process");
      return;
    }
    record(state, "nvrtc_in_process", ms_since(t));
  }
}
#endif

void BM_Nvcc(benchmark::State& state) {
  auto compiler = make_nvcc_compiler();
  Solution s;
  s.mode = SolutionMode::kCuda;
  s.source = cuda_source();
  run_compiler(state, *compiler, s, {}, "nvcc");
}

// The same kernel as KernelBench's load_inline would have it: a torch::Tensor
// entry, built against the torch shim (docs/torch-ext.md).
const char* kTorchExtEntry = R"(
#include <torch/extension.h>
torch::Tensor scale_cuda(torch::Tensor x) {
  auto y = torch::empty_like(x);
  const long n = x.numel();
  scale<float><<<(unsigned)((n + 255) / 256), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n, 2.0f);
  return y;
}
)";

void BM_TorchExt(benchmark::State& state) {
  auto compiler = make_torch_ext_compiler();
  Solution s;
  s.mode = SolutionMode::kTorchExt;
  s.source = std::string("#include <cuda_runtime.h>\n") + kKernel + kTorchExtEntry;
  run_compiler(state, *compiler, s, {}, "torch_ext");
}

void BM_Cpp(benchmark::State& state) {
  auto compiler = make_host_compiler();
  run_compiler(state, *compiler, cpp_solution(), {}, "cpp");
}

// Submit-to-result of a solution that is already in the service's memory.
// The host compiler's solution, so that it runs on every build; a hit costs
// the same in every mode.
void BM_CacheHitMemory(benchmark::State& state) {
  Scratch cache;
  CompileServiceConfig config;
  config.cache_dir = cache.path();
  CompileService service(config);
  add_default_compilers(service, "cpu");
  const Solution s = cpp_solution();
  const CompileContext ctx;
  if (!service.submit(s, ctx).get().ok) {
    state.SkipWithError("the solution does not compile");
    return;
  }
  for (auto _ : state) {
    const auto t = Clock::now();
    const CompileResult r = service.submit(s, ctx).get();
    const double ms = ms_since(t);
    if (!r.cache_hit) {
      state.SkipWithError("expected a cache hit");
      return;
    }
    record(state, "cache_hit_memory", ms);
  }
}

// A new process (here: a new service) finding the entry on disk.
void BM_CacheHitDisk(benchmark::State& state) {
  Scratch cache;
  CompileServiceConfig config;
  config.cache_dir = cache.path();
  const Solution s = cpp_solution();
  const CompileContext ctx;
  {
    CompileService warm(config);
    add_default_compilers(warm, "cpu");
    if (!warm.submit(s, ctx).get().ok) {
      state.SkipWithError("the solution does not compile");
      return;
    }
  }
  for (auto _ : state) {
    auto service = std::make_unique<CompileService>(config);
    add_default_compilers(*service, "cpu");
    const auto t = Clock::now();
    const CompileResult r = service->submit(s, ctx).get();
    const double ms = ms_since(t);
    if (!r.cache_hit) {
      state.SkipWithError("expected a disk hit");
      return;
    }
    record(state, "cache_hit_disk", ms);
  }
}

// Include dirs for torch/extension.h (and Python.h, which it includes).
std::vector<std::string> torch_include_dirs(std::string* how) {
  std::vector<std::string> dirs;
  auto split = [&dirs](const std::string& text) {
    std::stringstream in(text);
    std::string d;
    while (std::getline(in, d, ':')) {
      while (!d.empty() && (d.back() == '\n' || d.back() == '\r')) d.pop_back();
      if (!d.empty()) dirs.push_back(d);
    }
  };
  if (const char* env = std::getenv("KFORGE_TORCH_INCLUDE"); env != nullptr && *env != '\0') {
    split(env);
    *how = "$KFORGE_TORCH_INCLUDE";
    return dirs;
  }
  const std::string query =
      "import sysconfig, torch.utils.cpp_extension as c; "
      "print(':'.join(c.include_paths() + [sysconfig.get_paths()['include']]))";
  std::vector<std::string> pythons;
  if (const char* p = std::getenv("KFORGE_PYTHON")) pythons.push_back(p);
  pythons.insert(pythons.end(), {"/opt/torch/.venv/bin/python3", "/usr/bin/python3", "python3"});
  for (const auto& python : pythons) {
    const std::filesystem::path exe = find_on_path(python);
    if (exe.empty()) continue;
    ProcessOptions options;
    options.timeout_s = 120;
    try {
      const ProcessResult r = run_process({exe.string(), "-c", query}, options);
      if (r.ok()) {
        const std::string last = r.output.substr(r.output.rfind('\n', r.output.size() - 2) + 1);
        split(last);
        *how = exe.string() + " (torch.utils.cpp_extension.include_paths)";
        return dirs;
      }
    } catch (const std::exception&) {
      // try the next interpreter
    }
  }
  *how = "not found: no $KFORGE_TORCH_INCLUDE and no Python with torch";
  return dirs;
}

// What load_inline amounts to for the compiler: the kernel plus the torch
// extension header, through nvcc. Linking against libtorch is left out, which
// only makes the baseline faster.
void BM_NvccTorchExtension(benchmark::State& state) {
  std::string how;
  const std::vector<std::string> includes = torch_include_dirs(&how);
  bool found = false;
  for (const auto& d : includes)
    found = found || std::filesystem::exists(std::filesystem::path(d) / "torch/extension.h");
  notes()["nvcc_torch_extension"] = "torch include: " + how;
  if (!found) {
    std::printf("torch extension baseline: torch/extension.h not found (%s); no baseline in this run\n", how.c_str());
    state.SkipWithError("torch/extension.h not found");
    return;
  }
  const std::filesystem::path nvcc = default_nvcc();
  for (auto _ : state) {
    Scratch out;
    std::ofstream(out.path() / "candidate.cu") << "#include <torch/extension.h>\n" << cuda_source();
    std::vector<std::string> argv = {nvcc.string(),
                                     "-shared",
                                     "-Xcompiler",
                                     "-fPIC",
                                     "-cudart",
                                     "shared",
                                     "-std=c++17",
                                     "-O3",
                                     "-gencode=arch=compute_90a,code=sm_90a",
                                     "-I" + default_abi_include_dir().string()};
    for (const auto& d : includes) argv.push_back("-I" + d);
    argv.insert(argv.end(), {"candidate.cu", "-o", "candidate.so"});
    ProcessOptions options;
    options.cwd = out.path();
    options.timeout_s = 1800;
    const ProcessResult r = run_process(argv, options);
    if (!r.ok()) {
      state.SkipWithError(("torch extension baseline failed to compile: " + r.output.substr(0, 2000)).c_str());
      return;
    }
    record(state, "nvcc_torch_extension", r.wall_ms);
  }
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::max(1, std::atoi(v)) : fallback;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double rank = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(rank);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

void print_summary() {
  struct Row {
    std::string name;
    double target_ms;  // 0: none
  };
  // torch_ext has no target of its own; it should take far less than the
  // baseline, which the ratio column shows.
  const std::vector<Row> rows = {
      {"nvrtc", 60}, {"nvrtc_in_process", 0}, {"nvcc", 2500},        {"torch_ext", 0},
      {"cpp", 0},    {"cache_hit_memory", 5}, {"cache_hit_disk", 5}, {"nvcc_torch_extension", 0}};
  const auto& s = samples();
  const auto baseline = s.find("nvcc_torch_extension");
  const double base_p50 = baseline == s.end() || baseline->second.empty() ? 0 : percentile(baseline->second, 0.5);
  std::printf("\n%-22s %4s %11s %11s %10s %13s\n", "case", "n", "p50 ms", "p95 ms", "target", "vs torch ext");
  for (const auto& row : rows) {
    auto it = s.find(row.name);
    if (it == s.end() || it->second.empty()) {
      std::printf("%-22s %4s %11s %11s %10s %13s\n", row.name.c_str(), "-", "-", "-", "-", "-");
      continue;
    }
    const double p50 = percentile(it->second, 0.5);
    const double p95 = percentile(it->second, 0.95);
    char target[32] = "-";
    if (row.target_ms > 0)
      std::snprintf(target, sizeof(target), "%s%.0f", p50 <= row.target_ms ? "<=" : "MISS ", row.target_ms);
    char ratio[32] = "-";
    if (base_p50 > 0 && base_p50 / p50 >= 1e5) {
      std::snprintf(ratio, sizeof(ratio), ">1e5x faster");
    } else if (base_p50 > 0) {
      std::snprintf(ratio, sizeof(ratio), "%.0fx faster", base_p50 / p50);
    }
    if (row.name == "nvcc_torch_extension") std::snprintf(ratio, sizeof(ratio), "baseline");
    std::printf("%-22s %4zu %11.2f %11.2f %10s %13s\n", row.name.c_str(), it->second.size(), p50, p95, target, ratio);
  }
  const auto worker = s.find("nvrtc");
  const auto in_process = s.find("nvrtc_in_process");
  if (worker != s.end() && in_process != s.end() && !worker->second.empty() && !in_process->second.empty()) {
    const double w = percentile(worker->second, 0.5), p = percentile(in_process->second, 0.5);
    std::printf("nvrtc worker vs in process (p50): %.2f ms vs %.2f ms, ratio %.3f (%+.2f ms per compile)\n", w, p,
                w / p, w - p);
  }
  for (const auto& [name, note] : notes()) std::printf("note (%s): %s\n", name.c_str(), note.c_str());
  if (base_p50 == 0) std::printf("note: no torch extension baseline in this run, so no ratios\n");
}

}  // namespace
}  // namespace kforge::env

int main(int argc, char** argv) {
  using namespace kforge::env;
  if (have_nvrtc()) {
    benchmark::RegisterBenchmark("Nvrtc", BM_Nvrtc)->Iterations(20)->UseManualTime()->Unit(benchmark::kMillisecond);
#ifdef KFORGE_BENCH_NVRTC_IN_PROCESS
    benchmark::RegisterBenchmark("NvrtcInProcess", BM_NvrtcInProcess)
        ->Iterations(20)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
#endif
    benchmark::RegisterBenchmark("Nvcc", BM_Nvcc)->Iterations(5)->UseManualTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("TorchExt", BM_TorchExt)
        ->Iterations(5)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("Cpp", BM_Cpp)->Iterations(10)->UseManualTime()->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("CacheHitMemory", BM_CacheHitMemory)
      ->Iterations(200)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("CacheHitDisk", BM_CacheHitDisk)
      ->Iterations(50)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  if (have_nvrtc()) {
    benchmark::RegisterBenchmark("NvccTorchExtension", BM_NvccTorchExtension)
        ->Iterations(env_int("KFORGE_BENCH_TORCH_SAMPLES", 1))
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_summary();
  return 0;
}
