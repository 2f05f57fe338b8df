// softmax and log_softmax along one dim.
#include "ops/op_helpers.h"

namespace kforge::ops {

void register_softmax_ops(OpRegistry& r) {
  for (const std::string name : {"softmax", "log_softmax"}) {
    OpSchema s;
    s.name = name;
    s.category = OpCategory::kSoftmax;
    s.attrs = {attr_int("dim", -1, "the dim that sums to one (negative counts from the end)")};
    s.doc = name == "softmax" ? "exp(x) / sum(exp(x)) along dim" : "x - logsumexp(x) along dim";
    s.infer = [](const Types& in, const json& attrs) {
      require_floating(in, 0);
      wrap_dim(get_int(attrs, "dim"), static_cast<int64_t>(in[0].shape.size()), "dim");
      return TensorType{in[0].shape, in[0].dtype};
    };
    s.flops = flops_per_output(5);
    const std::string fn = "F." + name;
    s.python = [fn](const Args& args, const Types&, const json& attrs) {
      return py_call(fn, args, py_kwargs(attrs, {"dim"}));
    };
    r.add(std::move(s));
  }
}

}  // namespace kforge::ops
