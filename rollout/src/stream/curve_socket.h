// Putting CurveZMQ on a socket, and the ZAP handler that lets a receiver admit
// only the senders whose public keys it knows (ZeroMQ RFC 27).
#pragma once

#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "kforge/rollout/stream/curve.h"

namespace kforge::rollout::internal {

// Client side: the server's public key and this end's pair (a fresh one when
// no secret key is given).
void apply_curve_client(zmq::socket_t& socket, const CurveClientOptions& options);
// Server side: must be called before bind.
void apply_curve_server(zmq::socket_t& socket, const CurveServerOptions& options);

// Answers ZAP requests on inproc://zeromq.zap.01 of `context`: CURVE clients
// whose public key is in `allowed` get 200, everyone else 400. One per
// context; runs until destroyed.
class ZapHandler {
 public:
  ZapHandler(zmq::context_t& context, const std::vector<std::string>& allowed_z85);
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;
  uint64_t refused() const { return refused_.load(); }

 private:
  void run();
  zmq::socket_t socket_;
  std::set<std::string> allowed_;  // raw 32-byte keys
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> refused_{0};
  std::thread thread_;
};

}  // namespace kforge::rollout::internal
