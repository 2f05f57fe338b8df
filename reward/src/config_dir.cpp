#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "kforge/reward/reward.h"

namespace kforge::reward {
namespace {

// Preset names are file stems, never paths: "../x" must not escape rewards/.
bool valid_preset_name(const std::string& name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](unsigned char c) { return std::isalnum(c) || c == '_' || c == '-'; });
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
}

}  // namespace

std::filesystem::path config_dir() {
  // An explicit setting wins and is the only place searched, so that a run
  // never silently mixes configs from two trees.
  if (const char* env = std::getenv("KFORGE_CONFIG_DIR"); env != nullptr && *env != '\0') {
    std::error_code ec;
    if (!std::filesystem::is_directory(env, ec)) {
      throw InputError(std::string("KFORGE_CONFIG_DIR=") + env + ": not a directory");
    }
    return env;
  }
#ifdef KFORGE_DEFAULT_CONFIG_DIR
  std::error_code ec;
  if (std::filesystem::is_directory(KFORGE_DEFAULT_CONFIG_DIR, ec)) return KFORGE_DEFAULT_CONFIG_DIR;
  throw InputError(std::string("no configs directory: ") + KFORGE_DEFAULT_CONFIG_DIR +
                   " (compiled in) does not exist; set KFORGE_CONFIG_DIR to the directory that holds rewards/");
#else
  throw InputError("no configs directory: set KFORGE_CONFIG_DIR to the directory that holds rewards/");
#endif
}

std::vector<std::string> preset_names() {
  const std::filesystem::path dir = config_dir() / "rewards";
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::filesystem::path preset_path(const std::string& name) {
  const std::filesystem::path dir = config_dir() / "rewards";
  const std::filesystem::path path = dir / (name + ".yaml");
  std::error_code ec;
  if (valid_preset_name(name) && std::filesystem::is_regular_file(path, ec)) return path;
  const std::vector<std::string> names = preset_names();
  const std::string hint = closest_match(name, names);
  throw InputError("unknown reward preset \"" + name + "\"" +
                   (hint.empty() ? "" : " (did you mean \"" + hint + "\"?)") + "; presets in " + dir.string() + ": " +
                   (names.empty() ? "none" : join(names)) + "; or give a path to a .yaml/.json file");
}

}  // namespace kforge::reward
