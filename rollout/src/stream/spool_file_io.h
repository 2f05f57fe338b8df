// POSIX file I/O of the spool: whole reads and writes through EINTR and short
// counts, and replacements that survive a crash. Failures throw SystemError.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>

namespace kforge::rollout::internal {

// Reads exactly n bytes at `offset`; false at end of file.
bool pread_all(int fd, char* buf, size_t n, uint64_t offset);

// `path` names the file in the error message.
void write_all(int fd, const char* buf, size_t n, const std::filesystem::path& path);

// Makes a file created or renamed in `dir` durable; best effort.
void fsync_dir(const std::filesystem::path& dir);

// Writes `text` to `path` through a temporary file and a rename, so that the
// file is either the old or the new version after a crash.
void write_atomically(const std::filesystem::path& path, std::string_view text);

}  // namespace kforge::rollout::internal
