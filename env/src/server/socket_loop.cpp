// The env server's socket thread (server_impl.h): run() and its loop. It reads messages into
// their clients' queues, takes requests in the clients' turns (FairQueue, fair_queue.h), hands
// large ones to the decoder thread, answers the rest, sends the replies of finished steps and
// resets, and forgets clients that went away or fell idle. It never waits on a step or a reset.
#include <algorithm>
#include <cerrno>
#include <sstream>

#include "server_impl.h"

namespace kforge::env {
namespace {

namespace protocol = kforge::rpc;
using protocol::ErrorCode;
using protocol::ProtocolError;
using server::Clock;
using server::kMethods;

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
// Requests larger than this are decoded on the decoder thread, at a lower
// CPU priority, so that no one request holds the socket thread: a
// 20,000-variant reset takes ~10 ms to decode, and an honest step that
// arrived meanwhile waited for it (bench/server --flood 0). The client's
// later requests wait in its queue, so its requests keep their order.
constexpr size_t kDecodeAsideBytes = size_t{64} << 10;
// Threads that run resets. A reset parses and type-checks the task (every
// shape variant), suggests a task id for an unknown one and builds the
// prompt: work that grows with the request, so it never runs on the socket
// thread (bench/server --flood resets: a flood of heavy resets does not slow
// honest steps).
constexpr int kResetThreads = 4;

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

}  // namespace

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
      log("stopping: " + std::to_string(slots.busy_count()) + " step(s) in flight");
    }
    if (draining && (slots.busy_count() == 0 || Clock::now() >= drain_deadline)) break;

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
  if (clients.has_ready()) {
    timeout = std::chrono::milliseconds(0);
  } else if (const auto penalty_end = clients.first_penalty_end()) {
    const auto until = std::chrono::ceil<std::chrono::milliseconds>(*penalty_end - Clock::now());
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
  // A client's queue is bounded (FairQueueLimits): beyond it a request is
  // refused unread, at the cost of a copy (its id is peeked at so that the
  // client can tell which request it was).
  const size_t bytes = message.payload.size();
  if (!clients.push(routing_id, std::move(message), bytes, Clock::now())) {
    // Refused, push() left `message` as it was.
    Envelope to{routing_id, message.delimiter};
    const std::optional<uint64_t> id = protocol::peek_request_id(message.payload.to_string_view());
    send_reply(to, protocol::encode_error(id ? json(*id) : json(nullptr), ErrorCode::kTooManyRequests,
                                          "request dropped unread: " + std::to_string(clients.queued(routing_id)) +
                                              " requests (" + std::to_string(clients.queued_bytes(routing_id)) +
                                              " bytes) from this client are already waiting; wait for their "
                                              "replies before sending more"));
  }
  return true;
}

