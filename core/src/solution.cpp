#include "kforge/core/solution.h"

namespace kforge {
namespace {

struct ModeName {
  SolutionMode mode;
  std::string name;
};

const std::vector<ModeName>& modes() {
  static const std::vector<ModeName> kModes = {{SolutionMode::kCuda, "cuda"},
                                               {SolutionMode::kNvrtc, "nvrtc"},
                                               {SolutionMode::kTorchExt, "torch_ext"},
                                               {SolutionMode::kCpp, "cpp"}};
  return kModes;
}

}  // namespace

const std::string& solution_mode_name(SolutionMode mode) {
  for (const auto& m : modes()) {
    if (m.mode == mode) return m.name;
  }
  return modes()[0].name;
}

const std::vector<std::string>& solution_mode_names() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> v;
    for (const auto& m : modes()) v.push_back(m.name);
    return v;
  }();
  return kNames;
}

SolutionMode parse_solution_mode(const Field& field) {
  const std::string name = field.as_enum(solution_mode_names());
  for (const auto& m : modes()) {
    if (m.name == name) return m.mode;
  }
  return SolutionMode::kCuda;
}

Solution parse_solution(const Document& doc) {
  ObjectReader r = doc.root_object();
  Solution s;
  s.origin = doc.source;
  if (auto f = r.optional("mode")) s.mode = parse_solution_mode(*f);
  auto source = r.optional("source");
  auto source_file = r.optional("source_file");
  if (source && source_file) source_file->fail_message("give either \"source\" or \"source_file\", not both");
  if (source) {
    s.source = source->as_string();
  } else if (source_file) {
    std::filesystem::path p = source_file->as_string();
    if (p.is_relative()) p = std::filesystem::path(doc.source).parent_path() / p;
    try {
      s.source = read_text_file(p);
    } catch (const InputError& e) {
      source_file->fail_message(e.what());
    }
  } else {
    r.self().fail_message("missing required key \"source\" (or \"source_file\")");
  }
  if (s.source.find_first_not_of(" \t\r\n") == std::string::npos) r.self().fail_message("the source is empty");
  if (auto f = r.optional("options")) s.options = f->as_string_list();
  if (auto f = r.optional("launch")) {
    if (s.mode != SolutionMode::kNvrtc) f->fail_message("\"launch\" is only used by \"mode\": \"nvrtc\"");
    f->as_object();
    s.launch = f->value();
  } else if (s.mode == SolutionMode::kNvrtc) {
    r.self().fail_message("mode \"nvrtc\" needs a \"launch\" plan (kernel name, grid, block, args)");
  }
  r.finish();
  return s;
}

Solution load_solution(const std::filesystem::path& path, SolutionMode default_mode) {
  const std::string ext = path.extension().string();
  if (ext == ".json" || ext == ".yaml" || ext == ".yml") return parse_solution(Document::from_file(path));
  Solution s;
  // A .py file can only be a KernelBench load_inline solution.
  s.mode = ext == ".py" ? SolutionMode::kTorchExt : default_mode;
  s.source = read_text_file(path);
  s.origin = path.string();
  if (s.source.find_first_not_of(" \t\r\n") == std::string::npos) {
    throw InputError(path.string() + ": the solution source file is empty");
  }
  if (s.mode == SolutionMode::kNvrtc) {
    throw InputError(path.string() +
                     ": an nvrtc solution needs a launch plan: give a .json/.yaml solution file "
                     "with \"mode\": \"nvrtc\", \"source\" and \"launch\"");
  }
  return s;
}

json to_json(const Solution& solution) {
  json j = {{"mode", solution_mode_name(solution.mode)}, {"source", solution.source}};
  if (!solution.options.empty()) j["options"] = solution.options;
  if (!solution.launch.is_null()) j["launch"] = solution.launch;
  return j;
}

}  // namespace kforge
