// SHA-256 of a byte string as lowercase hex: the compile cache's key, the
// synthesized tasks' content ids and the graph hashes of deduplication.
#pragma once

#include <string>
#include <string_view>

namespace kforge {

std::string sha256_hex(std::string_view data);

}  // namespace kforge
