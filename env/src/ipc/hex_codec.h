// Opaque binary handles as text, for handles that must travel inside a JSON
// message (the CUDA IPC handle of the arena rides in the runner's `setup`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kforge::ipc {

// Lower-case hex, two characters per byte.
std::string hex_encode(const void* data, size_t size);

// The bytes of `text`, which must be exactly `expected_size` bytes of hex
// (either case). Throws std::invalid_argument naming what is wrong: a handle
// of the wrong length or with a stray character must not map some other
// allocation.
std::vector<uint8_t> hex_decode(const std::string& text, size_t expected_size);

}  // namespace kforge::ipc
