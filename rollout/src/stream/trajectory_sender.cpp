#include "kforge/rollout/stream/trajectory_sender.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <string>

#include "kforge/core/endpoint.h"
#include "kforge/core/msgpack.h"
#include "kforge/core/trajectory.h"
#include "kforge/rollout/stream/stream_protocol.h"
#include "kforge/rollout/stream/trajectory_spool.h"
#include "trajectory_sender_impl.h"

namespace kforge::rollout {

using std::chrono::milliseconds;

TrajectorySender::Impl::Impl(SenderConfig c)
    : config(std::move(c)),
      log(config.log ? config.log
                     : std::function<void(const std::string&)>([w = config.worker_id](const std::string& m) {
                         std::fprintf(stderr, "kforge stream sender [%s]: %s\n", w.c_str(), m.c_str());
                       })),
      spool(SpoolOptions{config.spool_dir, config.worker_id, config.max_spool_bytes, 0, config.fsync}) {
  for (const auto& [seq, rec] : spool.pending()) outbox.emplace(seq, Out{nullptr, Clock::now(), {}});
  counters.unacked = outbox.size();
  wake_fd.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_fd) throw SystemError("trajectory sender: eventfd failed");
  if (!outbox.empty()) {
    log(std::to_string(outbox.size()) + " trajectories from an earlier run are waiting in " +
        config.spool_dir.string() + "; they will be sent again");
  }
  if (!is_local_endpoint(config.endpoint) && !config.curve.enabled()) {
    log("warning: " + config.endpoint +
        " is not on this host and CurveZMQ is off: trajectories travel in clear text and anyone who can reach "
        "the receiver can inject them (set the receiver's public key, see trainer_bridge/STREAM.md)");
  }
  // The first socket is made here so that a malformed endpoint is the
  // caller's error, not a log line.
  open_socket();
  state = State::kHelloSent;
  hello_deadline = Clock::now() + config.heartbeat_timeout;
  send_hello();
  io = std::thread([this] { run(); });
}

TrajectorySender::Impl::~Impl() {
  stopping = true;
  space_cv.notify_all();
  wake();
  if (io.joinable()) io.join();
}

// One wake-up per pass of the I/O thread, not one per write(): under load
// the thread is awake anyway and takes every new trajectory in its pass.
void TrajectorySender::Impl::wake() const {
  if (wake_pending.exchange(true)) return;
  const uint64_t one = 1;
  (void)!::write(wake_fd.get(), &one, sizeof one);
}

uint64_t TrajectorySender::Impl::write_encoded(std::string_view id, std::string_view payload, std::string* owned) {
  if (id.empty() || id.size() > stream::kMaxTrajectoryIdBytes || !msgpack::valid_utf8(id)) {
    throw InputError("trajectory stream: a trajectory's \"id\" must be 1.." +
                     std::to_string(stream::kMaxTrajectoryIdBytes) + " bytes of UTF-8");
  }
  if (payload.empty() || !((payload[0] & 0xf0) == 0x80 || static_cast<unsigned char>(payload[0]) == 0xde ||
                           static_cast<unsigned char>(payload[0]) == 0xdf)) {
    throw InputError("trajectory stream: trajectory \"" + std::string(id) + "\" is not a MessagePack map");
  }
  if (std::string why = msgpack::check(payload, stream::kMaxDataDepth); !why.empty()) {
    throw InputError("trajectory stream: trajectory \"" + std::string(id) +
                     "\" is not well-formed MessagePack: " + why);
  }
  const uint64_t frame = payload.size() + stream::traj_overhead(id.size());
  if (frame > config.max_message_bytes) {
    throw InputError("trajectory stream: trajectory \"" + std::string(id) + "\" is " + std::to_string(frame) +
                     " bytes encoded, above max_message_bytes (" + std::to_string(config.max_message_bytes) +
                     "); raise it on both ends or record less per turn");
  }
  if (TrajectorySpool::record_bytes(id.size(), payload.size()) > config.max_spool_bytes / 2) {
    throw InputError("trajectory stream: trajectory \"" + std::string(id) + "\" (" + std::to_string(payload.size()) +
                     " bytes) cannot fit a spool of max_spool_bytes " + std::to_string(config.max_spool_bytes) +
                     "; raise it");
  }
  std::unique_lock<std::mutex> lock(mu);
  if (!spool.fits(id.size(), payload.size())) {
    const bool room = space_cv.wait_for(lock, config.write_timeout,
                                        [&] { return stopping.load() || spool.fits(id.size(), payload.size()); });
    if (!room || stopping) {
      throw SystemError("trajectory stream: the spool " + config.spool_dir.string() + " is full (" +
                        std::to_string(spool.disk_bytes()) + " of " + std::to_string(config.max_spool_bytes) +
                        " bytes) and nothing was acknowledged by " + config.endpoint + " for " +
                        std::to_string(config.write_timeout.count()) +
                        " ms; check that the trainer's receiver runs and acknowledges, or raise max_spool_bytes");
    }
  }
  const uint64_t seq = spool.append(id, payload);
  Out out{nullptr, Clock::now(), {}};
  if (outbox_bytes + payload.size() <= config.max_outbox_bytes) {
    out.payload =
        owned ? std::make_shared<const std::string>(std::move(*owned)) : std::make_shared<const std::string>(payload);
    outbox_bytes += payload.size();
  }
  outbox.emplace(seq, std::move(out));
  ++counters.written;
  counters.unacked = outbox.size();
  lock.unlock();
  wake();
  return seq;
}

