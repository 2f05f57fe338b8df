// kforge keygen: a CurveZMQ key pair for the trajectory stream (or any of our
// sockets that leave the host), as certificate files pyzmq and czmq read.
#include <iostream>
#include <memory>

#include "commands.h"
#include "kforge/rollout/stream/curve.h"

namespace kforge::cli {
namespace {

int run_keygen(const std::string& out) {
  const rollout::CurveKeyPair keys = rollout::generate_curve_keypair();
  rollout::write_curve_certificates(out, keys);
  const nlohmann::ordered_json summary = {{"public_key", keys.public_key},
                                          {"public_certificate", out + ".key"},
                                          {"secret_certificate", out + ".key_secret"}};
  std::cout << summary.dump() << std::endl;
  return kExitOk;
}

}  // namespace

void add_keygen_command(CLI::App& app, CommandFn* selected) {
  auto out = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "keygen",
      "Make a CurveZMQ key pair: PATH.key (public: give it to peers; a receiver lists its senders' in "
      "--curve-clients) and PATH.key_secret (mode 0600). Prints the public key as JSON. See trainer_bridge/STREAM.md");
  cmd->add_option("--out", *out, "Path and name of the pair, e.g. keys/trainer")->required();
  cmd->callback([out, selected] { *selected = [out] { return run_keygen(*out); }; });
}

}  // namespace kforge::cli
