#include "kforge/reward/reward.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>

#include "kforge/core/input_limits.h"
#include "kforge/reward/term.h"
#include "ties.h"

namespace kforge::reward {
namespace {

struct Component {
  std::string name;
  std::string type;
  double weight = 1.0;
  std::unique_ptr<RewardTerm> term;
};

struct GroupNormalization {
  std::string mode = "none";  // none | mean | mean_std
  double eps = 1e-6;
  // GRPO implementations (DeepSeekMath, TRL) use the sample standard
  // deviation; population is there for trainers that use numpy's default.
  std::string std_kind = "sample";  // sample | population
  // exact: members tie only on equal totals; statistical: members with
  // statistically indistinguishable speedups share their tie class's mean.
  std::string ties = "exact";
};

GroupNormalization parse_group_normalization(const Field& field) {
  ObjectReader r = field.as_object();
  GroupNormalization g;
  if (auto f = r.optional("mode")) g.mode = f->as_enum({"none", "mean", "mean_std"});
  if (auto f = r.optional("eps")) {
    g.eps = f->as_number_in(0.0, 1.0);
    if (!(g.eps > 0)) f->fail("a positive number of at most 1");
  }
  if (auto f = r.optional("std")) g.std_kind = f->as_enum({"sample", "population"});
  if (auto f = r.optional("ties")) g.ties = f->as_enum({"exact", "statistical"});
  r.finish();
  return g;
}

bool looks_like_path(const std::string& s) {
  if (s.find('/') != std::string::npos) return true;
  for (const char* ext : {".yaml", ".yml", ".json"}) {
    const std::string e(ext);
    if (s.size() > e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0) return true;
  }
  return false;
}

}  // namespace

struct RewardFunction::Impl {
  std::string name;
  std::string description;
  std::string source;
  std::vector<Component> components;
  GroupNormalization group;
};

RewardFunction::RewardFunction(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RewardFunction::RewardFunction(RewardFunction&&) noexcept = default;
RewardFunction& RewardFunction::operator=(RewardFunction&&) noexcept = default;
RewardFunction::~RewardFunction() = default;

RewardFunction RewardFunction::from_document(const Document& doc) {
  auto impl = std::make_unique<Impl>();
  impl->source = doc.source;
  ObjectReader r = doc.root_object();
  // Unknown top-level keys first: a misspelt "terms" should be reported as a
  // typo, not as "missing terms".
  for (const char* key : {"name", "description", "terms", "group_normalization"}) r.allow(key);
  r.finish();

  Field name = r.required("name");
  impl->name = name.as_string();
  if (impl->name.empty()) name.fail("a non-empty name");
  if (auto f = r.optional("description")) impl->description = f->as_string();

  Field terms = r.required("terms");
  const std::vector<Field> items = terms.as_array();
  if (items.empty()) terms.fail("a non-empty array of terms such as [{type: tiered}]");
  TermRegistry& registry = TermRegistry::global();
  for (const Field& item : items) {
    ObjectReader t = item.as_object();
    Component c;
    c.type = t.required("type").as_enum(registry.types());
    if (auto w = t.optional("weight")) {
      // A negative weight would turn a penalty into a prize (e.g. pay for
      // violations), so weights are >= 0 and each term carries its own sign.
      c.weight = w->as_number_in(0.0, limits::kMaxRewardMagnitude);
    }
    c.name = c.type;
    std::optional<Field> name_field = t.optional("name");
    if (name_field) {
      c.name = name_field->as_string();
      if (c.name.empty()) name_field->fail("a non-empty component name");
    }
    if (c.name == "total") {
      (name_field ? *name_field : item).fail_message("\"total\" is reserved for the sum; choose another name");
    }
    for (size_t i = 0; i < impl->components.size(); ++i) {
      if (impl->components[i].name != c.name) continue;
      (name_field ? *name_field : item)
          .fail_message("component name \"" + c.name + "\" is already used by " +
                        json_pointer_append(terms.pointer(), i) +
                        "; give one of them an explicit \"name\" to use a term type twice");
    }
    c.term = registry.create(c.type, t);
    t.finish();
    impl->components.push_back(std::move(c));
  }
  if (auto f = r.optional("group_normalization")) impl->group = parse_group_normalization(*f);
  return RewardFunction(std::move(impl));
}

RewardFunction RewardFunction::from_file(const std::filesystem::path& path) {
  return from_document(Document::from_file(path));
}

RewardFunction RewardFunction::load(const std::string& name_or_path) {
  if (looks_like_path(name_or_path)) return from_file(name_or_path);
  return from_file(preset_path(name_or_path));
}

RewardBreakdown RewardFunction::compute(const Measurement& m, const RewardContext& ctx) const {
  RewardBreakdown b;
  for (const Component& c : impl_->components) {
    const double raw = c.term->compute(m, ctx);
    // Terms guard their inputs; a non-finite value is a bug in a term and
    // would poison a whole training batch, so it stops here.
    if (!std::isfinite(raw)) {
      throw std::logic_error("reward term \"" + c.name + "\" (" + c.type + ") returned a non-finite value");
    }
    double value = c.weight * raw;
    if (value == 0.0) value = 0.0;  // no "-0.0" in logs
    b.components.emplace_back(c.name, value);
    b.total += value;
  }
  return b;
}

std::vector<double> RewardFunction::normalize_group(const std::vector<GroupMember>& members) const {
  return normalize_group(pool_ties(members));
}

std::vector<double> RewardFunction::pool_ties(const std::vector<GroupMember>& members) const {
  std::vector<double> totals;
  for (const GroupMember& m : members) totals.push_back(m.total);
  if (impl_->group.ties != "statistical") return totals;
  for (const auto& tie_class : internal::tie_classes(members)) {
    double mean = 0.0;
    for (size_t i : tie_class) mean += members[i].total;
    mean /= static_cast<double>(tie_class.size());
    for (size_t i : tie_class) totals[i] = mean;
  }
  return totals;
}

TimingNeed RewardFunction::timing_need() const {
  TimingNeed need;
  for (const Component& c : impl_->components) {
    if (c.weight > 0) c.term->add_timing_need(need);
  }
  return need;
}

std::vector<double> RewardFunction::normalize_group(const std::vector<double>& totals) const {
  for (size_t i = 0; i < totals.size(); ++i) {
    if (!std::isfinite(totals[i])) {
      throw InputError("normalize_group: total #" + std::to_string(i) + " is not finite (" + std::to_string(totals[i]) +
                       ")");
    }
  }
  const GroupNormalization& g = impl_->group;
  if (g.mode == "none" || totals.empty()) return totals;
  // All equal (tied, or one member): no advantage at all, exactly; the mean
  // of n equal numbers can differ from them in the last bit.
  if (std::all_of(totals.begin(), totals.end(), [&](double t) { return t == totals[0]; })) {
    return std::vector<double>(totals.size(), 0.0);
  }
  const double n = static_cast<double>(totals.size());
  double mean = 0.0;
  for (double t : totals) mean += t;
  mean /= n;
  std::vector<double> out;
  out.reserve(totals.size());
  for (double t : totals) out.push_back(t - mean);
  if (g.mode == "mean") return out;

  double squares = 0.0;
  for (double d : out) squares += d * d;
  const double dof = g.std_kind == "sample" ? n - 1.0 : n;
  // One rollout has no spread; its advantage is 0 (out is already all zeros).
  const double stdev = dof > 0.0 ? std::sqrt(squares / dof) : 0.0;
  for (double& d : out) d /= stdev + g.eps;
  return out;
}

const std::string& RewardFunction::name() const { return impl_->name; }
const std::string& RewardFunction::source() const { return impl_->source; }

std::vector<std::string> RewardFunction::component_names() const {
  std::vector<std::string> out;
  for (const Component& c : impl_->components) out.push_back(c.name);
  return out;
}

json RewardFunction::describe() const {
  json j = {{"name", impl_->name}};
  if (!impl_->description.empty()) j["description"] = impl_->description;
  j["terms"] = json::array();
  for (const Component& c : impl_->components) {
    json t = c.term->params();
    t["type"] = c.type;
    t["name"] = c.name;
    t["weight"] = c.weight;
    j["terms"].push_back(std::move(t));
  }
  j["group_normalization"] = {{"mode", impl_->group.mode},
                              {"eps", impl_->group.eps},
                              {"std", impl_->group.std_kind},
                              {"ties", impl_->group.ties}};
  return j;
}

json RewardBreakdown::to_json() const {
  json j = json::object();
  j["total"] = total;
  for (const auto& [name, value] : components) j[name] = value;
  return j;
}

}  // namespace kforge::reward
