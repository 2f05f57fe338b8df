#include "kforge/env/server.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <utility>
#include <zmq.hpp>

#include "kforge/core/action.h"
#include "kforge/core/input_limits.h"
#include "kforge/core/op_registry.h"
#include "kforge/core/rpc.h"
#include "kforge/core/solution.h"

#ifndef KFORGE_VERSION
#define KFORGE_VERSION "0.0.0"
#endif

namespace kforge::env {
namespace {

namespace protocol = kforge::rpc;
using protocol::ErrorCode;
using protocol::ProtocolError;
using Clock = std::chrono::steady_clock;

const std::vector<std::string> kMethods = {"hello", "ping", "make", "reset", "step", "close", "tasks"};

// Housekeeping (idle clients) runs this often at most; it is not on the path
// of any reply.
constexpr std::chrono::milliseconds kHousekeeping{500};
// Requests handled per wake-up before finished steps get their replies: at
// most this many, and for at most kTurn. A count alone let 256 large hostile
// requests (~6 ms each to decode) hold every finished step back 1.5 s
// (bench/server, --flood 5); the clients' queues, served in turn, then
// bound what an honest request waits for to one request per other client.
constexpr int kRequestsPerTurn = 256;
constexpr std::chrono::microseconds kTurn{1000};
// Messages read off the socket per turn into the clients' queues. Reading
// costs a copy, not a decode, so this only bounds one turn's reading.
constexpr int kReadsPerTurn = 1024;
// A refused request costs its client this many times what it cost the
// server before the client's next request is read: a client that sends only
// bad requests gets at most 1/kRefusalPenalty (2%) of the socket thread,
// and, waiting for its replies, stops sending. Refused: an error reply, a
// reset refused on its reset thread, a step whose action was invalid. The
// cost is the socket thread's time for the request, plus the decoder's and
// the reset thread's CPU time where they had a part. An honest client's
// occasional error (env_busy, ~10 us)
// costs it half a millisecond. (bench/server: 8 hostile clients took honest
// p99 from 5.8 ms to 109 ms before this; see docs/threat-model.md.)
constexpr int kRefusalPenalty = 50;
// Requests larger than this are decoded on the decoder thread, at a lower
// CPU priority, so that no one request holds the socket thread: a
// 20,000-variant reset takes ~10 ms to decode, and an honest step that
// arrived meanwhile waited for it (bench/server --flood 0). The client's
// later requests wait in its queue, so its requests keep their order.
constexpr size_t kDecodeAsideBytes = size_t{64} << 10;
constexpr int kDecoderNice = 10;
// Threads that run resets. A reset parses and type-checks the task (every
// shape variant), suggests a task id for an unknown one and builds the
// prompt: work that grows with the request, so it never runs on the socket
// thread (tests/server: a flood of heavy resets does not slow honest steps).
constexpr int kResetThreads = 4;
// How often a reset thread looks up from a reference check to see whether
// the server is stopping.
constexpr std::chrono::milliseconds kCheckPoll{100};
// Task-set checks at start-up: a progress line at most this often, and at
// most this many invalid tasks named in the error.
constexpr std::chrono::seconds kCheckProgressEvery{2};
constexpr size_t kInvalidTasksNamed = 20;

// Where a reply goes: the client's routing id, and whether it framed its
// request REQ-style with an empty delimiter (then the reply must be too).
struct Envelope {
  std::string routing_id;
  bool delimiter = false;
};

// A message read off the socket and not yet handled. Requests wait in their
// client's queue, so that the socket thread serves the clients in turn
// rather than in the order their bytes arrived.
struct Pending {
  bool delimiter = false;  // REQ framing: [id, "", payload]
  size_t frames = 0;       // after the routing id (and delimiter); 1 is well-formed
  zmq::message_t payload;
};

struct Peer {
  Clock::time_point last_seen;
  int inflight = 0;
  std::set<int> envs;
  std::deque<Pending> queue;
  size_t queued_bytes = 0;
  bool scheduled = false;        // in the ready ring or the penalty box
  bool decoding = false;         // its oldest request is on the decoder thread
  Clock::time_point not_before;  // a refusal's penalty: no request is handled before this
};

struct Slot {
  bool held = false;
  std::string owner;  // routing id of the client that made it
  bool has_episode = false;
  bool finished = false;   // the last step terminated or truncated the episode
  bool busy = false;       // a step or a reset is in flight
  bool resetting = false;  // ... and it is a reset
  uint64_t request_id = 0;
  Envelope reply_to;
  // The step in flight outlived its reason to be answered or kept: free the
  // slot when it returns (orphan: the client is gone, the reply is dropped;
  // closing: close() came during the step, the reply is still sent).
  bool orphan = false;
  bool closing = false;
  // What reading the request in flight cost the socket thread: charged to
  // its client if a reset is refused (with the reset thread's time) or a
  // step's action was invalid (a policy's 400 KB of brackets is read in full
  // before the env finds it is no tool call).
  std::chrono::nanoseconds accept_cost{0};
};

std::string printable_id(const std::string& id) {
  const bool text = !id.empty() && std::all_of(id.begin(), id.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
  if (text) return id;
  static const char* kHex = "0123456789abcdef";
  std::string hex = "0x";
  for (unsigned char c : id) {
    hex += kHex[c >> 4];
    hex += kHex[c & 15];
  }
  return hex;
}

std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

// This thread's CPU time: what a reset cost the server, whatever else the
// machine was doing meanwhile.
std::chrono::nanoseconds thread_cpu_time() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

void default_log(const std::string& line) { std::fprintf(stderr, "kforge serve: %s\n", line.c_str()); }

// Params are read through ObjectReader like every other input, so unknown
// keys and wrong types are reported with their field.
template <class F>
auto reading_params(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const InputError& e) {
    throw protocol::from_input_error(e, ErrorCode::kBadRequest, "params", "/params");
  }
}

// MessagePack keeps integers and floats apart, so the wire takes integers as
// integers: a float (1.0 for env 1) is a client's bug that the config
// readers' lenience for YAML (3.0 for 3) would otherwise hide.
void require_wire_integer(const Field& f, const std::string& example) {
  if (!f.value().is_number_integer() && !f.value().is_number_unsigned()) {
    f.fail("an integer (MessagePack int, e.g. " + example + "; a float such as " + example + ".0 is refused)");
  }
}

// An episode seed: any unsigned 64-bit integer (docs/environment.md, "seed").
uint64_t wire_seed(const Field& f) {
  require_wire_integer(f, "7");
  if (!f.value().is_number_unsigned()) f.fail("an unsigned integer in [0, 2^64-1]");
  return f.value().get<uint64_t>();
}

// A solution object from the wire. "source_file" is refused: it would read
// files of the server's host on behalf of a remote client.
Solution wire_solution(const json& value, SolutionMode default_mode, const std::string& pointer) {
  if (value.is_object() && value.contains("source_file")) {
    throw ProtocolError(ErrorCode::kBadRequest,
                        "field " + pointer + "/source_file: not accepted over the wire; send the code as \"source\"",
                        pointer + "/source_file");
  }
  json v = value;
  if (v.is_object() && !v.contains("mode")) v["mode"] = solution_mode_name(default_mode);
  try {
    return parse_solution(Document::from_value(v, "solution"));
  } catch (const InputError& e) {
    throw protocol::from_input_error(e, ErrorCode::kBadRequest, "solution", pointer);
  }
}

}  // namespace

struct Server::Impl {
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
  std::map<std::string, Peer> peers;
  std::vector<Slot> slots;
  std::vector<std::string> gone;  // routing ids found unreachable, handled between requests
  // Clients with requests waiting, served one request each in turn; ids of
  // peers that went away are skipped when they come up.
  std::deque<std::string> ready;
  std::multimap<Clock::time_point, std::string> penalty_box;  // served again once their time comes
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
    std::optional<protocol::Request> request;
    std::optional<ProtocolError> error;
    std::chrono::nanoseconds cost{0};  // the decoder thread's CPU time
  };
  struct ResetDone {
    int env_id = -1;
    bool ok = false;         // an episode started
    bool cancelled = false;  // the server stopped first: no reply from here
    std::string payload;
    std::chrono::nanoseconds cost{0};  // the reset thread's CPU time, charged to a refused reset's client
  };

