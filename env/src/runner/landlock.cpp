#include "runner/landlock.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <filesystem>

#include "kforge/core/errno_text.h"
#include "kforge/core/unique_fd.h"

// Rights newer than the system headers (Debian 12's describe ABI 2); the
// values are the kernel's ABI and never change.
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif

namespace kforge::runner {
namespace {

// Everything but reading, by the ABI that introduced it.
uint64_t handled_rights(int abi) {
  uint64_t rights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
                    LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |
                    LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
                    LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;
  if (abi >= 2) rights |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) rights |= LANDLOCK_ACCESS_FS_TRUNCATE;
  if (abi >= 5) rights |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
  return rights;
}

// What a granted path gets: writing into existing files (and device ioctls),
// never creating, removing or linking anything.
uint64_t granted_rights(int abi) {
  return handled_rights(abi) &
         (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV);
}

}  // namespace

FileConfinement confine_file_writes(const std::vector<std::string>& writable,
                                    const std::vector<std::string>& device_ioctl) {
  FileConfinement result;
  const long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 1) {
    result.why_not = "Landlock unavailable (" + errno_text(errno) + ")";
    return result;
  }
  result.abi = static_cast<int>(abi);
  landlock_ruleset_attr attr{};
  attr.handled_access_fs = handled_rights(result.abi);
  UniqueFd ruleset(static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0)));
  if (!ruleset) {
    result.why_not = "landlock_create_ruleset: " + errno_text(errno);
    return result;
  }
  auto grant = [&](const std::string& path, uint64_t rights) {
    UniqueFd target(::open(path.c_str(), O_PATH | O_CLOEXEC));
    if (!target) return true;
    landlock_path_beneath_attr rule{};
    rule.allowed_access = rights;
    rule.parent_fd = target.get();
    if (::syscall(SYS_landlock_add_rule, ruleset.get(), LANDLOCK_RULE_PATH_BENEATH, &rule, 0) != 0) {
      result.why_not = "landlock_add_rule(" + path + "): " + errno_text(errno);
      return false;
    }
    return true;
  };
  for (const std::string& path : writable) {
    if (!grant(path, granted_rights(result.abi))) return result;
    if (::access(path.c_str(), F_OK) == 0) result.writable.push_back(path);
  }
  // Only where the kernel handles device ioctls; a rule granting nothing is refused.
  const uint64_t ioctl_only = handled_rights(result.abi) & LANDLOCK_ACCESS_FS_IOCTL_DEV;
  for (const std::string& path : device_ioctl) {
    if (ioctl_only != 0 && !grant(path, ioctl_only)) return result;
  }
  if (::syscall(SYS_landlock_restrict_self, ruleset.get(), 0) != 0) {
    result.why_not = "landlock_restrict_self: " + errno_text(errno);
    return result;
  }
  result.applied = true;
  return result;
}

std::vector<std::string> nvidia_device_paths() {
  std::vector<std::string> paths;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("nvidia", 0) == 0) paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace kforge::runner
