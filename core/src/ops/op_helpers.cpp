#include "ops/op_helpers.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace kforge::ops {

void fail(const std::string& message) { throw InputError(message); }

std::string arg_label(const Types& in, size_t i) {
  std::string s = "in[" + std::to_string(i) + "]";
  if (i < in.size() && !in[i].name.empty()) s += " \"" + in[i].name + "\"";
  return s;
}

std::string arg_shape(const Types& in, size_t i) {
  return arg_label(in, i) + " has shape " + shape_to_string(in.at(i).shape);
}

std::string arg_of_shape(const Types& in, size_t i) {
  return arg_label(in, i) + " of shape " + shape_to_string(in.at(i).shape);
}

std::string value_name(const Types& in, size_t i, const std::string& fallback) {
  return i < in.size() && !in[i].name.empty() ? in[i].name : fallback;
}

// ---- attribute declarations ----

AttrSchema attr_int(const std::string& name, int64_t def, const std::string& doc) {
  return AttrSchema{name, "int", def, doc, false, {}};
}

AttrSchema attr_float(const std::string& name, double def, const std::string& doc) {
  return AttrSchema{name, "float", def, doc, false, {}};
}

AttrSchema attr_bool(const std::string& name, bool def, const std::string& doc) {
  return AttrSchema{name, "bool", def, doc, false, {}};
}

AttrSchema attr_string(const std::string& name, const std::string& def, std::vector<std::string> choices,
                       const std::string& doc) {
  return AttrSchema{name, "string", def, doc, false, std::move(choices)};
}

AttrSchema attr_int_list(const std::string& name, json def, const std::string& doc) {
  return AttrSchema{name, "int_list", std::move(def), doc, false, {}};
}

AttrSchema attr_required(const std::string& name, const std::string& type, const std::string& doc) {
  return AttrSchema{name, type, nullptr, doc, false, {}};
}

AttrSchema attr_optional(const std::string& name, const std::string& type, const std::string& doc) {
  return AttrSchema{name, type, nullptr, doc, true, {}};
}

// ---- attribute values ----

bool has(const json& attrs, const std::string& name) { return attrs.contains(name) && !attrs.at(name).is_null(); }

int64_t get_int(const json& attrs, const std::string& name) { return attrs.at(name).get<int64_t>(); }
double get_float(const json& attrs, const std::string& name) { return attrs.at(name).get<double>(); }
bool get_bool(const json& attrs, const std::string& name) { return attrs.at(name).get<bool>(); }
std::string get_string(const json& attrs, const std::string& name) { return attrs.at(name).get<std::string>(); }

std::vector<int64_t> get_int_list(const json& attrs, const std::string& name) {
  const json& v = attrs.at(name);
  if (v.is_array()) return v.get<std::vector<int64_t>>();
  return {v.get<int64_t>()};
}

std::vector<int64_t> get_int_tuple(const json& attrs, const std::string& name, size_t n) {
  std::vector<int64_t> v = get_int_list(attrs, name);
  if (v.size() == 1 && n != 1) return std::vector<int64_t>(n, v[0]);
  if (v.size() != n) {
    fail("attr \"" + name + "\" has " + std::to_string(v.size()) + " values " + shape_to_string(v) + "; expected " +
         "one int or a list of " + std::to_string(n));
  }
  return v;
}

// ---- shape checks ----

int64_t wrap_dim(int64_t dim, int64_t ndim, const std::string& attr) {
  const int64_t n = std::max<int64_t>(ndim, 1);  // a 0-d tensor accepts dims 0 and -1, like torch
  if (dim < -n || dim >= n) {
    fail("attr \"" + attr + "\" = " + std::to_string(dim) + " is out of range for a " + std::to_string(ndim) +
         "-d tensor (allowed " + std::to_string(-n) + " to " + std::to_string(n - 1) + ")");
  }
  return dim < 0 ? dim + n : dim;
}

