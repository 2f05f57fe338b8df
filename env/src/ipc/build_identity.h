// Which build a process of the evaluation stack is, and which version of each
// conversation it speaks (docs/execution.md, "Wire protocol").
//
// The executor, the judge and the runner are three executables that must come
// from one build: a judge of another build may read a frame differently (an
// older executor would take the judge's `waiting` frames for a reply). So the
// judge's `hello` and the runner's `started` carry `protocol` and `build`, and
// the reader refuses another protocol at start-up with a message naming both
// builds: the executor does not use the judge (its device is unusable, the
// reason in every report and in `kforge serve`'s start-up error), a judge
// does not use the runner (a system error before the candidate is loaded).
// Builds of one protocol work together; `build` only names them.
#pragma once

#include <string>

namespace kforge::ipc {

// Executor <-> judge (judge/judge_loop.h's table). 2: the judge sends
// `waiting` frames before its replies and `hello` names its protocol; a hello
// without `protocol` is read as 1, a build from before versions.
inline constexpr int kJudgeProtocolVersion = 2;
// Judge <-> runner (ipc/runner_protocol.h). 2: `started` names its
// protocol, `setup.limits` may carry `device_memory_bytes`.
inline constexpr int kRunnerProtocolVersion = 2;

// "kforge 0.1.0 (2b2a5be)": the project version and the commit this build was
// configured at (`git describe --always --dirty`; "unknown commit" without git).
const std::string& build_id();

// The protocol version this process announces: `real`, unless the environment
// variable `test_variable` (named KFORGE_TEST_ONLY_...) holds an integer. Only
// tests set it, to start a judge or a runner that claims another build; it
// changes nothing but the number announced.
int announced_protocol_version(int real, const char* test_variable);

inline constexpr const char* kTestOnlyJudgeProtocolVariable = "KFORGE_TEST_ONLY_JUDGE_PROTOCOL";
inline constexpr const char* kTestOnlyRunnerProtocolVariable = "KFORGE_TEST_ONLY_RUNNER_PROTOCOL";

// Why a peer that announced `peer_protocol` and `peer_build` (empty: it named
// none) cannot be used by this build speaking `our_protocol`, or "" when it
// can. `peer` names it ("the judge /path/kforge-judge"), `conversation` the
// channel ("judge protocol"), `fix` what to do.
std::string protocol_mismatch(const std::string& peer, const std::string& conversation, int peer_protocol,
                              const std::string& peer_build, int our_protocol, const std::string& fix);

}  // namespace kforge::ipc
