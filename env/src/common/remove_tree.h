// Recursive removal of a scratch directory without std::filesystem::remove_all:
// PyTorch 2.x's libtorch.so exports its own std::filesystem::remove_all, which
// the dynamic linker binds ahead of libstdc++'s in any process that links
// libtorch (the judge), and that copy jumps to address 0 (seen with PyTorch
// 2.11 on the GPU machine). POSIX calls only; symbolic links are removed, never
// followed.
#pragma once

#include <filesystem>

namespace kforge::exec {

// Removes `path` and everything below it; best effort, returns true if `path`
// no longer exists afterwards.
bool remove_tree(const std::filesystem::path& path);

}  // namespace kforge::exec