  // Handoff between the completion thread, the reset threads and the socket
  // thread.
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

  Impl(ServerConfig c, EnvServices services);
  void log(const std::string& line) const { config.log ? config.log(line) : default_log(line); }

  void run();
  void completion_loop();
  void reset_loop();
  void decode_loop();
  void check_task_set();
  // On a reset thread: the reply to one reset.
  ResetDone run_reset(const ResetJob& job);
  // One turn of the socket loop: wait up to `timeout` for requests or
  // finished steps, handle them, and do the housekeeping that is due.
  void serve_once(std::chrono::milliseconds timeout);
  void wake_up();
  // Reads one message into its client's queue; false when there was none.
  bool receive_one();
  // Handles queued requests, one per client in turn, for up to kTurn.
  void handle_queued();
  void schedule(const std::string& routing_id, Peer& peer);
  // Handles one request; false when the reply was a refusal (an error).
  bool handle(const Envelope& from, const Pending& message);
  bool answer(const Envelope& from, Decoded& decoded);
  static Decoded decode(std::string_view payload);
  // Requests back from the decoder thread, answered in their clients' turn.
  void deliver_decodes();
  void penalize(Peer& peer, std::chrono::nanoseconds cost);
  void dispatch(Peer& peer, const Envelope& from, protocol::Request& req);
  void send_reply(const Envelope& to, const std::string& payload);
  void deliver_completions();
  void release(int env_id);
  void forget_peer(const std::string& routing_id, const std::string& why);
  void housekeeping();
  size_t busy_count() const;
  size_t held_count() const;

  Slot& owned_slot(const Peer& peer, const std::string& routing_id, const json& params);
  json do_hello(const Peer& peer, const json& params);
  json do_make(Peer& peer, const std::string& routing_id, const json& params);
  // Replies later, when a reset thread has started the episode.
  void do_reset(Peer& peer, const Envelope& from, uint64_t id, json& params);
  // Replies later, when the step finishes.
  void do_step(Peer& peer, const Envelope& from, uint64_t id, const json& params);
  json do_close(Peer& peer, const std::string& routing_id, const json& params);
  json do_tasks(const json& params) const;
};

Server::Impl::Impl(ServerConfig c, EnvServices services) : config(std::move(c)), ctx(1) {
  if (config.num_envs < 1) throw InputError("serve: --envs must be at least 1, got " + std::to_string(config.num_envs));
  if (config.max_inflight_per_client < 1) {
    throw InputError("serve: the in-flight limit per client must be at least 1");
  }
  // Durations are bounded like every config duration (deadline arithmetic).
  for (const auto& [name, value] : {std::pair<const char*, double>{"idle_timeout_s", config.idle_timeout_s},
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
  for (const auto& t : config.tasks) {
    if (!task_index.emplace(t.id, &t).second) throw InputError("serve: duplicate task id \"" + t.id + "\"");
  }
  // Bind first: a taken port should fail before the judge is started.
  router = zmq::socket_t(ctx, zmq::socket_type::router);
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
  slots.resize(static_cast<size_t>(config.num_envs));
  if (config.check_tasks) check_task_set();

  const json env_json = to_json(config.env);
  json modes = json::array();
  for (SolutionMode m : pool->tools().modes()) modes.push_back(solution_mode_name(m));
  static_info = {
      {"server", "kforge"},
      {"server_version", KFORGE_VERSION},
      {"protocol_version", protocol::kVersion},
      {"backend", backend_name(config.env.backend)},
      {"device", {{"index", config.env.device}, {"name", device_name}}},
      {"solution_mode", solution_mode_name(config.env.default_mode)},
      {"modes", modes},
      {"tools", pool->tools().definitions()},
      {"reward", env_json["reward"]},
      {"episode", env_json["episode"]},
      {"config_source", config.env.source},
      {"limits",
       {{"num_envs", config.num_envs},
        {"max_message_bytes", config.max_message_bytes},
        {"max_inflight_per_client", config.max_inflight_per_client},
        {"idle_timeout_s", config.idle_timeout_s}}},
      {"tasks", {{"count", config.tasks.size()}, {"source", config.tasks_source}}},
      {"methods", kMethods},
      {"error_codes", protocol::error_code_names()},
  };
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

void Server::Impl::wake_up() {
  zmq::socket_t push(ctx, zmq::socket_type::push);
  push.set(zmq::sockopt::linger, 0);
  push.connect(wake_endpoint);
  (void)push.send(zmq::message_t(), zmq::send_flags::dontwait);
}

void Server::Impl::completion_loop() {
  zmq::socket_t push(ctx, zmq::socket_type::push);
  push.set(zmq::sockopt::linger, 0);
  push.connect(wake_endpoint);
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [this] { return completion_stop || outstanding > 0; });
      if (completion_stop) return;
    }
    // The timeout only bounds how long a stop waits; a finished step wakes
    // recv() at once.
    std::vector<EnvStep> steps = pool->recv(1, std::chrono::milliseconds(200), 64);
    if (steps.empty()) continue;
    {
      std::lock_guard<std::mutex> lock(mu);
      outstanding -= steps.size();
      for (auto& s : steps) finished_steps.push_back(std::move(s));
    }
    // A full queue means wake-ups are already pending; nothing is lost.
    (void)push.send(zmq::message_t(), zmq::send_flags::dontwait);
  }
}

