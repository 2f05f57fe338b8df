#include "judge/timing_inputs.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "kforge/core/reference.h"
#include "kforge/core/splitmix64.h"

namespace kforge::judge {
namespace {

constexpr double kTwoPi = 6.283185307179586;

at::Tensor rolled(const at::Tensor& t, std::mt19937_64& rng) {
  if (t.numel() < 2) return t.clone();
  std::uniform_int_distribution<int64_t> offset(0, t.numel() - 1);
  return at::roll(t, {offset(rng)});
}

// Sum of two values modulo w, shifted by a random phase: uniform on [0, w)
// when both are.
at::Tensor wrap(const at::Tensor& sum, double w) {
  at::Tensor r = at::remainder(sum, w);
  // Floating remainder may round up to exactly w.
  return r.masked_fill_(r.ge(w), 0);
}

at::Tensor mix(const TensorSpec& spec, const at::Tensor& a_in, const at::Tensor& b_in, std::mt19937_64& rng) {
  const InitSpec& init = spec.init;
  const std::string& kind = init.kind;
  if (kind == "zeros" || kind == "ones" || kind == "arange") return a_in;
  const at::ScalarType dtype = a_in.scalar_type();
  at::Tensor a = rolled(a_in, rng), b = rolled(b_in, rng);
  std::uniform_real_distribution<double> unit(0.0, 1.0);

  if (kind == "randint") {
    const int64_t lo = static_cast<int64_t>(std::ceil(init.low)), hi = static_cast<int64_t>(std::ceil(init.high));
    const int64_t w = hi - lo;
    if (w <= 1) return a;
    std::uniform_int_distribution<int64_t> shift(0, w - 1);
    at::Tensor sum = (a.to(at::kLong) - lo) + (b.to(at::kLong) - lo) + shift(rng);
    return (at::remainder(sum, w) + lo).to(dtype);
  }
  if (!dtype_is_floating(spec.dtype)) return a;  // float inits of integer tensors: truncated draws

  const at::ScalarType compute = dtype == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor x = a.to(compute), y = b.to(compute);
  if (kind == "normal") {
    const double theta = kTwoPi * unit(rng);
    return ((x - init.mean) * std::cos(theta) + (y - init.mean) * std::sin(theta) + init.mean).to(dtype);
  }
  double lo = 0, hi = 0;
  if (kind == "uniform") {
    lo = init.low;
    hi = init.high;
  } else if (kind == "kaiming_uniform" || kind == "xavier_uniform") {
    hi = init_uniform_bound(spec);
    lo = -hi;
  } else {
    return a;  // positive, bernoulli: rolled only
  }
  const double w = hi - lo;
  if (!(w > 0)) return a;
  return (wrap((x - lo) + (y - lo) + unit(rng) * w, w) + lo).to(dtype);
}

}  // namespace

TimingInputs::TimingInputs(const TaskSpec& task, int pool_sets, uint64_t seed, const at::Device& device)
    : specs_(task.kernel_inputs()), seed_(seed) {
  for (int k = 0; k < std::max(pool_sets, 2); ++k) {
    pool_.push_back(ref::make_inputs(task, seed + static_cast<uint64_t>(k), device));
  }
}

std::vector<at::Tensor> TimingInputs::round(uint64_t round) const {
  const size_t k = pool_.size();
  // Two different sets, the pair changing from round to round.
  const size_t a = round % k;
  const size_t b = (a + 1 + (round / k) % (k - 1)) % k;
  std::mt19937_64 rng(splitmix64(seed_ ^ splitmix64(round)));
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < specs_.size(); ++i) out.push_back(mix(specs_[i], pool_[a][i], pool_[b][i], rng));
  return out;
}

}  // namespace kforge::judge
