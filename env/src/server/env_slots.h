// The env server's envs and who holds them. An env belongs to the client that
// made it (`make`); other clients get unknown_env for it. A client that goes
// away (its reply bounced, or it was idle for idle_timeout_s) loses its envs:
// idle ones are freed at once, busy ones are orphaned and freed when their
// step returns, its reply dropped.
//
// Only the socket thread uses it (Server::Impl, socket_loop.cpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "envelope.h"

namespace kforge::env::server {

struct Slot {
  bool held = false;
  std::string owner;  // routing id of the client that made it
  bool has_episode = false;
  bool finished = false;   // the last step terminated or truncated the episode
  bool busy = false;       // a step or a reset is in flight
  bool resetting = false;  // ... and it is a reset
  uint64_t request_id = 0;
  Envelope reply_to;
  // The step in flight outlived its reason to be answered or kept: free the
  // slot when it returns (orphan: the client is gone, the reply is dropped;
  // closing: close() came during the step, the reply is still sent).
  bool orphan = false;
  bool closing = false;
  // What reading the request in flight cost the socket thread: charged to
  // its client if it is a reset refused on its reset thread (with that
  // thread's time). A step's is not charged: an invalid tool call is the
  // policy's mistake, an observation, not the client's.
  std::chrono::nanoseconds accept_cost{0};
};

class EnvSlots {
 public:
  EnvSlots() = default;
  explicit EnvSlots(int count) : slots_(static_cast<size_t>(count)) {}

  int size() const { return static_cast<int>(slots_.size()); }
  bool contains(int64_t env_id) const { return env_id >= 0 && env_id < size(); }
  Slot& operator[](int env_id) { return slots_[static_cast<size_t>(env_id)]; }
  int id_of(const Slot& slot) const { return static_cast<int>(&slot - slots_.data()); }
  std::vector<Slot>::iterator begin() { return slots_.begin(); }
  std::vector<Slot>::iterator end() { return slots_.end(); }

  // The env `env_id` if `client` holds it and it is not on its way out
  // (closing or orphaned); nullptr otherwise.
  Slot* owned(int64_t env_id, const std::string& client);
  // Gives the lowest free env to `client`; nullopt when all are held.
  std::optional<int> make(const std::string& client);
  // Frees the env (closed, or its last step returned after close or orphaning).
  void release(int env_id);
  // `client` is gone: its idle envs are freed, its busy ones orphaned. Returns
  // the ids of the envs it held, in order.
  std::set<int> forget_owner(const std::string& client);

  // The envs `client` holds (for `ping` and `hello`), in order.
  const std::set<int>& envs_of(const std::string& client) const;
  // Distinct owners of the envs, for pool_full's message.
  size_t owner_count() const;
  size_t busy_count() const;
  size_t held_count() const;

 private:
  std::vector<Slot> slots_;
  std::map<std::string, std::set<int>> by_owner_;  // excludes orphans
};

}  // namespace kforge::env::server
