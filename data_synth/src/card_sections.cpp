// The dataset card's sections on what a lab selects and trusts a set by
// (exporters.h): the contamination rule with examples, difficulty, the split,
// proof of solvability, the reachable space and the shortcut audit. Each
// reads the file its step wrote (split/split.json, solutions/index.json,
// reach.json, audit_shortcuts.json, audit_contamination.json) and says how to
// get it when it is absent.
#include "card_sections.h"

#include <cstdio>
#include <sstream>

#include "kforge/core/number_text.h"
#include "kforge/data_synth/contamination.h"
#include "kforge/data_synth/exporters.h"
#include "kforge/data_synth/reach.h"

namespace kforge::synth {
namespace fs = std::filesystem;
namespace {

std::optional<json> read_json(const fs::path& path) {
  try {
    if (!fs::exists(path)) return std::nullopt;
    return Document::from_file(path).root;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string summary_row(const char* what, const json& s) {
  std::string row = std::string("| ") + what + " | " + std::to_string(s.value("count", 0));
  for (const char* k : {"min", "median", "p90", "max"}) {
    row += " | " + (s.contains(k) && s[k].is_number() ? format_significant(s[k].get<double>()) : std::string("-"));
  }
  return row + " |\n";
}

void contamination_rule(std::ostringstream& md, const json& stats) {
  md << "\n## Contamination by what the kernel must do\n\n"
        "Besides the cores by meaning, a task is rejected as `contaminated` when what its kernel must do is "
        "a KernelBench problem:\n\n"
        "- **dominant part**: its cost-dominant part (every GEMM/conv, reduction, norm, softmax and pooling node "
        "that takes at least "
     << format_fixed(100 * kDominantShare, 0)
     << " % of the cost model's time of those nodes, the costliest always; pointwise work is free in a fused "
        "kernel) is a KernelBench problem's computation (the "
        "problem's GEMM/conv, reduction, norm, softmax and pooling tokens, in order), and everything else is cheap "
        "pointwise or layout work, whatever the scalars, signs, clamps and shapes;\n"
        "- **pointwise**: it is only pointwise and layout work and one of its ops is a level-1 elementwise "
        "problem (one elementwise pass, which that problem already is);\n"
        "- **subgraph**: it contains a problem's whole core (two or more tokens) in order with only cheap ops "
        "between them.\n\n"
        "Examples it rejects (tests/data_synth/contamination_by_work_test.cpp): `matmul, neg` and `linear, neg, "
        "add` (level1 matmul), `conv2d, neg` (level1/50), `conv_transpose2d, neg` (level1/57), `minimum, tanh` "
        "(level1/22 Tanh), `hardtanh, relu` (level1/19 ReLU), `div, hardtanh, layer_norm` (level1/40 LayerNorm), "
        "`conv2d, add, softmax` (the softmax is under "
     << format_fixed(100 * kDominantShare, 0)
     << " % of the time: level1/50), `matmul, neg, gelu, softmax, layer_norm` (level2/66 and 99 as sub-graphs), "
        "`selu, adaptive_avg_pool1d` (an adaptive pool is its kind of pool: level1/44). "
        "Kept: `matmul, layer_norm, matmul` where the LayerNorm is a real share of the work; `layer_norm, sin, "
        "log_softmax`; `matmul, tanh, var`.\n\nContamination rejections in this run by rule:";
  const json by = stats.value("contaminated_by", json::object());
  for (const auto& [rule, n] : by.items()) md << " " << rule << " " << n << ";";
  md << " (equal, contains and edit are the cores by meaning).\n";
}

void difficulty(std::ostringstream& md, const json& stats) {
  md << "\n## Difficulty\n\nEach task's `meta.difficulty`: the judge's eager time, a roofline bound for the device "
        "it was measured on (kernel inputs read and outputs written once at peak bandwidth; every node's FLOPs at "
        "peak, GEMM/conv on tensor cores: TF32 for float32, which the float32 tolerance admits) and the headroom "
        "eager / bound, the speedup a perfect kernel would reach. `kforge synth --headroom LO,HI` keeps a range "
        "(by the predicted headroom, the cost model's eager time over the backend's roofline: a curriculum). "
        "Rooflines:";
  const json devices = stats.value("roofline_devices", json::object());
  for (const auto& [name, n] : devices.items()) md << " " << name << " (" << n << ");";
  md << "\n\n| headroom | tasks |\n|---|---|\n";
  const json bins = stats.value("headroom_histogram", json::object());
  for (const char* b : {"< 2", "2-5", "5-10", "10-30", "30-100", "100-1000", ">= 1000"}) {
    md << "| " << b << " | " << bins.value(b, 0) << " |\n";
  }
  md << "\n| quantity | n | min | median | p90 | max |\n|---|---|---|---|---|---|\n";
  md << summary_row("headroom (measured eager / bound)", stats.value("headroom_summary", json::object()));
  md << summary_row("predicted headroom (cost model / bound)",
                    stats.value("predicted_headroom_summary", json::object()));
  md << summary_row("roofline bound, ms", stats.value("bound_ms_summary", json::object()));
}

void split(std::ostringstream& md, const fs::path& out) {
  md << "\n## Split\n\n";
  const std::optional<json> s = read_json(out / "split" / "split.json");
  if (!s) {
    md << "No split: `kforge synth ... --split 0.8,0.1,0.1` writes split/{train,validation,test}.jsonl.\n";
    return;
  }
  md << "Whole op-graph families in one split (" << s->value("rule", std::string()) << ").\n\n"
     << "| split | tasks | families |\n|---|---|---|\n";
  for (const char* k : {"train", "validation", "test"}) {
    md << "| " << k << " | " << (*s)["tasks"].value(k, 0) << " | " << (*s)["families"].value(k, 0) << " |\n";
  }
  md << "\nDistinct families " << s->value("distinct_families", 0) << " in " << s->value("groups", 0)
     << " groups (largest: " << (*s)["largest_group"].value("tasks", 0) << " tasks). Test families whose core "
     << "appears in a train task (as its family or inside it): " << s->value("test_cores_in_train", -1)
     << "; validation: " << s->value("validation_cores_in_train", -1) << ".\n";
}

void solutions(std::ostringstream& md, const fs::path& out) {
  md << "\n## Proof of solvability\n\n";
  const std::optional<json> s = read_json(out / "solutions" / "index.json");
  if (!s) {
    md << "Not run: `kforge synth ... --solutions on` writes the template generator's naive kernel for every task "
          "it covers and keeps those the judge verifies in solutions/ (cpp on the CPU backend; CUDA kernels need "
          "the GPU: scripts/gpu/synth_h200.sh's solutions stage).\n";
    return;
  }
  const json sp = s->value("speedup", json::object());
  md << "The template generator (rollout/src/policy/template_policy) covers " << s->value("covered", 0) << " of "
     << s->value("tasks", 0) << " tasks; of " << s->value("judged", 0) << " judged, the judge verified "
     << s->value("verified", 0) << " naive " << s->value("mode", std::string()) << " solutions (solutions/, on "
     << s->value("device", std::string("?")) << "), speedup over eager: median "
     << (sp.contains("median") ? format_significant(sp["median"].get<double>()) : "-") << ", "
     << (sp.contains("min") ? format_significant(sp["min"].get<double>()) : "-") << " to "
     << (sp.contains("max") ? format_significant(sp["max"].get<double>()) : "-") << ".\n\nOps it cannot generate:";
  for (const auto& op : s->value("cannot_generate", json::array())) md << " " << op.get<std::string>() << ";";
  md << "\n\n| op | tasks | covered | verified |\n|---|---|---|---|\n";
  const json by_op = s->value("by_op", json::object());
  for (const auto& [op, c] : by_op.items()) {
    md << "| " << op << " | " << c.value("tasks", 0) << " | " << c.value("covered", 0) << " | "
       << c.value("verified", 0) << " |\n";
  }
}

void reach(std::ostringstream& md, const fs::path& out) {
  md << "\n## Reachable space\n\n";
  const std::optional<json> r = read_json(out / "reach.json");
  if (!r) {
    md << "Not estimated: `kforge synth ... --reach-sample 20000` writes reach.json.\n";
    return;
  }
  md << "Of " << r->value("samples", 0) << " graphs drawn with their own seeds, "
     << r->value("passed_compose_shapes_contamination", 0) << " passed compose, shape search and contamination, "
     << r->value("distinct", 0) << " distinct (" << r->value("seen_once", 0) << " seen once, "
     << r->value("seen_twice", 0) << " twice): Chao1 " << format_fixed(r->value("chao1", 0.0), 0)
     << " distinct graphs, times the share the filters and judge accepted in this run ("
     << format_fixed(r->value("filter_pass_share", 0.0), 2) << ") = **" << format_fixed(r->value("estimate", 0.0), 0)
     << " distinct valid tasks** against a target of " << format_fixed(kReachTarget, 0)
     << " (a lower bound in expectation: some graphs are likelier than others).\n";
}

void audit(std::ostringstream& md, const fs::path& out) {
  md << "\n## Shortcut audit\n\n";
  const std::optional<json> a = read_json(out / "audit_shortcuts.json");
  if (!a) {
    md << "Not run: `python3 bench/synth/audit_shortcuts.py OUT --jobs 4 --write` (add `--device cuda` on a GPU) "
          "writes audit_shortcuts.json.\n";
    return;
  }
  md << "bench/synth/audit_shortcuts.py (PyTorch on " << a->value("device", std::string("?")) << ", "
     << a->value("shards", 1) << " shards): audited " << a->value("audited", 0) << " of " << a->value("tasks", 0)
     << " tasks; passable by a constant " << a->value("passable_by_constant", 0) << ", 90 % matched by a constant "
     << a->value("mostly_constant", 0) << ", insensitive to its activations " << a->value("ignores_activations", 0)
     << ", ignoring one input " << a->value("ignores_an_input", 0) << ", RMS below atol "
     << a->value("rms_below_atol", 0) << ", errors " << a->value("errors", 0) << ".";
  if (const int alone = a->value("deferred_alone", 0); alone > 0) {
    md << " " << alone << " of the tasks ran out of device memory beside the other shards and were audited again "
       << "alone on the device.";
  }
  md << "\n";
}

// bench/synth/audit_contamination.py's cross-check of the rule: its own table
// of what each level-1 problem computes, without the cost model.
void contamination_cross_check(std::ostringstream& md, const fs::path& out) {
  const std::optional<json> a = read_json(out / "audit_contamination.json");
  md << "\nCross-check (bench/synth/audit_contamination.py: an op table of its own, no cost model): ";
  if (!a) {
    md << "not run (`python3 bench/synth/audit_contamination.py OUT --write` writes audit_contamination.json).\n";
    return;
  }
  md << a->value("flagged", 0) << " of " << a->value("tasks", 0)
     << " tasks are one level-1 problem plus pointwise work, or pointwise with a level-1 activation.\n";
  for (const auto& [reason, examples] : a->value("examples", json::object()).items()) {
    md << "\n- " << reason << " (" << a->value("by_reason", json::object()).value(reason, 0) << "):";
    for (const auto& e : examples) md << " `" << (e.is_string() ? e.get<std::string>() : e.dump()) << "`;";
    md << "\n";
  }
}

}  // namespace

std::string card_extra_sections(const fs::path& out, const json& stats) {
  std::ostringstream md;
  contamination_rule(md, stats);
  contamination_cross_check(md, out);
  difficulty(md, stats);
  split(md, out);
  solutions(md, out);
  reach(md, out);
  audit(md, out);
  return md.str();
}

}  // namespace kforge::synth
