// The conversation between the compile service and a kforge-nvrtc worker
// (frames of ipc/wire.h on the worker's fd 3). NVRTC compiles the
// policy's source in that process, not in the environment's: a preprocessor
// bomb or a template explosion can hang it or exhaust its memory, and the
// worker is then killed and replaced while the environment carries on
// (docs/compile.md, "NVRTC out of process").
//
//   service -> worker                              worker -> service
//   (once, when NVRTC is loaded and warm)          ready {version}
//   compile {source, name, args, names,            compiled {result, result_text, log, cubin (binary),
//            memory_limit_bytes, cpu_limit_s}                lowered: [name or null per entry of names]}
//                                                  | error {message} (an NVRTC API call failed)
//   shutdown {}                                    (exits)
#pragma once

#include <cstddef>

namespace kforge::env::nvrtc_worker {

inline constexpr int kControlFd = 3;
// The program log is cut here (its head holds the first errors, which are
// what the diagnostics show).
inline constexpr size_t kMaxLogBytes = 1u << 20;
// Exit status when the worker cannot start its protocol (bad arguments).
inline constexpr int kUsageExitCode = 2;

}  // namespace kforge::env::nvrtc_worker
