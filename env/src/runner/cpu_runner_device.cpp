#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "kforge/core/errno_text.h"
#include "runner/runner_device.h"

namespace kforge::runner {
namespace {

class CpuRunnerDevice final : public RunnerDevice {
 public:
  ~CpuRunnerDevice() override {
    if (base_ != nullptr) ::munmap(base_, bytes_);
  }

  void map_arena(const nlohmann::json& arena, std::vector<UniqueFd>* fds) override {
    if (arena.value("kind", "") != "memfd" || fds->empty()) {
      throw std::runtime_error("cpu runner expects a memfd arena with its descriptor");
    }
    bytes_ = arena.at("bytes").get<uint64_t>();
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, (*fds)[0].get(), 0);
    if (p == MAP_FAILED) throw std::runtime_error(std::string("mmap arena: ") + errno_text(errno));
    base_ = static_cast<char*>(p);
    // The mapping keeps the memory alive; the descriptor would only be a
    // handle for the candidate to remap the arena with.
    fds->clear();
    for (const auto& guard : arena.at("guards")) {
      auto offset = guard.at(0).get<uint64_t>();
      auto length = guard.at(1).get<uint64_t>();
      if (offset + length > bytes_) throw std::runtime_error("guard page outside the arena");
      if (::mprotect(base_ + offset, length, PROT_NONE) != 0) {
        throw std::runtime_error(std::string("mprotect guard: ") + errno_text(errno));
      }
    }
  }

  void* arena_address(uint64_t offset) const override { return base_ + offset; }
  uint64_t arena_bytes() const override { return bytes_; }
  void* stream() override { return nullptr; }
  void synchronize() override {}
  std::vector<std::string> extra_syscalls() const override { return {}; }

 private:
  char* base_ = nullptr;
  uint64_t bytes_ = 0;
};

}  // namespace

std::unique_ptr<RunnerDevice> make_cpu_runner_device() { return std::make_unique<CpuRunnerDevice>(); }

}  // namespace kforge::runner
