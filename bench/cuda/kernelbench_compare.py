#!/usr/bin/env python3
"""GPU-seconds per new candidate: KernelForge's pool against KernelBench's own harness.

The same candidates, KernelBench `load_inline` files (ModelNew) for ten
single-operator, level-1-style tasks, are evaluated twice on one GPU:

  kforge   `kforge eval --solutions pairs.jsonl` (torch_ext mode, compiled by
           nvcc against the torch shim, verified on 5 seeds and every shape
           variant, timed against eager with the adaptive stopping rule,
           as a submit step) through the device pool of the `cuda` preset;
           compiles overlap evaluations. GPU-seconds per new candidate = the
           batch's wall time / candidates (the GPU is held throughout). Then
           the same batch again on the warm compile cache (`kforge_warm`):
           what the devices are held for once compilation was done on CPUs,
           `judging_seconds` of the summary (first request to last report,
           judge start-up excluded) / candidates: the figure to set against
           KernelBench's warm build directory. Both time as an environment
           step does, until the default reward is decided
           (eval.stop_when_decided, on by default). And once more on the warm
           cache with that off (`kforge_target_rse`): every candidate timed
           to the preset's target_rse, against the decided rule.
  kernelbench  `kernelbench.eval.eval_kernel_against_ref` as its
           run_and_check.py calls it (5 correctness trials, 100 timed trials),
           one candidate at a time, as that script runs. The first
           --kb-new candidates on a fresh build directory (a new candidate:
           its load_inline compile holds the GPU), plus the eager reference
           timing that run_and_check.py does for the speedup. Every one of the
           --kb-candidates on a warm build directory (`warm_s`): what the
           harness costs when compilation was done beforehand on CPUs; the
           others are compiled for that first, in parallel processes, with
           KernelBench's own build_compile_cache (its precompile path).

The tasks are written here (kforge JSON); KernelBench's reference for each is
`kforge task render` of it, so both harnesses judge the same graph at the
same shapes. Candidates get a run-unique name and comment, so both sides
compile them fresh.

Usage (on the GPU machine, with the Python that has torch + CUDA):
  python bench/cuda/kernelbench_compare.py --kforge build/gpu/cli/kforge \
      --kernelbench /path/to/KernelBench-checkout --out OUT [--kb-candidates 3]

Without --kernelbench (or when its harness cannot be imported) only the
kforge side runs and the reason is printed. Writes OUT/kernelbench_compare.json.
"""
import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
import types

# op -> (kforge node attrs, CUDA expression of float v)
OPS = {
    "relu": ({}, "fmaxf(v, 0.f)"),
    "leaky_relu": ({"negative_slope": 0.01}, "v >= 0.f ? v : 0.01f * v"),
    "sigmoid": ({}, "1.f / (1.f + expf(-v))"),
    "tanh": ({}, "tanhf(v)"),
    "silu": ({}, "v / (1.f + expf(-v))"),
    "gelu": ({"approximate": "none"}, "0.5f * v * (1.f + erff(v * 0.70710678118654752f))"),
    "softplus": ({}, "v > 20.f ? v : log1pf(expf(v))"),
    "softsign": ({}, "v / (1.f + fabsf(v))"),
    "elu": ({}, "v > 0.f ? v : expm1f(v)"),
    "hardtanh": ({}, "fminf(fmaxf(v, -1.f), 1.f)"),
    "hardsigmoid": ({}, "fminf(fmaxf(v + 3.f, 0.f), 6.f) / 6.f"),
    "selu": ({}, "1.0507009873554805f * (v > 0.f ? v : 1.6732632423543772f * expm1f(v))"),
}

# Level-1-style shapes, small enough that verification on every seed is quick.
ROWS, COLS = 4096, 4096

