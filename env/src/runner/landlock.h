// Path-aware confinement of file writes with Landlock (Linux >= 5.13), for a
// runner whose device must open files for writing after the filters exist:
// seccomp sees only a pointer where the path is, so without this the runner's
// opens stay read-only (sandbox.h). With it, every write-like access to the
// file system (writing, truncating, creating, removing, linking, renaming,
// executing, device ioctls on newly opened nodes) is refused everywhere but
// the listed files and directories, and the filters may then allow writable
// opens. Reading is left to the filters as before.
//
// What needed it: the NVIDIA driver reopens /dev/nvidia0 for writing while
// CUPTI collects counters (seen on an H200, 2026-12-02).
#pragma once

#include <string>
#include <vector>

namespace kforge::runner {

struct FileConfinement {
  bool applied = false;
  int abi = 0;                        // Landlock ABI version of the kernel, 0 when absent
  std::vector<std::string> writable;  // what was granted (existing paths only)
  std::string why_not;                // when not applied
};

// Restricts the calling thread and its future children; needs no_new_privs.
// Paths that do not exist are skipped. Never throws: a kernel without
// Landlock (or one that refuses it) leaves `applied` false with the reason.
FileConfinement confine_file_writes(const std::vector<std::string>& writable);

// The NVIDIA device nodes of this machine: /dev/nvidia* (files and the
// nvidia-caps directory).
std::vector<std::string> nvidia_device_paths();

}  // namespace kforge::runner
