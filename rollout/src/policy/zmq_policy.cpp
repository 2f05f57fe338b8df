#include "kforge/rollout/policy/zmq_policy.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <zmq.hpp>

#include "kforge/core/elapsed.h"
#include "kforge/core/error.h"
#include "kforge/core/rpc.h"
#include "policy/policy_wire.h"

namespace kforge::rollout {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

struct ZmqPolicy::Impl {
  ZmqPolicyConfig config;
  std::mutex mu;  // one act() or hello() at a time owns the socket
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::dealer};
  uint64_t next_id = 1;
  // From the server's hello, asked before the first act (POLICY.md): a server
  // that takes fewer requests per act than max_batch gets smaller messages.
  bool greeted = false;
  size_t batch = 0;            // min(config.max_batch, the server's max_batch)
  std::string protocol_error;  // the server speaks another protocol version
  std::string server_summary;  // for describe()

  class ActExchange;

  explicit Impl(ZmqPolicyConfig c) : config(std::move(c)) {
    socket.set(zmq::sockopt::linger, 0);
    socket.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(config.max_message_bytes));
    try {
      socket.connect(config.endpoint);
    } catch (const zmq::error_t& e) {
      throw InputError("policy endpoint \"" + config.endpoint + "\": " + e.what());
    }
  }

  void send(uint64_t id, const std::string& method, const json& params) {
    const std::string bytes = rpc::encode_request(id, method, params);
    if (bytes.size() > config.max_message_bytes) {
      throw InputError("a policy request of " + std::to_string(bytes.size()) + " bytes exceeds max_message_bytes (" +
                       std::to_string(config.max_message_bytes) + "); lower max_batch");
    }
    if (!socket.send(zmq::buffer(bytes), zmq::send_flags::none)) throw SystemError("could not send to the policy");
  }

  // The next reply, or nothing once `deadline` passes. Replies that are not
  // MessagePack envelopes come back as an error reply with a null id.
  std::optional<rpc::Reply> receive(Clock::time_point deadline) {
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return std::nullopt;
      zmq::pollitem_t items[] = {{socket.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 1, std::min(left, std::chrono::milliseconds(1000)));
      if (!(items[0].revents & ZMQ_POLLIN)) continue;
      zmq::message_t m;
      if (!socket.recv(m, zmq::recv_flags::dontwait)) continue;
      // A DEALER reply may carry an empty delimiter first (REQ-style servers).
      while (m.size() == 0 && m.more()) {
        if (!socket.recv(m, zmq::recv_flags::dontwait)) break;
      }
      try {
        return rpc::decode_reply(std::string_view(static_cast<const char*>(m.data()), m.size()));
      } catch (const rpc::ProtocolError& e) {
        rpc::Reply bad;
        bad.ok = false;
        bad.code = "bad_reply";
        bad.message = e.what();
        return bad;
      }
    }
  }
};

// One act(): the requests cut into batches of at most max_batch, each sent
// with its own id and deadline. A batch past its deadline is sent again, up
// to config.retries times, then fails; a batch's error lands in the replies
// of its requests.
class ZmqPolicy::Impl::ActExchange {
 public:
  ActExchange(Impl& impl, const std::vector<PolicyRequest>& requests, std::vector<PolicyReply>& out,
              Clock::duration timeout)
      : impl_(impl), requests_(requests), out_(out), timeout_(timeout) {}

  void run(size_t max_batch) {
    for (size_t begin = 0; begin < requests_.size(); begin += max_batch) {
      Batch b;
      b.begin = begin;
      b.end = std::min(requests_.size(), begin + max_batch);
      send(b);
    }
    while (!open_.empty()) {
      std::optional<rpc::Reply> reply = impl_.receive(earliest_deadline());
      if (!reply) {
        resend_or_fail_expired();
        continue;
      }
      take_reply(*reply);
    }
  }

 private:
  struct Batch {
    size_t begin = 0, end = 0;
    int attempts = 0;
    Clock::time_point sent;
    Clock::time_point deadline;
  };

  Clock::time_point earliest_deadline() const {
    Clock::time_point first = open_.begin()->second.deadline;
    for (const auto& [id, b] : open_) first = std::min(first, b.deadline);
    return first;
  }

  void fail(const Batch& b, const std::string& why) {
    for (size_t i = b.begin; i < b.end; ++i) out_[i].error = why;
  }

  void send(Batch b) {
    json params = wire::encode_act_params(requests_, b.begin, b.end);
    const uint64_t id = impl_.next_id++;
    b.attempts += 1;
    b.sent = Clock::now();
    b.deadline = b.sent + timeout_;
    try {
      impl_.send(id, "act", params);
      open_[id] = b;
    } catch (const std::exception& e) {
      fail(b, std::string("could not send to the policy server: ") + e.what());
    }
  }

  // Every batch past its deadline: resend or give up.
  void resend_or_fail_expired() {
    const ZmqPolicyConfig& c = impl_.config;
    const auto now = Clock::now();
    for (auto it = open_.begin(); it != open_.end();) {
      if (it->second.deadline > now) {
        ++it;
        continue;
      }
      Batch b = it->second;
      it = open_.erase(it);
      if (b.attempts <= c.retries) {
        send(b);
      } else {
        fail(b, "the policy server at " + c.endpoint + " did not answer within " + std::to_string(c.timeout_s) +
                    " s (" + std::to_string(b.attempts) + " attempts)");
      }
    }
  }

