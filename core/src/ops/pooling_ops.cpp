// Pooling over the trailing 1, 2 or 3 spatial dims of (N, C, *) or unbatched
// (C, *) inputs, with torch's output-size rules (ceil_mode included).
#include "ops/op_helpers.h"

namespace kforge::ops {
namespace {

const char* spatial_text(size_t n) {
  static const char* kText[] = {"L", "H, W", "D, H, W"};
  return kText[n - 1];
}

void require_pool_input(const Types& in, size_t n) {
  require_floating(in, 0);
  const std::string sp = spatial_text(n);
  require_rank_in(in, 0, {n + 1, n + 2}, "(N, C, " + sp + ") or unbatched (C, " + sp + ")");
}

// torch's pooling_output_shape: floor or ceil division, where a ceil-mode
// window must start inside the input or its left padding.
int64_t pooled_size(int64_t size, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t span = size + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  if (span < 0) return 0;
  int64_t out = span / s + 1;
  if (ceil_mode && (out - 1) * s >= size + p) --out;
  return out;
}

TensorType infer_pool(const Types& in, const json& attrs, size_t n, bool is_max) {
  require_pool_input(in, n);
  const std::vector<int64_t> k = get_int_tuple(attrs, "kernel_size", n);
  const std::vector<int64_t> s = has(attrs, "stride") ? get_int_tuple(attrs, "stride", n) : k;
  const std::vector<int64_t> p = get_int_tuple(attrs, "padding", n);
  const std::vector<int64_t> d = is_max ? get_int_tuple(attrs, "dilation", n) : std::vector<int64_t>(n, 1);
  const bool ceil_mode = get_bool(attrs, "ceil_mode");
  if (!is_max && has(attrs, "divisor_override") && get_int(attrs, "divisor_override") < 1) {
    fail("attr \"divisor_override\" must be positive");
  }
  std::vector<int64_t> out(in[0].shape.begin(), in[0].shape.end() - static_cast<long>(n));
  for (size_t i = 0; i < n; ++i) {
    if (k[i] < 1 || s[i] < 1 || d[i] < 1) {
      fail("attrs \"kernel_size\", \"stride\" and \"dilation\" must be positive, got kernel_size " +
           shape_to_string(k) + ", stride " + shape_to_string(s));
    }
    const int64_t effective = d[i] * (k[i] - 1) + 1;
    if (p[i] < 0 || p[i] > (is_max ? effective : k[i]) / 2) {
      fail("attr \"padding\" = " + shape_to_string(p) + " must be >= 0 and at most half the kernel size " +
           shape_to_string(k));
    }
    const int64_t size = in[0].shape[in[0].shape.size() - n + i];
    const int64_t o = pooled_size(size, k[i], s[i], p[i], d[i], ceil_mode);
    if (o < 1) {
      fail("the window " + shape_to_string(k) + " does not fit in " + arg_of_shape(in, 0) + " with padding " +
           shape_to_string(p) + "; the output would be empty");
    }
    out.push_back(o);
  }
  return {out, in[0].dtype};
}

TensorType infer_adaptive(const Types& in, const json& attrs, size_t n) {
  require_pool_input(in, n);
  const std::vector<int64_t> size = get_int_tuple(attrs, "output_size", n);
  for (int64_t v : size) {
    if (v < 1) fail("attr \"output_size\" must be positive, got " + shape_to_string(size));
  }
  std::vector<int64_t> out(in[0].shape.begin(), in[0].shape.end() - static_cast<long>(n));
  out.insert(out.end(), size.begin(), size.end());
  return {out, in[0].dtype};
}

void add_pool(OpRegistry& r, size_t n, bool is_max) {
  OpSchema s;
  const std::string dims = std::to_string(n) + "d";
  s.name = (is_max ? "max_pool" : "avg_pool") + dims;
  s.category = OpCategory::kPooling;
  s.attrs = {attr_required("kernel_size", "int_list", "window size (int or list)"),
             attr_optional("stride", "int_list", "window step (default: kernel_size)"),
             attr_int_list("padding", 0, "implicit padding per side (at most half the window)")};
  std::vector<std::string> names = {"kernel_size", "stride", "padding"};
  if (is_max) {
    s.attrs.push_back(attr_int_list("dilation", 1, "spacing between window elements"));
    names.push_back("dilation");
  }
  s.attrs.push_back(attr_bool("ceil_mode", false, "round the output size up instead of down"));
  names.push_back("ceil_mode");
  if (!is_max) {
    s.attrs.push_back(attr_bool("count_include_pad", true, "count padded zeros in the divisor"));
    names.push_back("count_include_pad");
    if (n > 1) {
      s.attrs.push_back(attr_optional("divisor_override", "int", "divide by this instead of the window size"));
      names.push_back("divisor_override");
    }
  }
  s.doc = std::string(is_max ? "max" : "average") + " over sliding windows of (N, C, " + spatial_text(n) + ")";
  s.infer = [n, is_max](const Types& in, const json& attrs) { return infer_pool(in, attrs, n, is_max); };
  s.flops = [n](const Types&, const TensorType& out, const json& attrs) {
    return static_cast<double>(out.numel()) * static_cast<double>(product(get_int_tuple(attrs, "kernel_size", n)));
  };
  const std::string fn = "F." + s.name;
  s.python = [fn, names](const Args& args, const Types&, const json& attrs) {
    return py_call(fn, args, py_kwargs(attrs, names));
  };
  r.add(std::move(s));
}

void add_adaptive(OpRegistry& r, size_t n, bool is_max) {
  OpSchema s;
  const std::string dims = std::to_string(n) + "d";
  s.name = (is_max ? "adaptive_max_pool" : "adaptive_avg_pool") + dims;
  s.category = OpCategory::kPooling;
  s.attrs = {attr_required("output_size", "int_list", "output spatial size (int or list)")};
  s.doc = std::string(is_max ? "max" : "average") + " over adaptive windows of (N, C, " + spatial_text(n) +
          ") giving output_size" + (is_max ? " (values only)" : "");
  s.infer = [n](const Types& in, const json& attrs) { return infer_adaptive(in, attrs, n); };
  s.flops = flops_per_input(1);
  const std::string fn = "F." + s.name;
  s.python = [fn](const Args& args, const Types&, const json& attrs) {
    return py_call(fn, args, py_kwargs(attrs, {"output_size"}));
  };
  r.add(std::move(s));
}

}  // namespace

void register_pooling_ops(OpRegistry& r) {
  for (size_t n = 1; n <= 3; ++n) {
    add_pool(r, n, true);
    add_pool(r, n, false);
    add_adaptive(r, n, false);
  }
  add_adaptive(r, 2, true);
}

}  // namespace kforge::ops
