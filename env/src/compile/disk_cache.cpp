#include "disk_cache.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>

#include "build_support.h"
#include "kforge/core/error.h"
#include "kforge/core/remove_tree.h"

namespace kforge::env::internal {
namespace {

namespace fs = std::filesystem;

// Bumped whenever result.json changes meaning; older entries are then misses.
constexpr int kFormat = 1;
constexpr const char* kResultFile = "result.json";

std::optional<SolutionMode> mode_from_name(const std::string& name) {
  for (SolutionMode m : {SolutionMode::kCuda, SolutionMode::kNvrtc, SolutionMode::kTorchExt, SolutionMode::kCpp}) {
    if (solution_mode_name(m) == name) return m;
  }
  return std::nullopt;
}

json to_record(const std::string& key, const CompileResult& r) {
  json j = {{"format", kFormat},
            {"key", key},
            {"mode", solution_mode_name(r.artifact.mode)},
            {"ok", r.ok},
            {"diagnostics", r.diagnostics},
            {"log", r.log},
            {"compile_ms", r.compile_ms},
            {"launch", r.artifact.launch},
            {"resources", r.artifact.resources},
            {"libraries", r.artifact.libraries},
            {"artifact", nullptr}};
  if (r.ok) {
    j["artifact"] = r.artifact.path.filename().string();
    j["artifact_bytes"] = fs::file_size(r.artifact.path);
  }
  return j;
}

std::optional<CompileResult> from_record(const std::string& key, const fs::path& entry, const json& j) {
  if (!j.is_object() || j.value("format", 0) != kFormat || j.value("key", "") != key) return std::nullopt;
  const auto mode = mode_from_name(j.value("mode", ""));
  if (!mode) return std::nullopt;
  CompileResult r;
  r.ok = j.value("ok", false);
  r.diagnostics = j.value("diagnostics", "");
  r.log = j.value("log", "");
  r.compile_ms = j.value("compile_ms", 0.0);
  r.artifact.hash = key;
  r.artifact.mode = *mode;
  r.artifact.launch = j.value("launch", json());
  r.artifact.resources = j.value("resources", json::object());
  r.artifact.libraries = j.value("libraries", std::vector<std::string>{});
  if (r.ok) {
    if (!j.contains("artifact") || !j["artifact"].is_string()) return std::nullopt;
    const fs::path artifact = entry / j["artifact"].get<std::string>();
    std::error_code ec;
    const auto size = fs::file_size(artifact, ec);
    if (ec || size != j.value("artifact_bytes", static_cast<uintmax_t>(0)) || size == 0) return std::nullopt;
    r.artifact.path = artifact;
  }
  return r;
}

}  // namespace

DiskCache::DiskCache(fs::path dir) : dir_(std::move(dir)) {
  std::error_code ec;
  fs::create_directories(dir_ / ".tmp", ec);
  if (ec) throw SystemError("cannot create the compile cache " + (dir_ / ".tmp").string() + ": " + ec.message());
  const auto cutoff = fs::file_time_type::clock::now() - std::chrono::hours(1);
  for (const auto& e : fs::directory_iterator(dir_ / ".tmp", ec)) {
    std::error_code ignore;
    if (fs::last_write_time(e.path(), ignore) < cutoff) kforge::remove_tree(e.path());
  }
}

std::optional<CompileResult> DiskCache::load(const std::string& key) const {
  const fs::path entry = dir_ / key;
  std::error_code ec;
  if (!fs::is_regular_file(entry / kResultFile, ec)) return std::nullopt;
  try {
    return from_record(key, entry, json::parse(read_file(entry / kResultFile)));
  } catch (const std::exception&) {
    return std::nullopt;  // unreadable or truncated: a miss, rebuilt and replaced
  }
}

fs::path DiskCache::make_work_dir(const std::string& key) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  const fs::path work = dir_ / ".tmp" /
                        (key.substr(0, 16) + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + "-" +
                         std::to_string(salt % 100000));
  std::error_code ec;
  fs::create_directories(work, ec);
  if (ec) throw SystemError("cannot create " + work.string() + ": " + ec.message());
  return work;
}

CompileResult DiskCache::commit(const std::string& key, const fs::path& work_dir, const CompileResult& result) {
  write_file(work_dir / kResultFile, to_record(key, result).dump(1));
  const fs::path entry = dir_ / key;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (std::rename(work_dir.c_str(), entry.c_str()) == 0) {
      CompileResult published = result;
      published.artifact.hash = key;
      if (published.ok) published.artifact.path = entry / result.artifact.path.filename();
      return published;
    }
    if (errno != EEXIST && errno != ENOTEMPTY) {
      throw SystemError("cannot publish " + entry.string() + ": " + std::strerror(errno));
    }
    // Another process published this key first: same inputs, same output.
    if (auto existing = load(key)) {
      discard(work_dir);
      existing->compile_ms = result.compile_ms;
      return *existing;
    }
    // A broken entry (e.g. a file deleted by hand): move it away, then retry.
    const fs::path stale = make_work_dir(key + "-stale");
    fs::remove(stale);
    std::error_code ec;
    fs::rename(entry, stale, ec);
    kforge::remove_tree(stale);
  }
  throw SystemError("cannot publish " + entry.string() + ": it keeps reappearing");
}

void DiskCache::discard(const fs::path& work_dir) const { kforge::remove_tree(work_dir); }

}  // namespace kforge::env::internal