void Server::Impl::reset_loop() {
  zmq::socket_t push(ctx, zmq::socket_type::push);
  push.set(zmq::sockopt::linger, 0);
  push.connect(wake_endpoint);
  for (;;) {
    ResetJob job;
    {
      std::unique_lock<std::mutex> lock(mu);
      reset_cv.wait(lock, [this] { return reset_stop || !reset_queue.empty(); });
      if (reset_stop) return;
      job = std::move(reset_queue.front());
      reset_queue.pop_front();
    }
    const auto cpu_start = thread_cpu_time();
    ResetDone done = run_reset(job);
    if (done.cancelled) return;
    done.cost = thread_cpu_time() - cpu_start;
    {
      std::lock_guard<std::mutex> lock(mu);
      finished_resets.push_back(std::move(done));
    }
    (void)push.send(zmq::message_t(), zmq::send_flags::dontwait);
  }
}

Server::Impl::ResetDone Server::Impl::run_reset(const ResetJob& job) {
  ResetDone done;
  done.env_id = job.env_id;
  try {
    TaskSpec parsed;
    const TaskSpec* task = nullptr;
    if (job.task) {
      try {
        parsed = parse_task(Document::from_value(*job.task, "task"));
        // Within the task limits before the judge runs its reference (a
        // 2^40-element variant must never get that far).
        validate_task(parsed);
      } catch (const InputError& e) {
        throw protocol::from_input_error(e, ErrorCode::kInvalidTask, "task", "/params/task");
      }
      task = &parsed;
    } else {
      auto it = task_index.find(job.task_id);
      if (it == task_index.end()) {
        std::vector<std::string> ids;
        for (const auto& kv : task_index) ids.push_back(kv.first);
        const std::string hint = ids.size() <= 100000 ? closest_match(job.task_id, ids) : "";
        throw ProtocolError(ErrorCode::kUnknownTask,
                            "task_id \"" + job.task_id.substr(0, limits::kMaxNameBytes) +
                                "\" is not in the server's task set (" + std::to_string(ids.size()) + " tasks" +
                                (config.tasks_source.empty() ? ", none loaded: start with --tasks" : "") + ")" +
                                (hint.empty() ? "" : "; did you mean \"" + hint + "\"?"),
                            "/params/task_id");
      }
      task = it->second;
    }
    // The judge checks each distinct task once (Executor::check_task); the
    // wait looks up now and then so that a stopping server is not held.
    ResetOptions options = job.options;
    options.reference_check = executor->check_task(*task, config.env.eval);
    while (options.reference_check.wait_for(kCheckPoll) != std::future_status::ready) {
      std::lock_guard<std::mutex> lock(mu);
      if (reset_stop) {
        done.cancelled = true;  // run() answers the slot shutting_down
        return done;
      }
    }
    ResetResult r;
    try {
      r = pool->reset(job.env_id, *task, job.seed, options);
    } catch (const InputError& e) {
      // The params and the slot were checked on the socket thread: what is
      // left is the task failing its checks (shapes, dtypes, op attributes,
      // limits) or its reference check (a node giving NaN/Inf or a constant
      // output).
      throw protocol::from_input_error(e, ErrorCode::kInvalidTask, "task",
                                       job.task ? "/params/task" : "/params/task_id");
    }
    done.payload =
        protocol::encode_result(job.request_id, {{"observation", to_json(r.observation)}, {"info", std::move(r.info)}});
    done.ok = true;
  } catch (const ProtocolError& e) {
    done.payload = protocol::encode_error(job.request_id, e);
  } catch (const std::exception& e) {
    log(std::string("internal error in reset: ") + e.what());
    done.payload =
        protocol::encode_error(job.request_id, ErrorCode::kInternal, std::string("server error: ") + e.what());
  }
  return done;
}

size_t Server::Impl::busy_count() const {
  return static_cast<size_t>(std::count_if(slots.begin(), slots.end(), [](const Slot& s) { return s.busy; }));
}

size_t Server::Impl::held_count() const {
  return static_cast<size_t>(std::count_if(slots.begin(), slots.end(), [](const Slot& s) { return s.held; }));
}

