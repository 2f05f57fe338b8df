// The env server's inside (kforge/env/server.h is its outside), shared by its files:
//
//   server.cpp            Server, and Impl's start-up: config checks, bind, judge, task-set check
//   socket_loop.cpp       run(): the socket thread's loop, reading, turns, replies, completions,
//                         forgetting clients
//   worker_threads.cpp    the completion, reset and decoder threads
//   session_methods.cpp   dispatch by method; hello, ping, make, close, tasks
//   episode_methods.cpp   reset (its socket-thread half and run_reset on a reset thread), step
//   fair_queue.h          FairQueue: whose request goes next, the penalty box, per-client bounds
//   env_slots.h           EnvSlots: the envs and which client holds each
//   wire_params.h         readers of request params
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "env_slots.h"
#include "envelope.h"
#include "fair_queue.h"
#include "kforge/core/rpc.h"
#include "kforge/env/server.h"

namespace kforge::env {
namespace server {

inline const std::vector<std::string> kMethods = {"hello", "ping", "make", "reset", "step", "close", "tasks"};

// A message read off the socket and not yet handled; it waits in its
// client's queue (FairQueue).
struct Pending {
  bool delimiter = false;  // REQ framing: [id, "", payload]
  size_t frames = 0;       // after the routing id (and delimiter); 1 is well-formed
  zmq::message_t payload;
};

}  // namespace server

struct Server::Impl {
  using Clock = server::Clock;
  using Envelope = server::Envelope;
  using Pending = server::Pending;
  using Slot = server::Slot;

  ServerConfig config;
  std::shared_ptr<Executor> executor;
  std::unique_ptr<EnvPool> pool;
  std::map<std::string, const TaskSpec*> task_index;
  std::string device_name;
  json static_info;

  zmq::context_t ctx;
  zmq::socket_t router;
  zmq::socket_t wake;  // PULL: one empty message per batch of finished steps, and from stop()
  std::string wake_endpoint;
  std::string endpoint;

  // Socket-thread state.
  server::FairQueue<Pending> clients;  // their queued requests, turns, penalties and steps in flight
  server::EnvSlots slots;
  std::vector<std::string> gone;  // routing ids found unreachable, handled between requests
  bool draining = false;
  Clock::time_point last_housekeeping;
  Clock::time_point started = Clock::now();
  Clock::time_point handling_since;  // when the request being handled was taken from its queue

  // A reset handed to the reset threads: what the socket thread read from
  // the request (cheap), and where the reply goes.
  struct ResetJob {
    int env_id = -1;
    uint64_t request_id = 0;
    Envelope reply_to;
    std::optional<json> task;  // inline task, or
    std::string task_id;       // an id of the task set
    uint64_t seed = 0;
    ResetOptions options;
  };
  // A request read off the socket thread (large ones) or on it: the request,
  // or why it is not one.
  struct Decoded {
    std::string routing_id;
    bool delimiter = false;
    json id;
    std::optional<rpc::Request> request;
    std::optional<rpc::ProtocolError> error;
    std::chrono::nanoseconds cost{0};  // the decoder thread's CPU time
  };
  struct ResetDone {
    int env_id = -1;
    bool ok = false;         // an episode started
    bool cancelled = false;  // the server stopped first: no reply from here
    std::string payload;
    std::chrono::nanoseconds cost{0};  // the reset thread's CPU time, charged to a refused reset's client
  };

  // Handoff between the completion thread, the reset threads, the decoder
  // thread and the socket thread.
  std::mutex mu;
  std::condition_variable cv;
  size_t outstanding = 0;  // steps sent to the pool and not yet taken by recv()
  bool completion_stop = false;
  std::deque<EnvStep> finished_steps;
  std::thread completion;
  std::condition_variable reset_cv;
  std::deque<ResetJob> reset_queue;
  std::deque<ResetDone> finished_resets;
  bool reset_stop = false;
  std::vector<std::thread> reset_threads;
  std::condition_variable decode_cv;
  std::deque<std::pair<std::string, Pending>> decode_queue;  // routing id, request
  std::deque<Decoded> finished_decodes;
  std::deque<Decoded> spent_decodes;  // freed on the decoder thread: a 20,000-variant DOM takes ms to free
  std::thread decoder;

  std::atomic<bool> stop_requested{false};
  std::atomic<bool> ran{false};
  std::atomic<bool> run_done{false};

  // server.cpp
  Impl(ServerConfig c, EnvServices services);
  void log(const std::string& line) const;
  void check_task_set();

  // worker_threads.cpp
  void completion_loop();
  void reset_loop();
  void decode_loop();
  static Decoded decode(std::string_view payload);

  // socket_loop.cpp
  void run();
  // One turn of the socket loop: wait up to `timeout` for requests or
  // finished steps, handle them, and do the housekeeping that is due.
  void serve_once(std::chrono::milliseconds timeout);
  void wake_up();
  // Reads one message into its client's queue; false when there was none.
  bool receive_one();
  // Handles queued requests in the clients' turns (FairQueue::next) for up
  // to kTurn.
  void handle_queued();
  // Handles one request; false when the reply was a refusal (an error).
  bool handle(const Envelope& from, const Pending& message);
  bool answer(const Envelope& from, Decoded& decoded);
  // Requests back from the decoder thread, answered where their clients'
  // turns were left open.
  void deliver_decodes();
  void send_reply(const Envelope& to, const std::string& payload);
  void deliver_completions();
  void forget_peer(const std::string& routing_id, const std::string& why);
  void housekeeping();

  // session_methods.cpp
  void dispatch(const Envelope& from, rpc::Request& req);
  Slot& owned_slot(const std::string& routing_id, const json& params);
  json do_hello(const std::string& routing_id, const json& params);
  json do_make(const std::string& routing_id, const json& params);
  bool reclaim_quietest(const std::string& for_client);
  json do_close(const std::string& routing_id, const json& params);
  json do_tasks(const json& params) const;

  // episode_methods.cpp
  // Replies later, when a reset thread has started the episode.
  void do_reset(const Envelope& from, uint64_t id, json& params);
  // On a reset thread: the reply to one reset.
  ResetDone run_reset(const ResetJob& job);
  // Replies later, when the step finishes.
  void do_step(const Envelope& from, uint64_t id, const json& params);
  // too_many_requests if the client has the most steps and resets in flight
  // it may.
  void check_inflight(const std::string& routing_id) const;
};

}  // namespace kforge::env
