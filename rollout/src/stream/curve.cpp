#include "kforge/rollout/stream/curve.h"

#include <sys/stat.h>
#include <zmq.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include "kforge/core/error.h"

namespace kforge::rollout {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMaxCertificateBytes = 65536;

std::string env_or(const char* name, const std::string& value) {
  if (!value.empty()) return value;
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string read_small_file(const fs::path& file) {
  std::error_code ec;
  const uint64_t size = fs::file_size(file, ec);
  if (ec) throw InputError("curve: cannot read " + file.string() + ": " + ec.message());
  if (size > kMaxCertificateBytes) {
    throw InputError("curve: " + file.string() + " is " + std::to_string(size) +
                     " bytes; a certificate file is a few hundred");
  }
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) throw InputError("curve: cannot read " + file.string());
  return text.str();
}

// The quoted value of `name = "..."` on a line of a certificate, or "".
std::string certificate_value(const std::string& text, const std::string& name) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    if (line.compare(start, name.size(), name) != 0) continue;
    const size_t eq = line.find('=', start + name.size());
    if (eq == std::string::npos) continue;
    std::string value = line.substr(eq + 1);
    const auto strip = [](char c) { return c == ' ' || c == '\t' || c == '"' || c == '\'' || c == '\r'; };
    while (!value.empty() && strip(value.front())) value.erase(value.begin());
    while (!value.empty() && strip(value.back())) value.pop_back();
    return value;
  }
  return "";
}

void write_file(const fs::path& path, const std::string& text, mode_t mode) {
  std::error_code ec;
  if (fs::exists(path, ec)) throw InputError("keygen: " + path.string() + " exists; it is not overwritten");
  {
    std::ofstream out(path, std::ios::binary);
    out << text;
    if (!out) throw SystemError("keygen: cannot write " + path.string());
  }
  ::chmod(path.c_str(), mode);
}

std::string certificate_text(const CurveKeyPair& keys, bool with_secret) {
  char when[64] = {};
  const std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  std::string text = "#   KernelForge CurveZMQ " + std::string(with_secret ? "secret" : "public") +
                     " certificate, made by `kforge keygen` on " + when + "\n";
  text += with_secret ? "#   Keep this file private: it holds the secret key.\n"
                      : "#   Give this file to the peers that must recognize this key.\n";
  text += "\nmetadata\ncurve\n    public-key = \"" + keys.public_key + "\"\n";
  if (with_secret) text += "    secret-key = \"" + keys.secret_key + "\"\n";
  return text;
}

}  // namespace

bool is_z85_key(const std::string& key) {
  if (key.size() != 40) return false;
  uint8_t raw[32];
  return zmq_z85_decode(raw, key.c_str()) != nullptr;
}

CurveKeyPair generate_curve_keypair() {
  char pub[41] = {}, sec[41] = {};
  if (zmq_curve_keypair(pub, sec) != 0) {
    throw SystemError(std::string("curve: cannot make a key pair (libzmq without CURVE support?): ") +
                      zmq_strerror(zmq_errno()));
  }
  return {pub, sec};
}

std::string curve_public_key(const std::string& secret_key) {
  if (!is_z85_key(secret_key)) throw InputError("curve: a secret key must be 40 characters of Z85 text");
  char pub[41] = {};
  if (zmq_curve_public(pub, secret_key.c_str()) != 0) {
    throw InputError(std::string("curve: cannot derive the public key: ") + zmq_strerror(zmq_errno()));
  }
  return pub;
}

void write_curve_certificates(const fs::path& base, const CurveKeyPair& keys) {
  if (!base.parent_path().empty()) {
    std::error_code ec;
    fs::create_directories(base.parent_path(), ec);
    if (ec) throw SystemError("keygen: cannot create " + base.parent_path().string() + ": " + ec.message());
  }
  const fs::path pub = base.string() + ".key";
  const fs::path sec = base.string() + ".key_secret";
  std::error_code ec;
  if (fs::exists(pub, ec) || fs::exists(sec, ec)) {
    throw InputError("keygen: " + pub.string() + " or " + sec.string() + " exists; they are not overwritten");
  }
  write_file(sec, certificate_text(keys, true), 0600);
  write_file(pub, certificate_text(keys, false), 0644);
}

