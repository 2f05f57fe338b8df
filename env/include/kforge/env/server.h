// The env server (docs/architecture.md#environment): one EnvPool exposed over a ZeroMQ ROUTER
// socket with MessagePack messages, for trainers that run their own agent loop
// (the Python `kforge.RemoteEnv` is its client). Protocol:
// trainer_bridge/PROTOCOL.md.
//
//   ServerConfig config;
//   config.env = load_env_config("cpu");
//   config.bind = "tcp://127.0.0.1:0";      // port 0: any free port
//   Server server(std::move(config));       // binds; the judge is up
//   std::cout << server.endpoint();         // tcp://127.0.0.1:41234
//   std::thread t([&] { server.run(); });   // until stop()
//   ...
//   server.stop(); t.join();
//
// Threads: run() owns the sockets and never waits on a step: EnvPool::send
// returns at once, a completion thread blocks in EnvPool::recv and wakes the
// socket loop through an inproc socket for every finished step, so a reply
// leaves as soon as its step is done, in completion order (replies to one
// client may come out of order; they carry the request id). Nor does it do a
// reset's work, which grows with the request (parsing and validating the
// task, suggesting a task id, waiting for the reference check of
// Executor::check_task, building the prompt): reset threads do it and wake
// the socket loop with the reply; the env counts as busy meanwhile.
//
// Clients are told apart by their ZeroMQ routing id. An env belongs to the
// client that made it; other clients get unknown_env for it. A client whose
// routing id can no longer be reached (a reply bounced) or that sent nothing
// and had nothing in flight for idle_timeout_s (default: never), or that is
// the quietest one when another client's make finds every env held
// (reclaim_after_s), loses its envs; replies to it are dropped.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/endpoint.h"
#include "kforge/core/task_set.h"
#include "kforge/core/task_spec.h"
#include "kforge/env/env_config.h"
#include "kforge/env/env_pool.h"

namespace kforge::env {

struct ServerConfig {
  EnvConfig env;
  int num_envs = 8;
  // A ZeroMQ endpoint. Port 0 or "*" picks a free port (see endpoint()).
  // Anything but loopback, ipc:// or inproc:// is reachable from other hosts
  // and logs a warning: there is no authentication yet (CurveZMQ is planned).
  std::string bind = "tcp://127.0.0.1:5555";
  // A client that sent nothing and had no request in flight for this long
  // loses its envs. 0 (the default): never by time alone: a trainer may stay
  // silent for a training step of hours and find its envs where it left
  // them; envs are bounded by num_envs instead (reclaim_after_s).
  double idle_timeout_s = 0.0;
  // When `make` finds every env held, the envs of the client that has been
  // quiet longest (nothing in flight or queued) are released for it, if it
  // has been quiet at least this long: clients that vanished without closing
  // cannot starve the pool, and a live trainer loses an env only when
  // another needs it. 0: never reclaim.
  double reclaim_after_s = 300.0;
  // Larger messages make ZeroMQ drop the connection (ZMQ_MAXMSGSIZE).
  size_t max_message_bytes = 64u << 20;
  // Steps and resets one client may have in flight at once (one per env in
  // any case); twice as many of its requests may wait to be handled.
  int max_inflight_per_client = 256;
  // On stop(): how long in-flight steps may still finish and be answered;
  // those still running after it are answered with shutting_down.
  double drain_timeout_s = 30.0;
  // The task set that `reset` with a task_id and the `tasks` method read.
  std::vector<TaskSpec> tasks;
  // Check every task of `tasks` on the judge before serving (one reference
  // run each, sequentially, progress in the log); the constructor throws
  // InputError naming every invalid task. Off: tasks are checked at their
  // first reset instead, and an invalid one is refused there.
  bool check_tasks = true;
  std::string tasks_source;  // where the task set came from, for `hello`
  // Where the server writes its log lines (one line each, no newline);
  // default: stderr with a "kforge serve: " prefix.
  std::function<void(const std::string&)> log;
};

class Server {
 public:
  // Builds the pool, binds the socket, waits for the judge to start and
  // checks the task set (ServerConfig::check_tasks), so the server is ready
  // for requests when this returns. InputError for a bad config, an endpoint
  // that cannot be bound, or tasks whose reference check failed.
  explicit Server(ServerConfig config, EnvServices services = {});
  // Stops (as stop() + the end of run()) if still running.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The endpoint actually bound, with the port filled in
  // ("tcp://127.0.0.1:41234"); for "*" hosts, the address ZeroMQ reports.
  const std::string& endpoint() const;
  // What `hello` returns (versions, backend, device, tools, reward, limits).
  json info() const;

  // Serves until stop(); then stops accepting requests (answering them with
  // shutting_down), lets in-flight steps finish for drain_timeout_s, answers
  // the rest with shutting_down, and returns. Call at most once.
  void run();
  // Thread-safe and idempotent; returns at once (run() does the draining).
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

using kforge::is_local_endpoint;  // kforge/core/endpoint.h

}  // namespace kforge::env
