// Seeded creation of a task's kernel inputs, directly on the target device.
#include <cmath>
#include <mutex>
#include <string>

#include "kforge/core/fnv1a.h"
#include "kforge/core/reference.h"
#include "kforge/core/splitmix64.h"

namespace kforge::ref {
namespace {

// A private generator of the device's kind, so that neither the global
// generator's state nor other threads' draws can change our values.
at::Generator seeded_generator(const at::Device& device, uint64_t seed) {
  at::Generator base = at::globalContext().defaultGenerator(device);
  at::Generator gen;
  {
    std::lock_guard<std::mutex> lock(base.mutex());
    gen = base.clone();
  }
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_current_seed(seed);
  return gen;
}

at::Tensor draw(const TensorSpec& spec, const at::Device& device, at::Generator& gen) {
  const InitSpec& init = spec.init;
  const at::ScalarType dtype = to_scalar_type(spec.dtype);
  // Floating values are drawn in float32 (float64 for float64 tensors) and
  // converted, so float16/bfloat16 and integer tensors see the same stream.
  const at::ScalarType draw_type = spec.dtype == DType::kFloat64 ? at::kDouble : at::kFloat;
  const at::TensorOptions opts = at::TensorOptions().device(device);
  const at::IntArrayRef shape(spec.shape);
  if (init.kind == "zeros") return at::zeros(shape, opts.dtype(dtype));
  if (init.kind == "ones") return at::ones(shape, opts.dtype(dtype));
  if (init.kind == "arange") return at::arange(spec.numel(), opts.dtype(at::kLong)).reshape(shape).to(dtype);
  if (init.kind == "randint") {
    const int64_t low = static_cast<int64_t>(std::ceil(init.low));
    const int64_t high = static_cast<int64_t>(std::ceil(init.high));
    if (low >= high) {
      throw InputError("tensor \"" + spec.name + "\": randint range [" + std::to_string(init.low) + ", " +
                       std::to_string(init.high) + ") holds no integer");
    }
    return at::empty(shape, opts.dtype(at::kLong)).random_(low, high, gen).to(dtype);
  }
  at::Tensor t = at::empty(shape, opts.dtype(draw_type));
  if (init.kind == "normal") {
    t.normal_(init.mean, init.std, gen);
  } else if (init.kind == "uniform") {
    t.uniform_(init.low, init.high, gen);
  } else if (init.kind == "positive") {
    t.normal_(init.mean, init.std, gen).abs_().add_(init.low);
  } else if (init.kind == "kaiming_uniform" || init.kind == "xavier_uniform") {
    const double bound = init_uniform_bound(spec);
    t.uniform_(-bound, bound, gen);
  } else if (init.kind == "bernoulli") {
    t.bernoulli_(init.mean, gen);
  } else {
    throw InputError("tensor \"" + spec.name + "\": unknown init kind \"" + init.kind + "\"");
  }
  return t.to(dtype);
}

}  // namespace

uint64_t tensor_seed(uint64_t seed, const std::string& name) { return splitmix64(splitmix64(seed) ^ fnv1a(name)); }

std::vector<at::Tensor> make_inputs(const TaskSpec& task, uint64_t seed, const at::Device& device) {
  std::vector<at::Tensor> out;
  for (const auto& spec : task.kernel_inputs()) {
    at::Generator gen = seeded_generator(device, tensor_seed(seed, spec.name));
    out.push_back(draw(spec, device, gen));
  }
  return out;
}

}  // namespace kforge::ref
