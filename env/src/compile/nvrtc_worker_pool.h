// Long-lived kforge-nvrtc worker processes for the NVRTC compiler
// (nvrtc_worker_protocol.h): one compile at a time per worker, as many
// workers as compiles run at once (the compile service's per-mode limit),
// idle ones kept warm. A compile that runs past its time limit gets its
// worker killed (SIGKILL, reaped) and reported as timed out; one that dies
// (a failed allocation under the memory limit aborts NVRTC) is reported as
// out of memory or crashed; a worker that ran out of memory is retired so
// its heap goes with it. The next compile starts a fresh worker.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace kforge::env {

// Where kforge-nvrtc is: $KFORGE_NVRTC_WORKER (the file itself), else
// kforge-nvrtc in $KFORGE_TOOLS_DIR, next to the running executable, or in
// the build tree's bin/. Throws SystemError listing every place it looked.
std::filesystem::path find_nvrtc_worker();

class NvrtcWorkerPool {
 public:
  struct Request {
    std::string source;
    std::string name;                // the program's file name in diagnostics
    std::vector<std::string> args;   // NVRTC options
    std::vector<std::string> names;  // name expressions to lower
    double timeout_s = 120;
    uint64_t memory_limit_bytes = 0;  // RLIMIT_AS of the worker during the compile; 0: none
  };
  struct Result {
    enum class Status { kCompiled, kTimedOut, kOutOfMemory, kCrashed };
    Status status = Status::kCompiled;
    int nvrtc_result = 0;  // nvrtcResult (kCompiled)
    std::string result_text;
    std::string log;
    std::string cubin;  // empty unless the compile succeeded
    std::vector<std::optional<std::string>> lowered;
    std::string detail;  // kCrashed: how the worker ended ("SIGSEGV")
    double wall_ms = 0;
  };

  explicit NvrtcWorkerPool(std::filesystem::path executable);
  ~NvrtcWorkerPool();
  NvrtcWorkerPool(const NvrtcWorkerPool&) = delete;
  NvrtcWorkerPool& operator=(const NvrtcWorkerPool&) = delete;

  // Runs one compile in a worker. Throws SystemError when no worker can be
  // started or an NVRTC API call other than the compile itself fails: the
  // environment's problem, not the source's.
  Result compile(const Request& request);
  // Starts a worker now, so that the first compile finds NVRTC warm.
  void prestart();

  // Workers started so far, and how many of them were killed or lost
  // (timeouts, crashes, memory).
  int started() const;
  int replaced() const;
  // The NVRTC version the workers report ("13.0"), once one has started.
  std::string version() const;

  struct Worker;

 private:
  std::unique_ptr<Worker> take();
  void give_back(std::unique_ptr<Worker> worker);
  std::unique_ptr<Worker> spawn();

  std::filesystem::path executable_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Worker>> idle_;
  int started_ = 0;
  int replaced_ = 0;
  std::string version_;
};

}  // namespace kforge::env
