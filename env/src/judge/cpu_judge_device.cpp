#include "judge/cpu_judge_device.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "common/errno_text.h"
#include "common/unique_fd.h"
#include "judge/cpu_cache.h"

namespace kforge::judge {
namespace {

// Anonymous shared memory, sealed against resizing: a runner that shrank it
// would make the judge's next access to the arena fault.
class MemfdArena final : public SharedArena {
 public:
  explicit MemfdArena(const exec::ArenaLayout& layout) : layout_(layout) {
    fd_.reset(::memfd_create("kforge-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!fd_) throw std::runtime_error(std::string("memfd_create: ") + exec::errno_text(errno));
    if (::ftruncate(fd_.get(), static_cast<off_t>(layout_.size)) != 0) {
      throw std::runtime_error(std::string("ftruncate arena: ") + exec::errno_text(errno));
    }
    if (::fcntl(fd_.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
      throw std::runtime_error(std::string("seal arena: ") + exec::errno_text(errno));
    }
    void* p = ::mmap(nullptr, layout_.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
    if (p == MAP_FAILED) throw std::runtime_error(std::string("mmap arena: ") + exec::errno_text(errno));
    base_ = static_cast<char*>(p);
  }
  ~MemfdArena() override { ::munmap(base_, layout_.size); }

  const exec::ArenaLayout& layout() const override { return layout_; }
  json descriptor() const override {
    json guards = json::array();
    for (const auto& [offset, length] : layout_.guards) guards.push_back({offset, length});
    return {{"kind", "memfd"}, {"bytes", layout_.size}, {"guards", guards}};
  }
  std::vector<int> descriptors() const override { return {fd_.get()}; }
  at::Tensor view(uint64_t offset, at::IntArrayRef shape, at::ScalarType type) override {
    return at::from_blob(base_ + offset, shape, at::TensorOptions().dtype(type).device(at::kCPU));
  }

 private:
  exec::ArenaLayout layout_;
  exec::UniqueFd fd_;
  char* base_ = nullptr;
};

std::string cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    auto value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    return value;
  }
  return "";
}

class CpuJudgeDevice final : public JudgeDevice {
 public:
  CpuJudgeDevice() : cache_(detect_last_level_cache()), flusher_(cache_.bytes) {
    name_ = cpuinfo_field("model name");
    if (name_.empty()) name_ = "unknown CPU";
  }

  std::string backend() const override { return "cpu"; }
  std::string name() const override { return name_; }
  at::Device device() const override { return at::Device(at::kCPU); }
  uint64_t page_size() const override { return static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)); }
  std::unique_ptr<SharedArena> create_arena(const exec::ArenaLayout& layout) override {
    return std::make_unique<MemfdArena>(layout);
  }
  void flush_cache() override { flusher_.flush(); }
  uint64_t flush_bytes() const override { return flusher_.bytes(); }
  void synchronize() override {}
  double time_ms(const std::function<void()>& fn) override {
    auto start = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  bool work_is_host_cpu_time() const override { return true; }
  json clocks() override {
    json j = {{"llc_bytes", cache_.bytes}, {"llc_source", cache_.source}, {"threads", 1}};
    std::string mhz = cpuinfo_field("cpu MHz");
    if (!mhz.empty()) j["cpu_mhz"] = std::strtod(mhz.c_str(), nullptr);
    return j;
  }

 private:
  std::string name_;
  CacheSize cache_;
  CacheFlusher flusher_;
};

}  // namespace

std::unique_ptr<JudgeDevice> make_cpu_judge_device() { return std::make_unique<CpuJudgeDevice>(); }

}  // namespace kforge::judge