void Server::Impl::run() {
  completion = std::thread([this] { completion_loop(); });
  for (int i = 0; i < std::min(kResetThreads, config.num_envs); ++i) {
    reset_threads.emplace_back([this] { reset_loop(); });
  }
  decoder = std::thread([this] { decode_loop(); });
  last_housekeeping = Clock::now();
  Clock::time_point drain_deadline;
  for (;;) {
    if (stop_requested.load() && !draining) {
      draining = true;
      drain_deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(config.drain_timeout_s * 1000));
      log("stopping: " + std::to_string(busy_count()) + " step(s) in flight");
    }
    if (draining && (busy_count() == 0 || Clock::now() >= drain_deadline)) break;

    auto timeout = kHousekeeping;
    if (draining) {
      timeout = std::min(timeout, std::chrono::duration_cast<std::chrono::milliseconds>(drain_deadline - Clock::now()));
      timeout = std::max(timeout, std::chrono::milliseconds(1));
    }
    try {
      serve_once(timeout);
    } catch (const std::exception& e) {
      // Each request is answered or logged on its own; what reaches here is a
      // bug of ours, and one bad turn must not end the server.
      log(std::string("internal error in the server loop: ") + e.what());
    }
  }

  {
    std::lock_guard<std::mutex> lock(mu);
    completion_stop = true;
    reset_stop = true;
  }
  cv.notify_all();
  reset_cv.notify_all();
  decode_cv.notify_all();
  completion.join();
  for (auto& t : reset_threads) t.join();
  decoder.join();
  deliver_completions();
  size_t cancelled = 0;
  for (Slot& s : slots) {
    if (!s.busy || s.orphan) continue;
    const char* what = s.resetting ? "reset" : "step";
    send_reply(s.reply_to, protocol::encode_error(s.request_id, ErrorCode::kShuttingDown,
                                                  std::string("the server stopped before this ") + what +
                                                      " finished; the " + what + " was cancelled"));
    ++cancelled;
  }
  if (cancelled > 0) log("cancelled " + std::to_string(cancelled) + " step(s) still in flight");
  router.close();  // linger flushes the last replies
  wake.close();
  log("stopped");
}

void Server::Impl::serve_once(std::chrono::milliseconds timeout) {
  zmq::pollitem_t items[] = {{router.handle(), 0, ZMQ_POLLIN, 0}, {wake.handle(), 0, ZMQ_POLLIN, 0}};
  // Queued requests shorten the wait: at once when a client is ready, or
  // when the first penalty ends.
  if (!ready.empty()) {
    timeout = std::chrono::milliseconds(0);
  } else if (!penalty_box.empty()) {
    const auto until = std::chrono::ceil<std::chrono::milliseconds>(penalty_box.begin()->first - Clock::now());
    timeout = std::clamp(until, std::chrono::milliseconds(0), timeout);
  }
  try {
    zmq::poll(items, 2, timeout);
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return;
    throw;
  }
  if (items[1].revents & ZMQ_POLLIN) {
    zmq::message_t m;
    while (wake.recv(m, zmq::recv_flags::dontwait)) {
    }
    deliver_completions();
    deliver_decodes();
  }
  // The socket's events, not revents: ZeroMQ signals edges, and a turn may
  // have left messages unread.
  for (int i = 0; i < kReadsPerTurn && (router.get(zmq::sockopt::events) & ZMQ_POLLIN); ++i) {
    if (!receive_one()) break;
  }
  handle_queued();
  for (const auto& id : std::exchange(gone, {})) forget_peer(id, "unreachable (a reply bounced)");
  if (Clock::now() - last_housekeeping >= kHousekeeping) housekeeping();
}

bool Server::Impl::receive_one() {
  std::vector<zmq::message_t> frames;
  for (;;) {
    zmq::message_t m;
    if (!router.recv(m, zmq::recv_flags::dontwait)) break;
    const bool more = m.more();
    frames.push_back(std::move(m));
    if (!more) break;
  }
  if (frames.empty()) return false;
  const std::string routing_id = frames[0].to_string();
  Pending message;
  // DEALER: [id, payload]; REQ: [id, "", payload].
  message.delimiter = frames.size() == 3 && frames[1].empty();
  message.frames = frames.size() - (message.delimiter ? 2 : 1);
  if (message.frames == 1) message.payload = std::move(frames.back());
  Peer& peer = peers[routing_id];
  // A client's queue is bounded like its requests in flight: beyond it a
  // request is refused unread, at the cost of a copy (its id is peeked at so
  // that the client can tell which request it was).
  const size_t max_queued = 2 * static_cast<size_t>(config.max_inflight_per_client);
  const size_t max_queued_bytes = config.max_message_bytes + (size_t{16} << 20);
  if (peer.queue.size() >= max_queued || peer.queued_bytes + message.payload.size() > max_queued_bytes) {
    Envelope to{routing_id, message.delimiter};
    const std::optional<uint64_t> id = protocol::peek_request_id(message.payload.to_string_view());
    send_reply(to, protocol::encode_error(id ? json(*id) : json(nullptr), ErrorCode::kTooManyRequests,
                                          "request dropped unread: " + std::to_string(peer.queue.size()) +
                                              " requests (" + std::to_string(peer.queued_bytes) +
                                              " bytes) from this client are already waiting; wait for their "
                                              "replies before sending more"));
    return true;
  }
  peer.queued_bytes += message.payload.size();
  peer.queue.push_back(std::move(message));
  schedule(routing_id, peer);
  return true;
}

void Server::Impl::schedule(const std::string& routing_id, Peer& peer) {
  if (peer.scheduled || peer.decoding) return;
  peer.scheduled = true;
  if (peer.not_before > Clock::now()) {
    penalty_box.emplace(peer.not_before, routing_id);
  } else {
    ready.push_back(routing_id);
  }
}

// Penalties add up: eight refusals in a row cost eight times one.
void Server::Impl::penalize(Peer& peer, std::chrono::nanoseconds cost) {
  peer.not_before = std::max(peer.not_before, Clock::now()) + kRefusalPenalty * cost;
}

