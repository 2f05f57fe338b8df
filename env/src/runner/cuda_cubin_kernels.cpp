#include "runner/cuda_cubin_kernels.h"

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "runner/cuda_errors.h"

namespace kforge::runner {
namespace {

class CudaCubinKernels final : public CubinKernels {
 public:
  CudaCubinKernels(const std::string& image, const std::vector<std::string>& names, cudaStream_t stream, int device,
                   DeviceAllowance::LocalMemory* local_memory)
      : stream_(stream), local_memory_(local_memory) {
    int optin = 0;
    check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
          "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
    max_shared_bytes_ = static_cast<size_t>(optin);
    // Eager module loading (initialize()) loads the library into the context
    // here; the image is copied by the driver, so it need not outlive the call.
    cudaError_t e = cudaLibraryLoadData(&library_, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (e != cudaSuccess) {
      cudaGetLastError();
      library_ = nullptr;
      throw std::runtime_error("loading the CUBIN onto the device failed: " + error_text(e));
    }
    try {
      resolve(names);
    } catch (...) {
      cudaLibraryUnload(library_);
      library_ = nullptr;
      throw;
    }
  }

  ~CudaCubinKernels() override {
    // Usually never reached (the judge SIGKILLs runners).
    if (library_ != nullptr) cudaLibraryUnload(library_);
  }

  void prepare(size_t index, const env::KernelLaunch& launch) override {
    const Kernel& k = kernels_.at(index);
    const int64_t threads = int64_t{launch.block[0]} * launch.block[1] * launch.block[2];
    if (threads > k.attributes.maxThreadsPerBlock) {
      throw std::runtime_error("block = " + std::to_string(threads) + " threads, but this kernel can run at most " +
                               std::to_string(k.attributes.maxThreadsPerBlock) +
                               " per block (its registers or __launch_bounds__)");
    }
    const size_t total = static_cast<size_t>(launch.shared_mem_bytes) + k.attributes.sharedSizeBytes;
    if (total > max_shared_bytes_) {
      throw std::runtime_error("shared_mem = " + std::to_string(launch.shared_mem_bytes) + " bytes plus " +
                               std::to_string(k.attributes.sharedSizeBytes) +
                               " bytes of static shared memory exceed the device's " +
                               std::to_string(max_shared_bytes_) + " bytes per block");
    }
    // A kernel may use up to 48 KiB of shared memory per block (less its
    // static shared memory, as maxDynamicSharedSizeBytes says) without opting
    // in; beyond that its limit must be raised. Only ever raised: several
    // plan entries may launch the same kernel.
    int& allowed = shared_allowed_.try_emplace(k.kernel, k.attributes.maxDynamicSharedSizeBytes).first->second;
    if (static_cast<int64_t>(launch.shared_mem_bytes) <= allowed) return;
    cudaError_t e =
        cudaFuncSetAttribute(reinterpret_cast<const void*>(k.kernel), cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(launch.shared_mem_bytes));
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw std::runtime_error("shared_mem = " + std::to_string(launch.shared_mem_bytes) +
                               " bytes: cudaFuncSetAttribute(MaxDynamicSharedMemorySize) failed: " + error_text(e));
    }
    allowed = static_cast<int>(launch.shared_mem_bytes);
  }

  std::string launch(size_t index, const env::KernelLaunch& launch, void** params) override {
    const dim3 grid(launch.grid[0], launch.grid[1], launch.grid[2]);
    const dim3 block(launch.block[0], launch.block[1], launch.block[2]);
    cudaError_t e = cudaLaunchKernel(reinterpret_cast<const void*>(kernels_[index].kernel), grid, block, params,
                                     launch.shared_mem_bytes, stream_);
    if (e == cudaSuccess) return {};
    // A refused launch (configuration, resources) is not sticky: clear it, so
    // that the call reports this message instead of a bare pending error. A
    // sticky fault stays and surfaces at the call's stream synchronization.
    cudaGetLastError();
    return "cudaLaunchKernel failed: " + error_text(e);
  }

 private:
  // Each kernel by its lowered name, with its attributes.
  void resolve(const std::vector<std::string>& names) {
    for (size_t i = 0; i < names.size(); ++i) {
      cudaKernel_t kernel = nullptr;
      cudaError_t e = cudaLibraryGetKernel(&kernel, library_, names[i].c_str());
      if (e != cudaSuccess) {
        cudaGetLastError();
        throw std::runtime_error("the CUBIN has no kernel " + names[i] + " (launch.kernels[" + std::to_string(i) +
                                 "]): " + error_text(e));
      }
      // Querying the attributes needs the kernel in this context: should
      // loading be lazy after all, it happens now, in the loading phase, and
      // not at the first launch under the running filter.
      cudaFuncAttributes attributes{};
      e = cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(kernel));
      if (e != cudaSuccess) {
        cudaGetLastError();
        throw std::runtime_error("cannot load kernel " + names[i] + " onto the device: " + error_text(e));
      }
      // The attribute path that prepare() may take under the running filter,
      // once here with the value it already has (as warm_up() does for the
      // paths of a call). Only a warm-up: prepare() reports real failures.
      if (cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), cudaFuncAttributeMaxDynamicSharedMemorySize,
                               attributes.maxDynamicSharedSizeBytes) != cudaSuccess) {
        cudaGetLastError();
      }
      kernels_.push_back({kernel, attributes});
      if (local_memory_ != nullptr && attributes.localSizeBytes > local_memory_->per_thread) {
        local_memory_->kernel = names[i];
        local_memory_->per_thread = attributes.localSizeBytes;
      }
    }
  }

  struct Kernel {
    cudaKernel_t kernel;
    cudaFuncAttributes attributes;
  };
  cudaStream_t stream_;
  DeviceAllowance::LocalMemory* local_memory_;
  size_t max_shared_bytes_ = 0;
  cudaLibrary_t library_ = nullptr;
  std::vector<Kernel> kernels_;
  std::map<cudaKernel_t, int> shared_allowed_;  // current dynamic shared memory limit
};

}  // namespace

std::unique_ptr<CubinKernels> load_cuda_cubin(const std::string& image, const std::vector<std::string>& names,
                                              cudaStream_t stream, int device,
                                              DeviceAllowance::LocalMemory* local_memory) {
  return std::make_unique<CudaCubinKernels>(image, names, stream, device, local_memory);
}

}  // namespace kforge::runner
