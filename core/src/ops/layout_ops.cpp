// Layout ops: reshape, permute, concatenate and select data without
// arithmetic. Any dtype; outputs keep the input dtype.
#include <algorithm>
#include <set>

#include "ops/op_helpers.h"

namespace kforge::ops {
namespace {

int64_t rank(const Types& in, size_t i = 0) { return static_cast<int64_t>(in[i].shape.size()); }

TensorType infer_transpose(const Types& in, const json& attrs) {
  std::vector<int64_t> shape = in[0].shape;
  if (shape.empty()) return {shape, in[0].dtype};
  const int64_t a = wrap_dim(get_int(attrs, "dim0"), rank(in), "dim0");
  const int64_t b = wrap_dim(get_int(attrs, "dim1"), rank(in), "dim1");
  std::swap(shape[a], shape[b]);
  return {shape, in[0].dtype};
}

TensorType infer_permute(const Types& in, const json& attrs) {
  const std::vector<int64_t> dims = get_int_list(attrs, "dims");
  if (static_cast<int64_t>(dims.size()) != rank(in)) {
    fail("attr \"dims\" = " + shape_to_string(dims) + " must list each of the " + std::to_string(rank(in)) +
         " dims of " + arg_of_shape(in, 0) + " once");
  }
  std::set<int64_t> seen;
  std::vector<int64_t> shape;
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, rank(in), "dims");
    if (!seen.insert(w).second) fail("attr \"dims\" = " + shape_to_string(dims) + " repeats dim " + std::to_string(w));
    shape.push_back(in[0].shape[w]);
  }
  return {shape, in[0].dtype};
}

TensorType infer_reshape(const Types& in, const json& attrs) {
  std::vector<int64_t> shape = get_int_list(attrs, "shape");
  int64_t known = 1;
  int infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer_at >= 0) fail("attr \"shape\" = " + shape_to_string(shape) + " has more than one -1");
      infer_at = static_cast<int>(i);
    } else if (shape[i] < 1) {
      fail("attr \"shape\" = " + shape_to_string(shape) + " may hold positive sizes and one -1 only");
    } else if (__builtin_mul_overflow(known, shape[i], &known)) {
      fail("attr \"shape\" = " + shape_to_string(shape) + " has more elements than fit in 64 bits");
    }
  }
  const int64_t numel = in[0].numel();
  if (infer_at >= 0) {
    if (numel % known != 0) {
      fail("cannot reshape " + arg_of_shape(in, 0) + " (" + std::to_string(numel) + " elements) into " +
           shape_to_string(shape) + ": " + std::to_string(numel) + " is not a multiple of " + std::to_string(known));
    }
    shape[infer_at] = numel / known;
  } else if (known != numel) {
    fail("cannot reshape " + arg_of_shape(in, 0) + " (" + std::to_string(numel) + " elements) into " +
         shape_to_string(shape) + " (" + std::to_string(known) + " elements)");
  }
  return {shape, in[0].dtype};
}

TensorType infer_flatten(const Types& in, const json& attrs) {
  if (in[0].shape.empty()) return {{1}, in[0].dtype};
  const int64_t s = wrap_dim(get_int(attrs, "start_dim"), rank(in), "start_dim");
  const int64_t e = wrap_dim(get_int(attrs, "end_dim"), rank(in), "end_dim");
  if (s > e) fail("attr \"start_dim\" (" + std::to_string(s) + ") comes after \"end_dim\" (" + std::to_string(e) + ")");
  std::vector<int64_t> shape(in[0].shape.begin(), in[0].shape.begin() + s);
  shape.push_back(product(in[0].shape, s, e + 1));
  shape.insert(shape.end(), in[0].shape.begin() + e + 1, in[0].shape.end());
  return {shape, in[0].dtype};
}

TensorType infer_squeeze(const Types& in, const json& attrs) {
  std::vector<int64_t> shape;
  if (!has(attrs, "dim")) {
    for (int64_t d : in[0].shape) {
      if (d != 1) shape.push_back(d);
    }
    return {shape, in[0].dtype};
  }
  shape = in[0].shape;
  if (shape.empty()) return {shape, in[0].dtype};
  const int64_t d = wrap_dim(get_int(attrs, "dim"), rank(in), "dim");
  if (shape[d] == 1) shape.erase(shape.begin() + d);  // like torch: a dim of size > 1 is left alone
  return {shape, in[0].dtype};
}

TensorType infer_unsqueeze(const Types& in, const json& attrs) {
  std::vector<int64_t> shape = in[0].shape;
  const int64_t d = wrap_dim(get_int(attrs, "dim"), rank(in) + 1, "dim");
  shape.insert(shape.begin() + d, 1);
  return {shape, in[0].dtype};
}

