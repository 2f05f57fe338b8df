// The env server's start-up and its public face (kforge/env/server.h); the parts of its inside are
// listed in server_impl.h.
#include "kforge/env/server.h"

#include <cstdint>
#include <cstdio>
#include <sstream>
#include <utility>

#include "kforge/core/input_limits.h"
#include "server_impl.h"

#ifndef KFORGE_VERSION
#define KFORGE_VERSION "0.0.0"
#endif

namespace kforge::env {
namespace {

using Clock = server::Clock;

// Task-set checks at start-up: a progress line at most this often, and at
// most this many invalid tasks named in the error.
constexpr std::chrono::seconds kCheckProgressEvery{2};
constexpr size_t kInvalidTasksNamed = 20;

void default_log(const std::string& line) { std::fprintf(stderr, "kforge serve: %s\n", line.c_str()); }

// The limits a config sets, refused with the field and the bound.
void validate(const ServerConfig& config) {
  if (config.num_envs < 1) throw InputError("serve: --envs must be at least 1, got " + std::to_string(config.num_envs));
  if (config.max_inflight_per_client < 1) {
    throw InputError("serve: the in-flight limit per client must be at least 1");
  }
  // Durations are bounded like every config duration (deadline arithmetic).
  for (const auto& [name, value] : {std::pair<const char*, double>{"idle_timeout_s", config.idle_timeout_s},
                                    std::pair<const char*, double>{"reclaim_after_s", config.reclaim_after_s},
                                    std::pair<const char*, double>{"drain_timeout_s", config.drain_timeout_s}}) {
    if (!(value >= 0 && value <= limits::kMaxConfigDurationS)) {
      throw InputError(std::string("serve: ") + name + " must be in [0, " +
                       std::to_string(static_cast<int64_t>(limits::kMaxConfigDurationS)) + "] seconds, got " +
                       std::to_string(value));
    }
  }
  if (config.max_message_bytes < 1 || config.max_message_bytes > (size_t{4} << 30)) {
    throw InputError("serve: max_message_bytes must be in [1, 4 GiB], got " + std::to_string(config.max_message_bytes));
  }
}

// A client's queue is bounded like its requests in flight: beyond it a
// request is refused unread (receive_one).
server::FairQueueLimits queue_limits_for(const ServerConfig& config) {
  server::FairQueueLimits limits;
  limits.max_queued = 2 * static_cast<size_t>(config.max_inflight_per_client);
  limits.max_queued_bytes = config.max_message_bytes + (size_t{16} << 20);
  limits.max_inflight = config.max_inflight_per_client;
  return limits;
}

zmq::socket_t bind_router(zmq::context_t& ctx, const ServerConfig& config) {
  zmq::socket_t router(ctx, zmq::socket_type::router);
  // Bounced replies (EHOSTUNREACH) are how a vanished client is noticed at once.
  router.set(zmq::sockopt::router_mandatory, 1);
  // A client that reconnects under the same routing id takes its identity back.
  router.set(zmq::sockopt::router_handover, 1);
  router.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(config.max_message_bytes));
  router.set(zmq::sockopt::linger, 1000);
  try {
    router.bind(config.bind);
  } catch (const zmq::error_t& e) {
    throw InputError("serve: cannot bind " + config.bind + ": " + e.what());
  }
  return router;
}

// What `info` answers whatever the state: the server, its device and config.
json static_info_of(const ServerConfig& config, EnvPool& pool, const std::string& device_name) {
  const json env_json = to_json(config.env);
  json modes = json::array();
  for (SolutionMode m : pool.tools().modes()) modes.push_back(solution_mode_name(m));
  return {
      {"server", "kforge"},
      {"server_version", KFORGE_VERSION},
      {"protocol_version", rpc::kVersion},
      {"backend", backend_name(config.env.backend)},
      {"device", {{"index", config.env.device}, {"name", device_name}}},
      {"solution_mode", solution_mode_name(config.env.default_mode)},
      {"modes", modes},
      {"tools", pool.tools().definitions()},
      {"reward", env_json["reward"]},
      {"episode", env_json["episode"]},
      {"config_source", config.env.source},
      {"limits",
       {{"num_envs", config.num_envs},
        {"max_message_bytes", config.max_message_bytes},
        {"max_inflight_per_client", config.max_inflight_per_client},
        {"idle_timeout_s", config.idle_timeout_s},
        {"reclaim_after_s", config.reclaim_after_s}}},
      {"tasks", {{"count", config.tasks.size()}, {"source", config.tasks_source}}},
      {"methods", server::kMethods},
      {"error_codes", rpc::error_code_names()},
  };
}

}  // namespace

