#include "kforge/core/endpoint.h"

namespace kforge {

bool is_local_endpoint(const std::string& endpoint) {
  const size_t scheme_end = endpoint.find("://");
  if (scheme_end == std::string::npos) return false;
  const std::string scheme = endpoint.substr(0, scheme_end);
  if (scheme == "ipc" || scheme == "inproc") return true;
  if (scheme != "tcp") return false;
  std::string rest = endpoint.substr(scheme_end + 3);
  // "tcp://source;host:port" binds to `host`.
  if (size_t semi = rest.find(';'); semi != std::string::npos) rest = rest.substr(semi + 1);
  const size_t colon = rest.rfind(':');
  std::string host = colon == std::string::npos ? rest : rest.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host == "localhost" || host == "lo" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace kforge