void Server::Impl::handle_queued() {
  const auto turn_end = Clock::now() + kTurn;
  for (int i = 0; i < kRequestsPerTurn; ++i) {
    auto now = Clock::now();
    while (!penalty_box.empty() && penalty_box.begin()->first <= now) {
      ready.push_back(std::move(penalty_box.begin()->second));
      penalty_box.erase(penalty_box.begin());
    }
    if (ready.empty() || now >= turn_end) return;
    const std::string routing_id = std::move(ready.front());
    ready.pop_front();
    auto it = peers.find(routing_id);
    if (it == peers.end()) continue;  // forgotten since
    Peer& peer = it->second;
    if (peer.queue.empty()) {
      peer.scheduled = false;
      continue;
    }
    if (peer.not_before > now) {
      // Penalized while it waited in the ring (a refused reset).
      penalty_box.emplace(peer.not_before, routing_id);
      continue;
    }
    Pending message = std::move(peer.queue.front());
    peer.queue.pop_front();
    peer.queued_bytes -= message.payload.size();
    peer.scheduled = false;
    if (message.frames == 1 && message.payload.size() > kDecodeAsideBytes) {
      peer.decoding = true;  // scheduled again when it is back (deliver_decodes)
      {
        std::lock_guard<std::mutex> lock(mu);
        decode_queue.emplace_back(routing_id, std::move(message));
      }
      decode_cv.notify_one();
      continue;
    }
    handling_since = now;
    const bool accepted = handle(Envelope{routing_id, message.delimiter}, message);
    // handle() neither adds nor removes peers (vanished ones are forgotten
    // after the turn), so `peer` is still this client.
    if (!accepted) penalize(peer, Clock::now() - now);
    if (!peer.queue.empty()) schedule(routing_id, peer);
  }
}

Server::Impl::Decoded Server::Impl::decode(std::string_view payload) {
  Decoded d;
  try {
    d.request = protocol::decode_request(payload, &d.id);
  } catch (const ProtocolError& e) {
    d.error = e;
  } catch (const InputError& e) {
    d.error = ProtocolError(ErrorCode::kBadRequest, e.what());
  } catch (const std::bad_alloc&) {
    d.error = ProtocolError(ErrorCode::kBadRequest, "the request does not fit in the server's memory");
  }
  return d;
}

bool Server::Impl::handle(const Envelope& from, const Pending& message) {
  if (message.frames != 1) {
    log("malformed message from " + printable_id(from.routing_id) + ": " + std::to_string(message.frames) + " frames");
    send_reply(from, protocol::encode_error(nullptr, ErrorCode::kBadRequest,
                                            "expected exactly one frame holding one MessagePack map, got " +
                                                std::to_string(message.frames) + " frames"));
    return false;
  }
  Decoded decoded = decode(message.payload.to_string_view());
  return answer(from, decoded);
}

bool Server::Impl::answer(const Envelope& from, Decoded& decoded) {
  const json& id = decoded.id;
  try {
    if (decoded.error) throw *decoded.error;
    protocol::Request& req = *decoded.request;
    Peer& peer = peers[from.routing_id];
    peer.last_seen = Clock::now();
    if (draining) throw ProtocolError(ErrorCode::kShuttingDown, "the server is shutting down");
    if (std::find(kMethods.begin(), kMethods.end(), req.method) == kMethods.end()) {
      const std::string hint = closest_match(req.method, kMethods);
      throw ProtocolError(ErrorCode::kUnknownMethod,
                          "unknown method \"" + req.method + "\"" +
                              (hint.empty() ? "" : " (did you mean \"" + hint + "\"?)") +
                              "; methods: " + join(kMethods),
                          "/method");
    }
    dispatch(peer, from, req);
    return true;
  } catch (const ProtocolError& e) {
    if (id.is_null()) log("unroutable request from " + printable_id(from.routing_id) + ": " + e.what());
    send_reply(from, protocol::encode_error(id, e));
  } catch (const InputError& e) {
    send_reply(from, protocol::encode_error(id, ErrorCode::kBadRequest, e.what()));
  } catch (const std::exception& e) {
    log(std::string("internal error: ") + e.what());
    send_reply(from, protocol::encode_error(id, ErrorCode::kInternal, std::string("server error: ") + e.what()));
  }
  return false;
}

void Server::Impl::decode_loop() {
  // Below the socket, step and reset threads: a flood of large requests
  // takes the CPU that honest work leaves.
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kDecoderNice);
  zmq::socket_t push(ctx, zmq::socket_type::push);
  push.set(zmq::sockopt::linger, 0);
  push.connect(wake_endpoint);
  for (;;) {
    std::pair<std::string, Pending> job;
    {
      std::unique_lock<std::mutex> lock(mu);
      decode_cv.wait(lock, [this] { return reset_stop || !decode_queue.empty() || !spent_decodes.empty(); });
      if (reset_stop) return;
      if (decode_queue.empty()) {
        std::deque<Decoded> spent;
        spent.swap(spent_decodes);
        lock.unlock();
        continue;  // `spent` is freed here, off the socket thread
      }
      job = std::move(decode_queue.front());
      decode_queue.pop_front();
    }
    const auto cpu_start = thread_cpu_time();
    Decoded done = decode(job.second.payload.to_string_view());
    done.cost = thread_cpu_time() - cpu_start;
    done.routing_id = std::move(job.first);
    done.delimiter = job.second.delimiter;
    job.second.payload = zmq::message_t();  // freed here, not on the socket thread
    {
      std::lock_guard<std::mutex> lock(mu);
      finished_decodes.push_back(std::move(done));
    }
    (void)push.send(zmq::message_t(), zmq::send_flags::dontwait);
  }
}

void Server::Impl::deliver_decodes() {
  std::deque<Decoded> batch;
  {
    std::lock_guard<std::mutex> lock(mu);
    batch.swap(finished_decodes);
  }
  for (Decoded& d : batch) {
    auto it = peers.find(d.routing_id);
    if (it == peers.end() || !it->second.decoding) continue;  // forgotten meanwhile
    it->second.decoding = false;
    const auto start = Clock::now();
    // The decoder thread's time counts as this request's cost too (a reset
    // accepted here and refused on its reset thread is charged both).
    handling_since = start - std::chrono::duration_cast<Clock::duration>(d.cost);
    const Envelope from{d.routing_id, d.delimiter};
    const bool accepted = answer(from, d);
    Peer& peer = peers[d.routing_id];
    if (!accepted) penalize(peer, d.cost + (Clock::now() - start));
    if (!peer.queue.empty()) schedule(d.routing_id, peer);
  }
  if (!batch.empty()) {
    {
      std::lock_guard<std::mutex> lock(mu);
      for (Decoded& d : batch) spent_decodes.push_back(std::move(d));
    }
    decode_cv.notify_one();
  }
}

