// The judge <-> runner conversation (frames from wire.h on the runner's fd 3).
//
//   judge -> runner                           runner -> judge
//   (once, unasked, when start-up is over)     started {protocol, build} (build_identity.h)
//   setup {seq, library, limits, arena} +fds   loading {seq} (the candidate's code may run from now on), then
//                                              ready {seq, sandbox}  | error {seq, stage, message}
//   setup {seq, cubin, launch, tensors, ...}   (nvrtc: a CUBIN and its launch plan instead of a library)
//   bind  {seq, inputs, outputs}               bound {seq}           | error {...}
//   call  {seq, null}                          done  {seq, rc, self_ns}
//   (at any time, from the SIGSYS handler)     sandbox {syscall}     then exit(kSandboxExitCode)
//
// Tensors in `bind` are {offset, dtype, shape, stride}, offsets into the arena.
// For a CUBIN, `tensors` names the bound tensors in order (inputs, params,
// outputs); the runner evaluates the launch plan for their shapes on `bind`
// and launches the plan's kernels on `call` (docs/launch-plan.md).
// A `null` call does everything a call does except calling kf_forward: its
// round trip is the harness overhead subtracted from candidate timings.
#pragma once

namespace kforge::ipc::runner_protocol {

inline constexpr int kControlFd = 3;
// Exit status of a runner after it reported a blocked system call.
inline constexpr int kSandboxExitCode = 159;
// Exit status when a runner cannot even start its protocol (bad arguments).
inline constexpr int kUsageExitCode = 158;

}  // namespace kforge::ipc::runner_protocol
