// What the stream's end-to-end tests share (stream_test.cpp,
// stream_receiver_test.cpp): a fixture with a scratch folder and sender and
// receiver configurations for loopback TCP with short heartbeats, a Trainer
// thread that takes and acknowledges deliveries, and a RawPeer, a ZeroMQ
// socket driven by hand through the same codec, for a peer that misbehaves in
// a precise way. Test-only; nothing here is mocked.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>
#include <zmq.hpp>

#include "kforge/core/remove_tree.h"
#include "kforge/rollout/stream/stream_protocol.h"
#include "kforge/rollout/stream/trajectory_receiver.h"
#include "kforge/rollout/stream/trajectory_sender.h"

namespace kforge::rollout {

class StreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / ("kforge-stream-" + std::to_string(::getpid()) + "-" +
                                                      ::testing::UnitTest::GetInstance()->current_test_info()->name());
    kforge::remove_tree(root_);
    std::filesystem::create_directories(root_);
  }
  void TearDown() override { kforge::remove_tree(root_); }

  SenderConfig sender_config(const std::string& endpoint, const std::string& worker) {
    SenderConfig c;
    c.endpoint = endpoint;
    c.worker_id = worker;
    c.spool_dir = root_ / ("spool-" + worker);
    c.heartbeat_interval = std::chrono::milliseconds(100);
    c.heartbeat_timeout = std::chrono::milliseconds(1000);
    c.max_reconnect_delay = std::chrono::milliseconds(200);
    c.log = [](const std::string&) {};
    return c;
  }

  ReceiverConfig receiver_config(bool with_state = true) {
    ReceiverConfig c;
    c.bind = "tcp://127.0.0.1:0";
    if (with_state) c.state_dir = root_ / "receiver-state";
    c.heartbeat_interval = std::chrono::milliseconds(100);
    c.heartbeat_timeout = std::chrono::milliseconds(1000);
    c.log = [](const std::string&) {};
    return c;
  }

  static json trajectory(const std::string& id, size_t filler = 200) {
    return {{"schema_version", 1},
            {"id", id},
            {"task_id", "task"},
            {"turns", json::array({{{"messages", {{{"role", "assistant"}, {"content", std::string(filler, 'x')}}}},
                                    {"reward", 1.0}}})}};
  }

  std::filesystem::path root_;
};

// Takes every delivery and acknowledges it (or only those `accept` allows),
// recording what it acknowledged.
class Trainer {
 public:
  explicit Trainer(TrajectoryReceiver& r, std::function<bool(const Delivery&)> accept = nullptr)
      : receiver_(r), accept_(std::move(accept)), thread_([this] { run(); }) {}
  ~Trainer() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::vector<DeliveryKey> acked() const {
    std::lock_guard<std::mutex> lock(mu_);
    return acked_;
  }
  std::vector<Delivery> delivered() const {
    std::lock_guard<std::mutex> lock(mu_);
    return delivered_;
  }
  size_t acked_count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return acked_.size();
  }

 private:
  void run() {
    while (!stop_) {
      auto batch = receiver_.next_batch(64, std::chrono::milliseconds(20));
      std::vector<DeliveryKey> keys;
      for (const auto& d : batch) {
        if (!accept_ || accept_(d)) keys.push_back(d.key());
      }
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& d : batch) delivered_.push_back(d);
      if (!keys.empty()) {
        receiver_.ack(keys);
        acked_.insert(acked_.end(), keys.begin(), keys.end());
      }
    }
  }
  TrajectoryReceiver& receiver_;
  std::function<bool(const Delivery&)> accept_;
  mutable std::mutex mu_;
  std::vector<DeliveryKey> acked_;
  std::vector<Delivery> delivered_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

inline bool eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds within = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return condition();
}

// A ZeroMQ peer driven by hand, speaking the protocol through the codec.
class RawPeer {
 public:
  RawPeer(zmq::socket_type type, const std::string& endpoint, bool bind) : socket_(ctx_, type) {
    socket_.set(zmq::sockopt::linger, 0);
    if (bind) {
      socket_.bind(endpoint);
      endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
    } else {
      socket_.connect(endpoint);
    }
  }
  const std::string& endpoint() const { return endpoint_; }
  void send(const std::string& frame) { socket_.send(zmq::buffer(frame), zmq::send_flags::none); }
  void send_to(const std::string& rid, const std::string& frame) {
    socket_.send(zmq::buffer(rid), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(frame), zmq::send_flags::none);
  }
  // Next message within `timeout` (ROUTER: routing id in *rid), skipping
  // heartbeats unless asked for.
  std::optional<stream::Message> recv(std::chrono::milliseconds timeout, std::string* rid = nullptr,
                                      bool heartbeats = false) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left <= std::chrono::milliseconds(0)) return std::nullopt;
      zmq::pollitem_t item = {socket_.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, left) <= 0) continue;
      zmq::message_t first;
      (void)socket_.recv(first);
      std::string frame = first.to_string();
      if (first.more()) {
        if (rid) *rid = frame;
        zmq::message_t second;
        (void)socket_.recv(second);
        frame = second.to_string();
      }
      stream::Message m = stream::decode(frame);
      if (!heartbeats && std::holds_alternative<stream::Heartbeat>(m)) continue;
      return m;
    }
  }

 private:
  zmq::context_t ctx_{1};
  zmq::socket_t socket_;
  std::string endpoint_;
};

inline std::string hello_frame(const std::string& worker, const std::string& instance,
                               std::vector<int> versions = {1}) {
  stream::Hello h;
  h.versions = std::move(versions);
  h.worker = worker;
  h.instance = instance;
  return stream::encode(h);
}

}  // namespace kforge::rollout
