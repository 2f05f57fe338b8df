// The bounds every reader of outside input enforces, in one place.
//
// Outside input is anything KernelForge did not produce itself: task, config,
// reward and solution files, the policy's tool calls and source code, wire
// messages from trainers and runner frames from candidates. Each limit below
// is checked before the work it bounds is done (a file's size before it is
// read, a document's depth while it is parsed), and each one that is exceeded
// becomes an InputError naming the file or field, the limit and its value.
// docs/threat-model.md ("Outside input") lists the readers and their fuzz
// targets.
//
// Values are chosen far above anything an honest task, config or policy needs
// and far below what would exhaust a thread's stack, the host's memory or a
// second of CPU time.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kforge::limits {

// ---- documents (JSON and YAML: tasks, configs, rewards, solutions, tool
// call arguments, JSONL lines) ----

// Bytes of one document file, checked before it is read (so `task check
// /dev/zero` returns at once). The largest honest documents are solution
// files, whose source is capped at compile.max_source_bytes (1 MiB by
// default); 16 MiB leaves room for JSON escaping and large task sets.
inline constexpr size_t kMaxDocumentBytes = size_t{16} << 20;

// Nesting of arrays and objects. Tasks nest ~6 levels, configs ~4, launch
// plans ~5; nlohmann's dump, copy and comparison recurse once per level, so
// depth is what turns a small document into a stack overflow.
inline constexpr int kMaxDocumentDepth = 64;

// Values (scalars, arrays and objects) in one parsed document, counting YAML
// aliases as the copies they expand to. A document without aliases has fewer
// values than bytes; the cap is what stops "billion laughs" (nested aliases
// that expand exponentially) after a few milliseconds.
inline constexpr size_t kMaxDocumentValues = 1000000;

// ---- MessagePack (env-server requests, runner frames) ----

// Nesting of one MessagePack message; the deepest message we send (a
// trajectory) nests ~10 levels and a task inside a request ~8.
inline constexpr int kMaxMessageDepth = 128;

// ---- tasks (checked at `task check`, reset and --tasks load) ----

// The ABI's kf_tensor holds 8 dimensions (kernel_abi.h).
inline constexpr size_t kMaxTensorRank = 8;

// Elements of any tensor of any shape variant, inputs, params, outputs and
// intermediates alike: a count every kernel can index with int32 (most do),
// 8 GiB in float32. It refuses a 65536x65536 broadcast (2^32 elements).
inline constexpr int64_t kMaxTensorElements = (int64_t{1} << 31) - 1;

// Shape variants of one task. Each variant multiplies verification (every
// seed runs every variant); honest tasks have a handful.
inline constexpr size_t kMaxShapeVariants = 64;

// Nodes of one task graph. KernelBench's largest models (level 3, traced by
// torch.fx) have a few hundred ops.
inline constexpr size_t kMaxTaskNodes = 1024;

// Inputs plus params of one task: each is a kernel argument.
inline constexpr size_t kMaxTaskTensors = 64;

// Bytes of one node's attrs as compact JSON. Every op's attributes are a few
// scalars and short int lists (well under 1 KiB).
inline constexpr size_t kMaxAttrsBytes = 4096;

// Magnitude of an integer attr (a dim, size, stride, padding or repeat
// count). No shape-related attribute needs more, and with it any product of
// an attr and a dimension fits in 64 bits, so shape inference cannot wrap.
inline constexpr int64_t kMaxAttrInt = int64_t{1} << 31;

// Bytes of a task id or a tensor name: they are printed in prompts, ABI
// tables and file names.
inline constexpr size_t kMaxNameBytes = 256;

// ---- configs ----

// Every duration in a config (timeouts, budgets, windows), in seconds. No
// compile, evaluation or episode needs a day, and the bound keeps deadline
// arithmetic (steady_clock nanoseconds, overflowing after 292 years) exact.
inline constexpr double kMaxConfigDurationS = 86400.0;

// Magnitude of every number of a reward config (values, penalties, caps,
// weights). Published reward schemes use values of order 1 to 100; the bound
// keeps every weighted sum of terms finite.
inline constexpr double kMaxRewardMagnitude = 1e6;

// ---- the policy's text ----

// Characters of a tool call's name suggested against ("did you mean"): edit
// distance costs the product of the lengths, and no tool, key or task id is
// longer.
inline constexpr size_t kMaxSuggestionChars = 256;

// A run of identifier characters (letters, digits, '_') in a torch_ext
// source. Compilers accept long names, but none of an honest kernel's comes
// near this, and a megabyte-long one only exercises the reader.
inline constexpr size_t kMaxIdentifierChars = 4096;

// Functions listed in a torch_ext load_inline(functions=[...]).
inline constexpr size_t kMaxTorchExtFunctions = 64;

// A kernel launch configuration (`<<<...>>>`) longer than this is not read
// as one: real ones are a few dozen characters.
inline constexpr size_t kMaxLaunchConfigChars = 1024;

// ---- nvrtc launch plans ----

// Kernels of one plan: more would be a CUDA graph; a plan is meant to be short.
inline constexpr size_t kMaxPlanKernels = 16;
// Arguments of one kernel; the parameter space (4 KiB) fits ~500 pointers.
inline constexpr size_t kMaxPlanArgs = 128;
// Characters of one launch expression, and its nesting.
inline constexpr size_t kMaxExprChars = 1000;
inline constexpr int kMaxExprDepth = 64;

}  // namespace kforge::limits
