#include "kforge/core/remove_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace kforge {
namespace {

// Empties the directory open as `dir_fd` (which this call closes).
void empty_directory(int dir_fd) {
  DIR* dir = ::fdopendir(dir_fd);
  if (dir == nullptr) {
    ::close(dir_fd);
    return;
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(dir)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
  }
  for (const auto& name : names) {
    if (::unlinkat(dirfd(dir), name.c_str(), 0) == 0) continue;
    if (errno != EISDIR && errno != EPERM) continue;
    int child = ::openat(dirfd(dir), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (child < 0) continue;
    empty_directory(child);
    ::unlinkat(dirfd(dir), name.c_str(), AT_REMOVEDIR);
  }
  ::closedir(dir);
}

}  // namespace

bool remove_tree(const std::filesystem::path& path) {
  if (::unlink(path.c_str()) != 0 && (errno == EISDIR || errno == EPERM)) {
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) empty_directory(fd);
    ::rmdir(path.c_str());
  }
  struct stat st {};
  return ::lstat(path.c_str(), &st) != 0 && errno == ENOENT;
}

}  // namespace kforge
