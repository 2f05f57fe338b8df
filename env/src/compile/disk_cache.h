// The on-disk half of the compile cache: cache_dir/<key>/ holds the artifact,
// the candidate's source and result.json. An entry appears by one rename of a
// fully written directory, so a process killed mid-compile leaves only a
// directory under cache_dir/.tmp/, never an entry that looks valid.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "kforge/env/compiler.h"

namespace kforge::env::internal {

class DiskCache {
 public:
  // Creates the directory and removes temporary directories that killed
  // processes left behind (older than an hour).
  explicit DiskCache(std::filesystem::path dir);

  const std::filesystem::path& dir() const { return dir_; }
  // A complete, valid entry (result.json parses, names this key, the artifact
  // has the recorded size) or nothing.
  std::optional<CompileResult> load(const std::string& key) const;
  // A fresh directory for one compile of `key`.
  std::filesystem::path make_work_dir(const std::string& key);
  // Writes result.json into `work_dir` and publishes it as the entry of
  // `key`. Returns the result with paths inside the entry. If another process
  // published the same key first, its (equivalent) entry is used.
  CompileResult commit(const std::string& key, const std::filesystem::path& work_dir, const CompileResult& result);
  void discard(const std::filesystem::path& work_dir) const;

 private:
  std::filesystem::path dir_;
};

}  // namespace kforge::env::internal
