#include "kforge/env/analysis/resources.h"

#include <cstdlib>
#include <memory>
#include <sstream>

#include "text_util.h"

namespace kforge::env {
namespace {

using internal::starts_with;
using internal::trim;

// Leading integer of `s` (after spaces); nullopt when there is none.
std::optional<int64_t> leading_int(const std::string& s) {
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  size_t j = i;
  while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
  if (j == i || j - i > 18) return std::nullopt;
  return std::stoll(s.substr(i, j - i));
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(trim(cur));
  return out;
}

KernelResources& find_or_add(std::vector<KernelResources>& v, const std::string& name, const std::string& arch) {
  for (auto& k : v) {
    if (k.name == name && k.arch == arch) return k;
  }
  v.push_back(KernelResources{});
  v.back().name = name;
  v.back().arch = arch;
  return v.back();
}

// "Used 10 registers, used 1 barriers, 4096 bytes smem, 364 bytes cmem[0]"
void apply_used_line(const std::string& rest, KernelResources& k) {
  for (const auto& item : split(rest, ',')) {
    if (starts_with(item, "Used ") || starts_with(item, "used ")) {
      auto n = leading_int(item.substr(5));
      if (!n) continue;
      if (item.find("register") != std::string::npos) k.registers = static_cast<int>(*n);
      if (item.find("barrier") != std::string::npos) k.barriers = static_cast<int>(*n);
      continue;
    }
    auto n = leading_int(item);
    if (!n) continue;
    if (item.find("bytes smem") != std::string::npos) {
      k.shared_bytes = *n;
    } else if (item.find("bytes cmem[") != std::string::npos) {
      k.constant_bytes = k.constant_bytes.value_or(0) + *n;
    } else if (item.find("bytes lmem") != std::string::npos) {
      k.local_bytes = *n;
    } else if (item.find("cumulative stack size") != std::string::npos && !k.stack_bytes) {
      k.stack_bytes = *n;
    }
  }
}

// "816 bytes stack frame, 1004 bytes spill stores, 1056 bytes spill loads"
void apply_properties_line(const std::string& line, KernelResources& k) {
  for (const auto& item : split(line, ',')) {
    auto n = leading_int(item);
    if (!n) continue;
    if (item.find("stack frame") != std::string::npos) k.stack_bytes = *n;
    if (item.find("spill stores") != std::string::npos) k.spill_store_bytes = *n;
    if (item.find("spill loads") != std::string::npos) k.spill_load_bytes = *n;
  }
}

std::string quoted(const std::string& s, size_t from, size_t* end) {
  const size_t a = s.find('\'', from);
  if (a == std::string::npos) return "";
  const size_t b = s.find('\'', a + 1);
  if (b == std::string::npos) return "";
  if (end) *end = b + 1;
  return s.substr(a + 1, b - a - 1);
}

std::optional<int64_t> read_int_key(ObjectReader& r, const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    if (auto f = r.optional(key)) return f->as_int_in(0, int64_t{1} << 40);
  }
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> KernelResources::spill_bytes() const {
  if (spill_store_bytes || spill_load_bytes) return spill_store_bytes.value_or(0) + spill_load_bytes.value_or(0);
  return spill_total_bytes;
}

std::vector<KernelResources> parse_ptxas_info(const std::string& log) {
  std::vector<KernelResources> out;
  std::istringstream in(log);
  std::string line;
  std::string current;
  std::string current_arch;
  std::string last_arch;
  bool awaiting_properties = false;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t tag = line.find("ptxas info");
    if (tag == std::string::npos) {
      // The numbers of "Function properties for X" come on the next line,
      // which has no "ptxas info" prefix.
      if (awaiting_properties && line.find("stack frame") != std::string::npos) {
        apply_properties_line(line, find_or_add(out, current, current_arch));
      }
      awaiting_properties = false;
      continue;
    }
    awaiting_properties = false;
    const size_t colon = line.find(':', tag);
    if (colon == std::string::npos) continue;
    const std::string rest = trim(line.substr(colon + 1));
    if (starts_with(rest, "Compiling entry function")) {
      size_t end = 0;
      current = quoted(rest, 0, &end);
      current_arch = quoted(rest, end, nullptr);
      last_arch = current_arch;
      if (current.empty()) continue;
      find_or_add(out, current, current_arch).entry = true;
    } else if (starts_with(rest, "Function properties for ")) {
      current = trim(rest.substr(std::string("Function properties for ").size()));
      // Device functions are reported without a "Compiling entry function"
      // line; they belong to the arch being compiled.
      current_arch = last_arch;
      KernelResources& k = find_or_add(out, current, current_arch);
      if (!k.entry) k.entry = false;
      awaiting_properties = true;
    } else if (starts_with(rest, "Used ") && !current.empty()) {
      apply_used_line(rest, find_or_add(out, current, current_arch));
    }
  }
  return out;
}

std::vector<KernelResources> parse_cuobjdump_resource_usage(const std::string& text) {
  std::vector<KernelResources> out;
  std::istringstream in(text);
  std::string line;
  std::string arch;
  std::string current;
  while (std::getline(in, line)) {
    const std::string t = trim(line);
    if (starts_with(t, "arch = ")) {
      arch = trim(t.substr(7));
      current.clear();
    } else if (starts_with(t, "Function ") && t.size() > 10 && t.back() == ':') {
      current = trim(t.substr(9, t.size() - 10));
    } else if (!current.empty() && t.find("REG:") != std::string::npos) {
      KernelResources& k = find_or_add(out, current, arch);
      std::istringstream items(t);
      std::string item;
      while (items >> item) {
        const size_t c = item.rfind(':');
        if (c == std::string::npos) continue;
        const std::string key = item.substr(0, c);
        auto n = leading_int(item.substr(c + 1));
        if (!n) continue;
        if (key == "REG") k.registers = static_cast<int>(*n);
        if (key == "STACK") k.stack_bytes = *n;
        if (key == "SHARED") k.shared_bytes = *n;
        if (key == "LOCAL") k.local_bytes = *n;
        if (starts_with(key, "CONSTANT[")) k.constant_bytes = k.constant_bytes.value_or(0) + *n;
      }
      current.clear();
    } else if (t == "Common:") {
      current.clear();
    }
  }
  return out;
}

int remove_reserved_shared(std::vector<KernelResources>& kernels, const std::string& default_arch, int64_t reserved) {
  int adjusted = 0;
  for (auto& k : kernels) {
    const std::string& arch = k.arch.empty() ? default_arch : k.arch;
    if (!starts_with(arch, "sm_")) continue;
    const auto cc = leading_int(arch.substr(3));
    if (!cc || *cc < 90 || !k.shared_bytes || *k.shared_bytes < reserved) continue;
    *k.shared_bytes -= reserved;
    ++adjusted;
  }
  return adjusted;
}

json to_json(const KernelResources& k) {
  json j = {{"name", k.name}, {"demangled", demangle(k.name)}};
  if (!k.arch.empty()) j["arch"] = k.arch;
  if (k.entry) j["entry"] = *k.entry;
  if (k.registers) j["registers"] = *k.registers;
  if (k.shared_bytes) j["shared_bytes"] = *k.shared_bytes;
  if (k.stack_bytes) j["stack_bytes"] = *k.stack_bytes;
  if (k.spill_store_bytes) j["spill_store_bytes"] = *k.spill_store_bytes;
  if (k.spill_load_bytes) j["spill_load_bytes"] = *k.spill_load_bytes;
  if (auto s = k.spill_bytes()) j["spill_bytes"] = *s;
  if (k.local_bytes) j["local_bytes"] = *k.local_bytes;
  if (k.constant_bytes) j["constant_bytes"] = *k.constant_bytes;
  if (k.barriers) j["barriers"] = *k.barriers;
  return j;
}

json resources_to_json(const std::vector<KernelResources>& kernels) {
  json out = json::object();
  for (const auto& k : kernels) {
    json j = to_json(k);
    j.erase("name");
    j.erase("demangled");
    j["mangled"] = k.name;
    out[demangle(k.name)] = std::move(j);
  }
  return out;
}

std::vector<KernelResources> resources_from_json(const json& resources) {
  std::vector<KernelResources> out;
  if (resources.is_null()) return out;
  const Document doc = Document::from_value(resources, "artifact resources");
  auto read_one = [&](const std::string& key, ObjectReader r) {
    KernelResources k;
    // Keyed by the demangled signature, the symbol in "mangled"; or keyed by the symbol.
    k.name = key;
    if (auto f = r.optional("mangled")) k.name = f->as_string();
    if (auto f = r.optional("arch")) k.arch = f->as_string();
    if (auto f = r.optional("entry")) k.entry = f->as_bool();
    if (auto v = read_int_key(r, {"registers", "regs", "registers_per_thread"})) k.registers = static_cast<int>(*v);
    k.shared_bytes = read_int_key(r, {"shared_bytes", "static_shared_bytes", "smem_bytes", "smem"});
    k.stack_bytes = read_int_key(r, {"stack_bytes", "stack_frame_bytes", "stack_frame", "stack"});
    k.spill_store_bytes = read_int_key(r, {"spill_store_bytes", "spill_stores", "spill_stores_bytes"});
    k.spill_load_bytes = read_int_key(r, {"spill_load_bytes", "spill_loads", "spill_loads_bytes"});
    k.spill_total_bytes = read_int_key(r, {"spill_bytes", "spills"});
    k.local_bytes = read_int_key(r, {"local_bytes", "lmem_bytes"});
    k.constant_bytes = read_int_key(r, {"constant_bytes", "cmem_bytes", "const_bytes"});
    if (!k.constant_bytes) {
      // {"cmem": {"0": 364, "2": 16}}: one entry per constant bank.
      if (auto f = r.optional("cmem")) {
        if (f->value().is_object()) {
          int64_t sum = 0;
          ObjectReader banks = f->as_object();
          for (auto it = f->value().begin(); it != f->value().end(); ++it) sum += banks.required(it.key()).as_int();
          k.constant_bytes = sum;
        } else {
          k.constant_bytes = f->as_int_in(0, int64_t{1} << 40);
        }
      }
    }
    if (auto v = read_int_key(r, {"barriers", "bar"})) k.barriers = static_cast<int>(*v);
    out.push_back(std::move(k));
  };
  Field root(doc, doc.root, "");
  if (doc.root.is_array()) {
    for (const auto& item : root.as_array()) {
      ObjectReader r = item.as_object();
      r.allow("name");
      read_one(item.as_object().required("name").as_string(), r);
    }
    return out;
  }
  ObjectReader top = root.as_object();
  for (auto it = doc.root.begin(); it != doc.root.end(); ++it) read_one(it.key(), top.required(it.key()).as_object());
  return out;
}

}  // namespace kforge::env
