#include "kforge/data_synth/composer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "kforge/core/op_registry.h"
#include "kforge/data_synth/rng.h"
#include "kforge/data_synth/shape_sampler.h"

namespace kforge::synth {
namespace {

TEST(ComposerTest, SameSeedSameGraphAtEveryBatch) {
  for (uint64_t seed = 0; seed < 200; ++seed) {
    Composition a, b, c;
    try {
      a = compose(seed, 8);
      b = compose(seed, 8);
      c = compose(seed, 32);
    } catch (const InputError&) {
      continue;  // a draw that does not type-check: rejected the same way every time
    }
    EXPECT_EQ(to_json(a.task), to_json(b.task)) << seed;
    ASSERT_EQ(a.task.nodes.size(), c.task.nodes.size()) << seed;
    for (size_t i = 0; i < a.task.nodes.size(); ++i) {
      EXPECT_EQ(a.task.nodes[i].op, c.task.nodes[i].op);
      EXPECT_EQ(a.task.nodes[i].attrs, c.task.nodes[i].attrs);
    }
    // Only the batch dim of kernel inputs differs; params never change.
    for (size_t i = 0; i < a.task.inputs.size(); ++i) {
      EXPECT_EQ(a.task.inputs[i].shape[0], 8);
      EXPECT_EQ(c.task.inputs[i].shape[0], 32);
    }
    for (size_t i = 0; i < a.task.params.size(); ++i) EXPECT_EQ(a.task.params[i].shape, c.task.params[i].shape);
  }
}

// The composer (docs/data-synthesis.md#pipeline): graphs up to 8 ops (mean near KernelBench level 2's 4.2),
// chains of two or more GEMM/conv ops, and the ops the first composer never
// drew (exp, where, comparisons, argmax/argmin, prod, cat, tril/triu, and
// eq/ne/log, which a 1,000-task set still lacked).
TEST(ComposerTest, GraphsAreValidDiverseAndReachWide) {
  std::map<size_t, int> sizes;
  std::set<std::string> ops;
  std::set<DType> dtypes;
  int valid = 0, main_loop = 0, chains = 0;
  double op_sum = 0;
  for (uint64_t seed = 0; seed < 600; ++seed) {
    Composition c;
    try {
      c = compose(derive_seed(7, {seed}), 4);
    } catch (const InputError&) {
      continue;
    }
    ++valid;
    EXPECT_NO_THROW(infer_graph(c.task)) << to_json(c.task).dump();
    // One pattern entry per drawn op; a gate adds its comparison node.
    const size_t drawn = static_cast<size_t>(std::count(c.pattern.begin(), c.pattern.end(), '>')) + 1;
    ++sizes[drawn];
    op_sum += static_cast<double>(drawn);
    int main_loops = 0;
    for (const auto& n : c.task.nodes) {
      ops.insert(n.op);
      main_loops += op_registry().find(n.op)->category == OpCategory::kMainLoop;
    }
    chains += main_loops >= 2;
    dtypes.insert(c.task.inputs[0].dtype);
    main_loop += op_registry().find(c.task.nodes[0].op)->category == OpCategory::kMainLoop;
    EXPECT_GE(drawn, 1u);
    EXPECT_LE(drawn, 8u) << c.pattern;
    EXPECT_LE(c.task.nodes.size(), 2 * drawn) << c.pattern;
    EXPECT_TRUE(c.task.tolerance.has_value());
  }
  EXPECT_GT(valid, 550);
  const double mean = op_sum / valid;
  EXPECT_GT(mean, 3.5);
  EXPECT_LT(mean, 5.0);
  EXPECT_GT(sizes[7] + sizes[8], 0) << "graphs of 7 and 8 ops";
  EXPECT_GT(chains, valid / 20) << "two or more GEMM/conv ops in one graph";
  EXPECT_GT(ops.size(), 60u) << "a wide share of the vocabulary";
  EXPECT_EQ(dtypes.size(), 3u) << "float32, float16 and bfloat16";
  EXPECT_GT(main_loop, valid / 2);
  for (const char* op :
       {"linear", "conv2d", "conv_transpose3d", "bmm", "layer_norm", "group_norm", "softmax", "max_pool2d", "logsumexp",
        "gelu", "exp", "where", "gt", "argmax", "cat", "tril", "eq", "ne", "log"}) {
    EXPECT_TRUE(ops.count(op)) << op;
  }
}

TEST(ShapeSamplerTest, AimsIntoTheWindowWithVariants) {
  ShapeOptions o;
  o.window = {0.05, 20.0};
  int sampled = 0;
  for (uint64_t seed = 0; seed < 100; ++seed) {
    std::variant<SampledShapes, ShapeRejection> r;
    try {
      r = sample_shapes(derive_seed(3, {seed}), {}, o, cuda_profile());
    } catch (const InputError&) {
      continue;
    }
    if (auto* s = std::get_if<SampledShapes>(&r)) {
      ++sampled;
      EXPECT_GE(s->predicted_ms, o.window.lo_ms);
      EXPECT_LE(s->predicted_ms, o.window.hi_ms);
      EXPECT_LE(s->bytes, o.memory_cap_bytes);
      ASSERT_GE(s->task.shape_variants.size(), 2u);
      for (size_t v = 0; v < s->task.shape_variants.size(); ++v) {
        EXPECT_NO_THROW(infer_graph(s->task.with_variant(v)));
        EXPECT_NE(s->task.with_variant(v).inputs[0].shape, s->task.inputs[0].shape);
      }
    }
  }
  EXPECT_GT(sampled, 60);
}

// near_roofline: one memory-bound pass has nothing to fuse, so eager is
// already at the fused bound; a chain of passes or a GEMM is far from it.
TEST(ShapeSamplerTest, APassAtTheBandwidthBoundHasNoHeadroom) {
  auto task = [](std::vector<GraphNode> nodes, std::vector<TensorSpec> params = {}) {
    TaskSpec t;
    t.id = "test/roofline";
    TensorSpec x;
    x.name = "x";
    x.shape = {4096, 4096};
    t.inputs = {x};
    t.params = std::move(params);
    t.nodes = std::move(nodes);
    t.outputs = {t.nodes.back().out};
    return t;
  };
  const TaskSpec one = task({{"relu", {"x"}, "y", json::object()}});
  const TaskSpec chain = task({{"gelu", {"x"}, "t0", json::object()},
                               {"mul", {"t0"}, "t1", {{"other", 2.0}}},
                               {"tanh", {"t1"}, "y", json::object()}});
  TensorSpec w;
  w.name = "w";
  w.shape = {4096, 4096};
  const TaskSpec gemm = task({{"linear", {"x", "w"}, "y", json::object()}}, {w});
  for (const DeviceProfile* p : {&cpu_profile(), &cuda_profile()}) {
    EXPECT_LT(predict_eager_ms(one, *p), 1.5 * bandwidth_bound_ms(one, *p)) << p->name;
    EXPECT_GT(predict_eager_ms(chain, *p), 1.5 * bandwidth_bound_ms(chain, *p)) << p->name;
    EXPECT_GT(predict_eager_ms(gemm, *p), 1.5 * bandwidth_bound_ms(gemm, *p)) << p->name;
  }
  // The sampler refuses some draws for it, by name.
  ShapeOptions o;
  o.window = {0.05, 20.0};
  int refused = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    try {
      const auto r = sample_shapes(derive_seed(5, {seed}), {}, o, cuda_profile());
      if (const auto* rej = std::get_if<ShapeRejection>(&r); rej && rej->reason == "near_roofline") {
        EXPECT_NE(rej->detail.find("nothing for a kernel to gain"), std::string::npos) << rej->detail;
        ++refused;
      }
    } catch (const InputError&) {
    }
  }
  EXPECT_GT(refused, 0);
}

TEST(ShapeSamplerTest, UnreachableWindowAndTinyMemoryCapAreNamed) {
  ShapeOptions far;
  far.window = {5000.0, 10000.0};  // no batch up to the cap reaches seconds per call
  far.max_batch = 4;
  ShapeOptions tiny;
  tiny.memory_cap_bytes = 1024;
  int shape_search = 0, memory = 0;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    try {
      auto r = sample_shapes(seed, {}, far, cpu_profile());
      if (auto* rej = std::get_if<ShapeRejection>(&r)) shape_search += rej->reason == "shape_search";
    } catch (const InputError&) {
    }
    try {
      auto r = sample_shapes(seed, {}, tiny, cpu_profile());
      if (auto* rej = std::get_if<ShapeRejection>(&r)) memory += rej->reason == "memory_cap";
    } catch (const InputError&) {
    }
  }
  EXPECT_GT(shape_search, 20);
  EXPECT_GT(memory, 20);
}

}  // namespace
}  // namespace kforge::synth
