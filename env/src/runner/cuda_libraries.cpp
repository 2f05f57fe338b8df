#include "runner/cuda_libraries.h"

#include <dlfcn.h>
#include <link.h>

#include <utility>

namespace kforge::runner {

// Libraries a task may allow (cuBLAS, cuBLASLt) initialize process-wide
// state on their first handle: they read device and driver files, which
// the running filter refuses. If the candidate links them, one handle is
// created here, under the loading filter (read-only opens allowed), and kept,
// so that the candidate's own handle creation inside kf_forward finds that
// state ready. Found with RTLD_NOLOAD: nothing new is loaded.
void warm_up_libraries(std::vector<void*>* handles) {
  using Create = int (*)(void**);
  for (const auto& [soname, symbol] : {std::pair<const char*, const char*>{"libcublas.so.13", "cublasCreate_v2"},
                                       {"libcublas.so.12", "cublasCreate_v2"},
                                       {"libcublasLt.so.13", "cublasLtCreate"},
                                       {"libcublasLt.so.12", "cublasLtCreate"}}) {
    void* lib = ::dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr) continue;
    if (auto create = reinterpret_cast<Create>(::dlsym(lib, symbol))) {
      void* handle = nullptr;
      if (create(&handle) == 0) handles->push_back(handle);
    }
    // The candidate's own reference keeps the library loaded.
    ::dlclose(lib);
  }
}

// The shared objects in the process (dl_iterate_phdr: no system call).
std::vector<std::string> loaded_objects() {
  std::vector<std::string> names;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        static_cast<std::vector<std::string>*>(data)->emplace_back(info->dlpi_name != nullptr ? info->dlpi_name : "");
        return 0;
      },
      &names);
  return names;
}

}  // namespace kforge::runner
