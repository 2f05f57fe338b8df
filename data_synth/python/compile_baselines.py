"""torch.compile baselines for synthesized tasks, in parallel processes.

Each task's KernelBench rendering (kforge synth writes DIR/kernelbench/*.py)
is compiled with torch.compile by a pool of worker processes (the compile is
the slow, CPU-bound part) and timed under a lock shared by the pool, so no two
timings overlap on the device. Timing: CUDA events around each call, an L2
flush (a write of twice the L2 size) before each sample, warm-up calls, then
samples until the median's relative standard error is under 1% or 200 ms of
samples (at least 10). On the CPU: perf_counter on one thread.

Where torch.compile is missing or does not work (PyTorch 1.13 has none), the
summary says so with the reason and no baseline is recorded: never a guess.

Usage:
  compile_baselines.py --tasks T.jsonl --pydir DIR --out R.jsonl --summary S.json
                       [--device cuda|cpu] [--workers N] [--limit K] [--time-limit S]
"""

import argparse
import fcntl
import hashlib
import importlib.util
import json
import math
import multiprocessing as mp
import os
import statistics
import sys
import time

sys.dont_write_bytecode = True

PROTOCOL = "torch.compile default mode; L2 flush per sample; warm-up 3 calls; samples to RSE 1% or 200 ms (min 10)"


def compile_available(device):
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        return False, "torch is not importable: %s" % e, None
    version = torch.__version__
    if not hasattr(torch, "compile"):
        return False, "PyTorch %s has no torch.compile" % version, version
    if device == "cuda" and not torch.cuda.is_available():
        return False, "PyTorch %s sees no CUDA device" % version, version
    try:
        f = torch.compile(lambda x: torch.relu(x) * 2)
        x = torch.randn(64, device=device)
        f(x)
    except Exception as e:  # noqa: BLE001
        return False, "torch.compile does not work here: %s" % str(e).splitlines()[0][:200], version
    return True, "", version


def file_name(task_id):
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in task_id) + ".py"


def time_call(fn, args, device, lock_path):
    import torch

    with torch.no_grad():
        for _ in range(3):
            fn(*args)
        if device == "cuda":
            torch.cuda.synchronize()
            l2 = torch.cuda.get_device_properties(0).L2_cache_size if hasattr(
                torch.cuda.get_device_properties(0), "L2_cache_size") else 64 << 20
            flush = torch.empty(int(2 * l2) // 4, dtype=torch.float32, device="cuda")
        samples = []
        with open(lock_path, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                start_all = time.perf_counter()
                while True:
                    if device == "cuda":
                        flush.fill_(1.0)
                        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        a.record()
                        fn(*args)
                        b.record()
                        b.synchronize()
                        samples.append(a.elapsed_time(b))
                    else:
                        t0 = time.perf_counter()
                        fn(*args)
                        samples.append((time.perf_counter() - t0) * 1e3)
                    n = len(samples)
                    if n >= 10:
                        med = statistics.median(samples)
                        rse = statistics.stdev(samples) / math.sqrt(n) / med if med > 0 else 0
                        if rse < 0.01 or (time.perf_counter() - start_all) * 1e3 > 200 or n >= 2000:
                            break
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
    return statistics.median(samples), len(samples)


def work(job):
    task_id, path, device, lock_path = job
    try:
        import torch

        if device == "cpu":
            torch.set_num_threads(1)
        spec = importlib.util.spec_from_file_location("task_" + file_name(task_id)[:-3], path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        model = module.Model(*module.get_init_inputs()).to(device)
        inputs = [t.to(device) for t in module.get_inputs()]
        compiled = torch.compile(model)
        t0 = time.perf_counter()
        with torch.no_grad():
            compiled(*inputs)
        compile_s = time.perf_counter() - t0
        ms, n = time_call(compiled, inputs, device, lock_path)
        name = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
        return {"task_id": task_id, "compile_ms": ms, "samples": n, "compile_s": compile_s, "device": name,
                "torch": torch.__version__, "protocol": PROTOCOL}
    except Exception as e:  # noqa: BLE001 - a task that does not compile is a result
        return {"task_id": task_id, "error": "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:200] if str(e)
                                                         else "")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", required=True)
    ap.add_argument("--pydir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--summary", required=True)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--limit", type=int, default=0, help="at most this many tasks (0: all)")
    ap.add_argument("--time-limit", type=float, default=0,
                    help="seconds after which unfinished compiles are abandoned (0: none); finished ones are kept")
    a = ap.parse_args()
    ok, reason, version = compile_available(a.device)
    summary = {"available": ok, "torch": version, "device": a.device, "protocol": PROTOCOL}
    if not ok:
        summary["reason"] = reason
        json.dump(summary, open(a.summary, "w"), indent=1)
        print("torch.compile baselines unavailable: %s" % reason)
        return 0
    done = set()
    if os.path.exists(a.out):
        for line in open(a.out):
            try:
                done.add(json.loads(line)["task_id"])
            except (ValueError, KeyError):
                pass
    jobs = []
    for line in open(a.tasks):
        line = line.strip()
        if not line:
            continue
        t = json.loads(line)
        if t["id"] in done or (t.get("baselines") or {}).get("compile_ms"):
            continue
        jobs.append((t["id"], os.path.join(a.pydir, file_name(t["id"])), a.device, a.out + ".lock"))
    # A sample spread over the set, not its first slots: the order is a hash of
    # the task id, fixed, so a rerun with a larger --limit extends the same
    # sample.
    jobs.sort(key=lambda j: hashlib.sha256(j[0].encode()).hexdigest())
    if a.limit > 0:
        jobs = jobs[:a.limit]
    ctx = mp.get_context("spawn")
    results = 0
    errors = 0
    abandoned = 0
    start = time.monotonic()
    with ctx.Pool(max(1, a.workers)) as pool, open(a.out, "a") as out:
        it = pool.imap_unordered(work, jobs)
        for _ in range(len(jobs)):
            try:
                if a.time_limit > 0:
                    r = it.next(timeout=max(0.0, a.time_limit - (time.monotonic() - start)))
                else:
                    r = it.next()
            except mp.TimeoutError:
                abandoned = len(jobs) - results
                pool.terminate()
                break
            # One whole line per result: a reader never sees half a record.
            out.write(json.dumps(r) + "\n")
            out.flush()
            results += 1
            errors += "error" in r
    summary.update({"tasks": results, "errors": errors, "abandoned_at_time_limit": abandoned})
    if a.device == "cuda":
        import torch

        summary["device"] = torch.cuda.get_device_name(0)
    json.dump(summary, open(a.summary, "w"), indent=1)
    print("torch.compile baselines: %d tasks, %d errors, %d abandoned at the time limit" % (results, errors, abandoned))
    return 0


if __name__ == "__main__":
    sys.exit(main())