  // A reply to an open batch closes it with the batch's replies or its error.
  void take_reply(const rpc::Reply& reply) {
    if (reply.id.is_null() && !reply.ok) {
      // Unroutable garbage: it cannot be matched to a batch, but a server that
      // sends it answers no batch properly; the batches time out.
      return;
    }
    if (!reply.id.is_number_unsigned()) return;
    auto it = open_.find(reply.id.get<uint64_t>());
    if (it == open_.end()) return;  // a late reply to a batch already resent or given up
    const Batch b = it->second;
    open_.erase(it);
    const double latency = std::chrono::duration<double, std::milli>(Clock::now() - b.sent).count();
    if (!reply.ok) {
      fail(b, "the policy server answered " + reply.code + ": " + reply.message);
      return;
    }
    try {
      std::vector<PolicyReply> got = wire::decode_act_result(reply.result, b.end - b.begin);
      for (size_t i = 0; i < got.size(); ++i) {
        if (!(got[i].latency_ms > 0)) got[i].latency_ms = latency;
        out_[b.begin + i] = std::move(got[i]);
      }
    } catch (const InputError& e) {
      fail(b, std::string("the policy server sent a malformed reply: ") + e.what());
    }
  }

  Impl& impl_;
  const std::vector<PolicyRequest>& requests_;
  std::vector<PolicyReply>& out_;
  const Clock::duration timeout_;
  std::map<uint64_t, Batch> open_;  // request id -> batch
};

namespace {

// Reads what the worker uses of a hello result; anything else (an older
// server's reply without the keys) keeps the worker's own settings.
void apply_hello(const json& result, ZmqPolicy::HelloFacts* facts) {
  if (!result.is_object()) return;
  if (auto it = result.find("max_batch"); it != result.end() && it->is_number_unsigned() && it->get<uint64_t>() > 0) {
    facts->max_batch = static_cast<size_t>(std::min<uint64_t>(it->get<uint64_t>(), 65536));
  }
  if (auto it = result.find("protocol"); it != result.end() && it->is_number_integer()) {
    facts->protocol = it->get<int64_t>();
  }
  if (auto it = result.find("policy_version"); it != result.end() && (it->is_string() || it->is_number())) {
    facts->policy_version = it->is_string() ? it->get<std::string>() : it->dump();
  }
  if (auto it = result.find("server"); it != result.end() && it->is_string()) facts->server = it->get<std::string>();
}

}  // namespace

ZmqPolicy::ZmqPolicy(ZmqPolicyConfig config) {
  if (!(config.timeout_s > 0) || !std::isfinite(config.timeout_s)) throw InputError("policy timeout_s must be > 0");
  if (config.retries < 0 || config.retries > 100) throw InputError("policy retries must be in [0, 100]");
  if (config.max_batch < 1 || config.max_batch > 65536) throw InputError("policy max_batch must be in [1, 65536]");
  impl_ = std::make_unique<Impl>(std::move(config));
}

ZmqPolicy::~ZmqPolicy() = default;

std::string ZmqPolicy::describe() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return "zmq " + impl_->config.endpoint + impl_->server_summary;
}

ZmqPolicy::HelloFacts ZmqPolicy::hello_facts() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return facts_;
}

json ZmqPolicy::hello(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return hello_locked(timeout);
}

json ZmqPolicy::hello_locked(std::chrono::milliseconds timeout) {
  const uint64_t id = impl_->next_id++;
  impl_->send(id, "hello", {{"client", "kforge-rollout"}, {"protocol", wire::kPolicyProtocol}});
  const auto deadline = Clock::now() + timeout;
  while (auto reply = impl_->receive(deadline)) {
    if (reply->id != json(id)) continue;
    if (!reply->ok) throw SystemError("the policy server refused hello: " + reply->code + ": " + reply->message);
    apply_hello(reply->result, &facts_);
    impl_->greeted = true;
    impl_->batch = std::min(static_cast<size_t>(impl_->config.max_batch),
                            facts_.max_batch > 0 ? facts_.max_batch : static_cast<size_t>(impl_->config.max_batch));
    if (facts_.protocol != 0 && facts_.protocol != wire::kPolicyProtocol) {
      impl_->protocol_error = "the policy server at " + impl_->config.endpoint + " speaks policy protocol " +
                              std::to_string(facts_.protocol) + ", this worker " +
                              std::to_string(wire::kPolicyProtocol) + " (trainer_bridge/POLICY.md)";
    }
    impl_->server_summary = " (" + (facts_.server.empty() ? std::string("server") : facts_.server) +
                            ", policy_version \"" + facts_.policy_version + "\", max_batch " +
                            std::to_string(impl_->batch) + ")";
    return reply->result;
  }
  throw SystemError("the policy server at " + impl_->config.endpoint + " did not answer within " +
                    std::to_string(timeout.count()) + " ms");
}

std::vector<PolicyReply> ZmqPolicy::act(const std::vector<PolicyRequest>& requests) {
  std::vector<PolicyReply> out(requests.size());
  if (requests.empty()) return out;
  std::lock_guard<std::mutex> lock(impl_->mu);
  const ZmqPolicyConfig& c = impl_->config;
  const auto timeout = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(c.timeout_s));
  if (!impl_->greeted) {
    // Once per worker: learn the server's max_batch and version before the
    // first batch. A server that does not answer hello (or refuses it) is
    // still asked to act, with this worker's own max_batch; its acts then
    // fail or succeed on their own.
    impl_->greeted = true;
    impl_->batch = static_cast<size_t>(c.max_batch);
    try {
      hello_locked(std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
    } catch (const SystemError&) {
    }
  }
  if (!impl_->protocol_error.empty()) {
    for (auto& r : out) r.error = impl_->protocol_error;
    return out;
  }
  Impl::ActExchange(*impl_, requests, out, timeout).run(impl_->batch);
  return out;
}

}  // namespace kforge::rollout
