// Recursive removal of a directory without std::filesystem::remove_all.
// PyTorch's pip wheels (2.5 and later; pytorch/pytorch#133437) export the
// std::filesystem functions they link statically from an older libstdc++, and
// in any process that links libtorch the dynamic linker binds calls to those
// copies ahead of libstdc++'s. Their remove_all jumps to address 0 (PyTorch
// 2.11 on the GPU machine: the judge, SynthGpuTest). The whole tree therefore
// uses this instead of remove_all and recursive_directory_iterator (a test,
// tests/core/no_interposed_filesystem.cmake, keeps it so). POSIX calls only;
// symbolic links are removed, never followed.
#pragma once

#include <filesystem>

namespace kforge {

// Removes `path` and everything below it; best effort, returns true if `path`
// no longer exists afterwards.
bool remove_tree(const std::filesystem::path& path);

}  // namespace kforge
