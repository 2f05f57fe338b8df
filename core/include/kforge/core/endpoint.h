// ZeroMQ endpoints: which ones only this host can reach. Every socket that
// binds or connects across hosts (the env server, the trajectory streams, the
// policy protocol) warns when it leaves the host without CurveZMQ.
#pragma once

#include <string>

namespace kforge {

// True for endpoints only this host can reach: tcp:// on a loopback address
// (127.0.0.0/8, ::1, localhost, lo), ipc:// and inproc://.
bool is_local_endpoint(const std::string& endpoint);

}  // namespace kforge
