#!/usr/bin/env python3
"""Writes the seed corpora of fuzz/<target>/corpus/ from the repository's own
examples and configs plus a few hostile shapes (deep, duplicate keys, aliases,
truncations). Run from the repository root with /usr/bin/python3 (needs
msgpack). Seeds are named seed_*; inputs that once crashed a reader are kept
in the same folders as crash_* and never regenerated."""

import glob
import json
import os
import struct

import msgpack

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write(target, name, data):
    d = os.path.join(ROOT, "fuzz", target, "corpus")
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed_" + name), "wb") as f:
        f.write(data)


def read(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return f.read()


# document: first byte even = JSON, odd = YAML.
for path in sorted(glob.glob(os.path.join(ROOT, "examples/*/task.json"))):
    write("document", "task_" + os.path.basename(os.path.dirname(path)), b"\x00" + read(path))
for path in sorted(glob.glob(os.path.join(ROOT, "configs/*/*.yaml"))):
    write("document", "config_" + os.path.basename(os.path.dirname(path)) + "_" + os.path.basename(path),
          b"\x01" + read(path))
write("document", "solution_nvrtc.yaml", b"\x01" + read("examples/affine_relu6/cuda/nvrtc_fast.yaml"))
write("document", "deep.json", b"\x00" + b"[" * 80 + b"]" * 80)
write("document", "dup.json", b"\x00" + b'{"id": "a", "id": "b"}')
write("document", "laughs.yaml", b"\x01a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\nd: [*c, *c]\n")
write("document", "variants.json", b"\x00" + json.dumps({
    "id": "v", "inputs": [{"name": "x", "shape": [4, 8]}],
    "nodes": [{"op": "repeat", "in": ["x"], "out": "y", "attrs": {"repeats": [2, 3]}}],
    "outputs": ["y"], "shape_variants": [{"x": [65536, 65536]}, {"x": [2, 2]}]}).encode())

# tool_call: the raw text of a call, or an arguments string.
write("tool_call", "compile", json.dumps({"name": "compile", "arguments": json.dumps({"source": "int x;"})}))
write("tool_call", "envelope", json.dumps({"type": "function", "id": "c1", "function": {
    "name": "submit", "arguments": {"source": "__global__ void k() {}", "mode": "nvrtc",
                                     "launch": {"name": "k", "grid": [1], "block": [32], "args": []}}}}))
write("tool_call", "arguments", json.dumps({"source": "x", "options": ["-O3"]}))
write("tool_call", "analyze", json.dumps({"tool": "resource_usage", "args": {}}))
write("tool_call", "deep", "[" * 100 + "]" * 100)

# rpc_request: MessagePack requests as clients send them.
task = json.loads(read("examples/affine_relu6/task.json"))
for name, method, params in [
        ("hello", "hello", {"client": "fuzz"}), ("make", "make", {}), ("ping", "ping", {}),
        ("reset", "reset", {"env_id": 0, "task": task, "seed": 3}),
        ("reset_id", "reset", {"env_id": 0, "task_id": "affine_relu6"}),
        ("step", "step", {"env_id": 0, "tool_call": {"name": "compile", "arguments": "{\"source\": \"x\"}"}}),
        ("step_action", "step", {"env_id": 0, "action": {"type": "verify", "solution": {"source": "x"}}}),
        ("tasks", "tasks", {"offset": 0, "limit": 5})]:
    write("rpc_request", name, msgpack.packb({"v": 1, "id": 7, "method": method, "params": params}))
write("rpc_request", "truncated", msgpack.packb({"v": 1, "id": 7, "method": "ping"})[:-2])
write("rpc_request", "deep", b"\x91" * 200 + b"\xc0")
write("rpc_request", "huge_count", b"\xdd\xff\xff\xff\xff")


# runner_frame: 4-byte little-endian length + MessagePack map.
def frame(body):
    payload = msgpack.packb(body) if not isinstance(body, bytes) else body
    return struct.pack("<I", len(payload)) + payload


for name, body in [("started", {"type": "started"}), ("ready", {"type": "ready", "ok": True}),
                   ("done", {"type": "done", "seq": 3, "ok": True, "cpu_ns": 1200}),
                   ("error", {"type": "error", "message": "x"}), ("type_int", {"type": 7}),
                   ("deep", b"\x81\xa4type" + b"\x91" * 200 + b"\xc0"),
                   ("not_map", b"\x93\x01\x02\x03")]:
    write("runner_frame", name, frame(body))
write("runner_frame", "short", b"\x05\x00\x00\x00\x81")

# launch_plan: the launch object of an nvrtc solution, as JSON.
write("launch_plan", "single", json.dumps({"name": "scale<float, 4>", "grid": ["cdiv(numel(x), 256)"],
                                           "block": [256], "shared_mem": 0,
                                           "args": ["x", "y", "i64(numel(x))", "f32(0.5)"]}))
write("launch_plan", "kernels", json.dumps({"kernels": [
    {"name": "a", "grid": ["min(cdiv(numel(x) / 4, 256), 132 * 8)", 1, "dim(x, -1) % 7 + 1"], "block": [256, 1, 1],
     "args": ["x", "w", "y", "i64(numel(x) / 4)", "i64(dim(x, -1))", "u32(ndim(y))", "f64(1.0 / dim(x, 1))"]},
    {"name": "b", "grid": 1, "block": 32, "shared_mem": "dim(w, 0) * 4", "args": ["y"]}]}))
write("launch_plan", "overflow", json.dumps({"name": "k", "grid": ["numel(x) * numel(x) * numel(x)"], "block": [1],
                                             "args": ["i32(9223372036854775807 + 1)"]}))

# torch_ext: KernelBench Python and bare CUDA sources.
write("torch_ext", "python", read("examples/affine_relu6/cuda/torch_ext_fast.py"))
write("torch_ext", "cuda", b"#include <torch/extension.h>\n__global__ void k(float* y) { y[0] = 1; }\n"
                           b"torch::Tensor forward(torch::Tensor x) {\n  auto y = torch::empty_like(x);\n"
                           b"  k<<<1, 1>>>(y.data_ptr<float>());\n  k<<<1, 1, 0, 0>>>(y.data_ptr<float>());\n"
                           b"  return y;\n}\n")
write("torch_ext", "long_name", b"torch::Tensor forward(torch::Tensor " + b"a" * 5000 + b") { return a; }\n")
write("torch_ext", "unclosed", b"<<<" * 100 + b"torch::Tensor f(" * 20)
