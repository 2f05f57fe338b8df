// Where a reply of the env server goes.
#pragma once

#include <string>

namespace kforge::env::server {

// The client's ZeroMQ routing id, and whether it framed its request
// REQ-style with an empty delimiter (then the reply must be too).
struct Envelope {
  std::string routing_id;
  bool delimiter = false;
};

}  // namespace kforge::env::server
