#include "ipc/build_identity.h"

#include <cerrno>
#include <climits>
#include <cstdlib>

#ifndef KFORGE_BUILD_ID
#define KFORGE_BUILD_ID "kforge (unknown build)"
#endif

namespace kforge::ipc {

const std::string& build_id() {
  static const std::string kId = KFORGE_BUILD_ID;
  return kId;
}

int announced_protocol_version(int real, const char* test_variable) {
  const char* text = std::getenv(test_variable);
  if (text == nullptr || *text == '\0') return real;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < INT_MIN || value > INT_MAX) return real;
  return static_cast<int>(value);
}

std::string protocol_mismatch(const std::string& peer, const std::string& conversation, int peer_protocol,
                              const std::string& peer_build, int our_protocol, const std::string& fix) {
  if (peer_protocol == our_protocol) return "";
  return peer + " is another build: " + (peer_build.empty() ? "a build from before protocol versions" : peer_build) +
         ", speaking " + conversation + " " + std::to_string(peer_protocol) + ", while this one is " + build_id() +
         ", speaking " + conversation + " " + std::to_string(our_protocol) + ": " + fix;
}

}  // namespace kforge::ipc