TensorType infer_cat(const Types& in, const json& attrs) {
  for (size_t i = 1; i < in.size(); ++i) require_same_dtype(in, 0, i);
  if (in[0].shape.empty()) fail(arg_shape(in, 0) + "; cat needs tensors with at least one dim");
  const int64_t d = wrap_dim(get_int(attrs, "dim"), rank(in), "dim");
  std::vector<int64_t> shape = in[0].shape;
  for (size_t i = 1; i < in.size(); ++i) {
    bool ok = rank(in, i) == rank(in);
    for (int64_t j = 0; ok && j < rank(in); ++j) ok = j == d || in[i].shape[j] == shape[j];
    if (!ok) {
      fail("shapes differ outside dim " + std::to_string(d) + ": " + arg_shape(in, 0) + " and " + arg_shape(in, i));
    }
    shape[d] += in[i].shape[d];
  }
  return {shape, in[0].dtype};
}

TensorType infer_stack(const Types& in, const json& attrs) {
  for (size_t i = 1; i < in.size(); ++i) {
    require_same_dtype(in, 0, i);
    if (in[i].shape != in[0].shape) fail("stack needs equal shapes: " + arg_shape(in, 0) + " and " + arg_shape(in, i));
  }
  std::vector<int64_t> shape = in[0].shape;
  const int64_t d = wrap_dim(get_int(attrs, "dim"), rank(in) + 1, "dim");
  shape.insert(shape.begin() + d, static_cast<int64_t>(in.size()));
  return {shape, in[0].dtype};
}

TensorType infer_narrow(const Types& in, const json& attrs) {
  if (in[0].shape.empty()) fail(arg_shape(in, 0) + "; narrow needs at least one dim");
  std::vector<int64_t> shape = in[0].shape;
  const int64_t d = wrap_dim(get_int(attrs, "dim"), rank(in), "dim");
  int64_t start = get_int(attrs, "start");
  const int64_t length = get_int(attrs, "length");
  if (start < 0) start += shape[d];
  if (start < 0 || length < 1 || start + length > shape[d]) {
    fail("attrs start = " + std::to_string(get_int(attrs, "start")) + ", length = " + std::to_string(length) +
         " do not select a non-empty range inside dim " + std::to_string(d) + " of " + arg_of_shape(in, 0));
  }
  shape[d] = length;
  return {shape, in[0].dtype};
}

// Python's slice semantics for a positive step: negative bounds count from the
// end, bounds past either end are clamped.
int64_t slice_length(int64_t size, int64_t start, const json& end_attr, int64_t step) {
  auto clamp_bound = [size](int64_t v) {
    if (v < 0) v += size;
    return std::clamp<int64_t>(v, 0, size);
  };
  const int64_t s = clamp_bound(start);
  const int64_t e = end_attr.is_null() ? size : clamp_bound(end_attr.get<int64_t>());
  return e <= s ? 0 : (e - s + step - 1) / step;
}

TensorType infer_slice(const Types& in, const json& attrs) {
  if (in[0].shape.empty()) fail(arg_shape(in, 0) + "; slice needs at least one dim");
  std::vector<int64_t> shape = in[0].shape;
  const int64_t d = wrap_dim(get_int(attrs, "dim"), rank(in), "dim");
  const int64_t step = get_int(attrs, "step");
  if (step < 1) fail("attr \"step\" must be positive, got " + std::to_string(step));
  const int64_t n = slice_length(shape[d], get_int(attrs, "start"), attrs.at("end"), step);
  if (n < 1) fail("the slice selects nothing from dim " + std::to_string(d) + " of " + arg_of_shape(in, 0));
  shape[d] = n;
  return {shape, in[0].dtype};
}

TensorType infer_expand(const Types& in, const json& attrs) {
  std::vector<int64_t> target = get_int_list(attrs, "shape");
  const auto& shape = in[0].shape;
  if (target.size() < shape.size()) {
    fail("attr \"shape\" = " + shape_to_string(target) + " has fewer dims than " + arg_of_shape(in, 0));
  }
  const size_t lead = target.size() - shape.size();
  for (size_t i = 0; i < target.size(); ++i) {
    if (i < lead) {
      if (target[i] < 1) fail("attr \"shape\" = " + shape_to_string(target) + ": new leading dims must be positive");
      continue;
    }
    const int64_t have = shape[i - lead];
    if (target[i] == -1) target[i] = have;
    if (target[i] != have && have != 1) {
      fail("cannot expand " + arg_of_shape(in, 0) + " to " + shape_to_string(get_int_list(attrs, "shape")) +
           ": only dims of size 1 can grow");
    }
    if (target[i] < 1) fail("attr \"shape\" = " + shape_to_string(target) + " may hold positive sizes and -1 only");
  }
  return {target, in[0].dtype};
}

