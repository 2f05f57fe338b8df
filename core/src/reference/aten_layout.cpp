// Layout ops. Views are fine here: run_reference makes outputs contiguous and
// unaliased.
#include "ops/op_helpers.h"
#include "reference/aten_ops.h"

namespace kforge::ref::internal {
namespace {

using ops::get_int;
using ops::get_int_list;
using ops::has;

}  // namespace

void add_layout_ops(AtenOpTable& t) {
  t["transpose"] = [](const Tensors& in, const json& a) {
    if (in[0].dim() == 0) return in[0];
    return at::transpose(in[0], get_int(a, "dim0"), get_int(a, "dim1"));
  };
  t["permute"] = [](const Tensors& in, const json& a) { return in[0].permute(get_int_list(a, "dims")); };
  t["reshape"] = [](const Tensors& in, const json& a) { return in[0].reshape(get_int_list(a, "shape")); };
  t["flatten"] = [](const Tensors& in, const json& a) {
    return at::flatten(in[0], get_int(a, "start_dim"), get_int(a, "end_dim"));
  };
  t["squeeze"] = [](const Tensors& in, const json& a) {
    if (!has(a, "dim")) return at::squeeze(in[0]);
    return at::squeeze(in[0], get_int(a, "dim"));
  };
  t["unsqueeze"] = [](const Tensors& in, const json& a) { return at::unsqueeze(in[0], get_int(a, "dim")); };
  t["cat"] = [](const Tensors& in, const json& a) { return at::cat(in, get_int(a, "dim")); };
  t["stack"] = [](const Tensors& in, const json& a) { return at::stack(in, get_int(a, "dim")); };
  t["narrow"] = [](const Tensors& in, const json& a) {
    return at::narrow(in[0], get_int(a, "dim"), get_int(a, "start"), get_int(a, "length"));
  };
  t["slice"] = [](const Tensors& in, const json& a) {
    c10::optional<int64_t> end;
    if (has(a, "end")) end = get_int(a, "end");
    return at::slice(in[0], get_int(a, "dim"), get_int(a, "start"), end, get_int(a, "step"));
  };
  t["expand"] = [](const Tensors& in, const json& a) { return in[0].expand(get_int_list(a, "shape")); };
  t["contiguous"] = [](const Tensors& in, const json&) { return in[0].contiguous(); };
  t["repeat"] = [](const Tensors& in, const json& a) { return in[0].repeat(get_int_list(a, "repeats")); };
  t["tril"] = [](const Tensors& in, const json& a) { return at::tril(in[0], get_int(a, "diagonal")); };
  t["triu"] = [](const Tensors& in, const json& a) { return at::triu(in[0], get_int(a, "diagonal")); };
}

}  // namespace kforge::ref::internal
