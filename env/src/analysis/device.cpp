#include <type_traits>

#include "kforge/env/analysis.h"

namespace kforge::env {

DeviceProperties DeviceProperties::h200() {
  DeviceProperties d;
  d.name = "NVIDIA H200";
  d.arch = "sm_90a";
  d.sm_count = 132;
  d.l2_bytes = 62914560;  // 60 MiB, read off the device (shared/device/README.md)
  return d;
}

json to_json(const DeviceProperties& d) {
  json j = {{"name", d.name}, {"arch", d.arch}, {"sm_count", d.sm_count}};
  auto put = [&](const char* key, int64_t v) {
    if (v > 0) j[key] = v;
  };
  put("max_threads_per_sm", d.max_threads_per_sm);
  put("max_threads_per_block", d.max_threads_per_block);
  put("max_blocks_per_sm", d.max_blocks_per_sm);
  put("registers_per_sm", d.registers_per_sm);
  put("shared_bytes_per_sm", d.shared_bytes_per_sm);
  put("shared_bytes_per_block_optin", d.shared_bytes_per_block_optin);
  put("reserved_shared_bytes_per_block", d.reserved_shared_bytes_per_block);
  put("l2_bytes", d.l2_bytes);
  return j;
}

DeviceProperties parse_device_properties(const Field& field) {
  ObjectReader r = field.as_object();
  DeviceProperties d;
  if (auto f = r.optional("name")) d.name = f->as_string();
  if (auto f = r.optional("arch")) {
    d.arch = f->as_string();
    if (d.arch.rfind("sm_", 0) != 0) f->fail("an architecture such as \"sm_90a\"");
  }
  if (auto f = r.optional("sm_count")) d.sm_count = static_cast<int>(f->as_int_in(1, 100000));
  auto read = [&](const char* key, auto& out, int64_t hi) {
    if (auto f = r.optional(key)) out = static_cast<std::remove_reference_t<decltype(out)>>(f->as_int_in(0, hi));
  };
  read("max_threads_per_sm", d.max_threads_per_sm, 1 << 16);
  read("max_threads_per_block", d.max_threads_per_block, 1 << 16);
  read("max_blocks_per_sm", d.max_blocks_per_sm, 1 << 16);
  read("registers_per_sm", d.registers_per_sm, 1 << 24);
  read("shared_bytes_per_sm", d.shared_bytes_per_sm, int64_t{1} << 32);
  read("shared_bytes_per_block_optin", d.shared_bytes_per_block_optin, int64_t{1} << 32);
  read("reserved_shared_bytes_per_block", d.reserved_shared_bytes_per_block, int64_t{1} << 32);
  read("l2_bytes", d.l2_bytes, int64_t{1} << 40);
  r.finish();
  return d;
}

}  // namespace kforge::env
