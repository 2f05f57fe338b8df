#include "kforge/core/tensor_spec.h"

#include <limits>

namespace kforge {

static_assert(limits::kMaxTensorRank == KF_MAX_DIMS, "the rank limit is the ABI's kf_tensor capacity");

const std::vector<std::string>& InitSpec::kinds() {
  static const std::vector<std::string> kKinds = {"normal",          "uniform",        "zeros",    "ones",
                                                  "kaiming_uniform", "xavier_uniform", "positive", "randint",
                                                  "bernoulli",       "arange"};
  return kKinds;
}

int64_t saturating_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (__builtin_mul_overflow(n, d, &n)) return std::numeric_limits<int64_t>::max();
  }
  return n;
}

std::string check_shape_limits(const std::vector<int64_t>& shape) {
  if (shape.size() > limits::kMaxTensorRank) {
    return "rank " + std::to_string(shape.size()) + " is more than the " + std::to_string(limits::kMaxTensorRank) +
           " dimensions the kernel ABI holds (limits::kMaxTensorRank)";
  }
  for (int64_t d : shape) {
    if (d < 0) return "shape " + shape_to_string(shape) + " has a negative dimension";
  }
  const int64_t n = saturating_numel(shape);
  if (n > limits::kMaxTensorElements) {
    const std::string count = n == std::numeric_limits<int64_t>::max() ? "more than 2^63" : std::to_string(n);
    return "shape " + shape_to_string(shape) + " has " + count + " elements; a tensor may have at most " +
           std::to_string(limits::kMaxTensorElements) + " (limits::kMaxTensorElements)";
  }
  return "";
}

int64_t TensorSpec::numel() const { return saturating_numel(shape); }

size_t TensorSpec::nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }

json to_json(const InitSpec& init) {
  json j = {{"kind", init.kind}};
  if (init.kind == "normal") {
    j["mean"] = init.mean;
    j["std"] = init.std;
  } else if (init.kind == "uniform" || init.kind == "randint") {
    j["low"] = init.low;
    j["high"] = init.high;
  } else if (init.kind == "positive") {
    j["low"] = init.low;
  } else if (init.kind == "bernoulli") {
    j["mean"] = init.mean;
  }
  return j;
}

json to_json(const TensorSpec& spec) {
  json init = to_json(spec.init);
  // Write the short form when every parameter is at its default.
  InitSpec defaults;
  defaults.kind = spec.init.kind;
  if (spec.init.kind == "randint") {
    defaults.low = 0;
    defaults.high = 10;
  } else if (spec.init.kind == "positive") {
    defaults.low = 1e-3;
  } else if (spec.init.kind == "bernoulli") {
    defaults.mean = 0.5;
  }
  if (to_json(defaults) == init) init = spec.init.kind;
  return {{"name", spec.name}, {"shape", spec.shape}, {"dtype", dtype_name(spec.dtype)}, {"init", init}};
}

InitSpec parse_init_spec(const Field& field) {
  InitSpec init;
  auto set_defaults = [&init] {
    if (init.kind == "randint") {
      init.low = 0;
      init.high = 10;
    } else if (init.kind == "positive") {
      init.low = 1e-3;
    } else if (init.kind == "bernoulli") {
      init.mean = 0.5;
    }
  };
  if (field.value().is_string()) {
    init.kind = field.as_enum(InitSpec::kinds());
    set_defaults();
    return init;
  }
  if (!field.value().is_object()) {
    field.fail("an init kind (\"normal\", \"uniform\", ...) or an object {\"kind\": ..., parameters}");
  }
  ObjectReader r = field.as_object();
  init.kind = r.required("kind").as_enum(InitSpec::kinds());
  set_defaults();
  if (auto f = r.optional("mean")) init.mean = f->as_number();
  if (auto f = r.optional("std")) init.std = f->as_positive_number();
  if (auto f = r.optional("low")) init.low = f->as_number();
  if (auto f = r.optional("high")) init.high = f->as_number();
  r.finish();
  if ((init.kind == "uniform" || init.kind == "randint") && !(init.low < init.high)) {
    field.fail_message("\"low\" must be below \"high\" (got " + std::to_string(init.low) + " and " +
                       std::to_string(init.high) + ")");
  }
  if (init.kind == "bernoulli" && (init.mean < 0 || init.mean > 1)) {
    field.fail_message("bernoulli \"mean\" is a probability in [0, 1]");
  }
  return init;
}

TensorSpec parse_tensor_spec(const Field& field) {
  ObjectReader r = field.as_object();
  TensorSpec spec;
  Field name = r.required("name");
  spec.name = name.as_string();
  if (spec.name.empty()) name.fail("a non-empty name");
  if (spec.name.size() > limits::kMaxNameBytes) {
    name.fail("a name of at most " + std::to_string(limits::kMaxNameBytes) + " bytes (limits::kMaxNameBytes)");
  }
  Field shape = r.required("shape");
  spec.shape = shape.as_shape();
  // Before anything allocates or infers from it.
  if (std::string why = check_shape_limits(spec.shape); !why.empty()) shape.fail_message(why);
  if (auto f = r.optional("dtype")) {
    std::string d = f->as_enum(dtype_names());
    parse_dtype(d, &spec.dtype);
  }
  if (auto f = r.optional("init")) {
    spec.init = parse_init_spec(*f);
  } else if (!dtype_is_floating(spec.dtype)) {
    spec.init.kind = spec.dtype == DType::kBool ? "bernoulli" : "randint";
    spec.init.low = 0;
    spec.init.high = 10;
    spec.init.mean = 0.5;
  }
  r.finish();
  return spec;
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace kforge
