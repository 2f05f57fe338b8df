#include "runner/plan_candidate.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <stdexcept>
#include <utility>

#include "kforge/core/errno_text.h"
#include "kforge/core/unique_fd.h"

namespace kforge::runner {
namespace {

// Larger than any CUBIN NVRTC writes for one solution by orders of magnitude;
// only bounds what a corrupt path could make the runner read.
constexpr off_t kMaxCubinBytes = off_t{1} << 30;

std::string read_cubin(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw std::runtime_error("cannot open the CUBIN " + path + ": " + errno_text(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw std::runtime_error("cannot stat the CUBIN " + path + ": " + errno_text(errno));
  if (st.st_size <= 0 || st.st_size > kMaxCubinBytes) {
    throw std::runtime_error("the CUBIN " + path + " has " + std::to_string(st.st_size) + " bytes");
  }
  std::string image(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < image.size()) {
    ssize_t n = ::read(fd.get(), image.data() + done, image.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("cannot read the CUBIN " + path + ": " + errno_text(n < 0 ? errno : EIO));
    done += static_cast<size_t>(n);
  }
  return image;
}

std::string kernel_label(size_t index, const std::string& name) {
  return "kernels[" + std::to_string(index) + "] (" + name + ")";
}

class PlanCandidate final : public Candidate {
 public:
  PlanCandidate(env::LaunchPlan plan, std::vector<std::string> tensor_names, std::unique_ptr<CubinKernels> kernels,
                const env::LaunchLimits& limits)
      : plan_(std::move(plan)), names_(std::move(tensor_names)), kernels_(std::move(kernels)), limits_(limits) {}

  void bind(std::vector<kf_tensor> inputs, std::vector<kf_tensor> outputs) override {
    // Unbound until everything below succeeded: a call after a failed bind
    // must not launch the previous case's kernels on this case's tensors.
    launches_.clear();
    params_.clear();
    if (inputs.size() + outputs.size() != names_.size()) {
      throw std::runtime_error("the launch plan was set up for " + std::to_string(names_.size()) + " tensors, but " +
                               std::to_string(inputs.size() + outputs.size()) + " were bound");
    }
    env::ShapeMap shapes;
    std::map<std::string, void*> pointers;
    for (size_t i = 0; i < names_.size(); ++i) {
      const kf_tensor& t = i < inputs.size() ? inputs[i] : outputs[i - inputs.size()];
      shapes[names_[i]] = std::vector<int64_t>(t.shape, t.shape + t.ndim);
      pointers[names_[i]] = t.data;
    }
    std::vector<env::KernelLaunch> launches;
    try {
      launches = env::evaluate_launch_plan(plan_, shapes, limits_);
      for (auto& launch : launches) launch.bind_tensors(pointers);
    } catch (const env::LaunchError& e) {
      throw std::runtime_error(std::string("launch plan: ") + e.what());
    }
    for (size_t i = 0; i < launches.size(); ++i) {
      try {
        kernels_->prepare(i, launches[i]);
      } catch (const std::exception& e) {
        throw std::runtime_error("launch plan: " + kernel_label(i, launches[i].name) + ": " + e.what());
      }
    }
    // The parameter arrays point into each launch's argument buffer, which a
    // move of the vector keeps in place; they are taken once the launches
    // sit where they stay.
    launches_ = std::move(launches);
    params_.reserve(launches_.size());
    for (auto& launch : launches_) params_.push_back(launch.kernel_params());
  }

  int forward() override {
    error_.clear();
    if (launches_.empty()) {
      error_ = "no tensors are bound to the launch plan";
      return 1;
    }
    for (size_t i = 0; i < launches_.size(); ++i) {
      std::string failed = kernels_->launch(i, launches_[i], params_[i].data());
      if (!failed.empty()) {
        error_ = kernel_label(i, launches_[i].name) + ": " + failed;
        return 1;
      }
    }
    return 0;
  }

 private:
  env::LaunchPlan plan_;
  std::vector<std::string> names_;
  std::unique_ptr<CubinKernels> kernels_;
  env::LaunchLimits limits_;
  std::vector<env::KernelLaunch> launches_;
  std::vector<std::vector<void*>> params_;
};

}  // namespace

std::unique_ptr<Candidate> make_plan_candidate(env::LaunchPlan plan, std::vector<std::string> tensor_names,
                                               std::unique_ptr<CubinKernels> kernels, const env::LaunchLimits& limits) {
  return std::make_unique<PlanCandidate>(std::move(plan), std::move(tensor_names), std::move(kernels), limits);
}

std::unique_ptr<Candidate> load_plan_candidate(const nlohmann::json& setup, const CubinLoader& load,
                                               const env::LaunchLimits& limits) {
  auto names = setup.at("tensors").get<std::vector<std::string>>();
  env::LaunchPlan plan;
  try {
    // The judge sends the plan the NVRTC compiler normalized; parsing it again
    // here keeps the runner from trusting anything but its own reading.
    plan = env::parse_launch_plan(setup.at("launch"), names, "<launch plan>", "/launch");
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("launch plan: ") + e.what());
  }
  std::vector<std::string> lowered;
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    if (plan.kernels[i].lowered_name.empty()) {
      throw std::runtime_error("launch plan: " + kernel_label(i, plan.kernels[i].name) +
                               " has no lowered_name (the plan did not come from the NVRTC compiler)");
    }
    lowered.push_back(plan.kernels[i].lowered_name);
  }
  std::string image = read_cubin(setup.at("cubin").get<std::string>());
  std::unique_ptr<CubinKernels> kernels = load(image, lowered);
  return make_plan_candidate(std::move(plan), std::move(names), std::move(kernels), limits);
}

}  // namespace kforge::runner
