// An in-process env server on a free loopback port, and a minimal DEALER
// client speaking the wire protocol, for the server tests.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "kforge/core/rpc.h"
#include "kforge/env/env_config.h"
#include "kforge/env/server.h"

namespace kforge::env::testing {

namespace protocol = kforge::rpc;

inline std::filesystem::path gym_data() { return std::filesystem::path(KFORGE_SOURCE_DIR) / "tests/gym/data"; }
inline std::filesystem::path server_data() { return std::filesystem::path(KFORGE_SOURCE_DIR) / "tests/server/data"; }

inline json read_json(const std::filesystem::path& path) { return json::parse(read_text_file(path)); }

inline std::string source_of(const std::filesystem::path& path) { return read_text_file(path); }

// The tests/gym fast config (same checks, short timing phases) with the
// compile cache shared by all test processes, and a short call timeout so
// that tests/server/data/hang.cpp makes a step of a few seconds.
inline ServerConfig test_server_config(int num_envs = 4) {
  ServerConfig c;
  c.env = load_env_config((gym_data() / "fast.yaml").string());
  c.env.compile.cache_dir = std::filesystem::path(KFORGE_BINARY_DIR) / "tests/gym/compile-cache";
  c.env.eval.call_timeout_ms = 2000;
  c.num_envs = num_envs;
  c.bind = "tcp://127.0.0.1:0";
  c.drain_timeout_s = 0;
  return c;
}

// A server running on its own thread for the lifetime of the object.
class RunningServer {
 public:
  explicit RunningServer(ServerConfig config, std::vector<std::string>* log = nullptr, EnvServices services = {}) {
    if (log != nullptr) {
      log_ = log;
      config.log = [this](const std::string& line) {
        std::lock_guard<std::mutex> lock(log_mu_);
        log_->push_back(line);
      };
    }
    server_ = std::make_unique<Server>(std::move(config), std::move(services));
    thread_ = std::thread([this] { server_->run(); });
  }
  ~RunningServer() { stop(); }
  void stop() {
    server_->stop();
    if (thread_.joinable()) thread_.join();
  }
  Server& server() { return *server_; }
  const std::string& endpoint() const { return server_->endpoint(); }
  std::vector<std::string> log_lines() {
    std::lock_guard<std::mutex> lock(log_mu_);
    return *log_;
  }

 private:
  std::unique_ptr<Server> server_;
  std::thread thread_;
  std::mutex log_mu_;
  std::vector<std::string>* log_ = nullptr;
};

// A DEALER client. Replies that arrive while waiting for another id are kept
// for later, as a real client must (replies may come out of order).
class WireClient {
 public:
  explicit WireClient(const std::string& endpoint) : socket_(ctx_, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.connect(endpoint);
  }

  uint64_t send(const std::string& method, const json& params = json::object()) {
    const uint64_t id = next_id_++;
    send_raw(protocol::encode_request(id, method, params));
    return id;
  }
  void send_raw(const std::string& bytes) { socket_.send(zmq::buffer(bytes), zmq::send_flags::none); }
  void send_frames(const std::vector<std::string>& frames) {
    for (size_t i = 0; i < frames.size(); ++i) {
      socket_.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }

  // The next reply in arrival order. The limit only keeps a broken server
  // from hanging the test; nothing is asserted about how long a reply takes.
  protocol::Reply next(std::chrono::seconds limit = std::chrono::seconds(120)) {
    if (!buffered_.empty()) {
      protocol::Reply r = std::move(buffered_.front());
      buffered_.pop_front();
      return r;
    }
    return read(limit);
  }

  protocol::Reply wait(uint64_t id, std::chrono::seconds limit = std::chrono::seconds(120)) {
    for (auto it = buffered_.begin(); it != buffered_.end(); ++it) {
      if (it->id == json(id)) {
        protocol::Reply r = std::move(*it);
        buffered_.erase(it);
        return r;
      }
    }
    for (;;) {
      protocol::Reply r = read(limit);
      if (r.id == json(id)) return r;
      buffered_.push_back(std::move(r));
    }
  }

  // How many replies have arrived and not been taken, without waiting.
  size_t arrived() {
    for (;;) {
      zmq::message_t m;
      if (!socket_.recv(m, zmq::recv_flags::dontwait)) return buffered_.size();
      buffered_.push_back(protocol::decode_reply(m.to_string_view()));
    }
  }

  protocol::Reply call(const std::string& method, const json& params = json::object()) {
    return wait(send(method, params));
  }
  // The result of a call that must succeed.
  json ok(const std::string& method, const json& params = json::object()) {
    protocol::Reply r = call(method, params);
    if (!r.ok) throw std::runtime_error(method + " failed: " + r.code + ": " + r.message);
    return r.result;
  }

 private:
  protocol::Reply read(std::chrono::seconds limit) {
    zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 1, std::chrono::duration_cast<std::chrono::milliseconds>(limit));
    if (!(items[0].revents & ZMQ_POLLIN)) throw std::runtime_error("no reply from the server");
    zmq::message_t m;
    (void)socket_.recv(m, zmq::recv_flags::none);
    return protocol::decode_reply(m.to_string_view());
  }

  zmq::context_t ctx_{1};
  zmq::socket_t socket_;
  uint64_t next_id_ = 1;
  std::deque<protocol::Reply> buffered_;
};

inline json tool_call(const std::string& name, const json& arguments = json::object()) {
  return {
      {"type", "function"}, {"id", "call_" + name}, {"function", {{"name", name}, {"arguments", arguments.dump()}}}};
}

}  // namespace kforge::env::testing
