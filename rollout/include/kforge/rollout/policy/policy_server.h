// Serves a Policy over the policy protocol (trainer_bridge/POLICY.md): the
// C++ twin of the Python `kforge.PolicyServer`, used by
// `kforge policy-server --template` so that rollouts with the built-in
// template policy go through exactly the wire path a trainer-served model does.
//
//   PolicyServerConfig config;
//   config.bind = "tcp://127.0.0.1:0";
//   PolicyServer server(policy, config);   // binds
//   std::thread t([&] { server.run(); });  // until stop()
//   ZmqPolicy client({server.endpoint()});
//
// One ROUTER socket; requests are answered one at a time in arrival order
// (the policy itself may batch internally). Malformed requests get an error
// reply naming the field (or none when they cannot be routed); a policy that
// throws answers each request of the batch with `error`.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "kforge/rollout/policy/policy.h"

namespace kforge::rollout {

struct PolicyServerConfig {
  std::string bind = "tcp://127.0.0.1:5556";  // port 0: any free port
  size_t max_message_bytes = 64u << 20;
  size_t max_batch = 4096;                      // requests in one "act"; more is a bad_request
  std::function<void(const std::string&)> log;  // default: stderr
};

class PolicyServer {
 public:
  // Binds. InputError when the endpoint cannot be bound.
  PolicyServer(Policy& policy, PolicyServerConfig config);
  ~PolicyServer();
  PolicyServer(const PolicyServer&) = delete;
  PolicyServer& operator=(const PolicyServer&) = delete;

  std::string endpoint() const;
  // Serves until stop() (from any thread or a signal handler).
  void run();
  void stop();
  // Requests answered so far ("act" batches).
  size_t batches_served() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kforge::rollout
