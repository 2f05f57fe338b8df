// Errors for bad input. Every message names where the problem is (file, field
// path, line when the source is YAML) and what was expected, so a user can fix
// the input without reading our code.
#pragma once

#include <stdexcept>
#include <string>

namespace kforge {

// Raised for any rejected input: task, solution, config, action or wire message.
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& message) : std::runtime_error(message) {}
};

// Raised when the system itself cannot do what was asked (a missing compiler,
// a process that cannot be started). Never used for faults of candidate code,
// which are results, not errors.
class SystemError : public std::runtime_error {
 public:
  explicit SystemError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace kforge
