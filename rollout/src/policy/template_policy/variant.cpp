#include "policy/template_policy/variant.h"

#include <cstdio>
#include <functional>
#include <map>
#include <sstream>

namespace kforge::rollout::template_policy {
namespace {

struct Knob {
  const char* name;
  std::vector<int> values;
  std::function<int&(Variant&)> ref;
  bool cpp;   // matters on the CPU backend
  bool cuda;  // matters on the CUDA backend
};

// The two boolean knobs have no int to refer to; get() and set() handle them.
const std::vector<Knob>& knobs() {
  static const std::vector<Knob> kKnobs = {
      {"fuse", {0, 1}, nullptr, true, true},
      {"block", {128, 256, 512}, [](Variant& v) -> int& { return v.block; }, false, true},
      {"vec", {1, 4}, [](Variant& v) -> int& { return v.vec; }, false, true},
      {"unroll", {1, 2, 4, 8}, [](Variant& v) -> int& { return v.unroll; }, true, true},
      {"acc", {1, 4, 8}, [](Variant& v) -> int& { return v.accumulators; }, true, false},
      {"tile", {1, 4, 16, 32}, [](Variant& v) -> int& { return v.tile; }, true, true},
      {"naive_matmul", {0, 1}, nullptr, true, true},
  };
  return kKnobs;
}

// Tiles mean different things per backend: rows of A on the CPU, a square
// shared-memory tile on CUDA.
std::vector<int> values_for(const Knob& k, const std::string& mode) {
  if (std::string(k.name) == "tile") return mode == "cuda" ? std::vector<int>{16, 32} : std::vector<int>{1, 4};
  return k.values;
}

int get(const Variant& v, const Knob& k) {
  const std::string n = k.name;
  if (n == "fuse") return v.fuse ? 1 : 0;
  if (n == "naive_matmul") return v.naive_matmul ? 1 : 0;
  Variant copy = v;
  return k.ref(copy);
}

void set(Variant& v, const Knob& k, int value) {
  const std::string n = k.name;
  if (n == "fuse") {
    v.fuse = value != 0;
  } else if (n == "naive_matmul") {
    v.naive_matmul = value != 0;
  } else {
    k.ref(v) = value;
  }
}

bool applies(const Knob& k, const std::string& mode) { return mode == "cuda" ? k.cuda : k.cpp; }

}  // namespace

std::string Variant::describe() const {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "fuse=%d block=%d vec=%d unroll=%d acc=%d tile=%d naive_matmul=%d", fuse ? 1 : 0,
                block, vec, unroll, accumulators, tile, naive_matmul ? 1 : 0);
  return buf;
}

bool parse_variant(const std::string& text, Variant* out) {
  const size_t at = text.find("fuse=");
  if (at == std::string::npos) return false;
  std::istringstream in(text.substr(at));
  std::map<std::string, int> seen;
  std::string token;
  while (in >> token && seen.size() < knobs().size()) {
    const size_t eq = token.find('=');
    if (eq == std::string::npos) break;
    try {
      seen[token.substr(0, eq)] = std::stoi(token.substr(eq + 1));
    } catch (const std::exception&) {
      return false;
    }
  }
  Variant v;
  for (const Knob& k : knobs()) {
    auto it = seen.find(k.name);
    if (it == seen.end()) return false;
    set(v, k, it->second);
  }
  *out = v;
  return true;
}

Variant random_variant(const std::string& mode, std::mt19937_64& rng) {
  Variant v;
  if (mode != "cuda") v.tile = 4;
  for (const Knob& k : knobs()) {
    if (!applies(k, mode)) continue;
    const std::vector<int> values = values_for(k, mode);
    // The naive loop order is a mutation, not a starting point.
    if (std::string(k.name) == "naive_matmul") continue;
    set(v, k, values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)]);
  }
  return v;
}

Variant mutate(const Variant& v, const std::string& mode, std::mt19937_64& rng) {
  std::vector<const Knob*> usable;
  for (const Knob& k : knobs()) {
    if (applies(k, mode)) usable.push_back(&k);
  }
  const Knob& k = *usable[std::uniform_int_distribution<size_t>(0, usable.size() - 1)(rng)];
  std::vector<int> others;
  for (int value : values_for(k, mode)) {
    if (value != get(v, k)) others.push_back(value);
  }
  Variant out = v;
  if (!others.empty()) set(out, k, others[std::uniform_int_distribution<size_t>(0, others.size() - 1)(rng)]);
  return out;
}

}  // namespace kforge::rollout::template_policy
