// The judge's side of the executor <-> judge conversation (wire.h frames on
// fd 3):
//
//   executor -> judge                 judge -> executor
//   (on start, unprompted)            hello  {ok, backend, device, pid, error?}
//   eval      {id, request}           report {id, report, runner_faults, evaluations}
//   reference {id, request}           reference_report {id, report, reference_requests}
//   health    {}                      health {pid, open_fds, memfds, spare_runners, scratch_entries, ...}
//   shutdown {}                       (exits)
//
// Requests are served one at a time, so a reference being timed never
// overlaps an evaluation; a spare runner is started after each report is sent.
#pragma once

#include <filesystem>
#include <string>

namespace kforge::judge {

struct JudgeServerConfig {
  std::string backend = "cpu";
  int device = 0;
  std::filesystem::path runner;   // kforge-runner
  std::filesystem::path scratch;  // runner scratch dirs are created here
};

// Serves until the executor closes the channel or says shutdown; returns the
// process exit code.
int serve_executor(const JudgeServerConfig& config, int control_fd);

}  // namespace kforge::judge
