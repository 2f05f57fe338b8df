// Shared pieces of the op definitions: attribute declarations, shape checks
// with messages that name the offending input, and Python spelling helpers.
// Internal to kforge_core.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kforge/core/op_registry.h"

namespace kforge::ops {

using Types = std::vector<TensorType>;
using Args = std::vector<std::string>;

// Throws InputError; infer_graph adds the task and node to the message.
[[noreturn]] void fail(const std::string& message);

// `in[1] "w"` (or `in[1]` when the value has no name).
std::string arg_label(const Types& in, size_t i);
// `in[1] "w" has shape [16, 32]`.
std::string arg_shape(const Types& in, size_t i);
// `in[1] "w" of shape [16, 32]`, for use inside a sentence.
std::string arg_of_shape(const Types& in, size_t i);
// The value's name, or `fallback` when it has none ("w" in "expected w of shape ...").
std::string value_name(const Types& in, size_t i, const std::string& fallback);

// ---- attribute declarations ----
AttrSchema attr_int(const std::string& name, int64_t def, const std::string& doc);
AttrSchema attr_float(const std::string& name, double def, const std::string& doc);
AttrSchema attr_bool(const std::string& name, bool def, const std::string& doc);
AttrSchema attr_string(const std::string& name, const std::string& def, std::vector<std::string> choices,
                       const std::string& doc);
AttrSchema attr_int_list(const std::string& name, json def, const std::string& doc);
AttrSchema attr_required(const std::string& name, const std::string& type, const std::string& doc);
AttrSchema attr_optional(const std::string& name, const std::string& type, const std::string& doc);

// ---- attribute values (attrs are already resolved and type-checked) ----
bool has(const json& attrs, const std::string& name);  // present and not null
int64_t get_int(const json& attrs, const std::string& name);
double get_float(const json& attrs, const std::string& name);
bool get_bool(const json& attrs, const std::string& name);
std::string get_string(const json& attrs, const std::string& name);
// An int attr becomes a one-element list.
std::vector<int64_t> get_int_list(const json& attrs, const std::string& name);
// An int or a list of length 1 is repeated `n` times (torch's _ntuple); any
// other length is an error naming the attr.
std::vector<int64_t> get_int_tuple(const json& attrs, const std::string& name, size_t n);

// ---- shape checks ----
int64_t wrap_dim(int64_t dim, int64_t ndim, const std::string& attr);
// Distinct wrapped dims, sorted ascending; null means every dim.
std::vector<int64_t> reduce_dims(const json& attrs, const std::string& attr, int64_t ndim);
std::vector<int64_t> broadcast_shapes(const Types& in, size_t a, size_t b);
std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b, bool* ok);
void require_floating(const Types& in, size_t i);
void require_same_dtype(const Types& in, size_t a, size_t b);
// `what` describes the accepted layouts, e.g. "(N, C, L) or (C, L)".
void require_rank_in(const Types& in, size_t i, const std::vector<size_t>& ranks, const std::string& what);
int64_t product(const std::vector<int64_t>& v, size_t from = 0, size_t to = SIZE_MAX);

// The dtype torch gives `tensor (op) python scalar`: an integral tensor with a
// float scalar becomes float32, bool with an int scalar becomes int64.
DType promote_with_scalar(DType tensor, const json& scalar);
// torch's result type of a unary float function (exp, sin, ...): integral
// inputs become float32.
DType float_result(DType d);

// ---- Python spelling ----
std::string py_literal(const json& value);  // 0.01, 3, True, 'tanh', [1, 2], None
// "name=value" for each attr in `names`, skipping nulls; joined with ", ".
std::string py_kwargs(const json& attrs, const std::vector<std::string>& names);
// "f(a, b, k=v)": `args` then the non-empty `kwargs`.
std::string py_call(const std::string& fn, const std::vector<std::string>& args, const std::string& kwargs = "");

// ---- flop models ----
using FlopFn = std::function<double(const Types&, const TensorType&, const json&)>;
FlopFn flops_per_output(double per_element);  // ~per_element * numel(out)
FlopFn flops_per_input(double per_element);   // ~per_element * numel(in[0])
FlopFn flops_none();                          // data movement only

// ---- registration, one function per category file ----
void register_main_loop_ops(OpRegistry& r);
void register_activation_ops(OpRegistry& r);
void register_norm_ops(OpRegistry& r);
void register_reduction_ops(OpRegistry& r);
void register_pooling_ops(OpRegistry& r);
void register_elementwise_ops(OpRegistry& r);
void register_softmax_ops(OpRegistry& r);
void register_layout_ops(OpRegistry& r);

}  // namespace kforge::ops
