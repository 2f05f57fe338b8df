// strerror for code that may run on several threads (the Executor lives in a
// multi-threaded host): std::strerror may share one static buffer.
#pragma once

#include <string.h>

#include <string>

namespace kforge::exec {

inline std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r: returns the message, in `buf` or a static string.
  return ::strerror_r(err, buf, sizeof(buf));
}

}  // namespace kforge::exec
