#include "spool_file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "kforge/core/errno_text.h"
#include "kforge/core/error.h"
#include "kforge/core/unique_fd.h"

namespace kforge::rollout::internal {

namespace fs = std::filesystem;

bool pread_all(int fd, char* buf, size_t n, uint64_t offset) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd, buf + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw SystemError("spool: read failed: " + errno_text());
    if (r == 0) return false;
    done += static_cast<size_t>(r);
  }
  return true;
}

void write_all(int fd, const char* buf, size_t n, const fs::path& path) {
  size_t done = 0;
  while (done < n) {
    const ssize_t w = ::write(fd, buf + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw SystemError("spool: cannot write " + path.string() + ": " + errno_text());
    done += static_cast<size_t>(w);
  }
}

void fsync_dir(const fs::path& dir) {
  const UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd) ::fsync(fd.get());
}

void write_atomically(const fs::path& path, std::string_view text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    const UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd) throw SystemError("spool: cannot create " + tmp.string() + ": " + errno_text());
    write_all(fd.get(), text.data(), text.size(), tmp);
    ::fsync(fd.get());
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    throw SystemError("spool: cannot rename " + tmp.string() + ": " + errno_text());
  }
  fsync_dir(path.parent_path());
}

}  // namespace kforge::rollout::internal
