#include "runner/candidate_library.h"

#include <dlfcn.h>

#include <stdexcept>
#include <utility>
#include <vector>

namespace kforge::runner {
namespace {

class LibraryCandidate final : public Candidate {
 public:
  LibraryCandidate(KfForward entry, RunnerDevice* device) : forward_(entry), device_(device) {}

  void bind(std::vector<kf_tensor> inputs, std::vector<kf_tensor> outputs) override {
    inputs_ = std::move(inputs);
    outputs_ = std::move(outputs);
  }

  int forward() override {
    return forward_(inputs_.data(), static_cast<int>(inputs_.size()), outputs_.data(),
                    static_cast<int>(outputs_.size()), device_->stream());
  }

 private:
  KfForward forward_;
  RunnerDevice* device_;
  std::vector<kf_tensor> inputs_, outputs_;
};

}  // namespace

std::unique_ptr<Candidate> load_library_candidate(const std::string& path, RunnerDevice* device) {
  // RTLD_NOW: unresolved symbols fail here, not in the middle of a timed call.
  // RTLD_LOCAL: nothing the candidate defines can interpose on later lookups.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = ::dlerror();
    throw std::runtime_error(e ? e : "dlopen failed");
  }
  ::dlerror();
  void* sym = ::dlsym(handle, "kf_forward");
  if (sym == nullptr) {
    const char* e = ::dlerror();
    throw std::runtime_error(e ? e : "kf_forward not found");
  }
  return std::make_unique<LibraryCandidate>(reinterpret_cast<KfForward>(sym), device);
}

}  // namespace kforge::runner