CurveKeyPair load_curve_certificate(const fs::path& file) {
  const std::string text = read_small_file(file);
  CurveKeyPair keys;
  keys.public_key = certificate_value(text, "public-key");
  keys.secret_key = certificate_value(text, "secret-key");
  if (!is_z85_key(keys.public_key)) {
    throw InputError("curve: " + file.string() +
                     " has no valid public-key line (public-key = \"<40 Z85 characters>\"); make one with "
                     "`kforge keygen`");
  }
  if (!keys.secret_key.empty() && !is_z85_key(keys.secret_key)) {
    throw InputError("curve: " + file.string() + ": the secret-key is not 40 characters of Z85 text");
  }
  return keys;
}

std::vector<std::string> load_authorized_keys(const fs::path& dir_or_file) {
  std::error_code ec;
  std::vector<std::string> keys;
  if (fs::is_directory(dir_or_file, ec)) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir_or_file)) {
      if (entry.path().extension() == ".key") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) keys.push_back(load_curve_certificate(f).public_key);
    if (keys.empty()) {
      throw InputError("curve: " + dir_or_file.string() +
                       " holds no *.key file; put the public certificates of the senders there");
    }
  } else {
    keys.push_back(load_curve_certificate(dir_or_file).public_key);
  }
  return keys;
}

std::string resolve_curve_key(const std::string& text_or_file, bool want_secret, const std::string& what) {
  if (is_z85_key(text_or_file)) return text_or_file;
  std::error_code ec;
  if (!fs::is_regular_file(text_or_file, ec)) {
    throw InputError("curve: " + what + " \"" + text_or_file.substr(0, 80) +
                     "\" is neither a 40-character Z85 key nor a certificate file");
  }
  const CurveKeyPair keys = load_curve_certificate(text_or_file);
  if (want_secret && keys.secret_key.empty()) {
    throw InputError("curve: " + what + ": " + text_or_file +
                     " holds no secret key (give the .key_secret file, not the public .key)");
  }
  return want_secret ? keys.secret_key : keys.public_key;
}

CurveClientOptions curve_client_options(const std::string& server_key, const std::string& secret_key) {
  CurveClientOptions o;
  const std::string server = env_or("KFORGE_CURVE_SERVER_KEY", server_key);
  const std::string secret = env_or("KFORGE_CURVE_SECRET_KEY", secret_key);
  if (server.empty()) {
    if (!secret.empty()) {
      throw InputError(
          "curve: a secret key was given but not the receiver's public key (--curve-server-key or "
          "KFORGE_CURVE_SERVER_KEY); both are needed to use CurveZMQ");
    }
    return o;
  }
  o.server_public_key = resolve_curve_key(server, false, "the receiver's public key");
  if (!secret.empty()) o.secret_key = resolve_curve_key(secret, true, "the secret key");
  return o;
}

CurveServerOptions curve_server_options(const std::string& secret_key, const std::string& authorized_clients) {
  CurveServerOptions o;
  const std::string secret = env_or("KFORGE_CURVE_SECRET_KEY", secret_key);
  const std::string clients = env_or("KFORGE_CURVE_CLIENTS", authorized_clients);
  if (secret.empty()) {
    if (!clients.empty()) {
      throw InputError(
          "curve: authorized client keys were given but no secret key for the receiver "
          "(--curve-secret or KFORGE_CURVE_SECRET_KEY)");
    }
    return o;
  }
  o.secret_key = resolve_curve_key(secret, true, "the secret key");
  if (!clients.empty()) o.authorized_keys = load_authorized_keys(clients);
  return o;
}

}  // namespace kforge::rollout
