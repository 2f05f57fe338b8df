// The env server's methods that answer at once (trainer_bridge/PROTOCOL.md, "Methods"): hello,
// ping, make, close and tasks, and the dispatch of every method; reset and step are in
// episode_methods.cpp. All run on the socket thread.
#include <chrono>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

#include "server_impl.h"
#include "wire_params.h"

namespace kforge::env {
namespace {

namespace protocol = kforge::rpc;
using protocol::ErrorCode;
using protocol::ProtocolError;
using server::Clock;
using server::reading_params;
using server::require_wire_integer;

}  // namespace

void Server::Impl::dispatch(const Envelope& from, protocol::Request& req) {
  const std::string& m = req.method;
  if (m == "step") {
    do_step(from, req.id, req.params);  // replies when the step finishes
    return;
  }
  if (m == "reset") {
    do_reset(from, req.id, req.params);  // replies when the reset thread is done
    return;
  }
  json result;
  if (m == "hello") {
    result = do_hello(from.routing_id, req.params);
  } else if (m == "ping") {
    reading_params([&] {
      Document doc = Document::from_value(req.params, "params");
      doc.root_object().finish();
      return 0;
    });
    result = {{"envs", slots.envs_of(from.routing_id)},
              {"uptime_s", std::chrono::duration<double>(Clock::now() - started).count()}};
  } else if (m == "make") {
    result = do_make(from.routing_id, req.params);
  } else if (m == "close") {
    result = do_close(from.routing_id, req.params);
  } else if (m == "tasks") {
    result = do_tasks(req.params);
  }
  send_reply(from, protocol::encode_result(req.id, result));
}

Server::Impl::Slot& Server::Impl::owned_slot(const std::string& routing_id, const json& params) {
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
  Slot* slot = slots.owned(env_id, routing_id);
  if (slot == nullptr) {
    throw ProtocolError(ErrorCode::kUnknownEnv,
                        "env " + std::to_string(env_id) +
                            " is not held by this client (make one first; a client's envs are released when it was "
                            "idle past --idle-timeout, or quiet past --reclaim-after while another client needed one)",
                        "/params/env_id");
  }
  return *slot;
}

json Server::Impl::do_hello(const std::string& routing_id, const json& params) {
  reading_params([&] {
    Document doc = Document::from_value(params, "params");
    ObjectReader r = doc.root_object();
    if (auto f = r.optional("client")) f->as_string();  // a name for the client's own logs; not used here
    r.finish();
    return 0;
  });
  json info = static_info;
  const size_t held = slots.held_count();
  info["envs"] = {{"total", config.num_envs}, {"held", held}, {"free", static_cast<size_t>(config.num_envs) - held}};
  info["client_envs"] = slots.envs_of(routing_id);
  return info;
}

// Every env is held: the envs of the client quiet longest (nothing in flight
// or waiting, quiet for reclaim_after_s at least) are released, as the idle
// timeout would release them. True when some were.
bool Server::Impl::reclaim_quietest(const std::string& for_client) {
  if (!(config.reclaim_after_s > 0)) return false;
  const Clock::time_point now = Clock::now();
  std::optional<std::string> quietest;
  for (const std::string& id : clients.quiet_clients(now)) {
    if (id == for_client || slots.envs_of(id).empty()) continue;
    if (std::chrono::duration<double>(now - clients.last_seen(id)).count() < config.reclaim_after_s) continue;
    if (!quietest || clients.last_seen(id) < clients.last_seen(*quietest)) quietest = id;
  }
  if (!quietest) return false;
  std::ostringstream quiet;
  quiet << std::chrono::duration<double>(now - clients.last_seen(*quietest)).count();
  forget_peer(*quietest, "was quiet for " + quiet.str() + " s while another client needed an env (reclaimed)");
  return true;
}

json Server::Impl::do_make(const std::string& routing_id, const json& params) {
  reading_params([&] {
    Document doc = Document::from_value(params, "params");
    doc.root_object().finish();
    return 0;
  });
  std::optional<int> env_id = slots.make(routing_id);
  if (!env_id && reclaim_quietest(routing_id)) env_id = slots.make(routing_id);
  if (!env_id) {
    throw ProtocolError(ErrorCode::kPoolFull, "all " + std::to_string(config.num_envs) + " envs are held (by " +
                                                  std::to_string(slots.owner_count()) +
                                                  " client(s)); close envs, or start the server with more --envs");
  }
  return {{"env_id", *env_id}};
}

json Server::Impl::do_close(const std::string& routing_id, const json& params) {
  Slot& slot = owned_slot(routing_id, params);
  const int env_id = slots.id_of(slot);
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
    slots.release(env_id);
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

}  // namespace kforge::env