bool TrajectorySender::Impl::flush(milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu);
  return acked_cv.wait_for(lock, timeout, [&] { return outbox.empty(); });
}

SenderStats TrajectorySender::Impl::stats() const {
  std::lock_guard<std::mutex> lock(mu);
  SenderStats s = counters;
  s.spool_bytes = spool.disk_bytes();
  s.next_seq = spool.next_seq();
  s.rejected = spool.rejected_count();
  s.ack_latency_p50_ms = ack_latency.quantile(0.50);
  s.ack_latency_p99_ms = ack_latency.quantile(0.99);
  s.ack_latency_max_ms = ack_latency.max();
  s.delivery_latency_p50_ms = delivery_latency.quantile(0.50);
  s.delivery_latency_p99_ms = delivery_latency.quantile(0.99);
  return s;
}

namespace {

SenderConfig checked(SenderConfig c) {
  if (std::string why = stream::check_worker_id(c.worker_id); !why.empty()) {
    throw InputError("trajectory sender: worker_id \"" + c.worker_id + "\": " + why);
  }
  if (c.endpoint.empty()) throw InputError("trajectory sender: endpoint is empty (e.g. tcp://127.0.0.1:5557)");
  if (c.spool_dir.empty()) throw InputError("trajectory sender: spool_dir is empty; give each worker its own");
  if (c.heartbeat_interval < milliseconds(10) || c.heartbeat_interval > std::chrono::hours(1)) {
    throw InputError("trajectory sender: heartbeat_interval must be 10 ms .. 1 h, got " +
                     std::to_string(c.heartbeat_interval.count()) + " ms");
  }
  if (c.heartbeat_timeout < 2 * c.heartbeat_interval) {
    throw InputError("trajectory sender: heartbeat_timeout (" + std::to_string(c.heartbeat_timeout.count()) +
                     " ms) must be at least twice heartbeat_interval (" + std::to_string(c.heartbeat_interval.count()) +
                     " ms)");
  }
  if (c.max_message_bytes < 1024) throw InputError("trajectory sender: max_message_bytes must be at least 1024");
  if (c.max_reconnect_delay < milliseconds(100)) {
    throw InputError("trajectory sender: max_reconnect_delay must be at least 100 ms");
  }
  if (c.write_timeout < milliseconds(0)) throw InputError("trajectory sender: write_timeout must not be negative");
  if (c.curve.enabled() && !is_z85_key(c.curve.server_public_key)) {
    throw InputError("trajectory sender: curve.server_public_key must be 40 characters of Z85 text");
  }
  return c;
}

}  // namespace

TrajectorySender::TrajectorySender(SenderConfig config) : impl_(std::make_unique<Impl>(checked(std::move(config)))) {}

TrajectorySender::~TrajectorySender() = default;

void TrajectorySender::write(const Trajectory& trajectory) { write_value(to_json(trajectory)); }

void TrajectorySender::write_value(const json& trajectory) {
  if (!trajectory.is_object()) throw InputError("trajectory stream: a trajectory must be a JSON object");
  const auto it = trajectory.find("id");
  if (it == trajectory.end() || !it->is_string()) {
    throw InputError("trajectory stream: the trajectory has no string \"id\"; every trajectory needs a unique id");
  }
  std::string payload = msgpack::encode(trajectory);
  impl_->write_encoded(it->get_ref<const std::string&>(), payload, &payload);
}

uint64_t TrajectorySender::write_encoded(std::string_view id, std::string_view msgpack_map) {
  return impl_->write_encoded(id, msgpack_map);
}

bool TrajectorySender::flush(std::chrono::milliseconds timeout) { return impl_->flush(timeout); }

SenderStats TrajectorySender::stats() const { return impl_->stats(); }

const std::string& TrajectorySender::worker_id() const { return impl_->config.worker_id; }

const std::string& TrajectorySender::instance() const { return impl_->spool.instance(); }

}  // namespace kforge::rollout
