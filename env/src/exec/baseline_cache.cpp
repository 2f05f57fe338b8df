#include "exec/baseline_cache.h"

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>

#include "kforge/core/error.h"
#include "kforge/core/sha256.h"

namespace kforge::exec {
namespace {

// An entry is a few kilobytes; anything much larger is not ours.
constexpr std::streamsize kMaxEntryBytes = 1 << 20;

}  // namespace

BaselineCache::BaselineCache(std::filesystem::path dir) : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw SystemError("baseline cache: cannot create " + dir_.string() + ": " + ec.message());
}

std::string BaselineCache::key(const env::ReferenceRequest& request, const std::string& device, const json& versions) {
  const json k = {{"task", to_json(request.task)},
                  {"check", request.check},
                  {"options", to_json(request.options)},
                  {"device", device},
                  {"versions", versions},
                  {"kforge", KFORGE_VERSION}};
  return sha256_hex(k.dump());
}

std::optional<env::ReferenceReport> BaselineCache::load(const std::string& key) const {
  std::ifstream in(dir_ / (key + ".json"), std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(static_cast<size_t>(kMaxEntryBytes) + 1, '\0');
  in.read(text.data(), kMaxEntryBytes + 1);
  if (in.gcount() > kMaxEntryBytes) return std::nullopt;
  text.resize(static_cast<size_t>(in.gcount()));
  try {
    const json entry = json::parse(text);
    if (entry.value("key", "") != key) return std::nullopt;
    env::ReferenceReport report = env::reference_report_from_json(entry.at("report"));
    if (!report.ok() || !report.timing) return std::nullopt;
    return report;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void BaselineCache::store(const std::string& key, const env::ReferenceReport& report) const {
  if (!report.ok() || !report.timing) return;
  static std::atomic<uint64_t> counter{0};
  const std::filesystem::path tmp =
      dir_ / ("." + key + "." + std::to_string(::getpid()) + "." + std::to_string(counter++) + ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << json{{"key", key}, {"report", to_json(report)}}.dump();
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, dir_ / (key + ".json"), ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace kforge::exec