std::vector<int64_t> reduce_dims(const json& attrs, const std::string& attr, int64_t ndim) {
  std::vector<int64_t> dims;
  if (!has(attrs, attr)) {
    for (int64_t d = 0; d < ndim; ++d) dims.push_back(d);
    return dims;
  }
  const std::vector<int64_t> listed = get_int_list(attrs, attr);
  // torch reads an empty list as "every dim" in some versions and "no dim" in
  // others; absence is the one unambiguous spelling.
  if (listed.empty()) fail("attr \"" + attr + "\" is an empty list; leave it out to reduce every dim");
  std::set<int64_t> seen;
  for (int64_t d : listed) {
    int64_t w = wrap_dim(d, ndim, attr);
    if (!seen.insert(w).second) fail("attr \"" + attr + "\" names dim " + std::to_string(w) + " twice");
    dims.push_back(w);
  }
  std::sort(dims.begin(), dims.end());
  return dims;
}

std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b, bool* ok) {
  const size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  *ok = true;
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) *ok = false;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> broadcast_shapes(const Types& in, size_t a, size_t b) {
  bool ok = true;
  std::vector<int64_t> out = broadcast_shapes(in[a].shape, in[b].shape, &ok);
  if (!ok) {
    fail("shapes do not broadcast: " + arg_shape(in, a) + " and " + arg_shape(in, b) +
         " (trailing dims must be equal or 1)");
  }
  return out;
}

void require_floating(const Types& in, size_t i) {
  if (!dtype_is_floating(in[i].dtype)) {
    fail(arg_label(in, i) + " has dtype " + dtype_name(in[i].dtype) +
         "; expected a floating-point tensor (float32, float16, bfloat16 or float64)");
  }
}

void require_same_dtype(const Types& in, size_t a, size_t b) {
  if (in[a].dtype != in[b].dtype) {
    fail("dtypes differ: " + arg_label(in, a) + " is " + dtype_name(in[a].dtype) + " and " + arg_label(in, b) + " is " +
         dtype_name(in[b].dtype) + "; both must have the same dtype");
  }
}

void require_rank_in(const Types& in, size_t i, const std::vector<size_t>& ranks, const std::string& what) {
  if (std::find(ranks.begin(), ranks.end(), in[i].shape.size()) != ranks.end()) return;
  fail(arg_shape(in, i) + "; expected " + what);
}

int64_t product(const std::vector<int64_t>& v, size_t from, size_t to) {
  const size_t end = std::min(to, v.size());
  if (from >= end) return 1;
  return saturating_numel(
      std::vector<int64_t>(v.begin() + static_cast<long>(from), v.begin() + static_cast<long>(end)));
}

DType promote_with_scalar(DType tensor, const json& scalar) {
  if (dtype_is_floating(tensor)) return tensor;
  if (scalar.is_number_float()) return DType::kFloat32;
  if (tensor == DType::kBool && !scalar.is_boolean()) return DType::kInt64;
  return tensor;
}

DType float_result(DType d) { return dtype_is_floating(d) ? d : DType::kFloat32; }

// ---- Python spelling ----

std::string py_literal(const json& value) {
  if (value.is_null()) return "None";
  if (value.is_boolean()) return value.get<bool>() ? "True" : "False";
  if (value.is_string()) {
    std::string s = "'";
    for (char c : value.get<std::string>()) {
      if (c == '\\' || c == '\'') s += '\\';
      s += c;
    }
    return s + "'";
  }
  if (value.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < value.size(); ++i) s += (i ? ", " : "") + py_literal(value[i]);
    return s + "]";
  }
  // nlohmann writes doubles with round-trip precision and a ".0" on integral
  // values, which Python reads back as the same float.
  return value.dump();
}

std::string py_kwargs(const json& attrs, const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) {
    if (!has(attrs, n)) continue;
    s += (s.empty() ? "" : ", ") + n + "=" + py_literal(attrs.at(n));
  }
  return s;
}

std::string py_call(const std::string& fn, const std::vector<std::string>& args, const std::string& kwargs) {
  std::string s = fn + "(";
  for (size_t i = 0; i < args.size(); ++i) s += (i ? ", " : "") + args[i];
  if (!kwargs.empty()) s += (args.empty() ? "" : ", ") + kwargs;
  return s + ")";
}

// ---- flop models ----

FlopFn flops_per_output(double per_element) {
  return [per_element](const Types&, const TensorType& out, const json&) {
    return per_element * static_cast<double>(out.numel());
  };
}

FlopFn flops_per_input(double per_element) {
  return [per_element](const Types& in, const TensorType&, const json&) {
    return per_element * static_cast<double>(in.at(0).numel());
  };
}

FlopFn flops_none() {
  return [](const Types&, const TensorType&, const json&) { return 0.0; };
}

}  // namespace kforge::ops
