// SHA-256 of a byte string as lowercase hex: the compile cache's key.
#pragma once

#include <string>

namespace kforge::env {

std::string sha256_hex(const std::string& data);

}  // namespace kforge::env
