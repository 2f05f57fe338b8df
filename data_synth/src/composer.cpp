// compose(): the op count and dtype, then a main-loop op or a plain input,
// then epilogue ops (compose_main_loop.cpp, compose_epilogue.cpp) until the
// graph has its ops.
#include "kforge/data_synth/composer.h"

#include "compose_graph.h"

namespace kforge::synth {
namespace {

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? sep : "") + parts[i];
  return s;
}

}  // namespace

Tolerance synth_tolerance(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return {2e-2, 2e-2};
    case DType::kBFloat16:
      return {4e-2, 4e-2};  // bfloat16's unit roundoff is 8x float16's
    default:
      return {1e-2, 1e-2};
  }
}

Composition compose(uint64_t seed, int64_t batch, const ComposeOptions& options) {
  using namespace internal;
  Rng rng(seed);
  const int num_ops = static_cast<int>(rng.weighted(options.op_count_weights)) + 1;
  const double r = rng.uniform();
  const DType dtype = r < options.float16_share                            ? DType::kFloat16
                      : r < options.float16_share + options.bfloat16_share ? DType::kBFloat16
                                                                           : DType::kFloat32;
  GraphBuilder g(dtype, batch);
  Draw d{rng, g, {}};
  Value cur;
  bool conv_like = false;
  int made = 0;
  if (rng.chance(options.main_loop_share)) {
    cur = main_loop(d);
    conv_like = d.pattern.back().find("conv") != std::string::npos;
    made = 1;
  } else {
    cur = plain_input(d);
    conv_like = cur.type.shape.size() >= 4;
  }
  // Draws again when a kind does not fit; bounded so that a shape that fits
  // nothing ends the graph early instead of looping.
  for (int tries = 0; made < num_ops && tries < 40; ++tries) {
    std::optional<Value> next = epilogue_op(d, cur, &conv_like, made + 1 == num_ops);
    if (!next) continue;
    cur = *next;
    ++made;
  }
  Composition c;
  c.task = g.finish(cur.name);
  c.task.source = "synth";
  // The dtype's tolerance; the filters scale its atol to the outputs'
  // magnitude (filters.h, magnitude_tolerance) and the task records that.
  c.task.tolerance = synth_tolerance(dtype);
  c.pattern = join(d.pattern, ">");
  if (dtype != DType::kFloat32) c.pattern += " (" + dtype_name(dtype) + ")";
  return c;
}

}  // namespace kforge::synth