void Server::Impl::dispatch(Peer& peer, const Envelope& from, protocol::Request& req) {
  const std::string& m = req.method;
  if (m == "step") {
    do_step(peer, from, req.id, req.params);  // replies when the step finishes
    return;
  }
  if (m == "reset") {
    do_reset(peer, from, req.id, req.params);  // replies when the reset thread is done
    return;
  }
  json result;
  if (m == "hello") {
    result = do_hello(peer, req.params);
  } else if (m == "ping") {
    reading_params([&] {
      Document doc = Document::from_value(req.params, "params");
      doc.root_object().finish();
      return 0;
    });
    result = {{"envs", peer.envs}, {"uptime_s", std::chrono::duration<double>(Clock::now() - started).count()}};
  } else if (m == "make") {
    result = do_make(peer, from.routing_id, req.params);
  } else if (m == "close") {
    result = do_close(peer, from.routing_id, req.params);
  } else if (m == "tasks") {
    result = do_tasks(req.params);
  }
  send_reply(from, protocol::encode_result(req.id, result));
}

Slot& Server::Impl::owned_slot(const Peer& peer, const std::string& routing_id, const json& params) {
  const int64_t env_id = reading_params([&] {
    // Only env_id is read (and bounded) here: the rest of the params is the
    // method's to read, a reset's task as a task of its own.
    json only = json::object();
    if (!params.is_object()) {
      only = params;  // refused below as "expected an object"
    } else if (auto it = params.find("env_id"); it != params.end()) {
      only["env_id"] = *it;
    }
    Document doc = Document::from_value(std::move(only), "params");
    Field f = doc.root_object().required("env_id");
    require_wire_integer(f, "1");
    return f.as_int();
  });
  if (env_id < 0 || env_id >= config.num_envs || !slots[static_cast<size_t>(env_id)].held ||
      slots[static_cast<size_t>(env_id)].owner != routing_id || slots[static_cast<size_t>(env_id)].closing ||
      slots[static_cast<size_t>(env_id)].orphan) {
    throw ProtocolError(ErrorCode::kUnknownEnv,
                        "env " + std::to_string(env_id) +
                            " is not held by this client (make one first; envs of a client that was idle for "
                            "longer than the idle timeout are released)",
                        "/params/env_id");
  }
  return slots[static_cast<size_t>(env_id)];
}

json Server::Impl::do_hello(const Peer& peer, const json& params) {
  reading_params([&] {
    Document doc = Document::from_value(params, "params");
    ObjectReader r = doc.root_object();
    if (auto f = r.optional("client")) f->as_string();  // a name for the client's own logs; not used here
    r.finish();
    return 0;
  });
  json info = static_info;
  const size_t held = held_count();
  info["envs"] = {{"total", config.num_envs}, {"held", held}, {"free", static_cast<size_t>(config.num_envs) - held}};
  info["client_envs"] = peer.envs;
  return info;
}

json Server::Impl::do_make(Peer& peer, const std::string& routing_id, const json& params) {
  reading_params([&] {
    Document doc = Document::from_value(params, "params");
    doc.root_object().finish();
    return 0;
  });
  auto it = std::find_if(slots.begin(), slots.end(), [](const Slot& s) { return !s.held; });
  if (it == slots.end()) {
    std::set<std::string> owners;
    for (const Slot& s : slots) owners.insert(s.owner);
    throw ProtocolError(ErrorCode::kPoolFull, "all " + std::to_string(config.num_envs) + " envs are held (by " +
                                                  std::to_string(owners.size()) +
                                                  " client(s)); close envs, or start the server with more --envs");
  }
  const int env_id = static_cast<int>(it - slots.begin());
  *it = Slot{};
  it->held = true;
  it->owner = routing_id;
  peer.envs.insert(env_id);
  return {{"env_id", env_id}};
}

void Server::Impl::do_reset(Peer& peer, const Envelope& from, uint64_t id, json& params) {
  Slot& slot = owned_slot(peer, from.routing_id, params);
  const int env_id = static_cast<int>(&slot - slots.data());
  struct Args {
    std::optional<json> task;
    std::string task_id;
    bool has_task_id = false;
    uint64_t seed = 0;
    ResetOptions options;
  };
  // The task is not part of the params' document: it is read as a document
  // of its own on a reset thread, so that a task beyond the document limits
  // (a deep id or attrs) is an invalid_task like any other bad task.
  // The task is moved, not copied: this runs on the socket thread.
  json* task_value = nullptr;
  json rest = json::object();
  if (params.is_object()) {
    for (auto it = params.begin(); it != params.end(); ++it) {
      if (it.key() == "task") {
        task_value = &it.value();
      } else {
        rest[it.key()] = it.value();
      }
    }
  }
  Args a = reading_params([&] {
    Args out;
    Document doc = Document::from_value(params.is_object() ? rest : params, "params");
    ObjectReader r = doc.root_object();
    r.allow("env_id");
    if (task_value != nullptr) {
      if (!task_value->is_object()) throw InputError("params: field /task: expected an object (a task)");
      // Counted here, before the task goes to a reset thread, as the task
      // reader counts them: a flood of 20,000-variant resets then costs the
      // socket thread their decode only.
      if (auto v = task_value->find("shape_variants");
          v != task_value->end() && v->is_array() && v->size() > limits::kMaxShapeVariants) {
        throw ProtocolError(ErrorCode::kInvalidTask,
                            "task: field /shape_variants: " + std::to_string(v->size()) +
                                " shape variants; a task has at most " + std::to_string(limits::kMaxShapeVariants) +
                                " (limits::kMaxShapeVariants)",
                            "/params/task/shape_variants");
      }
      out.task = std::move(*task_value);
    }
    if (auto f = r.optional("task_id")) {
      out.task_id = f->as_string();
      out.has_task_id = true;
    }
    if (auto f = r.optional("seed")) out.seed = wire_seed(*f);
    if (auto f = r.optional("exemplars")) {
      std::vector<Field> items = f->as_array();
      for (size_t i = 0; i < items.size(); ++i) {
        ObjectReader er = items[i].as_object();
        Exemplar e;
        Field sol = er.required("solution");
        sol.as_object();
        e.solution = wire_solution(sol.value(), config.env.default_mode, "/params" + sol.pointer());
        e.speedup_eager = er.required("speedup_eager").as_number_in(0.0, limits::kMaxRewardMagnitude);
        if (auto n = er.optional("note")) e.note = n->as_string();
        er.finish();
        out.options.exemplars.push_back(std::move(e));
      }
    }
    r.finish();
    return out;
  });
  if (a.task && a.has_task_id) {
    throw ProtocolError(ErrorCode::kBadRequest, "give either \"task\" or \"task_id\", not both", "/params/task_id");
  }
  if (!a.task && !a.has_task_id) {
    throw ProtocolError(ErrorCode::kBadRequest, "reset needs \"task\" (a task object) or \"task_id\"", "/params");
  }
  if (slot.busy) {
    throw ProtocolError(
        ErrorCode::kEnvBusy,
        "env " + std::to_string(env_id) + " has a step or reset in flight; wait for its reply before reset",
        "/params/env_id");
  }
  if (peer.inflight >= config.max_inflight_per_client) {
    throw ProtocolError(ErrorCode::kTooManyRequests, "this client has " + std::to_string(peer.inflight) +
                                                         " steps and resets in flight, the server's limit per "
                                                         "client; wait for replies first");
  }
  ResetJob job;
  job.env_id = env_id;
  job.request_id = id;
  job.reply_to = from;
  job.task = std::move(a.task);
  job.task_id = std::move(a.task_id);
  job.seed = a.seed;
  job.options = std::move(a.options);
  // Until the reply, the env is busy: steps and resets get env_busy.
  slot.busy = true;
  slot.resetting = true;
  slot.request_id = id;
  slot.reply_to = from;
  slot.accept_cost = Clock::now() - handling_since;
  ++peer.inflight;
  {
    std::lock_guard<std::mutex> lock(mu);
    reset_queue.push_back(std::move(job));
  }
  reset_cv.notify_one();
}

