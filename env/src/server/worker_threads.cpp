// The env server's helper threads (server_impl.h): the completion thread, which waits for
// finished steps in EnvPool::recv; the reset threads, which run resets (run_reset in
// episode_methods.cpp); and the decoder thread, which decodes large requests. Each hands its
// results to the socket thread under `mu` and wakes it through the inproc `wake` socket.
#include <sys/resource.h>
#include <unistd.h>

#include <ctime>

#include "server_impl.h"

namespace kforge::env {
namespace {

namespace protocol = kforge::rpc;
using protocol::ErrorCode;
using protocol::ProtocolError;

// The decoder thread's CPU priority (nice): below the socket, step and reset
// threads, so that a flood of large requests takes the CPU that honest work
// leaves.
constexpr int kDecoderNice = 10;

// This thread's CPU time: what a reset or a decode cost the server, whatever
// else the machine was doing meanwhile.
std::chrono::nanoseconds thread_cpu_time() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

}  // namespace

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

void Server::Impl::decode_loop() {
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

}  // namespace kforge::env