Server::Impl::Impl(ServerConfig c, EnvServices services) : config(std::move(c)), ctx(1) {
  validate(config);
  clients = server::FairQueue<Pending>(queue_limits_for(config));
  for (const auto& t : config.tasks) {
    if (!task_index.emplace(t.id, &t).second) throw InputError("serve: duplicate task id \"" + t.id + "\"");
  }
  // Bind first: a taken port should fail before the judge is started.
  router = bind_router(ctx, config);
  endpoint = router.get(zmq::sockopt::last_endpoint);
  if (!is_local_endpoint(config.bind)) {
    log("warning: " + endpoint +
        " is reachable from other hosts and CurveZMQ authentication is not configured yet: anyone who can reach it "
        "can run code in the sandbox");
  }
  wake = zmq::socket_t(ctx, zmq::socket_type::pull);
  wake_endpoint = "inproc://kforge-server-wake-" + std::to_string(reinterpret_cast<uintptr_t>(this));
  wake.bind(wake_endpoint);

  // The server builds the executor itself (unless given one) so that it can
  // wait for the judge before declaring itself ready.
  if (!services.executor) {
    services.executor = make_executor(executor_config(config.env));
  }
  executor = services.executor;
  pool = std::make_unique<EnvPool>(config.env, config.num_envs, services);
  device_name = executor->device_name();
  if (device_name.empty()) {
    // Every step would be a system error: better not to report ready.
    const Executor::StartReport judge_start = executor->start_report();
    throw SystemError("serve: the judge did not start (" +
                      (judge_start.error.empty() ? std::string("no reason given") : judge_start.error) +
                      "); nothing would be served");
  }
  slots = server::EnvSlots(config.num_envs);
  if (config.check_tasks) check_task_set();
  static_info = static_info_of(config, *pool, device_name);
}

void Server::Impl::check_task_set() {
  const size_t n = config.tasks.size();
  if (n == 0) return;
  const auto start = Clock::now();
  auto last_progress = start;
  std::vector<std::string> invalid;
  size_t unchecked = 0;
  for (size_t i = 0; i < n; ++i) {
    const TaskSpec& t = config.tasks[i];
    const ReferenceReport r = executor->check_task(t, config.env.eval).get();
    if (r.invalid()) {
      invalid.push_back("task '" + t.id + "': " + r.problem);
    } else if (!r.ok()) {
      ++unchecked;
      log("warning: could not check task '" + t.id + "' (" + r.problem + "); it is checked at its first reset");
    }
    if (Clock::now() - last_progress >= kCheckProgressEvery && i + 1 < n) {
      last_progress = Clock::now();
      log("checking task references on the judge: " + std::to_string(i + 1) + "/" + std::to_string(n) + ", " +
          std::to_string(invalid.size()) + " invalid");
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::ostringstream took;
  took.precision(3);
  took << seconds;
  if (!invalid.empty()) {
    std::string list;
    for (size_t i = 0; i < invalid.size() && i < kInvalidTasksNamed; ++i) list += "\n  " + invalid[i];
    if (invalid.size() > kInvalidTasksNamed) {
      list += "\n  ... and " + std::to_string(invalid.size() - kInvalidTasksNamed) + " more";
    }
    throw InputError("serve: " + std::to_string(invalid.size()) + " of " + std::to_string(n) + " tasks" +
                     (config.tasks_source.empty() ? "" : " in " + config.tasks_source) +
                     " cannot be judged (their reference fails the check on the judge); fix or remove them, or "
                     "start with --skip-reference-check to serve them anyway (they are then refused at reset):" +
                     list);
  }
  log("checked the references of " + std::to_string(n - unchecked) + " task(s) on the judge in " + took.str() + " s" +
      (unchecked > 0 ? " (" + std::to_string(unchecked) + " could not be checked)" : ""));
}

void Server::Impl::log(const std::string& line) const { config.log ? config.log(line) : default_log(line); }

Server::Server(ServerConfig config, EnvServices services)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(services))) {}

Server::~Server() {
  // run() owns the sockets; if it never ran, there is nothing in flight.
  stop();
}

const std::string& Server::endpoint() const { return impl_->endpoint; }

json Server::info() const { return impl_->static_info; }

void Server::run() {
  if (impl_->ran.exchange(true)) throw InputError("Server::run() was already called");
  impl_->run();
  impl_->run_done = true;
}

void Server::stop() {
  if (impl_->stop_requested.exchange(true)) return;
  if (impl_->ran.load() && !impl_->run_done.load()) impl_->wake_up();
}

}  // namespace kforge::env