void Server::Impl::do_step(Peer& peer, const Envelope& from, uint64_t id, const json& params) {
  Slot& slot = owned_slot(peer, from.routing_id, params);
  const int env_id = static_cast<int>(&slot - slots.data());
  struct Args {
    std::optional<json> tool_call;
    std::optional<json> action;
    std::string action_pointer;
  };
  Args a = reading_params([&] {
    Args out;
    Document doc = Document::from_value(params, "params");
    ObjectReader r = doc.root_object();
    r.allow("env_id");
    // Any value: what the policy produced is judged by the environment, and a
    // malformed call is an observation for the policy, not an error.
    if (r.has("tool_call")) out.tool_call = r.required("tool_call").value();
    if (auto f = r.optional("action")) {
      f->as_object();
      out.action = f->value();
    }
    r.finish();
    return out;
  });
  if (a.tool_call && a.action) {
    throw ProtocolError(ErrorCode::kBadRequest, "give either \"tool_call\" or \"action\", not both", "/params/action");
  }
  if (!a.tool_call && !a.action) {
    throw ProtocolError(ErrorCode::kBadRequest, "step needs \"tool_call\" (an OpenAI-style tool call) or \"action\"",
                        "/params");
  }
  const std::string env = "env " + std::to_string(env_id);
  if (slot.busy) {
    throw ProtocolError(ErrorCode::kEnvBusy,
                        env + " has a " + (slot.resetting ? "reset" : "step") + " in flight; wait for its reply",
                        "/params/env_id");
  }
  if (!slot.has_episode) {
    throw ProtocolError(ErrorCode::kNoEpisode, env + " has no episode; reset it first", "/params/env_id");
  }
  if (slot.finished) {
    throw ProtocolError(ErrorCode::kEpisodeFinished, "the episode on " + env + " has finished; reset it",
                        "/params/env_id");
  }
  if (peer.inflight >= config.max_inflight_per_client) {
    throw ProtocolError(ErrorCode::kTooManyRequests, "this client has " + std::to_string(peer.inflight) +
                                                         " steps and resets in flight, the server's limit per "
                                                         "client; wait for replies first");
  }
  if (a.action) {
    json v = *a.action;
    // Typed actions come from the trainer's code, so mistakes in them are
    // errors for the trainer (unlike a policy's tool calls).
    Action action;
    try {
      if (v.contains("solution") && v["solution"].is_object()) {
        if (v["solution"].contains("source_file")) {
          throw ProtocolError(ErrorCode::kInvalidAction,
                              "field /params/action/solution/source_file: not accepted over the wire; send the code "
                              "as \"source\"",
                              "/params/action/solution/source_file");
        }
        if (!v["solution"].contains("mode")) v["solution"]["mode"] = solution_mode_name(config.env.default_mode);
      }
      action = parse_action(Document::from_value(v, "action"));
    } catch (const InputError& e) {
      throw protocol::from_input_error(e, ErrorCode::kInvalidAction, "action", "/params/action");
    }
    pool->send({action}, {env_id});
  } else {
    pool->send_tool_calls({*a.tool_call}, {env_id});
  }
  slot.busy = true;
  slot.request_id = id;
  slot.reply_to = from;
  slot.accept_cost = Clock::now() - handling_since;
  ++peer.inflight;
  {
    std::lock_guard<std::mutex> lock(mu);
    ++outstanding;
  }
  cv.notify_one();
}

json Server::Impl::do_close(Peer& peer, const std::string& routing_id, const json& params) {
  Slot& slot = owned_slot(peer, routing_id, params);
  const int env_id = static_cast<int>(&slot - slots.data());
  reading_params([&] {
    Document doc = Document::from_value(params, "params");
    ObjectReader r = doc.root_object();
    r.allow("env_id");
    r.finish();
    return 0;
  });
  if (slot.busy) {
    // The step's own reply still goes out; the env is freed after it.
    slot.closing = true;
  } else {
    release(env_id);
  }
  return {{"env_id", env_id}, {"closed", true}};
}

