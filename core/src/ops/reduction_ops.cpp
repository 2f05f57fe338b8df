// Reductions over one or more dims (and cumsum, a scan), with torch's keepdim
// and result-dtype rules.
#include <algorithm>

#include "ops/op_helpers.h"

namespace kforge::ops {
namespace {

enum class ReduceDType {
  kSame,           // amax, amin, max, min
  kIntegerToLong,  // sum, prod, cumsum: integers and bool accumulate in int64
  kFloatingOnly,   // mean, logsumexp, var, std, norm
  kIndex,          // argmax, argmin: int64
};

enum class DimKind {
  kList,    // int or list of ints; absent = every dim
  kSingle,  // one int; absent = the whole tensor flattened (keepdim not allowed)
};

struct ReductionDef {
  std::string name;
  std::string doc;
  ReduceDType dtype_rule;
  DimKind dim_kind;
  double flops;  // per input element
  std::vector<AttrSchema> extra_attrs;
};

DType reduce_dtype(const Types& in, ReduceDType rule, const std::string& name) {
  const DType d = in[0].dtype;
  switch (rule) {
    case ReduceDType::kSame:
      return d;
    case ReduceDType::kIntegerToLong:
      return dtype_is_floating(d) ? d : DType::kInt64;
    case ReduceDType::kFloatingOnly:
      require_floating(in, 0);
      return d;
    case ReduceDType::kIndex:
      if (d == DType::kBool) fail(arg_label(in, 0) + " is bool; " + name + " needs a numeric tensor");
      return DType::kInt64;
  }
  return d;
}

TensorType infer_reduction(const Types& in, const json& attrs, const ReductionDef& def) {
  const DType dtype = reduce_dtype(in, def.dtype_rule, def.name);
  const auto& shape = in[0].shape;
  const int64_t ndim = static_cast<int64_t>(shape.size());
  const bool keepdim = get_bool(attrs, "keepdim");
  if (def.dim_kind == DimKind::kSingle && !has(attrs, "dim")) {
    if (keepdim) fail("attr \"keepdim\" needs attr \"dim\" (without a dim the whole tensor reduces to a scalar)");
    return {{}, dtype};
  }
  const std::vector<int64_t> dims = reduce_dims(attrs, "dim", ndim);
  std::vector<int64_t> out;
  for (int64_t d = 0; d < ndim; ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced) {
      out.push_back(shape[d]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  if (def.name == "var" || def.name == "std") {
    int64_t n = 1;
    for (int64_t d : dims) n *= shape[d];
    if (get_int(attrs, "correction") >= n) {
      fail("attr \"correction\" = " + std::to_string(get_int(attrs, "correction")) +
           " leaves no degrees of freedom: " + std::to_string(n) + " element(s) are reduced");
    }
  }
  return {out, dtype};
}

// The `dim` argument in Python; an absent list-dim with keepdim spells out
// every dim so that the rendering does not depend on torch's default.
std::string py_dim(const json& attrs, const std::string& x) {
  if (!has(attrs, "dim")) return "tuple(range(" + x + ".dim()))";
  return py_literal(attrs.at("dim"));
}

std::string py_reduction(const ReductionDef& def, const Args& args, const json& attrs) {
  const std::string& x = args[0];
  const bool keepdim = get_bool(attrs, "keepdim");
  std::string extra;
  for (const auto& a : def.extra_attrs) {
    if (a.name == "p") continue;
    extra += ", " + a.name + "=" + py_literal(attrs.at(a.name));
  }
  if (def.dim_kind == DimKind::kSingle) {
    const bool values_of_pair = def.name == "max" || def.name == "min";
    if (!has(attrs, "dim")) return "torch." + def.name + "(" + x + ")";
    return "torch." + def.name + "(" + x + ", dim=" + py_literal(attrs.at("dim")) + (keepdim ? ", keepdim=True" : "") +
           ")" + (values_of_pair ? "[0]" : "");
  }
  if (def.name == "norm") {
    return "torch.linalg.vector_norm(" + x + ", ord=" + py_literal(attrs.at("p")) +
           (has(attrs, "dim") ? ", dim=" + py_literal(attrs.at("dim")) : "") + (keepdim ? ", keepdim=True" : "") + ")";
  }
  const bool dim_needed = def.name == "logsumexp" || def.name == "amax" || def.name == "amin";
  if (!has(attrs, "dim") && !keepdim && !dim_needed) return "torch." + def.name + "(" + x + extra + ")";
  return "torch." + def.name + "(" + x + ", dim=" + py_dim(attrs, x) + extra + (keepdim ? ", keepdim=True" : "") + ")";
}

// The reductions over a dim or a list of dims, as rows of one table.
std::vector<ReductionDef> reduction_defs() {
  const AttrSchema correction = attr_int("correction", 1, "subtracted from the count in the divisor (1: unbiased)");
  return {
      {"sum", "sum over dim (integers accumulate in int64)", ReduceDType::kIntegerToLong, DimKind::kList, 1, {}},
      {"mean", "arithmetic mean over dim", ReduceDType::kFloatingOnly, DimKind::kList, 1, {}},
      {"amax", "maximum over dim", ReduceDType::kSame, DimKind::kList, 1, {}},
      {"amin", "minimum over dim", ReduceDType::kSame, DimKind::kList, 1, {}},
      {"max",
       "maximum values over one dim (torch.max(x, dim)[0]); no dim: the global max",
       ReduceDType::kSame,
       DimKind::kSingle,
       1,
       {}},
      {"min",
       "minimum values over one dim (torch.min(x, dim)[0]); no dim: the global min",
       ReduceDType::kSame,
       DimKind::kSingle,
       1,
       {}},
      {"prod", "product over one dim (no dim: all elements)", ReduceDType::kIntegerToLong, DimKind::kSingle, 1, {}},
      {"argmax",
       "int64 index of the maximum over one dim (no dim: into the flattened tensor)",
       ReduceDType::kIndex,
       DimKind::kSingle,
       1,
       {}},
      {"argmin",
       "int64 index of the minimum over one dim (no dim: into the flattened tensor)",
       ReduceDType::kIndex,
       DimKind::kSingle,
       1,
       {}},
      {"logsumexp", "log(sum(exp(x))) over dim, computed stably", ReduceDType::kFloatingOnly, DimKind::kList, 4, {}},
      {"var",
       "variance over dim with Bessel-style correction",
       ReduceDType::kFloatingOnly,
       DimKind::kList,
       3,
       {correction}},
      {"std",
       "standard deviation over dim with Bessel-style correction",
       ReduceDType::kFloatingOnly,
       DimKind::kList,
       3,
       {correction}},
      {"norm",
       "vector p-norm over dim (torch.linalg.vector_norm)",
       ReduceDType::kFloatingOnly,
       DimKind::kList,
       3,
       {attr_float("p", 2.0, "order of the norm")}},
  };
}

// A scan keeps the reduced dim: it shares the category, not the table.
void register_cumsum(OpRegistry& r) {
  OpSchema cumsum;
  cumsum.name = "cumsum";
  cumsum.category = OpCategory::kReduction;
  cumsum.attrs = {attr_required("dim", "int", "the dim to scan along")};
  cumsum.doc = "inclusive prefix sum along dim (a scan; integers accumulate in int64)";
  cumsum.infer = [](const Types& in, const json& attrs) {
    wrap_dim(get_int(attrs, "dim"), static_cast<int64_t>(in[0].shape.size()), "dim");
    return TensorType{in[0].shape, dtype_is_floating(in[0].dtype) ? in[0].dtype : DType::kInt64};
  };
  cumsum.flops = flops_per_output(1);
  cumsum.python = [](const Args& args, const Types&, const json& attrs) {
    return py_call("torch.cumsum", args, py_kwargs(attrs, {"dim"}));
  };
  r.add(std::move(cumsum));
}

}  // namespace

void register_reduction_ops(OpRegistry& r) {
  const std::vector<ReductionDef> defs = reduction_defs();
  for (const auto& d : defs) {
    OpSchema s;
    s.name = d.name;
    s.category = OpCategory::kReduction;
    if (d.dim_kind == DimKind::kList) {
      s.attrs.push_back(attr_optional("dim", "int_list", "dim or list of dims to reduce (absent: all)"));
    } else {
      s.attrs.push_back(attr_optional("dim", "int", "dim to reduce (absent: the whole tensor)"));
    }
    s.attrs.push_back(attr_bool("keepdim", false, "keep reduced dims with size 1"));
    for (const auto& a : d.extra_attrs) s.attrs.push_back(a);
    s.doc = d.doc;
    const ReductionDef def = d;
    s.infer = [def](const Types& in, const json& attrs) { return infer_reduction(in, attrs, def); };
    s.flops = flops_per_input(d.flops);
    s.python = [def](const Args& args, const Types&, const json& attrs) { return py_reduction(def, args, attrs); };
    r.add(std::move(s));
  }
  register_cumsum(r);
}

}  // namespace kforge::ops
