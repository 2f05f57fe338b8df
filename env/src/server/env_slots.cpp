#include "env_slots.h"

#include <algorithm>

namespace kforge::env::server {

Slot* EnvSlots::owned(int64_t env_id, const std::string& client) {
  if (!contains(env_id)) return nullptr;
  Slot& s = slots_[static_cast<size_t>(env_id)];
  if (!s.held || s.owner != client || s.closing || s.orphan) return nullptr;
  return &s;
}

std::optional<int> EnvSlots::make(const std::string& client) {
  auto it = std::find_if(slots_.begin(), slots_.end(), [](const Slot& s) { return !s.held; });
  if (it == slots_.end()) return std::nullopt;
  const int env_id = static_cast<int>(it - slots_.begin());
  *it = Slot{};
  it->held = true;
  it->owner = client;
  by_owner_[client].insert(env_id);
  return env_id;
}

void EnvSlots::release(int env_id) {
  Slot& slot = slots_[static_cast<size_t>(env_id)];
  if (auto o = by_owner_.find(slot.owner); o != by_owner_.end()) {
    o->second.erase(env_id);
    if (o->second.empty()) by_owner_.erase(o);
  }
  slot = Slot{};
}

std::set<int> EnvSlots::forget_owner(const std::string& client) {
  auto o = by_owner_.find(client);
  if (o == by_owner_.end()) return {};
  std::set<int> envs = std::move(o->second);
  by_owner_.erase(o);
  for (int env_id : envs) {
    Slot& slot = slots_[static_cast<size_t>(env_id)];
    if (slot.busy) {
      slot.orphan = true;  // freed when its step returns; the reply is dropped
    } else {
      slot = Slot{};
    }
  }
  return envs;
}

const std::set<int>& EnvSlots::envs_of(const std::string& client) const {
  static const std::set<int> kNone;
  auto o = by_owner_.find(client);
  return o == by_owner_.end() ? kNone : o->second;
}

size_t EnvSlots::owner_count() const {
  std::set<std::string> owners;
  for (const Slot& s : slots_) owners.insert(s.owner);
  return owners.size();
}

size_t EnvSlots::busy_count() const {
  return static_cast<size_t>(std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.busy; }));
}

size_t EnvSlots::held_count() const {
  return static_cast<size_t>(std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.held; }));
}

}  // namespace kforge::env::server
