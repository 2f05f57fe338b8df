// The trainer-served policy (docs/architecture.md#rollouts): the trainer holds the model and
// answers batches of requests over ZeroMQ. This is the workers' client; the
// trainer side is `kforge.PolicyServer` (Python) or PolicyServer
// (policy_server.h, C++). Schema: trainer_bridge/POLICY.md.
//
// The client connects a DEALER socket to the server's ROUTER and sends
// "act" requests in the kforge_rpc envelope, at most `max_batch` policy
// requests per message; several messages are in flight at once. A batch
// that gets no reply within `timeout_s` is sent again (`retries` times); one
// that still gets none, or gets an error or a malformed reply, answers each
// of its requests with PolicyReply::error set: the worker truncates those
// episodes without charging the policy. act() never throws for those.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/rollout/policy/policy.h"

namespace kforge::rollout {

struct ZmqPolicyConfig {
  std::string endpoint = "tcp://127.0.0.1:5556";
  double timeout_s = 600.0;  // per batch message, from its send to its reply
  int retries = 1;           // resends of a batch that timed out
  int max_batch = 64;        // policy requests per message
  size_t max_message_bytes = 64u << 20;
};

class ZmqPolicy : public Policy {
 public:
  // Connects (ZeroMQ connects lazily: a server that is not up yet is found
  // when it comes up). InputError for a bad config.
  explicit ZmqPolicy(ZmqPolicyConfig config);
  ~ZmqPolicy() override;
  ZmqPolicy(const ZmqPolicy&) = delete;
  ZmqPolicy& operator=(const ZmqPolicy&) = delete;

  std::vector<PolicyReply> act(const std::vector<PolicyRequest>& requests) override;
  std::string describe() const override;

  // The server's "hello" result ({"server", "protocol", "policy_version",
  // "max_batch"}). SystemError when it does not answer within `timeout`.
  // act() says hello itself before its first batch and splits batches by
  // the smaller of its own max_batch and the server's.
  json hello(std::chrono::milliseconds timeout);

  // What the last answered hello said (zeros and empty strings before one).
  struct HelloFacts {
    std::string server;
    int64_t protocol = 0;
    std::string policy_version;  // the server's version when it answered
    size_t max_batch = 0;
  };
  HelloFacts hello_facts() const;

 private:
  json hello_locked(std::chrono::milliseconds timeout);

  struct Impl;
  std::unique_ptr<Impl> impl_;
  HelloFacts facts_;
};

}  // namespace kforge::rollout
