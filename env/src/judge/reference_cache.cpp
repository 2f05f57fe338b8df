#include "judge/reference_cache.h"

#include <utility>

namespace kforge::judge {

uint64_t CachedReference::bytes() const {
  uint64_t total = 0;
  for (const auto& t : inputs) total += t.nbytes();
  for (const auto& t : reference) total += t.nbytes();
  return total;
}

std::string ReferenceCache::case_text(const TaskSpec& case_task) {
  TaskSpec drawn;
  drawn.id = case_task.id;
  drawn.inputs = case_task.inputs;
  drawn.params = case_task.params;
  drawn.nodes = case_task.nodes;
  drawn.outputs = case_task.outputs;
  drawn.shape_variants = case_task.shape_variants;
  return kforge::to_json(drawn).dump();
}

std::string ReferenceCache::key(const std::string& case_text, uint64_t input_seed) {
  return std::to_string(input_seed) + "|" + case_text;
}

std::shared_ptr<const CachedReference> ReferenceCache::find(const std::string& key) {
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  order_.splice(order_.begin(), order_, it->second);
  return it->second->entry;
}

void ReferenceCache::insert(const std::string& key, std::shared_ptr<const CachedReference> entry) {
  if (!entry) return;
  const uint64_t bytes = entry->bytes();
  if (bytes > bound_) return;
  if (auto it = index_.find(key); it != index_.end()) {
    held_ -= it->second->bytes;
    order_.erase(it->second);
    index_.erase(it);
  }
  evict_to(bound_ - bytes);
  order_.push_front(Slot{key, std::move(entry), bytes});
  index_[key] = order_.begin();
  held_ += bytes;
}

void ReferenceCache::set_bound(uint64_t bytes) {
  bound_ = bytes;
  evict_to(bytes);
}

void ReferenceCache::evict_to(uint64_t bytes) {
  while (held_ > bytes && !order_.empty()) {
    held_ -= order_.back().bytes;
    index_.erase(order_.back().key);
    order_.pop_back();
    ++evictions_;
  }
}

nlohmann::json ReferenceCache::to_json() const {
  return {{"entries", order_.size()}, {"bytes", held_},         {"bound_bytes", bound_}, {"hits", hits_},
          {"misses", misses_},        {"evictions", evictions_}};
}

}  // namespace kforge::judge
