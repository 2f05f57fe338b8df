// Exploit: tampering with harness state while loading: a namespace-scope
// object's constructor (accepted by the load checks) writes {"type": 7} to
// the control socket before the runner answers `setup`.
// Must be caught by: the typed check of every reply on arrival; the frame
// comes after the runner said `loading`, so it is the candidate's: violation
// `harness_tamper`, not a system error.
// Task: chain.
#include <kforge/kernel_abi.h>

#include "control_socket.h"

namespace {

struct Forger {
  Forger() {
    static const unsigned char body[] = {0x81, 0xa4, 't', 'y', 'p', 'e', 0x07};
    kf_control_frame(body, sizeof(body));
  }
};

Forger g_forger;

}  // namespace

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  kf_chain(in, out);
  return 0;
}