TensorType infer_repeat(const Types& in, const json& attrs) {
  const std::vector<int64_t> reps = get_int_list(attrs, "repeats");
  const auto& shape = in[0].shape;
  if (reps.size() < shape.size()) {
    fail("attr \"repeats\" = " + shape_to_string(reps) + " needs at least one entry per dim of " + arg_of_shape(in, 0));
  }
  std::vector<int64_t> out(reps.size());
  const size_t lead = reps.size() - shape.size();
  for (size_t i = 0; i < reps.size(); ++i) {
    if (reps[i] < 1) fail("attr \"repeats\" = " + shape_to_string(reps) + " must be positive");
    out[i] = reps[i] * (i < lead ? 1 : shape[i - lead]);
  }
  return {out, in[0].dtype};
}

TensorType infer_triangle(const Types& in, const json&) {
  if (in[0].shape.size() < 2) fail(arg_shape(in, 0) + "; expected at least 2 dims (the last two form matrices)");
  return {in[0].shape, in[0].dtype};
}

std::string star_list(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

std::string tensor_list(const Args& args) {
  std::string s = "[";
  for (size_t i = 0; i < args.size(); ++i) s += (i ? ", " : "") + args[i];
  return s + "]";
}

struct LayoutDef {
  std::string name;
  int min_inputs;
  int max_inputs;
  std::vector<AttrSchema> attrs;
  std::string doc;
  std::function<TensorType(const Types&, const json&)> infer;
  std::function<std::string(const Args&, const Types&, const json&)> python;
};

// Same elements, other dims: reordered, regrouped, added or dropped.
std::vector<LayoutDef> reshaping_defs() {
  return {
      {"transpose",
       1,
       1,
       {attr_int("dim0", -2, "first dim to swap"), attr_int("dim1", -1, "second dim to swap")},
       "swaps two dims (torch.transpose)",
       infer_transpose,
       [](const Args& a, const Types&, const json& at) {
         return py_call("torch.transpose", {a[0], py_literal(at["dim0"]), py_literal(at["dim1"])});
       }},
      {"permute",
       1,
       1,
       {attr_required("dims", "int_list", "the new order of the dims")},
       "reorders dims (torch.permute)",
       infer_permute,
       [](const Args& a, const Types&, const json& at) {
         return py_call("torch.permute", {a[0], py_literal(at["dims"])});
       }},
      {"reshape",
       1,
       1,
       {attr_required("shape", "int_list", "new shape; one entry may be -1 (inferred)")},
       "same elements, new shape (torch.reshape)",
       infer_reshape,
       [](const Args& a, const Types&, const json& at) {
         return py_call("torch.reshape", {a[0], py_literal(at["shape"])});
       }},
      {"flatten",
       1,
       1,
       {attr_int("start_dim", 0, "first dim to merge"), attr_int("end_dim", -1, "last dim to merge")},
       "merges dims start_dim..end_dim into one (torch.flatten)",
       infer_flatten,
       [](const Args& a, const Types&, const json& at) {
         return py_call("torch.flatten", a, py_kwargs(at, {"start_dim", "end_dim"}));
       }},
      {"squeeze",
       1,
       1,
       {attr_optional("dim", "int", "the dim to drop if its size is 1 (absent: every size-1 dim)")},
       "drops size-1 dims (torch.squeeze)",
       infer_squeeze,
       [](const Args& a, const Types&, const json& at) {
         return has(at, "dim") ? py_call("torch.squeeze", {a[0], py_literal(at["dim"])}) : py_call("torch.squeeze", a);
       }},
      {"unsqueeze",
       1,
       1,
       {attr_required("dim", "int", "where the new size-1 dim goes")},
       "inserts a size-1 dim (torch.unsqueeze)",
       infer_unsqueeze,
       [](const Args& a, const Types&, const json& at) {
         return py_call("torch.unsqueeze", {a[0], py_literal(at["dim"])});
       }},
  };
}

// Several inputs joined into one; a range of one dim kept.
std::vector<LayoutDef> joining_and_selecting_defs() {
  return {
      {"cat",
       1,
       64,
       {attr_int("dim", 0, "the dim to concatenate along")},
       "concatenates the inputs along dim (torch.cat)",
       infer_cat,
       [](const Args& a, const Types&, const json& at) {
         return py_call("torch.cat", {tensor_list(a)}, py_kwargs(at, {"dim"}));
       }},
      {"stack",
       1,
       64,
       {attr_int("dim", 0, "where the new dim goes")},
       "stacks equal-shaped inputs along a new dim (torch.stack)",
       infer_stack,
       [](const Args& a, const Types&, const json& at) {
         return py_call("torch.stack", {tensor_list(a)}, py_kwargs(at, {"dim"}));
       }},
      {"narrow",
       1,
       1,
       {attr_required("dim", "int", "the dim to narrow"),
        attr_required("start", "int", "first index (may be negative)"),
        attr_required("length", "int", "number of elements kept")},
       "the elements start..start+length-1 of one dim (torch.narrow)",
       infer_narrow,
       [](const Args& a, const Types&, const json& at) {
         return py_call("torch.narrow",
                        {a[0], py_literal(at["dim"]), py_literal(at["start"]), py_literal(at["length"])});
       }},
      {"slice",
       1,
       1,
       {attr_int("dim", 0, "the dim to slice"), attr_int("start", 0, "first index (Python semantics)"),
        attr_optional("end", "int", "one past the last index (absent: the end)"), attr_int("step", 1, "positive step")},
       "x[..., start:end:step, ...] along one dim",
       infer_slice,
       [](const Args& a, const Types& in, const json& at) {
         const int64_t d = wrap_dim(get_int(at, "dim"), static_cast<int64_t>(in[0].shape.size()), "dim");
         std::string idx;
         for (int64_t i = 0; i < d; ++i) idx += ":, ";
         idx += std::to_string(get_int(at, "start")) + ":" + (has(at, "end") ? std::to_string(get_int(at, "end")) : "");
         if (get_int(at, "step") != 1) idx += ":" + std::to_string(get_int(at, "step"));
         return a[0] + "[" + idx + "]";
       }},
  };
}

// One input broadcast or copied; a triangle kept and the rest zeroed.
std::vector<LayoutDef> copying_and_masking_defs() {
  return {
      {"expand",
       1,
       1,
       {attr_required("shape", "int_list", "target shape; -1 keeps a dim")},
       "broadcasts size-1 dims to a larger shape (Tensor.expand)",
       infer_expand,
       [](const Args& a, const Types&, const json& at) {
         return a[0] + ".expand(" + star_list(get_int_list(at, "shape")) + ")";
       }},
      {"contiguous",
       1,
       1,
       {},
       "a dense row-major copy (identity on values)",
       [](const Types& in, const json&) {
         return TensorType{in[0].shape, in[0].dtype};
       },
       [](const Args& a, const Types&, const json&) { return a[0] + ".contiguous()"; }},
      {"repeat",
       1,
       1,
       {attr_required("repeats", "int_list", "copies per dim (at least one entry per dim)")},
       "tiles the tensor (Tensor.repeat)",
       infer_repeat,
       [](const Args& a, const Types&, const json& at) {
         return a[0] + ".repeat(" + star_list(get_int_list(at, "repeats")) + ")";
       }},
      {"tril",
       1,
       1,
       {attr_int("diagonal", 0, "which diagonal bounds the kept part")},
       "zeroes elements above the diagonal of the last two dims",
       infer_triangle,
       [](const Args& a, const Types&, const json& at) {
         return py_call("torch.tril", a, py_kwargs(at, {"diagonal"}));
       }},
      {"triu",
       1,
       1,
       {attr_int("diagonal", 0, "which diagonal bounds the kept part")},
       "zeroes elements below the diagonal of the last two dims",
       infer_triangle,
       [](const Args& a, const Types&, const json& at) {
         return py_call("torch.triu", a, py_kwargs(at, {"diagonal"}));
       }},
  };
}

}  // namespace

void register_layout_ops(OpRegistry& r) {
  std::vector<LayoutDef> defs;
  for (auto group : {reshaping_defs(), joining_and_selecting_defs(), copying_and_masking_defs()}) {
    defs.insert(defs.end(), group.begin(), group.end());
  }
  for (const auto& d : defs) {
    OpSchema s;
    s.name = d.name;
    s.category = OpCategory::kLayout;
    s.min_inputs = d.min_inputs;
    s.max_inputs = d.max_inputs;
    s.attrs = d.attrs;
    s.doc = d.doc;
    s.infer = d.infer;
    // Layout changes move data but compute nothing.
    s.flops = flops_none();
    s.python = d.python;
    r.add(std::move(s));
  }
}

}  // namespace kforge::ops
