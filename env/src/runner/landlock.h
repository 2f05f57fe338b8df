// Path-aware confinement of file writes with Landlock (Linux >= 5.13), applied
// in every runner (sandbox.h). Every write-like access to the file system
// (writing, truncating, creating, removing, linking, renaming, executing,
// device ioctls on newly opened nodes) is refused everywhere but the listed
// files and directories. Reading is left to the seccomp filters.
//
// For most runners nothing is listed: the filters already refuse writable
// opens (they see only a pointer where the path is), and Landlock is a second
// wall, one that also holds where the filter is wider (the CUDA runners'
// `write` on any descriptor) and that a path, not a flag, decides. A profiler
// runner lists the NVIDIA device nodes as writable, because the driver
// reopens /dev/nvidia0 for writing while CUPTI collects counters (seen on an
// H200, 2026-12-02), and its filters then allow writable opens. A CUDA runner
// lists the device nodes for ioctls only (Landlock ABI >= 5 checks ioctls on
// device files opened after it), so that the driver keeps working on a node
// it opens late.
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
// `writable` may be written (not created, removed or linked); `device_ioctl`
// may only take ioctls. Paths that do not exist are skipped. Never throws: a
// kernel without Landlock (or one that refuses it) leaves `applied` false
// with the reason.
FileConfinement confine_file_writes(const std::vector<std::string>& writable,
                                    const std::vector<std::string>& device_ioctl = {});

// The NVIDIA device nodes of this machine: /dev/nvidia* (files and the
// nvidia-caps directory).
std::vector<std::string> nvidia_device_paths();

}  // namespace kforge::runner
