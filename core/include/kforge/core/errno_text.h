// The message of an errno value, safe on any thread: std::strerror may share
// one static buffer between threads (the Executor, the env server and the
// trajectory stream run several).
#pragma once

#include <errno.h>
#include <string.h>

#include <string>

namespace kforge {

// errno_text() describes errno as it is at the call.
inline std::string errno_text(int err = errno) {
  char buf[256];
  // GNU strerror_r: returns the message, in `buf` or a static string.
  return ::strerror_r(err, buf, sizeof(buf));
}

}  // namespace kforge
