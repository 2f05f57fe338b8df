#include "kforge/rollout/policy/policy_server.h"

#include <cstdio>
#include <vector>
#include <zmq.hpp>

#include "kforge/core/error.h"
#include "kforge/core/rpc.h"
#include "policy/policy_wire.h"

#ifndef KFORGE_VERSION
#define KFORGE_VERSION "0.0.0"
#endif

namespace kforge::rollout {

struct PolicyServer::Impl {
  Policy& policy;
  PolicyServerConfig config;
  zmq::context_t context{1};
  zmq::socket_t router{context, zmq::socket_type::router};
  std::string endpoint;
  std::atomic<bool> stopping{false};
  std::atomic<size_t> batches{0};

  Impl(Policy& p, PolicyServerConfig c) : policy(p), config(std::move(c)) {
    if (!config.log)
      config.log = [](const std::string& line) { std::fprintf(stderr, "kforge policy-server: %s\n", line.c_str()); };
    router.set(zmq::sockopt::linger, 1000);
    router.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(config.max_message_bytes));
    try {
      router.bind(config.bind);
    } catch (const zmq::error_t& e) {
      throw InputError("policy server: cannot bind \"" + config.bind + "\": " + e.what());
    }
    endpoint = router.get(zmq::sockopt::last_endpoint);
  }

  json handle(const rpc::Request& request) {
    if (request.method == "hello") {
      return {{"server", std::string("kforge policy-server ") + KFORGE_VERSION},
              {"protocol", wire::kPolicyProtocol},
              {"policy", policy.describe()},
              {"policy_version", ""},
              {"max_batch", config.max_batch},
              {"methods", json::array({"hello", "ping", "act"})}};
    }
    if (request.method == "ping") return json::object();
    if (request.method != "act") {
      throw rpc::ProtocolError(rpc::ErrorCode::kUnknownMethod,
                               "unknown method \"" + request.method + "\"; the methods are hello, ping, act",
                               "/method");
    }
    std::vector<PolicyRequest> requests;
    try {
      requests = wire::decode_act_params(request.params);
    } catch (const InputError& e) {
      throw rpc::from_input_error(e, rpc::ErrorCode::kBadRequest, "params", "/params");
    }
    if (requests.size() > config.max_batch) {
      throw rpc::ProtocolError(rpc::ErrorCode::kBadRequest,
                               "field /params/requests: " + std::to_string(requests.size()) +
                                   " requests in one act; at most " + std::to_string(config.max_batch),
                               "/params/requests");
    }
    std::vector<PolicyReply> replies;
    try {
      replies = policy.act(requests);
    } catch (const std::exception& e) {
      replies.assign(requests.size(), PolicyReply{});
      for (auto& r : replies) r.error = std::string("the policy failed: ") + e.what();
    }
    if (replies.size() != requests.size()) {
      throw rpc::ProtocolError(rpc::ErrorCode::kInternal, "the policy returned " + std::to_string(replies.size()) +
                                                              " replies for " + std::to_string(requests.size()));
    }
    ++batches;
    return wire::encode_act_result(replies, "");
  }

  void serve_one() {
    std::vector<zmq::message_t> frames;
    while (true) {
      zmq::message_t m;
      if (!router.recv(m, zmq::recv_flags::dontwait)) return;
      const bool more = m.more();
      frames.push_back(std::move(m));
      if (!more) break;
    }
    if (frames.size() < 2) return;  // no routing id: nothing to answer
    // [id, (empty,) payload]
    const bool delimiter = frames.size() >= 3 && frames[1].size() == 0;
    const zmq::message_t& body = frames.back();
    const std::string_view payload(static_cast<const char*>(body.data()), body.size());
    json id = nullptr;
    std::string reply;
    try {
      const rpc::Request request = rpc::decode_request(payload, &id);
      reply = rpc::encode_result(request.id, handle(request));
    } catch (const rpc::ProtocolError& e) {
      reply = rpc::encode_error(id, e);
    } catch (const std::exception& e) {
      reply = rpc::encode_error(id, rpc::ErrorCode::kInternal, e.what());
    }
    zmq::message_t to(frames.front().data(), frames.front().size());
    if (!router.send(to, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return;
    if (delimiter) (void)router.send(zmq::message_t(), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    if (!router.send(zmq::buffer(reply), zmq::send_flags::dontwait)) config.log("a reply could not be sent");
  }
};

PolicyServer::PolicyServer(Policy& policy, PolicyServerConfig config)
    : impl_(std::make_unique<Impl>(policy, std::move(config))) {}

PolicyServer::~PolicyServer() = default;

std::string PolicyServer::endpoint() const { return impl_->endpoint; }

size_t PolicyServer::batches_served() const { return impl_->batches.load(); }

void PolicyServer::stop() { impl_->stopping = true; }

void PolicyServer::run() {
  while (!impl_->stopping) {
    zmq::pollitem_t items[] = {{impl_->router.handle(), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 1, std::chrono::milliseconds(100));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      throw;
    }
    if (items[0].revents & ZMQ_POLLIN) impl_->serve_one();
  }
}

}  // namespace kforge::rollout