CANDIDATE = '''# {op}: one fused elementwise pass (run {run})
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void {name}_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {{
        const float v = x[i];
        y[i] = {expr};
    }}
}}

torch::Tensor {name}_cuda(torch::Tensor x) {{
    TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "x must be a contiguous CUDA tensor");
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    const int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 132 * 16) blocks = 132 * 16;
    {name}_kernel<<<(unsigned)blocks, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}}
"""

cpp_source = "torch::Tensor {name}_cuda(torch::Tensor x);"

{name} = load_inline(
    name="{name}",
    cpp_sources=cpp_source,
    cuda_sources=source,
    functions=["{name}_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.op = {name}

    def forward(self, x):
        return self.op.{name}_cuda(x)
'''


def write_suite(out_dir, kforge, run):
    suite = os.path.join(out_dir, "suite")
    os.makedirs(suite, exist_ok=True)
    pairs = []
    for op, (attrs, expr) in OPS.items():
        task = {
            "id": "l1/" + op,
            "source": "user",
            "inputs": [{"name": "x", "shape": [ROWS, COLS], "dtype": "float32", "init": "normal"}],
            "nodes": [{"op": op, "in": ["x"], "out": "y", "attrs": attrs}],
            "outputs": ["y"],
            "shape_variants": [{"x": [ROWS // 2, COLS]}],
        }
        task_path = os.path.join(suite, op + ".json")
        with open(task_path, "w") as f:
            json.dump(task, f, indent=1)
        ref = subprocess.run([kforge, "task", "render", task_path], check=True, capture_output=True, text=True).stdout
        ref_path = os.path.join(suite, op + "_ref.py")
        with open(ref_path, "w") as f:
            f.write(ref)
        name = "kf_%s_%s" % (op, run)
        cand_path = os.path.join(suite, op + "_new.py")
        with open(cand_path, "w") as f:
            f.write(CANDIDATE.format(op=op, run=run, name=name, expr=expr))
        pairs.append({"id": op, "task": task_path, "solution": cand_path, "ref": ref_path})
    with open(os.path.join(suite, "pairs.jsonl"), "w") as f:
        for p in pairs:
            f.write(json.dumps({"id": p["id"], "task": p["task"], "solution": p["solution"]}) + "\n")
    return suite, pairs


def target_rse_config(out_dir):
    """The `cuda` preset with eval.stop_when_decided off: timing to its target_rse."""
    configs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs")
    with open(os.path.join(configs, "env", "cuda.yaml")) as f:
        lines = f.read().splitlines()
    if "eval:" not in lines:
        raise SystemExit("kernelbench_compare: configs/env/cuda.yaml has no top-level eval: section")
    at = lines.index("eval:") + 1
    lines[at:at] = ["  stop_when_decided: false"]
    # The preset's paths are relative to its folder; this copy lives elsewhere.
    skills = os.path.abspath(os.path.join(configs, "skills"))
    lines = [line.replace("../skills/", skills + "/") for line in lines]
    path = os.path.join(out_dir, "cuda_target_rse.yaml")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def run_kforge(kforge, suite, out_dir, name="kforge", config=None):
    results = os.path.join(out_dir, name + "_results.jsonl")
    if os.path.exists(results):
        os.remove(results)
    cmd = [kforge, "eval", "--backend", "cuda", "--solutions", os.path.join(suite, "pairs.jsonl"),
           "--results", results, "--json", "--progress-lines"]
    if config:
        cmd += ["--config", config]
    env = dict(os.environ)
    # Fresh compiles the first time; the second run finds them all cached.
    env["KFORGE_CACHE_DIR"] = os.path.join(out_dir, "kforge-compile-cache")
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.monotonic() - t0
    sys.stderr.write(proc.stderr[-4000:])
    summary = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {"error": proc.stdout[-2000:]}
    rows = []
    with open(results) as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
    judging = summary.get("judging_seconds", wall) if isinstance(summary, dict) else wall
    phases = {}
    for r in rows:
        timings = r.get("timings") or {}
        flat = dict(timings.get("eval_phases") or {})
        flat.update({k: v for k, v in timings.items() if k != "eval_phases"})
        for k, v in flat.items():
            if isinstance(v, (int, float)):
                phases.setdefault(k, []).append(v)
    if rows and all(r.get("verdict") == "bad input" for r in rows):
        # Nothing was judged: every figure below would be a zero.
        raise SystemExit("kernelbench_compare: kforge judged none of the suite: %s" % rows[0].get("error", ""))
    return {"wall_s": wall, "candidates": len(rows), "gpu_s_per_candidate": wall / max(len(rows), 1),
            "judging_s_per_candidate": judging / max(len(rows), 1),
            "median_timings_ms": {k: sorted(v)[len(v) // 2] for k, v in phases.items()},
            "summary": summary, "verdicts": {r["label"]: r.get("verdict") for r in rows},
            "speedups": {r["label"]: r.get("speedup") for r in rows}, "exit_code": proc.returncode}


class _StubModel:
    """pydantic.BaseModel as KernelBench's result records use it: keyword fields over class defaults."""

    def __init__(self, **fields):
        for cls in reversed(type(self).__mro__):
            for k, v in vars(cls).items():
                if not k.startswith("_") and not callable(v):
                    setattr(self, k, v)
        self.__dict__.update(fields)

    def model_dump(self):
        return dict(self.__dict__)

    dict = model_dump


# Modules KernelBench's package imports for things this comparison does not
# touch (fetching datasets and problems over HTTP, .env files, progress
# bars, result records). Where they are not installed (the GPU machine has
# no network to install them), stand-ins are used; none of them is on the
# path of a compile, a correctness trial or a timed trial.
_STUBS = {
    "dotenv": {"load_dotenv": lambda *a, **k: None},
    "tqdm": {"tqdm": lambda it=None, *a, **k: it},
    "requests": {},
    "openai": {"OpenAI": object},
    "litellm": {"completion": lambda *a, **k: None},
    "datasets": {},
    "pydantic": {"BaseModel": _StubModel},
    "kernelbench.dataset": {},
}


def import_kernelbench(checkout):
    """(kernelbench.eval, kernelbench.timing, None), or (None, None, why); the stand-ins used go to stubbed."""
    sys.path.insert(0, os.path.join(checkout, "src"))
    stubbed = []
    for _ in range(len(_STUBS) + 1):
        try:
            kb_eval = importlib.import_module("kernelbench.eval")
            kb_timing = importlib.import_module("kernelbench.timing")
            if stubbed:
                print("[kernelbench] stand-ins for modules it imports but this comparison does not use: " +
                      ", ".join(stubbed), flush=True)
            return kb_eval, kb_timing, None
        except ImportError as e:
            name = getattr(e, "name", None) or ""
            missing = next((m for m in _STUBS if m not in sys.modules and (name == m or name.startswith(m + ".")
                                                                          or ("'%s'" % m) in str(e))), None)
            if missing is None:
                return None, None, "%s (KernelBench's harness needs it; install it next to torch to compare)" % e
            module = types.ModuleType(missing)
            for k, v in _STUBS[missing].items():
                setattr(module, k, v)
            sys.modules[missing] = module
            stubbed.append(missing)
            for m in [m for m in sys.modules if m == "kernelbench" or m.startswith("kernelbench.")]:
                if m not in _STUBS:
                    del sys.modules[m]
    return None, None, "KernelBench's package did not import"


def _kb_precompile(job):
    """In a process of its own: KernelBench's build_compile_cache of one candidate."""
    checkout, src, build_dir = job
    kb_eval, _, why = import_kernelbench(checkout)
    if kb_eval is None:
        return False, why
    ok, _, err = kb_eval.build_compile_cache(custom_model_src=src, verbose=False, build_dir=build_dir)
    return bool(ok), str(err or "")[-500:]


def run_kernelbench(kb_eval, kb_timing, pairs, count, new_count, checkout, out_dir):
    import multiprocessing
    import torch
    device = torch.device("cuda:0")
    chosen = pairs[:count]
    sources = {}
    for p in chosen:
        with open(p["ref"]) as f, open(p["solution"]) as g:
            sources[p["id"]] = (f.read(), g.read(), tempfile.mkdtemp(prefix="kb-build-", dir=out_dir))
    # Precompiled on CPUs, as eval_from_generations.py does, for the warm-only ones.
    jobs = [(checkout, sources[p["id"]][1], sources[p["id"]][2]) for p in chosen[new_count:]]
    precompile_s = 0.0
    if jobs:
        t = time.monotonic()
        with multiprocessing.get_context("spawn").Pool(min(len(jobs), os.cpu_count() or 1)) as pool:
            built = pool.map(_kb_precompile, jobs)
        precompile_s = time.monotonic() - t
        print("[kernelbench] precompiled %d candidates in parallel in %.1f s: %s" %
              (len(jobs), precompile_s, [ok for ok, _ in built]), flush=True)

    def evaluate(ref_src, cand_src, build_dir):
        return kb_eval.eval_kernel_against_ref(original_model_src=ref_src, custom_model_src=cand_src,
                                               measure_performance=True, timing_method="cuda_event",
                                               num_correct_trials=5, num_perf_trials=100, build_dir=build_dir,
                                               device=device)

    rows = []
    for i, p in enumerate(chosen):
        ref_src, cand_src, build_dir = sources[p["id"]]
        row = {"id": p["id"]}
        if i < new_count:
            t0 = time.monotonic()
            res = evaluate(ref_src, cand_src, build_dir)
            ref_time = kb_timing.measure_ref_program_time(ref_arch_name="Reference Program", ref_arch_src=ref_src,
                                                          num_trials=100, use_torch_compile=False,
                                                          timing_method="cuda_event", device=device)
            row["new_s"] = time.monotonic() - t0
            runtime = getattr(res, "runtime", None)
            ref_mean = ref_time.get("mean") if isinstance(ref_time, dict) else None
            row["speedup"] = (ref_mean / runtime) if runtime and ref_mean and runtime > 0 else None
        t1 = time.monotonic()
        res = evaluate(ref_src, cand_src, build_dir)
        row["warm_s"] = time.monotonic() - t1
        row["correct"] = bool(getattr(res, "correctness", False))
        rows.append(row)
        print("[kernelbench] %s: new %s, warm %.2f s, correct %s" %
              (p["id"], "%.1f s" % row["new_s"] if "new_s" in row else "(precompiled)", row["warm_s"],
               row["correct"]), flush=True)
    return rows, precompile_s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kforge", required=True)
    ap.add_argument("--kernelbench", default="")
    ap.add_argument("--out", required=True)
    ap.add_argument("--kb-candidates", type=int, default=8,
                    help="candidates through KernelBench's harness on a warm build directory")
    ap.add_argument("--kb-new", type=int, default=2,
                    help="of those, how many also as new candidates (30-60 s each on the GPU)")
    a = ap.parse_args()
    # The suite's manifest names its files by this folder, and kforge reads a
    # manifest's relative paths from the manifest's own folder: absolute it is.
    a.out = os.path.abspath(a.out)
    os.makedirs(a.out, exist_ok=True)

    def save(report):
        # After each side: a run cut short by its caller's deadline (KernelBench's
        # precompile takes minutes) keeps the figures it has.
        path = os.path.join(a.out, "kernelbench_compare.json")
        with open(path + ".tmp", "w") as f:
            json.dump(report, f, indent=1)
        os.replace(path + ".tmp", path)

    run = "%d%d" % (os.getpid(), int(time.time()))
    suite, pairs = write_suite(a.out, a.kforge, run)
    report = {"tasks": len(pairs), "shape": [ROWS, COLS]}
    report["kforge"] = run_kforge(a.kforge, suite, a.out)
    kf = report["kforge"]["gpu_s_per_candidate"]
    print("[kforge] %d new candidates in %.1f s: %.3f GPU-s per candidate, %.0f per GPU-minute; verdicts %s" %
          (report["kforge"]["candidates"], report["kforge"]["wall_s"], kf, 60.0 / kf if kf > 0 else 0,
           sorted(set(report["kforge"]["verdicts"].values()))), flush=True)
    report["kforge_warm"] = run_kforge(a.kforge, suite, a.out, "kforge_warm")
    kfw = report["kforge_warm"]["judging_s_per_candidate"]
    print("[kforge] warm compile cache: %.3f GPU-s per candidate judged (first request to last report), "
          "%.1f s wall with judge start-up; median ms per phase %s" %
          (kfw, report["kforge_warm"]["wall_s"], json.dumps(report["kforge_warm"]["median_timings_ms"])), flush=True)
    warm_phases = report["kforge_warm"]["median_timings_ms"]
    print("[kforge] warm, verification's median ms: " +
          ", ".join("%s %.1f" % (k, v) for k, v in sorted(warm_phases.items()) if k.startswith("verify")), flush=True)
    # The same warm batch timed to target_rse (eval.stop_when_decided off,
    # docs/rewards.md): what the default stopping rule saves on this set.
    report["kforge_target_rse"] = run_kforge(a.kforge, suite, a.out, "kforge_target_rse", target_rse_config(a.out))
    kft = report["kforge_target_rse"]["judging_s_per_candidate"]
    time_rse = report["kforge_target_rse"]["median_timings_ms"].get("time", 0)
    time_warm = report["kforge_warm"]["median_timings_ms"].get("time", 0)
    print("[kforge] warm, timing to target_rse: %.3f GPU-s per candidate judged (the default's, timing until the "
          "reward is decided, is %.2fx of it); median time phase %.1f ms against %.1f; speedups %s against %s" %
          (kft, kfw / kft if kft > 0 else 0, time_rse, time_warm,
           json.dumps(report["kforge_target_rse"]["speedups"]), json.dumps(report["kforge_warm"]["speedups"])),
          flush=True)
    save(report)
    if a.kernelbench:
        kb_eval, kb_timing, why = import_kernelbench(a.kernelbench)
        if kb_eval is None:
            report["kernelbench_unavailable"] = why
            print("[kernelbench] not run: " + why, flush=True)
        else:
            rows, precompile_s = run_kernelbench(kb_eval, kb_timing, pairs, a.kb_candidates, a.kb_new,
                                                 a.kernelbench, a.out)
            new_rows = [r["new_s"] for r in rows if "new_s" in r]
            new = sum(new_rows) / max(len(new_rows), 1)
            warm = sum(r["warm_s"] for r in rows) / max(len(rows), 1)
            report["kernelbench"] = {"candidates": rows, "new_s_per_candidate": new, "warm_s_per_candidate": warm,
                                     "precompile_wall_s": precompile_s}
            report["kb_new_over_kforge"] = new / kf if kf > 0 else None
            report["kb_warm_over_kforge"] = warm / kf if kf > 0 else None
            report["kforge_warm_over_kb_warm"] = kfw / warm if warm > 0 else None
            print("[compare] GPU-seconds per new candidate: kernelbench %.2f s, kforge %.3f s: %.1fx fewer "
                  "(kernelbench on a warm build directory: %.2f s, %.1fx)" %
                  (new, kf, new / kf, warm, warm / kf), flush=True)
            print("[compare] both precompiled: kforge %.3f s per candidate judged, kernelbench %.2f s: kforge at "
                  "%.2fx of kernelbench's GPU time" % (kfw, warm, kfw / warm if warm > 0 else 0), flush=True)
    else:
        report["kernelbench_unavailable"] = "no --kernelbench checkout given"
    save(report)


if __name__ == "__main__":
    main()
