// The GPU gate: a reader/writer lock over one GPU shared by every judge
// process that uses it (the lanes of a DevicePool, and any other kforge
// process on the machine), so that work of other candidates overlaps where it
// cannot change a measurement and never where it could (docs/execution.md,
// "Lanes and the GPU gate").
//
//   shared (reader):    runner start-up, arena set-up, verification, reference
//                       checks: any number of judges at once;
//   exclusive (writer): timing and profiling: one judge, nothing else on the GPU.
//
// Two lock files per GPU, locked with flock(2): `<key>.intent`, a turnstile,
// and `<key>.gpu`, the lock itself.
//   reader: intent SH, gpu SH, then intent released;
//   writer: intent EX, gpu EX, both held until the exclusive part ends.
// A writer that holds the turnstile lets no new reader in, so it waits only
// for the readers already inside (writer preference: timing is never
// starved by a stream of verifications). flock locks belong to the open file
// and vanish with the process, so a judge that dies (SIGKILL, a crash)
// releases its hold at once; a shared-memory rwlock would stay locked.
//
// One object per judge process, used from one thread.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "kforge/core/unique_fd.h"

namespace kforge::judge {

class GpuGate {
 public:
  enum class Hold { kNone, kShared, kExclusive };

  // A disabled gate: every call returns at once (the CPU backend, where each
  // process's CPU time is its clock and no gate is needed).
  GpuGate() = default;
  // Opens (creating) <dir>/<key>.intent and <dir>/<key>.gpu; `dir` is
  // created world-writable with the sticky bit, like /tmp, so that judges of
  // other users on the machine share the gate. Throws SystemError.
  GpuGate(const std::filesystem::path& dir, const std::string& key);
  ~GpuGate() = default;
  GpuGate(GpuGate&&) = default;
  GpuGate& operator=(GpuGate&&) = default;

  bool enabled() const { return gpu_.valid(); }
  Hold hold() const { return hold_; }

  // Becomes a reader and returns the milliseconds waited. From kExclusive
  // this is a downgrade that no writer can slip into (the writer still holds
  // the turnstile while the lock is converted).
  double shared();
  // Becomes the writer and returns the milliseconds waited. A share held is
  // dropped first (a reader must never wait for the writer lock while
  // holding a share: two such readers would wait for each other).
  double exclusive();
  void release();

  // While a call above waits for another process's hold, `notice` is called
  // from a helper thread every `every_ms` with the milliseconds waited since
  // the previous call (never when the lock is free at once). The judge tells
  // the executor it is queued, so that the wait, other candidates' timing,
  // is not counted against its request (judge_loop.cpp). An empty `notice`
  // turns it off. `notice` must not throw.
  void set_wait_notice(std::function<void(double waited_ms)> notice, double every_ms);

  // "<key>" with every character outside [A-Za-z0-9._-] replaced by '_'.
  static std::string file_key(const std::string& key);

 private:
  void lock(const UniqueFd& fd, int operation, const char* what);

  UniqueFd intent_, gpu_;
  Hold hold_ = Hold::kNone;
  std::function<void(double)> notice_;
  double notice_every_ms_ = 0;
};

}  // namespace kforge::judge
