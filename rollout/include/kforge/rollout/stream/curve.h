// CurveZMQ for the trajectory stream (and any other socket of ours that
// leaves the host): key pairs, the certificate files they live in, and where
// each end takes its keys from.
//
// Keys are Z85 text, 40 characters (ZeroMQ's encoding of 32 bytes). A key
// pair is stored as two certificate files in the format that czmq and pyzmq
// (`zmq.auth.load_certificate`) read:
//   NAME.key         the public key only: hand it to the peers
//   NAME.key_secret  public and secret key (mode 0600): keep it
// `kforge keygen --out DIR/NAME` writes them.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kforge::rollout {

struct CurveKeyPair {
  std::string public_key;  // Z85
  std::string secret_key;  // Z85; empty when loaded from a public certificate
};

// SystemError when libzmq was built without CURVE.
CurveKeyPair generate_curve_keypair();
// The public key of a secret key (Z85). InputError for a malformed key.
std::string curve_public_key(const std::string& secret_key);
// True for 40 characters that decode as Z85.
bool is_z85_key(const std::string& key);

// Writes `<base>.key` and `<base>.key_secret` (refuses to overwrite).
void write_curve_certificates(const std::filesystem::path& base, const CurveKeyPair& keys);
// Reads a certificate file; InputError naming the file and what is missing.
CurveKeyPair load_curve_certificate(const std::filesystem::path& file);
// The public keys of every `*.key` file in a directory, or of one file.
std::vector<std::string> load_authorized_keys(const std::filesystem::path& dir_or_file);
// A key given as Z85 text or as the path of a certificate file; `want_secret`
// picks which key of the file. InputError naming `what` when neither.
std::string resolve_curve_key(const std::string& text_or_file, bool want_secret, const std::string& what);

// A sender (client) end: on when server_public_key is set. Without a secret
// key of its own the sender makes a fresh pair at start (the receiver then
// accepts it only when it authorizes any client).
struct CurveClientOptions {
  std::string server_public_key;
  std::string secret_key;
  bool enabled() const { return !server_public_key.empty(); }
};

// A receiver (server) end: on when secret_key is set. With authorized_keys
// empty, any client that knows the server's public key may connect
// (traffic is still encrypted); otherwise only those public keys.
struct CurveServerOptions {
  std::string secret_key;
  std::vector<std::string> authorized_keys;
  bool enabled() const { return !secret_key.empty(); }
};

// From command-line values (Z85 or file; empty: unset) with the environment
// as fallback: KFORGE_CURVE_SERVER_KEY (the receiver's public key),
// KFORGE_CURVE_SECRET_KEY (this end's secret key), KFORGE_CURVE_CLIENTS (a
// directory of authorized client *.key files).
CurveClientOptions curve_client_options(const std::string& server_key, const std::string& secret_key);
CurveServerOptions curve_server_options(const std::string& secret_key, const std::string& authorized_clients);

}  // namespace kforge::rollout
