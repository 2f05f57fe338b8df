// The runner's confinement (docs/architecture.md#isolation), applied in steps because loading
// the candidate needs more than running it:
//
//   at startup       die with the judge, close stray fds, own network namespace
//                    (when permitted), cwd = scratch dir
//   before loading   rlimits (core 0, file size, open files, CPU time), all
//                    capabilities dropped, no_new_privs, SIGSYS reporter, Landlock
//                    (file writes refused by path, except what a device must
//                    write: landlock.h), and the
//                    LOADING seccomp filter: what the dynamic loader needs
//                    (read-only openat, mmap/mprotect, ...) plus the RUNNING set
//   after loading    RLIMIT_AS, then the RUNNING filter stacked on top: memory,
//                    futex, I/O on the control socket and stdout/stderr only,
//                    clocks, exit. Everything else traps.
//
// A trapped system call runs the SIGSYS reporter, which writes a `sandbox`
// frame naming the call number to the control socket and exits, so the judge
// reports a violation rather than a crash. The candidate's static constructors
// run during loading, inside the LOADING filter.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kforge::runner {

struct SandboxLimits {
  uint64_t memory_bytes = 4ull << 30;
  double cpu_seconds = 130;
  uint64_t output_bytes = 1u << 20;
  int open_files = 16;
};

// What could and could not be applied; the judge puts it in the report.
struct SandboxState {
  std::string network = "shared";  // "private" | "private (user namespace)" | "shared"
  bool capabilities_dropped = false;
  bool no_new_privs = false;
  // "none": no file may be opened for writing; "landlock ABI <n>: only
  // <paths>": writes confined to those; "read-only opens" when the device
  // asked for writable files but Landlock could not be applied.
  std::string file_writes = "none";
  // "ABI <n>" when Landlock confines file writes by path (every runner, on
  // kernels that have it), else "not applied: <why>".
  std::string landlock = "not applied";
  bool loading_filter = false;
  bool running_filter = false;
  uint64_t address_space_limit = 0;
  std::vector<std::string> notes;  // failures of optional steps
  nlohmann::json to_json() const;
};

// Startup steps (no filter yet).
void isolate_network(SandboxState* state);

// Limits, capabilities, no_new_privs, the SIGSYS reporter and the loading
// filter. `extra_syscalls` are the device's additional needs in both phases
// (none on CPU; "mprotect" among them is allowed without PROT_EXEC only).
// Landlock (landlock.h) refuses file writes everywhere but `writable_files`
// (device ioctls everywhere but `device_ioctl_files` too); when
// `writable_files` is not empty and Landlock applied, the device's
// "openat"/"open" extras allow write flags. Landlock is a second wall: where
// the kernel lacks it the filters alone refuse writable opens, and the state
// says why. Throws std::runtime_error if a mandatory step fails.
void enter_loading_phase(const SandboxLimits& limits, const std::vector<std::string>& extra_syscalls,
                         const std::vector<std::string>& writable_files, SandboxState* state,
                         const std::vector<std::string>& device_ioctl_files = {});

// RLIMIT_AS = current address space + limits.memory_bytes, then the running
// filter. Throws std::runtime_error on failure.
void enter_running_phase(const SandboxLimits& limits, SandboxState* state);

}  // namespace kforge::runner