void Server::Impl::handle_queued() {
  const auto turn_end = Clock::now() + kTurn;
  for (int i = 0; i < kRequestsPerTurn; ++i) {
    const auto now = Clock::now();
    if (now >= turn_end) return;
    std::optional<server::FairQueue<Pending>::Turn> turn = clients.next(now);
    if (!turn) return;
    Pending& message = turn->request;
    if (message.frames == 1 && message.payload.size() > kDecodeAsideBytes) {
      clients.set_aside(turn->client);  // its turn ends when the request is back (deliver_decodes)
      {
        std::lock_guard<std::mutex> lock(mu);
        decode_queue.emplace_back(std::move(turn->client), std::move(message));
      }
      decode_cv.notify_one();
      continue;
    }
    handling_since = now;
    const bool accepted = handle(Envelope{turn->client, message.delimiter}, message);
    // handle() forgets no client (vanished ones are forgotten after the
    // turn), so the turn is still this client's to end.
    const auto end = Clock::now();
    clients.end_turn(turn->client, !accepted, end - now, end);
  }
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
    clients.seen(from.routing_id, Clock::now());
    if (draining) throw ProtocolError(ErrorCode::kShuttingDown, "the server is shutting down");
    if (std::find(kMethods.begin(), kMethods.end(), req.method) == kMethods.end()) {
      const std::string hint = closest_match(req.method, kMethods);
      throw ProtocolError(ErrorCode::kUnknownMethod,
                          "unknown method \"" + req.method + "\"" +
                              (hint.empty() ? "" : " (did you mean \"" + hint + "\"?)") +
                              "; methods: " + join(kMethods),
                          "/method");
    }
    dispatch(from, req);
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

void Server::Impl::deliver_decodes() {
  std::deque<Decoded> batch;
  {
    std::lock_guard<std::mutex> lock(mu);
    batch.swap(finished_decodes);
  }
  for (Decoded& d : batch) {
    if (!clients.take_back(d.routing_id)) continue;  // forgotten meanwhile
    const auto start = Clock::now();
    // The decoder thread's time counts as this request's cost too (a reset
    // accepted here and refused on its reset thread is charged both).
    handling_since = start - std::chrono::duration_cast<Clock::duration>(d.cost);
    const Envelope from{d.routing_id, d.delimiter};
    const bool accepted = answer(from, d);
    const auto end = Clock::now();
    clients.end_turn(d.routing_id, !accepted, d.cost + (end - start), end);
  }
  if (!batch.empty()) {
    {
      std::lock_guard<std::mutex> lock(mu);
      for (Decoded& d : batch) spent_decodes.push_back(std::move(d));
    }
    decode_cv.notify_one();
  }
}

void Server::Impl::wake_up() {
  zmq::socket_t push(ctx, zmq::socket_type::push);
  push.set(zmq::sockopt::linger, 0);
  push.connect(wake_endpoint);
  (void)push.send(zmq::message_t(), zmq::send_flags::dontwait);
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
    Slot& slot = slots[done.env_id];
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
      if (clients.contains(slot.owner)) {
        const auto now = Clock::now();
        clients.finished(slot.owner, now);
        if (!done.ok) clients.penalize(slot.owner, slot.accept_cost + done.cost, now);
      }
      send_reply(slot.reply_to, done.payload);
    }
    if (release_after) slots.release(done.env_id);
  }
  for (EnvStep& step : batch) {
    if (!slots.contains(step.env_id) || !slots[step.env_id].busy || slots[step.env_id].resetting) {
      log("internal: a result for env " + std::to_string(step.env_id) + " that has no step in flight; dropped");
      continue;
    }
    Slot& slot = slots[step.env_id];
    slot.busy = false;
    slot.finished = step.result.terminated || step.result.truncated;
    const bool release_after = slot.orphan || slot.closing;
    if (!slot.orphan) {
      if (clients.contains(slot.owner)) {
        clients.finished(slot.owner, Clock::now());
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
    if (release_after) slots.release(step.env_id);
  }
}

void Server::Impl::forget_peer(const std::string& routing_id, const std::string& why) {
  if (!clients.contains(routing_id)) return;
  clients.forget(routing_id);
  const std::set<int> envs = slots.forget_owner(routing_id);
  std::string list;
  for (int env_id : envs) list += (list.empty() ? "" : ", ") + std::to_string(env_id);
  if (!envs.empty()) log("client " + printable_id(routing_id) + " " + why + "; released env(s) " + list);
}

void Server::Impl::housekeeping() {
  last_housekeeping = Clock::now();
  std::vector<std::string> idle;
  std::vector<std::string> empty;
  // A client with requests waiting or in flight, or a penalty to serve, is
  // kept.
  for (const std::string& id : clients.quiet_clients(last_housekeeping)) {
    if (slots.envs_of(id).empty()) {
      empty.push_back(id);  // nothing to keep for it
    } else if (config.idle_timeout_s > 0 &&
               std::chrono::duration<double>(last_housekeeping - clients.last_seen(id)).count() >
                   config.idle_timeout_s) {
      idle.push_back(id);
    }
  }
  for (const auto& id : empty) clients.forget(id);
  std::ostringstream limit;
  limit << config.idle_timeout_s;
  for (const auto& id : idle) forget_peer(id, "was idle for more than " + limit.str() + " s");
}

}  // namespace kforge::env
