#include "curve_socket.h"

#include <zmq.h>

#include "kforge/core/error.h"

namespace kforge::rollout::internal {

void apply_curve_client(zmq::socket_t& socket, const CurveClientOptions& options) {
  if (!options.enabled()) return;
  CurveKeyPair own;
  if (options.secret_key.empty()) {
    own = generate_curve_keypair();
  } else {
    own.secret_key = options.secret_key;
    own.public_key = curve_public_key(options.secret_key);
  }
  socket.set(zmq::sockopt::curve_serverkey, options.server_public_key);
  socket.set(zmq::sockopt::curve_publickey, own.public_key);
  socket.set(zmq::sockopt::curve_secretkey, own.secret_key);
}

void apply_curve_server(zmq::socket_t& socket, const CurveServerOptions& options) {
  if (!options.enabled()) return;
  socket.set(zmq::sockopt::curve_server, 1);
  socket.set(zmq::sockopt::curve_secretkey, options.secret_key);
  // Every connection goes through ZAP when keys are listed; the domain names
  // this receiver's requests in the handler.
  if (!options.authorized_keys.empty()) socket.set(zmq::sockopt::zap_domain, "kforge-stream");
}

ZapHandler::ZapHandler(zmq::context_t& context, const std::vector<std::string>& allowed_z85)
    : socket_(context, zmq::socket_type::rep) {
  for (const auto& key : allowed_z85) {
    uint8_t raw[32];
    if (!zmq_z85_decode(raw, key.c_str())) throw InputError("curve: \"" + key + "\" is not a Z85 key");
    allowed_.insert(std::string(reinterpret_cast<const char*>(raw), 32));
  }
  socket_.set(zmq::sockopt::linger, 0);
  try {
    socket_.bind("inproc://zeromq.zap.01");
  } catch (const zmq::error_t& e) {
    throw SystemError(std::string("curve: cannot start the ZAP handler: ") + e.what());
  }
  thread_ = std::thread([this] { run(); });
}

ZapHandler::~ZapHandler() {
  stop_ = true;
  thread_.join();
}

void ZapHandler::run() {
  // Request frames: version, request id, domain, address, identity,
  // mechanism, credentials... Reply: version, request id, status code,
  // status text, user id, metadata.
  while (!stop_) {
    zmq::pollitem_t item = {socket_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) <= 0) continue;
    std::vector<zmq::message_t> frames;
    for (;;) {
      zmq::message_t frame;
      if (!socket_.recv(frame, zmq::recv_flags::none)) break;
      const bool more = frame.more();
      frames.push_back(std::move(frame));
      if (!more) break;
    }
    if (frames.size() < 2) continue;
    const std::string version = frames[0].to_string();
    const std::string request_id = frames[1].to_string();
    bool ok = false;
    if (version == "1.0" && frames.size() >= 7 && frames[5].to_string() == "CURVE" && frames[6].size() == 32) {
      ok = allowed_.count(frames[6].to_string()) > 0;
    }
    if (!ok) ++refused_;
    const std::vector<std::string> reply = {
        "1.0", request_id, ok ? "200" : "400", ok ? "OK" : "client key not authorized", "", ""};
    for (size_t i = 0; i < reply.size(); ++i) {
      socket_.send(zmq::buffer(reply[i]), i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }
}

}  // namespace kforge::rollout::internal