json Server::Impl::do_tasks(const json& params) const {
  size_t offset = 0;
  size_t limit = SIZE_MAX;
  reading_params([&] {
    Document doc = Document::from_value(params, "params");
    ObjectReader r = doc.root_object();
    if (auto f = r.optional("offset")) {
      require_wire_integer(*f, "0");
      offset = static_cast<size_t>(f->as_int_in(0, INT64_MAX));
    }
    if (auto f = r.optional("limit")) {
      require_wire_integer(*f, "100");
      limit = static_cast<size_t>(f->as_int_in(0, INT64_MAX));
    }
    r.finish();
    return 0;
  });
  json ids = json::array();
  for (size_t i = offset; i < config.tasks.size() && static_cast<size_t>(ids.size()) < limit; ++i) {
    ids.push_back(config.tasks[i].id);
  }
  return {{"count", config.tasks.size()},
          {"offset", offset},
          {"task_ids", std::move(ids)},
          {"source", config.tasks_source}};
}

void Server::Impl::send_reply(const Envelope& to, const std::string& payload) {
  try {
    zmq::message_t id(to.routing_id.data(), to.routing_id.size());
    if (!router.send(id, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      log("reply to " + printable_id(to.routing_id) + " dropped: its queue is full (it does not read its replies)");
      return;
    }
    if (to.delimiter) (void)router.send(zmq::message_t(), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    (void)router.send(zmq::message_t(payload.data(), payload.size()), zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) {
      // Handled between requests: the caller may still hold the peer.
      gone.push_back(to.routing_id);
    } else {
      log("reply to " + printable_id(to.routing_id) + " failed: " + e.what());
    }
  }
}

void Server::Impl::deliver_completions() {
  std::deque<EnvStep> batch;
  std::deque<ResetDone> resets;
  {
    std::lock_guard<std::mutex> lock(mu);
    batch.swap(finished_steps);
    resets.swap(finished_resets);
  }
  for (ResetDone& done : resets) {
    Slot& slot = slots[static_cast<size_t>(done.env_id)];
    if (!slot.busy || !slot.resetting) {
      log("internal: a reset result for env " + std::to_string(done.env_id) + " that has no reset in flight; dropped");
      continue;
    }
    slot.busy = false;
    slot.resetting = false;
    if (done.ok) {
      slot.has_episode = true;
      slot.finished = false;
    }
    const bool release_after = slot.orphan || slot.closing;
    if (!slot.orphan) {
      auto peer = peers.find(slot.owner);
      if (peer != peers.end()) {
        --peer->second.inflight;
        peer->second.last_seen = Clock::now();
        if (!done.ok) penalize(peer->second, slot.accept_cost + done.cost);
      }
      send_reply(slot.reply_to, done.payload);
    }
    if (release_after) release(done.env_id);
  }
  for (EnvStep& step : batch) {
    if (step.env_id < 0 || step.env_id >= config.num_envs || !slots[static_cast<size_t>(step.env_id)].busy ||
        slots[static_cast<size_t>(step.env_id)].resetting) {
      log("internal: a result for env " + std::to_string(step.env_id) + " that has no step in flight; dropped");
      continue;
    }
    Slot& slot = slots[static_cast<size_t>(step.env_id)];
    slot.busy = false;
    slot.finished = step.result.terminated || step.result.truncated;
    const bool release_after = slot.orphan || slot.closing;
    if (!slot.orphan) {
      auto peer = peers.find(slot.owner);
      if (peer != peers.end()) {
        --peer->second.inflight;
        peer->second.last_seen = Clock::now();
        // An invalid tool call is the policy's mistake, not the client's: it
        // costs the episode a turn and is not penalized here. It costs the
        // socket thread no more than a valid step's acceptance, and the turn
        // budget and the in-flight limit bound how many a client can send.
      }
      std::string payload;
      try {
        payload = protocol::encode_result(slot.request_id, to_json(step.result));
      } catch (const std::exception& e) {
        log(std::string("internal: cannot encode a step result: ") + e.what());
        payload = protocol::encode_error(slot.request_id, ErrorCode::kInternal,
                                         std::string("server error: cannot encode the step result: ") + e.what());
      }
      send_reply(slot.reply_to, payload);
    }
    if (release_after) release(step.env_id);
  }
}

void Server::Impl::release(int env_id) {
  Slot& slot = slots[static_cast<size_t>(env_id)];
  if (auto peer = peers.find(slot.owner); peer != peers.end()) peer->second.envs.erase(env_id);
  slot = Slot{};
}

void Server::Impl::forget_peer(const std::string& routing_id, const std::string& why) {
  auto it = peers.find(routing_id);
  if (it == peers.end()) return;
  const std::set<int> envs = it->second.envs;
  peers.erase(it);
  std::string list;
  for (int env_id : envs) {
    Slot& slot = slots[static_cast<size_t>(env_id)];
    list += (list.empty() ? "" : ", ") + std::to_string(env_id);
    if (slot.busy) {
      slot.orphan = true;  // freed when its step returns; the reply is dropped
    } else {
      slot = Slot{};
    }
  }
  if (!envs.empty()) log("client " + printable_id(routing_id) + " " + why + "; released env(s) " + list);
}

void Server::Impl::housekeeping() {
  last_housekeeping = Clock::now();
  std::vector<std::string> idle;
  std::vector<std::string> empty;
  for (const auto& [id, peer] : peers) {
    // A peer with requests waiting or a penalty to serve is kept.
    if (peer.inflight > 0 || !peer.queue.empty() || peer.decoding || peer.not_before > last_housekeeping) continue;
    if (peer.envs.empty()) {
      empty.push_back(id);  // nothing to keep for it
    } else if (config.idle_timeout_s > 0 &&
               std::chrono::duration<double>(last_housekeeping - peer.last_seen).count() > config.idle_timeout_s) {
      idle.push_back(id);
    }
  }
  for (const auto& id : empty) peers.erase(id);
  std::ostringstream limit;
  limit << config.idle_timeout_s;
  for (const auto& id : idle) forget_peer(id, "was idle for more than " + limit.str() + " s");
}

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
